/* The writers' 240 s publish bound on the clock vacuum uses (docs/
 * iceberg-lite.md, "Vacuum beside writers"). A writer suspended between
 * writing its files and its publish check (a laptop's suspend, a paused
 * VM) finds on its monotonic clock that no time passed, while vacuum,
 * judging the files by their mtime on the wall clock, finds them older
 * than its 300 s floor and deletes them as orphans. Such a writer must
 * publish nothing. The suspension is staged without waiting: at the
 * writer's fault point before its check, the files it wrote so far get
 * mtimes SUSPEND_S in the past (what the suspension looks like to
 * vacuum), and a vacuum of the documented floor runs in the window
 * between the check and the link (this executable's link() stands in for
 * libc's, for the dlopen'ed plugin too: it exports it), as another host's
 * vacuum may. A writer that publishes there publishes a version naming
 * deleted files. The rows are judged by pyiceberg (not our code). */
#define _GNU_SOURCE /* RTLD_NEXT */

#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "dead_letters.h"
#include "ice_fixture.h"
#include "maint.h"
#include "services/host_services.h"
#include "snapshot_files.h"

/* Written out, not maint.h's constants: the documented bound and floor. */
#define BOUND_TEXT   "more than the 240000 ms a writer may take to publish them"
#define VACUUM_FLOOR 300
/* How long the writer was suspended: past the floor. */
#define SUSPEND_S (VACUUM_FLOOR + 10)

static ice_fx fx;

/* ---- the files under the table ----------------------------------------- */

typedef struct names {
    char **p;
    size_t n;
} names;

static void names_free(names *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->p[i]);
    free(s->p);
    *s = (names){0};
}

/* Every file under data/, metadata/ and dead_letters/. */
static void list_files(names *out) {
    static const char *const dirs[] = {"data", "metadata", "dead_letters"};
    glob_t g;
    int flags = 0, found = 0;
    for (size_t d = 0; d < 3; d++) {
        char pat[512];
        snprintf(pat, sizeof pat, "%s/%s/*", fx.table, dirs[d]);
        int rc = glob(pat, flags, NULL, &g);
        ck_assert_msg(rc == 0 || rc == GLOB_NOMATCH, "glob %s: %d", pat, rc);
        found |= rc == 0;
        if (rc == 0 || flags)
            flags = GLOB_APPEND;
    }
    *out = (names){0};
    if (!found)
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

/* ---- the suspension ------------------------------------------------------ */

static names before;       /* the files before the writer started */
static const char *armed;  /* the fault point that backdates, or NULL */
static int reached;        /* times it did */
static size_t moved_data;  /* data files it backdated */
static size_t moved_dl;    /* dead-letter files and indexes */
static size_t moved_total; /* every file */
static int vacuum_at_link; /* the next version's link() runs vacuum first */
static int vacuum_ran;
static size_t vacuum_removed;
static char vacuum_why[1024];

static void arm(const char *point) {
    names_free(&before);
    list_files(&before);
    armed = point;
    reached = 0;
    moved_data = moved_dl = moved_total = 0;
    vacuum_at_link = 1;
    vacuum_ran = 0;
    vacuum_removed = 0;
    vacuum_why[0] = '\0';
}

static void disarm(void) {
    armed = NULL;
    vacuum_at_link = 0;
}

/* The files the writer wrote since arm(), but not a staged metadata file
 * (tmp-*: staged after the suspension ended, it is fresh), get mtimes
 * SUSPEND_S ago, and are checked to have them. */
static void backdate(void) {
    names now;
    list_files(&now);
    struct timespec t;
    ck_assert_int_eq(clock_gettime(CLOCK_REALTIME, &t), 0);
    t.tv_sec -= SUSPEND_S;
    struct timespec times[2] = {t, t};
    for (size_t i = 0; i < now.n; i++) {
        const char *p = now.p[i], *base = strrchr(p, '/') + 1;
        if (has(&before, p) || strncmp(base, "tmp-", 4) == 0)
            continue;
        ck_assert_msg(utimensat(AT_FDCWD, p, times, 0) == 0,
                      "inconclusive: utimensat %s: %s", p, strerror(errno));
        struct stat st;
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_msg(st.st_mtim.tv_sec == t.tv_sec,
                      "inconclusive: %s kept its mtime", p);
        moved_total++;
        moved_data += strstr(p, "/data/") != NULL;
        moved_dl += strstr(p, "/dead_letters/") != NULL;
    }
    names_free(&now);
    reached++;
}

static void sink_fault(const char *point) {
    if (armed && strcmp(point, armed) == 0)
        backdate();
}

/* Vacuum as `tidemark table vacuum --grace-seconds 300` runs it. */
static void run_vacuum(void) {
    ice_table t;
    if (ice_table_init(&t, fx.table, 0, 1, vacuum_why, sizeof vacuum_why) != 0)
        return;
    if (ice_vacuum(&t, VACUUM_FLOOR, NULL, NULL, &vacuum_removed, vacuum_why,
                   sizeof vacuum_why) == 0)
        vacuum_ran = 1;
    ice_table_free(&t);
}

static int is_version_name(const char *path) {
    size_t n = strlen(path);
    return strstr(path, "/v") && n > 14 &&
           strcmp(path + n - 14, ".metadata.json") == 0;
}

int link(const char *from, const char *to) {
    static int (*real)(const char *, const char *);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "link");
    if (!real)
        _exit(97);
    if (vacuum_at_link && is_version_name(to)) {
        vacuum_at_link = 0;
        run_vacuum();
    }
    return real(from, to);
}

