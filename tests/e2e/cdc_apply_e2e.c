/* Change events the host must not lose, and rows that must be their
 * last event's image (docs/configuration.md, "Change data capture"):
 *
 * compacted_delete (sqlite/postgres): a Debezium topic is compacted (its
 *   usual cleanup.policy: the tombstone exists for it). A connector that
 *   lags behind the cleaner meets a deleted key only as its tombstone:
 *   the delete event itself is gone (the tombstone, the same key, is
 *   newer). The tombstone deletes the key's row, and verify agrees.
 * sqlite_flattened_tombstone_delete: ExtractNewRecordState configured to
 *   turn deletes into tombstones (no __deleted field, no __op): every
 *   delete is a tombstone.
 * sqlite_nocase_key_spelling: under a NOCASE key a row is its last
 *   event's image, the key's spelling included.
 * postgres_recreate_defaults: a key deleted and created again in one
 *   write takes its unmapped columns' defaults again.
 * One ctest test per scenario, e2e.cdc.<scenario>. */
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdc_common.h"

/* ---- compacted_delete ---------------------------------------------------- */

static void run_compacted_delete(int pg) {
    target t;
    init_target(&t, pg);
    create_table_as(&t, "text");
    const char *tcfg[] = {"cleanup.policy",
                          "compact",
                          "segment.ms",
                          "100",
                          "min.cleanable.dirty.ratio",
                          "0.01",
                          "min.compaction.lag.ms",
                          "0",
                          "delete.retention.ms",
                          "86400000", /* tombstones stay for a day */
                          NULL};
    h_create_topic_cfg(t.topic, PARTITIONS, tcfg);
    rd_kafka_t *p = h_producer(NULL, NULL);
    plain_event(p, &t, 1, "c", "a");
    plain_event(p, &t, 2, "c", "b");
    h_flush(p);
    const char *cfg = config(&t);
    run_until_caught_up(&t, cfg, "run1.log");
    H_CHECK(count_rows(&t, "WHERE id = %d%s", 1, "") == 1,
            "inconclusive: key 1 not stored by the first run");
    /* The connector is down: the source deletes key 1 (Debezium: the
     * delete event, then its tombstone, both keyed {"id":1}). */
    static const char DEL[] =
        "{\"before\":{\"id\":1,\"name\":null},\"after\":null,\"op\":\"d\"}";
    int64_t del_at =
        h_produce(p, t.topic, 0, "{\"id\":1}", 8, DEL, strlen(DEL), NULL, NULL);
    h_produce(p, t.topic, 0, "{\"id\":1}", 8, NULL, 0, NULL, NULL);
    /* Later changes of key 2 roll segments, so that the cleaner may
     * compact the segments holding the delete and the tombstone. */
    int64_t t0 = h_now_ms();
    int gone = 0;
    for (int round = 0; !gone; round++) {
        char name[32];
        snprintf(name, sizeof name, "b%d", round);
        plain_event(p, &t, 2, "u", name);
        h_flush(p);
        h_sleep_ms(300);
        int64_t *offs = NULL;
        size_t n = h_read_offsets(t.topic, 0, &offs);
        gone = 1;
        for (size_t i = 0; i < n; i++)
            if (offs[i] == del_at)
                gone = 0;
        free(offs);
        H_CHECK(h_now_ms() - t0 < 150000,
                "inconclusive: the cleaner did not remove the delete at "
                "offset %lld within 150 s",
                (long long)del_at);
    }
    rd_kafka_destroy(p);
    h_step("the cleaner removed the delete event (offset %lld); its tombstone "
           "remains",
           (long long)del_at);
    run_until_caught_up(&t, cfg, "run2.log");
    const char *args[] = {"verify", cfg, NULL};
    int vrc = h_tidemark("verify.out", args);
    H_CHECK(count_rows(&t, "WHERE id = %d%s", 1, "") == 0,
            "key 1 was deleted at the source (its delete compacted away "
            "behind its tombstone), yet the sink still holds its row "
            "(tidemark verify exit %d)",
            vrc);
    H_CHECK(count_rows(&t, "WHERE id = %d%s", 2, "") == 1,
            "key 2: not one row");
    H_CHECK(vrc == 0, "tidemark verify: exit %d\n%s", vrc,
            h_read_file("verify.out"));
    h_step("key 1 deleted by its tombstone alone; verify passes");
}

