/* A change the host cannot apply safely stops its partition only
 * (docs/operations.md, "A stopped partition"), against the real broker, an
 * SQLite file and PostgreSQL: Debezium change events in JsonConverter's
 * envelope, a mapping without a column list, a topic of two partitions.
 * One ctest test per target, e2e.cdc_partition_stop.<sqlite|postgres>:
 *   partition 0 narrows a field (double to int32) at offset O while the
 *   host runs, after a record and a dead letter of its own in the same
 *   batch, with records of partition 1. Partition 0's marker ends at O
 *   exactly (its earlier record and dead letter are in, nothing at or past
 *   O), partition 1's records of that batch and those produced after the
 *   stop are all committed, records produced to partition 0 while
 *   stopped show in its high watermark (not applied), the status file and
 *   `tidemark status` (exit 3) say DEGRADED naming partition 0, O, the
 *   field and both types (and the partition's own `stopped` line);
 *   SIGTERM exits 0. After the operator changes
 *   the table and restarts, O and what follows go in, nothing lost.
 * e2e.cdc_partition_stop.sqlite_cut_rereads: the batch before O is
 *   committed while the test holds SQLite's write lock, so its commit runs
 *   out of its deadline and the batch is cut in half and read again (the
 *   log says so, else inconclusive): partition 0, paused for its stop, is
 *   read again up to O and no further; once the lock goes its marker ends
 *   at O exactly, with its record and dead letter. */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "cdc_common.h"

#define SCHEMA_MAPPING "{\"mode\": \"json\", \"format\": \"debezium\"}"

#define F(name, type, opt)                                                     \
    "{\"field\":\"" name "\",\"type\":\"" type "\",\"optional\":" opt "}"
#define P_DOUBLE F("id", "int32", "false") "," F("p", "double", "true")
#define P_INT    F("id", "int32", "false") "," F("p", "int32", "true")

/* Where partition 0 stops: after ids 1 and 2 (first run), id 3 and a
 * dead letter. */
#define STOP_AT 4

/* A create of key ID with the row schema's fields ROWFIELDS and payload
 * {"id": ID, "p": P}, in the envelope, its key enveloped too. */
static void create(rd_kafka_t *p, const target *t, int32_t partition, int id,
                   const char *rowfields, const char *pvalue) {
    char key[256], after[256];
    snprintf(after, sizeof after, "{\"id\":%d,\"p\":%s}", id, pvalue);
    schema_create(p, t, partition, enveloped_id_key(key, sizeof key, id),
                  rowfields, after);
}

static int64_t marker_of(const target *t, int32_t partition) {
    const char *q = "SELECT coalesce(max(next_offset), -1) FROM "
                    "tidemark_markers WHERE connector = '%s' AND topic = '%s' "
                    "AND \"partition\" = %d";
    return t->pg ? h_pg_int(q, t->connector, t->topic, (int)partition)
                 : h_sqlf(t->db, q, t->connector, t->topic, (int)partition);
}

static int64_t high_of(const target *t, int32_t partition) {
    int64_t lo, hi;
    h_watermarks(t->topic, partition, &lo, &hi);
    return hi;
}

/* Until partition PARTITION's marker is WANT (fails after 60 s). */
static void wait_marker(const target *t, int32_t partition, int64_t want) {
    int64_t t0 = h_now_ms(), at;
    while ((at = marker_of(t, partition)) != want) {
        H_CHECK(h_now_ms() - t0 < 60000,
                "partition %d's marker is at %lld, want %lld", (int)partition,
                (long long)at, (long long)want);
        h_sleep_ms(100);
    }
}

static int64_t rows(const target *t, const char *where) {
    return count_rows(t, "%.0dWHERE %s", 0, where);
}

/* What the operator does: p becomes an integer column, the old values
 * kept in p_double. */
static void fix_table(const target *t) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "ALTER TABLE \"%s\" RENAME COLUMN p TO p_double; ALTER TABLE "
             "\"%s\" ADD COLUMN p %s",
             t->table, t->table, t->pg ? "bigint" : "INTEGER");
    if (t->pg) {
        pg_do(sql);
        return;
    }
    sqlite3 *db = NULL;
    char *msg = NULL;
    H_CHECK(sqlite3_open(t->db, &db) == SQLITE_OK &&
                sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK,
            "inconclusive: changing the table: %s", msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(db);
}

/* Two records in each partition, the host started on CFG and caught
 * up. */
