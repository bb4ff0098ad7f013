/* Edges of the columns taken from change events' schemas
 * (docs/configuration.md, "Columns from the event's schema"), against the
 * target's rows and Kafka's offsets:
 *   sqlite_case_rename, postgres_case_rename: a field renamed in its case
 *     only (name -> Name) while the connector runs is an unsafe change:
 *     its partition stops naming both spellings, and nothing of the
 *     renamed events is committed (SQLite folds the case: taken for a new
 *     column, the renamed values were once stored as null, silently).
 *   sqlite_bare_key_tombstone: a tombstone whose record key is a bare JSON
 *     object deletes its key's row by the learnt key columns;
 *     _mismatch: a bare key whose fields are not the learnt key columns is
 *     a dead letter saying so; _first: a tombstone before any event of the
 *     process gave the columns deletes by its key's fields.
 *   sqlite_case_twins, sqlite_reserved_name, postgres_long_name: one event
 *     whose schema no table can take (two fields differing only in case,
 *     the sinks' "_tm_" prefix, a name longer than PostgreSQL's 63 bytes)
 *     is a dead letter, and the events around it are applied. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "cdc_common.h"

#define SCHEMA_MAPPING "{\"mode\": \"json\", \"format\": \"debezium\"}"
#define F(name, type, opt)                                                     \
    "{\"field\":\"" name "\",\"type\":\"" type "\",\"optional\":" opt "}"
#define ID_NAME F("id", "int32", "false") "," F("name", "string", "true")

static void create_k(rd_kafka_t *p, const target *t, const char *key,
                     const char *rowfields, const char *after) {
    schema_create(p, t, 0, key, rowfields, after);
}

/* A create of key ID (the key enveloped) into partition 0. */
static void create(rd_kafka_t *p, const target *t, int id,
                   const char *rowfields, const char *after) {
    char key[256];
    schema_create(p, t, 0, enveloped_id_key(key, sizeof key, id), rowfields,
                  after);
}

/* The connector's dead letters of REASON whose detail contains TEXT. */
static int64_t dead_letters_saying(const target *t, const char *reason,
                                   const char *text) {
    const char *q = "SELECT count(*) FROM tidemark_dead_letters WHERE "
                    "connector = '%s' AND reason = '%s' AND strpos(detail, "
                    "'%s') > 0";
    const char *sq = "SELECT count(*) FROM tidemark_dead_letters WHERE "
                     "connector = '%s' AND reason = '%s' AND instr(detail, "
                     "'%s') > 0";
    return t->pg ? h_pg_int(q, t->connector, reason, text)
                 : h_sqlf(t->db, sq, t->connector, reason, text);
}

/* In PostgreSQL "Name" could be a column of its own, but the rule is one
 * for every sink: a stream that stops in one stops in the other. */
static void case_rename(int pg) {
    target t;
    init_target(&t, pg);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    const char *old = ID_NAME;
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
    /* the rename stops partition 0 (the connector DEGRADED); it must not
     * be applied first */
    int64_t t0 = h_now_ms();
    while (!strstr(h_status_text(t.connector), "renamed in case only") ||
           !strstr(h_status_text(t.connector), "\"DEGRADED\"")) {
        int64_t kept = count_rows(&t, "%.0dWHERE %s", 0,
                                  "(id = 1 AND name = 'one-renamed') OR (id "
                                  "= 2 AND name = 'two')");
        H_CHECK(h_now_ms() - t0 < 60000 && marker_sum(&t) < 3,
                "the partition did not stop at the rename (markers at %lld, "
                "%lld rows, %lld of them carry the renamed field's values); "
                "the status says: %s",
                (long long)marker_sum(&t),
                (long long)count_rows(&t, "%.0d%s", 0, ""), (long long)kept,
                h_status_text(t.connector));
        h_sleep_ms(100);
    }
    const char *st = h_status_text(t.connector);
    H_CHECK(strstr(st, "field Name") && strstr(st, "column name") &&
                strstr(st, "renamed in case only"),
            "the stop does not name both spellings:\n%s", st);
    int rc = h_stop(pid, SIGTERM, 30000, NULL);
    H_CHECK(rc == 0, "SIGTERM: exit %d, want 0", rc);
    h_step("the partition stopped at the rename, naming name and Name");
    H_CHECK(marker_sum(&t) == 1,
            "markers at %lld: the renamed events (offsets 1, 2) were "
            "committed",
            (long long)marker_sum(&t));
    H_CHECK(count_rows(&t, "%.0d%s", 0, "") == 1 &&
                count_rows(&t, "%.0dWHERE %s", 0, "id = 1 AND name = 'one'") ==
                    1,
            "the rows changed: %lld rows",
            (long long)count_rows(&t, "%.0d%s", 0, ""));
    h_step("nothing of the renamed events was committed");
}

static void scenario_sqlite_case_rename(void) {
    case_rename(0);
}

static void scenario_postgres_case_rename(void) {
    case_rename(1);
}

