/* End-to-end change data capture (docs/configuration.md, "Change data
 * capture"): the test produces a stream of Debezium change events (bare
 * and in the JsonConverter envelope with its schema) of creates, snapshot
 * reads, updates, deletes each followed by its tombstone, primary-key
 * changes (a delete of the old key and a create of the new one) and a
 * few malformed events, computing the final state itself as it goes; then
 * `tidemark run` into SQLite or PostgreSQL, and the target table is
 * compared row for row with that state, the dead letters with the bad
 * events, and `tidemark verify` must pass. The *_sigkill scenarios kill
 * the host at the after_commit fault point mid-stream (the point's name
 * read back from the fault pipe, else inconclusive) and restart it: the
 * same final state. One ctest test per scenario, e2e.cdc.<scenario>. */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdc_common.h"

#define KEYS   60
#define EVENTS 900

typedef struct state {
    int live[KEYS + 1];
    int version[KEYS + 1]; /* the name is "n<id>-<version>" */
    int events;            /* records produced (tombstones included) */
    int tombstones;
    int bad[3]; /* envelope, schema_mismatch, null_key */
} state;

static const char *const BAD_REASONS[3] = {"envelope", "schema_mismatch",
                                           "null_key"};

/* The Connect schema of a row (id int32, name optional string). */
#define ROW_SCHEMA(field)                                                      \
    "{\"field\":\"" field "\",\"type\":\"struct\",\"optional\":true,"          \
    "\"name\":\"shop.customers.Value\",\"fields\":[{\"field\":\"id\","         \
    "\"type\":\"int32\",\"optional\":false},{\"field\":\"name\",\"type\":"     \
    "\"string\",\"optional\":true}]}"

#define ENVELOPE_SCHEMA                                                        \
    "{\"type\":\"struct\",\"name\":\"shop.customers.Envelope\",\"fields\":"    \
    "[" ROW_SCHEMA("before") "," ROW_SCHEMA(                                   \
        "after") ",{\"field\":\"source\",\"type\":\"struct\",\"optional\":"    \
                 "false,"                                                      \
                 "\"fields\":[{\"field\":\"connector\",\"type\":\"string\"},{" \
                 "\"field\":"                                                  \
                 "\"lsn\",\"type\":\"int64\",\"optional\":true}]},{\"field\":" \
                 "\"op\","                                                     \
                 "\"type\":\"string\",\"optional\":false},{\"field\":\"ts_"    \
                 "ms\",\"type\":"                                              \
                 "\"int64\",\"optional\":true}]}"

static void image(char *out, size_t n, int id, const state *s) {
    if (id == 0)
        snprintf(out, n, "null");
    else
        snprintf(out, n, "{\"id\":%d,\"name\":\"n%d-%d\"}", id, id,
                 s->version[id]);
}

/* One event of key id (its partition id % PARTITIONS), op with the before
 * and after images (0: null); every third in the Connect envelope. */
static void event(rd_kafka_t *p, const char *topic, state *s, int id,
                  const char *op, int before, int after) {
    char key[64], b[128], a[128], payload[512], value[4096];
    snprintf(key, sizeof key, "{\"id\":%d}", id);
    image(b, sizeof b, before, s);
    image(a, sizeof a, after, s);
    snprintf(payload, sizeof payload,
             "{\"before\":%s,\"after\":%s,\"source\":{\"connector\":"
             "\"postgresql\",\"lsn\":%d},\"op\":\"%s\",\"ts_ms\":%d}",
             b, a, s->events, op, 1700000000 + s->events);
    if (s->events % 3 == 0)
        snprintf(value, sizeof value, "{\"schema\":%s,\"payload\":%s}",
                 ENVELOPE_SCHEMA, payload);
    else
        snprintf(value, sizeof value, "%s", payload);
    h_produce_async(p, topic, id % PARTITIONS, key, value, strlen(value));
    s->events++;
}

static void tombstone(rd_kafka_t *p, const char *topic, state *s, int id) {
    char key[64];
    snprintf(key, sizeof key, "{\"id\":%d}", id);
    h_produce_async(p, topic, id % PARTITIONS, key, NULL, 0);
    s->events++;
    s->tombstones++;
}

