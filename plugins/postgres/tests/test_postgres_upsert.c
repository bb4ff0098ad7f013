/* Upsert's writes (copy.c, pg_upsert_rows) against the records applied
 * one at a time: the same batches committed by the sink into its table and
 * applied by the test, record by record in offset order, into a reference
 * table of the same shape (INSERT ... ON CONFLICT DO UPDATE, DELETE for a
 * change event's delete, a refused record skipped); the two tables must
 * hold the same rows and the sink's dead letters must be the records the
 * reference refused. The batches have repeats of a key within a batch,
 * updates of stored keys, keys whose text needs escaping, refused records
 * (a CHECK) and, with a change-data-capture mapping, deletes and
 * re-inserts of one key in a batch; between them, rows the sink wrote are
 * deleted and another writer stores keys the next batch has. A second libpq
 * session inserts a key after the sink asked which keys are stored and before
 * its COPY. */
#include <check.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "pg_test_common.h"
#include "config/settings.h"
#include "plugin/loader.h"
#include "services/host_services.h"

static const tm_sink_api *api;
static char schema[64], connector[64];
static PGconn *admin;

static void setup(void) {
    api = pgt_plugin(TM_POSTGRES_PLUGIN);
    admin = pgt_fresh_schema("upsert_write", schema, sizeof schema, connector,
                             sizeof connector);
}

static void teardown(void) {
    pgt_drop_schema(admin, schema);
    admin = NULL;
}

static void with_schema(const char *fmt, char *out, size_t size) {
    pgt_with_schema(schema, fmt, out, size);
}

static void run(PGconn *c, const char *fmt) {
    pgt_run(c, schema, fmt);
}

static long long sql_int(const char *fmt) {
    return pgt_sql_int(admin, schema, fmt);
}

/* id and tag are the key: a composite key, one column text. */
static const tm_column COLS[] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 1},
    {sizeof(tm_column), "tag", TM_TYPE_TEXT, 1, 1},
    {sizeof(tm_column), "body", TM_TYPE_TEXT, 0, 0},
    {sizeof(tm_column), "amount", TM_TYPE_FLOAT, 0, 0},
};
#define NCOLS 4

/* Tags that COPY's text format and array literals escape or quote. */
static const char *const TAGS[] = {"",           "a",         "tab\there",
                                   "q\"{b,c}\\", "new\nline", "\xc3\xa9"};
#define NTAGS (sizeof TAGS / sizeof TAGS[0])

typedef struct conf {
    tm_settings *settings;
    tm_sink_config config;
} conf;

/* EXTRA: more settings (", \"key\": value"), or "". */
static void conf_init_with(conf *c, uint32_t flags, const char *extra) {
    char text[1024];
    snprintf(text, sizeof text,
             "{\"conninfo\": \"%s\", \"schema\": \"%s\", \"table\": \"t\", "
             "\"mode\": \"upsert\"%s}",
             pgt_conninfo(), schema, extra);
    c->settings = pgt_settings(text);
    c->config = (tm_sink_config){.struct_size = sizeof(tm_sink_config),
                                 .connector = connector,
                                 .settings = c->settings,
                                 .columns = COLS,
                                 .ncolumns = NCOLS,
                                 .flags = flags};
}

static void conf_init(conf *c, uint32_t flags) {
    conf_init_with(c, flags, "");
}

static void *open_ok(conf *c) {
    return pgt_open(api, tm_host_services(), &c->config);
}

/* One record as the generator makes it. */
typedef struct rec {
    int64_t id;
    const char *tag;
    char body[32];
    double amount;
    uint32_t op;
} rec;

typedef struct batch {
    tm_batch b;
    tm_range range;
    tm_record *recs;
    tm_value *vals;
    char id[64];
} batch;

static void batch_make(batch *bt, const rec *rs, int64_t start, size_t n,
                       int64_t epoch) {
    static int seq;
    memset(bt, 0, sizeof *bt);
    snprintf(bt->id, sizeof bt->id, "upsert-%d-%d", (int)getpid(), ++seq);
    bt->range = (tm_range){.struct_size = sizeof(tm_range),
                           .topic = "t",
                           .partition = 0,
                           .start_offset = start,
                           .end_offset = start + (int64_t)n,
                           .epoch = epoch};
    bt->recs = calloc(n, sizeof *bt->recs);
    bt->vals = calloc(NCOLS * n, sizeof *bt->vals);
    ck_assert(bt->recs && bt->vals);
    for (size_t i = 0; i < n; i++) {
        tm_value *v = &bt->vals[NCOLS * i];
        for (int k = 0; k < NCOLS; k++)
            v[k] = (tm_value){.struct_size = sizeof(tm_value)};
        v[0].v.i = rs[i].id;
        v[1].v.s.ptr = rs[i].tag;
        v[1].v.s.len = strlen(rs[i].tag);
        v[2].v.s.ptr = rs[i].body;
        v[2].v.s.len = strlen(rs[i].body);
        v[3].v.f = rs[i].amount;
        if (rs[i].op == TM_OP_DELETE)
            v[2].is_null = v[3].is_null = 1;
        bt->recs[i] = (tm_record){.struct_size = sizeof(tm_record),
                                  .offset = start + (int64_t)i,
                                  .timestamp_ms = 1000,
                                  .key = "k",
                                  .key_len = 1,
                                  .value = "{}",
                                  .value_len = 2,
                                  .values = v,
                                  .op = rs[i].op};
    }
    bt->b = (tm_batch){.struct_size = sizeof(tm_batch),
                       .connector = connector,
                       .batch_id = bt->id,
                       .ranges = &bt->range,
                       .nranges = 1,
                       .records = bt->recs,
                       .nrecords = n};
}

static void batch_free(batch *bt) {
    free(bt->recs);
    free(bt->vals);
}

static void commit_ok(void *sink, batch *bt) {
    pgt_commit_ok(api, sink, &bt->b);
}

