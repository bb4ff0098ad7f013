/* End-to-end order of change events across keys in one batch, in
 * PostgreSQL (docs/sinks/postgres.md, step 4): a UNIQUE value moved to
 * another key by a primary-key change, names swapped between keys through
 * a third, keys under a case-insensitive collation, a hot key; and
 * SQLite against PostgreSQL, the same seeded random change events into
 * both through one host, the tables compared row for row. Each scenario
 * checks that its events were in one batch (else inconclusive). One
 * ctest test per scenario, e2e.cdc.<scenario>. */
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdc_common.h"

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
    seed_rand(seed);
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

static const h_scenario SCENARIOS[] = {
    {"postgres_unique_across_keys", scenario_postgres_unique_across_keys},
    {"postgres_swap_in_batch", scenario_postgres_swap_in_batch},
    {"postgres_collation", scenario_postgres_collation},
    {"postgres_hot_key", scenario_postgres_hot_key},
    {"postgres_vs_sqlite", scenario_postgres_vs_sqlite},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "cdc_order_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
