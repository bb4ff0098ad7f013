/* What a commit costs, independent of the table's age: the metadata JSON
 * is compact, a commit makes its files durable with one file-system
 * barrier before the link and one metadata/ fsync after it (the fsync,
 * fdatasync, syncfs and link of this executable stand in for libc's, for
 * the plugin too: the executable exports them, and they record the
 * order), and merging manifests rewrites a bounded number of entries
 * however many files the table holds. */
#define _GNU_SOURCE /* RTLD_NEXT, syncfs */

#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include "dead_letters.h"
#include "fsio.h"
#include "ice_fixture.h"
#include "maint.h"
#include "marker_keys.h"
#include "snapshot_files.h"

static ice_fx fx;

/* ---- the sync calls seen by the sink ---------------------------------- */

/* Each call appends a letter: 'f' fsync, 'd' fdatasync, 's' syncfs,
 * 'l' link. Only while recording. */
static char calls[256];
static size_t ncalls;
static int recording;

static void note(char c) {
    if (recording && ncalls + 1 < sizeof calls)
        calls[ncalls++] = c;
}

/* Directories created while watching, each with its parent's identity
 * and whether a sync covering the new entry came after it: an fsync of
 * the parent, or a syncfs of the file system holding it. */
static struct {
    char path[512];
    dev_t dev;
    ino_t parent;
    int synced;
} made[16];
static size_t nmade;
static int watching;

/* FD was synced (whole file system when fs): marks the entries it covers. */
static void synced(int fd, int fs) {
    struct stat st;
    if (!watching || fstat(fd, &st) != 0)
        return;
    for (size_t i = 0; i < nmade; i++)
        if (made[i].dev == st.st_dev &&
            (fs || (S_ISDIR(st.st_mode) && made[i].parent == st.st_ino)))
            made[i].synced = 1;
}

#define PASS_THROUGH(name, letter, type, arg, fs)                              \
    int name(type arg) {                                                       \
        static int (*real)(type);                                              \
        if (!real)                                                             \
            *(void **)&real = dlsym(RTLD_NEXT, #name);                         \
        if (!real)                                                             \
            _exit(97);                                                         \
        note(letter);                                                          \
        int rc = real(arg);                                                    \
        if (rc == 0)                                                           \
            synced(arg, fs);                                                   \
        return rc;                                                             \
    }
PASS_THROUGH(fsync, 'f', int, fd, 0)
PASS_THROUGH(fdatasync, 'd', int, fd, 0)
PASS_THROUGH(syncfs, 's', int, fd, 1)

int mkdir(const char *path, mode_t mode) {
    static int (*real)(const char *, mode_t);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "mkdir");
    if (!real)
        _exit(97);
    int rc = real(path, mode);
    if (rc != 0 || !watching || nmade == sizeof made / sizeof made[0])
        return rc;
    int e = errno;
    char parent[sizeof made[0].path];
    snprintf(made[nmade].path, sizeof made[0].path, "%s", path);
    snprintf(parent, sizeof parent, "%s", path);
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/')
        parent[--n] = '\0';
    char *slash = strrchr(parent, '/');
    if (!slash)
        snprintf(parent, sizeof parent, ".");
    else
        slash[slash == parent ? 1 : 0] = '\0';
    struct stat st;
    if (stat(parent, &st) == 0) { /* else left out: the test sees fewer */
        made[nmade].dev = st.st_dev;
        made[nmade].parent = st.st_ino;
        made[nmade++].synced = 0;
    }
    errno = e;
    return rc;
}

int link(const char *from, const char *to) {
    static int (*real)(const char *, const char *);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "link");
    if (!real)
        _exit(97);
    note('l');
    return real(from, to);
}

/* ---- helpers ------------------------------------------------------------ */

static void setup(void) {
    ck_assert_int_eq(ice_fx_init(&fx, ""), 0);
}

static void teardown(void) {
    ice_fx_done(&fx, 0);
}

static void *open_with(const char *settings) {
    void *sink;
    tm_error err;
    ck_assert_int_eq(ice_fx_settings(&fx, settings), 0);
    tm_status rc = ice_fx_open(&fx, &sink, &err);
    ck_assert_msg(rc == TM_OK, "open: %s", err.message);
    return sink;
}

/* Commits [at, at + n) of partition 0, with a dead letter at the end when
 * dl. */