/* ---- the reference: one record at a time ------------------------------- */

/* Applies R (offset OFF) to the reference table; 1 when the table
 * refused it (a dead letter). */
static int ref_apply(const rec *r, int64_t off) {
    char id[32], amount[64], offset[32], text[1024];
    snprintf(id, sizeof id, "%lld", (long long)r->id);
    snprintf(amount, sizeof amount, "%.17g", r->amount);
    snprintf(offset, sizeof offset, "%lld", (long long)off);
    PQclear(pgt_sql(admin, "SAVEPOINT ref"));
    PGresult *res;
    if (r->op == TM_OP_DELETE) {
        with_schema("DELETE FROM $S.ref WHERE id = $1::bigint AND tag = $2",
                    text, sizeof text);
        const char *v[2] = {id, r->tag};
        res = PQexecParams(admin, text, 2, NULL, v, NULL, NULL, 0);
    } else {
        with_schema(
            "INSERT INTO $S.ref (id, tag, body, amount, _tm_topic, "
            "_tm_partition, _tm_offset) VALUES ($1::bigint, $2, $3, "
            "$4::float8, 't', 0, $5::bigint) ON CONFLICT (id, tag) DO "
            "UPDATE SET body = EXCLUDED.body, amount = "
            "EXCLUDED.amount, _tm_topic = EXCLUDED._tm_topic, _tm_partition "
            "= EXCLUDED._tm_partition, _tm_offset = EXCLUDED._tm_offset",
            text, sizeof text);
        const char *v[5] = {id, r->tag, r->body, amount, offset};
        res = PQexecParams(admin, text, 5, NULL, v, NULL, NULL, 0);
    }
    int refused = PQresultStatus(res) != PGRES_COMMAND_OK;
    if (refused)
        ck_assert_msg(strcmp(r->body, "refuse") == 0,
                      "the reference refused a record it should take: %s",
                      PQresultErrorMessage(res));
    PQclear(res);
    PQclear(pgt_sql(admin, refused ? "ROLLBACK TO SAVEPOINT ref"
                                   : "RELEASE SAVEPOINT ref"));
    return refused;
}

/* The sink's table and the reference hold the same rows; the sink's dead
 * letters are the offsets in DEAD (NDEAD of them). */
static void assert_same(const int64_t *dead, size_t ndead, const char *when) {
#define ROWS_OF(a, b)                                                          \
    "(SELECT id, tag, body, amount, _tm_topic, _tm_partition, _tm_offset, "    \
    "_tm_identity FROM $S." a " EXCEPT SELECT id, tag, body, amount, "         \
    "_tm_topic, _tm_partition, _tm_offset, _tm_identity FROM $S." b ") d"
    static const char *const DIFF[2] = {
        "SELECT count(*) FROM " ROWS_OF("t", "ref"),
        "SELECT count(*) FROM " ROWS_OF("ref", "t")};
    long long only_sink = sql_int(DIFF[0]), only_ref = sql_int(DIFF[1]);
    char first[2][256] = {"", ""};
    if (only_sink || only_ref) /* the first row of each side, to tell why */
        for (int i = 0; i < 2; i++)
            pgt_sql_text(admin, schema,
                         i ? "SELECT min(d::text) FROM " ROWS_OF("ref", "t")
                           : "SELECT min(d::text) FROM " ROWS_OF("t", "ref"),
                         first[i], sizeof first[i]);
#undef ROWS_OF
    ck_assert_msg(only_sink == 0 && only_ref == 0,
                  "%s: %lld rows only in the sink's table, %lld only in the "
                  "reference (of %lld and %lld; first %s and %s)",
                  when, only_sink, only_ref,
                  sql_int("SELECT count(*) FROM $S.t"),
                  sql_int("SELECT count(*) FROM $S.ref"), first[0], first[1]);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"),
                     sql_int("SELECT count(*) FROM $S.ref"));
    char q[512];
    snprintf(q, sizeof q,
             "SELECT count(*) FROM $S.tidemark_dead_letters WHERE reason = "
             "'rejected' AND connector = '%s'",
             connector);
    ck_assert_msg(sql_int(q) == (long long)ndead,
                  "%s: %lld dead letters, the reference refused %zu", when,
                  sql_int(q), ndead);
    for (size_t i = 0; i < ndead; i++) {
        snprintf(q, sizeof q,
                 "SELECT count(*) FROM $S.tidemark_dead_letters WHERE reason "
                 "= 'rejected' AND \"offset\" = %lld",
                 (long long)dead[i]);
        ck_assert_msg(sql_int(q) == 1, "%s: offset %lld not a dead letter",
                      when, (long long)dead[i]);
    }
}

/* ---- the batches --------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

#define PER_BATCH 600
#define NBATCHES  6

/* 1 when the reference holds a row of R's key. */
static int ref_stored(const rec *r) {
    char id[32], text[256];
    snprintf(id, sizeof id, "%lld", (long long)r->id);
    with_schema("SELECT count(*) FROM $S.ref WHERE id = $1::bigint AND tag = "
                "$2",
                text, sizeof text);
    const char *v[2] = {id, r->tag};
    PGresult *res = PQexecParams(admin, text, 2, NULL, v, NULL, NULL, 0);
    ck_assert_int_eq(PQresultStatus(res), PGRES_TUPLES_OK);
    int n = atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    return n > 0;
}

/* Batch NB's records: keys from a small space (repeats in the batch,
 * updates of stored keys); batch 4 only keys never used before; two
 * refused records a batch, each the last of its key in the batch, one of
 * a key stored before and one of a key not; with CDC, a fifth of the
 * events deletes, and one key created, deleted and created again. */
