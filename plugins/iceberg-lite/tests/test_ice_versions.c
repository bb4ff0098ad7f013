/* Metadata version numbers: a number vacuum freed is never taken again
 * nor read as a version, even when a writer dies between its link() and
 * its check (the link() of this executable stands in for libc's, for the
 * plugin too: the executable exports it); and only canonical, bounded
 * v<N>.metadata.json names are versions. */
#define _GNU_SOURCE /* RTLD_NEXT */

#include <check.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <glob.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "ice_fixture.h"
#include "maint.h"
#include "snapshot_files.h"

static ice_fx fx;

/* ---- the link() seen by the sink -------------------------------------- */

/* When set, the next link() to a v<N>.metadata.json first runs
 * before_link (once), then links, then, if the link succeeded, runs
 * after_link (a writer stalled between its link and anything after it)
 * or the process dies on the spot (exit status 9: a writer killed
 * there). */
static void (*before_link)(void);
static void (*after_link)(void);
static int die_after_link, linked_after;

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
    if (!is_version_name(to) ||
        (!before_link && !after_link && !die_after_link))
        return real(from, to);
    void (*run)(void) = before_link, (*then)(void) = after_link;
    int die = die_after_link;
    before_link = after_link = NULL;
    die_after_link = 0;
    if (run)
        run();
    int rc = real(from, to);
    if (rc == 0 && die)
        _exit(9);
    if (rc == 0 && then) {
        linked_after = 1;
        then();
    }
    return rc;
}

/* ---- helpers ------------------------------------------------------------ */

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

static tm_marker claim_one(void *sink, int32_t p) {
    tm_marker m = {.struct_size = sizeof m,
                   .topic = "orders",
                   .partition = p,
                   .next_offset = 0};
    tm_error err = {sizeof err, ""};
    tm_status rc = ice_api->claim(sink, &m, 1, 0, &err);
    ck_assert_msg(rc == TM_OK, "claim p%d: %s", (int)p, err.message);
    return m;
}

static void read1(void *sink, int32_t p, tm_marker *m) {
    tm_error err = {sizeof err, ""};
    *m = (tm_marker){
        .struct_size = sizeof *m, .topic = "orders", .partition = p};
    ck_assert_int_eq(ice_api->read_markers(sink, m, 1, &err), TM_OK);
}

