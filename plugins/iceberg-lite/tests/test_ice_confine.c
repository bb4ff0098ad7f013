/* Reads and deletes stay inside the table's directory: table metadata
 * (crafted here as the next version) naming /etc/passwd, a path through
 * "..", or a FIFO inside the table gets a clear error, reads nothing
 * outside and never blocks; vacuum deletes nothing outside the table. */
#define _XOPEN_SOURCE 700 /* nftw in the fixture, symlink, utimensat */

#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "ice_fixture.h"
#include "maint.h"
#include "services/host_services.h"

static ice_fx fx;
static json_t *good; /* the table's metadata before any crafting */

static void *open_ok(void) {
    void *sink;
    tm_error err;
    tm_status rc = ice_fx_open(&fx, &sink, &err);
    ck_assert_msg(rc == TM_OK, "open: %s: %s", tm_status_name(rc), err.message);
    return sink;
}

static tm_status commit_p0(void *sink, int64_t epoch, int64_t start,
                           int64_t end, tm_error *err) {
    ice_fx_batch kb;
    char id[32];
    snprintf(id, sizeof id, "c-%lld", (long long)start);
    ice_fx_batch_init(&kb, id);
    uint32_t r = ice_fx_range(&kb, 0, start, end, epoch);
    for (int64_t o = start; o < end; o++) {
        if (o % 5 == 4)
            ice_fx_dead_letter(&kb, r, o);
        else
            ice_fx_record(&kb, r, o);
    }
    ice_fx_seal(&kb);
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    tm_status rc = ice_api->commit(sink, &kb.b, err);
    ice_fx_batch_free(&kb);
    return rc;
}

/* A table with one commit of p0 [0, 5) (a dead letter at 4); good keeps
 * its metadata. Returns p0's epoch. */
static int64_t make_table(void) {
    void *sink = open_ok();
    tm_marker m;
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    ck_assert_int_eq(commit_p0(sink, m.epoch, 0, 5, &err), TM_OK);
    ice_api->close(sink);
    ice_table t;
    char why[1024];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    ck_assert_msg(ice_table_refresh(&t, why, sizeof why) == 0, "%s", why);
    good = json_incref(t.meta);
    ice_table_free(&t);
    return m.epoch;
}

/* Publishes good with the current snapshot's KEY (in the snapshot, or in
 * its summary when in_summary) set to VALUE, as the next version. */
static void craft(const char *key, const char *value, int in_summary) {
    ice_table t;
    char why[1024], tmp[4096];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    ck_assert_msg(ice_table_refresh(&t, why, sizeof why) == 0, "%s", why);
    json_t *next = json_deep_copy(good);
    json_t *snap = ice_meta_current_snapshot(next);
    ck_assert_ptr_nonnull(snap);
    json_t *obj = in_summary ? json_object_get(snap, "summary") : snap;
    ck_assert_int_eq(json_object_set_new(obj, key, json_string(value)), 0);
    ck_assert_int_eq(ice_meta_stage(&t, next, tmp, why, sizeof why), 0);
    ck_assert_msg(ice_meta_link(&t, next, tmp, why, sizeof why) == 0, "%s",
                  why);
    ck_assert_int_eq(ice_table_write_hint(&t, why, sizeof why), 0);
    json_decref(next);
    ice_table_free(&t);
}

static const char *good_list(void) {
    return json_string_value(
        json_object_get(ice_meta_current_snapshot(good), "manifest-list"));
}