static void scenario_sqlite_compacted_delete(void) {
    run_compacted_delete(0);
}
static void scenario_postgres_compacted_delete(void) {
    run_compacted_delete(1);
}

/* ---- flattened_tombstone_delete ------------------------------------------ */

/* ExtractNewRecordState without the rewrite of deletes (its
 * delete.handling.mode "none": the delete becomes a tombstone, and the
 * original tombstone is kept unless drop.tombstones): a flattened stream
 * in the Connect envelope whose deletes reach the sink only as
 * tombstones keyed by the row's key: each deletes its key's row. verify
 * accounts the tombstone a delete: key 1's row put back behind the
 * host's back (the test's own write, at the offset of its create) is a
 * problem. */
static void scenario_sqlite_flattened_tombstone_delete(void) {
    target t;
    init_target(&t, 0);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL); /* all in 0 */
    rd_kafka_t *p = h_producer(NULL, NULL);
#define FLAT_ID_SCHEMA                                                         \
    "{\"type\":\"struct\",\"fields\":[{\"field\":\"id\",\"type\":\"int32\"},"  \
    "{\"field\":\"name\",\"type\":\"string\",\"optional\":true}]}"
    static const char C1[] =
        "{\"schema\":" FLAT_ID_SCHEMA ",\"payload\":{\"id\":1,\"name\":\"a\"}}";
    static const char C2[] =
        "{\"schema\":" FLAT_ID_SCHEMA ",\"payload\":{\"id\":2,\"name\":\"b\"}}";
    h_produce_async(p, t.topic, 0, "{\"id\":1}", C1, strlen(C1));
    h_produce_async(p, t.topic, 0, "{\"id\":2}", C2, strlen(C2));
    h_produce_async(p, t.topic, 0, "{\"id\":1}", NULL, 0); /* deleted */
    h_produce_async(p, t.topic, 0, "{\"id\":1}", NULL, 0); /* its tombstone */
    h_flush(p);
    rd_kafka_destroy(p);
    const char *cfg = config_with(
        &t, "{\"mode\": \"json\", \"format\": \"connect\", \"columns\": ["
            "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", "
            "\"key\": true}, {\"name\": \"name\", \"pointer\": \"/name\", "
            "\"type\": \"text\"}]}");
    run_until_caught_up(&t, cfg, "run.log");
    H_CHECK(count_rows(&t, "WHERE id = %d%s", 2, "") == 1,
            "inconclusive: key 2 not stored");
    H_CHECK(count_rows(&t, "WHERE id = %d%s", 1, "") == 0,
            "key 1's delete (a tombstone keyed {\"id\":1}) was filtered: "
            "the row stays");
    check_verify(cfg);
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO \"%s\" (id, name, _tm_topic, _tm_partition, "
             "_tm_offset) VALUES (1, 'a', '%s', 0, 0)",
             t.table, t.topic);
    sqlite3 *db = NULL;
    int rc = sqlite3_open(t.db, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    H_CHECK(rc == SQLITE_OK, "inconclusive: putting key 1's row back: %s",
            sqlite3_errmsg(db));
    sqlite3_close(db);
    const char *args[] = {"verify", cfg, NULL};
    rc = h_tidemark("verify-back.out", args);
    const char *out = h_read_file("verify-back.out");
    H_CHECK(rc != 0 && strstr(out, "key [1]: its row is from offset 0"),
            "verify with key 1's row back after its tombstones: exit %d\n%s",
            rc, out);
    h_step("verify finds key 1's row after its tombstone");
}

/* ---- sqlite_nocase_key_spelling ------------------------------------------ */

/* A key column under SQLite's NOCASE collation (a user's table): "A" and
 * "a" are one key. The docs say a key's row holds its last event (and
 * PostgreSQL sets the key columns from it, the spelling included);
 * SQLite's upsert updates only the other columns, so the row keeps the
 * first event's spelling beside the last event's values. */