/* ---- the table as readers find it ---------------------------------------- */

static int file_missing(const char *uri, char *what, size_t what_size) {
    const char *p = ice_uri_path(uri);
    struct stat st;
    if (!p)
        p = uri;
    if (stat(p, &st) == 0)
        return 0;
    snprintf(what, what_size, "%s (%s)", p, strerror(errno));
    return 1;
}

typedef struct dl_walk {
    const char *root;
    char *what;
    size_t what_size;
    int missing;
} dl_walk;

static int dl_file(void *ctx, const char *rel) {
    dl_walk *w = ctx;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", w->root, rel);
    w->missing |= file_missing(path, w->what, w->what_size);
    return w->missing;
}

/* 1 when the newest version names a file that is not there (into what):
 * its manifest list, manifests, data files or dead-letter files and index;
 * 0 when all are. */
static int names_missing(int64_t *version, char *what, size_t what_size) {
    ice_table t;
    char why[1024];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    ck_assert_msg(ice_table_refresh(&t, why, sizeof why) == 0, "%s", why);
    *version = t.version;
    json_t *cur = ice_meta_current_snapshot(t.meta);
    ck_assert_ptr_nonnull(cur);
    int missing =
        file_missing(json_string_value(json_object_get(cur, "manifest-list")),
                     what, what_size);
    ice_mfile *mf = NULL;
    size_t nmf = 0;
    if (!missing &&
        ice_snapshot_manifests(&t, cur, &mf, &nmf, why, sizeof why) != 0) {
        snprintf(what, what_size, "%s", why);
        missing = 1;
    }
    for (size_t i = 0; !missing && i < nmf; i++)
        missing = file_missing(mf[i].path, what, what_size);
    ice_mfiles_free(mf, nmf);
    ice_datafile *files = NULL;
    size_t n = 0;
    if (!missing &&
        ice_snapshot_datafiles(&t, cur, &files, &n, why, sizeof why) != 0) {
        snprintf(what, what_size, "%s", why);
        missing = 1;
    }
    for (size_t i = 0; !missing && i < n; i++)
        missing = file_missing(files[i].path, what, what_size);
    ice_datafiles_free(files, n);
    dl_walk w = {t.root, what, what_size, 0};
    const char *index = json_string_value(json_object_get(
        json_object_get(t.meta, "properties"), ICE_DL_INDEX_KEY));
    if (!missing && index)
        missing = dl_file(&w, index);
    if (!missing &&
        ice_dl_files(t.root, t.meta, dl_file, &w, why, sizeof why) != 0) {
        if (!w.missing)
            snprintf(what, what_size, "%s", why);
        missing = 1;
    }
    ice_table_free(&t);
    return missing;
}

/* No data loss: every file the newest version names is there. */
static int64_t assert_whole(const char *after) {
    int64_t version;
    char what[4600];
    if (names_missing(&version, what, sizeof what))
        ck_abort_msg("DATA LOSS after %s: v%lld names %s, which vacuum "
                     "deleted before the link",
                     after, (long long)version, what);
    return version;
}

/* pyiceberg's reading of the newest version: rows, distinct offsets and
 * their sum. */
