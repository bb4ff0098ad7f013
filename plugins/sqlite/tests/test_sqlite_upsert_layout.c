/* Upsert's table layout: a table the sink makes for one required integer
 * key column keys its rows by it (the column is the rowid: INTEGER
 * PRIMARY KEY, no second index), and the same batches give the same rows,
 * dead letters and markers as in a table of the layout made before (a
 * rowid of its own and a unique index on the key), which keeps working.
 * The database is read back with libsqlite3 directly. */
#include <check.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "fixture.h"
#include "services/host_services.h"

static void setup(void) {
    char why[FX_WHY_MAX];
    ck_assert_msg(fx_load_plugin(why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_tmpdir(why, sizeof why) == 0, "%s", why);
}

static void teardown(void) {
    fx_rmdir();
}

/* ---- the database, directly --------------------------------------------- */

static void exec_on(const char *path, const char *sql) {
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK,
                  "%s: %s", sql, sqlite3_errmsg(db));
    sqlite3_close(db);
}

/* One integer from SQL on the database at PATH (which becomes the
 * fixture's). */
static int64_t int_on(const char *path, const char *sql) {
    char why[FX_WHY_MAX];
    int64_t v = 0;
    if (path != fx_db_path)
        snprintf(fx_db_path, sizeof fx_db_path, "%s", path);
    ck_assert_msg(fx_sql_int(sql, &v, why, sizeof why) == SQLITE_OK, "%s: %s",
                  sql, why);
    return v;
}

/* Every row of SQL's result as text, columns '|'-separated, rows by '\n'
 * (NULL reads "NULL"), into a buffer the caller frees. */
