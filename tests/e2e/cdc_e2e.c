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
#include <libpq-fe.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define KEYS       60
#define EVENTS     900
#define PARTITIONS 2

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

static uint64_t rng = 0x5eed;
static uint64_t next_rand(void) {
    rng += 0x9E3779B97F4A7C15ull;
    uint64_t z = rng;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

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

/* ---- the two sinks ---- */

typedef struct target {
    int pg;
    char db[1024]; /* SQLite file */
    char table[128];
    char connector[128];
    char topic[128];
} target;

static int64_t count_rows(const target *t, const char *fmt_where, int a,
                          const char *b) {
    char where[512];
    snprintf(where, sizeof where, fmt_where, a, b);
    return t->pg ? h_pg_int("SELECT count(*) FROM \"%s\" %s", t->table, where)
                 : h_sqlf(t->db, "SELECT count(*) FROM \"%s\" %s", t->table,
                          where);
}

static int64_t marker_sum(const target *t) {
    const char *q = "SELECT coalesce(sum(next_offset), -1) FROM "
                    "tidemark_markers WHERE connector = '%s' AND topic = '%s'";
    return t->pg ? h_pg_int(q, t->connector, t->topic)
                 : h_sqlf(t->db, q, t->connector, t->topic);
}

static int64_t high_sum(const target *t) {
    int64_t sum = 0;
    for (int part = 0; part < PARTITIONS; part++) {
        int64_t lo, hi;
        h_watermarks(t->topic, part, &lo, &hi);
        sum += hi;
    }
    return sum;
}

static void wait_caught_up(const target *t) {
    int64_t want = high_sum(t), t0 = h_now_ms(), at;
    while ((at = marker_sum(t)) != want) {
        H_CHECK(h_now_ms() - t0 < 120000, "markers at %lld of %lld",
                (long long)at, (long long)want);
        h_sleep_ms(100);
    }
}

#define DEBEZIUM_MAPPING                                                       \
    "{\"mode\": \"json\", \"format\": \"debezium\", \"columns\": ["            \
    "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", \"key\": "    \
    "true}, {\"name\": \"name\", \"pointer\": \"/name\", \"type\": "           \
    "\"text\"}]}"

/* The connector's config into the work dir's FILE: batches of up to
 * MAX_RECORDS records, cut after MAX_WAIT_MS. */
static const char *config_file(const target *t, const char *mapping,
                               const char *file, int max_records,
                               int max_wait_ms) {
    char sink[2048], text[8192];
    if (t->pg)
        snprintf(sink, sizeof sink,
                 "{\"plugin\": \"postgres\", \"settings\": {\"conninfo\": "
                 "\"${env:TIDEMARK_PG_CONNINFO}\", \"table\": \"%s\", "
                 "\"mode\": \"upsert\"}}",
                 t->table);
    else
        snprintf(sink, sizeof sink,
                 "{\"plugin\": \"sqlite\", \"settings\": {\"path\": \"%s\", "
                 "\"table\": \"%s\", \"mode\": \"upsert\"}}",
                 t->db, t->table);
    snprintf(text, sizeof text,
             "{\"name\": \"%s\",\n"
             " \"kafka\": {\"bootstrap_servers\": \"%s\", \"topics\": "
             "[\"%s\"], \"start\": \"earliest\", \"static_membership\": "
             "false, \"properties\": {\"session.timeout.ms\": \"6000\", "
             "\"heartbeat.interval.ms\": \"500\"}},\n"
             " \"batch\": {\"max_records\": %d, \"max_wait_ms\": %d},\n"
             " \"sink\": %s,\n"
             " \"state_dir\": \"%s/state\",\n"
             " \"mapping\": %s}\n",
             t->connector, h_bootstrap(), t->topic, max_records, max_wait_ms,
             sink, h_workdir(), mapping);
    return h_write_file(file, text);
}

static const char *config_with(const target *t, const char *mapping) {
    return config_file(t, mapping, "cdc.json", 40, 100);
}

static const char *config(const target *t) {
    return config_with(t, DEBEZIUM_MAPPING);
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
    H_CHECK(filtered == s->tombstones, "filtered %lld, tombstones %d",
            (long long)filtered, s->tombstones);
    h_step("%d rows as the events left them; %d tombstones filtered", live,
           s->tombstones);
    const char *args[] = {"verify", cfg, NULL};
    int rc = h_tidemark("verify.out", args);
    H_CHECK(rc == 0, "tidemark verify: exit %d\n%s", rc,
            h_read_file("verify.out"));
}

static void init_target(target *t, int pg) {
    memset(t, 0, sizeof *t);
    t->pg = pg;
    snprintf(t->topic, sizeof t->topic, "%s", h_name("cdc-events"));
    snprintf(t->connector, sizeof t->connector, "%s", h_name("cdc"));
    snprintf(t->table, sizeof t->table, "%s", h_name("cdc_customers"));
    for (char *c = t->table; *c; c++)
        if (*c == '-')
            *c = '_';
    snprintf(t->db, sizeof t->db, "%s/cdc.db", h_workdir());
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
                   t.connector) == 1,
            "the tombstone is not counted as filtered");
    const char *args[] = {"verify", cfg, NULL};
    int rc = h_tidemark("verify.out", args);
    H_CHECK(rc == 0, "tidemark verify: exit %d\n%s", rc,
            h_read_file("verify.out"));
}

