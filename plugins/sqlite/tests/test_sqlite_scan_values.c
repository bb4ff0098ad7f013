/* scan gives a row's values back only when they are what the column's type
 * reads (plugins/sqlite/scan.c): SQLite's dynamic typing lets another
 * writer put text in an INTEGER column or a blob in a TEXT one, and such a
 * row comes back without values (never converted ones), still as a row at
 * its offset, while the other rows carry theirs. */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "fixture.h"
#include "services/host_services.h"

#define NROWS 4

typedef struct got {
    int rows[NROWS];
    int with[NROWS];
    int64_t id[NROWS];
    int body_null[NROWS];
    char body[NROWS][16];
} got;

static int collect(void *user, const tm_scan_item *it) {
    got *g = user;
    if (it->kind != TM_ITEM_ROW || it->offset < 0 || it->offset >= NROWS)
        return 0;
    int o = (int)it->offset;
    g->rows[o]++;
    if (!TM_SCAN_ITEM_HAS_VALUES(it) || it->nvalues != 2)
        return 0;
    const tm_value *id = TM_CELEM(tm_value, it->values, 0);
    const tm_value *body = TM_CELEM(tm_value, it->values, 1);
    g->with[o] = 1;
    g->id[o] = id->v.i;
    g->body_null[o] = body->is_null;
    if (!body->is_null)
        snprintf(g->body[o], sizeof g->body[o], "%.*s", (int)body->v.s.len,
                 body->v.s.ptr);
    return 0;
}

static void sql(const char *text) {
    sqlite3 *db = NULL;
    char *msg = NULL;
    ck_assert_int_eq(sqlite3_open(fx_db_path, &db), SQLITE_OK);
    int rc = sqlite3_exec(db, text, NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", text, msg ? msg : "");
    ck_assert_int_eq(sqlite3_changes(db), 1);
    sqlite3_close(db);
}

START_TEST(a_value_of_another_storage_class_gives_the_row_without_values) {
    char why[FX_WHY_MAX] = "";
    ck_assert_msg(fx_load_plugin(why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_tmpdir(why, sizeof why) == 0, "%s", why);
    fx_conf c;
    void *sink;
    tm_marker m;
    ck_assert_msg(fx_conf_init(&c, NULL, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_open(&c, &sink, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    fx_batch bt;
    const int64_t epochs[1] = {m.epoch};
    ck_assert_int_eq(fx_batch_make(&bt, "b1", 1, 0, NROWS, epochs, "b"), 0);
    tm_error err;
    ck_assert_msg(fx_commit(sink, &bt, &err) == TM_OK, "%s", err.message);
    /* Another writer's values: text in id (INTEGER), a blob in body. */
    sql("UPDATE t SET id = 'abc' WHERE _tm_offset = 1");
    sql("UPDATE t SET body = x'00ff' WHERE _tm_offset = 2");
    sql("UPDATE t SET body = NULL WHERE _tm_offset = 3");

    got g = {0};
    tm_emit_target target = {.fn = collect, .user = &g};
    tm_status r = fx_api->scan(sink, "t", 0, &target, &err);
    ck_assert_msg(r == TM_OK, "scan: %s: %s", tm_status_name(r), err.message);
    for (int o = 0; o < NROWS; o++)
        ck_assert_msg(g.rows[o] == 1, "offset %d: %d rows", o, g.rows[o]);
    ck_assert_msg(g.with[0] && g.id[0] == 0 && strcmp(g.body[0], "b") == 0,
                  "offset 0: with %d, id %lld, body '%s'", g.with[0],
                  (long long)g.id[0], g.body[0]);
    ck_assert_msg(!g.with[1], "offset 1: text in an int column came back");
    ck_assert_msg(!g.with[2], "offset 2: a blob in a text column came back");
    ck_assert_msg(g.with[3] && g.id[3] == 3 && g.body_null[3],
                  "offset 3: a null body: with %d, id %lld", g.with[3],
                  (long long)g.id[3]);
    fx_api->close(sink);
    fx_conf_done(&c);
    fx_rmdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("sqlite_scan_values");
    TCase *tc = tcase_create("core");
    tcase_add_test(
        tc, a_value_of_another_storage_class_gives_the_row_without_values);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