static char *dump_on(const char *path, const char *sql) {
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK,
                  "%s: %s", sql, sqlite3_errmsg(db));
    size_t cap = 4096, len = 0;
    char *out = calloc(1, cap);
    ck_assert_ptr_nonnull(out);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (int i = 0; i < sqlite3_column_count(st); i++) {
            const char *v = (const char *)sqlite3_column_text(st, i);
            size_t need = strlen(v ? v : "NULL") + 2;
            if (len + need + 1 > cap) {
                cap = 2 * (len + need + 1);
                out = realloc(out, cap);
                ck_assert_ptr_nonnull(out);
            }
            len +=
                (size_t)snprintf(out + len, cap - len, "%s%s", v ? v : "NULL",
                                 i + 1 < sqlite3_column_count(st) ? "|" : "\n");
        }
    }
    ck_assert_int_eq(rc, SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

/* ---- batches ------------------------------------------------------------ */

/* in ev.op beside the record's op: its id is null (any id is a key) */
#define NULL_ID 0x80000000u

typedef struct ev {
    int64_t id;
    const char *body; /* NULL: null */
    uint32_t op;
} ev;

typedef struct batch {
    tm_batch b;
    tm_range range;
    tm_record records[16];
    tm_value values[16][2];
    char id[32];
} batch;

/* Records at offsets start.. of partition 0 of topic "t". */
static void batch_make(batch *bt, int64_t start, int64_t epoch, const ev *evs,
                       size_t n) {
    static int seq;
    ck_assert_uint_le(n, 16);
    memset(bt, 0, sizeof *bt);
    snprintf(bt->id, sizeof bt->id, "layout-%d", ++seq);
    bt->range = (tm_range){.struct_size = sizeof(tm_range),
                           .topic = "t",
                           .partition = 0,
                           .start_offset = start,
                           .end_offset = start + (int64_t)n,
                           .epoch = epoch};
    for (size_t i = 0; i < n; i++) {
        bt->values[i][0] = (tm_value){.struct_size = sizeof(tm_value),
                                      .is_null = (evs[i].op & NULL_ID) != 0,
                                      .v.i = evs[i].id};
        bt->values[i][1] = (tm_value){.struct_size = sizeof(tm_value),
                                      .is_null = !evs[i].body};
        bt->values[i][1].v.s.ptr = evs[i].body;
        bt->values[i][1].v.s.len = evs[i].body ? strlen(evs[i].body) : 0;
        bt->records[i] = (tm_record){.struct_size = sizeof(tm_record),
                                     .range = 0,
                                     .offset = start + (int64_t)i,
                                     .timestamp_ms = 1700000000000 + (int64_t)i,
                                     .value = "{}",
                                     .value_len = 2,
                                     .values = bt->values[i],
                                     .op = evs[i].op & ~NULL_ID};
    }
    bt->b = (tm_batch){.struct_size = sizeof(tm_batch),
                       .connector = "unit",
                       .batch_id = bt->id,
                       .ranges = &bt->range,
                       .nranges = 1,
                       .records = bt->records,
                       .nrecords = n};
}

/* The table of the layout the sink made before: a rowid of its own and
 * the unique index on the key. */
static const char OLD_LAYOUT[] =
    "CREATE TABLE t (\"id\" INTEGER NOT NULL, \"body\" TEXT, _tm_topic TEXT "
    "NOT NULL, _tm_partition INTEGER NOT NULL, _tm_offset INTEGER NOT NULL, "
    "_tm_identity TEXT); CREATE UNIQUE INDEX \"t_tm_key\" ON \"t\" (\"id\");";

/* A row the table refuses for its content, in both layouts. */
static const char REFUSE[] =
    "CREATE TRIGGER t_refuse BEFORE INSERT ON t WHEN NEW.body = 'refuse' "
    "BEGIN SELECT RAISE(ABORT, 'body refused'); END;";

/* Commits BATCHES into a fresh sink on PATH (the table made by the sink,
 * or before it with OLD_LAYOUT when old) in upsert mode, FLAGS its
 * config's. */
static void run_on(const char *path, int old, uint32_t flags,
                   const ev *const *batches, const size_t *sizes, size_t n) {
    char why[FX_WHY_MAX];
    if (path != fx_db_path)
        snprintf(fx_db_path, sizeof fx_db_path, "%s", path);
    if (old)
        exec_on(path, OLD_LAYOUT);
    fx_conf c;
    ck_assert_msg(fx_conf_init(&c, "\"mode\": \"upsert\"", why, sizeof why) ==
                      0,
                  "%s", why);
    c.config.flags = flags;
    void *sink = NULL;
    ck_assert_msg(fx_open(&c, &sink, why, sizeof why) == TM_OK, "%s", why);
    exec_on(path, REFUSE);
    tm_marker m;
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    int64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        batch bt;
        batch_make(&bt, at, m.epoch, batches[i], sizes[i]);
        at += (int64_t)sizes[i];
        tm_error err = {sizeof err, ""};
        tm_status r = fx_api->commit(sink, &bt.b, &err);
        ck_assert_msg(r == TM_OK, "commit %zu on %s: %s: %s", i, path,
                      tm_status_name(r), err.message);
    }
    fx_api->close(sink);
    fx_conf_done(&c);
}

/* Commits the same BATCHES (FLAGS as run_on's) into NEWP, a table the
 * sink makes, and OLDP, the layout made before (file names in fx_dir,
 * the paths back in NEWP and OLDP), and checks that both end with the
 * same rows, dead letters and markers. */
static void run_both(char newp[600], char oldp[600], uint32_t flags,
                     const ev *const *batches, const size_t *sizes, size_t n) {
    snprintf(newp, 600, "%s/new.db", fx_dir);
    snprintf(oldp, 600, "%s/old.db", fx_dir);
    run_on(newp, 0, flags, batches, sizes, n);
    run_on(oldp, 1, flags, batches, sizes, n);
    static const char *const Q[] = {
        "SELECT id, typeof(id), body, _tm_topic, _tm_partition, _tm_offset, "
        "_tm_identity FROM t ORDER BY id",
        "SELECT \"offset\", reason, detail FROM tidemark_dead_letters ORDER BY "
        "\"offset\"",
        "SELECT next_offset, rows, dead_letters, duplicates FROM "
        "tidemark_markers"};
    for (size_t q = 0; q < sizeof Q / sizeof Q[0]; q++) {
        char *a = dump_on(newp, Q[q]), *b = dump_on(oldp, Q[q]);
        ck_assert_msg(strcmp(a, b) == 0, "%s\nnew layout:\n%sold layout:\n%s",
                      Q[q], a, b);
        free(a);
        free(b);
    }
}