static void commit_range(void *sink, int64_t epoch, int64_t at, int n, int dl) {
    ice_fx_batch kb;
    char id[32];
    tm_error err = {sizeof err, ""};
    snprintf(id, sizeof id, "b-%lld", (long long)at);
    ice_fx_batch_init(&kb, id);
    uint32_t r = ice_fx_range(&kb, 0, at, at + n + (dl ? 1 : 0), epoch);
    for (int64_t o = at; o < at + n; o++)
        ice_fx_record(&kb, r, o);
    if (dl)
        ice_fx_dead_letter(&kb, r, at + n);
    ice_fx_seal(&kb);
    tm_status rc = ice_api->commit(sink, &kb.b, &err);
    ck_assert_msg(rc == TM_OK, "commit at %lld: %s", (long long)at,
                  err.message);
    ice_fx_batch_free(&kb);
}

static json_t *newest_meta(ice_table *t) {
    char why[512];
    ck_assert_msg(ice_table_refresh(t, why, sizeof why) == 0, "%s", why);
    return t->meta;
}

/* ---- tests -------------------------------------------------------------- */

/* Every version is written as compact JSON: no indentation, no newline
 * (the indented text was about a third whitespace). */
START_TEST(metadata_json_is_compact) {
    void *sink = open_with("{\"path\": \"$T\"}");
    tm_marker m;
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    commit_range(sink, m.epoch, 0, 3, 0);
    ice_api->close(sink);
    for (int v = 1; v <= 3; v++) {
        char path[600];
        uint8_t *text;
        size_t len;
        char why[512];
        snprintf(path, sizeof path, "%s/metadata/v%d.metadata.json", fx.table,
                 v);
        ck_assert_msg(fs_read_all(path, &text, &len, why, sizeof why) == 0,
                      "%s", why);
        ck_assert_msg(memchr(text, '\n', len) == NULL &&
                          strstr((char *)text, "\": ") == NULL,
                      "v%d is not compact JSON: %.80s", v, (char *)text);
        free(text);
    }
}
END_TEST

/* A table written before the metadata went compact (every version
 * indented) opens and appends; the new version is compact. */
START_TEST(indented_table_still_appends) {
    void *sink = open_with("{\"path\": \"$T\"}");
    tm_marker m;
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    commit_range(sink, m.epoch, 0, 3, 0);
    ice_api->close(sink);
    for (int v = 1; v <= 3; v++) { /* as the earlier writer left them */
        char path[600];
        json_error_t je;
        snprintf(path, sizeof path, "%s/metadata/v%d.metadata.json", fx.table,
                 v);
        json_t *meta = json_load_file(path, 0, &je);
        ck_assert_msg(meta != NULL, "%s", je.text);
        ck_assert_int_eq(json_dump_file(meta, path, JSON_INDENT(2)), 0);
        json_decref(meta);
    }
    sink = open_with("{\"path\": \"$T\"}");
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    commit_range(sink, m.epoch, 3, 3, 0);
    size_t rows = 0, dls = 0;
    int64_t max = -1;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, &max), 0);
    ck_assert_uint_eq(rows, 6);
    ck_assert_int_eq(max, 5);
    ice_api->close(sink);
    char path[600];
    uint8_t *text;
    size_t len;
    char why[512];
    snprintf(path, sizeof path, "%s/metadata/v5.metadata.json", fx.table);
    ck_assert_msg(fs_read_all(path, &text, &len, why, sizeof why) == 0, "%s",
                  why);
    ck_assert_ptr_null(memchr(text, '\n', len));
    free(text);
}
END_TEST

/* A commit with fsync on: one syncfs (every file it wrote, data,
 * dead letters, manifests, the staged metadata, durable at once) before
 * the link, and one fsync (of metadata/, the link itself) after it. The
 * same with dead letters and with a file roll. */