/* A file beside the table (outside it) with TEXT. */
static void outside_file(const char *name, const void *data, size_t n,
                         char *path, size_t size) {
    snprintf(path, size, "%s/%s", fx.dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static void copy_outside(const char *uri, const char *name, char *path,
                         size_t size) {
    FILE *f = fopen(uri + strlen("file://"), "rb");
    ck_assert_ptr_nonnull(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ck_assert_uint_gt(n, 0);
    outside_file(name, buf, n, path, size);
}

static void expect_outside(tm_status rc, const tm_error *err) {
    ck_assert_msg(rc != TM_OK, "read outside the table accepted");
    ck_assert_msg(strstr(err->message, "outside the table"), "%s: %s",
                  tm_status_name(rc), err->message);
}

static int count_item(void *user, const tm_scan_item *it) {
    (void)it;
    (*(size_t *)user)++;
    return 0;
}

static tm_status scan_p0(void *sink, tm_error *err) {
    size_t n = 0;
    tm_emit_target target = {.fn = count_item, .user = &n};
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return ice_api->scan(sink, "orders", 0, &target, err);
}

static void setup(void) {
    ck_assert_int_eq(ice_fx_init(&fx, ""), 0);
    good = NULL;
}

static void teardown(void) {
    json_decref(good);
    ice_fx_done(&fx, 0);
}

START_TEST(absolute_path_outside_is_refused) {
    int64_t epoch = make_table();
    craft("manifest-list", "file:///etc/passwd", 0);
    void *sink = open_ok();
    tm_error err;
    expect_outside(commit_p0(sink, epoch, 5, 10, &err), &err);
    ck_assert_ptr_nonnull(strstr(err.message, "/etc/passwd"));
    expect_outside(scan_p0(sink, &err), &err);
    ice_api->close(sink);
}
END_TEST

START_TEST(dotdot_outside_is_refused) {
    int64_t epoch = make_table();
    char path[1024], uri[1200];
    /* A real manifest list, beside the table: readable, but not ours. */
    copy_outside(good_list(), "list.avro", path, sizeof path);
    snprintf(uri, sizeof uri, "file://%s/../list.avro", fx.table);
    craft("manifest-list", uri, 0);
    void *sink = open_ok();
    tm_error err;
    expect_outside(commit_p0(sink, epoch, 5, 10, &err), &err);
    ice_api->close(sink);
    /* A dead-letter file named through "..": a valid one, beside it. */
    const char line[] = "{\"topic\":\"orders\",\"partition\":0,\"offset\":99,"
                        "\"reason\":\"rejected\",\"detail\":\"outside\"}\n";
    outside_file("dl.jsonl", line, sizeof line - 1, path, sizeof path);
    craft("tidemark.dead-letters-file", "../dl.jsonl", 1);
    sink = open_ok();
    expect_outside(scan_p0(sink, &err), &err);
    ice_api->close(sink);
    /* Vacuum refuses the table and deletes nothing. */
    ice_table t;
    size_t removed = 0;
    char why[1024];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    ck_assert_int_eq(ice_vacuum(&t, 0, NULL, NULL, &removed, why, sizeof why),
                     -1);
    ck_assert_msg(strstr(why, "outside the table"), "%s", why);
    ck_assert_uint_eq(removed, 0);
    ice_table_free(&t);
    ck_assert_int_eq(access(path, F_OK), 0);
}
END_TEST

/* A manifest (inside the table, written by the plugin's own encoder)
 * whose data file entry names /etc/passwd: scan, compact and vacuum
 * refuse it, reading nothing outside. */
START_TEST(data_file_outside_is_refused) {
    int64_t epoch = make_table();
    ice_table t;
    char why[1024], list[4200];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    ck_assert_msg(ice_table_refresh(&t, why, sizeof why) == 0, "%s", why);
    ice_datafile bad = {.path = "file:///etc/passwd",
                        .records = 1,
                        .size = 4,
                        .snapshot_id = 7,
                        .seq = 9,
                        .file_seq = 9};
    ice_own own = {0};
    int64_t files, rows;
    char *schema = ice_schema_text(t.meta);
    ck_assert_ptr_nonnull(schema);
    ck_assert_msg(ice_write_snapshot_manifests(&t, NULL, 0, &bad, 1, 7, -1, 9,
                                               schema, &own, list, &files,
                                               &rows, why, sizeof why) == 0,
                  "%s", why);
    free(schema);
    ice_own_free(&own);
    ice_table_free(&t);
    craft("manifest-list", list, 0);
    void *sink = open_ok();
    tm_error err;
    expect_outside(scan_p0(sink, &err), &err);
    ck_assert_ptr_nonnull(strstr(err.message, "/etc/passwd"));
    (void)epoch;
    ice_api->close(sink);
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    ice_compact_result res;
    ck_assert_int_eq(ice_compact(&t, 1 << 20, &res, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "outside the table"), "%s", why);
    size_t removed = 0;
    ck_assert_int_eq(ice_vacuum(&t, 0, NULL, NULL, &removed, why, sizeof why),
                     -1);
    ck_assert_msg(strstr(why, "outside the table"), "%s", why);
    ck_assert_uint_eq(removed, 0);
    ice_table_free(&t);
}
END_TEST

/* data/ a symlink to a directory outside: vacuum must not delete there. */
START_TEST(vacuum_deletes_nothing_outside) {
    make_table();
    char data[600], moved[600], victim[700];
    snprintf(data, sizeof data, "%s/data", fx.table);
    snprintf(moved, sizeof moved, "%s/elsewhere", fx.dir);
    ck_assert_int_eq(rename(data, moved), 0);
    ck_assert_int_eq(symlink(moved, data), 0);
    snprintf(victim, sizeof victim, "%s/1-0-victim.parquet", moved);
    FILE *f = fopen(victim, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    struct timespec old[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
    ck_assert_int_eq(utimensat(AT_FDCWD, victim, old, 0), 0);
    ice_table t;
    size_t removed = 0;
    char why[1024];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    int rc = ice_vacuum(&t, 0, NULL, NULL, &removed, why, sizeof why);
    ice_table_free(&t);
    ck_assert_msg(access(victim, F_OK) == 0, "vacuum deleted %s", victim);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(why, "not a directory of the table"), "%s", why);
}
END_TEST

/* A FIFO inside the table, as the manifest list and as the hint: a clear
 * error (or the hint ignored), never a blocked read. This case has a short
 * timeout: a blocked open fails it. */
START_TEST(fifo_never_blocks) {
    int64_t epoch = make_table();
    char fifo[600], uri[700];
    snprintf(fifo, sizeof fifo, "%s/metadata/fifo.avro", fx.table);
    ck_assert_int_eq(mkfifo(fifo, 0644), 0);
    snprintf(uri, sizeof uri, "file://%s", fifo);
    craft("manifest-list", uri, 0);
    void *sink = open_ok();
    tm_error err;
    tm_status rc = commit_p0(sink, epoch, 5, 10, &err);
    ck_assert_msg(rc != TM_OK && strstr(err.message, "not a regular file"),
                  "%s: %s", tm_status_name(rc), err.message);
    ice_api->close(sink);
    /* The hint a FIFO: ignored, the table still opens and commits. */
    craft("manifest-list", good_list(), 0);
    char hint[600];
    snprintf(hint, sizeof hint, "%s/metadata/version-hint.text", fx.table);
    ck_assert_int_eq(unlink(hint), 0);
    ck_assert_int_eq(mkfifo(hint, 0644), 0);
    sink = open_ok();
    rc = commit_p0(sink, epoch, 5, 10, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
    ice_api->close(sink);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("iceberg_lite_confine");
    TCase *tc = tcase_create("confine");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, absolute_path_outside_is_refused);
    tcase_add_test(tc, dotdot_outside_is_refused);
    tcase_add_test(tc, data_file_outside_is_refused);
    tcase_add_test(tc, vacuum_deletes_nothing_outside);
    suite_add_tcase(s, tc);
    TCase *fifo = tcase_create("fifo");
    tcase_set_timeout(fifo, 10);
    tcase_add_checked_fixture(fifo, setup, teardown);
    tcase_add_test(fifo, fifo_never_blocks);
    suite_add_tcase(s, fifo);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
