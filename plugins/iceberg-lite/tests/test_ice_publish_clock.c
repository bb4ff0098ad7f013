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
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
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

/* The kinds of file a writer writes for a version, by where and how it
 * names them: which of them the suspension ages. */
enum {
    K_DATA = 1,     /* data/ */
    K_MANIFEST = 2, /* metadata/ *.avro: manifests and manifest lists */
    K_DL_FILE = 4,  /* dead_letters/, not an index */
    K_DL_INDEX = 8, /* dead_letters/index-*.txt */
    K_STAGED = 16,  /* the staged metadata file (tmp-*, or a catalog's) */
    K_OTHER = 32,   /* anything else (a hint's spare) */
    K_NKINDS = 6,
    /* What the writer wrote before it staged: the first tests' default
     * (the staged file was written after the suspension ended). */
    K_WRITTEN = K_DATA | K_MANIFEST | K_DL_FILE | K_DL_INDEX
};

static unsigned kind_of(const char *path) {
    const char *base = strrchr(path, '/') + 1;
    size_t n = strlen(base);
    if (strstr(path, "/data/"))
        return K_DATA;
    if (strstr(path, "/dead_letters/"))
        return strncmp(base, "index-", 6) == 0 ? K_DL_INDEX : K_DL_FILE;
    if (n > 5 && strcmp(base + n - 5, ".avro") == 0)
        return K_MANIFEST;
    if (strncmp(base, "tmp-", 4) == 0 && strstr(base, ".metadata.json"))
        return K_STAGED;
    if (n > 14 && strcmp(base + n - 14, ".metadata.json") == 0)
        return K_STAGED; /* a catalog table's staged version */
    return K_OTHER;
}

/* Index of a single kind in aged_n[]. */
static int kind_index(unsigned k) {
    int i = 0;
    while (k > 1) {
        k >>= 1;
        i++;
    }
    return i;
}

static names before;            /* the files before the writer started */
static const char *armed;       /* the fault point that backdates, or NULL */
static unsigned aged;           /* the kinds it backdates */
static int reached;             /* times it did */
static size_t aged_n[K_NKINDS]; /* files it backdated, per kind */
static size_t moved_total;      /* every file */
static int vacuum_at_link; /* the next version's link() runs vacuum first */
static int vacuum_ran;
static size_t vacuum_removed;
static char vacuum_why[1024];

/* Files of KINDS backdated. */
static size_t moved_of(unsigned kinds) {
    size_t n = 0;
    for (int i = 0; i < K_NKINDS; i++)
        if (kinds & (1u << i))
            n += aged_n[i];
    return n;
}

static void arm_kinds(const char *point, unsigned kinds) {
    names_free(&before);
    list_files(&before);
    armed = point;
    aged = kinds;
    reached = 0;
    memset(aged_n, 0, sizeof aged_n);
    moved_total = 0;
    vacuum_at_link = 1;
    vacuum_ran = 0;
    vacuum_removed = 0;
    vacuum_why[0] = '\0';
}

static void arm(const char *point) {
    arm_kinds(point, K_WRITTEN);
}

static void disarm(void) {
    armed = NULL;
    vacuum_at_link = 0;
}

/* The files of the armed kinds the writer wrote since arm() (by default
 * not a staged metadata file: staged after the suspension ended, it is
 * fresh) get mtimes SUSPEND_S ago, and are checked to have them. */
static void backdate(void) {
    names now;
    list_files(&now);
    struct timespec t;
    ck_assert_int_eq(clock_gettime(CLOCK_REALTIME, &t), 0);
    t.tv_sec -= SUSPEND_S;
    struct timespec times[2] = {t, t};
    for (size_t i = 0; i < now.n; i++) {
        const char *p = now.p[i];
        unsigned kind = kind_of(p);
        if (has(&before, p) || !(aged & kind))
            continue;
        ck_assert_msg(utimensat(AT_FDCWD, p, times, 0) == 0,
                      "inconclusive: utimensat %s: %s", p, strerror(errno));
        struct stat st;
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_msg(st.st_mtim.tv_sec == t.tv_sec,
                      "inconclusive: %s kept its mtime", p);
        moved_total++;
        aged_n[kind_index(kind)]++;
    }
    names_free(&now);
    reached++;
}

