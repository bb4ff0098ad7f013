/* The PostgreSQL sink through its plugin API (loaded like the host loads
 * it), against the server of scripts/postgres.sh: settings refusals naming
 * the key, upsert, identity conflicts, validate's shape mismatch, every
 * column type through COPY, a lost connection (between calls and inside a
 * commit) giving RETRY and an exactly-once resend, interrupt() of a lock
 * wait, application_name. Each test has a schema of its own; what the sink
 * wrote is read back with libpq directly. */
#include <check.h>
#include <libpq-fe.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "vm_size.h"
#include "pg_test_common.h"
#include "config/settings.h"
#include "plugin/loader.h"
#include "services/host_services.h"

static const tm_sink_api *api;
static char schema[64], connector[64];
static PGconn *admin; /* the test's own connection */

static PGresult *sql(const char *text) {
    return pgt_sql(admin, text);
}

static void sql_text(const char *fmt, char *out, size_t size) {
    pgt_sql_text(admin, schema, fmt, out, size);
}

static long long sql_int(const char *fmt) {
    char v[64];
    sql_text(fmt, v, sizeof v);
    return atoll(v);
}

static void setup(void) {
    api = pgt_plugin(TM_POSTGRES_PLUGIN);
    static int n;
    snprintf(schema, sizeof schema, "postgres_unit_%d_%d", (int)getpid(), ++n);
    snprintf(connector, sizeof connector, "unit_%d_%d", (int)getpid(), n);
    admin = pgt_connect(pgt_conninfo());
    /* a failed test skips its teardown: a later process with its pid
     * would find that schema */
    char text[256];
    snprintf(text, sizeof text, "DROP SCHEMA IF EXISTS \"%s\" CASCADE", schema);
    PQclear(sql(text));
}

static void teardown(void) {
    char text[256];
    snprintf(text, sizeof text, "DROP SCHEMA IF EXISTS \"%s\" CASCADE", schema);
    PQclear(PQexec(admin, text));
    PQfinish(admin);
    admin = NULL;
}

/* id bigint (key), body text, and optionally every other type. */
static const tm_column COLS[] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 1},
    {sizeof(tm_column), "body", TM_TYPE_TEXT, 0, 0},
    {sizeof(tm_column), "amount", TM_TYPE_FLOAT, 0, 0},
    {sizeof(tm_column), "flag", TM_TYPE_BOOL, 0, 0},
    {sizeof(tm_column), "at", TM_TYPE_TIMESTAMP, 0, 0},
    {sizeof(tm_column), "doc", TM_TYPE_JSON, 0, 0},
    {sizeof(tm_column), "raw", TM_TYPE_BYTES, 0, 0},
};
#define NCOLS 7

typedef struct conf {
    tm_settings *settings;
    tm_sink_config config;
} conf;

/* Settings from JSON text: "$C" is the conninfo, "$S" the schema. */
static void conf_init(conf *c, const char *json_text, uint32_t flags,
                      size_t ncols) {
    char text[2048], *at;
    snprintf(text, sizeof text, "%s", json_text);
    while ((at = strstr(text, "$C")) != NULL || (at = strstr(text, "$S"))) {
        char rest[2048];
        const char *v = at[1] == 'C' ? pgt_conninfo() : schema;
        snprintf(rest, sizeof rest, "%s", at + 2);
        snprintf(at, sizeof text - (size_t)(at - text), "%s%s", v, rest);
    }
    json_error_t je;
    json_t *obj = json_loads(text, 0, &je);
    ck_assert_msg(obj != NULL, "bad test JSON: %s: %s", je.text, text);
    c->settings = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    ck_assert_ptr_nonnull(c->settings);
    c->config = (tm_sink_config){.struct_size = sizeof(tm_sink_config),
                                 .connector = connector,
                                 .settings = c->settings,
                                 .columns = COLS,
                                 .ncolumns = ncols,
                                 .flags = flags};
}

#define BASIC "{\"conninfo\": \"$C\", \"schema\": \"$S\", \"table\": \"t\""

static void conf_done(conf *c) {
    tm_settings_free(c->settings);
}

static void *open_with(conf *c, const tm_host_api *host) {
    return pgt_open(api, host, &c->config);
}

static void *open_ok(conf *c) {
    return open_with(c, tm_host_services());
}

static tm_marker claim1(void *sink) {
    return pgt_claim1(api, sink);
}

typedef struct rec {
    int64_t offset, id;
    const char *body, *identity, *hash;
} rec;

typedef struct batch {
    tm_batch b;
    tm_range range;
    tm_record records[16];
    tm_value values[16][NCOLS];
    char id[32];
} batch;

static const char RAW[] = {'\0', '\t', '\n', '\\', 'x', (char)0xff};

static void batch_make(batch *bt, int64_t start, int64_t end, int64_t epoch,
                       const rec *recs, size_t n) {
    static int seq;
    memset(bt, 0, sizeof *bt);
    snprintf(bt->id, sizeof bt->id, "unit-%d", ++seq);
    bt->range = (tm_range){.struct_size = sizeof(tm_range),
                           .topic = "t",
                           .partition = 0,
                           .start_offset = start,
                           .end_offset = end,
                           .epoch = epoch};
    for (size_t i = 0; i < n; i++) {
        tm_value *v = bt->values[i];
        for (int k = 0; k < NCOLS; k++)
            v[k] = (tm_value){.struct_size = sizeof(tm_value)};
        v[0].v.i = recs[i].id;
        v[1].v.s.ptr = recs[i].body;
        v[1].v.s.len = strlen(recs[i].body);
        v[2].v.f = 0.1;
        v[3].v.i = 1;
        v[4].v.i = -1; /* 1969-12-31 23:59:59.999999 UTC */
        v[5].v.s.ptr = "{\"a\": [1, \"x\\ty\"]}";
        v[5].v.s.len = strlen(v[5].v.s.ptr);
        v[6].v.s.ptr = RAW;
        v[6].v.s.len = sizeof RAW;
        bt->records[i] = (tm_record){.struct_size = sizeof(tm_record),
                                     .offset = recs[i].offset,
                                     .timestamp_ms = 1000,
                                     .key = "k",
                                     .key_len = 1,
                                     .value = "{}",
                                     .value_len = 2,
                                     .values = v,
                                     .identity = recs[i].identity,
                                     .identity_hash = recs[i].hash};
    }
    bt->b = (tm_batch){.struct_size = sizeof(tm_batch),
                       .connector = connector,
                       .batch_id = bt->id,
                       .ranges = &bt->range,
                       .nranges = 1,
                       .records = bt->records,
                       .nrecords = n};
}

static tm_status commit(void *sink, batch *bt, tm_error *err) {
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return api->commit(sink, &bt->b, err);
}

static void commit_ok(void *sink, batch *bt) {
    tm_error err;
    tm_status rc = commit(sink, bt, &err);
    ck_assert_msg(rc == TM_OK, "commit: %s: %s", tm_status_name(rc),
                  err.message);
}

/* ---- settings ----------------------------------------------------------- */

static const struct {
    const char *json, *needle;
} BAD[] = {
    {"{\"schema\": \"$S\", \"table\": \"t\"}", "conninfo"},
    {"{\"conninfo\": \"$C\"}", "table"},
    {BASIC ", \"colour\": 1}", "colour"},
    {BASIC ", \"mode\": \"merge\"}", "mode"},
    {BASIC ", \"create\": \"yes\"}", "create"},
    {BASIC ", \"connect_timeout_s\": 0}", "connect_timeout_s"},
    {BASIC ", \"statement_timeout_ms\": -1}", "statement_timeout_ms"},
    {BASIC ", \"dedup_retention_s\": 0}", "dedup_retention_s"},
    {BASIC ", \"schema\": \"\"}", "schema"},
    {"{\"conninfo\": \"host=x nosuchoption=1\", \"table\": \"t\"}", "conninfo"},
    {BASIC ", \"create\": false}", "table"}, /* no such table */
};

START_TEST(settings_errors_name_the_key) {
    conf c;
    tm_error err = {sizeof err, ""};
    void *sink = NULL;
    conf_init(&c, BAD[_i].json, 0, 2);
    tm_status rc = api->open(tm_host_services(), &c.config, &sink, &err);
    ck_assert_msg(rc == TM_INVALID, "%s: %s (%s)", BAD[_i].json,
                  tm_status_name(rc), err.message);
    ck_assert_msg(strstr(err.message, BAD[_i].needle), "%s: %s", BAD[_i].needle,
                  err.message);
    err.message[0] = '\0';
    ck_assert_int_eq(api->validate(tm_host_services(), &c.config, &err),
                     TM_INVALID);
    ck_assert_msg(strstr(err.message, BAD[_i].needle), "validate: %s",
                  err.message);
    conf_done(&c);
}
END_TEST

START_TEST(unreachable_is_retry) {
    conf c;
    tm_error err = {sizeof err, ""};
    void *sink = NULL;
    conf_init(&c,
              "{\"conninfo\": \"host=127.0.0.1 port=1 dbname=x\", \"table\": "
              "\"t\", \"connect_timeout_s\": 2}",
              0, 2);
    ck_assert_int_eq(api->open(tm_host_services(), &c.config, &sink, &err),
                     TM_RETRY);
    ck_assert_ptr_nonnull(strstr(err.message, "conninfo"));
    ck_assert_int_eq(api->validate(tm_host_services(), &c.config, &err),
                     TM_RETRY);
    conf_done(&c);
}
END_TEST

/* ---- effects ------------------------------------------------------------ */

START_TEST(every_type_through_copy) {
    conf c;
    conf_init(&c, BASIC "}", 0, NCOLS);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r[] = {{0, 7, "tab\there\nnew line \\ back é", NULL, NULL}};
    batch_make(&b, 0, 1, m.epoch, r, 1);
    commit_ok(sink, &b);
    char v[256];
    sql_text("SELECT body FROM $S.t", v, sizeof v);
    ck_assert_str_eq(v, "tab\there\nnew line \\ back é");
    sql_text("SELECT amount = 0.1::float8 AND flag AND at = "
             "'1969-12-31 23:59:59.999999+00'::timestamptz AND doc = "
             "'{\"a\": [1, \"x\\ty\"]}'::jsonb AND raw = "
             "'\\x00090a5c78ff'::bytea FROM $S.t",
             v, sizeof v);
    ck_assert_str_eq(v, "t");
    sql_text("SELECT _tm_topic || _tm_partition || '@' || _tm_offset FROM $S.t",
             v, sizeof v);
    ck_assert_str_eq(v, "t0@0");
    char q[256];
    snprintf(q, sizeof q,
             "SELECT count(*) FROM pg_stat_activity WHERE application_name "
             "= '%s'",
             connector);
    ck_assert_int_eq(sql_int(q), 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

START_TEST(upsert_updates_by_key) {
    conf c;
    conf_init(&c, BASIC ", \"mode\": \"upsert\"}", 0, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r1[] = {{0, 1, "a", NULL, NULL},
                {1, 2, "b", NULL, NULL},
                {2, 1, "c", NULL, NULL}};
    batch_make(&b, 0, 3, m.epoch, r1, 3);
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 2);
    char v[64];
    sql_text("SELECT body || _tm_offset FROM $S.t WHERE id = 1", v, sizeof v);
    ck_assert_str_eq(v, "c2");
    rec r2[] = {{3, 2, "d", NULL, NULL}};
    batch_make(&b, 3, 4, m.epoch, r2, 1);
    commit_ok(sink, &b);
    sql_text("SELECT body FROM $S.t WHERE id = 2", v, sizeof v);
    ck_assert_str_eq(v, "d");
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 2);
    ck_assert_int_eq(
        sql_int("SELECT count(*) FROM pg_indexes WHERE "
                "'\"' || schemaname || '\"' = '$S' AND indexname = 't_tm_key'"),
        1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* A key column null (or missing, which the host makes null) in upsert
 * mode: a dead letter null_key, never a silent merge of the records
 * whose keys are all null into one row (DISTINCT ON and the unique index
 * would see them as one key, or as none). */
START_TEST(upsert_null_key_is_a_dead_letter) {
    static const tm_column OPTIONAL_KEY[] = {
        {sizeof(tm_column), "id", TM_TYPE_INT, 0, 1},
        {sizeof(tm_column), "body", TM_TYPE_TEXT, 0, 0},
    };
    conf c;
    conf_init(&c, BASIC ", \"mode\": \"upsert\"}", 0, 2);
    c.config.columns = OPTIONAL_KEY;
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r1[] = {{0, 0, "a", NULL, NULL},
                {1, 5, "b", NULL, NULL},
                {2, 0, "c", NULL, NULL},
                {3, 0, "d", NULL, NULL},
                {4, 0, "e", NULL, NULL}};
    batch_make(&b, 0, 5, m.epoch, r1, 5);
    for (int i = 0; i < 5; i++)
        b.values[i][0].is_null = i != 1;
    commit_ok(sink, &b);
    char v[512];
    sql_text("SELECT string_agg(body || '@' || _tm_offset, ',') FROM $S.t", v,
             sizeof v);
    ck_assert_str_eq(v, "b@1");
    sql_text("SELECT string_agg(reason || '@' || \"offset\" || ':' || (detail "
             "LIKE '%\"id\"%'), ',' ORDER BY \"offset\") FROM "
             "$S.tidemark_dead_letters",
             v, sizeof v);
    ck_assert_str_eq(v, "null_key@0:true,null_key@2:true,null_key@3:true,"
                        "null_key@4:true");
    sql_text("SELECT \"rows\" || '/' || dead_letters || '/' || next_offset "
             "FROM $S.tidemark_markers",
             v, sizeof v);
    ck_assert_str_eq(v, "1/4/5");
    /* one at a time too (max_records 1): each its own dead letter */
    rec r2[] = {{5, 0, "f", NULL, NULL}};
    batch_make(&b, 5, 6, m.epoch, r2, 1);
    b.values[0][0].is_null = 1;
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 1);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters "
                             "WHERE reason = 'null_key'"),
                     5);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* One record stamped ten years ahead must not make the prune forget every
 * key: the horizon is min(newest record timestamp, wall clock) - retention,
 * so a resend of a key applied a moment ago is still a duplicate. */
START_TEST(retention_ignores_a_future_timestamp) {
    conf c;
    conf_init(&c,
              BASIC ", \"dedup_keys\": \"rows\", \"dedup_retention_s\": 3600}",
              TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    int64_t now = tm_clock_wall_ms();
    batch b;
    rec r1[] = {{0, 1, "a", "k1", "h1"}};
    batch_make(&b, 0, 1, m.epoch, r1, 1);
    b.records[0].timestamp_ms = now;
    commit_ok(sink, &b);
    rec r2[] = {{1, 2, "b", "k2", "h2"}};
    batch_make(&b, 1, 2, m.epoch, r2, 1);
    b.records[0].timestamp_ms = now + 10LL * 366 * 24 * 3600 * 1000;
    commit_ok(sink, &b);
    rec r3[] = {{2, 1, "a", "k1", "h1"}};
    batch_make(&b, 2, 3, m.epoch, r3, 1);
    b.records[0].timestamp_ms = now + 1000;
    commit_ok(sink, &b);
    ck_assert_int_eq(
        sql_int("SELECT count(*) FROM $S.t WHERE _tm_identity = 'k1'"), 1);
    char v[128];
    sql_text("SELECT \"rows\" || '/' || duplicates FROM $S.tidemark_markers", v,
             sizeof v);
    ck_assert_str_eq(v, "2/1");
    /* the horizon still moves with the wall clock: a key applied longer
     * ago than the retention (by its record and by the wall clock of its
     * application, aged here in the table) is forgotten */
    rec r4[] = {{3, 3, "c", "k3", "h3"}};
    batch_make(&b, 3, 4, m.epoch, r4, 1);
    b.records[0].timestamp_ms = now - 2 * 3600 * 1000;
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("WITH u AS (UPDATE $S.tidemark_keys SET "
                             "applied_wall = applied_wall - 3600001 WHERE "
                             "identity = 'k3' RETURNING 1) SELECT count(*) "
                             "FROM u"),
                     1);
    rec r5[] = {{4, 4, "d", "k4", "h4"}};
    batch_make(&b, 4, 5, m.epoch, r5, 1);
    b.records[0].timestamp_ms = now;
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_keys WHERE "
                             "identity = 'k3'"),
                     0);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_keys WHERE "
                             "identity = 'k1'"),
                     1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* F1: a key whose record timestamp lies in the past (a producer clock
 * years behind, a backfill two hours old) was pruned by the next batch
 * carrying a current record, seconds after it was applied, and its resend
 * was stored again. Kept until the wall clock of its application is past
 * the retention too. */