static void bad_event(rd_kafka_t *p, const char *topic, state *s, int kind) {
    static const char *const BAD[3] = {
        "{\"before\":null,\"after\":{\"id\":1},\"op\":\"x\"}",
        "{\"schema\":" ENVELOPE_SCHEMA ",\"payload\":{\"before\":null,"
        "\"after\":{\"id\":\"7\",\"name\":\"a\"},\"source\":{\"connector\":"
        "\"postgresql\"},\"op\":\"c\"}}",
        "{\"before\":null,\"after\":{\"name\":\"no key\"},\"op\":\"c\"}",
    };
    h_produce_async(p, topic, kind % PARTITIONS, "{\"id\":0}", BAD[kind],
                    strlen(BAD[kind]));
    s->events++;
    s->bad[kind]++;
}

/* Produces the stream and computes the state it leaves. */
static void produce_stream(const char *topic, state *s) {
    memset(s, 0, sizeof *s);
    h_create_topic(topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int i = 0; i < EVENTS; i++) {
        if (i % 97 == 50) {
            bad_event(p, topic, s, (i / 97) % 3);
            continue;
        }
        int id = 1 + (int)(next_rand() % KEYS);
        uint64_t r = next_rand() % 8;
        if (!s->live[id]) {
            s->live[id] = 1;
            s->version[id] = i;
            event(p, topic, s, id, i < 100 ? "r" : "c", 0, id);
        } else if (r < 4) {
            /* an update (before and after carry the new name: only the
             * after image is applied) */
            s->version[id] = i;
            event(p, topic, s, id, "u", id, id);
        } else if (r < 6) {
            event(p, topic, s, id, "d", id, 0);
            s->live[id] = 0;
            tombstone(p, topic, s, id);
        } else {
            /* primary-key change to a free key: delete + tombstone of the
             * old key, create of the new one */
            int to = 0;
            for (int k = 1; k <= KEYS && !to; k++)
                if (!s->live[(id + k - 1) % KEYS + 1])
                    to = (id + k - 1) % KEYS + 1;
            if (!to)
                continue;
            event(p, topic, s, id, "d", id, 0);
            s->live[id] = 0;
            tombstone(p, topic, s, id);
            s->live[to] = 1;
            s->version[to] = i;
            event(p, topic, s, to, "c", 0, to);
        }
    }
    h_flush(p);
    rd_kafka_destroy(p);
    int live = 0;
    for (int k = 1; k <= KEYS; k++)
        live += s->live[k];
    h_step("%d records: %d keys live, %d tombstones, %d+%d+%d bad events",
           s->events, live, s->tombstones, s->bad[0], s->bad[1], s->bad[2]);
}

/* The table against the state, row for row; the dead letters against
 * the bad events; the markers' counts; verify. */
static void check_final(const target *t, const state *s, const char *cfg) {
    int live = 0;
    for (int k = 1; k <= KEYS; k++) {
        if (!s->live[k])
            continue;
        live++;
        char name[64];
        snprintf(name, sizeof name, "n%d-%d", k, s->version[k]);
        H_CHECK(count_rows(t, "WHERE id = %d AND name = '%s'", k, name) == 1,
                "key %d: not one row with name %s (rows of the key: %lld)", k,
                name, (long long)count_rows(t, "WHERE id = %d%s", k, ""));
    }
    int64_t rows = count_rows(t, "%.0d%s", 0, "");
    H_CHECK(rows == live, "the table has %lld rows, the events leave %d",
            (long long)rows, live);
    for (int k = 0; k < 3; k++) {
        const char *q = "SELECT count(*) FROM tidemark_dead_letters WHERE "
                        "connector = '%s' AND reason = '%s'";
        int64_t n = t->pg ? h_pg_int(q, t->connector, BAD_REASONS[k])
                          : h_sqlf(t->db, q, t->connector, BAD_REASONS[k]);
        H_CHECK(n == s->bad[k], "dead letters %s: %lld, produced %d",
                BAD_REASONS[k], (long long)n, s->bad[k]);
    }
    const char *fq = "SELECT sum(filtered) FROM tidemark_markers WHERE "
                     "connector = '%s'";
    int64_t filtered =
        t->pg ? h_pg_int(fq, t->connector) : h_sqlf(t->db, fq, t->connector);
    /* A tombstone is a delete of its key (it may outlive its delete
     * event on a compacted topic): applied, never filtered. */
    H_CHECK(filtered == 0, "filtered %lld, want 0 (%d tombstones, deletes)",
            (long long)filtered, s->tombstones);
    h_step("%d rows as the events left them; %d tombstones applied as deletes",
           live, s->tombstones);
    const char *args[] = {"verify", cfg, NULL};
    int rc = h_tidemark("verify.out", args);
    H_CHECK(rc == 0, "tidemark verify: exit %d\n%s", rc,
            h_read_file("verify.out"));
}