static void gen_batch(rec *rs, size_t n, int nb, int cdc, int64_t start) {
    for (size_t i = 0; i < n; i++) {
        rec *r = &rs[i];
        uint64_t x = next_rand();
        r->id = nb == 4 ? 1000 + (int64_t)i : (int64_t)(x % 80);
        r->tag = TAGS[(x >> 16) % NTAGS];
        snprintf(r->body, sizeof r->body, "b%lld",
                 (long long)start + (long long)i);
        r->amount = (double)(x % 1000) / 8.0;
        r->op = cdc && (x >> 32) % 5 == 0 ? TM_OP_DELETE : TM_OP_UPSERT;
    }
    if (cdc && n >= 8) {
        rs[n - 8].id = rs[n - 6].id = rs[n - 4].id = 77;
        rs[n - 8].tag = rs[n - 6].tag = rs[n - 4].tag = "a";
        rs[n - 8].op = rs[n - 4].op = TM_OP_UPSERT;
        rs[n - 6].op = TM_OP_DELETE;
    }
    for (int want_stored = 1; want_stored >= 0; want_stored--)
        for (size_t i = n / 3; i < n; i++) {
            rec *r = &rs[i];
            int later = 0;
            for (size_t k = i + 1; k < n && !later; k++)
                later = rs[k].id == r->id && strcmp(rs[k].tag, r->tag) == 0;
            if (later || r->op != TM_OP_UPSERT ||
                strcmp(r->body, "refuse") == 0 || ref_stored(r) != want_stored)
                continue;
            snprintf(r->body, sizeof r->body, "refuse");
            break;
        }
}

/* NBATCHES batches through the sink (flags FLAGS) and the reference,
 * compared after each. */
static void differential(uint32_t flags) {
    conf c;
    conf_init(&c, flags);
    void *sink = open_ok(&c);
    tm_marker m = pgt_claim1(api, sink);
    run(admin, "ALTER TABLE $S.t ADD CHECK (body IS DISTINCT FROM 'refuse'); "
               "CREATE TABLE $S.ref (LIKE $S.t INCLUDING ALL)");
    ck_assert_int_eq(sql_int("SELECT count(*) FROM pg_indexes WHERE '\"' || "
                             "schemaname || '\"' = '$S' AND tablename = "
                             "'ref' AND indexdef LIKE '%UNIQUE%'"),
                     1);
    rec *rs = calloc(PER_BATCH, sizeof *rs);
    int64_t *dead = calloc(PER_BATCH * NBATCHES, sizeof *dead);
    ck_assert(rs && dead);
    size_t ndead = 0;
    int64_t off = 0;
    for (int nb = 0; nb < NBATCHES; nb++) {
        gen_batch(rs, PER_BATCH, nb, (flags & TM_CONFIG_CDC) != 0, off);
        batch b;
        batch_make(&b, rs, off, PER_BATCH, m.epoch);
        commit_ok(sink, &b);
        batch_free(&b);
        PQclear(pgt_sql(admin, "BEGIN"));
        for (size_t i = 0; i < PER_BATCH; i++)
            if (ref_apply(&rs[i], off + (int64_t)i))
                dead[ndead++] = off + (int64_t)i;
        PQclear(pgt_sql(admin, "COMMIT"));
        off += PER_BATCH;
        char when[32];
        snprintf(when, sizeof when, "after batch %d", nb);
        assert_same(dead, ndead, when);
        if (nb == 1) /* keys the sink wrote, gone: it takes them for stored */
            run(admin, "DELETE FROM $S.t WHERE id % 7 = 0; DELETE FROM "
                       "$S.ref WHERE id % 7 = 0");
        if (nb == 2) /* keys another writer stored: the sink's COPY meets
                        them, and it probes its next writes */
            for (int k = 0; k < 2; k++)
                run(admin, k ? "INSERT INTO $S.ref SELECT * FROM $S.t "
                               "WHERE body = 'other'"
                             : "INSERT INTO $S.t (id, tag, body, _tm_topic, "
                               "_tm_partition, _tm_offset) SELECT g, '', "
                               "'other', 'x', 0, -1 FROM generate_series(0, "
                               "79) g ON CONFLICT DO NOTHING");
    }
    /* the batches did what they are for */
    ck_assert_int_ge(ndead, NBATCHES);
    ck_assert_int_ge(sql_int("SELECT count(*) FROM $S.t WHERE id < 80"), 40);
    ck_assert_int_ge(sql_int("SELECT count(*) FROM $S.t WHERE id >= 1000"),
                     PER_BATCH / 2);
    free(rs);
    free(dead);
    api->close(sink);
    tm_settings_free(c.settings);
}

START_TEST(upsert_matches_records_applied_one_at_a_time) {
    differential(0);
}
END_TEST

START_TEST(cdc_upsert_matches_events_applied_one_at_a_time) {
    differential(TM_CONFIG_CDC);
}
END_TEST

/* ---- another writer between the probe and the COPY ---------------------- */

typedef struct committer {
    void *sink;
    batch *b;
    tm_status rc;
    tm_error err;
    _Atomic int done;
} committer;

static void *commit_thread(void *arg) {
    committer *c = arg;
    c->rc = pgt_commit(api, c->sink, &c->b->b, &c->err);
    c->done = 1;
    return NULL;
}

/* Up to 10 s for the sink's backend to wait on a lock: the statement it
 * waits in (its first 200 bytes) in QUERY, or "" when it never did. */
static void wait_on_lock(char *query, size_t size) {
    char q[512];
    snprintf(q, sizeof q,
             "SELECT left(query, 200) FROM pg_stat_activity WHERE "
             "application_name = '%s' AND wait_event_type = 'Lock'",
             connector);
    query[0] = '\0';
    for (int i = 0; i < 200 && !query[0]; i++) {
        PGresult *res = pgt_sql(admin, q);
        if (PQntuples(res) > 0)
            snprintf(query, size, "%s", PQgetvalue(res, 0, 0));
        PQclear(res);
        if (!query[0])
            nanosleep(&(struct timespec){0, 50000000}, NULL);
    }
}