static void scenario_sqlite_nocase_key_spelling(void) {
    target t;
    init_target(&t, 0);
    char sql[1024];
    snprintf(sql, sizeof sql,
             "CREATE TABLE \"%s\" (id TEXT COLLATE NOCASE, name TEXT, "
             "_tm_topic TEXT NOT NULL, _tm_partition INTEGER NOT NULL, "
             "_tm_offset INTEGER NOT NULL, _tm_identity TEXT); CREATE UNIQUE "
             "INDEX \"%s_id\" ON \"%s\" (id)",
             t.table, t.table, t.table);
    sqlite3 *db = NULL;
    int rc = sqlite3_open(t.db, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    H_CHECK(rc == SQLITE_OK, "inconclusive: %s", sqlite3_errmsg(db));
    sqlite3_close(db);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    static const char C[] = "{\"before\":null,\"after\":{\"id\":\"A\","
                            "\"name\":\"x\"},\"op\":\"c\"}";
    static const char U[] = "{\"before\":null,\"after\":{\"id\":\"a\","
                            "\"name\":\"y\"},\"op\":\"u\"}";
    h_produce_async(p, t.topic, 0, "{\"id\":\"A\"}", C, strlen(C));
    h_produce_async(p, t.topic, 0, "{\"id\":\"a\"}", U, strlen(U));
    h_flush(p);
    rd_kafka_destroy(p);
    const char *cfg = config_with(
        &t, "{\"mode\": \"json\", \"format\": \"debezium\", \"columns\": ["
            "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"text\", "
            "\"key\": true}, {\"name\": \"name\", \"pointer\": \"/name\", "
            "\"type\": \"text\"}]}");
    run_until_caught_up(&t, cfg, "run.log");
    H_CHECK(h_sqlf(t.db, "SELECT count(*) FROM \"%s\"", t.table) == 1,
            "inconclusive: not one row");
    int64_t last = h_sqlf(t.db,
                          "SELECT count(*) FROM \"%s\" WHERE id = 'a' "
                          "COLLATE BINARY AND name = 'y'",
                          t.table);
    H_CHECK(last == 1,
            "the row is not its last event's image: the key keeps the first "
            "event's spelling \"A\" beside the last event's name \"y\"");
}

/* ---- postgres_recreate_defaults ------------------------------------------ */

/* A key deleted and created again in one write gets a new row, so a
 * column the mapping leaves out takes its default again, as one event at
 * a time leaves it (docs/sinks/postgres.md, "Change events"). No other
 * test pins this: with the DELETE narrowed to keys whose LAST event is a
 * delete, every e2e.cdc.postgres* test still passed; this one fails. */
static void scenario_postgres_recreate_defaults(void) {
    target t;
    init_target(&t, 1);
    create_table_as(&t, "text");
    char sql[512];
    snprintf(sql, sizeof sql,
             "ALTER TABLE \"%s\" ADD COLUMN extra text NOT NULL DEFAULT "
             "'fresh'",
             t.table);
    pg_do(sql);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    plain_event(p, &t, 1, "c", "a");
    h_flush(p);
    const char *cfg = config_file(&t, DEBEZIUM_MAPPING, "cdc.json", 40, 2000);
    run_until_caught_up(&t, cfg, "run1.log");
    snprintf(sql, sizeof sql, "UPDATE \"%s\" SET extra = 'stale'", t.table);
    pg_do(sql);
    bad_marker(p, &t);                /* offset 1 */
    plain_event(p, &t, 1, "d", NULL); /* 2 */
    plain_event(p, &t, 1, "c", "b");  /* 3 */
    bad_marker(p, &t);                /* 4 */
    h_flush(p);
    rd_kafka_destroy(p);
    run_until_caught_up(&t, cfg, "run2.log");
    check_one_batch(&t, 1, 4);
    H_CHECK(count_rows(&t, "WHERE id = %d AND name = 'b' AND extra = '%s'", 1,
                       "fresh") == 1,
            "key 1 deleted and created again in one write kept its old "
            "row's unmapped column (not its default)");
}

static const h_scenario SCENARIOS[] = {
    {"sqlite_compacted_delete", scenario_sqlite_compacted_delete},
    {"postgres_compacted_delete", scenario_postgres_compacted_delete},
    {"sqlite_flattened_tombstone_delete",
     scenario_sqlite_flattened_tombstone_delete},
    {"sqlite_nocase_key_spelling", scenario_sqlite_nocase_key_spelling},
    {"postgres_recreate_defaults", scenario_postgres_recreate_defaults},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "cdc_apply_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
