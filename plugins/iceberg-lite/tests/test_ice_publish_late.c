/* The writers' publish bound (docs/iceberg-lite.md, "Vacuum beside
 * writers"): a commit whose files were written more than 240 s before its
 * publish check publishes nothing, and its retry writes the batch again
 * and publishes. The stall is the test one of TIDEMARK_FAULT_STALL_MS
 * (maint.h), so no test waits four minutes; the bound is the documented
 * 240 000 ms written out here, not ICE_PUBLISH_MAX_MS, so that raising the
 * constant towards vacuum's 300 s floor fails this test too. */
#define _XOPEN_SOURCE 700 /* glob, setenv */

#include <check.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "ice_fixture.h"
#include "maint.h"
#include "services/host_services.h"
#include "snapshot_files.h"

/* The documented bound, and stalls just past and well inside it. */
#define BOUND_MS     "240000"
#define STALL_LATE   "240001"
#define STALL_INSIDE "200000"

static ice_fx fx;

static void setup(void) {
    unsetenv(ICE_FAULT_STALL_ENV);
    ck_assert_int_eq(ice_fx_init(&fx, ""), 0);
}

static void teardown(void) {
    unsetenv(ICE_FAULT_STALL_ENV);
    ice_fx_done(&fx, 0);
}

/* The paths glob finds under the table. */
typedef struct names {
    char **p;
    size_t n;
} names;

static void names_of(const char *rel, names *out) {
    char pat[512];
    glob_t g;
    snprintf(pat, sizeof pat, "%s/%s", fx.table, rel);
    out->p = NULL;
    out->n = 0;
    if (glob(pat, 0, NULL, &g) != 0)
        return;
    out->p = calloc(g.gl_pathc, sizeof *out->p);
    ck_assert_ptr_nonnull(out->p);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        out->p[i] = strdup(g.gl_pathv[i]);
        ck_assert_ptr_nonnull(out->p[i]);
    }
    out->n = g.gl_pathc;
    globfree(&g);
}

static int has(const names *s, const char *path) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->p[i], path) == 0)
            return 1;
    return 0;
}

static void names_free(names *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->p[i]);
    free(s->p);
}

/* The data files present at the commit's last fault point before its
 * publish check (after_marker): the attempt's own are among them. */
static names at_marker;
static int reached;

static void record_at_marker(const char *point) {
    if (strcmp(point, TM_FAULT_AFTER_MARKER) != 0)
        return;
    names_free(&at_marker);
    names_of("data/*.parquet", &at_marker);
    reached++;
}

static tm_status commit_range(void *sink, int64_t epoch, int64_t start,
                              int64_t end, tm_error *err) {
    ice_fx_batch kb;
    char id[48];
    snprintf(id, sizeof id, "late-%lld", (long long)start);
    ice_fx_batch_init(&kb, id);
    uint32_t r = ice_fx_range(&kb, 0, start, end, epoch);
    for (int64_t o = start; o < end; o++)
        ice_fx_record(&kb, r, o);
    ice_fx_seal(&kb);
    *err = (tm_error){.struct_size = sizeof *err};
    tm_status rc = ice_api->commit(sink, &kb.b, err);
    ice_fx_batch_free(&kb);
    return rc;
}

/* What our reader sees: the current snapshot id, the table's version and
 * partition 0's marker. */
typedef struct seen {
    int64_t snapshot, version, next_offset;
} seen;

static seen look(void *sink) {
    ice_table t;
    char why[1024];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    ck_assert_msg(ice_table_refresh(&t, why, sizeof why) == 0, "%s", why);
    seen s = {ice_json_int(t.meta, "current-snapshot-id", -1), t.version, -1};
    ice_table_free(&t);
    tm_marker m = {.struct_size = sizeof m, .topic = "orders", .partition = 0};
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_api->read_markers(sink, &m, 1, &err), TM_OK);
    s.next_offset = m.next_offset;
    return s;
}