/* CM's commit in a thread while OTHER holds a lock it meets: OTHER
 * commits (and is closed) once the sink waits on it (QUERY: the statement
 * it waits in, "" when it never did; wait_on_lock) and the monotonic clock
 * is past AFTER_MS; the time of that COMMIT. */
static int64_t commit_while_locked(committer *cm, PGconn *other,
                                   int64_t after_ms, char *query, size_t size) {
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, commit_thread, cm), 0);
    wait_on_lock(query, size);
    while (tm_clock_mono_ms() <= after_ms)
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    int64_t at = tm_clock_mono_ms();
    run(other, "COMMIT");
    PQfinish(other);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    return at;
}

/* The sink's write meets a key another session inserted after the sink's
 * probe of the batch's keys (its transaction open then, committed while
 * the sink's COPY waits on it): the COPY fails on the unique index and the
 * write is staged again, so the key's row is the batch's record, as an
 * INSERT ... ON CONFLICT after the other writer's row leaves it. The
 * other session's row is uncommitted when the sink probes (invisible to
 * it), and the test checks that the sink's backend waited on it in the
 * COPY straight into the table (a COPY without a statement before it, the
 * one after the probe), or fails as inconclusive. */
START_TEST(key_inserted_between_probe_and_copy_is_updated) {
    conf c;
    conf_init(&c, 0);
    void *sink = open_ok(&c);
    tm_marker m = pgt_claim1(api, sink);
    rec rs[50];
    memset(rs, 0, sizeof rs);
    for (size_t i = 0; i < 50; i++) {
        rs[i].id = (int64_t)i;
        rs[i].tag = "a";
        snprintf(rs[i].body, sizeof rs[i].body, "first");
    }
    batch b;
    /* batch 1 stores keys 0-9; batch 2 has key 10, stored by another
     * writer: the sink's COPY meets it, so that it probes its next writes
     * first */
    batch_make(&b, rs, 0, 10, m.epoch);
    commit_ok(sink, &b);
    batch_free(&b);
    run(admin, "INSERT INTO $S.t (id, tag, body, _tm_topic, _tm_partition, "
               "_tm_offset) VALUES (10, 'a', 'other', 'x', 0, 0)");
    batch_make(&b, rs + 10, 10, 1, m.epoch);
    commit_ok(sink, &b);
    batch_free(&b);
    /* another writer's key 42, not committed */
    PGconn *other = pgt_connect(pgt_conninfo());
    run(other, "BEGIN; INSERT INTO $S.t (id, tag, body, _tm_topic, "
               "_tm_partition, _tm_offset) VALUES (42, 'a', 'other', 'x', 0, "
               "0)");
    for (size_t i = 0; i < 50; i++)
        snprintf(rs[i].body, sizeof rs[i].body, "second");
    batch_make(&b, rs + 20, 11, 30, m.epoch); /* keys 20-49 */
    committer cm = {.sink = sink, .b = &b};
    char query[256];
    commit_while_locked(&cm, other, 0, query, sizeof query);
    batch_free(&b);
    ck_assert_msg(query[0], "inconclusive: the sink never waited on the other "
                            "writer's key");
    ck_assert_msg(strncmp(query, "COPY ", 5) == 0 && !strstr(query, "tm_stage"),
                  "inconclusive: the sink waited on the other writer's key "
                  "in \"%s\", not in its COPY after the probe",
                  query);
    ck_assert_msg(cm.rc == TM_OK, "commit: %s: %s", tm_status_name(cm.rc),
                  cm.err.message);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 41);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t WHERE id = 42 AND "
                             "body = 'second' AND _tm_offset = 33"),
                     1);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t WHERE body = "
                             "'second'"),
                     30);
    api->close(sink);
    tm_settings_free(c.settings);
}
END_TEST

/* A sink of conf_init_with(C, 0, EXTRA), open and claimed (M). */
static void *open_claimed(conf *c, const char *extra, tm_marker *m) {
    conf_init_with(c, 0, extra);
    void *sink = open_ok(c);
    *m = pgt_claim1(api, sink);
    return sink;
}

static void close_sink(void *sink, conf *c) {
    api->close(sink);
    tm_settings_free(c->settings);
}

/* Another session, its transaction open, holding an inserted key (5,a). */
static PGconn *other_holds_key_5(void) {
    PGconn *other = pgt_connect(pgt_conninfo());
    run(other, "BEGIN; INSERT INTO $S.t (id, tag, body, _tm_topic, "
               "_tm_partition, _tm_offset) VALUES (5, 'a', 'other', 'x', 0, "
               "0)");
    return other;
}

/* The table's tag under a nondeterministic, case-insensitive collation. */
static void tag_case_insensitive(void) {
    run(admin, "CREATE COLLATION $S.ci (provider = icu, locale = "
               "'und-u-ks-level2', deterministic = false); ALTER TABLE $S.t "
               "ALTER COLUMN tag TYPE text COLLATE $S.ci");
}

/* ---- a stored key's COPY failing past the batch's deadline ------------- */

/* A batch of one record whose key another session inserted and holds
 * uncommitted: the sink's COPY straight into the table (a key it never
 * wrote) waits on it; the deadline passes during the wait and the other
 * session commits, so the COPY fails on the unique index when the write
 * can no longer be staged. That failure says nothing about the record's
 * content: the commit must update the row or give up (TM_RETRY), never
 * make the record a dead letter "rejected" and commit. The test checks
 * that the sink waited in its COPY and that the deadline had passed
 * before the other session committed, or fails as inconclusive. */
