/* Columns from the events' schemas across a process's start (scenarios
 * found by a review; each failed on the code before its fix):
 *   sqlite_tombstone_first_required, sqlite_enveloped_tombstone_first,
 *   postgres_enveloped_tombstone_first: a tombstone (bare key, or
 *     Debezium's enveloped key) that is the first record a process reads
 *     teaches the key columns only; the table has a required (NOT NULL)
 *     column: the deletes-only batch and the events after it go in
 *     (once, every batch was refused at each restart).
 *   postgres_case_rename_restart, sqlite_case_rename_restart: a rename in
 *     case only, refused while the process runs, is refused by the sink's
 *     table check after a restart too (once, PostgreSQL added a second
 *     column and SQLite wrote into the old one).
 *   sqlite_poison_schema: a dead letter's schema, read first, is not
 *     learnt: the next valid event makes the table (once, it stopped the
 *     partition).
 *   sqlite_date_key_tombstone_first (not registered: the documented limit
 *     of configuration.md): a bare key's tombstone with a Date key field
 *     before the first event types the key int, so the event's schema
 *     (timestamp) stops the partition. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "cdc_common.h"

#define SCHEMA_MAPPING "{\"mode\": \"json\", \"format\": \"debezium\"}"
#define F(name, type, opt)                                                     \
    "{\"field\":\"" name "\",\"type\":\"" type "\",\"optional\":" opt "}"
#define ID_REQ F("id", "int32", "false") "," F("name", "string", "false")

static void create_k(rd_kafka_t *p, const target *t, const char *key,
                     const char *rowfields, const char *after) {
    schema_create(p, t, 0, key, rowfields, after);
}

/* The key {"id": ID} enveloped (a static buffer: copy it to keep it). */
static const char *env_key(int id) {
    static char key[256];
    return enveloped_id_key(key, sizeof key, id);
}