static void sink_fault(const char *point) {
    if (armed && strcmp(point, armed) == 0)
        backdate();
}

/* Vacuum as `tidemark table vacuum --grace-seconds 300` runs it. */
/* ---- the table in a catalog ----------------------------------------------
 * A catalog table's version is published by the row's swap, not a link:
 * the file it names is the staged one itself, under its final name. */
static int cataloged;      /* fx's table is in the SQLite catalog below */
static char cat_uri[1024]; /* its catalog_uri */

static void use_catalog(void) {
    char text[2048];
    snprintf(cat_uri, sizeof cat_uri, "sqlite:///%s/catalog.db", fx.dir);
    snprintf(text, sizeof text,
             "{\"path\": \"$T\", \"catalog_uri\": \"%s\", "
             "\"catalog_name\": \"lake\", \"catalog_namespace\": "
             "\"sales\", \"catalog_table\": \"orders\"}",
             cat_uri);
    ck_assert_int_eq(ice_fx_settings(&fx, text), 0);
    cataloged = 1;
}

/* fx's table opened as `tidemark table` opens it (--catalog ... when
 * cataloged). 0, or -1 with why. */
static int table_open(ice_table *t, char *why, size_t why_size) {
    if (ice_table_init(t, fx.table, 0, 1, why, why_size) != 0)
        return -1;
    ice_catalog_ref ref = {cat_uri, "lake", "sales", "orders", 0};
    if (cataloged && ice_table_use_catalog(t, &ref, 0, why, why_size) != 0) {
        ice_table_free(t);
        return -1;
    }
    return 0;
}

/* The deadline_ms of the batches commit_range() makes (CLOCK_MONOTONIC, as
 * the host's; 0: none). */
static int64_t batch_deadline_ms;

/* The clocks' shifts of clock_gettime() below. */
static time_t boot_shift_s, mono_shift_s, vacuum_shift_s;
static int in_vacuum;

static void run_vacuum(void) {
    ice_table t;
    if (table_open(&t, vacuum_why, sizeof vacuum_why) != 0)
        return;
    in_vacuum = 1;
    if (ice_vacuum(&t, VACUUM_FLOOR, NULL, NULL, &vacuum_removed, vacuum_why,
                   sizeof vacuum_why) == 0)
        vacuum_ran = 1;
    in_vacuum = 0;
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

/* A catalog table's publish: the vacuum runs before the swap. */
int sqlite3_prepare_v2(sqlite3 *db, const char *sql, int n, sqlite3_stmt **st,
                       const char **tail) {
    static int (*real)(sqlite3 *, const char *, int, sqlite3_stmt **,
                       const char **);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "sqlite3_prepare_v2");
    if (!real)
        _exit(97);
    if (vacuum_at_link && strncmp(sql, "UPDATE iceberg_tables SET", 25) == 0) {
        vacuum_at_link = 0;
        run_vacuum();
    }
    return real(db, sql, n, st, tail);
}

/* A point of this test's own: right after the barrier (syncfs) of a
 * staged version, before its check. A stall in the barrier is a stall
 * between staging and the check, for a claim too, which has no fault
 * point of its own there. */
#define AT_BARRIER "test:after_syncfs"
static void sink_fault(const char *point);

int syncfs(int fd) {
    static int (*real)(int);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "syncfs");
    if (!real)
        _exit(97);
    int rc = real(fd);
    sink_fault(AT_BARRIER);
    return rc;
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
    ck_assert_msg(table_open(&t, why, sizeof why) == 0, "%s", why);
    if (ice_table_refresh(&t, why, sizeof why) != 0) {
        /* A catalog's row naming a metadata file that is gone. */
        snprintf(what, what_size, "%s", why);
        *version = -1;
        ice_table_free(&t);
        return 1;
    }
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
    if (!missing)
        missing =
            ice_dl_index_each(NULL, t.meta, dl_file, &w, why, sizeof why) != 0;
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
    int missing = names_missing(&version, what, sizeof what);
    if (missing && version < 0)
        ck_abort_msg("DATA LOSS after %s: the newest version is lost: %s "
                     "(vacuum deleted it before the swap)",
                     after, what);
    if (missing)
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
    cataloged = 0;
    batch_deadline_ms = 0;
    boot_shift_s = mono_shift_s = vacuum_shift_s = 0;
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
    kb.b.deadline_ms = batch_deadline_ms;
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
    ck_assert_msg(reached == 1 && moved_of(K_DATA) == 1 && moved_total >= 3,
                  "inconclusive: after_effects reached %d times, %zu data "
                  "files of %zu files backdated (1 of a data file and two "
                  "manifests expected)",
                  reached, moved_of(K_DATA), moved_total);
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