START_TEST(one_barrier_and_one_fsync_per_commit) {
    void *sink = open_with("{\"path\": \"$T\", \"target_file_size\": 65536}");
    tm_marker m;
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    struct {
        int n, dl;
    } batches[] = {{3, 0}, {3, 1}, {0, 1}, {5000, 0}, {2, 0}};
    int64_t at = 0;
    for (size_t k = 0; k < sizeof batches / sizeof batches[0]; k++) {
        ncalls = 0;
        recording = 1;
        commit_range(sink, m.epoch, at, batches[k].n, batches[k].dl);
        recording = 0;
        calls[ncalls] = '\0';
        ck_assert_msg(strcmp(calls, "slf") == 0,
                      "batch %zu (%d rows, %d dead letters): sync calls "
                      "\"%s\", want \"slf\" (syncfs, link, fsync)",
                      k, batches[k].n, batches[k].dl, calls);
        at += batches[k].n + batches[k].dl;
    }
    size_t rows = 0, dls = 0;
    int64_t max = -1;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, &max), 0);
    ck_assert_uint_eq(rows, 5008);
    ck_assert_uint_eq(dls, 2);
    ice_api->close(sink);
}
END_TEST

/* Opens the table with fsync on while watching mkdir: WANT directories
 * must be seen created (else the test is inconclusive), each with its
 * entry synced (an fsync of its parent, or a syncfs of that file system)
 * before open returns. */
static void *open_watching(size_t want) {
    nmade = 0;
    watching = 1;
    void *sink = open_with("{\"path\": \"$T\"}");
    watching = 0;
    ck_assert_msg(nmade == want,
                  "inconclusive: %zu directories seen created at open, "
                  "want %zu",
                  nmade, want);
    for (size_t i = 0; i < nmade; i++)
        ck_assert_msg(made[i].synced,
                      "%s: created at open, its parent never synced before "
                      "open returned",
                      made[i].path);
    return sink;
}

/* A new table: the table's directory, metadata/, data/ and dead_letters/
 * are durable when open returns (so are the first claim and commits that
 * rely on them). */
START_TEST(created_directories_are_durable_at_open) {
    void *sink = open_watching(4);
    tm_marker m;
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    commit_range(sink, m.epoch, 0, 3, 1);
    ice_api->close(sink);
}
END_TEST

/* A table that already has its versions but lacks a directory (a table
 * written before dead_letters/ existed, or by another tool): open makes
 * it, and its entry is durable when open returns, though open publishes
 * no version. */
START_TEST(directory_added_to_a_table_is_durable_at_open) {
    ice_api->close(open_with("{\"path\": \"$T\"}"));
    char dir[600];
    snprintf(dir, sizeof dir, "%s/dead_letters", fx.table);
    ck_assert_msg(rmdir(dir) == 0, "rmdir %s", dir);
    void *sink = open_watching(1);
    tm_marker m;
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    commit_range(sink, m.epoch, 0, 3, 1);
    size_t rows = 0, dls = 0;
    int64_t max = -1;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, &max), 0);
    ck_assert_uint_eq(rows, 3);
    ck_assert_uint_eq(dls, 1);
    ice_api->close(sink);
}
END_TEST

/* With "fsync": false no sync call at all. */
START_TEST(no_sync_calls_without_fsync) {
    void *sink = open_with("{\"path\": \"$T\", \"fsync\": false}");
    tm_marker m;
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    ncalls = 0;
    recording = 1;
    commit_range(sink, m.epoch, 0, 3, 1);
    recording = 0;
    calls[ncalls] = '\0';
    ck_assert_str_eq(calls, "l");
    ice_api->close(sink);
}
END_TEST

/* The sink on a table without fsync keeping KEEP snapshots, partition 0
 * claimed (*m), and T opened on the table beside it. */
static void *open_claimed(int keep, tm_marker *m, ice_table *t) {
    char settings[128], why[512];
    tm_error err;
    snprintf(settings, sizeof settings,
             "{\"path\": \"$T\", \"fsync\": false, \"keep_snapshots\": %d}",
             keep);
    void *sink = open_with(settings);
    ck_assert_int_eq(ice_fx_claim(sink, m, 1, &err), TM_OK);
    ck_assert_int_eq(ice_table_init(t, fx.table, 0, 0, why, sizeof why), 0);
    return sink;
}

/* Manifests merge by size tiers: a commit rewrites at most the entries of
 * a bounded number of small manifests, not every live file. 600 commits
 * of one file each: the manifest each commit writes holds few entries on
 * the whole (each entry rewritten once per tier), the current list stays
 * short, and every row is still there. */