/* Commits [start, end) of partition p (dead letters at offsets % 5 == 4). */
static tm_status commit_range(void *sink, int32_t p, int64_t epoch,
                              int64_t start, int64_t end, tm_error *err) {
    ice_fx_batch kb;
    char id[48];
    snprintf(id, sizeof id, "b-%d-%lld", (int)p, (long long)start);
    ice_fx_batch_init(&kb, id);
    uint32_t r = ice_fx_range(&kb, p, start, end, epoch);
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

/* The highest canonical v<N>.metadata.json on disk. */
static int64_t newest_version(void) {
    char pat[512];
    glob_t g;
    int64_t best = 0;
    snprintf(pat, sizeof pat, "%s/metadata/v[1-9]*.metadata.json", fx.table);
    if (glob(pat, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            const char *name = strrchr(g.gl_pathv[i], '/') + 1;
            char *end;
            long long v = strtoll(name + 1, &end, 10);
            if (strcmp(end, ".metadata.json") == 0 && v < 1000000)
                best = v > best ? v : best;
        }
        globfree(&g);
    }
    return best;
}

static int version_on_disk(int64_t v) {
    char path[600];
    snprintf(path, sizeof path, "%s/metadata/v%lld.metadata.json", fx.table,
             (long long)v);
    return access(path, F_OK) == 0;
}

static void drop_hint(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/metadata/version-hint.text", fx.table);
    ck_assert(unlink(path) == 0 || access(path, F_OK) != 0);
}

/* Every file of the table (the temp files of a commit in flight too) two
 * hours old: only references keep them from vacuum. */
static void age_everything(void) {
    const char *dirs[] = {"data/*", "metadata/*", "dead_letters/*"};
    for (int k = 0; k < 3; k++) {
        char pat[512];
        glob_t g;
        snprintf(pat, sizeof pat, "%s/%s", fx.table, dirs[k]);
        if (glob(pat, 0, NULL, &g) != 0)
            continue;
        for (size_t i = 0; i < g.gl_pathc; i++) {
            struct timespec ts[2] = {{time(NULL) - 7200, 0},
                                     {time(NULL) - 7200, 0}};
            ck_assert_int_eq(utimensat(AT_FDCWD, g.gl_pathv[i], ts, 0), 0);
        }
        globfree(&g);
    }
}

static void table_open(ice_table *t) {
    char why[1024];
    ck_assert_int_eq(ice_table_init(t, fx.table, 0, 1, why, sizeof why), 0);
    int rc = ice_table_refresh(t, why, sizeof why);
    ck_assert_msg(rc == 0, "refresh: %s", why);
}

static size_t vacuum(int64_t grace) {
    ice_table t;
    size_t removed;
    char why[1024];
    table_open(&t);
    int rc = ice_vacuum(&t, grace, NULL, NULL, &removed, why, sizeof why);
    ck_assert_msg(rc == 0, "vacuum: %s", why);
    ice_table_free(&t);
    return removed;
}

/* Rows of the current snapshot (as a fresh reader loads it), counted per
 * (partition, offset). */
#define NPART  3
#define MAXOFF 200
typedef struct seen {
    int count[NPART][MAXOFF];
    int bad;
} seen;

static int on_row(void *ctx, const pq_cell *cells, size_t n) {
    seen *s = ctx;
    int64_t p = cells[n - 2].i, o = cells[n - 1].i;
    if (p < 0 || p >= NPART || o < 0 || o >= MAXOFF || cells[0].i != o) {
        s->bad = 1;
        return 0;
    }
    s->count[p][o]++;
    return 0;
}

/* Every acknowledged offset below end[p] that is not a dead letter is in
 * the newest version exactly once, nothing else is, and every data file
 * it names is on disk. */
static void assert_rows_once(const int64_t end[NPART]) {
    ice_table t;
    ice_datafile *files;
    size_t n;
    char why[1024];
    static seen s;
    memset(&s, 0, sizeof s);
    table_open(&t);
    ck_assert_msg(t.version == newest_version(),
                  "a fresh reader loaded v%lld, the newest is v%lld",
                  (long long)t.version, (long long)newest_version());
    ck_assert_int_eq(ice_snapshot_datafiles(&t,
                                            ice_meta_current_snapshot(t.meta),
                                            &files, &n, why, sizeof why),
                     0);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(
            ice_file_rows(files[i].path, on_row, &s, why, sizeof why) == 0,
            "main-line data file unreadable: %s", why);
    ice_datafiles_free(files, n);
    ice_table_free(&t);
    ck_assert(!s.bad);
    for (int p = 0; p < NPART; p++)
        for (int64_t o = 0; o < MAXOFF; o++)
            ck_assert_msg(s.count[p][o] == (o < end[p] && o % 5 != 4),
                          "p%d offset %lld seen %d times", p, (long long)o,
                          s.count[p][o]);
}

/* ---- F1: a writer killed between its link and its check ---------------- */

/* Run inside writer a's link(), after everything a checks before it:
 * writer b advances the table 14 versions (past the metadata log), every
 * file is aged, vacuum deletes the old versions, a's base and the number
 * a is about to take included. */
static void *b_sink;
static tm_marker b_marker;

static void advance_and_vacuum(void) {
    tm_error err;
    for (int i = 0; i < 14; i++) {
        tm_status rc =
            commit_range(b_sink, 1, b_marker.epoch, 5 * i, 5 * i + 5, &err);
        if (rc != TM_OK) {
            fprintf(stderr, "b: %s: %s\n", tm_status_name(rc), err.message);
            _exit(3);
        }
    }
    age_everything();
    /* a's staged metadata stays young: a commit in flight. */
    char pat[600];
    glob_t g;
    snprintf(pat, sizeof pat, "%s/metadata/tmp-*.metadata.json.part", fx.table);
    if (glob(pat, 0, NULL, &g) != 0)
        _exit(4);
    for (size_t i = 0; i < g.gl_pathc; i++)
        if (utimensat(AT_FDCWD, g.gl_pathv[i], NULL, 0) != 0)
            _exit(5);
    globfree(&g);
    vacuum(3600);
}

START_TEST(killed_after_link_reuses_no_version) {
    void *a = open_ok(), *c = open_ok();
    b_sink = open_ok();
    tm_marker ma = claim_one(a, 0), mc = claim_one(c, 2);
    b_marker = claim_one(b_sink, 1);
    tm_error err;
    ck_assert_int_eq(commit_range(a, 0, ma.epoch, 0, 5, &err), TM_OK);
    ck_assert_int_eq(commit_range(c, 2, mc.epoch, 0, 5, &err), TM_OK);
    tm_marker got;
    read1(a, 0, &got); /* a and c both cache the same version N */
    int64_t base = newest_version();

    /* Writer a commits and is killed right after its link(). */
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        before_link = advance_and_vacuum;
        die_after_link = 1;
        tm_status rc = commit_range(a, 0, ma.epoch, 5, 10, &err);
        fprintf(stderr, "a: not killed at a link: %s: %s\n", tm_status_name(rc),
                err.message);
        _exit(0);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    /* The fault happened where intended: a linked a freed number below
     * the newest version and died there. */
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 9,
                  "inconclusive: writer a was not killed after a link "
                  "(status %d)",
                  st);
    int64_t main_newest = newest_version();
    ck_assert_msg(main_newest >= base + 14 && !version_on_disk(base),
                  "inconclusive: v%lld not vacuumed (newest v%lld)",
                  (long long)base, (long long)main_newest);

    /* The hint is best effort: it may be lost, then only the floor and
     * the directory tell the newest version. Writer c, idle on v<N>,
     * commits: it must land on top of b's line. */
    drop_hint();
    tm_status rc = commit_range(c, 2, mc.epoch, 5, 10, &err);
    ck_assert_msg(rc == TM_OK, "c: %s: %s", tm_status_name(rc), err.message);
    ck_assert_int_eq(newest_version(), main_newest + 1);
    int64_t end[NPART] = {5, 70, 10};
    assert_rows_once(end);

    /* The host restarts a and resends its batch; b (its cache stale, in
     * this process b never saw its own 14 commits) commits again. */
    ice_api->close(a);
    a = open_ok();
    rc = commit_range(a, 0, ma.epoch, 5, 10, &err);
    ck_assert_msg(rc == TM_OK, "a resend: %s: %s", tm_status_name(rc),
                  err.message);
    drop_hint();
    rc = commit_range(b_sink, 1, b_marker.epoch, 70, 75, &err);
    ck_assert_msg(rc == TM_OK, "b: %s: %s", tm_status_name(rc), err.message);
    end[0] = 10;
    end[1] = 75;
    assert_rows_once(end);

    /* Vacuum after all that (every file old) deletes no file of the main
     * line, twice over, with and without the hint. */
    age_everything();
    vacuum(3600);
    assert_rows_once(end);
    drop_hint();
    vacuum(0);
    assert_rows_once(end);
    for (int32_t p = 0; p < NPART; p++) {
        read1(c, p, &got);
        ck_assert_int_eq(got.next_offset, end[p]);
    }
    ice_api->close(a);
    ice_api->close(b_sink);
    ice_api->close(c);
}
END_TEST