/* ---- tests -------------------------------------------------------------- */

/* The table made for a required integer key keys its rows by it. */
START_TEST(new_upsert_table_is_keyed_by_its_integer_key) {
    static const ev b1[] = {{1, "a", 0}};
    const ev *const bs[] = {b1};
    const size_t ns[] = {1};
    run_on(fx_db_path, 0, 0, bs, ns, 1);
    ck_assert_int_eq(int_on(fx_db_path, "SELECT count(*) FROM sqlite_schema "
                                        "WHERE type = 'index' AND tbl_name = "
                                        "'t'"),
                     0);
    ck_assert_int_eq(int_on(fx_db_path, "SELECT pk FROM pragma_table_info('t') "
                                        "WHERE name = 'id'"),
                     1);
    ck_assert_int_eq(int_on(fx_db_path, "SELECT rowid FROM t WHERE id = 1"), 1);
}
END_TEST

/* The same batches, _i 0 plain upsert, 1 change events (deletes, the key
 * columns set too): the table the sink makes and the layout made before
 * end with the same rows, dead letters and markers. */
START_TEST(upsert_layouts_agree) {
    const int cdc = _i;
    const uint32_t D = cdc ? TM_OP_DELETE : TM_OP_UPSERT;
    /* in-batch repeats, a refused row, a null key, a large and a negative
     * key */
    static const ev b1[] = {
        {1, "a", 0},       {2, "b", 0},    {1, "a2", 0},
        {3, "refuse", 0},  {4, "d", 0},    {INT64_MAX, "m", 0},
        {0, "n", NULL_ID}, {-5, "neg", 0}, {2, NULL, 0}};
    /* updates, a delete and a re-insert of one key in one batch, a delete
     * of a key never stored, a refused update */
    const ev b2[] = {{2, "b2", 0},      {4, NULL, D}, {1, NULL, D},
                     {1, "a3", 0},      {9, NULL, D}, {3, "c", 0},
                     {-5, "refuse", 0}, {4, "d2", 0}, {4, NULL, D},
                     {6, "f", 0},       {6, "f2", 0}};
    /* a repeat after a delete in an earlier batch; the last event wins */
    const ev b3[] = {{4, "d3", 0}, {1, "a4", 0}, {1, "a5", 0}};
    const ev *const bs[] = {b1, b2, b3};
    const size_t ns[] = {sizeof b1 / sizeof b1[0], sizeof b2 / sizeof b2[0],
                         sizeof b3 / sizeof b3[0]};
    char newp[600], oldp[600];
    run_both(newp, oldp, cdc ? TM_CONFIG_CDC : 0, bs, ns, 3);
    /* what the batches meant, read from the old layout */
    ck_assert_int_eq(int_on(oldp, "SELECT count(*) FROM tidemark_dead_letters "
                                  "WHERE reason = 'rejected'"),
                     3);
    ck_assert_int_eq(
        int_on(oldp, "SELECT count(*) FROM t WHERE id = 1 AND body = 'a5'"), 1);
    ck_assert_int_eq(int_on(oldp, "SELECT count(*) FROM t WHERE id = 4"), 1);
    /* each kept its layout */
    ck_assert_int_eq(int_on(oldp, "SELECT count(*) FROM sqlite_schema WHERE "
                                  "name = 't_tm_key'"),
                     1);
    ck_assert_int_eq(int_on(newp, "SELECT count(*) FROM sqlite_schema WHERE "
                                  "type = 'index' AND tbl_name = 't'"),
                     0);
}
END_TEST

/* A reopened sink finds the table it made complete: no unique index is
 * added beside the key it already has. */