/* The sink's commit suspended after staging (after_marker) with only the
 * files of KINDS aged past the floor, the rest fresh: the check must judge
 * every kind it wrote (one that skips a kind passes on the fresh others,
 * and the vacuum at the link deletes the aged ones from under the
 * version). Batches with dead letters; SETTINGS (NULL: the fixture's)
 * e.g. keep_snapshots 1, under which the commit expires the previous
 * snapshot and writes a dead-letter index. */
static void commit_with_aged(unsigned kinds, const char *settings) {
    if (settings)
        ck_assert_int_eq(ice_fx_settings(&fx, settings), 0);
    tm_host_api host;
    int64_t epoch;
    void *sink = open_sink(&host, &epoch);
    tm_error err;
    ck_assert_int_eq(commit_range(sink, epoch, 0, 5, 1, &err), TM_OK);
    int64_t v0 = assert_whole("the first commit");

    arm_kinds(TM_FAULT_AFTER_MARKER, kinds);
    tm_status rc = commit_range(sink, epoch, 5, 10, 1, &err);
    disarm();
    ck_assert_msg(reached == 1 && moved_of(kinds) >= 1,
                  "inconclusive: after_marker reached %d times, %zu files of "
                  "the kinds 0x%x backdated",
                  reached, moved_of(kinds), kinds);
    assert_whole("the suspended commit");
    ck_assert_msg(rc == TM_RETRY, "suspended commit: %s: %s",
                  tm_status_name(rc), err.message);
    ck_assert_msg(strstr(err.message, BOUND_TEXT) &&
                      strstr(err.message, "by the mtime of "),
                  "%s", err.message);
    ck_assert_int_eq(assert_whole("the refusal"), v0);
    ck_assert_int_eq(next_offset(sink), 5);

    rc = commit_range(sink, epoch, 5, 10, 1, &err);
    ck_assert_msg(rc == TM_OK, "retry: %s: %s", tm_status_name(rc),
                  err.message);
    ck_assert_int_eq(assert_whole("the retry"), v0 + 1);
    ck_assert_int_eq(next_offset(sink), 10);
    /* Offsets 0 to 9 but the dead letters 4 and 9, each once. */
    judge(8, 45 - 4 - 9);
    ice_api->close(sink);
}

START_TEST(commit_data_files_aged_alone) {
    commit_with_aged(K_DATA, NULL);
}
END_TEST

START_TEST(commit_manifests_aged_alone) {
    commit_with_aged(K_MANIFEST, NULL);
}
END_TEST

START_TEST(commit_dead_letter_file_aged_alone) {
    commit_with_aged(K_DL_FILE, NULL);
}
END_TEST

START_TEST(commit_dead_letter_index_aged_alone) {
    commit_with_aged(K_DL_INDEX, "{\"path\": \"$T\", \"keep_snapshots\": 1}");
}
END_TEST

/* ---- a suspension only the boot clock has counted -------------------------
 * This executable's clock_gettime() stands in for libc's (exported, for
 * the plugin too): CLOCK_BOOTTIME reads boot_shift_s ahead, and
 * CLOCK_REALTIME reads vacuum_shift_s ahead inside run_vacuum() only.
 * That is a suspension the writer's boot clock counted but its wall clock
 * has not caught up with yet (nor its files' mtimes, stamped by it),
 * while another host's vacuum, on a right wall clock, finds the files
 * that much older. Only the boot clock can refuse there: a check on
 * CLOCK_MONOTONIC (which stood still) passes, and the vacuum at the link
 * deletes every file of the attempt (here the staged one too, so the link
 * fails; a catalog's swap would publish the version naming them). A real
 * suspend of the test machine is not possible: this is what one looks
 * like to the check, through the function the check reads the clock by. */