#define MERGE_COMMITS 600
START_TEST(manifest_merges_cost_bounded) {
    tm_marker m;
    ice_table t;
    char why[512];
    void *sink = open_claimed(20, &m, &t);
    int64_t written = 0, most = 0;
    size_t longest = 0;
    for (int k = 0; k < MERGE_COMMITS; k++) {
        commit_range(sink, m.epoch, k, 1, 0);
        json_t *cur = ice_meta_current_snapshot(newest_meta(&t));
        int64_t id = ice_json_int(cur, "snapshot-id", -1);
        ice_mfile *mf;
        size_t nmf;
        ck_assert_msg(
            ice_snapshot_manifests(&t, cur, &mf, &nmf, why, sizeof why) == 0,
            "%s", why);
        int64_t files = 0, mine = -1;
        for (size_t i = 0; i < nmf; i++) {
            int64_t n = mf[i].added_files + mf[i].existing_files;
            files += n;
            if (mf[i].added_snapshot_id == id)
                mine = n;
        }
        ck_assert_int_eq(files, k + 1); /* every file once */
        ck_assert_int_ge(mine, 1);      /* this commit's manifest */
        written += mine;
        if (mine > most)
            most = mine;
        if (nmf > longest)
            longest = nmf;
        ice_mfiles_free(mf, nmf);
    }
    /* Tiers of 8: each file is rewritten at most once per tier (4 tiers
     * below 600), so about 4 entries a commit; merging everything each
     * time the list passes 8 would write MERGE_COMMITS^2/16 = 22500. */
    ck_assert_msg(written <= 5 * MERGE_COMMITS,
                  "%lld manifest entries written in %d commits",
                  (long long)written, MERGE_COMMITS);
    ck_assert_msg(most <= 512, "one commit rewrote %lld entries",
                  (long long)most);
    ck_assert_msg(longest <= 4 * 7 + 1, "a manifest list of %zu manifests",
                  longest);
    size_t rows = 0, dls = 0;
    int64_t max = -1;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, &max), 0);
    ck_assert_uint_eq(rows, MERGE_COMMITS);
    ck_assert_int_eq(max, MERGE_COMMITS - 1);
    ice_table_free(&t);
    ice_api->close(sink);
}
END_TEST

/* The dead-letter index segments (dead_letters/index-*.txt) not in
 * SEEN (names, *n of them) yet: added to it, and their bytes and lines
 * added to *bytes and *lines. */
static void new_index_files(char (*seen)[64], size_t *n, size_t cap,
                            int64_t *bytes, int64_t *lines) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/dead_letters", fx.table);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "index-", 6) != 0)
            continue;
        size_t i = 0;
        while (i < *n && strcmp(seen[i], e->d_name) != 0)
            i++;
        if (i < *n)
            continue;
        ck_assert_uint_lt(*n, cap);
        snprintf(seen[(*n)++], 64, "%.63s", e->d_name);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        int c;
        while ((c = fgetc(f)) != EOF) {
            (*bytes)++;
            *lines += c == '\n';
        }
        fclose(f);
    }
    closedir(d);
}

/* A dead letter in every batch, keep_snapshots 1: every commit's expiry
 * moves the dropped snapshot's dead-letter file into the index. Segments
 * merged by size tiers write each line about once per tier, however old
 * the table is (rewriting the whole index each time would write
 * DL_COMMITS^2/2 lines); the index names every dead-letter file once,
 * and the property naming the segments stays short. */
#define DL_COMMITS 600
START_TEST(dead_letter_index_cost_bounded) {
    tm_marker m;
    ice_table t;
    void *sink = open_claimed(1, &m, &t);
    static char seen[DL_COMMITS + 1][64];
    size_t nseen = 0;
    int64_t bytes = 0, lines = 0, most = 0;
    size_t longest = 0;
    for (int k = 0; k < DL_COMMITS; k++) {
        int64_t before = bytes;
        commit_range(sink, m.epoch, 2 * k, 1, 1);
        new_index_files(seen, &nseen, DL_COMMITS + 1, &bytes, &lines);
        if (bytes - before > most)
            most = bytes - before;
        const char *index = json_string_value(json_object_get(
            json_object_get(newest_meta(&t), "properties"), ICE_DL_INDEX_KEY));
        size_t segs = 0;
        for (const char *c = index; c && *c; c++)
            segs += *c == ' ';
        if (index && segs + 1 > longest)
            longest = segs + 1;
    }
    /* Each commit but the first drops one snapshot with its file. */
    ck_assert_int_ge(lines, DL_COMMITS - 1);
    ck_assert_msg(lines <= 6 * DL_COMMITS,
                  "%lld dead-letter index lines (%lld bytes, %lld in one "
                  "commit at most) written in %d commits",
                  (long long)lines, (long long)bytes, (long long)most,
                  DL_COMMITS);
    ck_assert_msg(longest <= 4 * 7 + 1, "an index of %zu segments", longest);
    size_t rows = 0, dls = 0;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, NULL), 0);
    ck_assert_uint_eq(rows, DL_COMMITS);
    ck_assert_uint_eq(dls, DL_COMMITS); /* each dead letter once */
    ice_table_free(&t);
    ice_api->close(sink);
}
END_TEST

