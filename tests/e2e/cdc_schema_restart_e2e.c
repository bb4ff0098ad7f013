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
 *   sqlite_tombstone_first_dead_letter_batch,
 *   postgres_tombstone_first_dead_letter_batch: after the tombstone read
 *     first, a batch of a dead letter alone (no record: it writes no
 *     column) carries the key columns alone; the table's NOT NULL column
 *     does not refuse it (once, the connector FAILED: 'column "name" is
 *     NOT NULL but not in the mapping').
 *   sqlite_tombstone_first_dropped_rereads: after the restart, the batch
 *     of the tombstone read first is committed under SQLite's write lock
 *     (RETRY) while the batch behind it converts a dead letter (its schema
 *     not learnt) and a create whose schema adds a required column (after
 *     deletes only: required as its schema says); that batch is dropped
 *     and read again (the log says so, else inconclusive). Read again, the
 *     dead letter is a dead letter as the first time and everything goes
 *     in (once, the column the dropped batch taught stayed learnt, and the
 *     dead letter's schema, lacking it, stopped the partition).
 *   sqlite_date_key_tombstone_first (not registered: the documented limit
 *     of configuration.md): a bare key's tombstone with a Date key field
 *     before the first event types the key int, so the event's schema
 *     (timestamp) stops the partition. */
#include <signal.h>
#include <sqlite3.h>
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

/* Until the log LOG says WHAT (inconclusive after 60 s). */
static void wait_log(const char *log, const char *what) {
    int64_t t0 = h_now_ms();
    while (!strstr(h_read_file(log), what)) {
        H_CHECK(h_now_ms() - t0 < 60000, "inconclusive: %s never says \"%s\"",
                log, what);
        h_sleep_ms(100);
    }
}

/* Run 1: the table made with name NOT NULL (ids 1 and 2). The producer
 * for what follows. */
static rd_kafka_t *first_run_requires_name(target *t, int pg,
                                           const char *suffix) {
    init_target_as(t, pg, suffix);
    h_create_topic(t->topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    create_k(p, t, env_key(1), ID_REQ, "{\"id\":1,\"name\":\"a\"}");
    create_k(p, t, env_key(2), ID_REQ, "{\"id\":2,\"name\":\"b\"}");
    h_flush(p);
    H_CHECK(run_caught_up(t, config_with(t, SCHEMA_MAPPING), "run1.log"),
            "inconclusive: run 1");
    return p;
}

/* A Date of 2^31-1 days (a dead letter schema_mismatch, its schema {id,
 * p} not learnt), then a create of id 3 with name (required). */
static void dead_letter_then_create(rd_kafka_t *p, const target *t) {
    create_k(p, t, env_key(5),
             F("id", "int32", "false") ",{\"field\":\"p\",\"type\":\"int32\","
                                       "\"optional\":true,\"name\":\"org."
                                       "apache.kafka.connect.data.Date\"}",
             "{\"id\":5,\"p\":2147483647}");
    create_k(p, t, env_key(3), ID_REQ, "{\"id\":3,\"name\":\"c\"}");
}

/* After the tombstone of id 1, the dead letter and the create: id 1
 * gone, id 3 there, the dead letter stored. */
static void all_went_in(const target *t) {
    H_CHECK(count_rows(t, "%.0dWHERE %s", 0, "id = 1") == 0 &&
                count_rows(t, "%.0dWHERE %s", 0, "id = 3 AND name = 'c'") ==
                    1 &&
                dead_letters(t, "schema_mismatch") == 1,
            "rows wrong: id 1 %lld, id 3 %lld, dead letters %lld",
            (long long)count_rows(t, "%.0dWHERE %s", 0, "id = 1"),
            (long long)count_rows(t, "%.0dWHERE %s", 0, "id = 3"),
            (long long)dead_letters(t, "schema_mismatch"));
}

static void scenario_sqlite_tombstone_first_dropped_rereads(void) {
    target t;
    rd_kafka_t *p = first_run_requires_name(&t, 0, "restartdrop");
    /* batches of 2 or 200 ms; a commit gives up at 1.5 s, well before
     * SQLite's 5 s busy timeout */
    const char *cfg =
        config_file_timeout(&t, SCHEMA_MAPPING, "drop.json", 2, 200, 1500);
    pid_t pid = h_spawn(cfg, "run2.log");
    wait_log("run2.log", "partition=1 msg=\"claimed:");
    wait_log("run2.log", "partition=0 msg=\"claimed:");
    sqlite3 *lock = sqlite_write_lock(&t);
    /* batch N: the tombstone alone (due by its age), held by the lock */
    h_produce_async(p, t.topic, 0, "{\"id\":1}", NULL, 0);
    h_flush(p);
    rd_kafka_destroy(p);
    h_sleep_ms(600);
    /* batch N+1, built while N waits: a Date of 2^31-1 days (a dead
     * letter), a create with name (required). One transaction: the host
     * reads the two at once. */
    p = h_producer(h_name("restartdrop-tx"), NULL);
    rd_kafka_error_t *e = rd_kafka_begin_transaction(p);
    H_CHECK(!e, "inconclusive: begin_transaction: %s",
            rd_kafka_error_string(e));
    dead_letter_then_create(p, &t);
    e = rd_kafka_commit_transaction(p, 30000);
    H_CHECK(!e, "inconclusive: commit_transaction: %s",
            rd_kafka_error_string(e));
    rd_kafka_destroy(p);
    wait_log("run2.log", "batch dropped (the batch before it was not applied)");
    const char *log = h_read_file("run2.log");
    H_CHECK(!strstr(log, "past its deadline"),
            "inconclusive: batch N held more than the tombstone (cut in "
            "half)");
    sqlite_write_unlock(lock);
    h_step("batch N (the tombstone) answered RETRY under the lock, N+1 "
           "(the dead letter and the create) dropped");
    int rc = wait_markers(&t, pid, 30000);
    H_CHECK(rc == CAUGHT_UP,
            "never caught up (%d): markers %lld of %lld; status: %s", rc,
            (long long)marker_sum(&t), (long long)high_sum(&t),
            h_status_text(t.connector));
    H_CHECK(h_stop(pid, SIGTERM, 30000, NULL) == 0, "SIGTERM: not exit 0");
    all_went_in(&t);
    h_step("N+1 read again, the dead letter is one again: the delete, the "
           "dead letter and the create went in");
}

/* The first run's table requires name; the restart reads a tombstone
 * first (the key columns learnt alone), then a dead letter (its schema
 * not learnt) in a batch of its own, then a create. */
static void tombstone_first_dead_letter_batch(int pg) {
    target t;
    rd_kafka_t *p = first_run_requires_name(&t, pg, "dlbatch");
    h_produce_async(p, t.topic, 0, "{\"id\":1}", NULL, 0);
    dead_letter_then_create(p, &t);
    h_flush(p);
    rd_kafka_destroy(p);
    /* batches of one record each */
    int ok = run_caught_up(
        &t, config_file(&t, SCHEMA_MAPPING, "one.json", 1, 100), "run2.log");
    H_CHECK(ok, "run 2 never caught up: markers %lld of %lld; status: %s",
            (long long)marker_sum(&t), (long long)high_sum(&t),
            h_status_text(t.connector));
    all_went_in(&t);
}

static void scenario_sqlite_tombstone_first_dead_letter_batch(void) {
    tombstone_first_dead_letter_batch(0);
}

static void scenario_postgres_tombstone_first_dead_letter_batch(void) {
    tombstone_first_dead_letter_batch(1);
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
    {"sqlite_tombstone_first_dead_letter_batch",
     scenario_sqlite_tombstone_first_dead_letter_batch},
    {"postgres_tombstone_first_dead_letter_batch",
     scenario_postgres_tombstone_first_dead_letter_batch},
    {"sqlite_tombstone_first_dropped_rereads",
     scenario_sqlite_tombstone_first_dropped_rereads},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "cdc_schema_restart_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
