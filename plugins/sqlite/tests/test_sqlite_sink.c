/* The SQLite sink through its plugin API (loaded like the host loads it):
 * settings refusals naming the key, upsert, identity conflicts, the dedup
 * retention boundary, validate's shape mismatch, the deadline, quoting.
 * What the sink wrote is read back with libsqlite3 directly. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <check.h>
#include <ftw.h>
#include <pthread.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "vm_size.h"
#include "config/settings.h"
#include "plugin/loader.h"
#include "services/clock.h"
#include "services/host_services.h"

static const tm_sink_api *api;
static char dir[256], db_path[512];

/* ---- fixture ------------------------------------------------------------ */

static void load_plugin(void) {
    static tm_plugin plugin;
    char errstr[512];
    if (!api) {
        ck_assert_msg(tm_plugin_load(TM_SQLITE_PLUGIN, NULL, 0, &plugin, errstr,
                                     sizeof errstr) == 0,
                      "%s", errstr);
        api = plugin.api;
    }
}

static void setup(void) {
    load_plugin();
    snprintf(dir, sizeof dir, "%s/tm-sqlite-test-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(db_path, sizeof db_path, "%s/sink.db", dir);
}

static int rm_entry(const char *p, const struct stat *sb, int t,
                    struct FTW *f) {
    (void)sb, (void)t, (void)f;
    return remove(p);
}

static void teardown(void) {
    nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* id int (key), body text: the mapping of every test. */
static const tm_column COLS[] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 1},
    {sizeof(tm_column), "body", TM_TYPE_TEXT, 0, 0},
};

typedef struct conf {
    tm_settings *settings;
    tm_sink_config config;
} conf;

/* Settings from JSON text; "$DB" becomes the test's database path. */
static void conf_init(conf *c, const char *json_text, uint32_t flags,
                      size_t ncols) {
    char text[1024], *at;
    snprintf(text, sizeof text, "%s", json_text);
    if ((at = strstr(text, "$DB")) != NULL) {
        char rest[1024];
        snprintf(rest, sizeof rest, "%s", at + 3);
        snprintf(at, sizeof text - (size_t)(at - text), "%s%s", db_path, rest);
    }
    json_error_t je;
    json_t *obj = json_loads(text, 0, &je);
    ck_assert_msg(obj != NULL, "bad test JSON: %s", je.text);
    c->settings = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    ck_assert_ptr_nonnull(c->settings);
    c->config = (tm_sink_config){.struct_size = sizeof(tm_sink_config),
                                 .connector = "unit",
                                 .settings = c->settings,
                                 .columns = COLS,
                                 .ncolumns = ncols,
                                 .flags = flags};
}

static void conf_done(conf *c) {
    tm_settings_free(c->settings);
}

/* The dedup tests run with each way of holding business keys: _i 0 the
 * default ("dedup_keys": "memory", one packed row per batch), 1 "rows"
 * (one row per key in tidemark_keys). SETTINGS is the settings' JSON
 * without its closing brace. */
static const char *const KEY_MODES[] = {"", ", \"dedup_keys\": \"rows\""};

static void conf_keys(conf *c, const char *settings, int rows) {
    char text[1024];
    snprintf(text, sizeof text, "%s%s}", settings, KEY_MODES[rows != 0]);
    conf_init(c, text, TM_CONFIG_DEDUP, 2);
}

static void *open_ok(conf *c) {
    tm_error err = {sizeof err, ""};
    void *sink = NULL;
    tm_status rc = api->open(tm_host_services(), &c->config, &sink, &err);
    ck_assert_msg(rc == TM_OK, "open: %s: %s", tm_status_name(rc), err.message);
    return sink;
}

static tm_marker claim1(void *sink) {
    tm_marker m = {.struct_size = sizeof m,
                   .topic = "t",
                   .partition = 0,
                   .next_offset = 0};
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(api->claim(sink, &m, 1, 0, &err), TM_OK);
    return m;
}

/* A one-partition batch [start, end) of records given by the caller. */
typedef struct rec {
    int64_t offset, id, ts;
    const char *body, *identity, *hash;
} rec;

typedef struct batch {
    tm_batch b;
    tm_range range;
    tm_record records[8];
    tm_value values[8][2];
    char id[32];
} batch;

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
        bt->values[i][0] =
            (tm_value){.struct_size = sizeof(tm_value), .v.i = recs[i].id};
        bt->values[i][1] = (tm_value){.struct_size = sizeof(tm_value),
                                      .is_null = !recs[i].body};
        bt->values[i][1].v.s.ptr = recs[i].body;
        bt->values[i][1].v.s.len = recs[i].body ? strlen(recs[i].body) : 0;
        bt->records[i] = (tm_record){.struct_size = sizeof(tm_record),
                                     .range = 0,
                                     .offset = recs[i].offset,
                                     .timestamp_ms = recs[i].ts,
                                     .value = "{}",
                                     .value_len = 2,
                                     .values = bt->values[i],
                                     .identity = recs[i].identity,
                                     .identity_hash = recs[i].hash};
    }
    bt->b = (tm_batch){.struct_size = sizeof(tm_batch),
                       .connector = "unit",
                       .batch_id = bt->id,
                       .deadline_ms = 0,
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
    ck_assert_msg(rc == TM_OK, "commit %s: %s: %s", bt->id, tm_status_name(rc),
                  err.message);
}

static tm_marker read1(void *sink) {
    tm_marker m = {.struct_size = sizeof m, .topic = "t", .partition = 0};
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(api->read_markers(sink, &m, 1, &err), TM_OK);
    return m;
}

/* One integer from SQL run on the database directly. */
static int64_t q_int(const char *sql) {
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK,
                  "%s: %s", sql, sqlite3_errmsg(db));
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static void q_text(const char *sql, char *buf, size_t size) {
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK,
                  "%s: %s", sql, sqlite3_errmsg(db));
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    const char *t = (const char *)sqlite3_column_text(st, 0);
    snprintf(buf, size, "%s", t ? t : "(null)");
    sqlite3_finalize(st);
    sqlite3_close(db);
}

static void exec_sql(const char *sql) {
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(db_path, &db), SQLITE_OK);
    ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK,
                  "%s: %s", sql, sqlite3_errmsg(db));
    sqlite3_close(db);
}

/* ---- settings ----------------------------------------------------------- */

static const struct {
    const char *json;
    size_t ncols;
    const char *want[2]; /* substrings of the message */
} BAD[] = {
    {"{\"table\": \"t\"}",
     2,
     {"$.sink.settings.path: missing required setting", "database file"}},
    /* F7: a URI retried for ever (its stat failed); a directory too */
    {"{\"path\": \"file:$DB\", \"table\": \"t\"}", 2, {"\"path\"", "URI"}},
    {"{\"path\": \"/\", \"table\": \"t\"}", 2, {"\"path\"", "directory"}},
    {"{\"path\": \"$DB\"}",
     2,
     {"$.sink.settings.table: missing required setting", "table's name"}},
    {"{\"path\": \"$DB\", \"table\": \"t\", \"mode\": \"merge\"}",
     2,
     {"$.sink.settings.mode: expected \"append\" or \"upsert\"",
      "found string \"merge\""}},
    {"{\"path\": \"$DB\", \"table\": \"t\", \"synchronous\": \"EXTRA\"}",
     2,
     {"$.sink.settings.synchronous: expected \"FULL\", \"NORMAL\" or "
      "\"OFF\"",
      "found string \"EXTRA\""}},
    {"{\"path\": \"$DB\", \"table\": \"t\", \"busy_timeout_ms\": -1}",
     2,
     {"$.sink.settings.busy_timeout_ms: expected an integer from 0 to "
      "2147483647",
      "found integer -1"}},
    {"{\"path\": \"$DB\", \"table\": \"t\", \"busy_timeout_ms\": \"5s\"}",
     2,
     {"busy_timeout_ms", "integer"}},
    {"{\"path\": \"$DB\", \"table\": \"t\", \"dedup_retention_s\": 0}",
     2,
     {"$.sink.settings.dedup_retention_s: expected an integer from 1 to",
      "found integer 0"}},
    {"{\"path\": \"$DB\", \"table\": \"t\", \"create\": \"yes\"}",
     2,
     {"create", "boolean"}},
    {"{\"path\": \"$DB\", \"tabel\": \"t\"}", 2, {"tabel", "table"}},
    /* only "body" mapped: no key column for upsert */
    {"{\"path\": \"$DB\", \"table\": \"t\", \"mode\": \"upsert\"}",
     1,
     {"\"mode\"", "key"}},
    {"{\"path\": \"$DB\", \"table\": \"t\", \"create\": false}",
     2,
     {"\"table\"", "create"}},
    /* an in-memory database cannot keep the claims: refused, not retried */
    {"{\"path\": \":memory:\", \"table\": \"t\"}",
     2,
     {"\"path\"", "in-memory"}},
};

START_TEST(settings_errors_name_the_key) {
    conf c;
    tm_error err = {sizeof err, ""};
    void *sink = NULL;
    /* ncols 1 maps "body" only: start the columns at COLS[1] */
    conf_init(&c, BAD[_i].json, 0, BAD[_i].ncols);
    if (BAD[_i].ncols == 1)
        c.config.columns = &COLS[1];
    tm_status rc = api->open(tm_host_services(), &c.config, &sink, &err);
    ck_assert_msg(rc == TM_INVALID, "%s: %s (%s)", BAD[_i].json,
                  tm_status_name(rc), err.message);
    for (int k = 0; k < 2; k++)
        ck_assert_msg(strstr(err.message, BAD[_i].want[k]) != NULL,
                      "%s: message lacks '%s': %s", BAD[_i].json,
                      BAD[_i].want[k], err.message);
    conf_done(&c);
}
END_TEST

/* F7: validate answers INVALID (not RETRY) for a path that is a
 * directory or an SQLite URI: a setting to fix, not a store to wait for. */
START_TEST(validate_refuses_directory_and_uri_paths) {
    static const char *const JSON[] = {
        "{\"path\": \"/\", \"table\": \"t\"}",
        "{\"path\": \"file:$DB\", \"table\": \"t\"}"};
    for (int i = 0; i < 2; i++) {
        conf c;
        tm_error err = {sizeof err, ""};
        conf_init(&c, JSON[i], 0, 2);
        tm_status rc = api->validate(tm_host_services(), &c.config, &err);
        ck_assert_msg(rc == TM_INVALID && strstr(err.message, "\"path\""),
                      "%s: %s: %s", JSON[i], tm_status_name(rc), err.message);
        conf_done(&c);
    }
}
END_TEST

/* ---- upsert ------------------------------------------------------------- */