int clock_gettime(clockid_t id, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "clock_gettime");
    if (!real)
        _exit(97);
    int rc = real(id, ts);
    if (rc == 0 && id == CLOCK_BOOTTIME)
        ts->tv_sec += boot_shift_s;
    if (rc == 0 && id == CLOCK_MONOTONIC)
        ts->tv_sec += mono_shift_s;
    if (rc == 0 && id == CLOCK_REALTIME && in_vacuum)
        ts->tv_sec += vacuum_shift_s;
    return rc;
}

/* CLOCK_BOOTTIME in ms as this executable reads it (shifted), not through
 * the code under test. */
static int64_t boot_clock_ms(void) {
    struct timespec ts;
    ck_assert_int_eq(clock_gettime(CLOCK_BOOTTIME, &ts), 0);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void suspend_boot_clock(const char *point) {
    if (armed && strcmp(point, armed) == 0) {
        boot_shift_s += SUSPEND_S;
        vacuum_shift_s = SUSPEND_S;
        reached++;
    }
}

START_TEST(commit_suspended_on_the_boot_clock_alone) {
    tm_host_api host;
    int64_t epoch;
    void *sink = open_sink(&host, &epoch);
    host.fault = suspend_boot_clock;
    tm_error err;
    ck_assert_int_eq(commit_range(sink, epoch, 0, 5, 0, &err), TM_OK);
    int64_t v0 = assert_whole("the first commit");

    arm_kinds(TM_FAULT_AFTER_EFFECTS, 0);
    int64_t boot0 = boot_clock_ms();
    tm_status rc = commit_range(sink, epoch, 5, 10, 0, &err);
    disarm();
    int64_t moved_ms = boot_clock_ms() - boot0;
    ck_assert_msg(reached == 1 && moved_ms >= SUSPEND_S * 1000,
                  "inconclusive: after_effects reached %d times, the boot "
                  "clock moved %lld ms",
                  reached, (long long)moved_ms);
    assert_whole("the commit suspended on the boot clock");
    ck_assert_msg(rc == TM_RETRY, "suspended commit: %s: %s",
                  tm_status_name(rc), err.message);
    ck_assert_msg(strstr(err.message, BOUND_TEXT) &&
                      strstr(err.message, "boot clock"),
                  "%s", err.message);
    ck_assert_int_eq(assert_whole("the refusal"), v0);
    rc = commit_range(sink, epoch, 5, 10, 0, &err);
    ck_assert_msg(rc == TM_OK, "retry: %s: %s", tm_status_name(rc),
                  err.message);
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
    ck_assert_msg(table_open(t, why, sizeof why) == 0, "%s", why);
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
    ck_assert_msg(reached == 1 && moved_of(K_DATA) == 1,
                  "inconclusive: maint_staged reached %d times, %zu data "
                  "files backdated (the compacted file expected)",
                  reached, moved_of(K_DATA));
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

/* Rows and dead letters of partition 0, read through the sink (from the
 * newest version, the catalog's or the directory's). */
static void assert_rows(size_t want_rows, size_t want_dls) {
    tm_host_api host = *tm_host_services();
    void *sink;
    tm_error err = {sizeof err, ""};
    ck_assert_msg(ice_api->open(&host, &fx.config, &sink, &err) == TM_OK, "%s",
                  err.message);
    size_t rows, dls;
    int64_t max;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, &max), 0);
    ck_assert_uint_eq(rows, want_rows);
    ck_assert_uint_eq(dls, want_dls);
    ice_api->close(sink);
}

/* A compaction suspended at its staged point with only the files of KINDS
 * aged: its check judges each kind it wrote. */