/* ---- a refused event among its key's events in one batch ---- */

/* Runs SQL (statements without results) on PostgreSQL; any error fails
 * the test as inconclusive. */
static void pg_do(const char *sql) {
    static PGconn *conn;
    if (!conn) {
        const char *ci = getenv("TIDEMARK_PG_CONNINFO");
        H_CHECK(ci && *ci, "TIDEMARK_PG_CONNINFO is not set");
        conn = PQconnectdb(ci);
        H_CHECK(PQstatus(conn) == CONNECTION_OK, "PostgreSQL: %s",
                PQerrorMessage(conn));
    }
    PGresult *r = PQexec(conn, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    H_CHECK(ok, "inconclusive: %s: %s", sql, PQerrorMessage(conn));
}

/* Creates the target table (id, name) before the host does, NAME_SQL
 * the name column's type and constraint, and upsert's unique index on
 * the key. */
static void create_table_as(const target *t, const char *name_sql) {
    const char *ddl =
        "CREATE TABLE \"%s\" (id %s, name %s, "
        "_tm_topic text NOT NULL, _tm_partition integer NOT NULL, "
        "_tm_offset bigint NOT NULL, _tm_identity text); CREATE UNIQUE "
        "INDEX \"%s_id\" ON \"%s\" (id)";
    char sql[1024];
    snprintf(sql, sizeof sql, ddl, t->table, t->pg ? "bigint" : "INTEGER",
             name_sql, t->table, t->table);
    if (t->pg) {
        pg_do(sql);
        return;
    }
    sqlite3 *db = NULL;
    int rc = sqlite3_open(t->db, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    H_CHECK(rc == SQLITE_OK, "inconclusive: creating %s: %s", t->table,
            sqlite3_errmsg(db));
    sqlite3_close(db);
}

/* With a CHECK refusing the name "bad". */
static void create_checked_table(const target *t) {
    create_table_as(t, "text CHECK (name <> 'bad')");
}

/* One bare Debezium event of key id into partition 0 (name NULL: a
 * delete). */
static void plain_event(rd_kafka_t *p, const target *t, int id, const char *op,
                        const char *name) {
    char key[64], value[512];
    snprintf(key, sizeof key, "{\"id\":%d}", id);
    if (name)
        snprintf(value, sizeof value,
                 "{\"before\":null,\"after\":{\"id\":%d,\"name\":\"%s\"},"
                 "\"op\":\"%s\"}",
                 id, name, op);
    else
        snprintf(value, sizeof value,
                 "{\"before\":{\"id\":%d,\"name\":null},\"after\":null,"
                 "\"op\":\"%s\"}",
                 id, op);
    h_produce_async(p, t->topic, 0, key, value, strlen(value));
}

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

/* Runs the host on T's topic until it caught up, then stops it. */
static void run_until_caught_up(const target *t, const char *cfg,
                                const char *log) {
    pid_t pid = h_spawn(cfg, log);
    wait_caught_up(t);
    h_stop_clean(pid);
}

/* A delete the table refuses (a BEFORE DELETE trigger: SQLite's
 * RAISE(ABORT), PostgreSQL's RAISE EXCEPTION, SQLSTATE P0001) is a dead
 * letter "rejected" without effect, like a refused insert; the connector
 * goes on (the event after it applied). The row is stored by a run of its
 * own first, so the delete meets it whatever a batch collapses. */
static void run_delete_refused(int pg) {
    target t;
    init_target(&t, pg);
    create_checked_table(&t);
    char sql[1024];
    if (pg) {
        snprintf(sql, sizeof sql,
                 "CREATE FUNCTION \"%s_keep\"() RETURNS trigger LANGUAGE "
                 "plpgsql AS $$BEGIN RAISE EXCEPTION 'rows are kept'; END$$; "
                 "CREATE TRIGGER \"%s_keep\" BEFORE DELETE ON \"%s\" FOR "
                 "EACH ROW EXECUTE FUNCTION \"%s_keep\"()",
                 t.table, t.table, t.table, t.table);
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
    run_delete_refused(0);
}
static void scenario_postgres_delete_refused(void) {
    run_delete_refused(1);
}

/* ---- change events across keys, in one batch (PostgreSQL) ---- */

/* A target of its own in the scenario (SUFFIX on its names). */
static void init_target_as(target *t, int pg, const char *suffix) {
    init_target(t, pg);
    size_t n = strlen(t->table);
    snprintf(t->table + n, sizeof t->table - n, "_%s", suffix);
    n = strlen(t->topic);
    snprintf(t->topic + n, sizeof t->topic - n, "-%s", suffix);
    n = strlen(t->connector);
    snprintf(t->connector + n, sizeof t->connector - n, "-%s", suffix);
}

/* A batch waits this long for more records: all of a scenario's few
 * events, produced before the host starts, make one batch. */
#define ONE_BATCH_WAIT_MS 2000

/* A malformed event: a dead letter "envelope" that carries its batch id. */
static void bad_marker(rd_kafka_t *p, const target *t) {
    static const char BAD[] = "{\"before\":null,\"after\":null,\"op\":\"x\"}";
    h_produce_async(p, t->topic, 0, "{\"id\":0}", BAD, strlen(BAD));
}

static int64_t dead_letters(const target *t, const char *reason) {
    const char *q = "SELECT count(*) FROM tidemark_dead_letters WHERE "
                    "connector = '%s' AND reason = '%s'";
    return t->pg ? h_pg_int(q, t->connector, reason)
                 : h_sqlf(t->db, q, t->connector, reason);
}

/* The bad markers at offsets FIRST and LAST of partition 0 are dead
 * letters of one batch, so every event between them was in it; else the
 * scenario is inconclusive. */
static void check_one_batch(const target *t, int64_t first, int64_t last) {
    const char *q = "SELECT count(*) * 10 + count(DISTINCT batch_id) FROM "
                    "tidemark_dead_letters WHERE connector = '%s' AND "
                    "\"partition\" = 0 AND \"offset\" IN (%lld, %lld)";
    int64_t n =
        t->pg
            ? h_pg_int(q, t->connector, (long long)first, (long long)last)
            : h_sqlf(t->db, q, t->connector, (long long)first, (long long)last);
    H_CHECK(n == 21,
            "inconclusive: offsets %lld to %lld not in one batch (%lld dead "
            "letters in %lld batches)",
            (long long)first, (long long)last, (long long)(n / 10),
            (long long)(n % 10));
}

static void check_verify(const char *cfg) {
    const char *args[] = {"verify", cfg, NULL};
    int rc = h_tidemark("verify.out", args);
    H_CHECK(rc == 0, "tidemark verify: exit %d\n%s", rc,
            h_read_file("verify.out"));
}

/* A primary-key change moving a UNIQUE value to another key, in one
 * batch: create(1, x), delete(1), its tombstone, create(2, x). One at a
 * time in offset order every event succeeds and the table ends with row 2;
 * the events of different keys must not be reordered to make the create
 * of 2 meet the row of 1. */
static void scenario_postgres_unique_across_keys(void) {
    target t;
    init_target(&t, 1);
    create_table_as(&t, "text UNIQUE");
    h_create_topic(t.topic, PARTITIONS, NULL, NULL); /* all in 0 */
    rd_kafka_t *p = h_producer(NULL, NULL);
    bad_marker(p, &t);                                     /* 0 */
    plain_event(p, &t, 1, "c", "x");                       /* 1 */
    plain_event(p, &t, 1, "d", NULL);                      /* 2 */
    h_produce_async(p, t.topic, 0, "{\"id\":1}", NULL, 0); /* 3 */
    plain_event(p, &t, 2, "c", "x");                       /* 4 */
    bad_marker(p, &t);                                     /* 5 */
    h_flush(p);
    rd_kafka_destroy(p);
    const char *cfg =
        config_file(&t, DEBEZIUM_MAPPING, "cdc.json", 40, ONE_BATCH_WAIT_MS);
    run_until_caught_up(&t, cfg, "run.log");
    check_one_batch(&t, 0, 5);
    H_CHECK(dead_letters(&t, "rejected") == 0,
            "%lld events rejected; one at a time none is",
            (long long)dead_letters(&t, "rejected"));
    H_CHECK(count_rows(&t, "WHERE id = %d AND name = '%s'", 2, "x") == 1,
            "key 2: not created with name x (rows of the key: %lld)",
            (long long)count_rows(&t, "WHERE id = %d%s", 2, ""));
    H_CHECK(count_rows(&t, "%.0d%s", 0, "") == 1, "the table has %lld rows",
            (long long)count_rows(&t, "%.0d%s", 0, ""));
    check_verify(cfg);
    h_step("the UNIQUE value moved from key 1 to key 2 in one batch");
}

/* Names swapped between two stored keys through a third name, in one
 * batch: u(1, t), u(2, x), u(1, y) with 1 holding x and 2 holding y.
 * Valid one at a time; the write of each key's last event alone (2 takes
 * x while 1 still holds it) is refused by the UNIQUE name, so the batch
 * must be applied in smaller runs (the sink's debug log shows a refused
 * write, else inconclusive): no dead letter, 1 holds y and 2 holds x. */
static void scenario_postgres_swap_in_batch(void) {
    target t;
    init_target(&t, 1);
    create_table_as(&t, "text UNIQUE");
    h_create_topic(t.topic, PARTITIONS, NULL, NULL); /* all in 0 */
    rd_kafka_t *p = h_producer(NULL, NULL);
    plain_event(p, &t, 1, "c", "x");
    plain_event(p, &t, 2, "c", "y");
    h_flush(p);
    const char *cfg =
        config_file(&t, DEBEZIUM_MAPPING, "cdc.json", 40, ONE_BATCH_WAIT_MS);
    run_until_caught_up(&t, cfg, "run.log");
    H_CHECK(count_rows(&t, "WHERE id = %d AND name = '%s'", 1, "x") == 1 &&
                count_rows(&t, "WHERE id = %d AND name = '%s'", 2, "y") == 1,
            "inconclusive: keys 1 and 2 not stored by the first run");
    bad_marker(p, &t);               /* 2 */
    plain_event(p, &t, 1, "u", "t"); /* 3 */
    plain_event(p, &t, 2, "u", "x"); /* 4 */
    plain_event(p, &t, 1, "u", "y"); /* 5 */
    bad_marker(p, &t);               /* 6 */
    h_flush(p);
    rd_kafka_destroy(p);
    const char *env[] = {"TIDEMARK_LOG_LEVEL=debug", NULL};
    pid_t pid = h_spawn_env(cfg, "run2.log", env);
    wait_caught_up(&t);
    h_stop_clean(pid);
    check_one_batch(&t, 2, 6);
    H_CHECK(strstr(h_read_file("run2.log"), "records refused"),
            "inconclusive: no write of the batch was refused, so its "
            "fallback was not exercised");
    H_CHECK(dead_letters(&t, "rejected") == 0,
            "%lld events rejected; one at a time none is",
            (long long)dead_letters(&t, "rejected"));
    H_CHECK(count_rows(&t, "WHERE id = %d AND name = '%s'", 1, "y") == 1,
            "key 1: not named y (rows of the key: %lld)",
            (long long)count_rows(&t, "WHERE id = %d%s", 1, ""));
    H_CHECK(count_rows(&t, "WHERE id = %d AND name = '%s'", 2, "x") == 1,
            "key 2: not named x (rows of the key: %lld)",
            (long long)count_rows(&t, "WHERE id = %d%s", 2, ""));
    H_CHECK(count_rows(&t, "%.0d%s", 0, "") == 2, "the table has %lld rows",
            (long long)count_rows(&t, "%.0d%s", 0, ""));
    check_verify(cfg);
    h_step("names swapped between keys in one batch, through smaller writes");
}

#define CODE_MAPPING                                                           \
    "{\"mode\": \"json\", \"format\": \"debezium\", \"columns\": ["            \
    "{\"name\": \"code\", \"pointer\": \"/code\", \"type\": \"text\", "        \
    "\"key\": true}, {\"name\": \"name\", \"pointer\": \"/name\", \"type\": "  \
    "\"text\"}]}"

/* One bare Debezium event of text key CODE (name NULL: a delete). */
static void code_event(rd_kafka_t *p, const target *t, const char *code,
                       const char *op, const char *name) {
    char key[64], value[512];
    snprintf(key, sizeof key, "{\"code\":\"%s\"}", code);
    if (name)
        snprintf(value, sizeof value,
                 "{\"before\":null,\"after\":{\"code\":\"%s\",\"name\":"
                 "\"%s\"},\"op\":\"%s\"}",
                 code, name, op);
    else
        snprintf(value, sizeof value,
                 "{\"before\":{\"code\":\"%s\",\"name\":null},\"after\":null,"
                 "\"op\":\"%s\"}",
                 code, op);
    h_produce_async(p, t->topic, 0, key, value, strlen(value));
}

/* A key column under a case-insensitive (non-deterministic) collation:
 * "A" and "a" are one key to the table, so one batch's events of either
 * spelling apply to one row, in offset order, the last one's image (its
 * spelling too) in the row: c(A) u(A) d(a) leaves no row; c(B) u(b) one
 * row "b" with u's name; c(C) d(c) c(C) one row "C". */
static void scenario_postgres_collation(void) {
    target t;
    init_target(&t, 1);
    char sql[1024];
    snprintf(sql, sizeof sql,
             "CREATE COLLATION \"%s_ci\" (provider = icu, locale = "
             "'und-u-ks-level2', deterministic = false); CREATE TABLE \"%s\" "
             "(code text COLLATE \"%s_ci\", name text, _tm_topic text NOT "
             "NULL, _tm_partition integer NOT NULL, _tm_offset bigint NOT "
             "NULL, _tm_identity text); CREATE UNIQUE INDEX \"%s_code\" ON "
             "\"%s\" (code)",
             t.table, t.table, t.table, t.table, t.table);
    pg_do(sql);
    H_CHECK(h_pg_int("SELECT count(*) FROM (VALUES ('A' COLLATE \"%s_ci\")) "
                     "v(c) WHERE c = 'a'",
                     t.table) == 1,
            "inconclusive: the collation does not equate A and a");
    h_create_topic(t.topic, PARTITIONS, NULL, NULL); /* all in 0 */
    rd_kafka_t *p = h_producer(NULL, NULL);
    bad_marker(p, &t);                 /* 0 */
    code_event(p, &t, "A", "c", "a1"); /* 1 */
    code_event(p, &t, "A", "u", "a2"); /* 2 */
    code_event(p, &t, "a", "d", NULL); /* 3 */
    code_event(p, &t, "B", "c", "b1"); /* 4 */
    code_event(p, &t, "b", "u", "b2"); /* 5 */
    code_event(p, &t, "C", "c", "c1"); /* 6 */
    code_event(p, &t, "c", "d", NULL); /* 7 */
    code_event(p, &t, "C", "c", "c3"); /* 8 */
    bad_marker(p, &t);                 /* 9 */
    h_flush(p);
    rd_kafka_destroy(p);
    const char *cfg =
        config_file(&t, CODE_MAPPING, "cdc.json", 40, ONE_BATCH_WAIT_MS);
    run_until_caught_up(&t, cfg, "run.log");
    check_one_batch(&t, 0, 9);
    H_CHECK(dead_letters(&t, "rejected") == 0, "%lld events rejected",
            (long long)dead_letters(&t, "rejected"));
    const char *q = "SELECT count(*) FROM \"%s\" WHERE code = '%s'";
    H_CHECK(h_pg_int(q, t.table, "a") == 0,
            "key a: a row left after c(A) u(A) d(a) (rows: %lld)",
            (long long)h_pg_int(q, t.table, "a"));
    H_CHECK(h_pg_int("SELECT count(*) FROM \"%s\" WHERE code COLLATE \"C\" = "
                     "'b' AND name = 'b2'",
                     t.table) == 1 &&
                h_pg_int(q, t.table, "b") == 1,
            "key b: not one row \"b\" named b2 after c(B) u(b) (rows: %lld)",
            (long long)h_pg_int(q, t.table, "b"));
    H_CHECK(h_pg_int("SELECT count(*) FROM \"%s\" WHERE code COLLATE \"C\" = "
                     "'C' AND name = 'c3'",
                     t.table) == 1 &&
                h_pg_int(q, t.table, "c") == 1,
            "key c: not one row \"C\" named c3 after c(C) d(c) c(C) (rows: "
            "%lld)",
            (long long)h_pg_int(q, t.table, "c"));
    H_CHECK(h_pg_int("SELECT count(*) FROM \"%s\"", t.table) == 2,
            "the table has %lld rows, want 2",
            (long long)h_pg_int("SELECT count(*) FROM \"%s\"", t.table));
    h_step("one key per the collation's equality, the last event's row");
}

#define HOT_EVENTS 10000

/* HOT_EVENTS events in one batch, between two bad markers: HOT, one key
 * created then updated again and again; else as many keys created once.
 * Returns the milliseconds from the host's start to its markers caught
 * up (startup included, as for both kinds alike; printed, never
 * asserted). */
static int64_t run_big_batch(int hot) {
    target t;
    init_target_as(&t, 1, hot ? "hot" : "wide");
    h_create_topic(t.topic, PARTITIONS, NULL, NULL); /* all in 0 */
    rd_kafka_t *p = h_producer(NULL, NULL);
    bad_marker(p, &t);
    char name[32];
    for (int i = 0; i < HOT_EVENTS; i++) {
        snprintf(name, sizeof name, "v%d", i);
        plain_event(p, &t, hot ? 1 : i + 1, hot && i > 0 ? "u" : "c", name);
    }
    bad_marker(p, &t);
    h_flush(p);
    rd_kafka_destroy(p);
    const char *cfg =
        config_file(&t, DEBEZIUM_MAPPING, hot ? "hot.json" : "wide.json",
                    HOT_EVENTS + 2, 5000);
    int64_t t0 = h_now_ms();
    pid_t pid = h_spawn(cfg, hot ? "hot.log" : "wide.log");
    wait_caught_up(&t);
    int64_t took = h_now_ms() - t0;
    h_stop_clean(pid);
    check_one_batch(&t, 0, HOT_EVENTS + 1);
    H_CHECK(dead_letters(&t, "rejected") == 0, "%lld events rejected",
            (long long)dead_letters(&t, "rejected"));
    if (hot) {
        snprintf(name, sizeof name, "v%d", HOT_EVENTS - 1);
        H_CHECK(count_rows(&t, "WHERE id = %d AND name = '%s'", 1, name) == 1,
                "key 1: not its last event's name %s", name);
        H_CHECK(count_rows(&t, "%.0d%s", 0, "") == 1, "%lld rows, want 1",
                (long long)count_rows(&t, "%.0d%s", 0, ""));
    } else {
        H_CHECK(count_rows(&t, "%.0d%s", 0, "") == HOT_EVENTS,
                "%lld rows, want %d",
                (long long)count_rows(&t, "%.0d%s", 0, ""), HOT_EVENTS);
    }
    h_step("%d events of %s in one batch: caught up %lld ms after start",
           HOT_EVENTS, hot ? "one key" : "distinct keys", (long long)took);
    return took;
}

/* A hot key: HOT_EVENTS updates of one key in one batch commit under the
 * connector's normal timeouts (the batch deadline, statement_timeout),
 * the row its last event. Both times are printed for comparison. */
static void scenario_postgres_hot_key(void) {
    int64_t wide = run_big_batch(0);
    int64_t hot = run_big_batch(1);
    h_step("one key: %lld ms, distinct keys: %lld ms (not asserted)",
           (long long)hot, (long long)wide);
}

/* ---- SQLite and PostgreSQL fed the same random change events ---- */

#define DKEYS  24
#define DNAMES 30

/* What the events leave, computed as they are made: the key's row and
 * the key holding each (UNIQUE) name. */
typedef struct dmodel {
    int live[DKEYS + 1];
    int name[DKEYS + 1];
    int holder[DNAMES]; /* 0: free */
    int events, tombstones;
} dmodel;

/* A name no key holds now (from a random start), or -1. */
static int free_name(const dmodel *m) {
    int from = (int)(next_rand() % DNAMES);
    for (int k = 0; k < DNAMES; k++)
        if (!m->holder[(from + k) % DNAMES])
            return (from + k) % DNAMES;
    return -1;
}

static int free_key(const dmodel *m) {
    int from = (int)(next_rand() % DKEYS);
    for (int k = 0; k < DKEYS; k++)
        if (!m->live[(from + k) % DKEYS + 1])
            return (from + k) % DKEYS + 1;
    return 0;
}

static void d_upsert(rd_kafka_t *p, const target *t, dmodel *m, int id,
                     const char *op, int nm) {
    char name[16];
    snprintf(name, sizeof name, "e%d", nm);
    if (m->live[id])
        m->holder[m->name[id]] = 0;
    m->live[id] = 1;
    m->name[id] = nm;
    m->holder[nm] = id;
    plain_event(p, t, id, op, name);
    m->events++;
}

static void d_delete(rd_kafka_t *p, const target *t, dmodel *m, int id) {
    m->holder[m->name[id]] = 0;
    m->live[id] = 0;
    plain_event(p, t, id, "d", NULL);
    m->events++;
    if (next_rand() % 2) {
        char key[32];
        snprintf(key, sizeof key, "{\"id\":%d}", id);
        h_produce_async(p, t->topic, 0, key, NULL, 0);
        m->events++;
        m->tombstones++;
    }
}

/* N steps of a stream valid in offset order, all in partition 0 (the
 * order across keys is the partition's): creates, updates to a free name,
 * deletes (half of them with a tombstone) and primary-key changes that
 * move the name to a free key (delete, create): a name changes keys often,
 * and few keys make several events per key per batch. */
static void produce_random(const target *t, dmodel *m, int n) {
    memset(m, 0, sizeof *m);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int i = 0; i < n; i++) {
        int id = 1 + (int)(next_rand() % DKEYS), r = (int)(next_rand() % 10);
        int nm = free_name(m);
        if (!m->live[id]) {
            if (nm >= 0)
                d_upsert(p, t, m, id, "c", nm);
        } else if (r < 5) {
            if (nm >= 0)
                d_upsert(p, t, m, id, "u", nm);
        } else if (r < 7) {
            d_delete(p, t, m, id);
        } else {
            int to = free_key(m), keep = m->name[id];
            if (!to)
                continue;
            d_delete(p, t, m, id);
            d_upsert(p, t, m, to, "c", keep);
        }
    }
    h_flush(p);
    rd_kafka_destroy(p);
}

static void text_add(char *out, size_t size, size_t *len, long long id,
                     const char *name) {
    int n = snprintf(out + *len, size - *len, "%lld:%s\n", id, name);
    H_CHECK(n > 0 && (size_t)n < size - *len, "rows beyond the buffer");
    *len += (size_t)n;
}

/* The table's rows as "id:name" lines by id, read from the database. */
static void table_text(const target *t, char *out, size_t size) {
    char sql[256];
    size_t len = 0;
    out[0] = '\0';
    snprintf(sql, sizeof sql, "SELECT id, name FROM \"%s\" ORDER BY id",
             t->table);
    if (t->pg) {
        PGconn *c = PQconnectdb(getenv("TIDEMARK_PG_CONNINFO"));
        PGresult *r = PQexec(c, sql);
        H_CHECK(PQresultStatus(r) == PGRES_TUPLES_OK, "reading %s: %s",
                t->table, PQerrorMessage(c));
        for (int i = 0; i < PQntuples(r); i++)
            text_add(out, size, &len, strtoll(PQgetvalue(r, i, 0), NULL, 10),
                     PQgetvalue(r, i, 1));
        PQclear(r);
        PQfinish(c);
        return;
    }
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_open_v2(t->db, &db, SQLITE_OPEN_READONLY, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    H_CHECK(rc == SQLITE_OK, "reading %s: %s", t->table, sqlite3_errmsg(db));
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        text_add(out, size, &len, sqlite3_column_int64(st, 0),
                 (const char *)sqlite3_column_text(st, 1));
    H_CHECK(rc == SQLITE_DONE, "reading %s: %s", t->table, sqlite3_errmsg(db));
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* The first line where A and B differ (for the failure message). */
static const char *first_difference(const char *a, const char *b) {
    size_t i = 0, line = 0;
    while (a[i] && a[i] == b[i]) {
        if (a[i] == '\n')
            line = i + 1;
        i++;
    }
    return a + line;
}

/* One random stream (SEED) into SQLite and PostgreSQL, both connectors
 * in one host, batches of up to MAX_RECORDS; each table read from its
 * database must equal the other and the events' own final state, with
 * no dead letter (the stream is valid in offset order). */
static void differential(uint64_t seed, int max_records) {
    char suffix[32];
    snprintf(suffix, sizeof suffix, "d%d", max_records);
    target sq, pg;
    init_target_as(&sq, 0, suffix);
    init_target_as(&pg, 1, suffix);
    snprintf(pg.topic, sizeof pg.topic, "%s", sq.topic);
    size_t n = strlen(pg.connector);
    snprintf(pg.connector + n, sizeof pg.connector - n, "-pg");
    create_table_as(&sq, "TEXT UNIQUE");
    create_table_as(&pg, "text UNIQUE");
    h_create_topic(sq.topic, PARTITIONS, NULL, NULL); /* all in 0 */
    rng = seed;
    dmodel m;
    produce_random(&sq, &m, 1500);
    h_step("seed %llu: %d events (%d tombstones), batches of up to %d",
           (unsigned long long)seed, m.events, m.tombstones, max_records);
    char fs[64], fp[64];
    snprintf(fs, sizeof fs, "sq-%s.json", suffix);
    snprintf(fp, sizeof fp, "pg-%s.json", suffix);
    const char *cs = config_file(&sq, DEBEZIUM_MAPPING, fs, max_records, 50);
    const char *cp = config_file(&pg, DEBEZIUM_MAPPING, fp, max_records, 50);
    char cs_path[1024], cp_path[1024];
    snprintf(cs_path, sizeof cs_path, "%s", cs);
    snprintf(cp_path, sizeof cp_path, "%s", cp);
    char log[64];
    snprintf(log, sizeof log, "diff-%s.log", suffix);
    pid_t pid = h_spawn2(cs_path, cp_path, log);
    wait_caught_up(&sq);
    wait_caught_up(&pg);
    h_stop_clean(pid);
    static char want[8192], got_sq[8192], got_pg[8192];
    size_t len = 0;
    want[0] = '\0';
    for (int k = 1; k <= DKEYS; k++)
        if (m.live[k]) {
            char name[16];
            snprintf(name, sizeof name, "e%d", m.name[k]);
            text_add(want, sizeof want, &len, k, name);
        }
    table_text(&sq, got_sq, sizeof got_sq);
    table_text(&pg, got_pg, sizeof got_pg);
    H_CHECK(strcmp(got_sq, want) == 0,
            "seed %llu: SQLite differs from the events at:\n%.40s",
            (unsigned long long)seed, first_difference(got_sq, want));
    H_CHECK(strcmp(got_pg, got_sq) == 0,
            "seed %llu: PostgreSQL differs from SQLite at:\n%.40s\nSQLite "
            "there:\n%.40s",
            (unsigned long long)seed, first_difference(got_pg, got_sq),
            first_difference(got_sq, got_pg));
    int64_t dl_sq = h_sqlf(sq.db,
                           "SELECT count(*) FROM tidemark_dead_letters WHERE "
                           "connector = '%s'",
                           sq.connector),
            dl_pg = h_pg_int("SELECT count(*) FROM tidemark_dead_letters "
                             "WHERE connector = '%s'",
                             pg.connector);
    H_CHECK(dl_sq == 0 && dl_pg == 0,
            "seed %llu: dead letters of a valid stream: SQLite %lld, "
            "PostgreSQL %lld",
            (unsigned long long)seed, (long long)dl_sq, (long long)dl_pg);
    /* every offset one outcome, each key's row its last event */
    check_verify(cs_path);
    check_verify(cp_path);
    h_step("seed %llu: both tables equal the events' state, row for row; "
           "verify OK for both",
           (unsigned long long)seed);
}

/* TIDEMARK_CDC_SEED replays a stream; else a new seed each run. */
static void scenario_postgres_vs_sqlite(void) {
    const char *env = getenv("TIDEMARK_CDC_SEED");
    uint64_t seed = env && *env ? strtoull(env, NULL, 10)
                                : (uint64_t)h_now_ms() ^ (uint64_t)getpid();
    h_step("seed %llu (TIDEMARK_CDC_SEED=%llu replays it)",
           (unsigned long long)seed, (unsigned long long)seed);
    differential(seed, 17);
    differential(seed + 1, 300);
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

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: cdc_e2e TIDEMARK PLUGIN_DIR SCENARIO\n");
        return 2;
    }
    static const struct {
        const char *name;
        void (*fn)(void);
    } scenarios[] = {
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
        {"postgres_unique_across_keys", scenario_postgres_unique_across_keys},
        {"postgres_swap_in_batch", scenario_postgres_swap_in_batch},
        {"postgres_collation", scenario_postgres_collation},
        {"postgres_hot_key", scenario_postgres_hot_key},
        {"postgres_vs_sqlite", scenario_postgres_vs_sqlite},
    };
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        if (strcmp(scenarios[i].name, argv[3]) == 0) {
            h_init(argv[1], argv[2], argv[3]);
            scenarios[i].fn();
            h_step("PASS");
            return 0;
        }
    fprintf(stderr, "cdc_e2e: unknown scenario %s\n", argv[3]);
    return 2;
}