START_TEST(stored_key_copy_failing_past_deadline_is_no_dead_letter) {
    conf c;
    tm_marker m;
    void *sink = open_claimed(&c, "", &m);
    PGconn *other = other_holds_key_5();
    rec rs[1];
    memset(rs, 0, sizeof rs);
    rs[0].id = 5;
    rs[0].tag = "a";
    snprintf(rs[0].body, sizeof rs[0].body, "mine");
    batch b;
    batch_make(&b, rs, 0, 1, m.epoch);
    b.b.deadline_ms = tm_clock_mono_ms() + 3000;
    committer cm = {.sink = sink, .b = &b};
    char query[256];
    int64_t committed_at = commit_while_locked(
        &cm, other, b.b.deadline_ms + 200, query, sizeof query);
    batch_free(&b);
    ck_assert_msg(query[0], "inconclusive: the sink never waited on the other "
                            "writer's key");
    ck_assert_msg(strstr(query, "COPY ") && !strstr(query, "tm_stage"),
                  "inconclusive: the sink waited on the other writer's key "
                  "in \"%s\", not in its COPY into the table",
                  query);
    ck_assert_msg(committed_at > b.b.deadline_ms,
                  "inconclusive: the other session committed before the "
                  "deadline");
    long long dead = sql_int("SELECT count(*) FROM $S.tidemark_dead_letters");
    long long mine = sql_int("SELECT count(*) FROM $S.t WHERE id = 5 AND "
                             "body = 'mine' AND _tm_offset = 0");
    if (cm.rc == TM_OK)
        ck_assert_msg(dead == 0 && mine == 1,
                      "commit TM_OK with %lld dead letters and the row %s "
                      "the record's: the key stored by another writer made "
                      "the record a dead letter",
                      dead, mine ? "is" : "is not");
    else
        ck_assert_msg(cm.rc == TM_RETRY && dead == 0,
                      "commit %s (%s) with %lld dead letters",
                      tm_status_name(cm.rc), cm.err.message, dead);
    close_sink(sink, &c);
}
END_TEST

/* ---- a value handed from a stored key to a new one ---------------------- */

/* (2,a) with the body "x" committed at offset 0, then into B: (1,a)
 * with "x" and (2,a) with "y" at offsets 1 and 2 (batch_free it). */
static void handover_batch(void *sink, const tm_marker *m, batch *b) {
    static rec rs[2];
    memset(rs, 0, sizeof rs);
    rs[0] = (rec){.id = 2, .tag = "a", .body = "x"};
    batch_make(b, rs, 0, 1, m->epoch);
    commit_ok(sink, b);
    batch_free(b);
    rs[0] = (rec){.id = 1, .tag = "a", .body = "x"};
    rs[1] = (rec){.id = 2, .tag = "a", .body = "y"};
    batch_make(b, rs, 1, 2, m->epoch);
}

/* Offset 1, the new key (1,a) with the body "x" that (2,a) held until
 * offset 2, is a dead letter and no row; (2,a) is offset 2's. HOW tells
 * the case in the message. */
static void assert_new_key_refused(const char *how) {
    long long dead = sql_int("SELECT count(*) FROM $S.tidemark_dead_letters "
                             "WHERE reason = 'rejected' AND \"offset\" = 1"),
              rows = sql_int("SELECT count(*) FROM $S.t"),
              first = sql_int("SELECT count(*) FROM $S.t WHERE id = 1");
    ck_assert_msg(dead == 1 && rows == 1 && first == 0,
                  "offset 1 (a body still held by a stored key when it "
                  "comes%s): %s a dead letter, %s a row (%lld rows): "
                  "written after a later record of another key",
                  how, dead ? "is" : "is not", first ? "is" : "is not", rows);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t WHERE id = 2 AND "
                             "body = 'y' AND _tm_offset = 2"),
                     1);
}

/* body is UNIQUE too. Key (2,a) is stored with body "x"; the next batch
 * has first a new key (1,a) with body "x", then (2,a) with body "y".
 * One record at a time, the first is refused (its body is still (2,a)'s)
 * and the second updates (2,a): the first record is a dead letter. The
 * sink's write must end the same way, whatever order it writes keys in. */
START_TEST(new_key_taking_a_stored_keys_unique_value_later_is_refused) {
    conf c;
    tm_marker m;
    void *sink = open_claimed(&c, "", &m);
    run(admin, "ALTER TABLE $S.t ADD UNIQUE (body)");
    batch b;
    handover_batch(sink, &m, &b);
    commit_ok(sink, &b);
    batch_free(&b);
    assert_new_key_refused("");
    close_sink(sink, &c);
}
END_TEST

/* ---- the constraints read under a snapshot older than the write -------- */

/* The previous case, with the index added while the sink's transaction
 * has begun: the sink's sessions default to REPEATABLE READ (PGOPTIONS,
 * as a role's or a database's default_transaction_isolation makes them).
 * Another session holds the partition's marker row, so the sink's commit
 * waits in its markers' SELECT ... FOR UPDATE, its snapshot taken; that
 * session adds UNIQUE (body) and commits, and the sink's write then meets
 * the new index. The catalogs read after the write must see it too:
 * offset 1 a dead letter, as one record at a time. The test checks the
 * sink waited on the marker row, or fails as inconclusive. */
START_TEST(unique_index_added_after_the_transaction_began_is_read) {
    conf c;
    tm_marker m;
    ck_assert_int_eq(
        setenv("PGOPTIONS",
               "-c default_transaction_isolation=repeatable\\ read", 1),
        0);
    void *sink = open_claimed(&c, "", &m);
    unsetenv("PGOPTIONS");
    batch b;
    handover_batch(sink, &m, &b);
    PGconn *other = pgt_connect(pgt_conninfo());
    run(other, "BEGIN; SELECT 1 FROM $S.tidemark_markers FOR UPDATE");
    committer cm = {.sink = sink, .b = &b};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, commit_thread, &cm), 0);
    char query[256];
    wait_on_lock(query, sizeof query);
    run(other, "ALTER TABLE $S.t ADD UNIQUE (body); COMMIT");
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    PQfinish(other);
    if (cm.rc == TM_RETRY) /* the resend */
        commit_ok(sink, &b);
    batch_free(&b);
    ck_assert_msg(strstr(query, "tidemark_markers"),
                  "inconclusive: the sink did not wait on the marker row "
                  "(\"%s\")",
                  query);
    ck_assert_msg(cm.rc == TM_OK || cm.rc == TM_RETRY, "commit %s (%s)",
                  tm_status_name(cm.rc), cm.err.message);
    assert_new_key_refused(", the index added after the transaction began");
    close_sink(sink, &c);
}
END_TEST

