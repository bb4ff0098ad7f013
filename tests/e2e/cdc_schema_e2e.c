/* Columns from the events' schemas (docs/configuration.md, "Columns from
 * the event's schema") against the real broker, an SQLite file
 * and PostgreSQL: Debezium change events in JsonConverter's envelope, a
 * mapping without a column list. One ctest test per scenario,
 * e2e.cdc_schema.<sqlite|postgres>_<scenario>:
 *   columns: the table made from the first events' schema; a
 *     column added at the source mid-stream (rows before it null, after it
 *     filled); an event without a schema a dead letter schema_mismatch.
 *   added_column_killed: the host killed at after_effects of the
 *     batch that first carries a new column: neither the column nor the
 *     rows are there, the markers did not move; restarted, both are.
 *   narrowed_type_stops: a field narrowed from double to int32 while
 *     running stops its partition (the connector DEGRADED, `tidemark
 *     status` exit 3) with the partition, offset, field and both types,
 *     the marker at the event; after the operator changes the table and
 *     restarts, the event goes in, nothing lost
 *     (cdc_partition_stop_e2e.c: the other partition goes on).
 *   type_change_restart: a field that becomes a Connect Timestamp stops
 *     its partition; restarted as it is (what the shipped unit's
 *     Restart=on-failure does), the sink compares the batch's columns
 *     with the table's declared ones and refuses it: the connector stops,
 *     nothing committed (SQLite's affinity, INTEGER for int and timestamp
 *     alike, let epoch milliseconds and microseconds into one column).
 *   optional_restart: a required field that becomes optional (and null)
 *     stops its partition; restarted as it is, the sink refuses because
 *     the table says NOT NULL, instead of turning the events into dead
 *     letters "rejected". */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "cdc_common.h"

#define SCHEMA_MAPPING "{\"mode\": \"json\", \"format\": \"debezium\"}"

#define F(name, type, opt)                                                     \
    "{\"field\":\"" name "\",\"type\":\"" type "\",\"optional\":" opt "}"
#define OLD_ROW  F("id", "int32", "false") "," F("name", "string", "true")
#define NEW_ROW  OLD_ROW "," F("note", "string", "true")
#define P_DOUBLE F("id", "int32", "false") "," F("p", "double", "true")
#define P_INT    F("id", "int32", "false") "," F("p", "int32", "true")

/* A create of key id with the row schema's fields ROWFIELDS and payload
 * AFTER, in the envelope, its key enveloped too, into partition 0. */
static void create(rd_kafka_t *p, const target *t, int id,
                   const char *rowfields, const char *after) {
    char key[256];
    schema_create(p, t, 0, enveloped_id_key(key, sizeof key, id), rowfields,
                  after);
}

static void creates(const target *t, int from, int to, const char *rowfields,
                    int with_note) {
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int id = from; id < to; id++) {
        char after[256];
        if (with_note)
            snprintf(after, sizeof after,
                     "{\"id\":%d,\"name\":\"n%d\",\"note\":\"x%d\"}", id, id,
                     id);
        else
            snprintf(after, sizeof after, "{\"id\":%d,\"name\":\"n%d\"}", id,
                     id);
        create(p, t, id, rowfields, after);
    }
    h_flush(p);
    rd_kafka_destroy(p);
}

static int64_t has_column(const target *t, const char *column) {
    if (t->pg)
        return h_pg_int("SELECT count(*) FROM information_schema.columns "
                        "WHERE table_name = '%s' AND column_name = '%s'",
                        t->table, column);
    return h_sqlf(t->db,
                  "SELECT count(*) FROM pragma_table_info('%s') WHERE name = "
                  "'%s'",
                  t->table, column);
}

/* The target's rows matching WHERE ("" for all). */
static int64_t rows(const target *t, const char *where) {
    char w[512];
    snprintf(w, sizeof w, "%s%s", *where ? "WHERE " : "", where);
    return count_rows(t, "%.0d%s", 0, w);
}