/* The hint's temp files in metadata/ (tmp-*.hint.part). */
static int hint_spares(void) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/metadata", fx.table);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t k = strlen(e->d_name);
        n += strncmp(e->d_name, "tmp-", 4) == 0 && k > 10 &&
             strcmp(e->d_name + k - 10, ".hint.part") == 0;
    }
    closedir(d);
    return n;
}

/* The hint's inode after a commit, checking that it names version V. */
static ino_t hint_inode(int64_t v) {
    char path[600];
    struct stat st;
    snprintf(path, sizeof path, "%s/metadata/version-hint.text", fx.table);
    ck_assert_int_eq(stat(path, &st), 0);
    FILE *f = fopen(path, "r");
    long long got = -1;
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%lld", &got), 1);
    fclose(f);
    ck_assert_int_eq(got, v);
    return st.st_ino;
}

/* The hint is replaced through one spare file exchanged with it, so a
 * commit allocates and frees no inode for it: over many commits the hint
 * is always one of the same two inodes, and one spare is on disk while the
 * sink is open, none after close. A hint written before (a plain file, as
 * the temp file and rename made it) is taken over the same way. */
START_TEST(hint_reuses_two_inodes) {
    for (int round = 0; round < 2; round++) {
        void *sink = open_with("{\"path\": \"$T\"}");
        tm_marker m;
        tm_error err;
        ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
        ino_t seen[2] = {0, 0};
        int64_t v = round == 0 ? 2 : 9; /* the claim's (v1: created) */
        ck_assert_uint_ne(hint_inode(v), 0);
        for (int k = 0; k < 6; k++) {
            commit_range(sink, m.epoch, round * 6 + k, 1, 0);
            ino_t ino = hint_inode(++v);
            if (k < 2)
                seen[k] = ino;
            else
                ck_assert_msg(ino == seen[k % 2],
                              "round %d, commit %d: the hint is inode %lu, "
                              "not the %lu of two commits before",
                              round, k, (unsigned long)ino,
                              (unsigned long)seen[k % 2]);
            ck_assert_int_eq(hint_spares(), 1);
        }
        ck_assert_uint_ne(seen[0], seen[1]);
        ice_api->close(sink);
        ck_assert_int_eq(hint_spares(), 0);
        if (round == 0) { /* the hint as an earlier writer left it */
            char path[600], tmp[620];
            snprintf(path, sizeof path, "%s/metadata/version-hint.text",
                     fx.table);
            snprintf(tmp, sizeof tmp, "%s.old", path);
            FILE *f = fopen(tmp, "w");
            ck_assert_ptr_nonnull(f);
            ck_assert_int_gt(fprintf(f, "%lld", (long long)v), 0);
            ck_assert_int_eq(fclose(f), 0);
            ck_assert_int_eq(rename(tmp, path), 0);
        }
    }
}
END_TEST

/* Commits [at, at + n) of PARTITION. */
static void commit_part(void *sink, int64_t epoch, int32_t partition,
                        int64_t at, int n) {
    ice_fx_batch kb;
    char id[48];
    tm_error err = {sizeof err, ""};
    snprintf(id, sizeof id, "p%d-%lld", (int)partition, (long long)at);
    ice_fx_batch_init(&kb, id);
    uint32_t r = ice_fx_range(&kb, partition, at, at + n, epoch);
    for (int64_t o = at; o < at + n; o++)
        ice_fx_record(&kb, r, o);
    ice_fx_seal(&kb);
    tm_status rc = ice_api->commit(sink, &kb.b, &err);
    ck_assert_msg(rc == TM_OK, "commit %s: %s", id, err.message);
    ice_fx_batch_free(&kb);
}