/* ---- the key's index gone ----------------------------------------------- */

/* Drops every index of t (open made the key's). */
static void drop_indexes(void) {
    char drop[1024];
    pgt_sql_text(admin, schema,
                 "SELECT string_agg(format('DROP INDEX %s', "
                 "indexrelid::regclass), '; ') FROM pg_index WHERE "
                 "indrelid = '$S.t'::regclass",
                 drop, sizeof drop);
    PQclear(pgt_sql(admin, drop));
    ck_assert_msg(sql_int("SELECT count(*) FROM pg_index WHERE indrelid = "
                          "'$S.t'::regclass") == 0,
                  "inconclusive: t still has an index");
}

/* Another writer's row of (2,a), then t without its indexes. */
static void other_key_and_no_index(void) {
    run(admin, "INSERT INTO $S.t (id, tag, body, _tm_topic, _tm_partition, "
               "_tm_offset) VALUES (2, 'a', 'other', 'x', 0, -1)");
    drop_indexes();
}

/* A batch of one record of the key (ID,a) at offset 0: the commit must
 * not be TM_OK, and the table hold ROWS rows of that key; WHAT says why. */
static void commit_refused(void *sink, const tm_marker *m, int64_t id,
                           long long rows, const char *what) {
    rec rs[1] = {{.id = id, .tag = "a", .body = "mine"}};
    batch b;
    batch_make(&b, rs, 0, 1, m->epoch);
    tm_error err = {sizeof err, ""};
    tm_status rc = pgt_commit(api, sink, &b.b, &err);
    batch_free(&b);
    char q[128];
    snprintf(q, sizeof q, "SELECT count(*) FROM $S.t WHERE id = %lld",
             (long long)id);
    long long got = sql_int(q);
    ck_assert_msg(rc != TM_OK && got == rows,
                  "commit %s (%s) with %lld rows of the key (%lld,a): %s",
                  tm_status_name(rc), err.message, got, (long long)id, what);
}

/* Another writer stored (2,a); the key's index is then dropped while the
 * sink is open (a DBA rebuilding it, say). INSERT ... ON CONFLICT finds no
 * index to infer (42P10), so the staged write, and one record at a time,
 * store nothing. The direct write's COPY of (2,a), a key the sink did not
 * write, meets no index: it must not be kept, or the key has two rows. */
START_TEST(key_index_dropped_while_open_is_no_second_row_of_a_key) {
    conf c;
    tm_marker m;
    void *sink = open_claimed(&c, "", &m);
    other_key_and_no_index();
    commit_refused(sink, &m, 2, 1,
                   "a key COPYed into a table without its unique index");
    close_sink(sink, &c);
}
END_TEST

/* The same while the key's index is built again CONCURRENTLY: its
 * catalog row is committed first, not ready, and the build waits for a
 * session holding the table (ROW EXCLUSIVE, as a writer's transaction
 * does). An index not ready checks no COPY: the direct write must not take
 * it for the key's. The test checks the index was there, not ready, when
 * the sink wrote, or fails as inconclusive. */
START_TEST(key_index_built_concurrently_is_no_second_row_of_a_key) {
    conf c;
    tm_marker m;
    void *sink = open_claimed(&c, "", &m);
    other_key_and_no_index();
    PGconn *holder = pgt_connect(pgt_conninfo()),
           *builder = pgt_connect(pgt_conninfo());
    run(holder, "BEGIN; LOCK TABLE $S.t IN ROW EXCLUSIVE MODE");
    char q[512];
    with_schema("CREATE UNIQUE INDEX CONCURRENTLY t_key_again ON $S.t (id, "
                "tag)",
                q, sizeof q);
    ck_assert_int_eq(PQsendQuery(builder, q), 1);
    long long unready = 0;
    for (int i = 0; i < 200 && !unready; i++) {
        unready = sql_int("SELECT count(*) FROM pg_index WHERE indrelid = "
                          "'$S.t'::regclass AND NOT indisready");
        if (!unready)
            nanosleep(&(struct timespec){0, 50000000}, NULL);
    }
    ck_assert_msg(unready == 1, "inconclusive: no index not ready on t");
    commit_refused(sink, &m, 2, 1,
                   "a key COPYed while its unique index was not ready");
    run(holder, "ROLLBACK");
    PGresult *res;
    while ((res = PQgetResult(builder)))
        PQclear(res);
    PQfinish(holder);
    PQfinish(builder);
    close_sink(sink, &c);
}
END_TEST

/* ---- a DEFERRABLE key index ---------------------------------------------- */

/* The key's index made DEFERRABLE after open: INSERT ... ON CONFLICT
 * refuses it as an arbiter (55000), so the staged write, and one record
 * at a time, write no row at all. The direct write COPYs a new key with no
 * ON CONFLICT, which the deferred check (made immediate by SET
 * CONSTRAINTS) lets through: it must be staged instead, and the commit
 * refused with no row, as before the direct write. */
START_TEST(new_key_into_a_deferrable_key_index_is_not_written_directly) {
    conf c;
    tm_marker m;
    void *sink = open_claimed(&c, "", &m);
    drop_indexes();
    run(admin, "ALTER TABLE $S.t ADD PRIMARY KEY (id, tag) DEFERRABLE");
    ck_assert_msg(sql_int("SELECT count(*) FROM pg_index WHERE indrelid = "
                          "'$S.t'::regclass AND indisunique") == 1 &&
                      sql_int("SELECT count(*) FROM pg_index WHERE "
                              "indrelid = '$S.t'::regclass AND NOT "
                              "indimmediate") == 1,
                  "inconclusive: the table's one unique index is not the "
                  "deferrable key");
    commit_refused(sink, &m, 1, 0,
                   "a key written into a table whose DEFERRABLE key index "
                   "the staged write refuses");
    close_sink(sink, &c);
}
END_TEST