static void compaction_with_aged(unsigned kinds) {
    ice_table t;
    three_batches(0, &t);
    int64_t v0 = assert_whole("the batches");
    ice_compact_result res;
    char why[4600];
    arm_kinds(ICE_FAULT_MAINT_STAGED, kinds);
    int rc = ice_compact(&t, 1 << 20, &res, why, sizeof why);
    disarm();
    ck_assert_msg(reached == 1 && moved_of(kinds) >= 1,
                  "inconclusive: maint_staged reached %d times, %zu files of "
                  "the kinds 0x%x backdated",
                  reached, moved_of(kinds), kinds);
    assert_whole("the suspended compaction");
    ck_assert_msg(rc == -1, "suspended compaction: %d: %s", rc, why);
    ck_assert_msg(strstr(why, BOUND_TEXT) && strstr(why, "by the mtime of "),
                  "%s", why);
    ck_assert_int_eq(assert_whole("the refusal"), v0);
    if (cataloged)
        assert_rows(15, 0);
    else
        judge(15, 105);
    ice_table_free(&t);
}

START_TEST(compaction_data_file_aged_alone) {
    compaction_with_aged(K_DATA);
}
END_TEST

START_TEST(compaction_manifests_aged_alone) {
    compaction_with_aged(K_MANIFEST);
}
END_TEST

/* Its staged metadata alone aged, in a catalog (where the swap publishes
 * that file by its name): judged as the expiry's is. */