/* Marker keys in SNAP's summary. */
static int marker_keys_in(json_t *snap) {
    const char *key;
    json_t *v;
    int n = 0;
    json_object_foreach(json_object_get(snap, "summary"), key, v) n +=
        strncmp(key, ICE_MARKER_PREFIX, strlen(ICE_MARKER_PREFIX)) == 0;
    return n;
}

/* Partitions whose marker SNAP's summary carries (its next-offset keys). */
static int markers_in(json_t *snap) {
    const char *key;
    json_t *v;
    int n = 0;
    size_t fn = strlen("." ICE_F_NEXT);
    json_object_foreach(json_object_get(snap, "summary"), key, v) {
        size_t k = strlen(key);
        n += strncmp(key, ICE_MARKER_PREFIX, strlen(ICE_MARKER_PREFIX)) == 0 &&
             k > fn && strcmp(key + k - fn, "." ICE_F_NEXT) == 0;
    }
    return n;
}

/* The snapshot whose parent is ID in META, or -1. */
static int64_t child_of(json_t *meta, int64_t id) {
    size_t i;
    json_t *snap;
    json_array_foreach(json_object_get(meta, "snapshots"), i, snap) {
        if (ice_json_int(snap, "parent-snapshot-id", -2) == id)
            return ice_json_int(snap, "snapshot-id", -1);
    }
    return -1;
}

/* Next offsets of partitions 0..2 read back through read_markers. */
static void want_next(void *sink, int64_t p0, int64_t p1, int64_t p2) {
    tm_marker m[3];
    tm_error err = {sizeof err, ""};
    for (int32_t i = 0; i < 3; i++)
        m[i] = (tm_marker){
            .struct_size = sizeof m[i], .topic = "orders", .partition = i};
    ck_assert_msg(ice_api->read_markers(sink, m, 3, &err) == TM_OK, "%s",
                  err.message);
    ck_assert_int_eq(m[0].next_offset, p0);
    ck_assert_int_eq(m[1].next_offset, p1);
    ck_assert_int_eq(m[2].next_offset, p2);
}

/* Only the current snapshot carries markers: each commit moves them from
 * its parent, which keeps the key naming the snapshot they moved to (so a
 * metadata file holds one set of markers, not one per snapshot kept), and
 * every partition's marker, the untouched ones too, reads back. */
START_TEST(markers_only_in_the_current_snapshot) {
    void *sink = open_with("{\"path\": \"$T\"}");
    tm_marker m[3];
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, m, 3, &err), TM_OK);
    for (int k = 0; k < 6; k++)
        commit_part(sink, m[k % 3].epoch, k % 3, (k / 3) * 2, 2);
    want_next(sink, 4, 4, 4);
    commit_part(sink, m[1].epoch, 1, 4, 3);
    want_next(sink, 4, 7, 4);
    ice_table t;
    char why[512];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 0, why, sizeof why), 0);
    json_t *meta = newest_meta(&t);
    int64_t cur = ice_json_int(meta, "current-snapshot-id", -1);
    size_t i, nsnaps = json_array_size(json_object_get(meta, "snapshots"));
    json_t *snap;
    ck_assert_uint_eq(nsnaps, 7);
    json_array_foreach(json_object_get(meta, "snapshots"), i, snap) {
        int64_t id = ice_json_int(snap, "snapshot-id", -1);
        const char *to = json_string_value(json_object_get(
            json_object_get(snap, "summary"), ICE_MARKERS_MOVED_KEY));
        if (id == cur) {
            ck_assert_int_eq(markers_in(snap), 3);
            ck_assert_ptr_null(to);
            continue;
        }
        ck_assert_msg(marker_keys_in(snap) == 0,
                      "snapshot %lld (not current) holds %d marker keys",
                      (long long)id, marker_keys_in(snap));
        ck_assert_ptr_nonnull(to);
        ck_assert_int_eq(strtoll(to, NULL, 10), child_of(meta, id));
    }
    ice_table_free(&t);
    ice_api->close(sink);
}
END_TEST

/* Writes META as the next version of the table (the loader probes past
 * the hint), as another writer would. */
static void publish_by_hand(ice_table *t, json_t *meta) {
    char path[700];
    snprintf(path, sizeof path, "%s/v%lld.metadata.json", t->meta_dir,
             (long long)t->version + 1);
    ck_assert_int_eq(json_dump_file(meta, path, JSON_COMPACT), 0);
}

