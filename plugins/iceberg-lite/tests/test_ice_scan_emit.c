/* The emit half of scan (scan_emit.c) on a partition whose offsets are
 * duplicated across two data files (rows of file 0 and file 1 alternate
 * in offset order): a scan that wants values reads each data file once,
 * not once per row (it was quadratic); a scan that wants none (verify's)
 * reads no file's values at all. Complexity is asserted by counting
 * ice_vals_load calls, never by wall time. And a file whose values cannot
 * be read as mapped (INT32 written by pyarrow, not Parquet at all) gives
 * its rows without values, never a failed scan. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "ice_fixture.h"
#include "scan_emit.h"
#include "scan_values.h"
#include "services/host_services.h"
#include "snapshot_files.h"
#include "table_meta.h"

#define N 200 /* rows per data file */

static ice_fx fx;
static ice_datafile *files;
static size_t nfiles;

static void commit_p0(void *sink, int64_t epoch, int64_t start, int64_t end) {
    ice_fx_batch kb;
    char id[32];
    snprintf(id, sizeof id, "e-%lld", (long long)start);
    ice_fx_batch_init(&kb, id);
    uint32_t r = ice_fx_range(&kb, 0, start, end, epoch);
    for (int64_t o = start; o < end; o++)
        ice_fx_record(&kb, r, o);
    ice_fx_seal(&kb);
    tm_error err = {sizeof err, ""};
    tm_status rc = ice_api->commit(sink, &kb.b, &err);
    ice_fx_batch_free(&kb);
    ck_assert_msg(rc == TM_OK, "commit: %s: %s", tm_status_name(rc),
                  err.message);
}