static void judge(long long rows, long long sum) {
    const char *py = getenv("ICE_JUDGE_PYTHON");
    ck_assert_msg(py && *py, "ICE_JUDGE_PYTHON (the venv's python) not set");
    char cmd[8192];
    snprintf(
        cmd, sizeof cmd,
        "'%s' -c '\n"
        "import glob, re, sys\n"
        "from pyiceberg.table import StaticTable\n"
        "meta = max(glob.glob(sys.argv[1] + \"/metadata/v*.metadata.json\"),\n"
        "           key=lambda p: "
        "int(re.search(r\"/v(\\d+)\\.metadata\\.json$\","
        " p).group(1)))\n"
        "o = StaticTable.from_metadata(meta).scan().to_arrow()"
        ".column(\"_tm_offset\").to_pylist()\n"
        "print(len(o), len(set(o)), sum(o))\n"
        "' '%s' 2>&1",
        py, fx.table);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    char out[4096] = "";
    size_t len = fread(out, 1, sizeof out - 1, f);
    out[len] = '\0';
    int st = pclose(f);
    long long n = -1, distinct = -1, s = -1;
    ck_assert_msg(st == 0 &&
                      sscanf(out, "%lld %lld %lld", &n, &distinct, &s) == 3,
                  "pyiceberg failed (status %d): %s", st, out);
    ck_assert_msg(n == rows && distinct == rows && s == sum,
                  "pyiceberg reads %lld rows (%lld distinct offsets, sum "
                  "%lld), not %lld exactly once (sum %lld)",
                  n, distinct, s, rows, sum);
}

/* ---- the writers ----------------------------------------------------------
 */

static void setup(void) {
    unsetenv(ICE_FAULT_STALL_ENV);
    disarm();
    ck_assert_int_eq(ice_fx_init(&fx, ""), 0);
}

static void teardown(void) {
    disarm();
    names_free(&before);
    ice_fx_done(&fx, 0);
}

/* Commits [start, end) of partition 0; with dls, offsets % 5 == 4 are
 * dead letters. */
static tm_status commit_range(void *sink, int64_t epoch, int64_t start,
                              int64_t end, int dls, tm_error *err) {
    ice_fx_batch kb;
    char id[48];
    snprintf(id, sizeof id, "clock-%lld", (long long)start);
    ice_fx_batch_init(&kb, id);
    uint32_t r = ice_fx_range(&kb, 0, start, end, epoch);
    for (int64_t o = start; o < end; o++) {
        if (dls && o % 5 == 4)
            ice_fx_dead_letter(&kb, r, o);
        else
            ice_fx_record(&kb, r, o);
    }
    ice_fx_seal(&kb);
    *err = (tm_error){.struct_size = sizeof *err};
    tm_status rc = ice_api->commit(sink, &kb.b, err);
    ice_fx_batch_free(&kb);
    return rc;
}

static int64_t next_offset(void *sink) {
    tm_marker m = {.struct_size = sizeof m, .topic = "orders", .partition = 0};
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_api->read_markers(sink, &m, 1, &err), TM_OK);
    return m.next_offset;
}

static void *open_sink(tm_host_api *host, int64_t *epoch) {
    *host = *tm_host_services();
    host->fault = sink_fault;
    void *sink;
    tm_error err = {sizeof err, ""};
    ck_assert_msg(ice_api->open(host, &fx.config, &sink, &err) == TM_OK, "%s",
                  err.message);
    tm_marker m;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    *epoch = m.epoch;
    return sink;
}

/* The sink's commit, suspended after writing its data file and manifests
 * (after_effects): refused, nothing published; the host's retry lands the
 * batch exactly once. */
START_TEST(commit_suspended_past_the_floor_publishes_nothing) {
    tm_host_api host;
    int64_t epoch;
    void *sink = open_sink(&host, &epoch);
    tm_error err;
    ck_assert_int_eq(commit_range(sink, epoch, 0, 5, 0, &err), TM_OK);
    int64_t v0 = assert_whole("the first commit");

    arm(TM_FAULT_AFTER_EFFECTS);
    tm_status rc = commit_range(sink, epoch, 5, 10, 0, &err);
    disarm();
    ck_assert_msg(reached == 1 && moved_data == 1 && moved_total >= 3,
                  "inconclusive: after_effects reached %d times, %zu data "
                  "files of %zu files backdated (1 of a data file and two "
                  "manifests expected)",
                  reached, moved_data, moved_total);
    assert_whole("the suspended commit");
    ck_assert_msg(rc == TM_RETRY, "suspended commit: %s: %s",
                  tm_status_name(rc), err.message);
    ck_assert_msg(strstr(err.message, BOUND_TEXT) &&
                      strstr(err.message, "not published"),
                  "%s", err.message);
    ck_assert_int_eq(assert_whole("the refusal"), v0);
    ck_assert_int_eq(next_offset(sink), 5);

    /* The host's retry, not suspended: published once. */
    rc = commit_range(sink, epoch, 5, 10, 0, &err);
    ck_assert_msg(rc == TM_OK, "retry: %s: %s", tm_status_name(rc),
                  err.message);
    ck_assert_int_eq(assert_whole("the retry"), v0 + 1);
    ck_assert_int_eq(next_offset(sink), 10);
    judge(10, 45);
    ice_api->close(sink);
}
END_TEST