START_TEST(past_timestamp_key_is_kept_for_the_retention) {
    conf c;
    conf_init(&c, BASIC ", \"dedup_retention_s\": 3600}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    int64_t now = tm_clock_wall_ms();
    const int64_t ten_years = 10LL * 366 * 24 * 3600 * 1000;
    batch b;
    rec r1[] = {{0, 1, "a", "k1", "h1"}, {1, 2, "b", "k2", "h2"}};
    batch_make(&b, 0, 2, m.epoch, r1, 2);
    b.records[0].timestamp_ms = now - ten_years;
    b.records[1].timestamp_ms = now - 2 * 3600 * 1000;
    commit_ok(sink, &b);
    rec r2[] = {{2, 3, "c", "k3", "h3"}};
    batch_make(&b, 2, 3, m.epoch, r2, 1);
    b.records[0].timestamp_ms = now; /* a current record: its prune runs */
    commit_ok(sink, &b);
    rec r3[] = {{3, 1, "a", "k1", "h1"}, {4, 2, "b", "k2", "h2"}};
    batch_make(&b, 3, 5, m.epoch, r3, 2);
    b.records[0].timestamp_ms = now - ten_years;
    b.records[1].timestamp_ms = now - 2 * 3600 * 1000;
    commit_ok(sink, &b); /* the resends, a moment later */
    ck_assert_int_eq(
        sql_int("SELECT count(*) FROM $S.t WHERE _tm_identity = 'k1'"), 1);
    ck_assert_int_eq(
        sql_int("SELECT count(*) FROM $S.t WHERE _tm_identity = 'k2'"), 1);
    char v[128];
    sql_text("SELECT \"rows\" || '/' || duplicates FROM $S.tidemark_markers", v,
             sizeof v);
    ck_assert_str_eq(v, "3/2");
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* F1's migration: keys stored before applied_wall existed count as
 * applied when the sink first opens the database again (the safe side). */
START_TEST(keys_from_before_the_wall_column_are_kept) {
    conf c;
    int64_t now = tm_clock_wall_ms();
    char text[1024];
    snprintf(text, sizeof text,
             "CREATE SCHEMA \"%s\"; CREATE TABLE \"%s\".tidemark_keys "
             "(connector text NOT NULL, identity text NOT NULL, payload_hash "
             "text, first_topic text NOT NULL, first_partition integer NOT "
             "NULL, first_offset bigint NOT NULL, applied_at bigint NOT NULL, "
             "PRIMARY KEY (connector, identity)); INSERT INTO "
             "\"%s\".tidemark_keys VALUES ('%s', 'k1', 'h1', 't', 0, 0, %lld)",
             schema, schema, schema, connector,
             (long long)(now - 2 * 3600 * 1000));
    PQclear(sql(text));
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_keys"), 1);
    conf_init(&c, BASIC ", \"dedup_retention_s\": 3600}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r1[] = {{0, 3, "c", "k3", "h3"}};
    batch_make(&b, 0, 1, m.epoch, r1, 1);
    b.records[0].timestamp_ms = now;
    commit_ok(sink, &b);
    rec r2[] = {{1, 1, "a", "k1", "h1"}};
    batch_make(&b, 1, 2, m.epoch, r2, 1);
    b.records[0].timestamp_ms = now - 2 * 3600 * 1000;
    commit_ok(sink, &b);
    ck_assert_int_eq(
        sql_int("SELECT count(*) FROM $S.t WHERE _tm_identity = 'k1'"), 0);
    ck_assert_int_ge(sql_int("SELECT applied_wall FROM $S.tidemark_keys WHERE "
                             "identity = 'k1'"),
                     now);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* The keys' age index serves only the retention: a connector without one
 * does not make it (every key stored would pay for it); one with a
 * retention makes it on the shared keys table; and a keys table made
 * with it (by a connector with a retention, or before the index depended
 * on one) keeps it and is used as it is by a connector without. */
static int64_t age_index(void) {
    return sql_int("SELECT (to_regclass('$S.tidemark_keys_by_age') IS NOT "
                   "NULL)::int");
}

START_TEST(keys_age_index_only_with_a_retention) {
    conf c;
    conf_init(&c, BASIC ", \"dedup_keys\": \"rows\"}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r1[] = {{0, 1, "a", "k1", "h1"}, {1, 1, "a", "k1", "h1"}};
    batch_make(&b, 0, 2, m.epoch, r1, 2);
    commit_ok(sink, &b);
    ck_assert_int_eq(age_index(), 0);
    api->close(sink);
    conf_done(&c);
    conf_init(&c,
              BASIC ", \"dedup_keys\": \"rows\", \"dedup_retention_s\": 3600}",
              TM_CONFIG_DEDUP, 2);
    sink = open_ok(&c);
    ck_assert_int_eq(age_index(), 1);
    m = claim1(sink);
    rec r2[] = {{2, 2, "b", "k2", "h2"}, {3, 1, "a", "k1", "h1"}};
    batch_make(&b, 2, 4, m.epoch, r2, 2);
    commit_ok(sink, &b);
    api->close(sink);
    conf_done(&c);
    /* without a retention again: the index made is kept and used */
    conf_init(&c, BASIC ", \"dedup_keys\": \"rows\"}", TM_CONFIG_DEDUP, 2);
    sink = open_ok(&c);
    m = claim1(sink);
    rec r3[] = {{4, 2, "b", "k2", "h2"}, {5, 3, "c", "k3", "h3"}};
    batch_make(&b, 4, 6, m.epoch, r3, 2);
    commit_ok(sink, &b);
    ck_assert_int_eq(age_index(), 1);
    char v[256];
    sql_text("SELECT string_agg(_tm_offset::text, ',' ORDER BY _tm_offset) "
             "FROM $S.t",
             v, sizeof v);
    ck_assert_str_eq(v, "0,2,5");
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_keys"), 3);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* A second connector on the same table: refused naming the table, the
 * other connector and the setting, unless both say "shared_table": true.
 * At claim (authoritative: TM_FATAL, nothing changed) and, earlier, at
 * open and validate (TM_INVALID). */
static void *open_as(conf *c, const char *as) {
    c->config.connector = as;
    return open_ok(c);
}

static tm_status claim_with(void *sink, tm_error *err) {
    tm_marker m = {.struct_size = sizeof m, .topic = "t", .partition = 0};
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return api->claim(sink, &m, 1, 0, err);
}

static void assert_names(const tm_error *err, const char *other) {
    ck_assert_msg(strstr(err->message, "\"t\"") &&
                      strstr(err->message, other) &&
                      strstr(err->message, "shared_table"),
                  "%s", err->message);
}

/* open and validate as AS: TM_INVALID naming OTHER */
static void assert_open_refused(conf *c, const char *as, const char *other) {
    c->config.connector = as;
    tm_error err = {sizeof err, ""};
    void *sink = NULL;
    tm_status rc = api->open(tm_host_services(), &c->config, &sink, &err);
    ck_assert_msg(rc == TM_INVALID, "open: %s: %s", tm_status_name(rc),
                  err.message);
    assert_names(&err, other);
    err.message[0] = '\0';
    rc = api->validate(tm_host_services(), &c->config, &err);
    ck_assert_msg(rc == TM_INVALID, "validate: %s: %s", tm_status_name(rc),
                  err.message);
    assert_names(&err, other);
}

START_TEST(second_connector_on_a_table_is_refused) {
    char a[80], bname[80];
    snprintf(a, sizeof a, "%s_a", connector);
    snprintf(bname, sizeof bname, "%s_b", connector);
    conf c, cs, cb; /* an instance keeps its config: one for B's first */
    conf_init(&c, BASIC "}", 0, 2);
    conf_init(&cs, BASIC ", \"shared_table\": true}", 0, 2);
    conf_init(&cb, BASIC "}", 0, 2);
    tm_error err;
    /* B opened before A wrote anything: its claim is what refuses it */
    void *sb = open_as(&cb, bname);
    void *sa = open_as(&c, a);
    ck_assert_int_eq(claim_with(sa, &err), TM_OK);
    batch b;
    rec r[] = {{0, 1, "a", NULL, NULL}};
    batch_make(&b, 0, 1, 1, r, 1);
    b.b.connector = a;
    commit_ok(sa, &b);
    api->close(sa);
    tm_status rc = claim_with(sb, &err);
    ck_assert_msg(rc == TM_FATAL, "claim: %s: %s", tm_status_name(rc),
                  err.message);
    assert_names(&err, a);
    api->close(sb);
    char q[512];
    snprintf(q, sizeof q,
             "SELECT count(*) FROM $S.tidemark_markers WHERE connector = '%s'",
             bname);
    ck_assert_int_eq(sql_int(q), 0); /* nothing changed */
    /* B again, at open and validate; shared, while A is not: still */
    assert_open_refused(&c, bname, a);
    assert_open_refused(&cs, bname, a);
    /* both shared: accepted; A again too */
    sa = open_as(&cs, a);
    ck_assert_int_eq(claim_with(sa, &err), TM_OK);
    api->close(sa);
    sb = open_as(&cs, bname);
    ck_assert_int_eq(claim_with(sb, &err), TM_OK);
    api->close(sb);
    ck_assert_int_eq(sql_int(q), 1);
    /* A back to not shared while B writes the table */
    assert_open_refused(&c, a, bname);
    /* a table written before the owners were recorded: A's marker past
     * a row of the table still makes it A's */
    char text[512];
    snprintf(text, sizeof text,
             "DELETE FROM \"%s\".tidemark_table_owners; DELETE FROM "
             "\"%s\".tidemark_markers WHERE connector = '%s'",
             schema, schema, bname);
    PQclear(sql(text));
    assert_open_refused(&c, bname, a);
    conf_done(&c);
    conf_done(&cs);
    conf_done(&cb);
}
END_TEST

/* Upsert's unique index is named within PostgreSQL's 63 bytes: a long
 * table name is cut on a UTF-8 boundary (cut inside a character the name
 * was refused) and ends in a hash of the whole name (two tables sharing a
 * long prefix got one index name, the second table none). */
static void upsert_one_row(const char *table) {
    char json[512];
    snprintf(json, sizeof json,
             "{\"conninfo\": \"$C\", \"schema\": \"$S\", \"table\": \"%s\", "
             "\"mode\": \"upsert\"}",
             table);
    static int n;
    static char as[8][96]; /* outlives the instances: one connector each */
    ck_assert_int_lt(n, 8);
    snprintf(as[n], sizeof as[n], "%s_%d", connector, n);
    conf c;
    conf_init(&c, json, 0, 2);
    c.config.connector = as[n];
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r[] = {{0, 1, "a", NULL, NULL}, {1, 1, "b", NULL, NULL}};
    batch_make(&b, 0, 2, m.epoch, r, 2);
    b.b.connector = as[n++];
    commit_ok(sink, &b);
    api->close(sink);
    conf_done(&c);
    char q[512];
    snprintf(q, sizeof q,
             "SELECT count(*) FROM $S.\"%s\" WHERE body = 'b' AND (SELECT "
             "count(*) FROM pg_index WHERE indrelid = '$S.\"%s\"'::regclass "
             "AND indisunique) = 1",
             table, table);
    ck_assert_int_eq(sql_int(q), 1);
    /* and the shape check at a second open finds it */
    conf_init(&c, json, 0, 2);
    c.config.connector = b.b.connector;
    sink = open_ok(&c);
    api->close(sink);
    conf_done(&c);
}

START_TEST(upsert_index_names_fit) {
    char utf8[128] = "x", a[128], b2[128];
    for (int i = 0; i < 30; i++)
        strcat(utf8, "\xc3\xa9"); /* é: 61 bytes, byte 50 mid-character */
    memset(a, 'a', 55);
    memcpy(b2, a, 55);
    strcpy(a + 55, "_one");
    strcpy(b2 + 55, "_two");
    upsert_one_row(a);
    upsert_one_row(b2);
    upsert_one_row(utf8);
    /* a table with a fitting unique index of another name (an older rule,
     * or the user's) gets no second one */
    char text[1024];
    snprintf(text, sizeof text,
             "CREATE TABLE \"%s\".\"%s_old\" (id bigint NOT NULL, body "
             "text, _tm_topic text NOT NULL, _tm_partition int NOT NULL, "
             "_tm_offset bigint NOT NULL, _tm_identity text); CREATE UNIQUE "
             "INDEX legacy_key ON \"%s\".\"%s_old\" (id)",
             schema, a, schema, a);
    PQclear(sql(text));
    snprintf(text, sizeof text, "%s_old", a);
    upsert_one_row(text);
    ck_assert_int_eq(sql_int("SELECT count(DISTINCT indexrelid) FROM pg_index "
                             "i JOIN pg_class c ON c.oid = i.indexrelid WHERE "
                             "c.relnamespace = '$S'::regnamespace AND "
                             "i.indisunique AND octet_length(c.relname::text) "
                             "<= 63 AND c.relname::text LIKE '%_tm_key%'"),
                     3);
}
END_TEST

START_TEST(identity_conflict_is_a_dead_letter) {
    conf c;
    conf_init(&c, BASIC "}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r1[] = {{0, 1, "a", "k1", "h1"}};
    batch_make(&b, 0, 1, m.epoch, r1, 1);
    commit_ok(sink, &b);
    rec r2[] = {{1, 1, "a", "k1", "h1"},
                {2, 1, "x", "k1", "h2"},
                {3, 2, "b", "k2", "h3"}};
    batch_make(&b, 1, 4, m.epoch, r2, 3);
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 2);
    char v[512];
    sql_text("SELECT reason || '@' || \"offset\" FROM $S.tidemark_dead_letters",
             v, sizeof v);
    ck_assert_str_eq(v, "identity_conflict@2");
    sql_text("SELECT \"rows\" || '/' || dead_letters || '/' || duplicates || "
             "'/' || next_offset FROM $S.tidemark_markers",
             v, sizeof v);
    ck_assert_str_eq(v, "2/1/1/4");
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* Keys held in memory: "rows" would not see the connector's batch rows,
 * so a claim with it is refused once the connector has its keysets row;
 * and batch rows whose keysets row (their digests' seed) is gone cannot be
 * read: a claim refuses them rather than store resends again. */
static tm_status claim_status(void *sink, tm_error *err) {
    tm_marker m = {.struct_size = sizeof m, .topic = "t", .partition = 0};
    *err = (tm_error){sizeof *err, ""};
    return api->claim(sink, &m, 1, 0, err);
}

START_TEST(rows_after_memory_and_orphan_key_batches_are_refused) {
    conf c;
    conf_init(&c, BASIC "}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r1[] = {{0, 1, "a", "k1", "h1"}, {1, 2, "b", "k2", "h2"}};
    batch_make(&b, 0, 2, m.epoch, r1, 2);
    commit_ok(sink, &b);
    api->close(sink);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_key_batches"),
                     1);
    conf rows;
    conf_init(&rows, BASIC ", \"dedup_keys\": \"rows\"}", TM_CONFIG_DEDUP, 2);
    sink = open_ok(&rows);
    tm_error err;
    tm_status rc = claim_status(sink, &err);
    ck_assert_msg(rc == TM_FATAL && strstr(err.message, "dedup_keys") &&
                      strstr(err.message, "tidemark_key_batches"),
                  "%s: %s", tm_status_name(rc), err.message);
    api->close(sink);
    conf_done(&rows);
    ck_assert_int_eq(sql_int("WITH u AS (DELETE FROM $S.tidemark_keysets "
                             "RETURNING 1) SELECT count(*) FROM u"),
                     1);
    sink = open_ok(&c);
    rc = claim_status(sink, &err);
    ck_assert_msg(rc == TM_FATAL && strstr(err.message, "seed"), "%s: %s",
                  tm_status_name(rc), err.message);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* The digests in tidemark_key_batches can be read only under the seed
 * they were made with: a seed changed in tidemark_keysets (by hand, or a
 * row taken from elsewhere) is refused, naming the way out, by a claim and
 * by the next commit of a sink that holds the keys, never a silent reload
 * that takes every stored key for new; with the row restored, a resend is
 * a duplicate again. */
START_TEST(edited_seed_is_refused_naming_the_way_out) {
    conf c;
    conf_init(&c, BASIC "}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r1[] = {{0, 7, "a", "order-7", "h"}};
    batch_make(&b, 0, 1, m.epoch, r1, 1);
    commit_ok(sink, &b);
    char seed[64];
    sql_text("SELECT encode(seed, 'hex') FROM $S.tidemark_keysets", seed,
             sizeof seed);
    ck_assert_int_eq(sql_int("WITH u AS (UPDATE $S.tidemark_keysets SET seed "
                             "= '\\x000102030405060708090a0b0c0d0e0f' "
                             "RETURNING 1) SELECT count(*) FROM u"),
                     1);
    /* the sink holding the keys: its next commit */
    rec r2[] = {{1, 7, "a", "order-7", "h"}};
    batch_make(&b, 1, 2, m.epoch, r2, 1);
    tm_error err;
    tm_status rc = commit(sink, &b, &err);
    ck_assert_msg(rc == TM_FATAL && strstr(err.message, "seed_check") &&
                      strstr(err.message, "restore its row"),
                  "commit: %s: %s", tm_status_name(rc), err.message);
    api->close(sink);
    /* a claim after reopening */
    sink = open_ok(&c);
    rc = claim_status(sink, &err);
    ck_assert_msg(rc == TM_FATAL && strstr(err.message, "seed_check"),
                  "claim: %s: %s", tm_status_name(rc), err.message);
    char q[256];
    snprintf(q, sizeof q,
             "WITH u AS (UPDATE $S.tidemark_keysets SET seed = "
             "decode('%s', 'hex') RETURNING 1) SELECT count(*) FROM u",
             seed);
    ck_assert_int_eq(sql_int(q), 1); /* restored */
    m = claim1(sink);
    batch_make(&b, 1, 2, m.epoch, r2, 1);
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 1);
    ck_assert_int_eq(sql_int("SELECT duplicates FROM $S.tidemark_markers"), 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* The connector's tidemark_keysets row replaced whole by another
 * connector's (its seed and a seed_check that matches it): the batch rows
 * carry the seed_check of the seed their digests were made under, so a
 * claim refuses them naming the way out, never a load that takes every
 * stored key for new. */
START_TEST(keysets_row_of_another_connector_is_refused) {
    conf c, o;
    conf_init(&c, BASIC "}", TM_CONFIG_DEDUP, 2);
    conf_init(&o,
              "{\"conninfo\": \"$C\", \"schema\": \"$S\", \"table\": "
              "\"t2\"}",
              TM_CONFIG_DEDUP, 2);
    o.config.connector = "another-connector";
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r1[] = {{0, 7, "a", "order-7", "h"}};
    batch_make(&b, 0, 1, m.epoch, r1, 1);
    commit_ok(sink, &b);
    api->close(sink);
    void *other = open_ok(&o);
    claim1(other);
    api->close(other);
    ck_assert_int_eq(
        sql_int("WITH u AS (UPDATE $S.tidemark_keysets k SET seed = x.seed, "
                "seed_check = x.seed_check FROM $S.tidemark_keysets x WHERE "
                "x.connector = 'another-connector' AND k.connector <> "
                "x.connector RETURNING 1) SELECT count(*) FROM u"),
        1);
    sink = open_ok(&c);
    tm_error err;
    tm_status rc = claim_status(sink, &err);
    ck_assert_msg(rc == TM_FATAL && strstr(err.message, "another seed") &&
                      strstr(err.message, "tidemark_key_batches"),
                  "claim: %s: %s", tm_status_name(rc), err.message);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 1);
    api->close(sink);
    conf_done(&c);
    conf_done(&o);
}
END_TEST

/* The connector's key order-7 committed (C, dedup), then a million more
 * keys in ROWS batch rows (generations 2 to ROWS + 1), as other hosts'
 * commits would store them (digests that look random: md5 of the key's
 * number); the sink closed. */
static void order_7_then_a_million_keys(conf *c, int rows) {
    void *sink = open_ok(c);
    tm_marker m = claim1(sink);
    batch b;
    rec r1[] = {{0, 7, "a", "order-7", "h"}};
    batch_make(&b, 0, 1, m.epoch, r1, 1);
    commit_ok(sink, &b);
    api->close(sink);
    char q[1024];
    snprintf(q, sizeof q,
             "WITH i AS (INSERT INTO $S.tidemark_key_batches SELECT "
             "connector, g, 0, 0, %d, (SELECT string_agg(decode(md5(((g - 2) "
             "* %d + n)::text) || left(md5((-((g - 2) * %d + n))::text), 16), "
             "'hex'), ''::bytea) FROM generate_series(1, %d) n), seed_check "
             "FROM $S.tidemark_keysets, generate_series(2, %d) g RETURNING "
             "1), u "
             "AS (UPDATE $S.tidemark_keysets SET generation = %d RETURNING 1) "
             "SELECT (SELECT count(*) FROM i) + (SELECT count(*) FROM u)",
             1000000 / rows, 1000000 / rows, 1000000 / rows, 1000000 / rows,
             rows + 1, rows + 1);
    ck_assert_int_eq(sql_int(q), rows + 1);
}

/* Keys that do not fit in memory (a million of them, the process's
 * address space held to 32 MB more than it uses): the claim is TM_RETRY
 * naming it and the setting that keeps keys on disk; with the memory back,
 * the next claim loads them and a resend is a duplicate. */
START_TEST(keys_beyond_memory_are_retry_naming_it) {
    conf c;
    conf_init(&c, BASIC "}", TM_CONFIG_DEDUP, 2);
    order_7_then_a_million_keys(&c, 1);
    void *sink = open_ok(&c);
    batch b;
    tm_error err;
    tm_status rc;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* Not under AddressSanitizer or ThreadSanitizer, whose allocators
     * abort once RLIMIT_AS is reached: the release build's run checks it. */
    struct rlimit was;
    ck_assert_int_eq(tm_test_hold_as(32LL << 20, &was), 0);
    rc = claim_status(sink, &err);
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &was), 0);
    ck_assert_msg(rc == TM_RETRY &&
                      strstr(err.message, "do not fit in memory") &&
                      strstr(err.message, "\"dedup_keys\": \"rows\""),
                  "%s: %s", tm_status_name(rc), err.message);
#endif
    rc = claim_status(sink, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
    rec r2[] = {{1, 7, "a", "order-7", "h"}};
    batch_make(&b, 1, 2, sql_int("SELECT epoch FROM $S.tidemark_markers"), r2,
               1);
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT duplicates FROM $S.tidemark_markers"), 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* The table's one row's key RESENT (offset 1 of partition 0) after a
 * claim (a rebalance, or a sink opened again): a duplicate, no second row. */
static void claim_and_resend_is_a_duplicate(void *sink, rec resent) {
    tm_marker m = claim1(sink);
    batch b;
    batch_make(&b, 1, 2, m.epoch, &resent, 1);
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 1);
    ck_assert_int_eq(sql_int("SELECT duplicates FROM $S.tidemark_markers"), 1);
}

/* SIZE - 1 printable characters from SEED, incompressible enough, and a
 * NUL. */
static void random_text(char *out, size_t size, unsigned seed) {
    for (size_t i = 0; i + 1 < size; i++) {
        seed = seed * 1103515245u + 12345u;
        out[i] = (char)('!' + (seed >> 16) % 90);
    }
    out[size - 1] = '\0';
}

/* Keys held in memory take any identity: an empty one and one of 100 kB
 * (which "rows" refuses, too large for its index: a dead letter there) are
 * applied once, and each resend, in the same batch and in the next one,
 * is a duplicate; the table holds each identity once. */
START_TEST(empty_and_huge_identities_in_memory) {
    conf c;
    conf_init(&c, BASIC "}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    static char huge[100001];
    random_text(huge, sizeof huge, 4321);
    batch b;
    rec r1[] = {{0, 1, "a", "", "h"},
                {1, 2, "b", huge, "h"},
                {2, 3, "c", "", "h"},
                {3, 4, "d", huge, "h"}};
    batch_make(&b, 0, 4, m.epoch, r1, 4);
    commit_ok(sink, &b);
    rec r2[] = {{4, 5, "e", huge, "h"}, {5, 6, "f", "", "h"}};
    batch_make(&b, 4, 6, m.epoch, r2, 2);
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 2);
    ck_assert_int_eq(sql_int("SELECT count(DISTINCT _tm_identity) FROM $S.t "
                             "WHERE _tm_identity = '' OR length(_tm_identity) "
                             "= 100000"),
                     2);
    ck_assert_int_eq(sql_int("SELECT duplicates FROM $S.tidemark_markers"), 4);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters"),
                     0);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* A connector's rows of tidemark_keys (from "dedup_keys": "rows" or an
 * older build: a million of them) are read into the set a page at a time,
 * as the batch rows are: with the address space held to the set's size
 * and 24 MB more above what the process uses, the claim loads them (the
 * rows as one result, about 90 MB, do not fit), and one of their keys
 * sent again with another payload hash is an identity_conflict.
 * Inconclusive unless the limit is below the set and such a result
 * together. */
START_TEST(old_key_rows_load_one_at_a_time) {
    conf c;
    conf_init(&c, BASIC "}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c); /* the tables; the rows before any claim */
    api->close(sink);
    char q[512];
    snprintf(q, sizeof q,
             "INSERT INTO \"%s\".tidemark_keys SELECT '%s', 'order-' || n, "
             "md5(n::text), 't', 0, n, 1000, 1000 FROM generate_series(1, "
             "1000000) n",
             schema, connector);
    PQclear(sql(q));
    sink = open_ok(&c);
    tm_error err;
    tm_status rc;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* the set: 2^21 slots of 24 bytes for a million keys */
    const long long set = (1LL << 21) * 24, result = 90LL << 20;
    struct rlimit was, low;
    ck_assert_int_eq(getrlimit(RLIMIT_AS, &was), 0);
    low = was;
    low.rlim_cur = (rlim_t)(tm_test_vm_size() + set + (24LL << 20));
    if ((long long)low.rlim_cur - tm_test_vm_size() >= set + result)
        ck_abort_msg("inconclusive: the limit holds the set and the rows");
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &low), 0);
    rc = claim_status(sink, &err);
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &was), 0);
    ck_assert_msg(rc == TM_OK, "claim under %lld MB more: %s: %s",
                  (long long)(low.rlim_cur - (rlim_t)tm_test_vm_size()) >> 20,
                  tm_status_name(rc), err.message);
#else
    rc = claim_status(sink, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
#endif
    rec r[] = {{0, 1, "a", "order-77", "h"}};
    batch b;
    batch_make(&b, 0, 1, sql_int("SELECT epoch FROM $S.tidemark_markers"), r,
               1);
    /* order-77's stored payload hash is md5('77'): another hash, so the
     * resend is an identity conflict if the key was loaded */
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 0);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters "
                             "WHERE reason = 'identity_conflict'"),
                     1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* A row of tidemark_keys for a connector whose keys are held in memory (a
 * host of the connector running an older build, during a rolling upgrade)
 * is refused by the trigger the sink's schema setup made, naming the
 * connector and the way out: that host's commit fails instead of storing
 * a resent key twice. One written all the same (the trigger disabled by
 * the owner) is read at the sink's next claim: a resend of such a key after
 * it is a duplicate, not a second row. */
START_TEST(old_keys_written_meanwhile_are_read_at_the_next_claim) {
    conf c;
    conf_init(&c, BASIC "}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r1[] = {{0, 7, "a", "order-7", "h"}};
    batch_make(&b, 0, 1, m.epoch, r1, 1);
    commit_ok(sink, &b);
    /* the older build's host applies order-8 (another partition) */
    char q[512];
    snprintf(q, sizeof q,
             "INSERT INTO \"%s\".tidemark_keys VALUES ('%s', 'order-8', 'h', "
             "'t', 1, 0, 1000, 1000)",
             schema, connector);
    PGresult *res = PQexec(admin, q);
    const char *code = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    ck_assert_msg(PQresultStatus(res) == PGRES_FATAL_ERROR && code &&
                      strcmp(code, "TMK01") == 0 &&
                      strstr(PQresultErrorMessage(res),
                             "holds its business keys in memory") &&
                      strstr(PQresultErrorMessage(res), connector),
                  "an older build's key row for a connector held in memory: "
                  "%s %s",
                  PQresStatus(PQresultStatus(res)), PQresultErrorMessage(res));
    PQclear(res);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_keys"), 0);
    /* written all the same */
    char q2[1400];
    snprintf(q2, sizeof q2,
             "BEGIN; ALTER TABLE \"%s\".tidemark_keys DISABLE TRIGGER "
             "tidemark_keys_held_in_memory; %s; ALTER TABLE \"%s\"."
             "tidemark_keys ENABLE TRIGGER tidemark_keys_held_in_memory; "
             "COMMIT",
             schema, q, schema);
    PQclear(sql(q2));
    m = claim1(sink); /* a rebalance */
    rec r2[] = {{1, 8, "b", "order-8", "h"}};
    batch_make(&b, 1, 2, m.epoch, r2, 1);
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 1);
    ck_assert_int_eq(sql_int("SELECT duplicates FROM $S.tidemark_markers"), 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* The refusal of a changed seed says to restore the connector's row of
 * tidemark_keysets from a backup; a backup's row is older than the batch
 * rows written since: its generation is behind theirs. Host A holds the
 * keys up to the backup's generation, host B stored order-2 after it; with
 * the older row restored, A's next commit (order-2 resent, order-3 new)
 * must read B's batch row (order-2 a duplicate) and store order-3 in a
 * batch row past every other, not retry for ever on the batch rows'
 * primary key. */
START_TEST(keysets_row_behind_its_batch_rows_is_caught_up) {
    conf c;
    conf_init(&c, BASIC "}", TM_CONFIG_DEDUP, 2);
    void *a = open_ok(&c), *b2 = open_ok(&c);
    tm_marker ma = pgt_claim_p(api, a, 0), mb = pgt_claim_p(api, b2, 1);
    batch b;
    rec r1[] = {{0, 1, "a", "order-1", "h"}};
    batch_make(&b, 0, 1, ma.epoch, r1, 1);
    commit_ok(a, &b);
    char backup[256];
    sql_text("SELECT generation || '/' || pruned_generation FROM "
             "$S.tidemark_keysets",
             backup, sizeof backup);
    rec r2[] = {{0, 2, "b", "order-2", "h"}};
    batch_make(&b, 0, 1, mb.epoch, r2, 1);
    b.range.partition = 1;
    commit_ok(b2, &b);
    /* the backup's row restored: the generation A holds, B's row past it */
    ck_assert_int_eq(sql_int("WITH u AS (UPDATE $S.tidemark_keysets SET "
                             "generation = generation - 1 RETURNING 1) "
                             "SELECT count(*) FROM u"),
                     1);
    char now[256];
    sql_text("SELECT generation || '/' || pruned_generation FROM "
             "$S.tidemark_keysets",
             now, sizeof now);
    ck_assert_msg(strcmp(now, backup) == 0 &&
                      sql_int("SELECT max(generation) FROM "
                              "$S.tidemark_key_batches") == 2,
                  "inconclusive: the row is %s, the backup %s", now, backup);
    rec r3[] = {{1, 2, "b", "order-2", "h"}, {2, 3, "c", "order-3", "h"}};
    batch_make(&b, 1, 3, ma.epoch, r3, 2);
    tm_error err;
    tm_status rc = commit(a, &b, &err);
    ck_assert_msg(rc == TM_OK, "commit after the restore: %s: %s",
                  tm_status_name(rc), err.message);
    char v[256];
    sql_text("SELECT (SELECT string_agg(_tm_identity, ',' ORDER BY "
             "_tm_identity) FROM $S.t) || ' ' || (SELECT duplicates FROM "
             "$S.tidemark_markers WHERE \"partition\" = 0) || ' ' || (SELECT "
             "generation FROM $S.tidemark_keysets) || ' ' || (SELECT "
             "max(generation) FROM $S.tidemark_key_batches)",
             v, sizeof v);
    ck_assert_str_eq(v, "order-1,order-2,order-3 1 3 3");
    /* a host claiming afresh reads every batch row: order-3 a duplicate */
    api->close(b2);
    b2 = open_ok(&c);
    mb = pgt_claim_p(api, b2, 1);
    rec r4[] = {{1, 3, "c", "order-3", "h"}};
    batch_make(&b, 1, 2, mb.epoch, r4, 1);
    b.range.partition = 1;
    commit_ok(b2, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 3);
    api->close(a);
    api->close(b2);
    conf_done(&c);
}
END_TEST

/* A server, database or role with bytea_output = 'escape' (kept for old
 * clients) gives bytea in text results as escapes, not '\x' hex: the keys'
 * seed must still be read, so a connector with dedup claims, stores its
 * keys and finds a resend a duplicate after reopening. */
START_TEST(keys_in_memory_under_bytea_output_escape) {
    char info[1024];
    snprintf(info, sizeof info, "%s options='-c bytea_output=escape'",
             pgt_conninfo());
    PGconn *probe = pgt_connect(info);
    PGresult *res = pgt_sql(probe, "SHOW bytea_output");
    ck_assert_msg(strcmp(PQgetvalue(res, 0, 0), "escape") == 0,
                  "inconclusive: bytea_output is %s", PQgetvalue(res, 0, 0));
    PQclear(res);
    PQfinish(probe);
    conf c;
    conf_init(&c,
              "{\"conninfo\": \"$C options='-c bytea_output=escape'\", "
              "\"schema\": \"$S\", \"table\": \"t\"}",
              TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = {.struct_size = sizeof m, .topic = "t", .partition = 0};
    tm_error err = {sizeof err, ""};
    tm_status rc = api->claim(sink, &m, 1, 0, &err);
    ck_assert_msg(rc == TM_OK, "claim: %s: %s", tm_status_name(rc),
                  err.message);
    batch b;
    rec r1[] = {{0, 7, "a", "order-7", "h"}};
    batch_make(&b, 0, 1, m.epoch, r1, 1);
    commit_ok(sink, &b);
    api->close(sink);
    sink = open_ok(&c);
    claim_and_resend_is_a_duplicate(sink, (rec){1, 7, "a", "order-7", "h"});
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* Loading the keys held in memory is not cut by statement_timeout_ms: a
 * connector's set grows with its keys, and a load that outlasts the
 * timeout would fail the same way at every claim (and at every commit that
 * must reload the set whole), for ever. A million keys in 200 batch rows,
 * as hosts' commits write them, read under a 100 ms statement_timeout_ms:
 * the claim loads them, and after another host's removal (its counter
 * moved) the commit reloads them; a resend is then a duplicate. Each load
 * must take longer than the timeout, or the test proves nothing
 * (inconclusive). */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(keys_load_outlasts_statement_timeout) {
    conf c;
    conf_init(&c, BASIC ", \"statement_timeout_ms\": 100}", TM_CONFIG_DEDUP, 2);
    order_7_then_a_million_keys(&c, 200);
    void *sink = open_ok(&c);
    batch b;
    tm_error err;
    double t0 = now_s();
    tm_status rc = claim_status(sink, &err);
    double claim_s = now_s() - t0;
    ck_assert_msg(rc == TM_OK, "claim: %s: %s (%.3f s)", tm_status_name(rc),
                  err.message, claim_s);
    if (claim_s < 0.2)
        ck_abort_msg("inconclusive: the claim took %.3f s, not past the "
                     "timeout",
                     claim_s);
    int64_t epoch = sql_int("SELECT epoch FROM $S.tidemark_markers");
    rec r2[] = {{1, 7, "a", "order-7", "h"}};
    batch_make(&b, 1, 2, epoch, r2, 1);
    commit_ok(sink, &b);
    /* another host's removal of tidemark_keys rows: the set must be
     * reloaded whole in the commit */
    ck_assert_int_eq(sql_int("WITH u AS (UPDATE $S.tidemark_keysets SET "
                             "legacy_pruned = legacy_pruned + 1 RETURNING "
                             "1) SELECT count(*) FROM u"),
                     1);
    rec r3[] = {{2, 7, "a", "order-7", "h"}};
    batch_make(&b, 2, 3, epoch, r3, 1);
    t0 = now_s();
    rc = commit(sink, &b, &err);
    double commit_s = now_s() - t0;
    ck_assert_msg(rc == TM_OK, "commit after a removal: %s: %s (%.3f s)",
                  tm_status_name(rc), err.message, commit_s);
    if (commit_s < 0.2)
        ck_abort_msg("inconclusive: the commit took %.3f s, not past the "
                     "timeout",
                     commit_s);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 1);
    ck_assert_int_eq(sql_int("SELECT duplicates FROM $S.tidemark_markers"), 2);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* After `offsets --reset-to` an earlier offset on a dedup connector, a
 * replayed offset that was a dead letter got a second one (verify: "stored
 * 2 times"). With dedup the same dead letter stored for the offset is not
 * stored again; the marker counts it as a duplicate (like a replayed record
 * whose key is stored), so its dead_letters stay the stored ones. Both
 * kinds: the host's (parse_error) and the sink's own (identity_conflict).
 */
START_TEST(replayed_dead_letter_is_stored_once) {
    conf c;
    conf_init(&c, BASIC "}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r[] = {{0, 7, "x", "order-7", "h1"},
               {2, 7, "y", "order-7", "h2"}}; /* a conflict */
    tm_dead_letter dl = {.struct_size = sizeof dl,
                         .range = 0,
                         .offset = 1,
                         .timestamp_ms = 1001,
                         .reason = TM_DL_PARSE_ERROR,
                         .detail = "not JSON",
                         .value = "{",
                         .value_len = 1};
    batch_make(&b, 0, 3, m.epoch, r, 2);
    b.b.dead_letters = &dl;
    b.b.ndead_letters = 1;
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters"),
                     2);
    /* the rewind: the marker back to 0, as offsets --reset-to does */
    tm_error err = {sizeof err, ""};
    m.next_offset = 0;
    ck_assert_int_eq(api->claim(sink, &m, 1, TM_CLAIM_RESET, &err), TM_OK);
    ck_assert_int_eq(sql_int("SELECT next_offset FROM $S.tidemark_markers"), 0);
    batch_make(&b, 0, 3, m.epoch, r, 2);
    b.b.dead_letters = &dl;
    b.b.ndead_letters = 1;
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters "
                             "WHERE \"offset\" = 1"),
                     1);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters "
                             "WHERE \"offset\" = 2"),
                     1);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 1);
    char v[128];
    sql_text("SELECT \"rows\" || '/' || dead_letters || '/' || duplicates || "
             "'/' || next_offset FROM $S.tidemark_markers",
             v, sizeof v);
    /* dead_letters = the stored ones; the replay: all three duplicates */
    ck_assert_str_eq(v, "1/2/3/3");
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* A dead letter at an offset that already holds a DIFFERENT one (the topic
 * deleted and recreated, or its log truncated, then `offsets --reset-to`)
 * was counted as a replay and stored nowhere: the dedup check matched on
 * the offset alone. Only the same message (timestamp, key, value) is a
 * replay; another one is stored. Both kinds: the host's (parse_error) and
 * the sink's own (identity_conflict). */
START_TEST(different_dead_letter_at_a_stored_offset_is_stored) {
    conf c;
    conf_init(&c, BASIC "}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r1[] = {{0, 7, "x", "order-7", "h1"},
                {2, 7, "y", "order-7", "h2"}}; /* a conflict */
    tm_dead_letter dl1 = {.struct_size = sizeof dl1,
                          .range = 0,
                          .offset = 1,
                          .timestamp_ms = 1001,
                          .reason = TM_DL_PARSE_ERROR,
                          .detail = "not JSON",
                          .value = "{",
                          .value_len = 1};
    batch_make(&b, 0, 3, m.epoch, r1, 2);
    b.b.dead_letters = &dl1;
    b.b.ndead_letters = 1;
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters"),
                     2);
    /* the recreated topic's log: other messages at the same offsets */
    tm_error err = {sizeof err, ""};
    m.next_offset = 0;
    ck_assert_int_eq(api->claim(sink, &m, 1, TM_CLAIM_RESET, &err), TM_OK);
    ck_assert_int_eq(sql_int("SELECT next_offset FROM $S.tidemark_markers"), 0);
    rec r2[] = {{0, 9, "p", "order-9", "h3"},
                {2, 9, "q", "order-9", "h4"}}; /* a conflict */
    tm_dead_letter dl2 = dl1;
    dl2.value = "[";
    batch_make(&b, 0, 3, m.epoch, r2, 2);
    b.records[1].value = "{\"new\": 1}";
    b.records[1].value_len = strlen(b.records[1].value);
    b.b.dead_letters = &dl2;
    b.b.ndead_letters = 1;
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters "
                             "WHERE \"offset\" = 1"),
                     2);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters "
                             "WHERE \"offset\" = 1 AND \"value\" = '['"),
                     1);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters "
                             "WHERE \"offset\" = 2"),
                     2);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters "
                             "WHERE \"offset\" = 2 AND \"value\" = "
                             "'{\"new\": 1}'"),
                     1);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 2);
    char v[128];
    sql_text("SELECT \"rows\" || '/' || dead_letters || '/' || duplicates || "
             "'/' || next_offset FROM $S.tidemark_markers",
             v, sizeof v);
    /* dead_letters = the stored ones; nothing was a replay */
    ck_assert_str_eq(v, "2/4/0/3");
    api->close(sink);
    conf_done(&c);
}
END_TEST