/* verify must see a row lost: the row of a live key deleted behind the
 * host's back is its last event missing (SQLite: the test's own write). */
static void verify_sees_lost_row(const target *t, const state *s,
                                 const char *cfg) {
    int k = 1;
    while (k <= KEYS && !s->live[k])
        k++;
    H_CHECK(k <= KEYS, "inconclusive: no live key");
    sqlite3 *db = NULL;
    char sql[512];
    snprintf(sql, sizeof sql, "DELETE FROM \"%s\" WHERE id = %d", t->table, k);
    int rc = sqlite3_open(t->db, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    H_CHECK(rc == SQLITE_OK && sqlite3_changes(db) == 1,
            "inconclusive: deleting key %d's row: %s", k, sqlite3_errmsg(db));
    sqlite3_close(db);
    const char *args[] = {"verify", cfg, NULL};
    rc = h_tidemark("verify-lost.out", args);
    const char *out = h_read_file("verify-lost.out");
    H_CHECK(rc != 0 && strstr(out, "the last event of key"),
            "verify with key %d's row deleted: exit %d\n%s", k, rc, out);
    h_step("verify finds key %d's row missing", k);
}

static void run_plain(int pg) {
    target t;
    state s;
    init_target(&t, pg);
    produce_stream(t.topic, &s);
    const char *cfg = config(&t);
    pid_t pid = h_spawn(cfg, "run.log");
    wait_caught_up(&t);
    h_stop_clean(pid);
    check_final(&t, &s, cfg);
    if (!pg)
        verify_sees_lost_row(&t, &s, cfg);
}

/* Killed at after_commit of the 4th commit (mid-stream), then restarted. */
static void run_sigkill(int pg) {
    target t;
    state s;
    init_target(&t, pg);
    produce_stream(t.topic, &s);
    const char *cfg = config(&t);
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    const char *env[] = {"TIDEMARK_FAULT=after_commit", "TIDEMARK_FAULT_HIT=4",
                         fp.fd_env, NULL};
    pid_t pid = h_spawn_env(cfg, "run.log", env);
    h_fault_wait(&fp, "after_commit", pid, 0);
    int rc = h_stop(pid, 0, 10000, NULL);
    H_CHECK(rc == 128 + SIGKILL, "the host exited %d, not by SIGKILL", rc);
    int64_t at = marker_sum(&t), want = high_sum(&t);
    H_CHECK(at > 0 && at < want,
            "inconclusive: the kill left the markers at %lld of %lld (want "
            "mid-stream)",
            (long long)at, (long long)want);
    h_step("killed at after_commit with the markers at %lld of %lld",
           (long long)at, (long long)want);
    pid = h_spawn(cfg, "run2.log");
    wait_caught_up(&t);
    h_stop_clean(pid);
    check_final(&t, &s, cfg);
}

/* ExtractNewRecordState's records in the Connect envelope (format
 * "connect"): __deleted marks deletes; a Decimal and a MicroTimestamp
 * converted by their logical types. 12345 is "MDk=", -12345 "z8c=", 5
 * "BQ==" (big-endian, scale 2). */
static void scenario_sqlite_flattened(void) {
    target t;
    init_target(&t, 0);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL); /* all in 0 */
    rd_kafka_t *p = h_producer(NULL, NULL);
#define FLAT_SCHEMA                                                            \
    "{\"type\":\"struct\",\"fields\":[{\"field\":\"id\",\"type\":\"int32\"},"  \
    "{\"field\":\"price\",\"type\":\"bytes\",\"optional\":true,\"name\":"      \
    "\"org.apache.kafka.connect.data.Decimal\",\"parameters\":{\"scale\":"     \
    "\"2\"}},{\"field\":\"at\",\"type\":\"int64\",\"optional\":true,"          \
    "\"name\":\"io.debezium.time.MicroTimestamp\"},{\"field\":\"__deleted\","  \
    "\"type\":\"string\",\"optional\":true}]}"
    static const struct {
        int id;
        const char *payload; /* NULL: a tombstone */
    } EV[] = {
        {1, "{\"id\":1,\"price\":\"MDk=\",\"at\":1700000000000001,"
            "\"__deleted\":\"false\"}"},
        {2, "{\"id\":2,\"price\":\"BQ==\",\"at\":null,\"__deleted\":"
            "\"false\"}"},
        {1, "{\"id\":1,\"price\":\"z8c=\",\"at\":1700000000123456,"
            "\"__deleted\":\"false\"}"},
        {2, "{\"id\":2,\"price\":\"BQ==\",\"at\":null,\"__deleted\":"
            "\"true\"}"},
        {2, NULL},
        {3, "{\"id\":3,\"price\":null,\"at\":0,\"__deleted\":\"false\"}"},
    };
    for (size_t i = 0; i < sizeof EV / sizeof EV[0]; i++) {
        char key[32], value[2048];
        snprintf(key, sizeof key, "{\"id\":%d}", EV[i].id);
        if (EV[i].payload)
            snprintf(value, sizeof value, "{\"schema\":%s,\"payload\":%s}",
                     FLAT_SCHEMA, EV[i].payload);
        h_produce_async(p, t.topic, 0, key, EV[i].payload ? value : NULL,
                        EV[i].payload ? strlen(value) : 0);
    }
    h_flush(p);
    rd_kafka_destroy(p);
    const char *cfg = config_with(
        &t, "{\"mode\": \"json\", \"format\": \"connect\", \"columns\": ["
            "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", "
            "\"key\": true}, {\"name\": \"price\", \"pointer\": \"/price\", "
            "\"type\": \"text\"}, {\"name\": \"at\", \"pointer\": \"/at\", "
            "\"type\": \"timestamp\"}]}");
    pid_t pid = h_spawn(cfg, "run.log");
    wait_caught_up(&t);
    h_stop_clean(pid);
    H_CHECK(h_sqlf(t.db, "SELECT count(*) FROM \"%s\"", t.table) == 2,
            "rows: %lld, want keys 1 and 3",
            (long long)h_sqlf(t.db, "SELECT count(*) FROM \"%s\"", t.table));
    H_CHECK(h_sqlf(t.db,
                   "SELECT count(*) FROM \"%s\" WHERE id = 1 AND price = "
                   "'-123.45' AND at = 1700000000123456",
                   t.table) == 1,
            "key 1: not its last event's price -123.45 and time");
    H_CHECK(h_sqlf(t.db,
                   "SELECT count(*) FROM \"%s\" WHERE id = 3 AND price IS NULL "
                   "AND at = 0",
                   t.table) == 1,
            "key 3: not as created");
    H_CHECK(h_sqlf(t.db,
                   "SELECT filtered FROM tidemark_markers WHERE connector = "
                   "'%s'",
                   t.connector) == 0,
            "the tombstone (a delete of key 2) is counted as filtered");
    const char *args[] = {"verify", cfg, NULL};
    int rc = h_tidemark("verify.out", args);
    H_CHECK(rc == 0, "tidemark verify: exit %d\n%s", rc,
            h_read_file("verify.out"));
}