static ice_owner_hooks maint_hooks = {.fault = sink_fault};

/* Commits three batches of five (with dls: three dead letters among them)
 * and opens the table as `tidemark table` does, with the suspension's
 * hook at the maintenance commit's staged point. */
static void three_batches(int dls, ice_table *t) {
    tm_host_api host;
    int64_t epoch;
    void *sink = open_sink(&host, &epoch);
    tm_error err;
    for (int64_t o = 0; o < 15; o += 5)
        ck_assert_int_eq(commit_range(sink, epoch, o, o + 5, dls, &err), TM_OK);
    ice_api->close(sink);
    char why[1024];
    ck_assert_int_eq(ice_table_init(t, fx.table, 0, 1, why, sizeof why), 0);
    t->hooks = &maint_hooks;
}

/* A compaction suspended after writing its new file. */
START_TEST(compaction_suspended_past_the_floor_publishes_nothing) {
    ice_table t;
    three_batches(0, &t);
    int64_t v0 = assert_whole("the batches");
    ice_compact_result res;
    char why[4600];
    arm(ICE_FAULT_MAINT_STAGED);
    int rc = ice_compact(&t, 1 << 20, &res, why, sizeof why);
    disarm();
    ck_assert_msg(reached == 1 && moved_data == 1,
                  "inconclusive: maint_staged reached %d times, %zu data "
                  "files backdated (the compacted file expected)",
                  reached, moved_data);
    assert_whole("the suspended compaction");
    ck_assert_msg(rc == -1, "suspended compaction: %d: %s", rc, why);
    ck_assert_msg(strstr(why, BOUND_TEXT) && strstr(why, "not published"), "%s",
                  why);
    ck_assert_int_eq(assert_whole("the refusal"), v0);

    rc = ice_compact(&t, 1 << 20, &res, why, sizeof why);
    ck_assert_msg(rc == 0, "compaction again: %d: %s", rc, why);
    ck_assert_uint_eq(res.files_in, 3);
    ck_assert_int_eq(assert_whole("the compaction again"), v0 + 1);
    judge(15, 105);
    ice_table_free(&t);
}
END_TEST

/* An expiry suspended after writing its dead-letter index (the dropped
 * snapshots' dead-letter files move into it). */
START_TEST(expiry_suspended_past_the_floor_publishes_nothing) {
    ice_table t;
    three_batches(1, &t);
    int64_t v0 = assert_whole("the batches");
    size_t removed;
    char why[4600];
    arm(ICE_FAULT_MAINT_STAGED);
    int rc = ice_expire(&t, 1, &removed, why, sizeof why);
    disarm();
    ck_assert_msg(reached == 1 && moved_dl == 1,
                  "inconclusive: maint_staged reached %d times, %zu "
                  "dead-letter files backdated (the new index expected)",
                  reached, moved_dl);
    assert_whole("the suspended expiry");
    ck_assert_msg(rc == -1, "suspended expiry: %d: %s", rc, why);
    ck_assert_msg(strstr(why, BOUND_TEXT) && strstr(why, "not published"), "%s",
                  why);
    ck_assert_int_eq(assert_whole("the refusal"), v0);

    rc = ice_expire(&t, 1, &removed, why, sizeof why);
    ck_assert_msg(rc == 0, "expiry again: %d: %s", rc, why);
    ck_assert_uint_eq(removed, 2);
    ck_assert_int_eq(assert_whole("the expiry again"), v0 + 1);
    /* 12 rows (offsets but 4, 9, 14), each once. */
    judge(12, 105 - 4 - 9 - 14);
    ice_table_free(&t);
    tm_host_api host;
    int64_t epoch;
    void *sink = open_sink(&host, &epoch);
    size_t rows, dls;
    int64_t max;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, &max), 0);
    ck_assert_uint_eq(rows, 12);
    ck_assert_uint_eq(dls, 3);
    ice_api->close(sink);
}
END_TEST

/* ---- the judgment alone, on real files ------------------------------------
 */

