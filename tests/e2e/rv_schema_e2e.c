/* REVIEW (rv-schema) reproducers of the 'cdcschema' merge: columns from the
 * events' schemas. Each scenario FAILS on main (324b6b3); they state what the
 * docs promise (docs/configuration.md "Columns from the event's schema"):
 *   sqlite_case_rename: a source column renamed in case only (name ->
 *     Name): SQLite's names fold case, the converter's do not; the table
 *     gets no new column, the INSERT names the column twice, and the first
 *     (null) wins: every later value is lost, the earlier one overwritten
 *     with null, no dead letter, verify OK.
 *   sqlite_bare_key_tombstone: a record key without its envelope (which the
 *     docs accept for the key columns) and a tombstone left alone by
 *     compaction: under a column list it deletes the key's row (review17),
 *     under columns from the schema it is a dead letter schema_mismatch
 *     ("the event has no schema") and the row stays.
 *   sqlite_type_change_restart: a field that becomes a Connect Timestamp
 *     stops the connector; restarted as it is (what the shipped unit's
 *     Restart=on-failure does), the sink's affinity check lets it through:
 *     epoch milliseconds and microseconds in one column. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "cdc_common.h"

#define SCHEMA_MAPPING "{\"mode\": \"json\", \"format\": \"debezium\"}"
#define F(name, type, opt)                                                     \
    "{\"field\":\"" name "\",\"type\":\"" type "\",\"optional\":" opt "}"
#define TS_FIELD                                                               \
    "{\"field\":\"ts\",\"type\":\"int64\",\"optional\":true,\"name\":"         \
    "\"org.apache.kafka.connect.data.Timestamp\"}"

/* A create of key KEY (its bytes as given) with row fields ROWFIELDS and
 * payload AFTER, in partition 0. */
static void create_k(rd_kafka_t *p, const target *t, const char *key,
                     const char *rowfields, const char *after) {
    char value[4096];
    snprintf(value, sizeof value,
             "{\"schema\":{\"type\":\"struct\",\"fields\":["
             "{\"field\":\"before\",\"type\":\"struct\",\"optional\":true,"
             "\"fields\":[%s]},{\"field\":\"after\",\"type\":\"struct\","
             "\"optional\":true,\"fields\":[%s]},"
             "{\"field\":\"op\",\"type\":\"string\",\"optional\":false}]},"
             "\"payload\":{\"before\":null,\"after\":%s,\"op\":\"c\"}}",
             rowfields, rowfields, after);
    h_produce_async(p, t->topic, 0, key, value, strlen(value));
}

static void create(rd_kafka_t *p, const target *t, int id,
                   const char *rowfields, const char *after) {
    char key[256];
    snprintf(key, sizeof key,
             "{\"schema\":{\"type\":\"struct\",\"fields\":[" F(
                 "id", "int32", "false") "]},\"payload\":{\"id\":%d}}",
             id);
    create_k(p, t, key, rowfields, after);
}