static void run_columns(int pg) {
    target t;
    init_target(&t, pg);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    creates(&t, 1, 4, OLD_ROW, 0);
    creates(&t, 4, 7, NEW_ROW, 1); /* ALTER TABLE ... ADD COLUMN note */
    rd_kafka_t *p = h_producer(NULL, NULL);
    const char *bare = "{\"before\":null,\"after\":{\"id\":9},\"op\":\"c\"}";
    h_produce_async(p, t.topic, 0, "{\"id\":9}", bare, strlen(bare));
    h_flush(p);
    rd_kafka_destroy(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    run_until_caught_up(&t, cfg, "run.log");
    H_CHECK(has_column(&t, "id") && has_column(&t, "name") &&
                has_column(&t, "note"),
            "the table lacks a column of the events' schemas");
    H_CHECK(rows(&t, "") == 6, "%lld rows, want 6", (long long)rows(&t, ""));
    H_CHECK(rows(&t, "id < 4 AND note IS NULL AND name = 'n' || id") == 3,
            "the rows before the column are not null in it");
    H_CHECK(rows(&t, "id >= 4 AND note = 'x' || id AND name = 'n' || id") == 3,
            "the rows after the column do not carry it");
    H_CHECK(dead_letters(&t, "schema_mismatch") == 1,
            "the event without a schema is not one dead letter "
            "schema_mismatch (%lld)",
            (long long)dead_letters(&t, "schema_mismatch"));
    check_verify(cfg);
    h_step("table made from the schema, note added mid-stream, the bare "
           "event a dead letter; verify passes");
}

static void run_added_column_killed(int pg) {
    target t;
    init_target(&t, pg);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    creates(&t, 1, 4, OLD_ROW, 0);
    const char *cfg =
        config_file(&t, SCHEMA_MAPPING, "cdc.json", 40, ONE_BATCH_WAIT_MS);
    run_until_caught_up(&t, cfg, "run.log");
    H_CHECK(has_column(&t, "name") && !has_column(&t, "note"),
            "inconclusive: the first run's table is not (id, name)");
    creates(&t, 4, 7, NEW_ROW, 1);
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    const char *env[] = {"TIDEMARK_FAULT=after_effects", fp.fd_env, NULL};
    pid_t pid = h_spawn_env(cfg, "run2.log", env);
    h_fault_wait(&fp, "after_effects", pid, 0);
    int rc = h_stop(pid, 0, 10000, NULL);
    H_CHECK(rc == 128 + SIGKILL, "the host exited %d, not by SIGKILL", rc);
    H_CHECK(marker_sum(&t) == 3,
            "inconclusive: the markers are at %lld after the kill, want 3",
            (long long)marker_sum(&t));
    H_CHECK(!has_column(&t, "note"),
            "the column is there without its batch's rows and markers");
    H_CHECK(rows(&t, "") == 3, "rows of the killed batch are there");
    h_step("killed at after_effects: neither the column nor the rows");
    run_until_caught_up(&t, cfg, "run3.log");
    H_CHECK(has_column(&t, "note"), "the column was never added");
    H_CHECK(rows(&t, "(id < 4 AND note IS NULL) OR (id >= 4 AND note = 'x' "
                     "|| id)") == 6,
            "want 6 rows, note null before the column and filled after");
    h_step("restarted: the column and the rows together");
}

static void run_narrowed_type_stops(int pg) {
    target t;
    init_target(&t, pg);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    create(p, &t, 1, P_DOUBLE, "{\"id\":1,\"p\":1.5}");
    create(p, &t, 2, P_DOUBLE, "{\"id\":2,\"p\":2.5}");
    h_flush(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    pid_t pid = h_spawn(cfg, "run.log");
    wait_caught_up(&t);
    /* while it runs, the source narrows p */
    create(p, &t, 3, P_INT, "{\"id\":3,\"p\":3}");
    h_flush(p);
    rd_kafka_destroy(p);
    const char *want = "[0] stopped at offset 2: field p changed type: "
                       "the target column is float (from double), the "
                       "event's schema says int (int32)";
    int64_t t0 = h_now_ms();
    while (!strstr(h_status_text(t.connector), want) ||
           !strstr(h_status_text(t.connector), "\"DEGRADED\"")) {
        H_CHECK(h_now_ms() - t0 < 60000,
                "the status never said DEGRADED naming the partition, "
                "offset and narrowed field; it says: %s",
                h_status_text(t.connector));
        h_sleep_ms(100);
    }
    const char *args[] = {"status", "--config", cfg, NULL};
    int rc = h_tidemark("status.out", args);
    H_CHECK(rc == 3 && strstr(h_read_file("status.out"), want),
            "`tidemark status` exit %d (want 3) does not say it: %s", rc,
            h_read_file("status.out"));
    rc = h_stop(pid, SIGTERM, 30000, NULL);
    H_CHECK(rc == 0, "SIGTERM: exit %d, want 0", rc);
    H_CHECK(marker_sum(&t) == 2 && rows(&t, "") == 2,
            "the narrowed event was committed (markers %lld)",
            (long long)marker_sum(&t));
    h_step("stopped: %s; the marker at it", want);
    /* the operator makes p an integer column, keeping the old values */
    char sql[512];
    snprintf(sql, sizeof sql,
             "ALTER TABLE \"%s\" RENAME COLUMN p TO p_double; ALTER TABLE "
             "\"%s\" ADD COLUMN p %s",
             t.table, t.table, t.pg ? "bigint" : "INTEGER");
    if (t.pg) {
        pg_do(sql);
    } else {
        sqlite3 *db = NULL;
        char *msg = NULL;
        H_CHECK(sqlite3_open(t.db, &db) == SQLITE_OK &&
                    sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK,
                "inconclusive: changing the table: %s", msg ? msg : "?");
        sqlite3_free(msg);
        sqlite3_close(db);
    }
    run_until_caught_up(&t, cfg, "run2.log");
    H_CHECK(rows(&t, "id = 3 AND p = 3") == 1 && rows(&t, "") == 3,
            "after the fix the narrowed event is not in, or rows are lost");
    check_verify(cfg);
    h_step("after the table was changed: resumed, nothing lost; verify "
           "passes");
}

#define TS_FIELD                                                               \
    "{\"field\":\"ts\",\"type\":\"int64\",\"optional\":true,\"name\":"         \
    "\"org.apache.kafka.connect.data.Timestamp\"}"
#define V_REQUIRED F("id", "int32", "false") "," F("v", "string", "false")
#define V_OPTIONAL F("id", "int32", "false") "," F("v", "string", "true")

/* Runs the host on CFG once the first run has stopped at a change the host
 * refuses, the table left as it is: it must stop again (exit 1) with the
 * sink's message naming the table and saying SAYS (as the log escapes
 * it: \" for a quote), and commit nothing (markers at
 * 1, no row of id 2, no dead letter), where the sink used to let the
 * event in. */
static void restart_stops_again(const target *t, const char *cfg,
                                const char *says) {
    pid_t pid = h_spawn(cfg, "run2.log");
    int64_t t0 = h_now_ms();
    int rc = -1, exited = 0;
    while (h_now_ms() - t0 < 60000 && marker_sum(t) < 2) {
        if (waitpid(pid, &rc, WNOHANG) == pid) {
            exited = 1;
            break;
        }
        h_sleep_ms(100);
    }
    if (!exited)
        h_stop(pid, SIGTERM, 30000, NULL);
    int64_t rows2 = rows(t, "id = 2");
    int64_t dls = dead_letters(t, "rejected");
    H_CHECK(marker_sum(t) == 1 && rows2 == 0 && dls == 0,
            "restarted as it was, the refused change went in: markers at "
            "%lld, %lld rows of id 2, %lld dead letters rejected",
            (long long)marker_sum(t), (long long)rows2, (long long)dls);
    H_CHECK(exited && WIFEXITED(rc) && WEXITSTATUS(rc) == 1,
            "the restarted host did not stop (exited %d, status %d)", exited,
            rc);
    const char *log = h_read_file("run2.log");
    H_CHECK(strstr(log, t->table) && strstr(log, says),
            "the restarted host's log does not name the table and say "
            "\"%s\": %s",
            says, log);
}

/* The first run: id 1 with ROW1, caught up; then id 2 with ROW2 and
 * AFTER2 while it runs, which stops its partition with a reason saying
 * STOP1 (in the status); then SIGTERM. */
static const char *stopped_first_run(const target *t, const char *row1,
                                     const char *after1, const char *row2,
                                     const char *after2, const char *stop1) {
    h_create_topic(t->topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    create(p, t, 1, row1, after1);
    h_flush(p);
    const char *cfg = config_with(t, SCHEMA_MAPPING);
    pid_t pid = h_spawn(cfg, "run1.log");
    wait_caught_up(t);
    create(p, t, 2, row2, after2);
    h_flush(p);
    rd_kafka_destroy(p);
    /* the change stops partition 0 (the connector DEGRADED), the process
     * goes on until SIGTERM */
    int64_t t0 = h_now_ms();
    while (!strstr(h_status_text(t->connector), stop1) ||
           !strstr(h_status_text(t->connector), "\"DEGRADED\"")) {
        H_CHECK(h_now_ms() - t0 < 60000,
                "inconclusive: the first run's partition did not stop "
                "saying \"%s\"; the status says: %s",
                stop1, h_status_text(t->connector));
        h_sleep_ms(100);
    }
    int rc = h_stop(pid, SIGTERM, 30000, NULL);
    H_CHECK(rc == 0, "inconclusive: SIGTERM: exit %d, want 0", rc);
    H_CHECK(marker_sum(t) == 1 && rows(t, "") == 1,
            "inconclusive: markers at %lld, want 1", (long long)marker_sum(t));
    return cfg;
}

static void run_type_change_restart(int pg) {
    target t;
    init_target(&t, pg);
    const char *cfg = stopped_first_run(
        &t, F("id", "int32", "false") "," F("ts", "int64", "true"),
        "{\"id\":1,\"ts\":1700000000000}",
        F("id", "int32", "false") "," TS_FIELD,
        "{\"id\":2,\"ts\":1700000000000}", "field ts changed type");
    h_step("run 1 stopped at the changed type");
    char says[256];
    snprintf(says, sizeof says,
             "column \\\"ts\\\" is %s (int) in the table, the batch's "
             "columns say timestamp",
             pg ? "bigint" : "INTEGER");
    restart_stops_again(&t, cfg, says);
    h_step("the changed type still stops after a restart");
}

static void run_optional_restart(int pg) {
    target t;
    init_target(&t, pg);
    const char *cfg = stopped_first_run(
        &t, V_REQUIRED, "{\"id\":1,\"v\":\"a\"}", V_OPTIONAL,
        "{\"id\":2,\"v\":null}", "field v (string) became optional");
    h_step("run 1 stopped at the column made optional");
    char says[256];
    snprintf(says, sizeof says,
             "column \\\"v\\\" is %s NOT NULL in the table, the batch's "
             "columns say text, optional",
             pg ? "text" : "TEXT");
    restart_stops_again(&t, cfg, says);
    h_step("the optional column still stops after a restart, no dead "
           "letters");
}

static void scenario_sqlite_type_change_restart(void) {
    run_type_change_restart(0);
}
static void scenario_postgres_type_change_restart(void) {
    run_type_change_restart(1);
}
static void scenario_sqlite_optional_restart(void) {
    run_optional_restart(0);
}
static void scenario_postgres_optional_restart(void) {
    run_optional_restart(1);
}

static void scenario_sqlite_columns(void) {
    run_columns(0);
}
static void scenario_postgres_columns(void) {
    run_columns(1);
}
static void scenario_sqlite_added_column_killed(void) {
    run_added_column_killed(0);
}
static void scenario_postgres_added_column_killed(void) {
    run_added_column_killed(1);
}
static void scenario_sqlite_narrowed_type_stops(void) {
    run_narrowed_type_stops(0);
}
static void scenario_postgres_narrowed_type_stops(void) {
    run_narrowed_type_stops(1);
}

static const h_scenario SCENARIOS[] = {
    {"sqlite_columns", scenario_sqlite_columns},
    {"postgres_columns", scenario_postgres_columns},
    {"sqlite_added_column_killed", scenario_sqlite_added_column_killed},
    {"postgres_added_column_killed", scenario_postgres_added_column_killed},
    {"sqlite_narrowed_type_stops", scenario_sqlite_narrowed_type_stops},
    {"postgres_narrowed_type_stops", scenario_postgres_narrowed_type_stops},
    {"sqlite_type_change_restart", scenario_sqlite_type_change_restart},
    {"postgres_type_change_restart", scenario_postgres_type_change_restart},
    {"sqlite_optional_restart", scenario_sqlite_optional_restart},
    {"postgres_optional_restart", scenario_postgres_optional_restart},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "cdc_schema_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