START_TEST(refused_rows_are_dead_letters) {
    char text[512];
    snprintf(text, sizeof text,
             "CREATE SCHEMA \"%s\"; CREATE TABLE \"%s\".t (id bigint NOT "
             "NULL, body text CHECK (body <> 'bad'), _tm_topic text NOT NULL, "
             "_tm_partition int NOT NULL, _tm_offset bigint NOT NULL, "
             "_tm_identity text)",
             schema, schema);
    PQclear(sql(text));
    conf c;
    conf_init(&c, BASIC "}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r1[] = {{0, 1, "a", "k0", "h0"},
                {1, 2, "bad", "k1", "h1"},
                {2, 3, "c", "k2", "h2"}};
    batch_make(&b, 0, 3, m.epoch, r1, 3);
    commit_ok(sink, &b);
    char v[512];
    sql_text("SELECT string_agg(body, ',' ORDER BY _tm_offset) FROM $S.t", v,
             sizeof v);
    ck_assert_str_eq(v, "a,c");
    sql_text("SELECT reason || '@' || \"offset\" || ':' || (detail LIKE "
             "'%23514%') FROM $S.tidemark_dead_letters",
             v, sizeof v);
    ck_assert_str_eq(v, "rejected@1:true");
    sql_text("SELECT \"rows\" || '/' || dead_letters FROM $S.tidemark_markers",
             v, sizeof v);
    ck_assert_str_eq(v, "2/1");
    /* the refused row's key was forgotten: the fixed record applies */
    rec r2[] = {{3, 2, "fixed", "k1", "h9"}};
    batch_make(&b, 3, 4, m.epoch, r2, 1);
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t WHERE body = 'fixed'"),
                     1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* ---- business keys decided as a set -------------------------------------
 */

/* What the per-record path decided, offset for offset, computed here on
 * its own from the records: a key stored before (or earlier in the batch)
 * with the same payload hash is a duplicate, with another a conflict
 * naming the first occurrence; a new key is stored and its record is a
 * row, unless the table refuses the row ("bad"), which forgets the key
 * again once the batch's keys are decided. */
typedef struct model {
    struct {
        char identity[32], hash[8];
        int64_t first;
        int has_hash;
    } keys[32];
    size_t nkeys;
    char rows[1024], dls[1024], conflicts[2048];
    int nrows, ndls, ndups;
} model;

static int model_find(const model *m, const char *identity) {
    for (size_t i = 0; i < m->nkeys; i++)
        if (strcmp(m->keys[i].identity, identity) == 0)
            return (int)i;
    return -1;
}

static void model_forget(model *m, const char *identity) {
    int i = model_find(m, identity);
    if (i >= 0)
        m->keys[i] = m->keys[--m->nkeys];
}

static void add_item(char *list, size_t size, const char *sep,
                     const char *item) {
    size_t n = strlen(list);
    snprintf(list + n, size - n, "%s%s", n ? sep : "", item);
}

/* The huge identity (refused by the key index) is a dead letter rejected.
 */
static const char *HUGE_ID;

static void model_batch(model *m, const rec *r, size_t n) {
    char item[512];
    for (size_t i = 0; i < n; i++) {
        int row = 0;
        if (r[i].identity == HUGE_ID) {
            snprintf(item, sizeof item, "%lld:rejected",
                     (long long)r[i].offset);
            add_item(m->dls, sizeof m->dls, ",", item);
            m->ndls++;
            continue;
        }
        int k = r[i].identity ? model_find(m, r[i].identity) : -1;
        if (!r[i].identity) {
            row = 1;
        } else if (k < 0) {
            ck_assert_uint_lt(m->nkeys, 32);
            k = (int)m->nkeys++;
            snprintf(m->keys[k].identity, sizeof m->keys[k].identity, "%s",
                     r[i].identity);
            snprintf(m->keys[k].hash, sizeof m->keys[k].hash, "%s",
                     r[i].hash ? r[i].hash : "");
            m->keys[k].has_hash = r[i].hash != NULL;
            m->keys[k].first = r[i].offset;
            row = 1;
        } else if (m->keys[k].has_hash == (r[i].hash != NULL) &&
                   (!r[i].hash || strcmp(m->keys[k].hash, r[i].hash) == 0)) {
            m->ndups++;
        } else {
            snprintf(item, sizeof item, "%lld:identity_conflict",
                     (long long)r[i].offset);
            add_item(m->dls, sizeof m->dls, ",", item);
            m->ndls++;
            snprintf(item, sizeof item,
                     "%lld=identity %s first applied from t[0]@%lld with "
                     "payload hash %s, now %s",
                     (long long)r[i].offset, r[i].identity,
                     (long long)m->keys[k].first,
                     m->keys[k].has_hash ? m->keys[k].hash : "(none)",
                     r[i].hash ? r[i].hash : "(none)");
            add_item(m->conflicts, sizeof m->conflicts, "|", item);
        }
        if (!row)
            continue;
        if (strcmp(r[i].body, "bad") == 0) {
            snprintf(item, sizeof item, "%lld:rejected",
                     (long long)r[i].offset);
            add_item(m->dls, sizeof m->dls, ",", item);
            m->ndls++;
            continue;
        }
        snprintf(item, sizeof item, "%lld", (long long)r[i].offset);
        add_item(m->rows, sizeof m->rows, ",", item);
        m->nrows++;
    }
    /* the refused rows' keys, forgotten after the batch's keys */
    for (size_t i = 0; i < n; i++)
        if (r[i].identity && r[i].identity != HUGE_ID &&
            strcmp(r[i].body, "bad") == 0) {
            int k = model_find(m, r[i].identity);
            if (k >= 0 && m->keys[k].first == r[i].offset)
                model_forget(m, r[i].identity);
        }
}

/* The database's own rows, dead letters, keys and marker against the
 * model. */
static void model_check(const model *m, const char *when) {
    char v[4096], want[4096];
    sql_text("SELECT coalesce(string_agg(_tm_offset::text, ',' ORDER BY "
             "_tm_offset), '') FROM $S.t",
             v, sizeof v);
    ck_assert_msg(strcmp(v, m->rows) == 0, "%s: rows %s, want %s", when, v,
                  m->rows);
    sql_text("SELECT coalesce(string_agg(\"offset\" || ':' || reason, ',' "
             "ORDER BY \"offset\"), '') FROM $S.tidemark_dead_letters",
             v, sizeof v);
    ck_assert_msg(strcmp(v, m->dls) == 0, "%s: dead letters %s, want %s", when,
                  v, m->dls);
    sql_text("SELECT coalesce(string_agg(\"offset\" || '=' || detail, '|' "
             "ORDER BY \"offset\"), '') FROM $S.tidemark_dead_letters WHERE "
             "reason = 'identity_conflict'",
             v, sizeof v);
    ck_assert_msg(strcmp(v, m->conflicts) == 0, "%s: conflicts\n%s\nwant\n%s",
                  when, v, m->conflicts);
    want[0] = '\0';
    /* the keys in the server's order of identity */
    sql_text("SELECT coalesce(string_agg(identity || '/' || "
             "coalesce(payload_hash, '-') || '@' || first_offset, ',' ORDER "
             "BY first_offset), '') FROM $S.tidemark_keys",
             v, sizeof v);
    int64_t last = -1;
    for (size_t done = 0; done < m->nkeys; done++) {
        size_t next = 0;
        int64_t best = INT64_MAX;
        for (size_t i = 0; i < m->nkeys; i++)
            if (m->keys[i].first > last && m->keys[i].first < best) {
                best = m->keys[i].first;
                next = i;
            }
        char item[128];
        snprintf(item, sizeof item, "%s/%s@%lld", m->keys[next].identity,
                 m->keys[next].has_hash ? m->keys[next].hash : "-",
                 (long long)best);
        add_item(want, sizeof want, ",", item);
        last = best;
    }
    ck_assert_msg(strcmp(v, want) == 0, "%s: keys %s, want %s", when, v, want);
    snprintf(want, sizeof want, "%d/%d/%d", m->nrows, m->ndls, m->ndups);
    sql_text("SELECT \"rows\" || '/' || dead_letters || '/' || duplicates "
             "FROM $S.tidemark_markers",
             v, sizeof v);
    ck_assert_msg(strcmp(v, want) == 0, "%s: marker %s, want %s", when, v,
                  want);
}

static int set_refusals;      /* the commit's warnings that the set fell back */
static int probes_after_copy; /* a COPY of every key met a key stored */
static void counting_log(void *ctx, tm_log_level level, const char *fmt, ...) {
    (void)ctx;
    if (level == TM_LOG_WARN && strstr(fmt, "set of business keys failed"))
        set_refusals++;
    if (level == TM_LOG_DEBUG && strstr(fmt, "was stored before; probing"))
        probes_after_copy++;
}

/* The batch's keys decided as a set give the per-record path's outcomes
 * offset for offset: in-batch repeats and conflicts (against the first
 * occurrence), keys stored by an earlier batch, a refused row whose key
 * is forgotten (and a later repeat of it in the same batch still a
 * duplicate), a key expired by the retention, identities that need
 * escaping in an array literal, null payload hashes; then a batch with a
 * key the index refuses, which falls back to one record at a time. */
START_TEST(keys_as_a_set_match_the_per_record_outcomes) {
    char text[512];
    snprintf(text, sizeof text,
             "CREATE SCHEMA \"%s\"; CREATE TABLE \"%s\".t (id bigint NOT "
             "NULL, body text CHECK (body <> 'bad'), _tm_topic text NOT NULL, "
             "_tm_partition int NOT NULL, _tm_offset bigint NOT NULL, "
             "_tm_identity text)",
             schema, schema);
    PQclear(sql(text));
    static char huge[12001];
    unsigned x = 12345;
    for (size_t i = 0; i + 1 < sizeof huge; i++) {
        x = x * 1103515245u + 12345u;
        huge[i] = (char)('!' + (x >> 16) % 90);
    }
    HUGE_ID = huge;
    tm_host_api host = *tm_host_services();
    host.log = counting_log;
    set_refusals = 0;
    conf c;
    conf_init(&c,
              BASIC ", \"dedup_keys\": \"rows\", \"dedup_retention_s\": 3600}",
              TM_CONFIG_DEDUP, 2);
    void *sink = open_with(&c, &host);
    tm_marker mk = claim1(sink);
    model m = {0};
    batch b;
    const rec b1[] = {{0, 1, "a", "k1", "h1"},  {1, 2, "a", "k2", "h2"},
                      {2, 1, "a", "k1", "h1"},  {3, 1, "a", "k1", "hX"},
                      {4, 3, "a", "k3", "h3"},  {5, 4, "a", NULL, NULL},
                      {6, 2, "a", "k2", "h2"},  {7, 5, "bad", "k4", "h4"},
                      {8, 5, "a", "k4", "h4"},  {9, 6, "a", "k5", NULL},
                      {10, 6, "a", "k5", NULL}, {11, 6, "a", "k5", "h5"}};
    const rec b2[] = {
        {12, 1, "a", "k1", "h1"},      {13, 2, "a", "k2", "hY"},
        {14, 5, "a", "k4", "h4"},      {15, 5, "a", "k4", "h4"},
        {16, 7, "a", "k6", "h6"},      {17, 7, "a", "k6", "h7"},
        {18, 3, "a", "k3", "h3"},      {19, 8, "a", NULL, NULL},
        {20, 9, "a", "q\"\\{,}", "h"}, {21, 9, "a", "q\"\\{,}", "h"},
        {22, 9, "a", "NULL", "h"},     {23, 9, "a", "ключ", "h"}};
    const rec b3[] = {{24, 1, "a", "k1", "h9"},
                      {25, 1, "a", "k1", "h9"},
                      {26, 2, "a", "k2", "h2"},
                      {27, 9, "a", "ключ", "h2"}};
    const rec b4[] = {{28, 7, "a", "k6", "h6"}, {29, 9, "a", "k7", "h7"},
                      {30, 9, "b", huge, "hh"}, {31, 9, "a", "k7", "h8"},
                      {32, 5, "a", "k4", "h4"}, {33, 9, "bad", "k8", "h8"},
                      {34, 9, "a", "k8", "h8"}, {35, 9, "a", "k1", "h1"}};
    batch_make(&b, 0, 12, mk.epoch, b1, 12);
    commit_ok(sink, &b);
    model_batch(&m, b1, 12);
    model_check(&m, "batch 1");
    batch_make(&b, 12, 24, mk.epoch, b2, 12);
    commit_ok(sink, &b);
    model_batch(&m, b2, 12);
    model_check(&m, "batch 2");
    /* k1 expires by both clocks: the next batch's prune forgets it */
    pgt_sql_text(admin, schema,
                 "WITH u AS (UPDATE $S.tidemark_keys SET applied_at = "
                 "-9000000000000, applied_wall = 0 WHERE identity = 'k1' "
                 "RETURNING 1) SELECT count(*) FROM u",
                 text, sizeof text);
    ck_assert_str_eq(text, "1");
    model_forget(&m, "k1");
    batch_make(&b, 24, 28, mk.epoch, b3, 4);
    commit_ok(sink, &b);
    model_batch(&m, b3, 4);
    model_check(&m, "batch 3");
    ck_assert_int_eq(set_refusals, 0); /* every key so far went as a set */
    batch_make(&b, 28, 36, mk.epoch, b4, 8);
    commit_ok(sink, &b);
    /* the fallback happened, or this batch proves nothing about it */
    ck_assert_msg(set_refusals == 1, "inconclusive: %d set refusals, want 1",
                  set_refusals);
    model_batch(&m, b4, 8);
    model_check(&m, "batch 4");
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* ---- error classes by SQLSTATE ------------------------------------------
 */

/* A trigger on the target raises the SQLSTATE a record's body names
 * ("raise:<code>"), so every class goes through the sink's real paths. */
static const struct {
    const char *state;
    tm_status want; /* TM_OK: the record is a dead letter */
} STATES[] = {
    {"22P05", TM_OK},    {"22001", TM_OK},    {"23514", TM_OK},
    {"23505", TM_OK},    {"54000", TM_OK},    {"08006", TM_RETRY},
    {"08000", TM_RETRY}, {"53100", TM_RETRY}, {"53200", TM_RETRY},
    {"53300", TM_RETRY}, {"57P01", TM_RETRY}, {"57P03", TM_RETRY},
    {"57014", TM_RETRY}, {"40001", TM_RETRY}, {"40P01", TM_RETRY},
    {"55P03", TM_RETRY}, {"42501", TM_FATAL}, {"42P01", TM_FATAL},
    {"42703", TM_FATAL}, {"XX000", TM_FATAL}, {"P0000", TM_OK},
    {"P0001", TM_OK},    {"P0002", TM_OK},    {"P0003", TM_OK},
    {"P0004", TM_OK},    {"TM001", TM_FATAL}, /* a trigger's own code */
};

START_TEST(sqlstate_classes) {
    char text[1024];
    snprintf(text, sizeof text,
             "CREATE SCHEMA \"%s\"; CREATE TABLE \"%s\".t (id bigint NOT "
             "NULL, body text, _tm_topic text NOT NULL, _tm_partition int NOT "
             "NULL, _tm_offset bigint NOT NULL, _tm_identity text); CREATE "
             "FUNCTION \"%s\".refuse() RETURNS trigger LANGUAGE plpgsql AS $$ "
             "BEGIN IF NEW.body LIKE 'raise:%%' THEN RAISE EXCEPTION 'test "
             "refuses %%', NEW.body USING ERRCODE = substr(NEW.body, 7); END "
             "IF; RETURN NEW; END $$; CREATE TRIGGER refuse BEFORE INSERT ON "
             "\"%s\".t FOR EACH ROW EXECUTE FUNCTION \"%s\".refuse()",
             schema, schema, schema, schema, schema);
    PQclear(sql(text));
    const char *state = STATES[_i].state;
    conf c;
    conf_init(&c, BASIC "}", 0, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    char body[32];
    snprintf(body, sizeof body, "raise:%s", state);
    batch b;
    rec r[] = {{0, 1, "a", NULL, NULL},
               {1, 2, body, NULL, NULL},
               {2, 3, "c", NULL, NULL}};
    batch_make(&b, 0, 3, m.epoch, r, 3);
    tm_error err;
    tm_status rc = commit(sink, &b, &err);
    ck_assert_msg(rc == STATES[_i].want, "%s: %s, want %s: %s", state,
                  tm_status_name(rc), tm_status_name(STATES[_i].want),
                  err.message);
    char v[512], q[512];
    if (rc == TM_OK) {
        sql_text("SELECT string_agg(body, ',' ORDER BY _tm_offset) FROM $S.t",
                 v, sizeof v);
        ck_assert_str_eq(v, "a,c");
        snprintf(q, sizeof q,
                 "SELECT reason || '@' || \"offset\" || ':' || (detail LIKE "
                 "'%%(SQLSTATE %s)%%') FROM $S.tidemark_dead_letters",
                 state);
        sql_text(q, v, sizeof v);
        ck_assert_str_eq(v, "rejected@1:true");
        sql_text("SELECT \"rows\" || '/' || dead_letters || '/' || next_offset "
                 "FROM $S.tidemark_markers",
                 v, sizeof v);
        ck_assert_str_eq(v, "2/1/3");
    } else {
        ck_assert_msg(strstr(err.message, state), "%s", err.message);
        ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 0);
        ck_assert_int_eq(sql_int("SELECT count(*) FROM "
                                 "$S.tidemark_dead_letters"),
                         0);
    }
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* A business key the database refuses for its content (an identity too
 * long for the key index: 54000) is the record's dead letter, not a FATAL
 * that fails again at the same record after every restart. */
START_TEST(refused_business_key_is_a_dead_letter) {
    conf c;
    conf_init(&c, BASIC ", \"dedup_keys\": \"rows\"}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    static char huge[12001];
    random_text(huge, sizeof huge, 12345);
    batch b;
    rec r[] = {{0, 1, "a", "k0", "h0"},
               {1, 2, "b", huge, "h1"},
               {2, 3, "c", "k2", "h2"}};
    batch_make(&b, 0, 3, m.epoch, r, 3);
    commit_ok(sink, &b);
    char v[512];
    sql_text("SELECT string_agg(body, ',' ORDER BY _tm_offset) FROM $S.t", v,
             sizeof v);
    ck_assert_str_eq(v, "a,c");
    sql_text("SELECT reason || '@' || \"offset\" || ':' || (detail LIKE "
             "'%(SQLSTATE 54000)%') FROM $S.tidemark_dead_letters",
             v, sizeof v);
    ck_assert_str_eq(v, "rejected@1:true");
    sql_text("SELECT \"rows\" || '/' || dead_letters || '/' || next_offset || "
             "'/' || (SELECT count(*) FROM $S.tidemark_keys) FROM "
             "$S.tidemark_markers",
             v, sizeof v);
    ck_assert_str_eq(v, "2/1/3/2");
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* Raw mode always makes a row: a header holding a NUL byte (which jsonb
 * refuses as \u0000, 22P05) is stored as {"base64": ...} of its bytes,
 * the form of a header that is not UTF-8. */
START_TEST(raw_header_with_nul_is_a_row) {
    static const tm_column RAWCOLS[] = {
        {sizeof(tm_column), "key", TM_TYPE_BYTES, 0, 0},
        {sizeof(tm_column), "value", TM_TYPE_BYTES, 0, 0},
        {sizeof(tm_column), "headers", TM_TYPE_JSON, 0, 0},
        {sizeof(tm_column), "topic", TM_TYPE_TEXT, 1, 0},
        {sizeof(tm_column), "partition", TM_TYPE_INT, 1, 0},
        {sizeof(tm_column), "offset", TM_TYPE_INT, 1, 0},
        {sizeof(tm_column), "timestamp", TM_TYPE_TIMESTAMP, 0, 0},
    };
    static const char HEADERS[] =
        "[[\"h\",\"a\\u0000b\"],[\"n\",null],[\"e\",\"\\\\u0000\"],"
        "[\"s\",\"\\ud83d\\ude00\\u0000\"],[\"p\",\"plain\"]]";
    conf c;
    conf_init(&c, BASIC "}", TM_CONFIG_RAW, 7);
    c.config.columns = RAWCOLS;
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r[] = {{0, 0, "", NULL, NULL}};
    batch_make(&b, 0, 1, m.epoch, r, 1);
    tm_value *v = b.values[0];
    for (int k = 0; k < 7; k++)
        v[k] = (tm_value){.struct_size = sizeof(tm_value)};
    v[0].v.s.ptr = "k";
    v[0].v.s.len = 1;
    v[1].v.s.ptr = "{}";
    v[1].v.s.len = 2;
    v[2].v.s.ptr = HEADERS;
    v[2].v.s.len = strlen(HEADERS);
    v[3].v.s.ptr = "t";
    v[3].v.s.len = 1;
    v[4].v.i = 0;
    v[5].v.i = 0;
    v[6].is_null = 1;
    commit_ok(sink, &b);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_dead_letters"),
                     0);
    char got[512];
    sql_text("SELECT headers = '[[\"h\",{\"base64\":\"YQBi\"}],[\"n\",null],"
             "[\"e\",\"\\\\u0000\"],[\"s\",{\"base64\":\"8J+YgAA=\"}],[\"p\","
             "\"plain\"]]'::jsonb FROM $S.t",
             got, sizeof got);
    ck_assert_msg(strcmp(got, "t") == 0, "stored: %s", got);
    api->close(sink);
    conf_done(&c);
}
END_TEST

START_TEST(validate_reports_both_shapes) {
    char text[512];
    snprintf(text, sizeof text,
             "CREATE SCHEMA \"%s\"; CREATE TABLE \"%s\".t (id text, body "
             "text)",
             schema, schema);
    PQclear(sql(text));
    conf c;
    conf_init(&c, BASIC "}", 0, 2);
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(api->validate(tm_host_services(), &c.config, &err),
                     TM_INVALID);
    ck_assert_msg(strstr(err.message, "\"id\" is text") &&
                      strstr(err.message, "Table: (id text, body text)") &&
                      strstr(err.message, "Mapping: (id bigint NOT NULL"),
                  "%s", err.message);
    void *sink = NULL;
    ck_assert_int_eq(api->open(tm_host_services(), &c.config, &sink, &err),
                     TM_INVALID);
    conf_done(&c);
    /* upsert on a fitting table without the unique index */
    snprintf(text, sizeof text,
             "DROP TABLE \"%s\".t; CREATE TABLE \"%s\".t (id bigint, body "
             "text, _tm_topic text, _tm_partition int, _tm_offset bigint, "
             "_tm_identity text)",
             schema, schema);
    PQclear(sql(text));
    conf_init(&c, BASIC ", \"mode\": \"upsert\", \"create\": false}", 0, 2);
    ck_assert_int_eq(api->validate(tm_host_services(), &c.config, &err),
                     TM_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "UNIQUE index"));
    conf_done(&c);
    conf_init(&c, BASIC ", \"create\": false}", 0, 2);
    ck_assert_int_eq(api->validate(tm_host_services(), &c.config, &err), TM_OK);
    conf_done(&c);
}
END_TEST

START_TEST(identifiers_are_escaped) {
    char json[512];
    snprintf(json, sizeof json,
             "{\"conninfo\": \"$C\", \"schema\": \"$S\", \"table\": "
             "\"we\\\"ird'; DROP TABLE x; --\"}");
    conf c;
    conf_init(&c, json, 0, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r[] = {{0, 1, "a'); --", NULL, NULL}};
    batch_make(&b, 0, 1, m.epoch, r, 1);
    commit_ok(sink, &b);
    ck_assert_int_eq(
        sql_int("SELECT count(*) FROM $S.\"we\"\"ird'; DROP TABLE x; --\""), 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* ---- failures -----------------------------------------------------------
 */

static void terminate_sink_backend(void) {
    char q[256];
    snprintf(q, sizeof q,
             "SELECT count(pg_terminate_backend(pid, 5000)) FROM "
             "pg_stat_activity WHERE application_name = '%s'",
             connector);
    PQclear(sql(q));
}

static int rows_exactly(int64_t end) {
    char q[256];
    snprintf(q, sizeof q,
             "SELECT count(*) = %lld AND count(DISTINCT _tm_offset) = %lld "
             "AND max(_tm_offset) = %lld FROM $S.t",
             (long long)end, (long long)end, (long long)end - 1);
    char v[8];
    sql_text(q, v, sizeof v);
    return strcmp(v, "t") == 0;
}

START_TEST(lost_connection_between_calls_is_retry) {
    conf c;
    conf_init(&c, BASIC "}", 0, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r[] = {{0, 1, "a", NULL, NULL}, {1, 2, "b", NULL, NULL}};
    batch_make(&b, 0, 2, m.epoch, r, 2);
    terminate_sink_backend();
    tm_error err;
    ck_assert_int_eq(commit(sink, &b, &err), TM_RETRY);
    commit_ok(sink, &b); /* reconnected */
    ck_assert_int_eq(commit(sink, &b, &err), TM_ALREADY);
    ck_assert(rows_exactly(2));
    api->close(sink);
    conf_done(&c);
}
END_TEST

static const char *kill_at;
static void killing_fault(const char *point) {
    if (kill_at && strcmp(point, kill_at) == 0)
        terminate_sink_backend();
}

START_TEST(lost_connection_inside_commit_is_retry) {
    static const char *const POINTS[] = {TM_FAULT_AFTER_EFFECTS,
                                         TM_FAULT_AFTER_MARKER};
    static tm_host_api host;
    host = *tm_host_services();
    host.fault = killing_fault;
    conf c;
    conf_init(&c, BASIC "}", 0, 2);
    void *sink = open_with(&c, &host);
    tm_marker m = claim1(sink);
    batch b;
    rec r[] = {{0, 1, "a", NULL, NULL}, {1, 2, "b", NULL, NULL}};
    batch_make(&b, 0, 2, m.epoch, r, 2);
    kill_at = POINTS[_i];
    tm_error err;
    ck_assert_int_eq(commit(sink, &b, &err), TM_RETRY);
    kill_at = NULL;
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 0);
    commit_ok(sink, &b); /* the resend's check: not landed, apply */
    ck_assert(rows_exactly(2));
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* Interrupts the sink once its backend is seen waiting on a lock
 * (pg_stat_activity), so the interrupt lands in the wait, not before it.
 * Check's asserts stay in the test's thread: this one only records. */
typedef struct poke {
    void *sink;
    atomic_int saw_wait;   /* the sink's backend was waiting on a lock */
    atomic_llong poked_ms; /* when interrupt() was called */
} poke;

static void *interrupter(void *arg) {
    poke *p = arg;
    PGconn *c = PQconnectdb(pgt_conninfo());
    char q[256];
    snprintf(q, sizeof q,
             "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
             "'%s' AND wait_event_type = 'Lock'",
             connector);
    int64_t until = tm_clock_mono_ms() + 20000;
    while (PQstatus(c) == CONNECTION_OK && tm_clock_mono_ms() < until) {
        PGresult *r = PQexec(c, q);
        int waiting = PQresultStatus(r) == PGRES_TUPLES_OK &&
                      atoi(PQgetvalue(r, 0, 0)) > 0;
        PQclear(r);
        if (waiting) {
            atomic_store(&p->saw_wait, 1);
            break;
        }
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    PQfinish(c);
    atomic_store(&p->poked_ms, (long long)tm_clock_mono_ms());
    api->interrupt(p->sink);
    return NULL;
}

/* Another session holds the partition's marker row FOR UPDATE; CALL (a
 * commit or a claim) blocks on it until interrupt() from another thread:
 * TM_RETRY promptly (statement_timeout_ms is a minute: only the interrupt
 * can end the wait this soon), naming the interrupt, not TM_FATAL. */
static void interrupted_while_blocked(void *sink,
                                      tm_status (*call)(void *, void *),
                                      void *arg) {
    char q[256];
    snprintf(q, sizeof q,
             "BEGIN; SELECT * FROM \"%s\".tidemark_markers FOR UPDATE", schema);
    PQclear(sql(q));
    poke p = {.sink = sink};
    atomic_init(&p.saw_wait, 0);
    atomic_init(&p.poked_ms, 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, interrupter, &p), 0);
    tm_status rc = call(sink, arg);
    int64_t returned = tm_clock_mono_ms();
    pthread_join(th, NULL);
    ck_assert_msg(atomic_load(&p.saw_wait),
                  "inconclusive: the sink was never seen waiting on the "
                  "marker lock (%s)",
                  tm_status_name(rc));
    ck_assert_msg(rc == TM_RETRY, "%s, want RETRY", tm_status_name(rc));
    int64_t after = returned - (int64_t)atomic_load(&p.poked_ms);
    ck_assert_msg(after < 3000, "returned %lld ms after interrupt()",
                  (long long)after);
    PQclear(sql("ROLLBACK"));
}

/* interrupt() once commit() was entered but before its first statement
 * (the host's fault hook runs there, in the call): the call is in
 * progress, so it gives up, rather than wait for the marker row another
 * session holds until statement_timeout_ms. */
static void *early_sink;
static void interrupting_fault(const char *point) {
    if (early_sink && strcmp(point, TM_FAULT_BEFORE_BEGIN) == 0)
        api->interrupt(early_sink);
}

START_TEST(interrupt_at_the_start_of_a_call) {
    static tm_host_api host;
    host = *tm_host_services();
    host.fault = interrupting_fault;
    conf c;
    conf_init(&c, BASIC ", \"statement_timeout_ms\": 5000}", 0, 2);
    void *sink = open_with(&c, &host);
    tm_marker m = claim1(sink);
    char q[256];
    snprintf(q, sizeof q,
             "BEGIN; SELECT * FROM \"%s\".tidemark_markers FOR UPDATE", schema);
    PQclear(sql(q));
    batch b;
    rec r[] = {{0, 1, "a", NULL, NULL}};
    batch_make(&b, 0, 1, m.epoch, r, 1);
    early_sink = sink;
    int64_t t0 = tm_clock_mono_ms();
    tm_error err;
    tm_status rc = commit(sink, &b, &err);
    int64_t took = tm_clock_mono_ms() - t0;
    early_sink = NULL;
    ck_assert_msg(rc == TM_RETRY && took < 3000 &&
                      strstr(err.message, "interrupted"),
                  "%s after %lld ms: %s", tm_status_name(rc), (long long)took,
                  err.message);
    PQclear(sql("ROLLBACK"));
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 0);
    /* the interrupt ended with that call: the next one applies */
    commit_ok(sink, &b);
    ck_assert(rows_exactly(1));
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* The sink's own TCP connection to the server, found among the process's
 * descriptors (the plugin runs in this process): a TCP socket to the
 * server's port that is not the test's own connection. -1 if none. */
static int sink_socket(void) {
    struct sockaddr_storage ss;
    socklen_t len;
    int server_port = 0, found = -1, n = 0;
    len = sizeof ss;
    ck_assert_int_eq(getpeername(PQsocket(admin), (struct sockaddr *)&ss, &len),
                     0);
    ck_assert_int_eq(ss.ss_family, AF_INET); /* the conninfo's host is TCP */
    server_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    for (int fd = 0; fd < 1024; fd++) {
        len = sizeof ss;
        if (fd == PQsocket(admin) ||
            getpeername(fd, (struct sockaddr *)&ss, &len) != 0 ||
            ss.ss_family != AF_INET ||
            ntohs(((struct sockaddr_in *)&ss)->sin_port) != server_port)
            continue;
        found = fd;
        n++;
    }
    ck_assert_msg(n == 1,
                  "inconclusive: %d sockets to the server besides "
                  "the test's own",
                  n);
    return found;
}

static int sockopt(int fd, int level, int name) {
    int v = -1;
    socklen_t len = sizeof v;
    ck_assert_int_eq(getsockopt(fd, level, name, &v, &len), 0);
    return v;
}

/* A network partition must not block a connector for the kernel's ~15
 * minutes of retransmissions: keepalives and tcp_user_timeout are set on
 * the sink's socket, unless the user's conninfo sets them. */
START_TEST(tcp_keepalives_and_user_timeout) {
    conf c;
    conf_init(&c, BASIC "}", 0, 2);
    void *sink = open_ok(&c);
    int fd = sink_socket();
    ck_assert_int_eq(sockopt(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
    ck_assert_int_eq(sockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE), 10);
    ck_assert_int_eq(sockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL), 5);
    ck_assert_int_eq(sockopt(fd, IPPROTO_TCP, TCP_KEEPCNT), 3);
    ck_assert_int_eq(sockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 30000);
    api->close(sink);
    conf_done(&c);
    /* the user's own values win */
    char json[1024];
    snprintf(json, sizeof json,
             "{\"conninfo\": \"%s keepalives_idle=77 tcp_user_timeout=4321\", "
             "\"schema\": \"$S\", \"table\": \"t\"}",
             pgt_conninfo());
    conf_init(&c, json, 0, 2);
    sink = open_ok(&c);
    fd = sink_socket();
    ck_assert_int_eq(sockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE), 77);
    ck_assert_int_eq(sockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL), 5);
    ck_assert_int_eq(sockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 4321);
    api->close(sink);
    conf_done(&c);
}
END_TEST

static tm_error call_err;

static tm_status commit_call(void *sink, void *arg) {
    return commit(sink, arg, &call_err);
}

static tm_status claim_call(void *sink, void *arg) {
    tm_marker *m = arg;
    call_err = (tm_error){sizeof call_err, ""};
    return api->claim(sink, m, 1, 0, &call_err);
}

START_TEST(interrupt_cancels_a_lock_wait) {
    conf c;
    conf_init(&c, BASIC ", \"statement_timeout_ms\": 60000}", 0, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    api->interrupt(sink); /* idle: harmless */
    batch b;
    rec r[] = {{0, 1, "a", NULL, NULL}};
    batch_make(&b, 0, 1, m.epoch, r, 1);
    interrupted_while_blocked(sink, commit_call, &b);
    ck_assert_msg(strstr(call_err.message, "interrupted"), "%s",
                  call_err.message);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 0);
    commit_ok(sink, &b);
    ck_assert(rows_exactly(1));
    api->close(sink);
    conf_done(&c);
}
END_TEST

START_TEST(interrupt_cancels_a_blocked_claim) {
    conf c;
    conf_init(&c, BASIC ", \"statement_timeout_ms\": 60000}", 0, 2);
    void *sink = open_ok(&c);
    tm_marker first = claim1(sink);
    tm_marker m = {.struct_size = sizeof m, .topic = "t", .partition = 0};
    interrupted_while_blocked(sink, claim_call, &m);
    ck_assert_msg(strstr(call_err.message, "interrupted"), "%s",
                  call_err.message);
    /* nothing changed: the epoch is the first claim's */
    ck_assert_int_eq(sql_int("SELECT epoch FROM $S.tidemark_markers"),
                     first.epoch);
    tm_marker again = claim1(sink);
    ck_assert_int_eq(again.epoch, first.epoch + 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* Commits the test's open transaction (the admin connection) once the
 * sink's backend is seen waiting on a lock; records only. */
typedef struct releaser {
    atomic_int saw_wait;
} releaser;

static void *release_when_waited(void *arg) {
    releaser *x = arg;
    PGconn *c = PQconnectdb(pgt_conninfo());
    char q[256];
    snprintf(q, sizeof q,
             "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
             "'%s' AND wait_event_type = 'Lock'",
             connector);
    int64_t until = tm_clock_mono_ms() + 20000;
    while (PQstatus(c) == CONNECTION_OK && tm_clock_mono_ms() < until) {
        PGresult *r = PQexec(c, q);
        int waiting = PQresultStatus(r) == PGRES_TUPLES_OK &&
                      atoi(PQgetvalue(r, 0, 0)) > 0;
        PQclear(r);
        if (waiting) {
            atomic_store(&x->saw_wait, 1);
            break;
        }
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    PQfinish(c);
    /* the main thread is inside commit(): admin is this thread's now */
    PQclear(PQexec(admin, "COMMIT"));
    return NULL;
}

/* A key that another transaction stores while this batch decides its keys
 * (another member of the group, on another partition) is a duplicate, not
 * a second row, whichever way the batch goes (_i): 0, the last batch had
 * no key stored before, so the COPY of every key goes first: it waits for
 * the other transaction, fails on its key (23505), and the probe after it
 * finds the key stored; 1, the last batch had one, so the probe goes
 * first, its snapshot misses the key, the COPY of the others fails on it,
 * and the batch decides its keys again one record at a time. */
START_TEST(key_stored_concurrently_is_decided_again) {
    tm_host_api host = *tm_host_services();
    host.log = counting_log;
    set_refusals = probes_after_copy = 0;
    conf c;
    conf_init(&c, BASIC ", \"dedup_keys\": \"rows\"}", TM_CONFIG_DEDUP, 2);
    void *sink = open_with(&c, &host);
    tm_marker m = claim1(sink);
    batch b;
    rec r1[] = {{0, 1, "a", "k0", "h0"}};
    batch_make(&b, 0, 1, m.epoch, r1, 1);
    commit_ok(sink, &b);
    int64_t at = 1; /* the next offset */
    if (_i == 1) {
        rec again[] = {{1, 1, "a", "k0", "h0"}}; /* a key stored before */
        batch_make(&b, 1, 2, m.epoch, again, 1);
        commit_ok(sink, &b);
        ck_assert_int_eq(probes_after_copy, 1);
        at = 2;
    }
    char q[512];
    snprintf(q, sizeof q,
             "BEGIN; INSERT INTO \"%s\".tidemark_keys (connector, identity, "
             "payload_hash, first_topic, first_partition, first_offset, "
             "applied_at, applied_wall) VALUES ('%s', 'kc', 'hc', 't', 1, 99, "
             "1000, 0)",
             schema, connector);
    PQclear(sql(q));
    releaser x;
    atomic_init(&x.saw_wait, 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, release_when_waited, &x), 0);
    rec r2[] = {{at, 2, "b", "kc", "hc"}, {at + 1, 3, "c", "kn", "hn"}};
    batch_make(&b, at, at + 2, m.epoch, r2, 2);
    tm_error err;
    tm_status rc = commit(sink, &b, &err);
    pthread_join(th, NULL);
    ck_assert_msg(atomic_load(&x.saw_wait),
                  "inconclusive: the sink never waited on the other "
                  "transaction's key (%s)",
                  tm_status_name(rc));
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
    /* the way the batch went: the probe after the COPY, or the set
     * failed and one record at a time */
    ck_assert_int_eq(probes_after_copy, 1);
    ck_assert_int_eq(set_refusals, _i == 1);
    char v[256], want[64];
    sql_text("SELECT string_agg(_tm_offset::text, ',' ORDER BY _tm_offset) "
             "FROM $S.t",
             v, sizeof v);
    snprintf(want, sizeof want, "0,%lld", (long long)at + 1);
    ck_assert_str_eq(v, want);
    sql_text("SELECT \"rows\" || '/' || dead_letters || '/' || duplicates "
             "FROM $S.tidemark_markers",
             v, sizeof v);
    ck_assert_str_eq(v, _i == 1 ? "2/0/2" : "2/0/1");
    ck_assert_int_eq(sql_int("SELECT first_offset FROM $S.tidemark_keys WHERE "
                             "identity = 'kc'"),
                     99);
    api->close(sink);
    conf_done(&c);
}
END_TEST

START_TEST(past_deadline_is_retry_with_nothing_written) {
    conf c;
    conf_init(&c, BASIC "}", 0, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b;
    rec r[] = {{0, 1, "a", NULL, NULL}};
    batch_make(&b, 0, 1, m.epoch, r, 1);
    b.b.deadline_ms = tm_clock_mono_ms() - 1;
    tm_error err;
    ck_assert_int_eq(commit(sink, &b, &err), TM_RETRY);
    ck_assert_ptr_nonnull(strstr(err.message, "deadline"));
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.t"), 0);
    b.b.deadline_ms = 0;
    commit_ok(sink, &b);
    ck_assert(rows_exactly(1));
    api->close(sink);
    conf_done(&c);
}
END_TEST

START_TEST(statement_timeout_is_retry) {
    conf c;
    conf_init(&c, BASIC ", \"statement_timeout_ms\": 300}", 0, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    char q[256];
    snprintf(q, sizeof q,
             "BEGIN; SELECT * FROM \"%s\".tidemark_markers FOR UPDATE", schema);
    PQclear(sql(q));
    batch b;
    rec r[] = {{0, 1, "a", NULL, NULL}};
    batch_make(&b, 0, 1, m.epoch, r, 1);
    tm_error err;
    ck_assert_int_eq(commit(sink, &b, &err), TM_RETRY);
    ck_assert_msg(strstr(err.message, "57014"), "%s", err.message);
    PQclear(sql("ROLLBACK"));
    commit_ok(sink, &b);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* A markers table made before the lineage (ABI 1.0, without its three
 * columns) gets them at open; its marker keeps its offset and reads as "no
 * lineage" (the host then checks nothing at claim). */
START_TEST(old_markers_table_gets_the_lineage) {
    char text[1024];
    snprintf(text, sizeof text,
             "CREATE SCHEMA \"%s\"; CREATE TABLE \"%s\".tidemark_markers "
             "(connector text NOT NULL, topic text NOT NULL, \"partition\" "
             "integer NOT NULL, next_offset bigint NOT NULL, epoch bigint NOT "
             "NULL, last_batch_id text NOT NULL DEFAULT '', \"rows\" bigint "
             "NOT NULL DEFAULT 0, dead_letters bigint NOT NULL DEFAULT 0, "
             "filtered bigint NOT NULL DEFAULT 0, duplicates bigint NOT NULL "
             "DEFAULT 0, PRIMARY KEY (connector, topic, \"partition\")); "
             "INSERT INTO \"%s\".tidemark_markers (connector, topic, "
             "\"partition\", next_offset, epoch) VALUES ('%s', 't', 0, 5, 1)",
             schema, schema, schema, connector);
    PQclear(sql(text));
    const char *count =
        "SELECT count(*) FROM information_schema.columns WHERE "
        "table_schema "
        "= '%s' AND table_name = 'tidemark_markers' AND column_name IN "
        "('last_offset', 'last_timestamp_ms', 'last_record_hash')";
    snprintf(text, sizeof text, count, schema);
    ck_assert_int_eq(sql_int(text), 0);
    conf c;
    conf_init(&c, BASIC "}", 0, 2);
    void *sink = open_ok(&c);
    ck_assert_int_eq(sql_int(text), 3);
    tm_marker m = pgt_claim1(api, sink);
    ck_assert_int_eq(m.next_offset, 5);
    ck_assert_int_eq(m.epoch, 2);
    ck_assert_int_eq(m.last_offset, TM_NO_OFFSET);
    ck_assert_str_eq(m.last_record_hash, "");
    api->close(sink);
    conf_done(&c);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("postgres_sink");
    TCase *tc = tcase_create("api");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, settings_errors_name_the_key, 0,
                        (int)(sizeof BAD / sizeof BAD[0]));
    tcase_add_test(tc, unreachable_is_retry);
    tcase_add_test(tc, old_markers_table_gets_the_lineage);
    tcase_add_test(tc, every_type_through_copy);
    tcase_add_test(tc, upsert_updates_by_key);
    tcase_add_test(tc, upsert_null_key_is_a_dead_letter);
    tcase_add_test(tc, rows_after_memory_and_orphan_key_batches_are_refused);
    tcase_add_test(tc, edited_seed_is_refused_naming_the_way_out);
    tcase_add_test(tc, keysets_row_of_another_connector_is_refused);
    tcase_add_test(tc, old_keys_written_meanwhile_are_read_at_the_next_claim);
    tcase_add_test(tc, retention_ignores_a_future_timestamp);
    tcase_add_test(tc, past_timestamp_key_is_kept_for_the_retention);
    tcase_add_test(tc, keys_from_before_the_wall_column_are_kept);
    tcase_add_test(tc, keys_age_index_only_with_a_retention);
    tcase_add_test(tc, second_connector_on_a_table_is_refused);
    tcase_add_test(tc, upsert_index_names_fit);
    tcase_add_test(tc, identity_conflict_is_a_dead_letter);
    tcase_add_test(tc, refused_rows_are_dead_letters);
    tcase_add_test(tc, replayed_dead_letter_is_stored_once);
    tcase_add_test(tc, different_dead_letter_at_a_stored_offset_is_stored);
    tcase_add_test(tc, keys_as_a_set_match_the_per_record_outcomes);
    tcase_add_loop_test(tc, key_stored_concurrently_is_decided_again, 0, 2);
    tcase_add_loop_test(tc, sqlstate_classes, 0,
                        (int)(sizeof STATES / sizeof STATES[0]));
    tcase_add_test(tc, refused_business_key_is_a_dead_letter);
    tcase_add_test(tc, raw_header_with_nul_is_a_row);
    tcase_add_test(tc, validate_reports_both_shapes);
    tcase_add_test(tc, identifiers_are_escaped);
    tcase_add_test(tc, lost_connection_between_calls_is_retry);
    tcase_add_loop_test(tc, lost_connection_inside_commit_is_retry, 0, 2);
    tcase_add_test(tc, interrupt_cancels_a_lock_wait);
    tcase_add_test(tc, interrupt_cancels_a_blocked_claim);
    tcase_add_test(tc, interrupt_at_the_start_of_a_call);
    tcase_add_test(tc, tcp_keepalives_and_user_timeout);
    tcase_add_test(tc, statement_timeout_is_retry);
    tcase_add_test(tc, past_deadline_is_retry_with_nothing_written);
    suite_add_tcase(s, tc);
    /* the keys held in memory under load limits */
    TCase *keys = tcase_create("keys");
    tcase_add_checked_fixture(keys, setup, teardown);
    tcase_set_timeout(keys, 120);
    tcase_add_test(keys, keys_load_outlasts_statement_timeout);
    tcase_add_test(keys, keys_beyond_memory_are_retry_naming_it);
    tcase_add_test(keys, empty_and_huge_identities_in_memory);
    tcase_add_test(keys, old_key_rows_load_one_at_a_time);
    suite_add_tcase(s, keys);
    /* the keys held in memory against their rows' edge cases (alone:
     * CK_RUN_CASE=memory_keys) */
    TCase *mk = tcase_create("memory_keys");
    tcase_add_checked_fixture(mk, setup, teardown);
    tcase_set_timeout(mk, 60);
    tcase_add_test(mk, keysets_row_behind_its_batch_rows_is_caught_up);
    tcase_add_test(mk, keys_in_memory_under_bytea_output_escape);
    suite_add_tcase(s, mk);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
