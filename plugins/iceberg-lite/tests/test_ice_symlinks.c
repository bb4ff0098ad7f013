/* Confinement by descriptor, not by name: a table whose data/ or
 * metadata/ is a symbolic link to a directory outside is not read through
 * it (every component of a path is opened with O_NOFOLLOW), and vacuum
 * deletes through the descriptors of the directories it opened, so a
 * directory swapped for a symlink while it runs loses nothing outside. */
#define _GNU_SOURCE /* symlink, utimensat */

#include <check.h>
#include <fcntl.h>
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

static void setup(void) {
    ck_assert_int_eq(ice_fx_init(&fx, ""), 0);
}

static void teardown(void) {
    ice_fx_done(&fx, 0);
}

static void *open_ok(void) {
    void *sink;
    tm_error err;
    tm_status rc = ice_fx_open(&fx, &sink, &err);
    ck_assert_msg(rc == TM_OK, "open: %s: %s", tm_status_name(rc), err.message);
    return sink;
}

/* A table with rows of partition 0 in data/. */
static void make_table(void) {
    void *sink = open_ok();
    tm_marker m;
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    ice_fx_batch kb;
    ice_fx_batch_init(&kb, "one");
    uint32_t r = ice_fx_range(&kb, 0, 0, 4, m.epoch);
    for (int64_t o = 0; o < 4; o++)
        ice_fx_record(&kb, r, o);
    ice_fx_seal(&kb);
    err = (tm_error){sizeof err, ""};
    ck_assert_int_eq(ice_api->commit(sink, &kb.b, &err), TM_OK);
    ice_fx_batch_free(&kb);
    ice_api->close(sink);
}

/* Moves the table's DIR outside (fx.dir/NAME) and links it back. */
static void move_out(const char *dir, const char *name) {
    char from[600], to[600];
    snprintf(from, sizeof from, "%s/%s", fx.table, dir);
    snprintf(to, sizeof to, "%s/%s", fx.dir, name);
    ck_assert_int_eq(rename(from, to), 0);
    ck_assert_int_eq(symlink(to, from), 0);
}

static int count_row(void *user, const tm_scan_item *it) {
    (*(size_t *)user)++;
    (void)it;
    return 0;
}

START_TEST(scan_refuses_symlinked_data) {
    make_table();
    void *sink = open_ok();
    size_t rows = 0;
    tm_emit_target target = {.fn = count_row, .user = &rows};
    tm_error err = {sizeof err, ""};
    /* The same scan reads the rows while data/ is the table's own. */
    ck_assert_int_eq(ice_api->scan(sink, "orders", 0, &target, &err), TM_OK);
    ck_assert_msg(rows == 4, "inconclusive: %zu rows before the move", rows);
    move_out("data", "elsewhere");
    rows = 0;
    err = (tm_error){sizeof err, ""};
    tm_status rc = ice_api->scan(sink, "orders", 0, &target, &err);
    ck_assert_msg(rc != TM_OK, "scan read %zu rows through data/ -> outside",
                  rows);
    ck_assert_uint_eq(rows, 0);
    ck_assert_msg(strstr(err.message, "symbolic link") &&
                      strstr(err.message, "data"),
                  "%s", err.message);
    ice_api->close(sink);
}
END_TEST

START_TEST(load_refuses_symlinked_metadata) {
    make_table();
    move_out("metadata", "elsewhere-meta");
    ice_table t;
    char why[1024];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    int rc = ice_table_refresh(&t, why, sizeof why);
    ice_table_free(&t);
    ck_assert_msg(rc == -1, "refresh read metadata/ -> outside (rc %d)", rc);
    ck_assert_msg(strstr(why, "symbolic link"), "%s", why);
}
END_TEST

/* Vacuum is deleting orphans from data/ when data/ is swapped for a
 * symlink to a directory outside holding files of the same names: it
 * goes on deleting in the directory it opened, nothing outside. */
static char outside[600];
static int swapped;

static void swap_after_first(void *ctx, const char *path) {
    (void)ctx;
    if (swapped || !strstr(path, "/data/"))
        return;
    swapped = 1;
    char data[600], moved[600];
    snprintf(data, sizeof data, "%s/data", fx.table);
    snprintf(moved, sizeof moved, "%s/data-moved", fx.dir);
    ck_assert_int_eq(rename(data, moved), 0);
    ck_assert_int_eq(symlink(outside, data), 0);
}

static void make_file(const char *dir, const char *name, time_t age) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "PAR1", 4), 4);
    close(fd);
    struct timespec ts[2] = {{time(NULL) - age, 0}, {time(NULL) - age, 0}};
    ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

START_TEST(vacuum_swap_deletes_nothing_outside) {
    make_table();
    char data[600];
    snprintf(data, sizeof data, "%s/data", fx.table);
    snprintf(outside, sizeof outside, "%s/outside", fx.dir);
    ck_assert_int_eq(mkdir(outside, 0755), 0);
    const char *names[] = {"1-0-a.parquet", "1-0-b.parquet", "1-0-c.parquet"};
    for (int i = 0; i < 3; i++) {
        make_file(data, names[i], 7200);
        make_file(outside, names[i], 7200);
    }
    swapped = 0;
    ice_table t;
    size_t removed = 0;
    char why[1024];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    int rc =
        ice_vacuum(&t, 3600, swap_after_first, NULL, &removed, why, sizeof why);
    ice_table_free(&t);
    ck_assert_msg(swapped, "inconclusive: vacuum removed nothing in data/");
    for (int i = 0; i < 3; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s", outside, names[i]);
        ck_assert_msg(access(path, F_OK) == 0, "vacuum deleted %s", path);
    }
    ck_assert_msg(rc == 0, "vacuum: %s", why);
    /* It finished in the directory it had opened. */
    for (int i = 0; i < 3; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/data-moved/%s", fx.dir, names[i]);
        ck_assert_msg(access(path, F_OK) != 0, "%s left", path);
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("iceberg_lite_symlinks");
    TCase *tc = tcase_create("symlinks");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, scan_refuses_symlinked_data);
    tcase_add_test(tc, load_refuses_symlinked_metadata);
    tcase_add_test(tc, vacuum_swap_deletes_nothing_outside);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