static pid_t first_run(const target *t, const char *cfg) {
    h_create_topic(t->topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    create(p, t, 0, 1, P_DOUBLE, "1.5");
    create(p, t, 0, 2, P_DOUBLE, "2.5");
    create(p, t, 1, 101, P_DOUBLE, "101.5");
    create(p, t, 1, 102, P_DOUBLE, "102.5");
    h_flush(p);
    rd_kafka_destroy(p);
    pid_t pid = h_spawn(cfg, "run.log");
    wait_caught_up(t);
    H_CHECK(marker_of(t, 0) == 2 && marker_of(t, 1) == 2,
            "inconclusive: the first records are not at offsets 0 and 1 of "
            "each partition");
    return pid;
}

/* Partition 0 gets a record, an event without a schema (a dead letter),
 * then the source narrows p (offset STOP_AT) and keeps it narrowed;
 * partition 1 gets three records at the same time. */
static void narrow(const target *t) {
    rd_kafka_t *p = h_producer(NULL, NULL);
    /* Partition 1's records with them: in the batch the stop drops. */
    for (int id = 103; id <= 105; id++) {
        char v[16];
        snprintf(v, sizeof v, "%d.5", id);
        create(p, t, 1, id, P_DOUBLE, v);
    }
    create(p, t, 0, 3, P_DOUBLE, "3.5");
    const char *bare = "{\"before\":null,\"after\":{\"id\":9},\"op\":\"c\"}";
    h_produce_async(p, t->topic, 0, "{\"id\":9}", bare, strlen(bare));
    create(p, t, 0, 4, P_INT, "4");
    create(p, t, 0, 5, P_INT, "5");
    h_flush(p);
    rd_kafka_destroy(p);
    H_CHECK(high_of(t, 0) == STOP_AT + 2,
            "inconclusive: partition 0 ends at %lld, want %d",
            (long long)high_of(t, 0), STOP_AT + 2);
}

/* Partition 1 goes on: records produced to it now, and those produced
 * with the stop, all go in. */
static void partition_1_flows(const target *t) {
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int id = 106; id <= 110; id++) {
        char v[16];
        snprintf(v, sizeof v, "%d.5", id);
        create(p, t, 1, id, P_DOUBLE, v);
    }
    h_flush(p);
    rd_kafka_destroy(p);
    H_CHECK(high_of(t, 1) == 10, "inconclusive: partition 1 ends at %lld",
            (long long)high_of(t, 1));
    wait_marker(t, 1, 10);
    H_CHECK(rows(t, "id BETWEEN 101 AND 110") == 10,
            "partition 1's rows: %lld of 10",
            (long long)rows(t, "id BETWEEN 101 AND 110"));
}

/* Partition 0 at STOP_AT exactly: its record and dead letter before it
 * in, nothing at or past it. */
static void partition_0_stopped(const target *t) {
    H_CHECK(rows(t, "id IN (1, 2, 3)") == 3 &&
                rows(t, "id >= 4 AND id < 9") == 0,
            "partition 0's rows: %lld of ids 1-3 (want 3), %lld of 4-8 "
            "(want 0)",
            (long long)rows(t, "id IN (1, 2, 3)"),
            (long long)rows(t, "id >= 4 AND id < 9"));
    H_CHECK(dead_letters(t, "schema_mismatch") == 1,
            "the dead letter before the stop: %lld, want 1",
            (long long)dead_letters(t, "schema_mismatch"));
    H_CHECK(marker_of(t, 0) == STOP_AT,
            "partition 0's marker moved to %lld while stopped",
            (long long)marker_of(t, 0));
}