static void scenario_sqlite_bare_key_tombstone(void) {
    target t;
    init_target(&t, 0);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    create_k(p, &t, "{\"id\":1}", ID_NAME, "{\"id\":1,\"name\":\"a\"}");
    create_k(p, &t, "{\"id\":2}", ID_NAME, "{\"id\":2,\"name\":\"b\"}");
    /* key 1's tombstone, its delete event compacted away */
    h_produce_async(p, t.topic, 0, "{\"id\":1}", NULL, 0);
    h_flush(p);
    rd_kafka_destroy(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    run_until_caught_up(&t, cfg, "run.log");
    H_CHECK(count_rows(&t, "%.0dWHERE %s", 0, "id = 2") == 1,
            "inconclusive: key 2's row is not there");
    H_CHECK(count_rows(&t, "%.0dWHERE %s", 0, "id = 1") == 0,
            "the tombstone of key 1 did not delete its row (dead letters "
            "schema_mismatch: %lld); under a column list it does",
            (long long)dead_letters(&t, "schema_mismatch"));
    h_step("a bare key's tombstone deletes its row");
    check_verify(cfg);
    h_step("verify accounts for it");
}

static void scenario_sqlite_bare_key_tombstone_mismatch(void) {
    target t;
    init_target(&t, 0);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    create_k(p, &t, "{\"id\":1}", ID_NAME, "{\"id\":1,\"name\":\"a\"}");
    /* keys whose fields are not the key column id: another name, one
     * more field, the name in another case */
    h_produce_async(p, t.topic, 0, "{\"uid\":1}", NULL, 0);
    h_produce_async(p, t.topic, 0, "{\"id\":1,\"region\":\"eu\"}", NULL, 0);
    h_produce_async(p, t.topic, 0, "{\"ID\":1}", NULL, 0);
    create_k(p, &t, "{\"id\":2}", ID_NAME, "{\"id\":2,\"name\":\"b\"}");
    h_flush(p);
    rd_kafka_destroy(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    run_until_caught_up(&t, cfg, "run.log");
    H_CHECK(count_rows(&t, "%.0dWHERE %s", 0, "id = 2") == 1,
            "inconclusive: key 2's row is not there");
    H_CHECK(count_rows(&t, "%.0dWHERE %s", 0, "id = 1 AND name = 'a'") == 1,
            "a tombstone whose key is not the key columns deleted key 1's "
            "row");
    int64_t uid = dead_letters_saying(&t, "schema_mismatch", "uid"),
            region = dead_letters_saying(&t, "schema_mismatch", "region"),
            upper = dead_letters_saying(&t, "schema_mismatch", "(ID)");
    H_CHECK(uid == 1 && region == 1 && upper == 1 &&
                dead_letters(&t, "schema_mismatch") == 3,
            "want 3 dead letters schema_mismatch naming the key's fields: "
            "uid %lld, region %lld, ID %lld, all %lld",
            (long long)uid, (long long)region, (long long)upper,
            (long long)dead_letters(&t, "schema_mismatch"));
    h_step("a bare key that is not the key columns is a dead letter saying "
           "why");
    check_verify(cfg);
    h_step("verify accounts for them");
}

static void scenario_sqlite_bare_key_tombstone_first(void) {
    target t;
    init_target(&t, 0);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    create_k(p, &t, "{\"id\":1}", ID_NAME, "{\"id\":1,\"name\":\"a\"}");
    create_k(p, &t, "{\"id\":2}", ID_NAME, "{\"id\":2,\"name\":\"b\"}");
    h_flush(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    run_until_caught_up(&t, cfg, "run1.log");
    H_CHECK(count_rows(&t, "%.0d%s", 0, "") == 2,
            "inconclusive: %lld rows after run 1, want 2",
            (long long)count_rows(&t, "%.0d%s", 0, ""));
    /* a new process: the tombstone is the first record it reads, then an
     * event of a schema with one more field */
    h_produce_async(p, t.topic, 0, "{\"id\":1}", NULL, 0);
    create_k(p, &t, "{\"id\":3}", ID_NAME "," F("note", "string", "true"),
             "{\"id\":3,\"name\":\"c\",\"note\":\"n\"}");
    h_flush(p);
    rd_kafka_destroy(p);
    run_until_caught_up(&t, cfg, "run2.log");
    H_CHECK(count_rows(&t, "%.0dWHERE %s", 0,
                       "id = 3 AND name = 'c' AND note = 'n'") == 1,
            "inconclusive: key 3's row is not there");
    H_CHECK(count_rows(&t, "%.0dWHERE %s", 0, "id = 1") == 0,
            "the tombstone read before any columns were learnt did not "
            "delete key 1's row (dead letters: schema_mismatch %lld, "
            "null_key %lld)",
            (long long)dead_letters(&t, "schema_mismatch"),
            (long long)dead_letters(&t, "null_key"));
    H_CHECK(count_rows(&t, "%.0dWHERE %s", 0, "id = 2 AND name = 'b'") == 1,
            "key 2's row changed");
    h_step("a tombstone first in a process deletes by its key's fields");
    check_verify(cfg);
    h_step("verify accounts for it");
}

/* Events 1 and 3 of schema ID_NAME around event 2 of schema BAD (its
 * payload BAD_AFTER): event 2 must be a dead letter schema_mismatch whose
 * detail contains WHY, events 1 and 3 applied, the connector running. */
static void one_bad_schema(int pg, const char *bad, const char *bad_after,
                           const char *why) {
    target t;
    init_target(&t, pg);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    create(p, &t, 1, ID_NAME, "{\"id\":1,\"name\":\"a\"}");
    create(p, &t, 2, bad, bad_after);
    create(p, &t, 3, ID_NAME, "{\"id\":3,\"name\":\"c\"}");
    h_flush(p);
    rd_kafka_destroy(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    pid_t pid = h_spawn(cfg, "run.log");
    int rc = wait_markers(&t, pid, 120000);
    H_CHECK(rc == CAUGHT_UP,
            "the connector stopped on one event (exit %d):\n%s", rc,
            h_read_file("run.log"));
    h_stop_clean(pid);
    H_CHECK(count_rows(&t, "%.0dWHERE %s", 0,
                       "(id = 1 AND name = 'a') OR (id = 3 AND name = 'c')") ==
                2,
            "events 1 and 3 were not applied: %lld rows",
            (long long)count_rows(&t, "%.0d%s", 0, ""));
    H_CHECK(count_rows(&t, "%.0dWHERE %s", 0, "id = 2") == 0 &&
                dead_letters_saying(&t, "schema_mismatch", why) == 1,
            "event 2 is not the dead letter schema_mismatch saying \"%s\" "
            "(%lld schema_mismatch)",
            why, (long long)dead_letters(&t, "schema_mismatch"));
    h_step("the event is a dead letter saying \"%s\"; the others applied", why);
    check_verify(cfg);
    h_step("verify accounts for it");
}

static void scenario_sqlite_case_twins(void) {
    one_bad_schema(0, ID_NAME "," F("Name", "string", "true"),
                   "{\"id\":2,\"name\":\"b\",\"Name\":\"B\"}",
                   "fields name and Name differ only in case");
}

static void scenario_sqlite_reserved_name(void) {
    one_bad_schema(0, ID_NAME "," F("_tm_offset", "int64", "true"),
                   "{\"id\":2,\"name\":\"b\",\"_tm_offset\":7}",
                   "field _tm_offset: the prefix _tm_ is the sinks");
}

/* "c" and n - 1 letters x: a field name of n bytes. */
static const char *long_name(int n) {
    static char s[2][128];
    static int turn;
    char *o = s[turn++ % 2];
    o[0] = 'c';
    memset(o + 1, 'x', (size_t)n - 1);
    o[n] = '\0';
    return o;
}

static void scenario_postgres_long_name(void) {
    char fields[512], after[512], why[256];
    const char *n64 = long_name(64);
    snprintf(fields, sizeof fields,
             ID_NAME ",{\"field\":\"%s\",\"type\":\"string\",\"optional\":"
                     "true}",
             n64);
    snprintf(after, sizeof after, "{\"id\":2,\"name\":\"b\",\"%s\":\"x\"}",
             n64);
    snprintf(why, sizeof why, "field %s: 64 bytes", n64);
    one_bad_schema(1, fields, after, why);
}

/* The longest name PostgreSQL keeps, 63 bytes, is a column. */
static void scenario_postgres_longest_name(void) {
    target t;
    init_target(&t, 1);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    char fields[512], after[512], where[256];
    const char *n63 = long_name(63);
    snprintf(fields, sizeof fields,
             ID_NAME ",{\"field\":\"%s\",\"type\":\"string\",\"optional\":"
                     "true}",
             n63);
    snprintf(after, sizeof after, "{\"id\":1,\"name\":\"a\",\"%s\":\"x\"}",
             n63);
    create(p, &t, 1, fields, after);
    h_flush(p);
    rd_kafka_destroy(p);
    run_until_caught_up(&t, config_with(&t, SCHEMA_MAPPING), "run.log");
    snprintf(where, sizeof where, "id = 1 AND \"%s\" = 'x'", n63);
    H_CHECK(count_rows(&t, "%.0dWHERE %s", 0, where) == 1,
            "the field of 63 bytes is not a column holding its value");
    h_step("a name of 63 bytes is a column");
}

static const h_scenario SCENARIOS[] = {
    {"sqlite_case_rename", scenario_sqlite_case_rename},
    {"postgres_case_rename", scenario_postgres_case_rename},
    {"sqlite_bare_key_tombstone", scenario_sqlite_bare_key_tombstone},
    {"sqlite_bare_key_tombstone_mismatch",
     scenario_sqlite_bare_key_tombstone_mismatch},
    {"sqlite_bare_key_tombstone_first",
     scenario_sqlite_bare_key_tombstone_first},
    {"sqlite_case_twins", scenario_sqlite_case_twins},
    {"sqlite_reserved_name", scenario_sqlite_reserved_name},
    {"postgres_long_name", scenario_postgres_long_name},
    {"postgres_longest_name", scenario_postgres_longest_name},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "cdc_schema_edge_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