/* ---- a refused event among its key's events in one batch ---- */

/* Each event as if applied one at a time in offset order, a refused one a
 * dead letter without effect: key 1 created then refused an update keeps
 * its row; key 2 (stored by an earlier batch) deleted then refused a
 * create has no row; key 3 created, deleted, refused a create has none;
 * key 4's refused create is a dead letter though its update is applied.
 * Envelope dead letters before and after them carry the batch id: all in
 * one batch, else inconclusive. */
static void run_refused_in_batch(int pg) {
    target t;
    init_target(&t, pg);
    create_checked_table(&t);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL); /* all in 0 */
    rd_kafka_t *p = h_producer(NULL, NULL);
    static const char BAD[] = "{\"before\":null,\"after\":null,\"op\":\"x\"}";
    plain_event(p, &t, 2, "c", "v0"); /* offset 0: a batch of its own */
    h_produce_async(p, t.topic, 0, "{\"id\":0}", BAD, strlen(BAD));
    plain_event(p, &t, 1, "c", "good");
    plain_event(p, &t, 1, "u", "bad");
    plain_event(p, &t, 2, "d", NULL);
    plain_event(p, &t, 2, "c", "bad");
    plain_event(p, &t, 3, "c", "v0");
    plain_event(p, &t, 3, "d", NULL);
    plain_event(p, &t, 3, "c", "bad");
    plain_event(p, &t, 4, "c", "bad");
    plain_event(p, &t, 4, "u", "v1");
    h_produce_async(p, t.topic, 0, "{\"id\":0}", BAD, strlen(BAD));
    h_flush(p);
    rd_kafka_destroy(p);
    const char *cfg = config(&t);
    pid_t pid = h_spawn(cfg, "run.log");
    wait_caught_up(&t);
    h_stop_clean(pid);
    const char *bq = "SELECT count(DISTINCT batch_id) FROM "
                     "tidemark_dead_letters WHERE connector = '%s' AND "
                     "\"offset\" BETWEEN 1 AND 11";
    int64_t batches =
        pg ? h_pg_int(bq, t.connector) : h_sqlf(t.db, bq, t.connector);
    H_CHECK(batches == 1,
            "inconclusive: offsets 1 to 11 in %lld batches, not one",
            (long long)batches);
    /* PostgreSQL writes each key's last event of a run (docs/sinks/
     * postgres.md, step 4): key 4's refused create (offset 9) is
     * superseded by its update (10) in the write that holds both, so the
     * table never judges it: applied, not a dead letter. The other refused
     * events are each their key's last in a run and are judged. */
    const char *rq = "SELECT count(*) FROM tidemark_dead_letters WHERE "
                     "connector = '%s' AND reason = 'rejected' AND \"offset\" "
                     "IN (3, 5, 8%s)";
    const char *nine = pg ? "" : ", 9";
    int64_t rejected = pg ? h_pg_int(rq, t.connector, nine)
                          : h_sqlf(t.db, rq, t.connector, nine);
    H_CHECK(rejected == (pg ? 3 : 4),
            "rejected dead letters at 3, 5, 8%s: %lld", nine,
            (long long)rejected);
    const char *aq = "SELECT count(*) FROM tidemark_dead_letters WHERE "
                     "connector = '%s'";
    int64_t all =
        pg ? h_pg_int(aq, t.connector) : h_sqlf(t.db, aq, t.connector);
    H_CHECK(all == 2 + (pg ? 3 : 4),
            "%lld dead letters, want the 2 bad events and the rejected ones",
            (long long)all);
    H_CHECK(count_rows(&t, "WHERE id = %d AND name = '%s'", 1, "good") == 1,
            "key 1: its create lost with its refused update (rows: %lld)",
            (long long)count_rows(&t, "WHERE id = %d%s", 1, ""));
    H_CHECK(count_rows(&t, "WHERE id = %d%s", 2, "") == 0,
            "key 2: its delete lost with the refused create after it");
    H_CHECK(count_rows(&t, "WHERE id = %d%s", 3, "") == 0,
            "key 3: a row left by create, delete, refused create");
    H_CHECK(count_rows(&t, "WHERE id = %d AND name = '%s'", 4, "v1") == 1,
            "key 4: not updated after its refused create");
    H_CHECK(count_rows(&t, "%.0d%s", 0, "") == 2, "the table has %lld rows",
            (long long)count_rows(&t, "%.0d%s", 0, ""));
    h_step("one batch: the refused events dead letters, the others applied "
           "in order%s",
           pg ? " (or superseded in their write)" : "");
    /* verify: a refused event (a dead letter) is no event of its key */
    const char *args[] = {"verify", cfg, NULL};
    int rc = h_tidemark("verify.out", args);
    H_CHECK(rc == 0, "tidemark verify after the refusals: exit %d\n%s", rc,
            h_read_file("verify.out"));
    if (pg)
        return;
    /* and key 1's row lost behind the host's back is seen: its last event
     * is its create (offset 2), not the refused update */
    sqlite3 *db = NULL;
    char sql[256];
    snprintf(sql, sizeof sql, "DELETE FROM \"%s\" WHERE id = 1", t.table);
    rc = sqlite3_open(t.db, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    H_CHECK(rc == SQLITE_OK && sqlite3_changes(db) == 1,
            "inconclusive: deleting key 1's row: %s", sqlite3_errmsg(db));
    sqlite3_close(db);
    rc = h_tidemark("verify-lost.out", args);
    const char *out = h_read_file("verify-lost.out");
    H_CHECK(rc != 0 && strstr(out, "offset 2: the last event of key"),
            "verify with key 1's row deleted: exit %d\n%s", rc, out);
    h_step("verify: OK after the refusals, FAIL with key 1's row lost");
}