static void run_partition_stops(int pg) {
    target t;
    init_target_as(&t, pg, "partstop");
    const char *cfg = config_file(&t, SCHEMA_MAPPING, "partstop.json", 40, 500);
    pid_t pid = first_run(&t, cfg);
    narrow(&t);
    const char *field = "field p changed type: the target column is float "
                        "(from double), the event's schema says int (int32)";
    char where[128];
    snprintf(where, sizeof where, "[0] stopped at offset %d", STOP_AT);
    int64_t t0 = h_now_ms();
    for (;;) {
        const char *st = h_status_text(t.connector);
        if (strstr(st, where) && strstr(st, field) &&
            strstr(st, "\"DEGRADED\""))
            break;
        H_CHECK(h_now_ms() - t0 < 60000,
                "the status never said DEGRADED, '%s' and the field; it "
                "says: %s",
                where, st);
        h_sleep_ms(100);
    }
    h_step("status file: DEGRADED, %s: %s", where, field);
    /* Partition 0's record and dead letter before the stop go in. */
    wait_marker(&t, 0, STOP_AT);
    /* More of partition 0 while it is stopped: its lag grows in the
     * status (the host asks the broker: it fetches nothing there). */
    rd_kafka_t *p = h_producer(NULL, NULL);
    create(p, &t, 0, 6, P_INT, "6");
    create(p, &t, 0, 7, P_INT, "7");
    h_flush(p);
    rd_kafka_destroy(p);
    H_CHECK(high_of(&t, 0) == STOP_AT + 4,
            "inconclusive: partition 0 ends at %lld, want %d",
            (long long)high_of(&t, 0), STOP_AT + 4);
    t0 = h_now_ms();
    while (!strstr(h_status_text(t.connector), "\"high_watermark\": 8,")) {
        H_CHECK(h_now_ms() - t0 < 30000,
                "the status never showed partition 0's high watermark 8: %s",
                h_status_text(t.connector));
        h_sleep_ms(100);
    }
    partition_1_flows(&t);
    partition_0_stopped(&t);
    h_step("partition 0 at %d exactly with its dead letter; partition 1's "
           "later records all in",
           STOP_AT);
    const char *args[] = {"status", "--config", cfg, NULL};
    int rc = h_tidemark("status.out", args);
    const char *out = h_read_file("status.out");
    char line[256];
    snprintf(line, sizeof line, "[0] at offset %d: %.60s", STOP_AT, field);
    H_CHECK(rc == 3 && strstr(out, "DEGRADED") && strstr(out, where) &&
                strstr(out, field) && strstr(out, line),
            "`tidemark status` exit %d (want 3) without DEGRADED, '%s', "
            "the field or the partition's line '%s':\n%s",
            rc, where, line, out);
    h_step("`tidemark status`: exit 3, DEGRADED, the partition, offset and "
           "field");
    rc = h_stop(pid, SIGTERM, 30000, NULL);
    H_CHECK(rc == 0, "SIGTERM: exit %d, want 0", rc);
    H_CHECK(marker_of(&t, 0) == STOP_AT, "partition 0's marker at %lld",
            (long long)marker_of(&t, 0));
    h_step("SIGTERM: exit 0, partition 0 still at %d", STOP_AT);
    fix_table(&t);
    run_until_caught_up(&t, cfg, "run2.log");
    H_CHECK(rows(&t, "id >= 4 AND id < 9 AND p = id") == 4 &&
                rows(&t, "1 = 1") == 17,
            "after the fix: %lld of ids 4-7 with p, %lld rows (want 4, 17)",
            (long long)rows(&t, "id >= 4 AND id < 9 AND p = id"),
            (long long)rows(&t, "1 = 1"));
    check_verify(cfg);
    h_step("after the table was changed: offset %d and on went in, nothing "
           "lost; verify passes",
           STOP_AT);
}

static void run_cut_rereads(void) {
    target t;
    init_target_as(&t, 0, "partcut");
    /* The commit gives up at 1.5 s, well before SQLite's 5 s busy
     * timeout: the batch held by the lock is cut in half. */
    config_file(&t, SCHEMA_MAPPING, "partcut.json", 40, 500);
    const char *text = h_read_file("partcut.json");
    const char *batch = "\"max_wait_ms\": 500}";
    const char *at = strstr(text, batch);
    H_CHECK(at, "inconclusive: the config has no batch settings: %s", text);
    char cfgtext[8192];
    snprintf(cfgtext, sizeof cfgtext,
             "%.*s\"max_wait_ms\": 500, \"commit_timeout_ms\": 1500}%s",
             (int)(at - text), text, at + strlen(batch));
    const char *cfg = h_write_file("partcut.json", cfgtext);
    pid_t pid = first_run(&t, cfg);
    sqlite3 *lock = sqlite_write_lock(&t);
    narrow(&t);
    int64_t t0 = h_now_ms();
    while (!strstr(h_read_file("run.log"), "past its deadline with")) {
        H_CHECK(h_now_ms() - t0 < 60000,
                "inconclusive: no batch was cut in half while the lock was "
                "held");
        h_sleep_ms(100);
    }
    H_CHECK(marker_of(&t, 0) == 2,
            "inconclusive: partition 0 moved under the lock");
    sqlite_write_unlock(lock);
    h_step("a batch of partition 0 before the stop was cut in half under "
           "the lock");
    wait_marker(&t, 0, STOP_AT);
    partition_1_flows(&t);
    partition_0_stopped(&t);
    H_CHECK(strstr(h_status_text(t.connector), "[0] stopped at offset 4"),
            "the status does not name the stop: %s",
            h_status_text(t.connector));
    int rc = h_stop(pid, SIGTERM, 30000, NULL);
    H_CHECK(rc == 0, "SIGTERM: exit %d, want 0", rc);
    H_CHECK(marker_of(&t, 0) == STOP_AT, "partition 0's marker at %lld",
            (long long)marker_of(&t, 0));
    h_step("read again after the cut: partition 0 at %d exactly with its "
           "record and dead letter, partition 1 flowing",
           STOP_AT);
}

static void scenario_sqlite(void) {
    run_partition_stops(0);
}
static void scenario_postgres(void) {
    run_partition_stops(1);
}

static const h_scenario SCENARIOS[] = {
    {"sqlite", scenario_sqlite},
    {"postgres", scenario_postgres},
    {"sqlite_cut_rereads", run_cut_rereads},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "cdc_partition_stop_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