START_TEST(commit_past_the_bound_publishes_nothing) {
    tm_host_api host = *tm_host_services();
    host.fault = record_at_marker;
    void *sink;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_api->open(&host, &fx.config, &sink, &err), TM_OK);
    tm_marker m;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    ck_assert_int_eq(commit_range(sink, m.epoch, 0, 5, &err), TM_OK);
    seen before = look(sink);
    names data0;
    names_of("data/*.parquet", &data0);

    /* Late: refused with the documented reason, nothing published. */
    setenv(ICE_FAULT_STALL_ENV, STALL_LATE, 1);
    reached = 0;
    tm_status rc = commit_range(sink, m.epoch, 5, 10, &err);
    ck_assert_msg(reached == 1,
                  "inconclusive: the commit reached after_marker %d times",
                  reached);
    ck_assert_msg(at_marker.n == data0.n + 1,
                  "inconclusive: %zu data files at the check, not %zu + 1",
                  at_marker.n, data0.n);
    ck_assert_msg(rc == TM_RETRY, "late commit: %s: %s", tm_status_name(rc),
                  err.message);
    ck_assert_msg(strstr(err.message, "more than the " BOUND_MS
                                      " ms a writer may take to publish "
                                      "them") &&
                      strstr(err.message, "not published"),
                  "%s", err.message);
    /* Set by accident it would refuse every publish: the refusal names it
     * and its value. */
    ck_assert_msg(strstr(err.message, ICE_FAULT_STALL_ENV "=" STALL_LATE),
                  "the refusal does not name " ICE_FAULT_STALL_ENV
                  " and its value: %s",
                  err.message);
    seen after = look(sink);
    ck_assert_int_eq(after.version, before.version);
    ck_assert_int_eq(after.snapshot, before.snapshot);
    ck_assert_int_eq(after.next_offset, 5);
    size_t rows, dls;
    int64_t max;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, &max), 0);
    ck_assert_uint_eq(rows, 5);
    /* The refused attempt's files are gone, not left for a vacuum. */
    names data1;
    names_of("data/*.parquet", &data1);
    ck_assert_uint_eq(data1.n, data0.n);
    names refused = at_marker;
    at_marker = (names){0};

    /* The host's retry: fresh files, published. */
    unsetenv(ICE_FAULT_STALL_ENV);
    rc = commit_range(sink, m.epoch, 5, 10, &err);
    ck_assert_msg(rc == TM_OK, "retry: %s: %s", tm_status_name(rc),
                  err.message);
    seen retried = look(sink);
    ck_assert_int_eq(retried.version, before.version + 1);
    ck_assert_int_ne(retried.snapshot, before.snapshot);
    ck_assert_int_eq(retried.next_offset, 10);
    ice_table t;
    char why[1024];
    ice_datafile *files;
    size_t n;
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    ck_assert_int_eq(ice_table_refresh(&t, why, sizeof why), 0);
    ck_assert_msg(ice_snapshot_datafiles(&t, ice_meta_current_snapshot(t.meta),
                                         &files, &n, why, sizeof why) == 0,
                  "%s", why);
    ck_assert_uint_eq(n, data0.n + 1);
    for (size_t i = 0; i < n; i++) {
        const char *p = ice_uri_path(files[i].path);
        ck_assert_msg(p && (has(&data0, p) || !has(&refused, p)),
                      "the retry published the refused attempt's %s",
                      files[i].path);
    }
    ice_datafiles_free(files, n);
    ice_table_free(&t);
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, &max), 0);
    ck_assert_uint_eq(rows, 10);
    ck_assert_int_eq(max, 9);

    /* A stall well inside the bound publishes: the stall is added to the
     * age, it does not refuse by itself. */
    setenv(ICE_FAULT_STALL_ENV, STALL_INSIDE, 1);
    rc = commit_range(sink, m.epoch, 10, 15, &err);
    ck_assert_msg(rc == TM_OK, "inside the bound: %s: %s", tm_status_name(rc),
                  err.message);
    ck_assert_int_eq(look(sink).next_offset, 15);
    names_free(&refused);
    names_free(&data0);
    names_free(&data1);
    ice_api->close(sink);
}
END_TEST

/* expire (as `tidemark table expire` runs it) checks the same bound. */
START_TEST(expire_past_the_bound_publishes_nothing) {
    void *sink;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_OK);
    tm_marker m;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    for (int64_t o = 0; o < 15; o += 5)
        ck_assert_int_eq(commit_range(sink, m.epoch, o, o + 5, &err), TM_OK);
    seen before = look(sink);
    ice_table t;
    char why[1024];
    size_t removed = 0;
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    setenv(ICE_FAULT_STALL_ENV, STALL_LATE, 1);
    int rc = ice_expire(&t, 1, &removed, why, sizeof why);
    ck_assert_msg(rc == -1, "late expire: %d: %s", rc, why);
    ck_assert_msg(strstr(why, "more than the " BOUND_MS " ms"), "%s", why);
    ck_assert_int_eq(look(sink).version, before.version);
    unsetenv(ICE_FAULT_STALL_ENV);
    rc = ice_expire(&t, 1, &removed, why, sizeof why);
    ck_assert_msg(rc == 0, "expire: %d: %s", rc, why);
    ck_assert_uint_ge(removed, 2);
    ck_assert_int_eq(look(sink).version, before.version + 1);
    ice_table_free(&t);
    ice_api->close(sink);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("iceberg_lite_publish_late");
    TCase *tc = tcase_create("late");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, commit_past_the_bound_publishes_nothing);
    tcase_add_test(tc, expire_past_the_bound_publishes_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