START_TEST(catalog_compaction_staged_file_aged_alone) {
    use_catalog();
    compaction_with_aged(K_STAGED);
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
    ck_assert_msg(reached == 1 && moved_of(K_DL_FILE | K_DL_INDEX) == 1,
                  "inconclusive: maint_staged reached %d times, %zu "
                  "dead-letter files backdated (the new index expected)",
                  reached, moved_of(K_DL_FILE | K_DL_INDEX));
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

/* ---- a write slower than the bound ----------------------------------------
 * The host halves a batch whose commit answered RETRY at or past its
 * deadline (host/commit/commit_batch.c), never one refused before it:
 * resent whole, a batch that cannot be written within the bound would be
 * refused for ever. The host's deadline is at most 240 s after it called
 * commit ($.batch.commit_timeout_ms), the bound 240 s after the commit
 * began writing, on clocks that run together but in a suspend: a write
 * slower than the bound is past the deadline first, and the commit says
 * so (its deadline test comes before the publish check). Staged here by
 * moving the monotonic and boot clocks 241 s at after_effects. */
static void slow_write(const char *point) {
    if (armed && strcmp(point, armed) == 0) {
        boot_shift_s += 241;
        mono_shift_s += 241;
        reached++;
    }
}

START_TEST(a_write_slower_than_the_bound_is_past_the_deadline) {
    tm_host_api host;
    int64_t epoch;
    void *sink = open_sink(&host, &epoch);
    host.fault = slow_write;
    tm_error err;
    arm_kinds(TM_FAULT_AFTER_EFFECTS, 0);
    batch_deadline_ms = ice_mono_ms() + 240000; /* the longest the host sets */
    tm_status rc = commit_range(sink, epoch, 0, 5, 0, &err);
    disarm();
    ck_assert_msg(reached == 1, "inconclusive: after_effects reached %d times",
                  reached);
    ck_assert_msg(rc == TM_RETRY, "slow commit: %s: %s", tm_status_name(rc),
                  err.message);
    /* What the host halves on: RETRY at or past the deadline. */
    ck_assert_int_ge(ice_mono_ms(), batch_deadline_ms);
    ck_assert_msg(strstr(err.message, "past its deadline") &&
                      !strstr(err.message, BOUND_TEXT),
                  "%s", err.message);
    batch_deadline_ms = ice_mono_ms() + 240000;
    rc = commit_range(sink, epoch, 0, 5, 0, &err);
    ck_assert_msg(rc == TM_OK, "retry: %s: %s", tm_status_name(rc),
                  err.message);
    ck_assert_int_eq(next_offset(sink), 5);
    ice_api->close(sink);
}
END_TEST

/* An expiry of snapshots without dead letters writes no file but its
 * staged metadata: suspended at maint_staged with that file aged (a pause
 * its boot clock did not count, seen by the mtime), it must be judged like
 * any other. Checked for presence only, it passed, and the vacuum before
 * the publish deleted it: in a directory the link then fails; in a catalog
 * the swap publishes a row naming the deleted file. */
static void expiry_staged_file_aged(void) {
    ice_table t;
    three_batches(0, &t);
    int64_t v0 = assert_whole("the batches");
    size_t removed;
    char why[4600];
    arm_kinds(ICE_FAULT_MAINT_STAGED, K_STAGED);
    int rc = ice_expire(&t, 1, &removed, why, sizeof why);
    disarm();
    ck_assert_msg(reached == 1 && moved_of(K_STAGED) == 1 && moved_total == 1,
                  "inconclusive: maint_staged reached %d times, %zu staged "
                  "files of %zu files backdated (the staged metadata alone "
                  "expected)",
                  reached, moved_of(K_STAGED), moved_total);
    assert_whole("the suspended expiry");
    ck_assert_msg(rc == -1, "suspended expiry: %d: %s", rc, why);
    ck_assert_msg(strstr(why, BOUND_TEXT) && strstr(why, "not published"), "%s",
                  why);
    ck_assert_int_eq(assert_whole("the refusal"), v0);
    rc = ice_expire(&t, 1, &removed, why, sizeof why);
    ck_assert_msg(rc == 0, "expiry again: %d: %s", rc, why);
    ck_assert_uint_eq(removed, 2);
    ck_assert_int_eq(assert_whole("the expiry again"), v0 + 1);
    ice_table_free(&t);
    assert_rows(15, 0);
}

START_TEST(expiry_staged_file_aged_publishes_nothing) {
    expiry_staged_file_aged();
}
END_TEST

START_TEST(catalog_expiry_staged_file_aged_publishes_nothing) {
    use_catalog();
    expiry_staged_file_aged();
}
END_TEST

/* A claim stalled in its barrier, after writing its staged metadata,
 * past the floor (the file aged): it must not publish. In a catalog the
 * staged file is the version the swap names, and a vacuum before the
 * swap deletes it as an orphan; unchecked, the row named a deleted file.
 * (In a directory the link of the deleted file fails: the check refuses
 * first, the same way.) */
static void claim_stalled_in_its_barrier(void) {
    tm_host_api host;
    int64_t epoch;
    void *sink = open_sink(&host, &epoch);
    tm_error err;
    ck_assert_int_eq(commit_range(sink, epoch, 0, 5, 0, &err), TM_OK);
    int64_t v0 = assert_whole("the first commit");

    arm_kinds(AT_BARRIER, K_STAGED);
    tm_marker m;
    tm_status rc = ice_fx_claim(sink, &m, 1, &err);
    disarm();
    ck_assert_msg(reached == 1 && moved_of(K_STAGED) == 1 && moved_total == 1,
                  "inconclusive: the claim's barrier reached %d times, %zu "
                  "staged files of %zu files backdated (its staged metadata "
                  "alone expected)",
                  reached, moved_of(K_STAGED), moved_total);
    assert_whole("the stalled claim");
    ck_assert_msg(rc == TM_RETRY, "stalled claim: %s: %s", tm_status_name(rc),
                  err.message);
    ck_assert_msg(strstr(err.message, BOUND_TEXT) &&
                      strstr(err.message, "not published"),
                  "%s", err.message);
    ck_assert_int_eq(assert_whole("the refusal"), v0);

    /* Claimed again, not stalled: the epoch moves past the refused one's,
     * and the next batch lands. */
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    ck_assert_int_eq(m.epoch, epoch + 1);
    ck_assert_int_eq(commit_range(sink, m.epoch, 5, 10, 0, &err), TM_OK);
    ck_assert_int_eq(next_offset(sink), 10);
    ice_api->close(sink);
    assert_whole("the batch after the claim");
    assert_rows(10, 0);
}

START_TEST(claim_stalled_past_the_floor_publishes_nothing) {
    claim_stalled_in_its_barrier();
}
END_TEST

START_TEST(catalog_claim_stalled_past_the_floor_publishes_nothing) {
    use_catalog();
    claim_stalled_in_its_barrier();
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

/* Late by the mtime alone, the boot clock well inside the bound: the
 * file system stamps mtimes behind this host's wall clock (a file
 * server's clock behind, or this clock stepped forward). Every attempt
 * is refused before the host's deadline, which a smaller batch does not
 * change: the refusal says so and what to fix. */
START_TEST(a_late_mtime_alone_names_the_clocks) {
    char why[8192];
    ck_assert_int_eq(check_at(-300, 1000, 240000, why, sizeof why), 2);
    ck_assert_msg(strstr(why, "by the mtime of ") &&
                      strstr(why, "behind this host's wall clock") &&
                      strstr(why, "a smaller batch does not help") &&
                      strstr(why, "NTP"),
                  "%s", why);
    /* Late on the boot clock too: not a matter of clocks. */
    ck_assert_int_eq(check_at(-300, 250000, 240000, why, sizeof why), 2);
    ck_assert_msg(!strstr(why, "a smaller batch does not help"), "%s", why);
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

/* A mtime past the range of ms in 64 bits (tv_sec near INT64_MAX: tmpfs
 * stores any) is clamped, not wrapped: far in the future, so no age by
 * the mtime; one near INT64_MIN is ancient. Without the clamp the first
 * one's ms wrapped to just before 1970 and refused a fresh write. */
START_TEST(an_mtime_past_the_ms_range_is_clamped) {
    char dir[] = "/dev/shm/tm-ice-clock-XXXXXX", path[64], why[8192];
    ck_assert_msg(mkdtemp(dir), "inconclusive: no tmpfs at /dev/shm: %s",
                  strerror(errno));
    snprintf(path, sizeof path, "%s/far", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fclose(f), 0);
    static const struct {
        time_t sec;
        int want;
    } cases[] = {{INT64_MAX, 0}, {INT64_MIN, 2}};
    for (size_t i = 0; i < 2; i++) {
        struct timespec times[2] = {{cases[i].sec, 999999999},
                                    {cases[i].sec, 999999999}};
        ck_assert_int_eq(utimensat(AT_FDCWD, path, times, 0), 0);
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_msg(st.st_mtim.tv_sec == cases[i].sec,
                      "inconclusive: %s stored the mtime %lld, not %lld", path,
                      (long long)st.st_mtim.tv_sec, (long long)cases[i].sec);
        ice_pub_files pf = {.more = {path}};
        why[0] = '\0';
        int rc = ice_publish_check(&pf, ice_boot_ms(), 240000, why, sizeof why);
        ck_assert_msg(rc == cases[i].want, "mtime %lld s: %d (%s)",
                      (long long)cases[i].sec, rc, why);
    }
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
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
    tcase_add_test(tc, commit_data_files_aged_alone);
    tcase_add_test(tc, commit_manifests_aged_alone);
    tcase_add_test(tc, commit_dead_letter_file_aged_alone);
    tcase_add_test(tc, commit_dead_letter_index_aged_alone);
    tcase_add_test(tc, compaction_data_file_aged_alone);
    tcase_add_test(tc, compaction_manifests_aged_alone);
    tcase_add_test(tc, catalog_compaction_staged_file_aged_alone);
    tcase_add_test(tc, commit_suspended_on_the_boot_clock_alone);
    tcase_add_test(tc, a_write_slower_than_the_bound_is_past_the_deadline);
    tcase_add_test(tc, expiry_staged_file_aged_publishes_nothing);
    tcase_add_test(tc, catalog_expiry_staged_file_aged_publishes_nothing);
    tcase_add_test(tc, claim_stalled_past_the_floor_publishes_nothing);
    tcase_add_test(tc, catalog_claim_stalled_past_the_floor_publishes_nothing);
    suite_add_tcase(s, tc);
    TCase *tj = tcase_create("judgment");
    tcase_add_checked_fixture(tj, setup, teardown);
    tcase_add_test(tj, judged_by_the_oldest_mtime_on_the_wall_clock);
    tcase_add_test(tj, judged_by_the_boot_clock_too);
    tcase_add_test(tj, a_late_mtime_alone_names_the_clocks);
    tcase_add_test(tj, a_future_mtime_is_no_age);
    tcase_add_test(tj, a_file_gone_is_told_apart);
    tcase_add_test(tj, an_mtime_past_the_ms_range_is_clamped);
    suite_add_tcase(s, tj);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