/* The same with writer a stalled, not killed, between its link and its
 * check while c commits: c never builds on a's number, and a answers
 * RETRY (its number taken back), never OK. */
static void *c_sink;
static tm_marker c_marker;
static tm_status c_status;
static char c_message[TM_ERROR_MAX];

static void c_commits_meanwhile(void) {
    tm_error err;
    drop_hint();
    c_status = commit_range(c_sink, 2, c_marker.epoch, 5, 10, &err);
    snprintf(c_message, sizeof c_message, "%s", err.message);
}

START_TEST(stalled_after_link_reuses_no_version) {
    void *a = open_ok();
    c_sink = open_ok();
    b_sink = open_ok();
    tm_marker ma = claim_one(a, 0);
    c_marker = claim_one(c_sink, 2);
    b_marker = claim_one(b_sink, 1);
    tm_error err;
    ck_assert_int_eq(commit_range(a, 0, ma.epoch, 0, 5, &err), TM_OK);
    ck_assert_int_eq(commit_range(c_sink, 2, c_marker.epoch, 0, 5, &err),
                     TM_OK);
    tm_marker got;
    read1(a, 0, &got);
    int64_t base = newest_version();
    linked_after = 0;
    before_link = advance_and_vacuum;
    after_link = c_commits_meanwhile;
    tm_status rc = commit_range(a, 0, ma.epoch, 5, 10, &err);
    /* The fault happened where intended: a's link of a freed number went
     * through and c committed while a stalled right after it. */
    ck_assert_msg(linked_after && !version_on_disk(base),
                  "inconclusive: a did not link v%lld after vacuum freed it",
                  (long long)(base + 1));
    ck_assert_msg(c_status == TM_OK, "c: %s: %s", tm_status_name(c_status),
                  c_message);
    ck_assert_msg(rc == TM_RETRY, "a: %s: %s", tm_status_name(rc), err.message);
    ck_assert_msg(!version_on_disk(base + 1), "a's freed v%lld still there",
                  (long long)(base + 1));
    int64_t end[NPART] = {5, 70, 10};
    assert_rows_once(end);
    /* The host's resend lands on top. */
    rc = commit_range(a, 0, ma.epoch, 5, 10, &err);
    ck_assert_msg(rc == TM_OK, "a resend: %s: %s", tm_status_name(rc),
                  err.message);
    end[0] = 10;
    age_everything();
    drop_hint();
    vacuum(0);
    assert_rows_once(end);
    ice_api->close(a);
    ice_api->close(b_sink);
    ice_api->close(c_sink);
}
END_TEST