/* main set to snapshot ID in a version written by hand on top of the
 * newest (as pyiceberg's rollback_to_snapshot does). */
static void roll_main_back(ice_table *t, int64_t id) {
    json_t *meta = json_deep_copy(newest_meta(t));
    ck_assert_int_eq(
        json_object_set_new(meta, "current-snapshot-id", json_integer(id)), 0);
    ck_assert_int_eq(
        json_object_set_new(json_object_get(meta, "refs"), "main",
                            json_pack("{s:I, s:s}", "snapshot-id",
                                      (json_int_t)id, "type", "branch")),
        0);
    publish_by_hand(t, meta);
    json_decref(meta);
}

/* A table written before the markers moved (every snapshot's summary
 * carrying every marker, no moved key) opens and appends: the markers
 * read back, the parent of the new snapshot gives its markers up, the
 * older snapshots are left as they were. */
START_TEST(table_with_markers_in_every_snapshot_appends) {
    void *sink = open_with("{\"path\": \"$T\"}");
    tm_marker m[3];
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, m, 3, &err), TM_OK);
    for (int k = 0; k < 3; k++)
        commit_part(sink, m[k].epoch, k, 0, 2);
    ice_api->close(sink);
    ice_table t;
    char why[512];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 0, why, sizeof why), 0);
    json_t *meta = json_deep_copy(newest_meta(&t));
    json_t *cur = json_object_get(ice_meta_current_snapshot(meta), "summary");
    size_t i;
    json_t *snap;
    json_array_foreach(json_object_get(meta, "snapshots"), i, snap) {
        json_t *sum = json_object_get(snap, "summary");
        const char *key;
        json_t *v;
        json_object_del(sum, ICE_MARKERS_MOVED_KEY);
        json_object_foreach(cur, key, v) {
            if (strncmp(key, ICE_MARKER_PREFIX, strlen(ICE_MARKER_PREFIX)) == 0)
                ck_assert_int_eq(json_object_set(sum, key, v), 0);
        }
        ck_assert_int_eq(markers_in(snap), 3);
    }
    publish_by_hand(&t, meta);
    sink = open_with("{\"path\": \"$T\"}");
    ck_assert_int_eq(ice_fx_claim(sink, m, 3, &err), TM_OK);
    want_next(sink, 2, 2, 2);
    commit_part(sink, m[0].epoch, 0, 2, 3);
    want_next(sink, 5, 2, 2);
    json_t *now = newest_meta(&t);
    int64_t id = ice_json_int(now, "current-snapshot-id", -1);
    json_array_foreach(json_object_get(now, "snapshots"), i, snap) {
        int64_t sid = ice_json_int(snap, "snapshot-id", -1);
        int64_t parent = ice_json_int(ice_meta_current_snapshot(now),
                                      "parent-snapshot-id", -1);
        int want = sid == parent ? 0 : 3;
        ck_assert_msg(markers_in(snap) == want &&
                          (want || !marker_keys_in(snap)),
                      "snapshot %lld (current %lld): markers of %d "
                      "partitions, want %d",
                      (long long)sid, (long long)id, markers_in(snap), want);
    }
    size_t rows = 0, dls = 0;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, NULL), 0);
    ck_assert_uint_eq(rows, 5);
    json_decref(meta);
    ice_table_free(&t);
    ice_api->close(sink);
}
END_TEST

/* main rolled back to the parent of the current snapshot (as pyiceberg's
 * rollback does): its markers moved on, so the table is refused, naming
 * both snapshots, by open (INVALID), read_markers, claim and commit
 * (FATAL), instead of being read as holding no markers. */