START_TEST(reopen_adds_no_index_to_the_keyed_table) {
    static const ev b1[] = {{1, "a", 0}};
    const ev *const bs[] = {b1};
    const size_t ns[] = {1};
    char why[FX_WHY_MAX];
    run_on(fx_db_path, 0, 0, bs, ns, 1);
    fx_conf c;
    ck_assert_msg(fx_conf_init(&c, "\"mode\": \"upsert\"", why, sizeof why) ==
                      0,
                  "%s", why);
    void *sink = NULL;
    ck_assert_msg(fx_open(&c, &sink, why, sizeof why) == TM_OK, "%s", why);
    fx_api->close(sink);
    fx_conf_done(&c);
    ck_assert_int_eq(int_on(fx_db_path, "SELECT count(*) FROM sqlite_schema "
                                        "WHERE type = 'index' AND tbl_name = "
                                        "'t'"),
                     0);
    ck_assert_int_eq(int_on(fx_db_path, "SELECT count(*) FROM t"), 1);
}
END_TEST

/* The ends of the key's range and the keys around 0 (a rowid takes any
 * 64-bit value), updated in a later batch, and a null key once the
 * largest is stored (where the rowid would take a random free number):
 * the same rows, dead letters and markers in either layout; _i as
 * upsert_layouts_agree's. */
START_TEST(extreme_keys_agree) {
    const int cdc = _i;
    const uint32_t D = cdc ? TM_OP_DELETE : TM_OP_UPSERT;
    static const ev b1[] = {{INT64_MIN, "min", 0}, {INT64_MIN + 1, "min1", 0},
                            {-1, "m1", 0},         {0, "zero", 0},
                            {INT64_MAX, "max", 0}, {1, "one", 0}};
    const ev b2[] = {{0, "n", NULL_ID},        {INT64_MIN, "min2", 0},
                     {0, "zero2", 0},          {INT64_MAX, "max2", 0},
                     {INT64_MIN + 1, NULL, D}, {-1, "m12", 0},
                     {0, "n2", NULL_ID}};
    const ev *const bs[] = {b1, b2};
    const size_t ns[] = {sizeof b1 / sizeof b1[0], sizeof b2 / sizeof b2[0]};
    char newp[600], oldp[600];
    run_both(newp, oldp, cdc ? TM_CONFIG_CDC : 0, bs, ns, 2);
    /* what the batches meant: each key once, its last body */
    ck_assert_int_eq(
        int_on(newp, "SELECT count(*) FROM t WHERE id = -9223372036854775807 "
                     "- 1 AND body = 'min2'"),
        1);
    ck_assert_int_eq(int_on(newp, "SELECT count(*) FROM t WHERE id = "
                                  "9223372036854775807 AND body = 'max2'"),
                     1);
    ck_assert_int_eq(int_on(newp, "SELECT count(*) FROM t"), cdc ? 5 : 6);
    ck_assert_int_eq(int_on(newp, "SELECT count(*) FROM tidemark_dead_letters "
                                  "WHERE reason = 'rejected'"),
                     2);
}
END_TEST

/* A table keyed by the key the mapping had keeps it: reopened with the
 * key on another mapped column (a key change the host refused, then a
 * restart with the new mapping), open is refused as it is for a table
 * keeping its unique index, and no index is added on the new key
 * (upserting by it would turn every record whose old key is taken into
 * a dead letter). _i 0: the table the sink makes, 1: the layout made
 * before. */
START_TEST(key_change_is_refused_in_either_layout) {
    static const ev b1[] = {{1, "a", 0}, {2, "b", 0}};
    const ev *const bs[] = {b1};
    const size_t ns[] = {2};
    char why[FX_WHY_MAX];
    run_on(fx_db_path, _i, 0, bs, ns, 1);
    /* the same columns, keyed by body now */
    static const tm_column BY_BODY[] = {
        {sizeof(tm_column), "id", TM_TYPE_INT, 1, 0},
        {sizeof(tm_column), "body", TM_TYPE_TEXT, 1, 1},
    };
    fx_conf c;
    ck_assert_msg(fx_conf_init(&c, "\"mode\": \"upsert\"", why, sizeof why) ==
                      0,
                  "%s", why);
    c.config.columns = BY_BODY;
    c.config.ncolumns = 2;
    void *sink = NULL;
    tm_status r = fx_open(&c, &sink, why, sizeof why);
    if (sink)
        fx_api->close(sink);
    fx_conf_done(&c);
    ck_assert_msg(r == TM_INVALID &&
                      strstr(why, "needs a UNIQUE index on exactly the key "
                                  "columns"),
                  "open keyed by body: %s: %s", tm_status_name(r),
                  r == TM_OK ? "opened" : why);
    ck_assert_int_eq(
        int_on(fx_db_path, "SELECT count(*) FROM pragma_index_list('t') AS il, "
                           "pragma_index_info(il.name) AS ii WHERE ii.name = "
                           "'body'"),
        0);
}
END_TEST