/* A delete without before keys by the record key: a Date key (days)
 * must delete its row, whether the key is in its Connect envelope or bare
 * (then the event's row schema types it). */
static void scenario_sqlite_delete_by_date_key(void) {
    target t;
    init_target(&t, 0);
    h_create_topic(t.topic, PARTITIONS, NULL, NULL); /* all in 0 */
    rd_kafka_t *p = h_producer(NULL, NULL);
#define DAY_ROW(field)                                                         \
    "{\"field\":\"" field "\",\"type\":\"struct\",\"optional\":true,"          \
    "\"fields\":[{\"field\":\"day\",\"type\":\"int32\",\"name\":"              \
    "\"io.debezium.time.Date\"},{\"field\":\"name\",\"type\":\"string\","      \
    "\"optional\":true}]}"
#define DAY_EVENT(payload)                                                     \
    "{\"schema\":{\"type\":\"struct\",\"fields\":[" DAY_ROW(                   \
        "before") "," DAY_ROW("after") ",{\"field\":\"op\",\"type\":"          \
                                       "\"string\"}]},\"payload\":" payload    \
                                       "}"
    static const char *const EV[][2] = {
        {"{\"day\":19000}",
         DAY_EVENT("{\"before\":null,\"after\":{\"day\":19000,\"name\":"
                   "\"a\"},\"op\":\"c\"}")},
        {"{\"day\":19001}",
         DAY_EVENT("{\"before\":null,\"after\":{\"day\":19001,\"name\":"
                   "\"b\"},\"op\":\"c\"}")},
        {"{\"schema\":{\"type\":\"struct\",\"fields\":[{\"field\":\"day\","
         "\"type\":\"int32\",\"name\":\"io.debezium.time.Date\"}]},"
         "\"payload\":{\"day\":19000}}",
         DAY_EVENT("{\"before\":null,\"after\":null,\"op\":\"d\"}")},
        {"{\"day\":19001}",
         DAY_EVENT("{\"before\":null,\"after\":null,\"op\":\"d\"}")},
    };
    for (size_t i = 0; i < sizeof EV / sizeof EV[0]; i++)
        h_produce_async(p, t.topic, 0, EV[i][0], EV[i][1], strlen(EV[i][1]));
    h_flush(p);
    rd_kafka_destroy(p);
    const char *cfg = config_with(
        &t, "{\"mode\": \"json\", \"format\": \"debezium\", \"columns\": ["
            "{\"name\": \"day\", \"pointer\": \"/day\", \"type\": "
            "\"timestamp\", \"key\": true}, {\"name\": \"name\", \"pointer\": "
            "\"/name\", \"type\": \"text\"}]}");
    pid_t pid = h_spawn(cfg, "run.log");
    wait_caught_up(&t);
    h_stop_clean(pid);
    int64_t rows = h_sqlf(t.db, "SELECT count(*) FROM \"%s\"", t.table);
    H_CHECK(rows == 0, "%lld rows left after deleting both Date keys",
            (long long)rows);
    H_CHECK(h_sqlf(t.db,
                   "SELECT count(*) FROM tidemark_dead_letters WHERE "
                   "connector = '%s'",
                   t.connector) == 0,
            "dead letters among the Date key events");
    h_step("both Date keys deleted by their record keys");
}