static void tombstone_first(int pg, const char *key_text) {
    /* a copy: env_key's buffer is overwritten by the creates below */
    char tombstone_key[256];
    snprintf(tombstone_key, sizeof tombstone_key, "%s", key_text);
    target t;
    init_target_as(&t, pg, "restart");
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    create_k(p, &t, env_key(1), ID_REQ, "{\"id\":1,\"name\":\"a\"}");
    create_k(p, &t, env_key(2), ID_REQ, "{\"id\":2,\"name\":\"b\"}");
    h_flush(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    H_CHECK(run_caught_up(&t, cfg, "run1.log"), "inconclusive: run 1");
    H_CHECK(count_rows(&t, "%.0d%s", 0, "") == 2, "inconclusive: rows");
    /* key 1's delete event was committed by run 1 (not produced here: the
     * tombstone alone is the same as compaction leaves it); run 2 reads
     * the tombstone first */
    h_produce_async(p, t.topic, 0, tombstone_key, NULL, 0);
    create_k(p, &t, env_key(3), ID_REQ, "{\"id\":3,\"name\":\"c\"}");
    h_flush(p);
    rd_kafka_destroy(p);
    int ok = run_caught_up(&t, cfg, "run2.log");
    H_CHECK(ok,
            "run 2 never caught up: markers %lld of %lld, rows id=1 %lld "
            "id=3 %lld",
            (long long)marker_sum(&t), (long long)high_sum(&t),
            (long long)count_rows(&t, "%.0dWHERE %s", 0, "id = 1"),
            (long long)count_rows(&t, "%.0dWHERE %s", 0, "id = 3"));
    H_CHECK(count_rows(&t, "%.0dWHERE %s", 0, "id = 1") == 0 &&
                count_rows(&t, "%.0dWHERE %s", 0, "id = 3") == 1,
            "rows wrong");
}

static void scenario_sqlite_tombstone_first_required(void) {
    tombstone_first(0, "{\"id\":1}");
}

static void scenario_sqlite_enveloped_tombstone_first(void) {
    tombstone_first(0, env_key(1));
}

static void scenario_postgres_enveloped_tombstone_first(void) {
    tombstone_first(1, env_key(1));
}

static void scenario_postgres_case_rename_restart(void) {
    target t;
    init_target_as(&t, 1, "restart");
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    const char *old = F("id", "int32", "false") "," F("name", "string", "true");
    const char *new = F("id", "int32", "false") "," F("Name", "string", "true");
    create_k(p, &t, env_key(1), old, "{\"id\":1,\"name\":\"one\"}");
    h_flush(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    H_CHECK(run_caught_up(&t, cfg, "run1.log"), "inconclusive: run 1");
    /* the rename, read first by the next process */
    create_k(p, &t, env_key(1), new, "{\"id\":1,\"Name\":\"one-renamed\"}");
    h_flush(p);
    rd_kafka_destroy(p);
    int ok = run_caught_up(&t, cfg, "run2.log");
    int64_t twin = h_pg_int("SELECT count(*) FROM information_schema.columns "
                            "WHERE table_name = '%s' AND column_name = 'Name'",
                            t.table);
    int64_t stale = count_rows(&t, "%.0dWHERE %s", 0,
                               "id = 1 AND name = 'one' AND \"Name\" = "
                               "'one-renamed'");
    H_CHECK(!ok && twin == 0,
            "the rename in case only, refused in one process, was applied "
            "after a restart: caught up %d, a column \"Name\" beside "
            "\"name\": %lld, row 1 with both (name='one', "
            "Name='one-renamed'): %lld",
            ok, (long long)twin, (long long)stale);
}

/* SQLite folds the case: after a restart the renamed field's values go to
 * the old column, which the running process refused as unsafe. */
static void scenario_sqlite_case_rename_restart(void) {
    target t;
    init_target_as(&t, 0, "restart");
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    const char *old = F("id", "int32", "false") "," F("name", "string", "true");
    const char *new = F("id", "int32", "false") "," F("Name", "string", "true");
    create_k(p, &t, env_key(1), old, "{\"id\":1,\"name\":\"one\"}");
    h_flush(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    H_CHECK(run_caught_up(&t, cfg, "run1.log"), "inconclusive: run 1");
    create_k(p, &t, env_key(1), new, "{\"id\":1,\"Name\":\"one-renamed\"}");
    h_flush(p);
    rd_kafka_destroy(p);
    int ok = run_caught_up(&t, cfg, "run2.log");
    H_CHECK(!ok,
            "the rename in case only, refused in one process, was "
            "applied after a restart: row 1 name='one-renamed': %lld",
            (long long)count_rows(&t, "%.0dWHERE %s", 0,
                                  "id = 1 AND name = 'one-renamed'"));
}

static void scenario_sqlite_date_key_tombstone_first(void) {
    target t;
    init_target_as(&t, 0, "restart");
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
#define DKEY                                                                   \
    "{\"field\":\"d\",\"type\":\"int32\",\"optional\":false,\"name\":"         \
    "\"org.apache.kafka.connect.data.Date\"}"
    const char *fields = DKEY "," F("name", "string", "true");
    /* a tombstone of a bare key (compaction kept it alone), then a create
     * of another key */
    h_produce_async(p, t.topic, 0, "{\"d\":19000}", NULL, 0);
    create_k(p, &t,
             "{\"schema\":{\"type\":\"struct\",\"fields\":[" DKEY
             "]},\"payload\":{\"d\":19001}}",
             fields, "{\"d\":19001,\"name\":\"x\"}");
    h_flush(p);
    rd_kafka_destroy(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    int ok = run_caught_up(&t, cfg, "run.log");
    H_CHECK(ok && count_rows(&t, "%.0dWHERE %s", 0, "name = 'x'") == 1,
            "the create after a Date key's tombstone was not applied: "
            "caught up %d, markers %lld of %lld; status: %s",
            ok, (long long)marker_sum(&t), (long long)high_sum(&t),
            h_status_text(t.connector));
}

/* Contract part 5: an event whose schema disagrees with its payload is a
 * dead letter and nothing else on the partition is held up. Read first by
 * a process, its schema is learnt all the same. */
static void scenario_sqlite_poison_schema(void) {
    target t;
    init_target_as(&t, 0, "restart");
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    /* a Date of 2^31-1 days: no timestamp holds it (a dead letter after
     * its schema was read) */
    const char *bad =
        F("id", "int32",
          "false") ",{\"field\":\"p\",\"type\":"
                   "\"int32\",\"optional\":true,\"name\":\"org.apache."
                   "kafka.connect.data.Date\"}";
    const char *good = F("id", "int32", "false") "," F("p", "double", "true");
    create_k(p, &t, env_key(1), bad, "{\"id\":1,\"p\":2147483647}");
    create_k(p, &t, env_key(2), good, "{\"id\":2,\"p\":1.5}");
    h_flush(p);
    rd_kafka_destroy(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    int ok = run_caught_up(&t, cfg, "run.log");
    int64_t dl = dead_letters(&t, "schema_mismatch") +
                 dead_letters(&t, "type_mismatch") +
                 dead_letters(&t, "envelope");
    H_CHECK(ok && count_rows(&t, "%.0dWHERE %s", 0, "id = 2") == 1,
            "a dead letter's schema held up the partition: caught up %d, "
            "markers %lld of %lld, dead letters %lld, row 2 %lld; status: %s",
            ok, (long long)marker_sum(&t), (long long)high_sum(&t),
            (long long)dl,
            (long long)count_rows(&t, "%.0dWHERE %s", 0, "id = 2"),
            h_status_text(t.connector));
}

static const h_scenario SCENARIOS[] = {
    {"sqlite_case_rename_restart", scenario_sqlite_case_rename_restart},
    {"postgres_enveloped_tombstone_first",
     scenario_postgres_enveloped_tombstone_first},
    {"sqlite_poison_schema", scenario_sqlite_poison_schema},
    {"sqlite_tombstone_first_required",
     scenario_sqlite_tombstone_first_required},
    {"sqlite_enveloped_tombstone_first",
     scenario_sqlite_enveloped_tombstone_first},
    {"postgres_case_rename_restart", scenario_postgres_case_rename_restart},
    {"sqlite_date_key_tombstone_first",
     scenario_sqlite_date_key_tombstone_first},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "cdc_schema_restart_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