START_TEST(rolled_back_snapshot_refused) {
    void *sink = open_with("{\"path\": \"$T\"}");
    tm_marker m[3];
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_fx_claim(sink, m, 3, &err), TM_OK);
    for (int k = 0; k < 3; k++)
        commit_part(sink, m[k].epoch, k, 0, 2);
    ice_table t;
    char why[512];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 0, why, sizeof why), 0);
    json_t *meta = newest_meta(&t);
    int64_t cur = ice_json_int(meta, "current-snapshot-id", -1);
    int64_t parent =
        ice_json_int(ice_meta_current_snapshot(meta), "parent-snapshot-id", -1);
    ck_assert_int_gt(parent, 0);
    roll_main_back(&t, parent);
    char want[64];
    snprintf(want, sizeof want, "moved to snapshot %lld", (long long)cur);
    tm_marker got[1] = {
        {.struct_size = sizeof got[0], .topic = "orders", .partition = 1}};
    ck_assert_int_eq(ice_api->read_markers(sink, got, 1, &err), TM_FATAL);
    ck_assert_msg(strstr(err.message, want) && strstr(err.message, "rolled"),
                  "%s", err.message);
    ck_assert_int_eq(ice_fx_claim(sink, m, 3, &err), TM_FATAL);
    ck_assert_msg(strstr(err.message, want), "%s", err.message);
    ice_api->close(sink);
    void *again = NULL;
    ck_assert_int_eq(ice_fx_open(&fx, &again, &err), TM_INVALID);
    ck_assert_msg(strstr(err.message, want), "%s", err.message);
    ice_table_free(&t);
}
END_TEST

/* main rolled back past a compaction, to the compaction's parent (as
 * pyiceberg's rollback_to_snapshot would, "undoing" the compaction):
 * the rows of the batches after it leave the current table, and a claim
 * made after them (every restart claims) records the marker past them.
 * Were the parent still holding its markers, that claim's record (a
 * higher sequence number) would win over them and the connector would
 * go on after the rolled-back rows: a gap Kafka never delivers again. So
 * the compaction takes its parent's markers as an append does, and the
 * table is refused, naming the snapshot they moved to. */
START_TEST(rolled_back_past_a_compaction_refused) {
    void *sink = open_with("{\"path\": \"$T\"}");
    tm_marker m[1];
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_fx_claim(sink, m, 1, &err), TM_OK);
    commit_part(sink, m[0].epoch, 0, 0, 5);
    commit_part(sink, m[0].epoch, 0, 5, 5);
    ice_table t;
    char why[512];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 0, why, sizeof why), 0);
    ice_compact_result res;
    ck_assert_msg(ice_compact(&t, 1 << 20, &res, why, sizeof why) == 0, "%s",
                  why);
    json_t *meta = newest_meta(&t);
    int64_t parent =
        ice_json_int(ice_meta_current_snapshot(meta), "parent-snapshot-id", -1);
    ck_assert_int_gt(parent, 0);
    commit_part(sink, m[0].epoch, 0, 10, 10);
    ice_api->close(sink);
    sink = open_with("{\"path\": \"$T\"}");
    ck_assert_int_eq(ice_fx_claim(sink, m, 1, &err), TM_OK);
    ck_assert_int_eq(m[0].next_offset, 20);
    roll_main_back(&t, parent);
    char want[64];
    snprintf(want, sizeof want, "moved to snapshot %lld",
             (long long)res.snapshot_id);
    tm_marker got[1] = {
        {.struct_size = sizeof got[0], .topic = "orders", .partition = 0}};
    tm_status r = ice_api->read_markers(sink, got, 1, &err);
    ck_assert_msg(r == TM_FATAL && strstr(err.message, want),
                  "main rolled back to snapshot %lld (rows 0-9; 10-19 rolled "
                  "back): read_markers %s, next offset %lld (%s)",
                  (long long)parent, tm_status_name(r),
                  (long long)got[0].next_offset, err.message);
    ck_assert_int_eq(ice_fx_claim(sink, m, 1, &err), TM_FATAL);
    ck_assert_msg(strstr(err.message, want), "%s", err.message);
    ice_api->close(sink);
    ice_table_free(&t);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("iceberg_lite_commit_cost");
    TCase *tc = tcase_create("commit_cost");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, metadata_json_is_compact);
    tcase_add_test(tc, indented_table_still_appends);
    tcase_add_test(tc, one_barrier_and_one_fsync_per_commit);
    tcase_add_test(tc, no_sync_calls_without_fsync);
    tcase_add_test(tc, created_directories_are_durable_at_open);
    tcase_add_test(tc, directory_added_to_a_table_is_durable_at_open);
    tcase_add_test(tc, manifest_merges_cost_bounded);
    tcase_add_test(tc, dead_letter_index_cost_bounded);
    tcase_add_test(tc, hint_reuses_two_inodes);
    tcase_add_test(tc, markers_only_in_the_current_snapshot);
    tcase_add_test(tc, table_with_markers_in_every_snapshot_appends);
    tcase_add_test(tc, rolled_back_snapshot_refused);
    tcase_add_test(tc, rolled_back_past_a_compaction_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