/* A delete the table refuses (a BEFORE DELETE trigger: SQLite's
 * RAISE(ABORT), PostgreSQL's RAISE EXCEPTION, SQLSTATE P0001, or its
 * ASSERT, P0004) is a dead letter "rejected" without effect, like a
 * refused insert; the connector goes on (the event after it applied). The
 * row is stored by a run of its own first, so the delete meets it
 * whatever a batch collapses. pg_refuse: the PL/pgSQL statement that
 * refuses, NULL for SQLite. */
static void run_delete_refused(const char *pg_refuse) {
    int pg = pg_refuse != NULL;
    target t;
    init_target(&t, pg);
    create_checked_table(&t);
    char sql[1024];
    if (pg) {
        snprintf(sql, sizeof sql,
                 "CREATE FUNCTION \"%s_keep\"() RETURNS trigger LANGUAGE "
                 "plpgsql AS $$BEGIN %s; END$$; "
                 "CREATE TRIGGER \"%s_keep\" BEFORE DELETE ON \"%s\" FOR "
                 "EACH ROW EXECUTE FUNCTION \"%s_keep\"()",
                 t.table, pg_refuse, t.table, t.table, t.table);
        pg_do(sql);
    } else {
        snprintf(sql, sizeof sql,
                 "CREATE TRIGGER \"%s_keep\" BEFORE DELETE ON \"%s\" BEGIN "
                 "SELECT RAISE(ABORT, 'rows are kept'); END",
                 t.table, t.table);
        sqlite3 *db = NULL;
        int rc = sqlite3_open(t.db, &db);
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        H_CHECK(rc == SQLITE_OK, "inconclusive: trigger: %s",
                sqlite3_errmsg(db));
        sqlite3_close(db);
    }
    h_create_topic(t.topic, PARTITIONS, NULL, NULL); /* all in 0 */
    rd_kafka_t *p = h_producer(NULL, NULL);
    plain_event(p, &t, 1, "c", "a");
    h_flush(p);
    const char *cfg = config(&t);
    run_until_caught_up(&t, cfg, "run.log");
    H_CHECK(count_rows(&t, "WHERE id = %d AND name = '%s'", 1, "a") == 1,
            "inconclusive: key 1 not stored by the first run");
    plain_event(p, &t, 1, "d", NULL);
    plain_event(p, &t, 2, "c", "b");
    h_flush(p);
    rd_kafka_destroy(p);
    run_until_caught_up(&t, cfg, "run2.log");
    const char *q = "SELECT count(*) FROM tidemark_dead_letters WHERE "
                    "connector = '%s' AND reason = 'rejected' AND \"offset\" "
                    "= 1 AND detail LIKE '%%rows are kept%%'";
    H_CHECK((pg ? h_pg_int(q, t.connector) : h_sqlf(t.db, q, t.connector)) == 1,
            "the refused delete is not a dead letter rejected");
    H_CHECK(count_rows(&t, "WHERE id = %d AND name = '%s'", 1, "a") == 1,
            "key 1: its row is gone though the delete was refused");
    H_CHECK(count_rows(&t, "WHERE id = %d AND name = '%s'", 2, "b") == 1,
            "key 2: the event after the refused delete not applied");
    h_step("the refused delete a dead letter, the connector went on");
}