/* ---- dedup with upsert ----------------------------------------------------
 */

/* Dedup (keys held in memory) over upsert's direct write: the identity an
 * event id, the row key (id, tag) apart from it. Two batches: an event
 * repeated in its batch and resent in the next is a duplicate (no row, no
 * dead letter), an event id again with another payload a dead letter
 * identity_conflict, and each row key's row the last new event's, offset
 * for offset, whether the row key is new (the COPY) or stored (its
 * update). */
START_TEST(dedup_over_the_direct_write_decides_offset_for_offset) {
    conf c;
    conf_init(&c, TM_CONFIG_DEDUP);
    void *sink = open_ok(&c);
    tm_marker m = pgt_claim1(api, sink);
    static const struct {
        int64_t id;
        const char *body, *event;
    } EV[10] = {{1, "v0", "e0"}, {2, "v1", "e1"}, {1, "v0", "e0"},
                {1, "v3", "e3"}, {1, "vz", "e0"}, /* batch 1: 0-4 */
                {2, "v1", "e1"}, {2, "vq", "e1"}, {1, "v7", "e7"},
                {3, "v8", "e8"}, {3, "v8", "e8"}}; /* batch 2: 5-9 */
    rec rs[10];
    memset(rs, 0, sizeof rs);
    for (int i = 0; i < 10; i++) {
        rs[i] = (rec){.id = EV[i].id, .tag = "a"};
        snprintf(rs[i].body, sizeof rs[i].body, "%s", EV[i].body);
    }
    for (int64_t from = 0; from < 10; from += 5) {
        batch b;
        batch_make(&b, rs + from, from, 5, m.epoch);
        for (size_t i = 0; i < 5; i++) {
            b.recs[i].identity = EV[from + (int64_t)i].event;
            b.recs[i].identity_hash = EV[from + (int64_t)i].body;
        }
        commit_ok(sink, &b);
        batch_free(&b);
    }
    static const char *const ROWS[3] = {
        "id = 1 AND body = 'v7' AND _tm_offset = 7",
        "id = 2 AND body = 'v1' AND _tm_offset = 1",
        "id = 3 AND body = 'v8' AND _tm_offset = 8"};
    char q[256];
    for (int i = 0; i < 3; i++) {
        snprintf(q, sizeof q, "SELECT count(*) FROM $S.t WHERE %s", ROWS[i]);
        ck_assert_msg(sql_int(q) == 1, "no row %s", ROWS[i]);
    }
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 3);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters "
                             "WHERE reason = 'identity_conflict' AND "
                             "\"offset\" IN (4, 6)"),
                     2);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters"),
                     2);
    api->close(sink);
    tm_settings_free(c.settings);
}
END_TEST

/* ---- a lock wait cancelled by statement_timeout ------------------------- */

/* A record whose key another session holds uncommitted for good: the
 * sink's COPY straight into the table waits on it until statement_timeout
 * cancels it (57014), which gives TM_RETRY (docs/sinks/postgres.md,
 * statement_timeout_ms) after one wait, as the INSERT ... ON CONFLICT
 * gave it: staging the write again after such a failure only waits for
 * the same lock once more, the commit past its deadline by another
 * timeout. The test watches which statements of the sink's backend wait
 * on a lock until the commit returns; none at all: inconclusive. */
START_TEST(copy_cancelled_by_statement_timeout_is_not_staged_again) {
    conf c;
    tm_marker m;
    void *sink = open_claimed(&c, ", \"statement_timeout_ms\": 1000", &m);
    PGconn *other = other_holds_key_5();
    rec rs[1] = {{.id = 5, .tag = "a", .body = "mine"}};
    batch b;
    batch_make(&b, rs, 0, 1, m.epoch);
    committer cm = {.sink = sink, .b = &b};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, commit_thread, &cm), 0);
    char q[512], waits[4][64];
    size_t nwaits = 0;
    snprintf(q, sizeof q,
             "SELECT left(query, 60) FROM pg_stat_activity WHERE "
             "application_name = '%s' AND wait_event_type = 'Lock'",
             connector);
    while (!cm.done) {
        PGresult *res = pgt_sql(admin, q);
        if (PQntuples(res) > 0 &&
            (nwaits == 0 ||
             strcmp(waits[nwaits - 1], PQgetvalue(res, 0, 0)) != 0) &&
            nwaits < 4)
            snprintf(waits[nwaits++], sizeof waits[0], "%s",
                     PQgetvalue(res, 0, 0));
        PQclear(res);
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    }
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    run(other, "ROLLBACK");
    PQfinish(other);
    batch_free(&b);
    ck_assert_msg(nwaits > 0, "inconclusive: the sink never waited on the "
                              "other session's key");
    ck_assert_msg(cm.rc == TM_RETRY, "commit %s (%s), not TM_RETRY",
                  tm_status_name(cm.rc), cm.err.message);
    ck_assert_msg(nwaits == 1,
                  "the sink waited on the same lock in %zu statements "
                  "(\"%s\", then \"%s\"): a cancelled wait was staged again",
                  nwaits, waits[0], waits[1]);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters"),
                     0);
    close_sink(sink, &c);
}
END_TEST

/* ---- keys equal under a case-insensitive collation ---------------------- */

/* tag under a nondeterministic (case-insensitive) collation: keys that
 * differ in their bytes are one key for the table. The stored keys (1,A)
 * and (2,B), then a batch repeating each in both spellings, in both
 * orders, and a new key (3) in both spellings: each key's row is its
 * last record (body, offset); a stored key keeps its spelling, as one
 * record at a time leaves it. */