/* A table made by hand with a rowid of its own, named (an INTEGER PRIMARY
 * KEY the mapping does not map), is given the unique index on the key at
 * open, and upserts by it. */
START_TEST(unmapped_integer_primary_key_gets_the_key_index) {
    exec_on(fx_db_path,
            "CREATE TABLE t (rid INTEGER PRIMARY KEY, \"id\" INTEGER NOT NULL, "
            "\"body\" TEXT, _tm_topic TEXT NOT NULL, _tm_partition INTEGER "
            "NOT NULL, _tm_offset INTEGER NOT NULL, _tm_identity TEXT);");
    static const ev b1[] = {{7, "a", 0}, {7, "b", 0}, {8, "c", 0}};
    const ev *const bs[] = {b1};
    const size_t ns[] = {3};
    run_on(fx_db_path, 0, 0, bs, ns, 1);
    ck_assert_int_eq(int_on(fx_db_path, "SELECT count(*) FROM sqlite_schema "
                                        "WHERE name = 't_tm_key'"),
                     1);
    ck_assert_int_eq(int_on(fx_db_path, "SELECT count(*) FROM t"), 2);
    ck_assert_int_eq(
        int_on(fx_db_path,
               "SELECT count(*) FROM t WHERE id = 7 AND body = 'b'"),
        1);
}
END_TEST

/* Tables made by hand keyed by id NOT NULL, whether or not SQLite makes
 * the key the rowid (only the type name INTEGER alone does, and not with
 * DESC on the column; a WITHOUT ROWID table has none): each is used as
 * it is and refuses a null key with SQLite's message, as the table the
 * sink makes; an INTEGER primary key is given no index beside it (an INT
 * or BIGINT one is given t_tm_key, as by the builds before). */
static const char *const HAND_KEYED[] = {
    "\"id\" INTEGER PRIMARY KEY NOT NULL, \"body\" TEXT, ",
    "\"id\" INTEGER NOT NULL, \"body\" TEXT, ",
    "\"id\" INT PRIMARY KEY NOT NULL, \"body\" TEXT, ",
    "\"id\" BIGINT PRIMARY KEY NOT NULL, \"body\" TEXT, ",
    "\"id\" INTEGER PRIMARY KEY DESC NOT NULL, \"body\" TEXT, ",
    "\"id\" integer NOT NULL, \"body\" TEXT, ",
};
static const char *const HAND_TAIL[] = {
    ")", ", PRIMARY KEY (\"id\" DESC))",         ")", ")",
    ")", ", PRIMARY KEY (\"id\")) WITHOUT ROWID"};