/* A new file under the test's directory whose mtime is SHIFT_S from now. */
static void file_at(const char *name, long shift_s, char *path, size_t size) {
    snprintf(path, size, "%s/%s", fx.dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fclose(f), 0);
    struct timespec t;
    ck_assert_int_eq(clock_gettime(CLOCK_REALTIME, &t), 0);
    t.tv_sec += shift_s;
    struct timespec times[2] = {t, t};
    ck_assert_int_eq(utimensat(AT_FDCWD, path, times, 0), 0);
}

/* ice_publish_check of a fresh file and the one at SHIFT_S, the writer
 * having begun ELAPSED_MS ago on its boot clock. */
static int check_at(long shift_s, int64_t elapsed_ms, int64_t max_ms, char *why,
                    size_t why_size) {
    char fresh[512], moved[512];
    file_at("fresh", 0, fresh, sizeof fresh);
    file_at("moved", shift_s, moved, sizeof moved);
    ice_pub_files f = {.more = {fresh, moved}};
    why[0] = '\0';
    return ice_publish_check(&f, ice_boot_ms() - elapsed_ms, max_ms, why,
                             why_size);
}

START_TEST(judged_by_the_oldest_mtime_on_the_wall_clock) {
    char why[8192];
    ck_assert_msg(check_at(0, 0, 240000, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(check_at(-200, 0, 240000, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(check_at(-241, 0, 240000, why, sizeof why), 2);
    ck_assert_msg(strstr(why, BOUND_TEXT) && strstr(why, "not published") &&
                      strstr(why, "by the mtime of ") && strstr(why, "/moved"),
                  "%s", why);
    /* Without a bound (a table no vacuum runs beside): presence only. */
    ck_assert_msg(check_at(-100000, 0, 0, why, sizeof why) == 0, "%s", why);
}
END_TEST

START_TEST(judged_by_the_boot_clock_too) {
    char why[8192];
    ck_assert_msg(check_at(0, 200000, 240000, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(check_at(0, 241000, 240000, why, sizeof why), 2);
    ck_assert_msg(strstr(why, BOUND_TEXT) && strstr(why, "boot clock"), "%s",
                  why);
    ck_assert_int_eq(
        ice_publish_in_time(ice_boot_ms() - 241000, 240000, why, sizeof why),
        1);
    ck_assert_int_eq(
        ice_publish_in_time(ice_boot_ms() - 200000, 240000, why, sizeof why),
        0);
}
END_TEST

/* A mtime in the future (a file server's clock ahead of the writer's) is
 * no age by the mtime: only the boot clock's counts. Counting how far ahead
 * it is as age refused every commit past a skew of the bound, for ever. */
START_TEST(a_future_mtime_is_no_age) {
    char why[8192];
    ck_assert_msg(check_at(241, 0, 240000, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(check_at(100, 150000, 240000, why, sizeof why) == 0, "%s",
                  why);
    /* The boot clock still judges. */
    ck_assert_int_eq(check_at(241, 241000, 240000, why, sizeof why), 2);
    ck_assert_msg(strstr(why, "boot clock"), "%s", why);
    /* Decades ahead: no wrap of the ms arithmetic. */
    ck_assert_msg(check_at(INT32_MAX, 0, 240000, why, sizeof why) == 0, "%s",
                  why);
}
END_TEST

START_TEST(a_file_gone_is_told_apart) {
    char why[8192], path[512];
    file_at("gone", 0, path, sizeof path);
    ck_assert_int_eq(unlink(path), 0);
    ice_pub_files f = {.more = {path}};
    ck_assert_int_eq(
        ice_publish_check(&f, ice_boot_ms(), 240000, why, sizeof why), 1);
    ck_assert_msg(strstr(why, "was deleted before the version naming it"), "%s",
                  why);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("iceberg_lite_publish_clock");
    TCase *tc = tcase_create("suspended");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, commit_suspended_past_the_floor_publishes_nothing);
    tcase_add_test(tc, compaction_suspended_past_the_floor_publishes_nothing);
    tcase_add_test(tc, expiry_suspended_past_the_floor_publishes_nothing);
    suite_add_tcase(s, tc);
    TCase *tj = tcase_create("judgment");
    tcase_add_checked_fixture(tj, setup, teardown);
    tcase_add_test(tj, judged_by_the_oldest_mtime_on_the_wall_clock);
    tcase_add_test(tj, judged_by_the_boot_clock_too);
    tcase_add_test(tj, a_future_mtime_is_no_age);
    tcase_add_test(tj, a_file_gone_is_told_apart);
    suite_add_tcase(s, tj);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