START_TEST(keys_equal_under_case_insensitive_collation_last_wins) {
    conf c;
    tm_marker m;
    void *sink = open_claimed(&c, "", &m);
    tag_case_insensitive();
    rec rs[6] = {{.id = 1, .tag = "A", .body = "v0"},
                 {.id = 2, .tag = "B", .body = "v1"}};
    batch b;
    batch_make(&b, rs, 0, 2, m.epoch);
    commit_ok(sink, &b);
    batch_free(&b);
    static const char *const TAG[6] = {"a", "A", "B", "b", "C", "c"};
    for (int i = 0; i < 6; i++) {
        rs[i] = (rec){.id = 1 + i / 2, .tag = TAG[i]};
        snprintf(rs[i].body, sizeof rs[i].body, "v%d", i + 2);
    }
    batch_make(&b, rs, 2, 6, m.epoch);
    commit_ok(sink, &b);
    batch_free(&b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 3);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t WHERE id = 1 AND "
                             "tag::bytea = 'A'::bytea AND body = 'v3' AND "
                             "_tm_offset = 3"),
                     1);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t WHERE id = 2 AND "
                             "tag::bytea = 'B'::bytea AND body = 'v5' AND "
                             "_tm_offset = 5"),
                     1);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t WHERE id = 3 AND "
                             "body = 'v7' AND _tm_offset = 7"),
                     1);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters"),
                     0);
    close_sink(sink, &c);
}
END_TEST

/* ---- a stored keys' write failing past the deadline, not for a row ----- */

/* tag case-insensitive; the sink wrote (1,A), then (1,a) (the same key
 * for the table, so the sink probes its next writes). The third batch has
 * both spellings: both are stored, so the INSERT ... ON CONFLICT of the
 * stored keys would update one row twice (21000), which the staged write
 * resolves. Another session holds that row locked until the batch's
 * deadline has passed, so the failure comes when the write can no longer
 * be staged: TM_RETRY (the next attempt stages it), never TM_FATAL, which
 * would stop the connector for a batch the table takes. The test checks
 * the sink waited in the stored keys' INSERT and the deadline had passed
 * before the other session committed, or fails as inconclusive. */
START_TEST(stored_keys_write_failing_past_deadline_is_retried) {
    conf c;
    tm_marker m;
    void *sink = open_claimed(&c, "", &m);
    tag_case_insensitive();
    rec rs[2] = {{.id = 1, .tag = "A", .body = "v0"}};
    batch b;
    for (int64_t off = 0; off < 2; off++) {
        rs[0].tag = off ? "a" : "A";
        batch_make(&b, rs, off, 1, m.epoch);
        commit_ok(sink, &b);
        batch_free(&b);
    }
    PGconn *other = pgt_connect(pgt_conninfo());
    run(other, "BEGIN; UPDATE $S.t SET amount = 1 WHERE id = 1");
    rs[0] = (rec){.id = 1, .tag = "A", .body = "v2"};
    rs[1] = (rec){.id = 1, .tag = "a", .body = "v3"};
    batch_make(&b, rs, 2, 2, m.epoch);
    b.b.deadline_ms = tm_clock_mono_ms() + 3000;
    committer cm = {.sink = sink, .b = &b};
    char query[256];
    int64_t committed_at = commit_while_locked(
        &cm, other, b.b.deadline_ms + 200, query, sizeof query);
    int64_t deadline = b.b.deadline_ms;
    if (cm.rc == TM_RETRY) { /* the resend, without a deadline */
        b.b.deadline_ms = 0;
        commit_ok(sink, &b);
    }
    batch_free(&b);
    ck_assert_msg(query[0], "inconclusive: the sink never waited on the other "
                            "session's row lock");
    ck_assert_msg(strncmp(query, "INSERT INTO ", 12) == 0 &&
                      !strstr(query, "tm_stage"),
                  "inconclusive: the sink waited on the row lock in \"%s\", "
                  "not in its stored keys' INSERT",
                  query);
    ck_assert_msg(committed_at > deadline, "inconclusive: the other session "
                                           "committed before the deadline");
    ck_assert_msg(cm.rc == TM_RETRY || cm.rc == TM_OK,
                  "commit %s (%s): a write the staged path takes given up "
                  "for good",
                  tm_status_name(cm.rc), cm.err.message);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters"),
                     0);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t WHERE id = 1 AND "
                             "body = 'v3' AND _tm_offset = 3"),
                     1);
    close_sink(sink, &c);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("postgres_upsert");
    TCase *tc = tcase_create("upsert");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, upsert_matches_records_applied_one_at_a_time);
    tcase_add_test(tc, cdc_upsert_matches_events_applied_one_at_a_time);
    tcase_add_test(tc, key_inserted_between_probe_and_copy_is_updated);
    tcase_add_test(tc, stored_key_copy_failing_past_deadline_is_no_dead_letter);
    tcase_add_test(tc,
                   new_key_taking_a_stored_keys_unique_value_later_is_refused);
    tcase_add_test(tc, unique_index_added_after_the_transaction_began_is_read);
    tcase_add_test(tc,
                   new_key_into_a_deferrable_key_index_is_not_written_directly);
    tcase_add_test(tc, key_index_dropped_while_open_is_no_second_row_of_a_key);
    tcase_add_test(tc, key_index_built_concurrently_is_no_second_row_of_a_key);
    tcase_add_test(tc, dedup_over_the_direct_write_decides_offset_for_offset);
    tcase_add_test(tc, copy_cancelled_by_statement_timeout_is_not_staged_again);
    tcase_add_test(tc, keys_equal_under_case_insensitive_collation_last_wins);
    tcase_add_test(tc, stored_keys_write_failing_past_deadline_is_retried);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