/* Two data files: p0 [0, N) and [N, 2N), each one commit. */
static void setup(void) {
    ck_assert_int_eq(ice_fx_init(&fx, ""), 0);
    void *sink;
    tm_error err;
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_OK);
    tm_marker m;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    commit_p0(sink, m.epoch, 0, N);
    commit_p0(sink, m.epoch, N, 2 * N);
    ice_api->close(sink);
    ice_table t;
    char why[1024];
    ice_mfile *mf = NULL;
    size_t nmf = 0;
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    ck_assert_msg(ice_table_refresh(&t, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(ice_snapshot_manifests(&t, ice_meta_current_snapshot(t.meta),
                                         &mf, &nmf, why, sizeof why) == 0,
                  "%s", why);
    ck_assert_msg(
        ice_manifests_files(&t, mf, nmf, &files, &nfiles, why, sizeof why) == 0,
        "%s", why);
    ice_mfiles_free(mf, nmf);
    ice_table_free(&t);
    ck_assert_uint_eq(nfiles, 2);
    ck_assert_int_eq(files[0].records, N);
    ck_assert_int_eq(files[1].records, N);
}

static void teardown(void) {
    ice_datafiles_free(files, nfiles);
    files = NULL;
    nfiles = 0;
    ice_fx_done(&fx, 0);
}

/* Row i of both files at the same offset i: each offset twice, the files
 * alternating in offset order (what a file's rows duplicated into another
 * by a rewrite look like to scan). */
static ice_scan_item *duplicated(void) {
    ice_scan_item *it = calloc(2 * N, sizeof *it);
    ck_assert_ptr_nonnull(it);
    for (size_t i = 0; i < 2 * N; i++)
        it[i] = (ice_scan_item){.offset = (int64_t)(i / 2),
                                .file = (i % 2) ? 0 : 1, /* not sorted */
                                .row = (int64_t)(i / 2),
                                .kind = TM_ITEM_ROW};
    return it;
}

typedef struct got {
    size_t rows, with_values, wrong;
    int64_t last_offset;
} got;

/* Column 0 ("id") is the offset the row was written at (ice_fixture.c):
 * file 1's row i was written at N + i. */
static int on_item(void *ctx, const tm_scan_item *it) {
    got *g = ctx;
    g->rows++;
    if (it->offset < g->last_offset)
        g->wrong++; /* out of offset order */
    g->last_offset = it->offset;
    if (TM_SCAN_ITEM_HAS_VALUES(it)) {
        g->with_values++;
        int64_t id = TM_CELEM(tm_value, it->values, 0)->v.i;
        if (id != it->offset && id != it->offset + N)
            g->wrong++;
    }
    return 0;
}

static size_t emit(int no_values, got *g) {
    ice_scan_item *items = duplicated();
    tm_emit_target target = {.fn = on_item, .user = g, .no_values = no_values};
    char why[512] = "";
    size_t before = ice_vals_load_count();
    int rc = ice_scan_emit(tm_host_services(), &fx.config, items, 2 * N, files,
                           nfiles, "orders", 0, &target, why, sizeof why);
    size_t loads = ice_vals_load_count() - before;
    free(items);
    ck_assert_msg(rc == 0, "ice_scan_emit: %s", why);
    return loads;
}

START_TEST(dup_offsets_load_each_file_once) {
    got g = {.last_offset = -1};
    size_t loads = emit(0, &g);
    ck_assert_uint_eq(g.rows, 2 * N);
    ck_assert_uint_eq(g.with_values, 2 * N);
    ck_assert_uint_eq(g.wrong, 0);
    ck_assert_msg(loads == nfiles,
                  "%zu data file loads for %zu rows of %zu files: a file "
                  "is read again each time its rows come round",
                  loads, g.rows, nfiles);
}
END_TEST

START_TEST(no_values_loads_no_file) {
    got g = {.last_offset = -1};
    size_t loads = emit(1, &g);
    ck_assert_uint_eq(g.rows, 2 * N);
    ck_assert_uint_eq(g.wrong, 0);
    ck_assert_msg(g.with_values == 0 && loads == 0,
                  "a scan that wants no values: %zu rows with values, %zu "
                  "data file loads",
                  g.with_values, loads);
}
END_TEST

/* Rows 0..4 of one file whose values cannot be read as mapped, wanted:
 * the scan succeeds and gives them without values. */
static void foreign_file(const char *path, const char *what) {
    ice_datafile f = {.path = (char *)path, .records = 5};
    ice_scan_item items[5];
    for (int i = 0; i < 5; i++)
        items[i] = (ice_scan_item){
            .offset = i, .file = 0, .row = i, .kind = TM_ITEM_ROW};
    got g = {.last_offset = -1};
    tm_emit_target target = {.fn = on_item, .user = &g};
    char why[512] = "";
    int rc = ice_scan_emit(tm_host_services(), &fx.config, items, 5, &f, 1,
                           "orders", 0, &target, why, sizeof why);
    ck_assert_msg(rc == 0, "%s: the scan failed: %s", what, why);
    ck_assert_uint_eq(g.rows, 5);
    ck_assert_uint_eq(g.with_values, 0);
}

/* A data file another engine wrote, "id" as INT32 (a physical type the
 * reader does not decode): write_int32_file.py (pyarrow) made it. */
START_TEST(int32_column_rows_without_values) {
    const char *path = getenv("TM_ICE_INT32_FILE");
    ck_assert_msg(path && *path, "TM_ICE_INT32_FILE is not set: inconclusive");
    ck_assert_msg(access(path, R_OK) == 0, "%s: inconclusive: not written",
                  path);
    foreign_file(path, "an INT32 column");
    /* The file itself loads (its other columns are read); only the INT32
     * column is left out. */
    ice_vals v;
    char why[512] = "";
    ck_assert_msg(ice_vals_load(&v, path, &fx.config, why, sizeof why) == 0,
                  "ice_vals_load: %s", why);
    ck_assert_int_eq(v.nrows, 5);
    ice_vals_free(&v);
}
END_TEST

/* A data file that is not Parquet at all: its rows still come back. */
START_TEST(unreadable_file_rows_without_values) {
    char path[400];
    snprintf(path, sizeof path, "%s/not-parquet.parquet", fx.dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("this is no Parquet file\n", f);
    ck_assert_int_eq(fclose(f), 0);
    foreign_file(path, "a file that is not Parquet");
}
END_TEST

/* A data file listed by the snapshot but gone when its values are read
 * (removed under the scan): an I/O error, not a file this reader cannot
 * decode. The scan fails; its rows never come back without values. */
START_TEST(vanished_file_fails_the_scan) {
    const char *path = ice_uri_path(files[1].path);
    ck_assert_ptr_nonnull(path);
    ck_assert_msg(unlink(path) == 0, "%s: inconclusive: not removed", path);
    ice_scan_item *items = duplicated();
    got g = {.last_offset = -1};
    tm_emit_target target = {.fn = on_item, .user = &g};
    char why[512] = "";
    int rc = ice_scan_emit(tm_host_services(), &fx.config, items, 2 * N, files,
                           nfiles, "orders", 0, &target, why, sizeof why);
    free(items);
    ck_assert_msg(rc != 0,
                  "a vanished data file: the scan succeeded, %zu rows, %zu "
                  "with values",
                  g.rows, g.with_values);
    ck_assert_msg(strstr(why, "missing") && strstr(why, path), "why: %s", why);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("ice_scan_emit");
    TCase *tc = tcase_create("emit");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, dup_offsets_load_each_file_once);
    tcase_add_test(tc, no_values_loads_no_file);
    tcase_add_test(tc, int32_column_rows_without_values);
    tcase_add_test(tc, unreadable_file_rows_without_values);
    tcase_add_test(tc, vanished_file_fails_the_scan);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