START_TEST(upsert_updates_by_key) {
    conf c;
    batch b1, b2;
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\", \"mode\": \"upsert\"}",
              0, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r1[] = {{0, 1, 1000, "one", NULL, NULL},
                      {1, 2, 1001, "two", NULL, NULL}};
    const rec r2[] = {{2, 1, 1002, "uno", NULL, NULL}};
    batch_make(&b1, 0, 2, m.epoch, r1, 2);
    batch_make(&b2, 2, 3, m.epoch, r2, 1);
    commit_ok(sink, &b1);
    commit_ok(sink, &b2);
    char body[64];
    ck_assert_int_eq(q_int("SELECT count(*) FROM t"), 2);
    q_text("SELECT body FROM t WHERE id = 1", body, sizeof body);
    ck_assert_str_eq(body, "uno");
    ck_assert_int_eq(q_int("SELECT _tm_offset FROM t WHERE id = 1"), 2);
    q_text("SELECT body FROM t WHERE id = 2", body, sizeof body);
    ck_assert_str_eq(body, "two");
    tm_marker now = read1(sink);
    ck_assert_int_eq(now.next_offset, 3);
    ck_assert_uint_eq(now.rows, 3);
    /* the same batch again changes nothing */
    tm_error err;
    ck_assert_int_eq(commit(sink, &b2, &err), TM_ALREADY);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* ---- business keys ------------------------------------------------------ */

START_TEST(identity_conflict_is_a_dead_letter) {
    conf c;
    batch b1, b2;
    conf_keys(&c, "{\"path\": \"$DB\", \"table\": \"t\"", _i);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r1[] = {{0, 1, 1000, "a", "order-1", "h1"}};
    const rec r2[] = {{1, 1, 2000, "a", "order-1", "h1"},  /* duplicate */
                      {2, 1, 2001, "b", "order-1", "h2"}}; /* conflict */
    batch_make(&b1, 0, 1, m.epoch, r1, 1);
    batch_make(&b2, 1, 3, m.epoch, r2, 2);
    commit_ok(sink, &b1);
    commit_ok(sink, &b2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t"), 1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_dead_letters WHERE "
                           "reason = 'identity_conflict' AND \"offset\" = 2"),
                     1);
    char detail[512];
    q_text("SELECT detail FROM tidemark_dead_letters", detail, sizeof detail);
    /* rows keep the first payload hash and offset; memory keeps digests */
    ck_assert_msg(strstr(detail, "order-1") && strstr(detail, "h2") &&
                      (_i ? strstr(detail, "h1") && strstr(detail, "t[0]@0")
                          : strstr(detail, "applied before") != NULL),
                  "detail: %s", detail);
    tm_marker now = read1(sink);
    ck_assert_uint_eq(now.rows, 1);
    ck_assert_uint_eq(now.duplicates, 1);
    ck_assert_uint_eq(now.dead_letters, 1);
    ck_assert_int_eq(now.next_offset, 3);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* Retention 10 s, measured on record timestamps once the wall clock of
 * the application is past it too (aged in the table: the test does not
 * wait): a resend 10 000 ms after the first application is still caught;
 * one 10 001 ms after it is not (the key was forgotten, the resend is
 * applied as new). */
START_TEST(retention_boundary) {
    conf c;
    batch b1, b2, b3;
    const int64_t T = 1700000000000;
    conf_keys(&c,
              "{\"path\": \"$DB\", \"table\": \"t\", \"dedup_retention_s\": "
              "10",
              _i);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r1[] = {{0, 7, T, "x", "order-7", "h"}};
    const rec r2[] = {{1, 7, T + 10000, "x", "order-7", "h"}};
    const rec r3[] = {{2, 7, T + 10001, "x", "order-7", "h"}};
    batch_make(&b1, 0, 1, m.epoch, r1, 1);
    batch_make(&b2, 1, 2, m.epoch, r2, 1);
    batch_make(&b3, 2, 3, m.epoch, r3, 1);
    commit_ok(sink, &b1);
    exec_sql(_i ? "UPDATE tidemark_keys SET applied_wall = applied_wall - 20000"
                : "UPDATE tidemark_key_batches SET applied_wall = "
                  "applied_wall - 20000");
    commit_ok(sink, &b2);
    tm_marker now = read1(sink);
    ck_assert_uint_eq(now.rows, 1);
    ck_assert_uint_eq(now.duplicates, 1); /* inside the retention: caught */
    commit_ok(sink, &b3);
    now = read1(sink);
    ck_assert_uint_eq(now.rows, 2); /* past it: applied again */
    ck_assert_uint_eq(now.duplicates, 1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE id = 7"), 2);
    ck_assert_int_eq(q_int(_i ? "SELECT applied_at FROM tidemark_keys"
                              : "SELECT newest_applied_at FROM "
                                "tidemark_key_batches"),
                     T + 10001);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* One record whose CreateTime is ten years ahead (a producer's wrong
 * clock) must not prune the keys applied within the retention of now: the
 * prune horizon is min(newest timestamp of the batch, wall clock) minus
 * the retention. */
START_TEST(future_timestamp_does_not_prune_recent_keys) {
    conf c;
    batch b1, b2, b3;
    const int64_t now = tm_clock_wall_ms();
    const int64_t ten_years = 86400000LL * 3653;
    conf_keys(&c,
              "{\"path\": \"$DB\", \"table\": \"t\", \"dedup_retention_s\": "
              "3600",
              _i);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r1[] = {{0, 7, now, "x", "order-7", "h"}};
    const rec r2[] = {{1, 8, now + ten_years, "y", "order-8", "h"}};
    const rec r3[] = {{2, 7, now, "x", "order-7", "h"}}; /* a resend */
    batch_make(&b1, 0, 1, m.epoch, r1, 1);
    batch_make(&b2, 1, 2, m.epoch, r2, 1);
    batch_make(&b3, 2, 3, m.epoch, r3, 1);
    commit_ok(sink, &b1);
    commit_ok(sink, &b2);
    /* the future record's own key is kept at its own timestamp */
    ck_assert_int_eq(q_int(_i ? "SELECT count(*) FROM tidemark_keys"
                              : "SELECT sum(nkeys) FROM tidemark_key_batches"),
                     2);
    commit_ok(sink, &b3);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE id = 7"), 1);
    tm_marker now_m = read1(sink);
    ck_assert_uint_eq(now_m.rows, 2);
    ck_assert_uint_eq(now_m.duplicates, 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* F1: a key whose record timestamp lies in the past (a producer clock
 * years behind, a backfill two hours old) was pruned by the next batch
 * carrying a current record, seconds after it was applied, and its resend
 * was stored again. A key is forgotten only when both its record
 * timestamp and the wall clock of its application are past the
 * retention. */
START_TEST(past_timestamp_key_is_kept_for_the_retention) {
    conf c;
    batch b1, b2, b3, b4, b5;
    const int64_t now = tm_clock_wall_ms();
    const int64_t ten_years = 86400000LL * 3653;
    conf_init(&c,
              "{\"path\": \"$DB\", \"table\": \"t\", \"dedup_retention_s\": "
              "3600, \"dedup_keys\": \"rows\"}",
              TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r1[] = {{0, 7, now - ten_years, "x", "order-7", "h"},
                      {1, 9, now - 7200000, "z", "order-9", "h"}};
    const rec r2[] = {{2, 8, now, "y", "order-8", "h"}};
    const rec r3[] = {{3, 7, now - ten_years, "x", "order-7", "h"},
                      {4, 9, now - 7200000, "z", "order-9", "h"}};
    batch_make(&b1, 0, 2, m.epoch, r1, 2);
    batch_make(&b2, 2, 3, m.epoch, r2, 1);
    batch_make(&b3, 3, 5, m.epoch, r3, 2);
    commit_ok(sink, &b1);
    commit_ok(sink, &b2); /* a current record: its prune runs */
    commit_ok(sink, &b3); /* the resends, a moment later */
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE id = 7"), 1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE id = 9"), 1);
    tm_marker now_m = read1(sink);
    ck_assert_uint_eq(now_m.rows, 3);
    ck_assert_uint_eq(now_m.duplicates, 2);
    /* Once the wall clock of their application is past the retention too
     * (aged here in the table: the test cannot wait an hour), they go. */
    exec_sql("UPDATE tidemark_keys SET applied_wall = applied_wall - 3600001 "
             "WHERE identity = 'order-7'");
    const rec r4[] = {{5, 8, now, "y", "order-8", "h"}};
    const rec r5[] = {{6, 7, now - ten_years, "x", "order-7", "h"}};
    batch_make(&b4, 5, 6, m.epoch, r4, 1);
    batch_make(&b5, 6, 7, m.epoch, r5, 1);
    commit_ok(sink, &b4);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_keys WHERE "
                           "identity = 'order-7'"),
                     0);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_keys WHERE "
                           "identity = 'order-9'"),
                     1);
    commit_ok(sink, &b5);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE id = 7"), 2);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* F1's migration: keys stored before the wall-clock column existed count
 * as applied when the sink first opens the database again (the safe side:
 * kept at least the retention from then), so an old key is not pruned by
 * the first current record. */
START_TEST(keys_from_before_the_wall_column_are_kept) {
    conf c;
    batch b1, b2;
    const int64_t now = tm_clock_wall_ms();
    char sql[512];
    exec_sql("CREATE TABLE tidemark_keys (connector TEXT NOT NULL, identity "
             "TEXT NOT NULL, payload_hash TEXT, first_topic TEXT NOT NULL, "
             "first_partition INTEGER NOT NULL, first_offset INTEGER NOT "
             "NULL, applied_at INTEGER NOT NULL, PRIMARY KEY (connector, "
             "identity))");
    snprintf(sql, sizeof sql,
             "INSERT INTO tidemark_keys VALUES ('unit', 'order-7', 'h', 't', "
             "0, 0, %lld)",
             (long long)(now - 7200000));
    exec_sql(sql);
    conf_init(&c,
              "{\"path\": \"$DB\", \"table\": \"t\", \"dedup_retention_s\": "
              "3600}",
              TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r1[] = {{0, 8, now, "y", "order-8", "h"}};
    const rec r2[] = {{1, 7, now - 7200000, "x", "order-7", "h"}};
    batch_make(&b1, 0, 1, m.epoch, r1, 1);
    batch_make(&b2, 1, 2, m.epoch, r2, 1);
    commit_ok(sink, &b1);
    commit_ok(sink, &b2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE id = 7"), 0);
    ck_assert_uint_eq(read1(sink).duplicates, 1);
    ck_assert_int_ge(q_int("SELECT applied_wall FROM tidemark_keys WHERE "
                           "identity = 'order-7'"),
                     now);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* F3: after `offsets --reset-to` an earlier offset on a dedup connector,
 * a replayed offset that was a dead letter got a second one (verify:
 * "stored 2 times"). With dedup the same dead letter already stored for the
 * offset is not stored again; the marker counts it as a duplicate (like a
 * replayed record whose key is stored), so its dead_letters stay equal to
 * the stored ones and verify sees the replay as "replayed". Both kinds:
 * the host's (parse_error) and the sink's own (identity_conflict). */
START_TEST(replayed_dead_letter_is_stored_once) {
    conf c;
    batch b1, b2;
    tm_error err = {sizeof err, ""};
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\"}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r[] = {{0, 7, 1000, "x", "order-7", "h1"},
                     {2, 7, 1002, "y", "order-7", "h2"}}; /* a conflict */
    tm_dead_letter dl = {.struct_size = sizeof dl,
                         .range = 0,
                         .offset = 1,
                         .timestamp_ms = 1001,
                         .reason = TM_DL_PARSE_ERROR,
                         .detail = "not JSON",
                         .value = "{",
                         .value_len = 1};
    batch_make(&b1, 0, 3, m.epoch, r, 2);
    b1.b.dead_letters = &dl;
    b1.b.ndead_letters = 1;
    commit_ok(sink, &b1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_dead_letters"), 2);
    /* the rewind: the marker back to 0, as offsets --reset-to does */
    m.next_offset = 0;
    ck_assert_int_eq(api->claim(sink, &m, 1, TM_CLAIM_RESET, &err), TM_OK);
    ck_assert_int_eq(m.next_offset, 0); /* the fault is in place */
    batch_make(&b2, 0, 3, m.epoch, r, 2);
    b2.b.dead_letters = &dl;
    b2.b.ndead_letters = 1;
    commit_ok(sink, &b2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_dead_letters WHERE "
                           "\"offset\" = 1"),
                     1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_dead_letters WHERE "
                           "\"offset\" = 2"),
                     1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t"), 1);
    tm_marker now = read1(sink);
    ck_assert_uint_eq(now.rows, 1);
    ck_assert_uint_eq(now.dead_letters, 2); /* = the stored ones */
    ck_assert_uint_eq(now.duplicates, 3);   /* the replay: all three again */
    ck_assert_int_eq(now.next_offset, 3);
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
    batch b1, b2;
    tm_error err = {sizeof err, ""};
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\"}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r1[] = {{0, 7, 1000, "x", "order-7", "h1"},
                      {2, 7, 1002, "y", "order-7", "h2"}}; /* a conflict */
    tm_dead_letter dl1 = {.struct_size = sizeof dl1,
                          .range = 0,
                          .offset = 1,
                          .timestamp_ms = 1001,
                          .reason = TM_DL_PARSE_ERROR,
                          .detail = "not JSON",
                          .value = "{",
                          .value_len = 1};
    batch_make(&b1, 0, 3, m.epoch, r1, 2);
    b1.b.dead_letters = &dl1;
    b1.b.ndead_letters = 1;
    commit_ok(sink, &b1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_dead_letters"), 2);
    /* the recreated topic's log: other messages at the same offsets */
    m.next_offset = 0;
    ck_assert_int_eq(api->claim(sink, &m, 1, TM_CLAIM_RESET, &err), TM_OK);
    ck_assert_int_eq(m.next_offset, 0); /* the rewind is in place */
    const rec r2[] = {{0, 9, 5000, "p", "order-9", "h3"},
                      {2, 9, 5002, "q", "order-9", "h4"}}; /* a conflict */
    tm_dead_letter dl2 = dl1;
    dl2.timestamp_ms = 5001;
    dl2.value = "[";
    batch_make(&b2, 0, 3, m.epoch, r2, 2);
    b2.b.dead_letters = &dl2;
    b2.b.ndead_letters = 1;
    commit_ok(sink, &b2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_dead_letters WHERE "
                           "\"offset\" = 1"),
                     2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_dead_letters WHERE "
                           "\"offset\" = 1 AND CAST(\"value\" AS TEXT) = '['"),
                     1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_dead_letters WHERE "
                           "\"offset\" = 2"),
                     2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_dead_letters WHERE "
                           "\"offset\" = 2 AND timestamp_ms = 5002"),
                     1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t"), 2);
    tm_marker now = read1(sink);
    ck_assert_uint_eq(now.rows, 2);
    ck_assert_uint_eq(now.dead_letters, 4); /* = the stored ones */
    ck_assert_uint_eq(now.duplicates, 0);   /* nothing was a replay */
    ck_assert_int_eq(now.next_offset, 3);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* F5: a CHECK (or generated column) that errors on a record's content
 * (json_type on text that is not JSON: SQLITE_ERROR "malformed JSON")
 * made the connector FATAL for ever on that record (a poison record). It
 * is a dead letter "rejected", the rest of the batch applied. An error of
 * the statement itself (the table dropped under the sink) stays FATAL:
 * never every record a dead letter. */
START_TEST(content_error_of_a_check_is_a_dead_letter) {
    conf c;
    batch b1, b2;
    tm_error err;
    char detail[256];
    exec_sql("CREATE TABLE t (id INTEGER, body TEXT CHECK (json_type(body) "
             "IS NOT NULL), _tm_topic TEXT NOT NULL, _tm_partition INTEGER "
             "NOT NULL, _tm_offset INTEGER NOT NULL, _tm_identity TEXT)");
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\", \"create\": false}", 0,
              2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r[] = {{0, 1, 1000, "{\"a\": 1}", NULL, NULL},
                     {1, 2, 1001, "not json", NULL, NULL},
                     {2, 3, 1002, "{\"b\": 2}", NULL, NULL}};
    batch_make(&b1, 0, 3, m.epoch, r, 3);
    commit_ok(sink, &b1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t"), 2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE _tm_offset = 1"), 0);
    q_text("SELECT reason || ': ' || detail FROM tidemark_dead_letters WHERE "
           "\"offset\" = 1",
           detail, sizeof detail);
    ck_assert_msg(strstr(detail, "rejected") && strstr(detail, "JSON"), "%s",
                  detail);
    tm_marker now = read1(sink);
    ck_assert_uint_eq(now.rows, 2);
    ck_assert_uint_eq(now.dead_letters, 1);
    /* the table itself gone: not a dead letter per record */
    exec_sql("DROP TABLE t");
    const rec r2[] = {{3, 4, 1003, "{}", NULL, NULL}};
    batch_make(&b2, 3, 4, m.epoch, r2, 1);
    tm_status rc = commit(sink, &b2, &err);
    ck_assert_msg(rc == TM_FATAL, "dropped table: %s: %s", tm_status_name(rc),
                  err.message);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_dead_letters"), 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* Without a retention, keys are kept however old. */
START_TEST(no_retention_keeps_keys) {
    conf c;
    batch b1, b2;
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\"}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r1[] = {{0, 7, 1000, "x", "order-7", "h"}};
    const rec r2[] = {{1, 7, 1000 + 86400000LL * 3650, "x", "order-7", "h"}};
    batch_make(&b1, 0, 1, m.epoch, r1, 1);
    batch_make(&b2, 1, 2, m.epoch, r2, 1);
    commit_ok(sink, &b1);
    commit_ok(sink, &b2);
    tm_marker now = read1(sink);
    ck_assert_uint_eq(now.rows, 1);
    ck_assert_uint_eq(now.duplicates, 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* The keys' age index serves only the retention: a connector without one
 * does not make it (every key stored would write it); one with a
 * retention makes it; and a keys table made with it (by a connector with
 * a retention, or before the index depended on one) keeps it and is used
 * as it is by a connector without. */
static int64_t age_index(void) {
    return q_int("SELECT count(*) FROM sqlite_schema WHERE name = "
                 "'tidemark_keys_by_age'");
}

START_TEST(keys_age_index_only_with_a_retention) {
    conf c;
    batch b;
    conf_init(&c,
              "{\"path\": \"$DB\", \"table\": \"t\", \"dedup_keys\": \"rows\"}",
              TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r1[] = {{0, 7, 1000, "x", "order-7", "h"}};
    batch_make(&b, 0, 1, m.epoch, r1, 1);
    commit_ok(sink, &b);
    ck_assert_int_eq(age_index(), 0);
    api->close(sink);
    conf_done(&c);
    conf_init(&c,
              "{\"path\": \"$DB\", \"table\": \"t\", \"dedup_retention_s\": "
              "3600, \"dedup_keys\": \"rows\"}",
              TM_CONFIG_DEDUP, 2);
    sink = open_ok(&c);
    ck_assert_int_eq(age_index(), 1);
    m = claim1(sink);
    const rec r2[] = {{1, 7, 1000, "x", "order-7", "h"}};
    batch_make(&b, 1, 2, m.epoch, r2, 1);
    commit_ok(sink, &b);
    api->close(sink);
    conf_done(&c);
    /* without a retention again: the index made is kept and used */
    conf_init(&c,
              "{\"path\": \"$DB\", \"table\": \"t\", \"dedup_keys\": \"rows\"}",
              TM_CONFIG_DEDUP, 2);
    sink = open_ok(&c);
    m = claim1(sink);
    const rec r3[] = {{2, 7, 1000, "x", "order-7", "h"},
                      {3, 8, 1000, "y", "order-8", "h"}};
    batch_make(&b, 2, 4, m.epoch, r3, 2);
    commit_ok(sink, &b);
    ck_assert_int_eq(age_index(), 1);
    tm_marker now = read1(sink);
    ck_assert_uint_eq(now.rows, 2);
    ck_assert_uint_eq(now.duplicates, 2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_keys"), 2);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* A new keys table is one B-tree (WITHOUT ROWID, keyed by connector and
 * identity): a rowid table beside its primary key index wrote each key
 * twice (docs/benchmarks.md). */
START_TEST(new_keys_table_is_without_rowid) {
    conf c;
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\"}", TM_CONFIG_DEDUP, 2);
    void *sink = open_ok(&c);
    ck_assert_int_eq(q_int("SELECT count(*) FROM pragma_table_list WHERE "
                           "name = 'tidemark_keys' AND wr = 1"),
                     1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* A keys table as the sink made it before (a rowid table, the age index)
 * is used as it is by a connector without a retention: resends caught,
 * new keys stored, the table not remade. */
START_TEST(keys_table_from_before_is_used_as_it_is) {
    conf c;
    batch b;
    exec_sql("CREATE TABLE tidemark_keys (connector TEXT NOT NULL, identity "
             "TEXT NOT NULL, payload_hash TEXT, first_topic TEXT NOT NULL, "
             "first_partition INTEGER NOT NULL, first_offset INTEGER NOT "
             "NULL, applied_at INTEGER NOT NULL, applied_wall INTEGER NOT "
             "NULL, PRIMARY KEY (connector, identity));"
             "CREATE INDEX tidemark_keys_by_age ON tidemark_keys (connector, "
             "applied_at);"
             "INSERT INTO tidemark_keys VALUES ('unit', 'order-7', 'h', 't', "
             "0, 0, 1000, 1000)");
    conf_keys(&c, "{\"path\": \"$DB\", \"table\": \"t\"", _i);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r[] = {{0, 7, 1000, "x", "order-7", "h"},
                     {1, 8, 1000, "y", "order-8", "h"},
                     {2, 8, 1000, "y", "order-8", "h"}};
    batch_make(&b, 0, 3, m.epoch, r, 3);
    commit_ok(sink, &b);
    tm_marker now = read1(sink);
    ck_assert_uint_eq(now.rows, 1);
    ck_assert_uint_eq(now.duplicates, 2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE id = 8"), 1);
    /* memory: the old row is read and counts; the new key is a batch's */
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_keys"), _i ? 2 : 1);
    if (!_i)
        ck_assert_int_eq(q_int("SELECT sum(nkeys) FROM tidemark_key_batches"),
                         1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM pragma_table_list WHERE "
                           "name = 'tidemark_keys' AND wr = 0"),
                     1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

static tm_status claim_as(void *sink, tm_error *err);

/* ---- business keys held in memory --------------------------------------- */

/* One keys_side of the differential test: the database NAME in the test's
 * directory, a sink A on partition 0 and a second one B (another
 * connection of the same connector, as another process would be) on
 * partition 1. */
typedef struct keys_side {
    char path[256];
    conf c;
    void *a, *b;
    int64_t epoch_a, epoch_b;
    int rows;
} keys_side;

static void use_db(const keys_side *sd) {
    snprintf(db_path, sizeof db_path, "%.255s", sd->path);
}

static int64_t claim_part(void *sink, int32_t partition) {
    tm_marker m = {.struct_size = sizeof m,
                   .topic = "t",
                   .partition = partition,
                   .next_offset = 0};
    tm_error err = {sizeof err, ""};
    tm_status rc = api->claim(sink, &m, 1, 0, &err);
    ck_assert_msg(rc == TM_OK, "claim: %s", err.message);
    return m.epoch;
}

static void side_open(keys_side *sd, const char *name, int rows) {
    snprintf(sd->path, sizeof sd->path, "%.200s/%.40s", dir, name);
    sd->rows = rows;
    use_db(sd);
    /* a CHECK refuses the body "bad": a row the table refuses */
    exec_sql("CREATE TABLE t (id INTEGER, body TEXT CHECK (body IS NOT "
             "'bad'), _tm_topic TEXT NOT NULL, _tm_partition INTEGER NOT "
             "NULL, _tm_offset INTEGER NOT NULL, _tm_identity TEXT)");
    conf_keys(&sd->c,
              "{\"path\": \"$DB\", \"table\": \"t\", \"dedup_retention_s\": "
              "10",
              rows);
    sd->a = open_ok(&sd->c);
    sd->b = open_ok(&sd->c);
    sd->epoch_a = claim_part(sd->a, 0);
    sd->epoch_b = claim_part(sd->b, 1);
}

/* Commits RECS [start, end) on PARTITION through SINK; the status. */
static tm_status side_commit(keys_side *sd, int on_b, int64_t start,
                             int64_t end, const rec *recs, size_t n,
                             tm_error *err) {
    batch bt;
    use_db(sd);
    batch_make(&bt, start, end, on_b ? sd->epoch_b : sd->epoch_a, recs, n);
    bt.range.partition = on_b;
    return commit(on_b ? sd->b : sd->a, &bt, err);
}

static void side_commit_ok(keys_side *sd, int on_b, int64_t start, int64_t end,
                           const rec *recs, size_t n) {
    tm_error err;
    tm_status rc = side_commit(sd, on_b, start, end, recs, n, &err);
    ck_assert_msg(rc == TM_OK, "%s: commit [%lld, %lld) on %d: %s: %s",
                  sd->rows ? "rows" : "memory", (long long)start,
                  (long long)end, on_b, tm_status_name(rc), err.message);
}

/* Every row, dead letter and marker of the database, as text. */
static void side_state(keys_side *sd, char *out, size_t size) {
    char a[2048], b[1024], c[512];
    use_db(sd);
    q_text("SELECT group_concat(x, ' ') FROM (SELECT _tm_partition || ':' "
           "|| _tm_offset || '=' || id || '/' || body AS x FROM t ORDER BY "
           "_tm_partition, _tm_offset)",
           a, sizeof a);
    q_text("SELECT group_concat(x, ' ') FROM (SELECT \"partition\" || ':' "
           "|| \"offset\" || '=' || reason AS x FROM tidemark_dead_letters "
           "ORDER BY \"partition\", \"offset\")",
           b, sizeof b);
    q_text("SELECT group_concat(x, ' ') FROM (SELECT \"partition\" || ':' "
           "|| next_offset || ' rows ' || rows || ' dl ' || dead_letters || "
           "' dup ' || duplicates AS x FROM tidemark_markers ORDER BY "
           "\"partition\")",
           c, sizeof c);
    snprintf(out, size, "rows: %s\ndead letters: %s\nmarkers: %s", a, b, c);
}

/* Ages every stored key's wall clock of application by MS. */
static void side_age(keys_side *sd, int64_t ms) {
    char sql[256];
    use_db(sd);
    snprintf(
        sql, sizeof sql, "UPDATE %s SET applied_wall = applied_wall - %lld",
        sd->rows ? "tidemark_keys" : "tidemark_key_batches", (long long)ms);
    exec_sql(sql);
}

/* The differential test: the same batches through "dedup_keys": "rows"
 * (one row per key, the path before) and "memory" give the same rows,
 * dead letters and counts: in-batch repeats and conflicts, a refused
 * row's key (not stored: its next record is new), resends and conflicts
 * against keys a second connection of the connector wrote between
 * commits, a rolled-back commit and its resend, the retention (and the
 * second connection after the first one pruned: it must reload). */
static void scenario(keys_side *sd, const int64_t T) {
    tm_error err;
    const rec b1[] = {{0, 1, T, "a", "order-1", "h1"},
                      {1, 2, T + 1, "b", "order-2", "h1"},
                      {2, 1, T + 2, "a", "order-1", "h1"},   /* repeat */
                      {3, 2, T + 3, "c", "order-2", "h2"},   /* conflict */
                      {4, 3, T + 4, "bad", "order-3", "h1"}, /* refused */
                      {5, 3, T + 5, "d", "order-3", "h1"}};  /* new again */
    side_commit_ok(sd, 0, 0, 6, b1, 6);
    const rec o1[] = {{0, 4, T + 6, "e", "order-4", "h1"},
                      {1, 1, T + 7, "a", "order-1", "h1"}, /* A's key */
                      {2, 5, T + 8, "f", "order-5", "h1"}};
    side_commit_ok(sd, 1, 0, 3, o1, 3);
    const rec b2[] = {{6, 4, T + 9, "e", "order-4", "h1"},  /* B's key */
                      {7, 5, T + 10, "g", "order-5", "h9"}, /* conflict */
                      {8, 1, T + 11, "a", "order-1", "h1"},
                      {9, 6, T + 12, "h", "order-6", "h1"}};
    side_commit_ok(sd, 0, 6, 10, b2, 4);
    /* a commit rolled back after its rows and keys: the marker's UPDATE
     * refused by a trigger */
    use_db(sd);
    exec_sql("CREATE TRIGGER fail_marker BEFORE UPDATE ON tidemark_markers "
             "WHEN NEW.next_offset = 12 BEGIN SELECT RAISE(ABORT, "
             "'injected marker failure'); END");
    const rec b3[] = {{10, 7, T + 13, "i", "order-7", "h1"},
                      {11, 6, T + 14, "h", "order-6", "h1"}};
    tm_status rc = side_commit(sd, 0, 10, 12, b3, 2, &err);
    ck_assert_msg(rc != TM_OK && strstr(err.message, "injected"),
                  "inconclusive: the injected failure did not happen (%s: "
                  "%s)",
                  tm_status_name(rc), err.message);
    exec_sql("DROP TRIGGER fail_marker");
    side_commit_ok(sd, 0, 10, 12, b3, 2); /* order-7 is new */
    /* retention: everything stored is 20 s old by the wall clock; a batch
     * stamped T + 20 000 forgets the keys stamped before T + 10 000 */
    side_age(sd, 20000);
    const rec b4[] = {{12, 1, T + 20000, "a", "order-1", "h1"},
                      {13, 7, T + 20001, "i", "order-7", "h2"}};
    side_commit_ok(sd, 0, 12, 14, b4, 2);
    /* B again, after A pruned: order-1 is A's again, order-2 is gone */
    const rec o2[] = {{3, 1, T + 20002, "a", "order-1", "h1"},
                      {4, 2, T + 20003, "b", "order-2", "h1"},
                      {5, 2, T + 20004, "b", "order-2", "h1"}};
    side_commit_ok(sd, 1, 3, 6, o2, 3);
    const rec b5[] = {{14, 2, T + 20005, "b", "order-2", "h3"},
                      {15, 1, T + 20006, "a", "order-1", "h1"}};
    side_commit_ok(sd, 0, 14, 16, b5, 2);
}

START_TEST(memory_and_rows_keys_agree) {
    const int64_t T = 1700000000000;
    keys_side sd[2];
    char state[2][4096];
    for (int i = 0; i < 2; i++) {
        side_open(&sd[i], i ? "rows.db" : "memory.db", i);
        scenario(&sd[i], T);
        side_state(&sd[i], state[i], sizeof state[i]);
    }
    ck_assert_msg(strcmp(state[0], state[1]) == 0, "memory:\n%s\nrows:\n%s",
                  state[0], state[1]);
    /* not trivially equal: each case left its mark */
    ck_assert_msg(
        strstr(state[0], "0:3=identity_conflict") &&
            strstr(state[0], "0:4=rejected") && strstr(state[0], "0:5=3/d") &&
            strstr(state[0], "0:7=identity_conflict") &&
            strstr(state[0], "0:10=7/i") && strstr(state[0], "0:12=1/a") &&
            strstr(state[0], "1:4=2/b") &&
            strstr(state[0], "0:14=identity_conflict"),
        "%s", state[0]);
    for (int i = 0; i < 2; i++) {
        api->close(sd[i].a);
        api->close(sd[i].b);
        conf_done(&sd[i].c);
    }
}
END_TEST

/* Many keys: the same pseudo-random batches of 300 records over 2500
 * identities (a tenth of them with another payload, one in fifty refused
 * by the table), A and B writing, every eighth batch all keys made
 * older than the retention by the wall clock (the data's clock, a second
 * a batch, then decides) through both modes: the set grows past its first
 * sizes, lookups cross the chunks read ahead, and removals shift entries
 * back. The sides must agree on every row, dead letter and marker. */
enum { BIG_BATCH = 300, BIG_BATCHES = 40, BIG_KEYS = 2500 };

static void big_run(keys_side *sd, const int64_t T, char *out, size_t size) {
    static tm_record recs[BIG_BATCH];
    static tm_value vals[BIG_BATCH][2];
    static char ids[BIG_BATCH][24], hashes[BIG_BATCH][24];
    int64_t next[2] = {0, 0};
    uint32_t x = 12345;
    for (int i = 0; i < BIG_BATCHES; i++) {
        /* B every fourth: A removes keys batch after batch without a
         * reload in between (B's removals make A reload) */
        int on_b = i % 4 == 3;
        for (int j = 0; j < BIG_BATCH; j++) {
            x = x * 1103515245u + 12345u;
            int k = (int)((x >> 8) % BIG_KEYS);
            int other = (x >> 4) % 10 == 0;
            int bad = (x >> 2) % 50 == 0;
            snprintf(ids[j], sizeof ids[j], "order-%d", k);
            snprintf(hashes[j], sizeof hashes[j], "%s%d", other ? "x" : "h", k);
            vals[j][0] = (tm_value){.struct_size = sizeof(tm_value), .v.i = k};
            vals[j][1] = (tm_value){.struct_size = sizeof(tm_value)};
            vals[j][1].v.s.ptr = bad ? "bad" : "ok";
            vals[j][1].v.s.len = bad ? 3 : 2;
            recs[j] = (tm_record){.struct_size = sizeof(tm_record),
                                  .offset = next[on_b] + j,
                                  .timestamp_ms = T + i * 1000,
                                  .value = "{}",
                                  .value_len = 2,
                                  .values = vals[j],
                                  .identity = ids[j],
                                  .identity_hash = hashes[j]};
        }
        batch bt;
        use_db(sd);
        batch_make(&bt, next[on_b], next[on_b] + BIG_BATCH,
                   on_b ? sd->epoch_b : sd->epoch_a, NULL, 0);
        bt.range.partition = on_b;
        bt.b.records = recs;
        bt.b.nrecords = BIG_BATCH;
        tm_error err;
        tm_status rc = commit(on_b ? sd->b : sd->a, &bt, &err);
        ck_assert_msg(rc == TM_OK, "%s: batch %d: %s",
                      sd->rows ? "rows" : "memory", i, err.message);
        next[on_b] += BIG_BATCH;
        if (i % 8 == 7)
            side_age(sd, 20000);
    }
    char rows[128], dls[128], marks[256];
    q_text("SELECT count(*) || ' ' || total(_tm_offset * 7919 + "
           "_tm_partition * 104729 + id) FROM t",
           rows, sizeof rows);
    q_text("SELECT count(*) || ' ' || total(\"offset\" * 7919 + \"partition\" "
           "* 104729 + length(reason)) FROM tidemark_dead_letters",
           dls, sizeof dls);
    q_text("SELECT group_concat(x, ' ') FROM (SELECT rows || '/' || "
           "dead_letters || '/' || duplicates AS x FROM tidemark_markers "
           "ORDER BY \"partition\")",
           marks, sizeof marks);
    snprintf(out, size, "rows %s, dead letters %s, markers %s", rows, dls,
             marks);
}

START_TEST(memory_and_rows_keys_agree_on_many_keys) {
    const int64_t T = 1700000000000;
    keys_side sd[2];
    char state[2][1024];
    for (int i = 0; i < 2; i++) {
        side_open(&sd[i], i ? "rows.db" : "memory.db", i);
        big_run(&sd[i], T, state[i], sizeof state[i]);
    }
    ck_assert_msg(strcmp(state[0], state[1]) == 0, "memory: %s\nrows:   %s",
                  state[0], state[1]);
    /* the set grew past its first sizes and lost keys to the retention */
    use_db(&sd[0]);
    ck_assert_int_gt(q_int("SELECT count(*) FROM t"), 2 * 1024);
    ck_assert_int_gt(q_int("SELECT sum(duplicates) FROM tidemark_markers"),
                     1000);
    ck_assert_int_lt(q_int("SELECT sum(nkeys) FROM tidemark_key_batches"),
                     q_int("SELECT count(*) FROM t"));
    for (int i = 0; i < 2; i++) {
        api->close(sd[i].a);
        api->close(sd[i].b);
        conf_done(&sd[i].c);
    }
}
END_TEST

/* Keys of tidemark_keys (an older build's, or "rows") count in memory
 * too, and go by the retention one by one as they did: the expired one is
 * removed in the batch's transaction (its resend in that batch is new),
 * the one applied lately by the wall clock stays a duplicate. The same in
 * both modes. */
START_TEST(old_keys_are_pruned_in_memory_too) {
    conf c;
    batch b1, b2;
    const int64_t now = tm_clock_wall_ms();
    char sql[512];
    conf_keys(&c,
              "{\"path\": \"$DB\", \"table\": \"t\", \"dedup_retention_s\": "
              "3600",
              _i);
    void *sink = open_ok(&c); /* makes the tables; claim loads the keys */
    snprintf(sql, sizeof sql,
             "INSERT INTO tidemark_keys VALUES ('unit', 'order-7', 'h', 't', "
             "0, 0, %lld, %lld), ('unit', 'order-9', 'h', 't', 0, 1, %lld, "
             "%lld)",
             (long long)(now - 7200000), (long long)(now - 7200000),
             (long long)(now - 7200000), (long long)now);
    exec_sql(sql);
    tm_marker m = claim1(sink);
    const rec r1[] = {{0, 8, now, "y", "order-8", "h"},
                      {1, 7, now - 7200000, "x", "order-7", "h"},
                      {2, 9, now - 7200000, "z", "order-9", "h"}};
    const rec r2[] = {{3, 7, now - 7200000, "x", "order-7", "h"}};
    batch_make(&b1, 0, 3, m.epoch, r1, 3);
    batch_make(&b2, 3, 4, m.epoch, r2, 1);
    commit_ok(sink, &b1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_keys WHERE "
                           "identity = 'order-7'"),
                     _i ? 1 : 0); /* rows: stored again */
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_keys WHERE "
                           "identity = 'order-9'"),
                     1);
    commit_ok(sink, &b2);
    tm_marker now_m = read1(sink);
    ck_assert_uint_eq(now_m.rows, 2);       /* order-8, order-7 again */
    ck_assert_uint_eq(now_m.duplicates, 2); /* order-9, then order-7 */
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE id = 7"), 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* One key stored by a sink of "dedup_keys": "memory" (settings C), closed
 * again. */
static void one_key_in_memory(conf *c) {
    batch b;
    conf_keys(c, "{\"path\": \"$DB\", \"table\": \"t\"", 0);
    void *sink = open_ok(c);
    tm_marker m = claim1(sink);
    const rec r[] = {{0, 7, 1000, "x", "order-7", "h"}};
    batch_make(&b, 0, 1, m.epoch, r, 1);
    commit_ok(sink, &b);
    api->close(sink);
}

/* The sink of one_key_in_memory's connector, given order-7 again at
 * offset 1 after a claim: a duplicate, no second row. */
static void resend_is_a_duplicate(void *sink) {
    batch b;
    tm_marker m = claim1(sink);
    const rec r[] = {{1, 7, 1000, "x", "order-7", "h"}};
    batch_make(&b, 1, 2, m.epoch, r, 1);
    commit_ok(sink, &b);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE id = 7"), 1);
    ck_assert_uint_eq(read1(sink).duplicates, 1);
}

/* Every connector's seed, as text. */
static const char SEEDS[] =
    "SELECT coalesce(group_concat(hex(seed)), 'none') FROM tidemark_keysets";

/* A connector's keysets row edited under its batch rows: the seed changed
 * (restored from elsewhere), its check value gone, or the row deleted
 * while batch rows remain. The digests cannot be read under another seed
 * (or none): refused FATAL, naming the table, the connector and the way
 * out, at the next claim and by the next commit of a sink holding the
 * keys already, with the row left as it was and no second row of the key
 * stored (a silent reload under a new seed would take the resend for a new
 * key); with the row restored from a backup, the resend is a duplicate. */
static const struct {
    const char *sql, *want;
} KEYSET_EDITS[] = {
    {"UPDATE tidemark_keysets SET seed = randomblob(16)",
     "does not match its seed_check"},
    {"UPDATE tidemark_keysets SET seed_check = NULL", "has no seed_check"},
    {"DELETE FROM tidemark_keysets", "no row in tidemark_keysets"},
};

START_TEST(edited_seed_is_refused_naming_the_way_out) {
    const char *sql = KEYSET_EDITS[_i / 2].sql,
               *want = KEYSET_EDITS[_i / 2].want;
    const int by_commit = _i % 2;
    conf c;
    batch b;
    tm_error err;
    tm_status rc;
    char before[128], after[128];
    one_key_in_memory(&c);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink); /* the keys held */
    exec_sql("CREATE TABLE keysets_backup AS SELECT * FROM tidemark_keysets");
    exec_sql(sql);
    q_text(SEEDS, before, sizeof before);
    if (by_commit) {
        const rec r1[] = {{1, 7, 1000, "x", "order-7", "h"}}; /* a resend */
        batch_make(&b, 1, 2, m.epoch, r1, 1);
        rc = commit(sink, &b, &err);
    } else {
        api->close(sink);
        sink = open_ok(&c);
        rc = claim_as(sink, &err);
    }
    ck_assert_msg(rc == TM_FATAL && strstr(err.message, want) &&
                      strstr(err.message, "connector \"unit\"") &&
                      strstr(err.message, "to start its keys afresh"),
                  "%s: %s", tm_status_name(rc), err.message);
    q_text(SEEDS, after, sizeof after);
    ck_assert_str_eq(after, before);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE id = 7"), 1);
    /* the way out it names: the row restored from a backup */
    exec_sql("INSERT OR REPLACE INTO tidemark_keysets SELECT * FROM "
             "keysets_backup");
    resend_is_a_duplicate(sink);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* The seed's row deleted and the batch rows' key counts zeroed too: the
 * rows are still there, so the seed of their digests is still missing (a
 * count of keys of 0 is no proof that no keys were written). */
START_TEST(seedless_batch_rows_refused_whatever_their_key_counts) {
    conf c;
    tm_error err;
    one_key_in_memory(&c);
    exec_sql("DELETE FROM tidemark_keysets;"
             "UPDATE tidemark_key_batches SET nkeys = 0");
    ck_assert_int_gt(q_int("SELECT count(*) FROM tidemark_key_batches"), 0);
    void *sink = open_ok(&c);
    tm_status rc = claim_as(sink, &err);
    ck_assert_msg(rc == TM_FATAL &&
                      strstr(err.message, "no row in tidemark_keysets"),
                  "%s: %s", tm_status_name(rc), err.message);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_keysets"), 0);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* A file whose tidemark_keysets has no seed_check (made by an older
 * build; the table made here by its DDL, the rows the sink wrote copied
 * into it): the open adds the column and fills it, and the keys stay
 * readable (a resend is a duplicate, not a second row). */
START_TEST(keysets_without_a_check_column_are_upgraded) {
    conf c;
    one_key_in_memory(&c);
    exec_sql("CREATE TABLE old_keysets (connector TEXT NOT NULL PRIMARY KEY, "
             "seed BLOB NOT NULL, pruned INTEGER NOT NULL);"
             "INSERT INTO old_keysets SELECT connector, seed, pruned FROM "
             "tidemark_keysets;"
             "DROP TABLE tidemark_keysets;"
             "ALTER TABLE old_keysets RENAME TO tidemark_keysets");
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_keysets"), 1);
    void *sink = open_ok(&c);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_keysets WHERE "
                           "seed_check IS NOT NULL"),
                     1);
    resend_is_a_duplicate(sink);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* A copy of the file keeps its keys: the check value is the seed's, not
 * the file's (a resend into the copy is a duplicate). */
START_TEST(copied_file_keeps_its_keys) {
    conf c;
    char copy[512];
    one_key_in_memory(&c);
    snprintf(copy, sizeof copy, "%s/copy.db", dir);
    FILE *in = fopen(db_path, "rb"), *out = fopen(copy, "wb");
    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    ck_assert_int_eq(fclose(out), 0);
    conf_done(&c);
    snprintf(db_path, sizeof db_path, "%s", copy);
    conf_keys(&c, "{\"path\": \"$DB\", \"table\": \"t\"", 0);
    void *sink = open_ok(&c);
    resend_is_a_duplicate(sink);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* Keys that do not fit in memory (a million of them, the process's
 * address space held to 32 MB more than it uses): the claim is TM_RETRY
 * naming it and the setting that keeps keys on disk; with the memory
 * back, the next claim loads them. */
START_TEST(keys_beyond_memory_are_retry_naming_it) {
    conf c;
    one_key_in_memory(&c);
    exec_sql("INSERT INTO tidemark_key_batches VALUES ('unit', 2, 0, 0, "
             "1000000, randomblob(24000000))");
    void *sink = open_ok(&c);
    tm_error err;
    tm_status rc;
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* Not under AddressSanitizer or ThreadSanitizer, whose allocators
     * abort (ASan told to return NULL fails inside SQLite's read first)
     * once RLIMIT_AS is reached: the release build's run checks it. */
    struct rlimit was;
    ck_assert_int_eq(tm_test_hold_as(32LL << 20, &was), 0);
    rc = claim_as(sink, &err);
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &was), 0);
    ck_assert_msg(rc == TM_RETRY &&
                      strstr(err.message, "do not fit in memory") &&
                      strstr(err.message, "\"dedup_keys\": \"rows\""),
                  "%s: %s", tm_status_name(rc), err.message);
#endif
    rc = claim_as(sink, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
    batch b;
    const rec r[] = {{1, 7, 1000, "x", "order-7", "h"}};
    batch_make(&b, 1, 2, read1(sink).epoch, r, 1);
    commit_ok(sink, &b);
    ck_assert_uint_eq(read1(sink).duplicates, 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* "rows" after "memory" would not see the keys held as batches: refused
 * at claim, naming the setting; "memory" after "rows" reads the rows. */
START_TEST(rows_after_memory_is_refused) {
    conf c;
    one_key_in_memory(&c);
    conf_done(&c);
    conf_keys(&c, "{\"path\": \"$DB\", \"table\": \"t\"", 1);
    void *sink = open_ok(&c);
    tm_error err;
    tm_status rc = claim_as(sink, &err);
    ck_assert_msg(rc == TM_FATAL && strstr(err.message, "\"dedup_keys\"") &&
                      strstr(err.message, "tidemark_key_batches"),
                  "%s: %s", tm_status_name(rc), err.message);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* Rows of tidemark_keys written while a memory-mode sink holds the
 * connector's keys (by a host of the connector running an older build,
 * during a rolling upgrade) are read at the sink's next claim: a resend
 * of such a key after it is a duplicate, not a second row. */
START_TEST(old_keys_written_meanwhile_are_read_at_the_next_claim) {
    conf c;
    batch b;
    conf_keys(&c, "{\"path\": \"$DB\", \"table\": \"t\"", 0);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r0[] = {{0, 7, 1000, "x", "order-7", "h"}};
    batch_make(&b, 0, 1, m.epoch, r0, 1);
    commit_ok(sink, &b);
    /* the older build's host applies order-8 (another partition) */
    exec_sql("INSERT INTO tidemark_keys VALUES ('unit', 'order-8', 'h', 't', "
             "1, 0, 1000, 1000)");
    m = claim1(sink);                                     /* a rebalance */
    const rec r1[] = {{1, 8, 1000, "y", "order-8", "h"}}; /* a resend */
    batch_make(&b, 1, 2, m.epoch, r1, 1);
    commit_ok(sink, &b);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE id = 8"), 0);
    ck_assert_uint_eq(read1(sink).duplicates, 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* A batch row whose key count is damaged (beyond any memory) makes the
 * claim an error that names memory, not a loop that never returns. */
START_TEST(damaged_key_count_does_not_hang_the_claim) {
    conf c;
    one_key_in_memory(&c);
    exec_sql("UPDATE tidemark_key_batches SET nkeys = 9000000000000000000");
    void *sink = open_ok(&c);
    tm_error err;
    tm_status rc = claim_as(sink, &err);
    ck_assert_msg(rc == TM_RETRY && strstr(err.message, "do not fit in memory"),
                  "%s: %s", tm_status_name(rc), err.message);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* A removal frees the newest generation and the next batch row takes its
 * number again (docs/sinks/sqlite.md: safe, every process reloads after
 * a removal): A holds generations 1 and 2 (it followed B's); B's batch
 * removes 2 (its key the older) and stores k3 as generation 2 again; A's next
 * commit must see k3 (a duplicate), not k2 (removed: new again) and still k1.
 */
START_TEST(generation_reused_after_a_removal_is_reloaded) {
    const int64_t T = 1700000000000;
    keys_side sd;
    side_open(&sd, "reuse.db", _i);
    const rec a1[] = {{0, 1, T + 100000, "a", "k1", "h"}};
    side_commit_ok(&sd, 0, 0, 1, a1, 1);
    const rec b1[] = {{0, 2, T, "b", "k2", "h"}};
    side_commit_ok(&sd, 1, 0, 1, b1, 1);
    const rec a_dup[] = {{1, 2, T + 1, "b", "k2", "h"}}; /* A follows to 2 */
    side_commit_ok(&sd, 0, 1, 2, a_dup, 1);
    side_age(&sd, 20000);
    const rec b2[] = {{1, 3, T + 20000, "c", "k3", "h"}};
    side_commit_ok(&sd, 1, 1, 2, b2, 1);
    use_db(&sd);
    if (!_i)
        ck_assert_msg(q_int("SELECT count(*) = 2 AND max(generation) = 2 "
                            "FROM tidemark_key_batches") == 1,
                      "inconclusive: generation 2 was not used again");
    const rec a2[] = {{2, 3, T + 20001, "c", "k3", "h"},
                      {3, 2, T + 20001, "b", "k2", "h"},
                      {4, 1, T + 20001, "a", "k1", "h"}};
    side_commit_ok(&sd, 0, 2, 5, a2, 3);
    use_db(&sd);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE id = 3"), 1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE id = 2"), 2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t WHERE id = 1"), 1);
    api->close(sd.a);
    api->close(sd.b);
    conf_done(&sd.c);
}
END_TEST

/* The empty identity and a long one (1 MiB) are keys like any other, and
 * identities that differ only in their last byte are two keys; the empty
 * identity without a payload hash conflicts with it with one. */
START_TEST(empty_and_long_identities_are_keys) {
    conf c;
    batch b;
    static char big[1 << 20], big2[1 << 20];
    memset(big, 'x', sizeof big - 1);
    memcpy(big2, big, sizeof big);
    big2[sizeof big2 - 2] = 'y';
    conf_keys(&c, "{\"path\": \"$DB\", \"table\": \"t\"", _i);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r0[] = {{0, 1, 1000, "a", "", "h"}, {1, 2, 1000, "b", big, "h"}};
    batch_make(&b, 0, 2, m.epoch, r0, 2);
    commit_ok(sink, &b);
    const rec r1[] = {{2, 1, 1000, "a", "", "h"},
                      {3, 2, 1000, "b", big, "h"},
                      {4, 3, 1000, "c", big2, "h"},
                      {5, 4, 1000, "d", "", NULL}};
    batch_make(&b, 2, 6, m.epoch, r1, 4);
    commit_ok(sink, &b);
    /* rows 0, 1 and 4; offsets 2 and 3 duplicates; 5 a conflict */
    ck_assert_int_eq(q_int("SELECT group_concat(_tm_offset) = '0,1,4' FROM "
                           "(SELECT _tm_offset FROM t ORDER BY 1)"),
                     1);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_dead_letters WHERE "
                           "\"offset\" = 5 AND reason = 'identity_conflict'"),
                     1);
    ck_assert_uint_eq(read1(sink).duplicates, 2);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* ---- validate ----------------------------------------------------------- */

START_TEST(validate_reports_both_shapes) {
    conf c;
    tm_error err = {sizeof err, ""};
    exec_sql("CREATE TABLE t (id TEXT, body TEXT)");
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
    ck_assert_ptr_nonnull(api->validate);
    tm_status rc = api->validate(tm_host_services(), &c.config, &err);
    ck_assert_int_eq(rc, TM_INVALID);
    ck_assert_msg(strstr(err.message, "Table: (id TEXT, body TEXT)") &&
                      strstr(err.message, "Mapping: (id INTEGER, body TEXT, "
                                          "_tm_topic TEXT NOT NULL") &&
                      strstr(err.message, "column \"id\" is TEXT"),
                  "%s", err.message);
    /* validate changed nothing: no helper tables appeared */
    ck_assert_int_eq(q_int("SELECT count(*) FROM sqlite_schema WHERE name "
                           "LIKE 'tidemark_%'"),
                     0);
    /* open refuses the same table the same way */
    void *sink = NULL;
    ck_assert_int_eq(api->open(tm_host_services(), &c.config, &sink, &err),
                     TM_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "Table: (id TEXT, body TEXT)"));
    conf_done(&c);
}
END_TEST

START_TEST(validate_upsert_needs_keys_and_index) {
    conf c;
    tm_error err = {sizeof err, ""};
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\", \"mode\": \"upsert\"}",
              0, 1);
    c.config.columns = &COLS[1]; /* body only: no key */
    ck_assert_int_eq(api->validate(tm_host_services(), &c.config, &err),
                     TM_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "\"mode\""));
    conf_done(&c);
    /* a table of the right columns but no unique index on id */
    exec_sql("CREATE TABLE t (id INTEGER NOT NULL, body TEXT, _tm_topic TEXT "
             "NOT NULL, _tm_partition INTEGER NOT NULL, _tm_offset INTEGER NOT "
             "NULL, _tm_identity TEXT)");
    conf_init(&c,
              "{\"path\": \"$DB\", \"table\": \"t\", \"mode\": \"upsert\", "
              "\"create\": false}",
              0, 2);
    ck_assert_int_eq(api->validate(tm_host_services(), &c.config, &err),
                     TM_INVALID);
    ck_assert_msg(strstr(err.message, "UNIQUE index"), "%s", err.message);
    exec_sql("CREATE UNIQUE INDEX t_id ON t (id)");
    ck_assert_msg(api->validate(tm_host_services(), &c.config, &err) == TM_OK,
                  "%s", err.message);
    conf_done(&c);
}
END_TEST

START_TEST(validate_missing_database) {
    conf c;
    tm_error err = {sizeof err, ""};
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\", \"create\": false}", 0,
              2);
    ck_assert_int_eq(api->validate(tm_host_services(), &c.config, &err),
                     TM_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "\"path\""));
    conf_done(&c);
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
    ck_assert_int_eq(api->validate(tm_host_services(), &c.config, &err), TM_OK);
    ck_assert_int_eq(access(db_path, F_OK), -1); /* and created nothing */
    conf_done(&c);
}
END_TEST

/* More columns than an SQLite table may have (SQLITE_MAX_COLUMN, with the
 * sink's hidden ones counted): validate and open refuse, with the limit
 * in the message; at the limit both accept. */
START_TEST(too_many_columns_are_refused_with_the_limit) {
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
    int limit = sqlite3_limit(db, SQLITE_LIMIT_COLUMN, -1);
    sqlite3_close(db);
    ck_assert_int_gt(limit, 4);
    size_t n = (size_t)limit - 4 + 1; /* one too many with the hidden 4 */
    tm_column *cols = calloc(n, sizeof *cols);
    char(*names)[24] = calloc(n, sizeof *names);
    ck_assert_ptr_nonnull(cols);
    ck_assert_ptr_nonnull(names);
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "c%zu", i);
        cols[i] = (tm_column){sizeof(tm_column), names[i], TM_TYPE_INT, 0, 0};
    }
    char want[32];
    snprintf(want, sizeof want, "%d", limit);
    conf c;
    tm_error err = {sizeof err, ""};
    void *sink = NULL;
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, n);
    c.config.columns = cols;
    tm_status rc = api->validate(tm_host_services(), &c.config, &err);
    ck_assert_msg(rc == TM_INVALID && strstr(err.message, want),
                  "validate: %s: %s", tm_status_name(rc), err.message);
    rc = api->open(tm_host_services(), &c.config, &sink, &err);
    ck_assert_msg(rc == TM_INVALID && strstr(err.message, want), "open: %s: %s",
                  tm_status_name(rc), err.message);
    ck_assert_int_eq(access(db_path, F_OK), -1); /* refused before opening */
    c.config.ncolumns = n - 1;                   /* exactly the limit */
    rc = api->validate(tm_host_services(), &c.config, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
    sink = open_ok(&c);
    api->close(sink);
    conf_done(&c);
    free(cols);
    free(names);
}
END_TEST

/* ---- deadline, quoting -------------------------------------------------- */

START_TEST(past_deadline_is_retry_with_nothing_written) {
    conf c;
    batch b;
    tm_error err;
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r[] = {{0, 1, 1000, "a", NULL, NULL}};
    batch_make(&b, 0, 1, m.epoch, r, 1);
    b.b.deadline_ms = tm_clock_mono_ms() - 1;
    ck_assert_int_eq(commit(sink, &b, &err), TM_RETRY);
    ck_assert_ptr_nonnull(strstr(err.message, "deadline"));
    ck_assert_int_eq(q_int("SELECT count(*) FROM t"), 0);
    ck_assert_int_eq(read1(sink).next_offset, 0);
    b.b.deadline_ms = tm_clock_mono_ms() + 60000;
    commit_ok(sink, &b);
    ck_assert_int_eq(read1(sink).next_offset, 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

START_TEST(identifiers_are_quoted) {
    static const tm_column odd[] = {
        {sizeof(tm_column), "select", TM_TYPE_INT, 1, 1},
        {sizeof(tm_column), "we\"ird col", TM_TYPE_TEXT, 0, 0},
    };
    conf c;
    batch b;
    conf_init(&c,
              "{\"path\": \"$DB\", \"table\": \"ta\\\"ble; DROP TABLE x\", "
              "\"mode\": \"upsert\"}",
              0, 2);
    c.config.columns = odd;
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r[] = {{0, 5, 1000, "it's \"quoted\"", NULL, NULL}};
    batch_make(&b, 0, 1, m.epoch, r, 1);
    commit_ok(sink, &b);
    char body[64];
    q_text("SELECT \"we\"\"ird col\" FROM \"ta\"\"ble; DROP TABLE x\"", body,
           sizeof body);
    ck_assert_str_eq(body, "it's \"quoted\"");
    api->close(sink);
    conf_done(&c);
}
END_TEST

START_TEST(not_a_database_is_fatal_and_invalid_to_validate) {
    conf c;
    tm_error err = {sizeof err, ""};
    void *sink = NULL;
    FILE *f = fopen(db_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("this is not an SQLite database, but long enough to look at it "
          "twice: 0123456789012345678901234567890123456789\n",
          f);
    fclose(f);
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
    /* open: permanent (test_sqlite_errors.c); validate: a setting to fix */
    ck_assert_int_eq(api->open(tm_host_services(), &c.config, &sink, &err),
                     TM_FATAL);
    ck_assert_msg(strstr(err.message, db_path), "%s", err.message);
    ck_assert_int_eq(api->validate(tm_host_services(), &c.config, &err),
                     TM_INVALID);
    ck_assert_msg(strstr(err.message, "not a database"), "%s", err.message);
    conf_done(&c);
}
END_TEST

/* interrupt() asks the call in progress to give up; on an idle instance
 * it must not poison the next call. */
START_TEST(interrupt_when_idle_is_harmless) {
    conf c;
    batch b;
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r[] = {{0, 1, 1000, "a", NULL, NULL}};
    batch_make(&b, 0, 1, m.epoch, r, 1);
    api->interrupt(sink);
    commit_ok(sink, &b);
    ck_assert_int_eq(read1(sink).next_offset, 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* Another writer holds the lock: the commit waits at most busy_timeout_ms
 * and says RETRY; interrupt() from another thread cuts the wait short. */
typedef struct poke {
    void *sink;
    int delay_ms;
} poke;

static void *interrupter(void *arg) {
    poke *p = arg;
    struct timespec ts = {0, p->delay_ms * 1000000L};
    nanosleep(&ts, NULL);
    api->interrupt(p->sink);
    return NULL;
}

START_TEST(lock_wait_is_bounded_and_interruptible) {
    conf c;
    batch b;
    tm_error err;
    sqlite3 *other;
    conf_init(&c,
              "{\"path\": \"$DB\", \"table\": \"t\", \"busy_timeout_ms\": "
              "300}",
              0, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r[] = {{0, 1, 1000, "a", NULL, NULL}};
    batch_make(&b, 0, 1, m.epoch, r, 1);
    ck_assert_int_eq(sqlite3_open(db_path, &other), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL),
                     SQLITE_OK);
    int64_t t0 = tm_clock_mono_ms();
    ck_assert_int_eq(commit(sink, &b, &err), TM_RETRY);
    int64_t waited = tm_clock_mono_ms() - t0;
    ck_assert_msg(waited >= 250 && waited < 3000, "waited %lld ms",
                  (long long)waited);
    conf_done(&c);
    api->close(sink);
    /* now with the default 5 s wait, interrupted after 100 ms */
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
    sink = open_ok(&c);
    poke p = {sink, 100};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, interrupter, &p), 0);
    t0 = tm_clock_mono_ms();
    ck_assert_int_eq(commit(sink, &b, &err), TM_RETRY);
    waited = tm_clock_mono_ms() - t0;
    pthread_join(th, NULL);
    ck_assert_msg(waited < 2000, "interrupt took %lld ms", (long long)waited);
    ck_assert_int_eq(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(other);
    commit_ok(sink, &b); /* the lock is free: the resend applies */
    ck_assert_int_eq(read1(sink).next_offset, 1);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* ---- the database file removed or replaced while open ------------------- */

/* The database moved away, replaced or its directory removed while the
 * sink runs: SQLite in WAL mode goes on committing into the open files,
 * which no one finds again. A file moved away can be moved back: the
 * commit refuses with RETRY until it is, then goes on. A new file at the
 * path is not the open database (RETRY). A file removed (no name left)
 * can never come back: FATAL (F4), not a retry for ever. */
START_TEST(removed_database_is_never_committed_into) {
    conf c;
    batch b1, b2;
    tm_error err;
    char moved[600], wal[600], shm[600];
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r1[] = {{0, 1, 1000, "a", NULL, NULL}};
    const rec r2[] = {{1, 2, 1001, "b", NULL, NULL}};
    batch_make(&b1, 0, 1, m.epoch, r1, 1);
    batch_make(&b2, 1, 2, m.epoch, r2, 1);
    commit_ok(sink, &b1);
    /* 1. moved away: the path names nothing */
    snprintf(moved, sizeof moved, "%s.moved", db_path);
    ck_assert_int_eq(rename(db_path, moved), 0);
    ck_assert_int_eq(access(db_path, F_OK), -1); /* the fault is in place */
    tm_status rc = commit(sink, &b2, &err);
    ck_assert_msg(rc == TM_RETRY, "moved away: %s: %s", tm_status_name(rc),
                  err.message);
    ck_assert_msg(strstr(err.message, db_path) &&
                      strstr(err.message, "no longer names"),
                  "%s", err.message);
    /* 2. back again: the same file, the batch lands */
    ck_assert_int_eq(rename(moved, db_path), 0);
    commit_ok(sink, &b2);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t"), 2);
    /* 3. moved away and a new, different file at the path: not the open
     * database, and the old one can still come back */
    batch b3;
    const rec r3[] = {{2, 3, 1002, "c", NULL, NULL}};
    batch_make(&b3, 2, 3, m.epoch, r3, 1);
    char mwal[620], mshm[620];
    snprintf(wal, sizeof wal, "%s-wal", db_path);
    snprintf(shm, sizeof shm, "%s-shm", db_path);
    snprintf(mwal, sizeof mwal, "%s-wal", moved);
    snprintf(mshm, sizeof mshm, "%s-shm", moved);
    /* all three: a new database must not find the open one's WAL */
    ck_assert_int_eq(rename(db_path, moved), 0);
    ck_assert_int_eq(rename(wal, mwal), 0);
    ck_assert_int_eq(rename(shm, mshm), 0);
    exec_sql("CREATE TABLE other (x)");
    rc = commit(sink, &b3, &err);
    ck_assert_msg(rc == TM_RETRY && strstr(err.message, "replaced"),
                  "replaced: %s: %s", tm_status_name(rc), err.message);
    ck_assert_int_eq(q_int("SELECT count(*) FROM sqlite_schema WHERE name = "
                           "'t'"),
                     0);
    /* 4. the whole directory removed: FATAL, never OK again */
    const char *const gone[] = {db_path, wal, shm, moved, mwal, mshm};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        unlink(gone[i]);
    ck_assert_int_eq(rmdir(dir), 0);
    ck_assert_int_eq(access(dir, F_OK), -1);
    for (int i = 0; i < 2; i++) {
        rc = commit(sink, &b3, &err);
        ck_assert_msg(rc == TM_FATAL && strstr(err.message, "removed") &&
                          strstr(err.message, "/proc/"),
                      "directory gone, try %d: %s: %s", i, tm_status_name(rc),
                      err.message);
    }
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* The file a FATAL "removed" names as the rescue: between the quotes after
 * "rescued into ". */
static void rescued_name(const char *msg, char *out, size_t size) {
    const char *at = strstr(msg, "rescued into \"");
    ck_assert_msg(at != NULL, "no rescue named: %s", msg);
    at += strlen("rescued into \"");
    const char *end = strchr(at, '"');
    ck_assert_ptr_nonnull(end);
    snprintf(out, size, "%.*s", (int)(end - at), at);
}

static int64_t rows_in(const char *file) {
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open_v2(file, &db, SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(
        sqlite3_prepare_v2(db, "SELECT count(*) FROM t", -1, &st, NULL),
        SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

/* F2: only the -wal file removed (WAL mode). The database file is still
 * at its path, but every commit would go into the unlinked WAL and vanish
 * with the process (status RUNNING meanwhile). Refused (FATAL: an unlinked
 * file cannot come back), with the open connection's data rescued into a
 * new file beside the database. The same for -shm. */
START_TEST(removed_wal_is_never_committed_into) {
    static const char *const SUFFIX[] = {"-wal", "-shm"};
    for (int k = 0; k < 2; k++) {
        conf c;
        batch b1, b2;
        tm_error err;
        char side[600], rescued[600];
        if (k) { /* a fresh database for the second round */
            unlink(db_path);
            snprintf(side, sizeof side, "%s-wal", db_path);
            unlink(side);
            snprintf(side, sizeof side, "%s-shm", db_path);
            unlink(side);
        }
        conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
        void *sink = open_ok(&c);
        tm_marker m = claim1(sink);
        const rec r1[] = {{0, 1, 1000, "a", NULL, NULL}};
        const rec r2[] = {{1, 2, 1001, "b", NULL, NULL}};
        batch_make(&b1, 0, 1, m.epoch, r1, 1);
        batch_make(&b2, 1, 2, m.epoch, r2, 1);
        commit_ok(sink, &b1);
        snprintf(side, sizeof side, "%s%s", db_path, SUFFIX[k]);
        ck_assert_int_eq(unlink(side), 0);
        ck_assert_int_eq(access(side, F_OK), -1); /* the fault is in place */
        tm_status rc = commit(sink, &b2, &err);
        ck_assert_msg(rc == TM_FATAL && strstr(err.message, SUFFIX[k]) &&
                          strstr(err.message, "removed"),
                      "%s removed: %s: %s", SUFFIX[k], tm_status_name(rc),
                      err.message);
        rescued_name(err.message, rescued, sizeof rescued);
        ck_assert_int_eq(rows_in(rescued), 1); /* b1, not b2 */
        unlink(rescued);
        api->close(sink);
        conf_done(&c);
    }
}
END_TEST

/* F4: the database file removed (unlinked, its directory still there):
 * FATAL at once, not RETRY for ever with status PAUSED, and what the open
 * connection holds is rescued into a new file beside the path. */
START_TEST(removed_database_is_fatal_and_rescued) {
    conf c;
    batch b1, b2;
    tm_error err;
    char side[600], rescued[600];
    conf_init(&c, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const rec r1[] = {{0, 1, 1000, "a", NULL, NULL}};
    const rec r2[] = {{1, 2, 1001, "b", NULL, NULL}};
    batch_make(&b1, 0, 1, m.epoch, r1, 1);
    batch_make(&b2, 1, 2, m.epoch, r2, 1);
    commit_ok(sink, &b1);
    ck_assert_int_eq(unlink(db_path), 0);
    ck_assert_int_eq(access(db_path, F_OK), -1); /* the fault is in place */
    tm_status rc = commit(sink, &b2, &err);
    ck_assert_msg(rc == TM_FATAL && strstr(err.message, "removed"),
                  "removed: %s: %s", tm_status_name(rc), err.message);
    rescued_name(err.message, rescued, sizeof rescued);
    ck_assert_int_eq(rows_in(rescued), 1);
    unlink(rescued);
    snprintf(side, sizeof side, "%s-wal", db_path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", db_path);
    unlink(side);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* ---- one table, one connector ------------------------------------------- */

static tm_status claim_as(void *sink, tm_error *err) {
    tm_marker m = {.struct_size = sizeof m,
                   .topic = "t",
                   .partition = 0,
                   .next_offset = 0};
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return api->claim(sink, &m, 1, 0, err);
}

/* A second connector pointed at a table another connector writes is
 * refused at its claim, naming the table, the other connector and the
 * setting; with "shared_table": true in both it is accepted. A database
 * from before the owners' record (the other connector's markers over rows
 * of the table) is refused the same way. */
START_TEST(second_connector_on_a_table_is_refused) {
    conf a, b;
    batch b1;
    tm_error err;
    conf_init(&a, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
    conf_init(&b, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
    b.config.connector = "second";
    void *sa = open_ok(&a);
    tm_marker m = claim1(sa);
    const rec r1[] = {{0, 1, 1000, "a", NULL, NULL}};
    batch_make(&b1, 0, 1, m.epoch, r1, 1);
    commit_ok(sa, &b1);
    void *sb = open_ok(&b);
    tm_status rc = claim_as(sb, &err);
    ck_assert_msg(rc == TM_FATAL, "%s: %s", tm_status_name(rc), err.message);
    ck_assert_msg(strstr(err.message, "\"t\"") &&
                      strstr(err.message, "\"unit\"") &&
                      strstr(err.message, "\"shared_table\": true"),
                  "%s", err.message);
    /* refused with nothing written: no marker of "second" */
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_markers WHERE "
                           "connector = 'second'"),
                     0);
    api->close(sb);
    conf_done(&b);
    /* the second one says it means it, the first does not: refused */
    conf_init(&b,
              "{\"path\": \"$DB\", \"table\": \"t\", \"shared_table\": true}",
              0, 2);
    b.config.connector = "second";
    sb = open_ok(&b);
    rc = claim_as(sb, &err);
    ck_assert_msg(rc == TM_FATAL && strstr(err.message, "\"unit\""), "%s: %s",
                  tm_status_name(rc), err.message);
    /* both say it: accepted (on another partition: one partition is
     * refused, shared_table_scan_is_per_connector) */
    api->close(sa);
    conf_done(&a);
    conf_init(&a,
              "{\"path\": \"$DB\", \"table\": \"t\", \"shared_table\": true}",
              0, 2);
    sa = open_ok(&a);
    rc = claim_as(sa, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
    tm_marker mu = {.struct_size = sizeof mu, .topic = "u", .next_offset = 0};
    rc = api->claim(sb, &mu, 1, 0, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
    api->close(sa);
    api->close(sb);
    conf_done(&a);
    conf_done(&b);
    /* a database from before the owners' record: the markers tell */
    exec_sql("DELETE FROM tidemark_table_owners; DELETE FROM "
             "tidemark_markers WHERE connector = 'second'");
    conf_init(&b, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
    b.config.connector = "second";
    sb = open_ok(&b);
    rc = claim_as(sb, &err);
    ck_assert_msg(rc == TM_FATAL && strstr(err.message, "\"unit\"") &&
                      strstr(err.message, "tidemark_markers"),
                  "%s: %s", tm_status_name(rc), err.message);
    api->close(sb);
    conf_done(&b);
}
END_TEST

/* F6: the documented hand-over, deleting the gone connector's row from
 * tidemark_table_owners, did not work: with no row left for the table,
 * the check for databases from before the registry found the old
 * connector's markers over the table's rows and refused again. Once the
 * registry is in use in a database, the markers are not read as owners. */
START_TEST(deleted_owner_row_hands_the_table_over) {
    conf a, b;
    batch b1;
    tm_error err;
    conf_init(&a, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
    conf_init(&b, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
    b.config.connector = "second";
    void *sa = open_ok(&a);
    tm_marker m = claim1(sa);
    const rec r1[] = {{0, 1, 1000, "a", NULL, NULL}};
    batch_make(&b1, 0, 1, m.epoch, r1, 1);
    commit_ok(sa, &b1);
    api->close(sa);
    void *sb = open_ok(&b);
    tm_status rc = claim_as(sb, &err);
    ck_assert_msg(rc == TM_FATAL, "inconclusive: not refused first: %s: %s",
                  tm_status_name(rc), err.message);
    exec_sql("DELETE FROM tidemark_table_owners WHERE connector = 'unit'");
    rc = claim_as(sb, &err);
    ck_assert_msg(rc == TM_OK, "after the hand-over: %s: %s",
                  tm_status_name(rc), err.message);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_table_owners WHERE "
                           "table_name = 't' AND connector = 'second'"),
                     1);
    api->close(sb);
    conf_done(&a);
    conf_done(&b);
}
END_TEST

/* F7: SQLite's table names are case-insensitive: "T" and "t" are one
 * table. An existing "T" was not found for "t" (its shape went unchecked),
 * and two connectors writing it as "t" and "T" were not seen as two
 * writers of one table. */
START_TEST(table_name_case_is_one_table) {
    conf a, b;
    tm_error err = {sizeof err, ""};
    void *sink = NULL;
    exec_sql("CREATE TABLE \"T\" (id TEXT, body TEXT, _tm_topic TEXT NOT "
             "NULL, _tm_partition INTEGER NOT NULL, _tm_offset INTEGER NOT "
             "NULL, _tm_identity TEXT)");
    conf_init(&a, "{\"path\": \"$DB\", \"table\": \"t\"}", 0, 2);
    tm_status rc = api->open(tm_host_services(), &a.config, &sink, &err);
    ck_assert_msg(rc == TM_INVALID && strstr(err.message, "\"id\""),
                  "shape of \"T\" as \"t\": %s: %s", tm_status_name(rc),
                  err.message);
    exec_sql("DROP TABLE \"T\"");
    sink = open_ok(&a);
    claim1(sink);
    conf_init(&b, "{\"path\": \"$DB\", \"table\": \"T\"}", 0, 2);
    b.config.connector = "second";
    void *sb = open_ok(&b);
    rc = claim_as(sb, &err);
    ck_assert_msg(rc == TM_FATAL && strstr(err.message, "\"unit\""),
                  "\"T\" beside \"t\": %s: %s", tm_status_name(rc),
                  err.message);
    api->close(sb);
    api->close(sink);
    conf_done(&a);
    conf_done(&b);
}
END_TEST

typedef struct scanned {
    int rows;
    int64_t last;
} scanned;

static int count_item(void *ctx, const tm_scan_item *it) {
    scanned *sc = ctx;
    sc->rows += it->kind == TM_ITEM_ROW;
    sc->last = it->offset;
    return 0;
}

/* With a shared table, scan (what verify reads) gives a connector the rows
 * of its own topics and partitions only; where another connector of the
 * table holds a marker on the same partition their rows cannot be told
 * apart, and scan says so instead of reporting the other's rows. */
START_TEST(shared_table_scan_is_per_connector) {
    conf a, b;
    batch ba, bb;
    tm_error err = {sizeof err, ""};
    conf_init(&a,
              "{\"path\": \"$DB\", \"table\": \"t\", \"shared_table\": true}",
              0, 2);
    conf_init(&b,
              "{\"path\": \"$DB\", \"table\": \"t\", \"shared_table\": true}",
              0, 2);
    b.config.connector = "second";
    void *sa = open_ok(&a), *sb = open_ok(&b);
    tm_marker ma = claim1(sa);
    tm_marker mb = {.struct_size = sizeof mb, .topic = "u", .next_offset = 0};
    ck_assert_int_eq(api->claim(sb, &mb, 1, 0, &err), TM_OK);
    const rec r[] = {{0, 1, 1000, "a", NULL, NULL},
                     {1, 2, 1001, "b", NULL, NULL}};
    batch_make(&ba, 0, 2, ma.epoch, r, 2);
    batch_make(&bb, 0, 2, mb.epoch, r, 2);
    bb.range.topic = "u";
    commit_ok(sa, &ba);
    commit_ok(sb, &bb);
    ck_assert_int_eq(q_int("SELECT count(*) FROM t"), 4);
    scanned sc = {0, -1};
    tm_emit_target target = {.fn = count_item, .user = &sc};
    ck_assert_int_eq(api->scan(sa, "t", 0, &target, &err), TM_OK);
    ck_assert_int_eq(sc.rows, 2);
    /* F7: "second" claims t[0] too: every offset would be stored twice
     * (each connector its own markers): refused at the claim, nothing
     * written */
    mb.topic = "t";
    tm_status rc = api->claim(sb, &mb, 1, 0, &err);
    ck_assert_msg(rc == TM_FATAL && strstr(err.message, "\"unit\"") &&
                      strstr(err.message, "t[0]"),
                  "claim of t[0]: %s: %s", tm_status_name(rc), err.message);
    ck_assert_int_eq(q_int("SELECT count(*) FROM tidemark_markers WHERE "
                           "connector = 'second' AND topic = 't'"),
                     0);
    /* such a marker from before that check: scan of t[0] cannot judge */
    exec_sql("INSERT INTO tidemark_markers (connector, topic, \"partition\", "
             "next_offset, epoch) VALUES ('second', 't', 0, 0, 1)");
    rc = api->scan(sa, "t", 0, &target, &err);
    ck_assert_msg(rc == TM_FATAL && strstr(err.message, "\"second\"") &&
                      strstr(err.message, "t[0]"),
                  "%s: %s", tm_status_name(rc), err.message);
    api->close(sa);
    api->close(sb);
    conf_done(&a);
    conf_done(&b);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("sqlite_sink");
    TCase *tc = tcase_create("api");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, settings_errors_name_the_key, 0,
                        (int)(sizeof BAD / sizeof BAD[0]));
    tcase_add_test(tc, upsert_updates_by_key);
    tcase_add_loop_test(tc, identity_conflict_is_a_dead_letter, 0, 2);
    tcase_add_loop_test(tc, retention_boundary, 0, 2);
    tcase_add_loop_test(tc, future_timestamp_does_not_prune_recent_keys, 0, 2);
    tcase_add_test(tc, no_retention_keeps_keys);
    tcase_add_test(tc, keys_age_index_only_with_a_retention);
    tcase_add_test(tc, new_keys_table_is_without_rowid);
    tcase_add_loop_test(tc, keys_table_from_before_is_used_as_it_is, 0, 2);
    tcase_add_test(tc, validate_refuses_directory_and_uri_paths);
    tcase_add_test(tc, content_error_of_a_check_is_a_dead_letter);
    tcase_add_test(tc, replayed_dead_letter_is_stored_once);
    tcase_add_test(tc, different_dead_letter_at_a_stored_offset_is_stored);
    tcase_add_test(tc, past_timestamp_key_is_kept_for_the_retention);
    tcase_add_test(tc, keys_from_before_the_wall_column_are_kept);
    tcase_add_test(tc, memory_and_rows_keys_agree);
    tcase_add_test(tc, memory_and_rows_keys_agree_on_many_keys);
    tcase_add_loop_test(tc, old_keys_are_pruned_in_memory_too, 0, 2);
    tcase_add_test(tc, rows_after_memory_is_refused);
    tcase_add_loop_test(
        tc, edited_seed_is_refused_naming_the_way_out, 0,
        (int)(2 * sizeof KEYSET_EDITS / sizeof KEYSET_EDITS[0]));
    tcase_add_test(tc, seedless_batch_rows_refused_whatever_their_key_counts);
    tcase_add_test(tc, keysets_without_a_check_column_are_upgraded);
    tcase_add_test(tc, copied_file_keeps_its_keys);
    tcase_add_test(tc, keys_beyond_memory_are_retry_naming_it);
    tcase_add_test(tc, old_keys_written_meanwhile_are_read_at_the_next_claim);
    tcase_add_test(tc, damaged_key_count_does_not_hang_the_claim);
    tcase_add_loop_test(tc, generation_reused_after_a_removal_is_reloaded, 0,
                        2);
    tcase_add_loop_test(tc, empty_and_long_identities_are_keys, 0, 2);
    tcase_add_test(tc, validate_reports_both_shapes);
    tcase_add_test(tc, validate_upsert_needs_keys_and_index);
    tcase_add_test(tc, validate_missing_database);
    tcase_add_test(tc, too_many_columns_are_refused_with_the_limit);
    tcase_add_test(tc, past_deadline_is_retry_with_nothing_written);
    tcase_add_test(tc, identifiers_are_quoted);
    tcase_add_test(tc, not_a_database_is_fatal_and_invalid_to_validate);
    tcase_add_test(tc, interrupt_when_idle_is_harmless);
    tcase_add_test(tc, lock_wait_is_bounded_and_interruptible);
    tcase_add_test(tc, removed_database_is_never_committed_into);
    tcase_add_test(tc, removed_wal_is_never_committed_into);
    tcase_add_test(tc, removed_database_is_fatal_and_rescued);
    tcase_add_test(tc, second_connector_on_a_table_is_refused);
    tcase_add_test(tc, deleted_owner_row_hands_the_table_over);
    tcase_add_test(tc, table_name_case_is_one_table);
    tcase_add_test(tc, shared_table_scan_is_per_connector);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