/* ---- F2: only canonical, bounded version names ------------------------- */

START_TEST(version_names_canonical_and_bounded) {
    ck_assert_int_eq(ice_meta_version_of("v7.metadata.json"), 7);
    ck_assert_int_eq(ice_meta_version_of("v1234567.metadata.json"), 1234567);
    const char *bad[] = {
        "v0.metadata.json",
        "v0099.metadata.json",
        "v07.metadata.json",
        "v+5.metadata.json",
        "v-5.metadata.json",
        "v 5.metadata.json",
        "v5.metadata.json.part",
        "v.metadata.json",
        "v99999999999999999999.metadata.json",
        "v9223372036854775807.metadata.json",
        "v4611686018427387904.metadata.json",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(ice_meta_version_of(bad[i]) == -1, "%s read as v%lld",
                      bad[i], (long long)ice_meta_version_of(bad[i]));
    ck_assert_int_eq(ice_meta_version_of("v4611686018427387903.metadata.json"),
                     ICE_VERSION_MAX);
}
END_TEST

/* Copies the newest version to metadata/NAME. */
static void plant_copy(const char *name) {
    char from[600], to[600];
    snprintf(from, sizeof from, "%s/metadata/v%lld.metadata.json", fx.table,
             (long long)newest_version());
    snprintf(to, sizeof to, "%s/metadata/%s", fx.table, name);
    ck_assert_int_eq(link(from, to), 0);
}

static void put_hint_text(const char *text) {
    char path[600];
    snprintf(path, sizeof path, "%s/metadata/version-hint.text", fx.table);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* Crafted huge or aliasing version files (and a hint naming one) are not
 * versions: the table is not bricked, commits and vacuum go on over the
 * real ones. */
START_TEST(crafted_huge_versions_brick_nothing) {
    void *a = open_ok();
    tm_marker ma = claim_one(a, 0);
    tm_error err;
    ck_assert_int_eq(commit_range(a, 0, ma.epoch, 0, 5, &err), TM_OK);
    int64_t real = newest_version();
    plant_copy("v9223372036854775807.metadata.json");
    plant_copy("v99999999999999999999.metadata.json");
    plant_copy("v4611686018427387904.metadata.json");
    plant_copy("v0099.metadata.json");
    put_hint_text("9223372036854775807");
    ice_api->close(a);
    a = open_ok();
    tm_status rc = commit_range(a, 0, ma.epoch, 5, 10, &err);
    ck_assert_msg(rc == TM_OK, "commit: %s: %s", tm_status_name(rc),
                  err.message);
    ck_assert(version_on_disk(real + 1));
    ice_table t;
    table_open(&t);
    ck_assert_int_eq(t.version, real + 1);
    ice_table_free(&t);
    put_hint_text("99");
    rc = commit_range(a, 0, ma.epoch, 10, 15, &err);
    ck_assert_msg(rc == TM_OK, "commit: %s: %s", tm_status_name(rc),
                  err.message);
    table_open(&t);
    ck_assert_int_eq(t.version, real + 2);
    ice_table_free(&t);
    age_everything();
    vacuum(0);
    int64_t end[NPART] = {15, 0, 0};
    assert_rows_once(end);
    ice_api->close(a);
}
END_TEST

/* The last number is never linked past: a table at the bound refuses the
 * next version instead of wrapping. */
START_TEST(no_link_past_the_bound) {
    void *a = open_ok();
    claim_one(a, 0);
    ice_api->close(a);
    ice_table t;
    char why[1024], tmp[4096];
    table_open(&t);
    t.version = ICE_VERSION_MAX;
    json_t *next = ice_meta_next(&t);
    ck_assert_ptr_nonnull(next);
    ck_assert_int_eq(ice_meta_stage(&t, next, tmp, why, sizeof why), 0);
    int rc = ice_meta_link(&t, next, tmp, why, sizeof why);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(why, "highest version number"), "%s", why);
    ck_assert(access(tmp, F_OK) != 0);
    json_decref(next);
    ice_table_free(&t);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("iceberg_lite_versions");
    TCase *tc = tcase_create("versions");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, killed_after_link_reuses_no_version);
    tcase_add_test(tc, stalled_after_link_reuses_no_version);
    tcase_add_test(tc, version_names_canonical_and_bounded);
    tcase_add_test(tc, crafted_huge_versions_brick_nothing);
    tcase_add_test(tc, no_link_past_the_bound);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