START_TEST(hand_made_keys_refuse_a_null_key_alike) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "CREATE TABLE t (%s_tm_topic TEXT NOT NULL, _tm_partition INTEGER "
             "NOT NULL, _tm_offset INTEGER NOT NULL, _tm_identity TEXT%s;",
             HAND_KEYED[_i], HAND_TAIL[_i]);
    exec_on(fx_db_path, sql);
    static const ev b1[] = {{1, "a", 0},
                            {0, "n", NULL_ID},
                            {1, "b", 0},
                            {INT64_MAX, "m", 0},
                            {0, "n2", NULL_ID}};
    const ev *const bs[] = {b1};
    const size_t ns[] = {sizeof b1 / sizeof b1[0]};
    run_on(fx_db_path, 0, 0, bs, ns, 1);
    char *rows = dump_on(fx_db_path, "SELECT id, body FROM t ORDER BY id");
    ck_assert_msg(strcmp(rows, "1|b\n9223372036854775807|m\n") == 0, "%s: %s",
                  sql, rows);
    free(rows);
    char *dls = dump_on(fx_db_path, "SELECT \"offset\", reason, detail FROM "
                                    "tidemark_dead_letters ORDER BY 1");
    ck_assert_msg(strcmp(dls,
                         "1|rejected|NOT NULL constraint failed: t.id\n"
                         "4|rejected|NOT NULL constraint failed: t.id\n") == 0,
                  "%s: %s", sql, dls);
    free(dls);
    int integer_pk = strstr(HAND_KEYED[_i], "INT ") == NULL &&
                     strstr(HAND_KEYED[_i], "BIGINT") == NULL;
    ck_assert_int_eq(int_on(fx_db_path, "SELECT count(*) FROM sqlite_schema "
                                        "WHERE name = 't_tm_key'"),
                     !integer_pk);
}
END_TEST

/* The table of an upsert connector appended to (its mode changed, or a
 * second connector on the same table) with the key column not required:
 * a null id is refused by the column's NOT NULL in either layout, not
 * given the next rowid as its key (which would then refuse the record
 * that has that key). _i 0: the table the sink makes, 1: the layout made
 * before. */
START_TEST(append_into_upsert_table_refuses_a_null_key) {
    static const ev b1[] = {{1, "a", 0}};
    const ev *const bs[] = {b1};
    const size_t ns[] = {1};
    char why[FX_WHY_MAX];
    run_on(fx_db_path, _i, 0, bs, ns, 1);
    static const tm_column OPTIONAL_ID[] = {
        {sizeof(tm_column), "id", TM_TYPE_INT, 0, 0},
        {sizeof(tm_column), "body", TM_TYPE_TEXT, 0, 0},
    };
    fx_conf c;
    ck_assert_msg(fx_conf_init(&c, NULL, why, sizeof why) == 0, "%s", why);
    c.config.columns = OPTIONAL_ID;
    void *sink = NULL;
    ck_assert_msg(fx_open(&c, &sink, why, sizeof why) == TM_OK, "%s", why);
    tm_marker m;
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    static const ev b2[] = {{0, "n", NULL_ID}, {2, "b", 0}};
    batch bt;
    batch_make(&bt, m.next_offset, m.epoch, b2, 2);
    tm_error err = {sizeof err, ""};
    tm_status r = fx_api->commit(sink, &bt.b, &err);
    ck_assert_msg(r == TM_OK, "%s: %s", tm_status_name(r), err.message);
    fx_api->close(sink);
    fx_conf_done(&c);
    char *rows = dump_on(fx_db_path, "SELECT id, body FROM t ORDER BY id");
    char *dls = dump_on(fx_db_path, "SELECT \"offset\", reason, detail FROM "
                                    "tidemark_dead_letters ORDER BY 1");
    ck_assert_msg(strcmp(rows, "1|a\n2|b\n") == 0 &&
                      strcmp(dls, "1|rejected|NOT NULL constraint failed: "
                                  "t.id\n") == 0,
                  "rows:\n%sdead letters:\n%s", rows, dls);
    free(rows);
    free(dls);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("sqlite_upsert_layout");
    TCase *tc = tcase_create("layout");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, new_upsert_table_is_keyed_by_its_integer_key);
    tcase_add_loop_test(tc, upsert_layouts_agree, 0, 2);
    tcase_add_test(tc, reopen_adds_no_index_to_the_keyed_table);
    tcase_add_loop_test(tc, extreme_keys_agree, 0, 2);
    tcase_add_loop_test(tc, key_change_is_refused_in_either_layout, 0, 2);
    tcase_add_test(tc, unmapped_integer_primary_key_gets_the_key_index);
    tcase_add_loop_test(tc, append_into_upsert_table_refuses_a_null_key, 0, 2);
    tcase_add_loop_test(tc, hand_made_keys_refuse_a_null_key_alike, 0,
                        (int)(sizeof HAND_KEYED / sizeof HAND_KEYED[0]));
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