static void scenario_sqlite_delete_refused(void) {
    run_delete_refused(NULL);
}
static void scenario_postgres_delete_refused(void) {
    run_delete_refused("RAISE EXCEPTION 'rows are kept'");
}
/* ASSERT (SQLSTATE P0004, PL/pgSQL's class P0 as RAISE's P0001). */
static void scenario_postgres_assert_refused(void) {
    run_delete_refused("ASSERT false, 'rows are kept'");
}

static void scenario_sqlite(void) {
    run_plain(0);
}
static void scenario_postgres(void) {
    run_plain(1);
}
static void scenario_sqlite_sigkill(void) {
    run_sigkill(0);
}
static void scenario_postgres_sigkill(void) {
    run_sigkill(1);
}
static void scenario_sqlite_refused_in_batch(void) {
    run_refused_in_batch(0);
}
static void scenario_postgres_refused_in_batch(void) {
    run_refused_in_batch(1);
}

static const h_scenario SCENARIOS[] = {
    {"sqlite", scenario_sqlite},
    {"postgres", scenario_postgres},
    {"sqlite_sigkill", scenario_sqlite_sigkill},
    {"postgres_sigkill", scenario_postgres_sigkill},
    {"sqlite_flattened", scenario_sqlite_flattened},
    {"sqlite_refused_in_batch", scenario_sqlite_refused_in_batch},
    {"sqlite_delete_by_date_key", scenario_sqlite_delete_by_date_key},
    {"sqlite_delete_refused", scenario_sqlite_delete_refused},
    {"postgres_refused_in_batch", scenario_postgres_refused_in_batch},
    {"postgres_delete_refused", scenario_postgres_delete_refused},
    {"postgres_assert_refused", scenario_postgres_assert_refused},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "cdc_e2e", SCENARIOS, H_NSCENARIOS(SCENARIOS));
}