static void scenario_sqlite_case_rename(void) {
    target t;
    init_target(&t, 0);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    const char *old = F("id", "int32", "false") "," F("name", "string", "true");
    const char *new = F("id", "int32", "false") "," F("Name", "string", "true");
    create(p, &t, 1, old, "{\"id\":1,\"name\":\"one\"}");
    h_flush(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    /* the table made from the old schema; the rename while it runs */
    pid_t pid = h_spawn(cfg, "run.log");
    wait_caught_up(&t);
    create(p, &t, 1, new, "{\"id\":1,\"Name\":\"one-renamed\"}");
    create(p, &t, 2, new, "{\"id\":2,\"Name\":\"two\"}");
    h_flush(p);
    rd_kafka_destroy(p);
    wait_caught_up(&t);
    H_CHECK(h_stop(pid, SIGTERM, 30000, NULL) == 0, "inconclusive: exit");
    H_CHECK(count_rows(&t, "%.0d%s", 0, "") == 2,
            "inconclusive: %lld rows, want 2",
            (long long)count_rows(&t, "%.0d%s", 0, ""));
    int64_t kept =
        count_rows(&t, "%.0dWHERE %s", 0,
                   "(id = 1 AND name = 'one-renamed') OR (id = 2 AND name = "
                   "'two')");
    H_CHECK(kept == 2 || dead_letters(&t, "schema_mismatch") > 0,
            "the values of the renamed field are lost silently: %lld of 2 "
            "rows carry them, no dead letter (id 1 'one' overwritten with "
            "null)",
            (long long)kept);
    h_step("a case-only rename keeps its values or says why");
}

static void scenario_sqlite_bare_key_tombstone(void) {
    target t;
    init_target(&t, 0);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    const char *row = F("id", "int32", "false") "," F("name", "string", "true");
    create_k(p, &t, "{\"id\":1}", row, "{\"id\":1,\"name\":\"a\"}");
    create_k(p, &t, "{\"id\":2}", row, "{\"id\":2,\"name\":\"b\"}");
    /* key 1's tombstone, its delete event compacted away */
    h_produce_async(p, t.topic, 0, "{\"id\":1}", NULL, 0);
    h_flush(p);
    rd_kafka_destroy(p);
    run_until_caught_up(&t, config_with(&t, SCHEMA_MAPPING), "run.log");
    H_CHECK(count_rows(&t, "%.0dWHERE %s", 0, "id = 2") == 1,
            "inconclusive: key 2's row is not there");
    H_CHECK(count_rows(&t, "%.0dWHERE %s", 0, "id = 1") == 0,
            "the tombstone of key 1 did not delete its row (dead letters "
            "schema_mismatch: %lld); under a column list it does",
            (long long)dead_letters(&t, "schema_mismatch"));
    h_step("a bare key's tombstone deletes its row");
}

static void scenario_sqlite_type_change_restart(void) {
    target t;
    init_target(&t, 0);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    create(p, &t, 1, F("id", "int32", "false") "," F("ts", "int64", "true"),
           "{\"id\":1,\"ts\":1700000000000}");
    h_flush(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    pid_t pid = h_spawn(cfg, "run1.log");
    wait_caught_up(&t);
    /* while it runs, the source's column becomes a timestamp */
    create(p, &t, 2, F("id", "int32", "false") "," TS_FIELD,
           "{\"id\":2,\"ts\":1700000000000}");
    h_flush(p);
    rd_kafka_destroy(p);
    int rc = h_stop(pid, 0, 60000, NULL);
    H_CHECK(rc == 1 && strstr(h_read_file("run1.log"), "field ts changed type"),
            "inconclusive: the first run did not stop at the type change "
            "(exit %d)",
            rc);
    H_CHECK(marker_sum(&t) == 1, "inconclusive: markers at %lld, want 1",
            (long long)marker_sum(&t));
    h_step("run 1 stopped at the changed type");
    /* restarted as it is: the table was not changed */
    pid = h_spawn(cfg, "run2.log");
    int64_t t0 = h_now_ms();
    int exited = 0;
    while (h_now_ms() - t0 < 30000 && marker_sum(&t) < 2) {
        if (waitpid(pid, &rc, WNOHANG) == pid) {
            exited = 1;
            break;
        }
        h_sleep_ms(100);
    }
    int64_t mixed = count_rows(&t, "%.0dWHERE %s", 0, "id = 2");
    if (!exited)
        h_stop(pid, SIGTERM, 30000, NULL);
    H_CHECK(mixed == 0,
            "restarted as it was, the changed type went in: column ts holds "
            "epoch milliseconds (id 1) and microseconds (id 2)");
    h_step("the changed type still stops after a restart");
}

static const h_scenario SCENARIOS[] = {
    {"sqlite_case_rename", scenario_sqlite_case_rename},
    {"sqlite_bare_key_tombstone", scenario_sqlite_bare_key_tombstone},
    {"sqlite_type_change_restart", scenario_sqlite_type_change_restart},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "rv_schema_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
