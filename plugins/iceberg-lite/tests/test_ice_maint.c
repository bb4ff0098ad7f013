/* The maintenance operations (maint.h) on tables written through the
 * plugin: compact keeps every row exactly once and the markers unchanged;
 * expire keeps N snapshots, the markers and every dead letter; vacuum
 * removes old orphans only; and a compact racing connector commits (at
 * the link, and from another thread) loses neither side's commit. */
#define _XOPEN_SOURCE 700 /* glob, utimensat */

#include <check.h>
#include <fcntl.h>
#include <glob.h>
#include <jansson.h>
#include <pthread.h>
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

static ice_fx fx;

static void setup(void) {
    ck_assert_int_eq(ice_fx_init(&fx, ""), 0);
}

static void teardown(void) {
    ice_fx_done(&fx, 0);
}

static size_t count_files(const char *pattern_rel) {
    char pat[512];
    glob_t g;
    snprintf(pat, sizeof pat, "%s/%s", fx.table, pattern_rel);
    if (glob(pat, 0, NULL, &g) != 0)
        return 0;
    size_t n = g.gl_pathc;
    globfree(&g);
    return n;
}

static void *open_ok(void) {
    void *sink;
    tm_error err;
    tm_status rc = ice_fx_open(&fx, &sink, &err);
    ck_assert_msg(rc == TM_OK, "open: %s: %s", tm_status_name(rc), err.message);
    return sink;
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

/* Claims p0 and p1, then commits n batches of 5 offsets to each. */
static void *fill(int n, tm_marker *m) {
    void *sink = open_ok();
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, m, 2, &err), TM_OK);
    for (int i = 0; i < n; i++)
        for (int32_t p = 0; p < 2; p++)
            ck_assert_int_eq(
                commit_range(sink, p, m[p].epoch, 5 * i, 5 * i + 5, &err),
                TM_OK);
    return sink;
}

static void table_open(ice_table *t) {
    char why[1024];
    ck_assert_int_eq(ice_table_init(t, fx.table, 0, 1, why, sizeof why), 0);
    int rc = ice_table_refresh(t, why, sizeof why);
    ck_assert_msg(rc == 0, "refresh: %s", why);
}

/* Every row of the current snapshot, counted per (partition, offset). */
#define MAXOFF 400
typedef struct seen {
    int count[2][MAXOFF];
    int bad;
} seen;

static int on_row(void *ctx, const pq_cell *cells, size_t n) {
    seen *s = ctx;
    int64_t p = cells[n - 2].i, o = cells[n - 1].i;
    if (p < 0 || p > 1 || o < 0 || o >= MAXOFF) {
        s->bad = 1;
        return 0;
    }
    /* id (column 0) derives from the offset: the row is not mixed up. */
    if (cells[0].i != o)
        s->bad = 1;
    s->count[p][o]++;
    return 0;
}

/* Every offset below end[p] that is not a dead letter appears exactly
 * once; nothing else appears. */
static void assert_rows_once(const int64_t end[2]) {
    ice_table t;
    ice_datafile *files;
    size_t n;
    char why[1024];
    static seen s;
    memset(&s, 0, sizeof s);
    table_open(&t);
    ck_assert_int_eq(ice_snapshot_datafiles(&t,
                                            ice_meta_current_snapshot(t.meta),
                                            &files, &n, why, sizeof why),
                     0);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(
            ice_file_rows(files[i].path, on_row, &s, why, sizeof why) == 0,
            "%s", why);
    ice_datafiles_free(files, n);
    ice_table_free(&t);
    ck_assert(!s.bad);
    for (int p = 0; p < 2; p++)
        for (int64_t o = 0; o < MAXOFF; o++)
            ck_assert_msg(s.count[p][o] == (o < end[p] && o % 5 != 4),
                          "p%d offset %lld seen %d times", p, (long long)o,
                          s.count[p][o]);
}

static void assert_same_marker(const tm_marker *a, const tm_marker *b) {
    ck_assert_int_eq(a->next_offset, b->next_offset);
    ck_assert_int_eq(a->epoch, b->epoch);
    ck_assert_uint_eq(a->rows, b->rows);
    ck_assert_uint_eq(a->dead_letters, b->dead_letters);
    ck_assert_str_eq(a->last_batch_id, b->last_batch_id);
}

static const char *current_op(void) {
    static char op[32];
    ice_table t;
    table_open(&t);
    json_t *sum = json_object_get(ice_meta_current_snapshot(t.meta), "summary");
    snprintf(op, sizeof op, "%s",
             json_string_value(json_object_get(sum, "operation")));
    ice_table_free(&t);
    return op;
}

/* ---- compact ------------------------------------------------------------ */

START_TEST(compact_keeps_rows_and_markers) {
    tm_marker m[2], before[2], after[2];
    void *sink = fill(6, m);
    for (int p = 0; p < 2; p++)
        read1(sink, p, &before[p]);
    ck_assert_uint_eq(count_files("data/*.parquet"), 12);

    ice_table t;
    ice_compact_result res;
    char why[1024];
    table_open(&t);
    int rc = ice_compact(&t, 1 << 20, &res, why, sizeof why);
    ck_assert_msg(rc == 0, "compact: %s", why);
    ck_assert_uint_eq(res.files_in, 12);
    ck_assert_uint_eq(res.files_out, 1);
    ck_assert_int_eq(res.rows, 2 * 6 * 4);
    json_t *snap = ice_meta_current_snapshot(t.meta);
    json_t *sum = json_object_get(snap, "summary");
    ck_assert_str_eq(json_string_value(json_object_get(sum, "operation")),
                     "replace");
    ck_assert_str_eq(json_string_value(json_object_get(sum, "total-records")),
                     "48");
    ck_assert_str_eq(json_string_value(json_object_get(
                         sum, "tidemark.marker.unit/orders/1.next-offset")),
                     "30");
    /* Nothing left to do the second time. */
    ck_assert_int_eq(ice_compact(&t, 1 << 20, &res, why, sizeof why), 1);
    ice_table_free(&t);
    ck_assert_str_eq(current_op(), "replace");

    for (int p = 0; p < 2; p++) {
        read1(sink, p, &after[p]);
        assert_same_marker(&before[p], &after[p]);
    }
    int64_t end[2] = {30, 30};
    assert_rows_once(end);
    /* The connector goes on: a replay is ALREADY, the next batch OK. */
    tm_error err;
    ck_assert_int_eq(commit_range(sink, 0, m[0].epoch, 25, 30, &err),
                     TM_ALREADY);
    ck_assert_int_eq(commit_range(sink, 0, m[0].epoch, 30, 35, &err), TM_OK);
    size_t rows, dls;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, NULL), 0);
    ck_assert_uint_eq(rows, 28);
    ck_assert_uint_eq(dls, 7);
    ice_api->close(sink);
    end[0] = 35;
    assert_rows_once(end);
}
END_TEST

/* ---- expire ------------------------------------------------------------- */

static size_t count_dead_letters(void) {
    size_t rows, dls, total = 0;
    void *sink = open_ok();
    for (int32_t p = 0; p < 2; p++) {
        ck_assert_int_eq(ice_fx_scan_count(sink, p, &rows, &dls, NULL), 0);
        total += dls;
    }
    ice_api->close(sink);
    return total;
}

START_TEST(expire_keeps_markers_and_dead_letters) {
    tm_marker m[2], before[2], after[2];
    void *sink = fill(4, m); /* 8 snapshots, each with a dead letter */
    for (int p = 0; p < 2; p++)
        read1(sink, p, &before[p]);
    ck_assert_uint_eq(count_dead_letters(), 8);

    ice_table t;
    size_t removed;
    char why[1024];
    table_open(&t);
    int rc = ice_expire(&t, 2, &removed, why, sizeof why);
    ck_assert_msg(rc == 0, "expire: %s", why);
    ck_assert_uint_eq(removed, 6);
    ck_assert_uint_eq(json_array_size(json_object_get(t.meta, "snapshots")), 2);
    ck_assert_uint_eq(json_array_size(json_object_get(t.meta, "snapshot-log")),
                      2);
    ck_assert_ptr_nonnull(json_object_get(json_object_get(t.meta, "properties"),
                                          ICE_DL_INDEX_KEY));
    ck_assert_int_eq(ice_expire(&t, 2, &removed, why, sizeof why), 1);
    ice_table_free(&t);

    for (int p = 0; p < 2; p++) {
        read1(sink, p, &after[p]);
        assert_same_marker(&before[p], &after[p]);
    }
    ck_assert_uint_eq(count_dead_letters(), 8);
    /* More commits, then a second expire: the index carries the first. */
    tm_error err;
    ck_assert_int_eq(commit_range(sink, 0, m[0].epoch, 20, 25, &err), TM_OK);
    ice_api->close(sink);
    table_open(&t);
    ck_assert_int_eq(ice_expire(&t, 1, &removed, why, sizeof why), 0);
    ck_assert_uint_eq(removed, 2);
    ice_table_free(&t);
    ck_assert_uint_eq(count_dead_letters(), 9);
    int64_t end[2] = {25, 20};
    assert_rows_once(end);
    ck_assert_int_eq(ice_expire(&t, 0, &removed, why, sizeof why), -1);
}
END_TEST

/* The sink's keep_snapshots setting: each commit expires past it. */
START_TEST(commits_expire_past_keep_snapshots) {
    ice_fx_done(&fx, 0);
    ck_assert_int_eq(ice_fx_init(&fx, "\"keep_snapshots\": 3"), 0);
    tm_marker m[2];
    void *sink = fill(4, m); /* 8 snapshots, each with a dead letter */
    ice_table t;
    table_open(&t);
    ck_assert_uint_eq(json_array_size(json_object_get(t.meta, "snapshots")), 3);
    ice_table_free(&t);
    tm_marker got;
    read1(sink, 0, &got);
    ck_assert_int_eq(got.next_offset, 20);
    ck_assert_uint_eq(got.rows, 16);
    ck_assert_uint_eq(got.dead_letters, 4);
    ice_api->close(sink);
    ck_assert_uint_eq(count_dead_letters(), 8);
    int64_t end[2] = {20, 20};
    assert_rows_once(end);
    /* Out of range is refused at open. */
    ice_fx_done(&fx, 0);
    ck_assert_int_eq(ice_fx_init(&fx, "\"keep_snapshots\": -1"), 0);
    tm_error err;
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_msg(strstr(err.message, "$.sink.settings.keep_snapshots: "
                                      "expected an integer from 0 to 1000000, "
                                      "found integer -1"),
                  "%s", err.message);
}
END_TEST

/* ---- vacuum ------------------------------------------------------------- */

static void make_file(const char *rel, time_t age) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s", fx.table, rel);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "PAR1", 4), 4);
    close(fd);
    if (age) {
        struct timespec ts[2] = {{time(NULL) - age, 0}, {time(NULL) - age, 0}};
        ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
    }
}

/* Every file of the table two hours old: only references keep them. */
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

/* The data, manifest and dead-letter files on disk now (a commit's
 * in-flight ones among them), to be made young again after
 * age_everything: a vacuum then leaves them. */
typedef struct file_set {
    glob_t g[3];
} file_set;

static void files_now(file_set *f) {
    const char *pats[] = {"data/*.parquet", "metadata/*.avro",
                          "dead_letters/*"};
    for (int k = 0; k < 3; k++) {
        char pat[512];
        snprintf(pat, sizeof pat, "%s/%s", fx.table, pats[k]);
        memset(&f->g[k], 0, sizeof f->g[k]);
        int rc = glob(pat, 0, NULL, &f->g[k]);
        ck_assert(rc == 0 || rc == GLOB_NOMATCH);
    }
}

static void files_touch_free(file_set *f) {
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < f->g[k].gl_pathc; i++)
            ck_assert_int_eq(utimensat(AT_FDCWD, f->g[k].gl_pathv[i], NULL, 0),
                             0);
        globfree(&f->g[k]);
    }
}

/* The staged temp metadata young again (after age_everything). */
static void touch_staged(void) {
    char pat[600];
    glob_t g;
    snprintf(pat, sizeof pat, "%s/metadata/tmp-*.metadata.json.part", fx.table);
    ck_assert_int_eq(glob(pat, 0, NULL, &g), 0);
    for (size_t i = 0; i < g.gl_pathc; i++)
        ck_assert_int_eq(utimensat(AT_FDCWD, g.gl_pathv[i], NULL, 0), 0);
    globfree(&g);
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

/* The property naming the dead-letter index segments, copied. */
static char *index_property(void) {
    ice_table t;
    table_open(&t);
    const char *v = json_string_value(json_object_get(
        json_object_get(t.meta, "properties"), ICE_DL_INDEX_KEY));
    char *copy = v ? strdup(v) : NULL;
    ice_table_free(&t);
    return copy;
}

static size_t segments_in(const char *prop) {
    size_t n = 0;
    for (const char *c = prop; c && *c; c++)
        n += *c == ' ';
    return prop && *prop ? n + 1 : 0;
}

/* What a version before segments leaves: the lines of META's segments
 * (then EXTRA, a line, when not NULL) in one file dead_letters/NAME, named
 * bare, published as the version after T's. Returns the lines written. */
static size_t publish_index_as(const ice_table *t, json_t *meta,
                               const char *extra, const char *name) {
    char old[4600], rel_old[4200];
    snprintf(rel_old, sizeof rel_old, "dead_letters/%s", name);
    snprintf(old, sizeof old, "%s/%s", fx.table, rel_old);
    FILE *out = fopen(old, "w");
    ck_assert_ptr_nonnull(out);
    const char *p = json_string_value(
        json_object_get(json_object_get(meta, "properties"), ICE_DL_INDEX_KEY));
    char rel[4096];
    int64_t bytes;
    size_t lines = 0;
    while (p && ice_dl_index_next(&p, rel, sizeof rel, &bytes) == 1) {
        char path[4500];
        snprintf(path, sizeof path, "%s/%s", fx.table, rel);
        FILE *in = fopen(path, "r");
        ck_assert_ptr_nonnull(in);
        int c;
        while ((c = fgetc(in)) != EOF) {
            lines += c == '\n';
            fputc(c, out);
        }
        fclose(in);
    }
    if (extra) {
        fprintf(out, "%s\n", extra);
        lines++;
    }
    fclose(out);
    ck_assert_int_eq(json_object_set_new(json_object_get(meta, "properties"),
                                         ICE_DL_INDEX_KEY,
                                         json_string(rel_old)),
                     0);
    char next[700];
    snprintf(next, sizeof next, "%s/v%lld.metadata.json", t->meta_dir,
             (long long)t->version + 1);
    ck_assert_int_eq(json_dump_file(meta, next, JSON_COMPACT), 0);
    return lines;
}

static size_t publish_older_index(const ice_table *t, json_t *meta,
                                  const char *extra) {
    return publish_index_as(t, meta, extra, "index-older.txt");
}

/* Segments merge: 16 snapshots with a dead letter each, keep_snapshots
 * 1, list fewer segments than expiries; a table whose index is a single
 * file named by a bare path (as written before segments) reads it, and
 * its next expiry adds a segment beside it; vacuum then removes the
 * merged and replaced segments only, every dead letter read once. */
START_TEST(dead_letter_segments_merge_and_old_index_reads) {
    ice_fx_done(&fx, 0);
    ck_assert_int_eq(ice_fx_init(&fx, "\"keep_snapshots\": 1"), 0);
    tm_marker m[2];
    void *sink = fill(8, m); /* 16 snapshots, 15 expiries */
    ice_api->close(sink);
    ck_assert_uint_eq(count_dead_letters(), 16);
    char *prop = index_property();
    ck_assert_ptr_nonnull(prop);
    ck_assert_msg(segments_in(prop) < 15, "%s", prop);
    /* All the segments' lines in one file, named bare: an older index. */
    ice_table t;
    table_open(&t);
    json_t *meta = json_deep_copy(t.meta);
    ck_assert_uint_eq(publish_older_index(&t, meta, NULL), 15);
    json_decref(meta);
    ice_table_free(&t);
    ck_assert_uint_eq(count_dead_letters(), 16);
    /* One more batch on each partition: two expiries. */
    sink = open_ok();
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, m, 2, &err), TM_OK);
    for (int32_t q = 0; q < 2; q++)
        ck_assert_int_eq(commit_range(sink, q, m[q].epoch, 40, 45, &err),
                         TM_OK);
    ice_api->close(sink);
    char *now = index_property();
    ck_assert_msg(strncmp(now, "dead_letters/index-older.txt ", 29) == 0 &&
                      segments_in(now) == 3,
                  "%s", now);
    ck_assert_uint_eq(count_dead_letters(), 18);
    /* The segments of before are unreferenced now: vacuum takes them. */
    age_everything();
    vacuum(0);
    ck_assert_uint_eq(count_dead_letters(), 18);
    ck_assert_uint_eq(count_files("dead_letters/index-*.txt"), 3);
    char old[600];
    snprintf(old, sizeof old, "%s/dead_letters/index-older.txt", fx.table);
    ck_assert_int_eq(access(old, F_OK), 0);
    free(prop);
    free(now);
}
END_TEST

/* A table an older version expired with a tag on the current snapshot's
 * parent: that version listed the tagged snapshot's dead-letter file in
 * its index (a bare path) at once, while the walk still reached the
 * snapshot, and left it out when the snapshot left the walk. The expiry
 * that takes the snapshot off the walk now must not list it again. */
START_TEST(older_index_listing_a_tagged_snapshot_read_once) {
    ice_fx_done(&fx, 0);
    ck_assert_int_eq(ice_fx_init(&fx, "\"keep_snapshots\": 2"), 0);
    tm_marker m[2];
    void *sink = fill(2, m); /* 4 snapshots, 2 expired */
    ice_api->close(sink);
    ck_assert_uint_eq(count_dead_letters(), 4);
    ice_table t;
    table_open(&t);
    json_t *meta = json_deep_copy(t.meta);
    int64_t parent =
        ice_json_int(ice_meta_current_snapshot(meta), "parent-snapshot-id", -1);
    const char *tagged = json_string_value(json_object_get(
        json_object_get(ice_meta_snapshot(meta, parent), "summary"),
        ICE_DL_FILE_KEY));
    ck_assert_ptr_nonnull(tagged);
    json_t *tag = json_pack("{s:I, s:s}", "snapshot-id", (json_int_t)parent,
                            "type", "tag");
    ck_assert_int_eq(
        json_object_set_new(json_object_get(meta, "refs"), "keep", tag), 0);
    /* The older index: the segments' lines, then the tagged file. */
    ck_assert_uint_eq(publish_older_index(&t, meta, tagged), 3);
    json_decref(meta);
    ice_table_free(&t);
    /* As that version left it the tagged file is in the index and on the
     * walk: one file, read once. */
    ck_assert_uint_eq(count_dead_letters(), 4);
    /* Two batches: the tagged snapshot leaves the walk (kept for its tag). */
    sink = open_ok();
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, m, 2, &err), TM_OK);
    for (int32_t q = 0; q < 2; q++)
        ck_assert_int_eq(commit_range(sink, q, m[q].epoch, 10, 15, &err),
                         TM_OK);
    ice_api->close(sink);
    table_open(&t);
    ck_assert_ptr_nonnull(ice_meta_snapshot(t.meta, parent));
    ice_table_free(&t);
    ck_assert_uint_eq(count_dead_letters(), 6);
}
END_TEST

/* A segment whose path is longer than 255 bytes (another writer's, or a
 * hand-made name: the readers take up to 4095) is merged and listed like
 * any other, instead of every expiry failing on it, each commit then
 * answering RETRY for ever ("a path too long"). */
START_TEST(long_segment_path_expires) {
    ice_fx_done(&fx, 0);
    ck_assert_int_eq(ice_fx_init(&fx, "\"keep_snapshots\": 1"), 0);
    tm_marker m[2];
    void *sink = fill(2, m); /* 4 snapshots, 3 expired */
    ice_api->close(sink);
    char name[300];
    memset(name, 'L', sizeof name);
    memcpy(name, "index-", 6);
    snprintf(name + 245, sizeof name - 245, ".txt"); /* 249 bytes */
    ice_table t;
    table_open(&t);
    json_t *meta = json_deep_copy(t.meta);
    ck_assert_uint_eq(publish_index_as(&t, meta, NULL, name), 3);
    json_decref(meta);
    ice_table_free(&t);
    ck_assert_uint_eq(count_dead_letters(), 4);
    sink = open_ok();
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, m, 2, &err), TM_OK);
    for (int32_t q = 0; q < 2; q++) {
        tm_status st = commit_range(sink, q, m[q].epoch, 10, 15, &err);
        ck_assert_msg(st == TM_OK, "commit beside a long segment path: %d %s",
                      st, err.message);
    }
    ice_api->close(sink);
    ck_assert_uint_eq(count_dead_letters(), 6);
}
END_TEST

/* The dead-letter files ice_dl_files hands on, and how many of them came
 * more than once. */
typedef struct dl_walk {
    char rel[64][200];
    size_t n, twice;
} dl_walk;

static int on_dl_file(void *ctx, const char *rel) {
    dl_walk *w = ctx;
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->rel[i], rel) == 0) {
            w->twice++;
            return 0;
        }
    ck_assert_uint_lt(w->n, 64);
    snprintf(w->rel[w->n++], sizeof w->rel[0], "%s", rel);
    return 0;
}

/* main set back to a tagged snapshot (pyiceberg's manage_snapshots, an
 * operator undoing commits) that expiry had taken off the walk: its
 * dead-letter file is in an index segment and on the walk again, and is
 * one file, read once. */
START_TEST(rolled_back_to_a_tag_reads_its_dead_letters_once) {
    ice_fx_done(&fx, 0);
    ck_assert_int_eq(ice_fx_init(&fx, "\"keep_snapshots\": 1"), 0);
    tm_marker m[2];
    void *sink = fill(1, m); /* A, B: a dead letter each */
    ice_api->close(sink);
    ice_table t;
    table_open(&t);
    json_t *meta = json_deep_copy(t.meta);
    json_int_t tagged = ice_json_int(meta, "current-snapshot-id", -1);
    json_t *tag = json_pack("{s:I, s:s}", "snapshot-id", tagged, "type", "tag");
    ck_assert_int_eq(
        json_object_set_new(json_object_get(meta, "refs"), "keep", tag), 0);
    char next[700];
    snprintf(next, sizeof next, "%s/v%lld.metadata.json", t.meta_dir,
             (long long)t.version + 1);
    ck_assert_int_eq(json_dump_file(meta, next, JSON_COMPACT), 0);
    json_decref(meta);
    ice_table_free(&t);
    /* C and D: B leaves the walk (kept for its tag, its file indexed). */
    sink = open_ok();
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, m, 2, &err), TM_OK);
    for (int32_t q = 0; q < 2; q++) {
        tm_status st = commit_range(sink, q, m[q].epoch, 5, 10, &err);
        ck_assert_msg(st == TM_OK, "commit: %d %s", st, err.message);
    }
    ice_api->close(sink);
    table_open(&t);
    meta = json_deep_copy(t.meta);
    ck_assert_ptr_nonnull(ice_meta_snapshot(meta, tagged));
    ck_assert_int_eq(
        json_object_set_new(meta, "current-snapshot-id", json_integer(tagged)),
        0);
    ck_assert_int_eq(json_object_set_new(
                         json_object_get(json_object_get(meta, "refs"), "main"),
                         "snapshot-id", json_integer(tagged)),
                     0);
    dl_walk w = {.n = 0};
    char why[1024];
    ck_assert_msg(ice_dl_files(t.root, meta, on_dl_file, &w, why, sizeof why) ==
                      0,
                  "%s", why);
    json_decref(meta);
    ice_table_free(&t);
    ck_assert_msg(w.n >= 3, "inconclusive: %zu dead-letter files", w.n);
    ck_assert_msg(w.twice == 0,
                  "main rolled back to a tagged snapshot: %zu dead-letter "
                  "file(s) handed on twice",
                  w.twice);
}
END_TEST

START_TEST(vacuum_removes_old_orphans_only) {
    tm_marker m[2];
    void *sink = fill(3, m);
    ice_api->close(sink);
    size_t data = count_files("data/*.parquet");
    size_t meta = count_files("metadata/*");
    size_t dl = count_files("dead_letters/*");
    age_everything();
    make_file("data/1-0-orphan-old.parquet", 7200);
    make_file("data/1-0-orphan-young.parquet", 0);
    make_file("metadata/tmp-orphan.metadata.json.part", 7200);
    make_file("dead_letters/1-orphan.jsonl", 7200);
    ck_assert_uint_eq(vacuum(3600), 3);
    ck_assert_uint_eq(count_files("data/*.parquet"), data + 1);
    ck_assert_uint_eq(count_files("data/1-0-orphan-young.parquet"), 1);
    ck_assert_uint_eq(count_files("dead_letters/*"), dl);
    ck_assert_uint_eq(count_files("metadata/*"), meta);
    int64_t end[2] = {15, 15};
    assert_rows_once(end);
    ck_assert_uint_eq(count_dead_letters(), 6);
    /* A grace of 0 takes the young orphan too, still nothing referenced. */
    ck_assert_uint_eq(vacuum(0), 1);
    ck_assert_uint_eq(count_files("data/*.parquet"), data);

    /* After compact and expire, what they made unreachable goes. */
    ice_table t;
    ice_compact_result res;
    size_t removed;
    char why[1024];
    table_open(&t);
    ck_assert_int_eq(ice_compact(&t, 1 << 20, &res, why, sizeof why), 0);
    ck_assert_int_eq(ice_expire(&t, 1, &removed, why, sizeof why), 0);
    ice_table_free(&t);
    age_everything();
    ck_assert_uint_gt(vacuum(3600), data);
    ck_assert_uint_eq(count_files("data/*.parquet"), 1);
    /* The dead letters are still all there (the index and its files). */
    ck_assert_uint_eq(count_dead_letters(), 6);
    assert_rows_once(end);
    sink = open_ok();
    tm_marker got;
    read1(sink, 1, &got);
    ck_assert_int_eq(got.next_offset, 15);
    ice_api->close(sink);
}
END_TEST

/* A file whose mtime is past 2262 (a bad clock, `touch -d`) is younger
 * than any grace period, not wrapped into the distant past: vacuum keeps
 * it, and neither overflows nor deletes it (nanoseconds since 1970 no
 * longer fit 64 bits there). An ordinary old orphan beside it goes: vacuum
 * ran and deleted. */
START_TEST(vacuum_keeps_a_far_future_file) {
    tm_marker m[2];
    void *sink = fill(1, m);
    ice_api->close(sink);
    size_t data = count_files("data/*.parquet");
    make_file("data/1-0-orphan-old.parquet", 7200);
    make_file("data/1-0-orphan-2300.parquet", 0);
    char path[600];
    snprintf(path, sizeof path, "%s/data/1-0-orphan-2300.parquet", fx.table);
    /* 2300-01-01T00:00:00Z */
    struct timespec far[2] = {{INT64_C(10413792000), 5},
                              {INT64_C(10413792000), 5}};
    ck_assert_int_eq(utimensat(AT_FDCWD, path, far, 0), 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_msg(st.st_mtim.tv_sec == far[1].tv_sec,
                  "inconclusive: the file system stored the mtime %lld, not "
                  "one in 2300",
                  (long long)st.st_mtim.tv_sec);
    ck_assert_uint_eq(vacuum(0), 1);
    ck_assert_uint_eq(count_files("data/1-0-orphan-old.parquet"), 0);
    ck_assert_uint_eq(count_files("data/1-0-orphan-2300.parquet"), 1);
    ck_assert_uint_eq(vacuum(ICE_GRACE_MAX), 0);
    ck_assert_uint_eq(count_files("data/*.parquet"), data + 1);
    int64_t end[2] = {5, 5};
    assert_rows_once(end);
}
END_TEST

/* ---- vacuum beside a writer whose cached version is stale -------------- */

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

/* The highest v<N>.metadata.json on disk and the hint's number. */
static int64_t newest_version(void) {
    char pat[512];
    glob_t g;
    int64_t best = 0;
    snprintf(pat, sizeof pat, "%s/metadata/v*.metadata.json", fx.table);
    if (glob(pat, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            long long v = strtoll(strrchr(g.gl_pathv[i], '/') + 2, NULL, 10);
            best = v > best ? v : best;
        }
        globfree(&g);
    }
    return best;
}

static int64_t hint_version(void) {
    char path[512], text[32] = "";
    snprintf(path, sizeof path, "%s/metadata/version-hint.text", fx.table);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(text, sizeof text, f))
        text[0] = '\0';
    fclose(f);
    return strtoll(text, NULL, 10);
}

/* Writer a commits once and idles; writer b (another instance on the same
 * table) advances the table by far more versions than the metadata log
 * keeps; vacuum deletes the old versions, a's cached one and the one after
 * it included. a's next commit must land on top of b's newest version,
 * never reuse a freed number, and lose none of b's rows. drop_hint: the
 * hint is gone too, so a finds the newest version without it. */
static void stale_writer_after_vacuum(int drop_hint) {
    void *a = open_ok(), *b = open_ok();
    tm_marker ma = claim_one(a, 0), mb = claim_one(b, 1);
    tm_error err;
    ck_assert_int_eq(commit_range(a, 0, ma.epoch, 0, 5, &err), TM_OK);
    for (int i = 0; i < 14; i++)
        ck_assert_msg(commit_range(b, 1, mb.epoch, 5 * i, 5 * i + 5, &err) ==
                          TM_OK,
                      "b: %s", err.message);
    int64_t before = newest_version();
    ck_assert_int_ge(before, 18);
    ck_assert_uint_gt(vacuum(0), 0);
    /* The fault is where intended: a's next version number is gone. */
    char path[600];
    snprintf(path, sizeof path, "%s/metadata/v5.metadata.json", fx.table);
    ck_assert_msg(access(path, F_OK) != 0, "inconclusive: v5 not vacuumed");
    if (drop_hint) {
        snprintf(path, sizeof path, "%s/metadata/version-hint.text", fx.table);
        ck_assert_int_eq(unlink(path), 0);
    }
    tm_status rc = commit_range(a, 0, ma.epoch, 5, 10, &err);
    ck_assert_msg(rc == TM_OK, "a: %s: %s", tm_status_name(rc), err.message);
    ck_assert_int_eq(newest_version(), before + 1);
    ck_assert_int_eq(hint_version(), before + 1);
    int64_t end[2] = {10, 70};
    assert_rows_once(end);
    /* A second vacuum keeps everything both writers committed. */
    vacuum(0);
    assert_rows_once(end);
    ck_assert_int_eq(commit_range(b, 1, mb.epoch, 70, 75, &err), TM_OK);
    end[1] = 75;
    assert_rows_once(end);
    tm_marker got;
    read1(a, 0, &got);
    ck_assert_int_eq(got.next_offset, 10);
    read1(a, 1, &got);
    ck_assert_int_eq(got.next_offset, 75);
    ice_api->close(a);
    ice_api->close(b);
}

START_TEST(vacuum_beside_stale_writer_reuses_no_version) {
    stale_writer_after_vacuum(0);
}
END_TEST

START_TEST(vacuum_beside_stale_writer_without_hint) {
    stale_writer_after_vacuum(1);
}
END_TEST

/* Writer a has staged its next metadata on v<N> when writer b advances
 * the table past the metadata log and a vacuum (grace 0) deletes v<N> and
 * v<N+1>: a's link would take a freed number. It must undo it and answer
 * RETRY (outcome unknown); the resend lands on top of b's newest. */
static void *inflight_b;
static tm_marker inflight_mb;
static int inflight_done;
static char inflight_base[600];

static void advance_and_vacuum_at_link(const char *point) {
    if (inflight_done || strcmp(point, TM_FAULT_AFTER_MARKER) != 0)
        return;
    inflight_done = 1;
    tm_error err;
    /* a's own files are young: only its base version goes. */
    file_set own;
    files_now(&own);
    for (int i = 0; i < 14; i++)
        ck_assert_int_eq(commit_range(inflight_b, 1, inflight_mb.epoch, 5 * i,
                                      5 * i + 5, &err),
                         TM_OK);
    /* Everything old but a's files, as if a's commit had been slower than
     * the grace period's worth of b's commits. */
    age_everything();
    touch_staged();
    files_touch_free(&own);
    vacuum(3600);
    snprintf(inflight_base, sizeof inflight_base,
             "%s/metadata/v%lld.metadata.json", fx.table,
             (long long)(newest_version() - 14));
}

START_TEST(vacuum_during_a_commit_reuses_no_version) {
    void *a = open_ok();
    inflight_b = open_ok();
    tm_marker ma = claim_one(a, 0);
    inflight_mb = claim_one(inflight_b, 1);
    ice_api->close(a);
    tm_host_api host = *tm_host_services();
    host.fault = advance_and_vacuum_at_link;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_api->open(&host, &fx.config, &a, &err), TM_OK);
    inflight_done = 0;
    int64_t base = newest_version();
    tm_status rc = commit_range(a, 0, ma.epoch, 0, 5, &err);
    /* The fault happened where intended: a's base version is gone. */
    ck_assert_msg(inflight_done, "inconclusive: no commit reached the link");
    ck_assert_msg(access(inflight_base, F_OK) != 0 &&
                      base == newest_version() - 14,
                  "inconclusive: v%lld was not vacuumed", (long long)base);
    ck_assert_msg(rc == TM_RETRY, "a: %s: %s", tm_status_name(rc), err.message);
    ck_assert_msg(strstr(err.message, "vacuumed"), "%s", err.message);
    ck_assert_int_eq(newest_version(), base + 14);
    int64_t end[2] = {0, 70};
    assert_rows_once(end);
    /* The host's resend. */
    rc = commit_range(a, 0, ma.epoch, 0, 5, &err);
    ck_assert_msg(rc == TM_OK, "resend: %s: %s", tm_status_name(rc),
                  err.message);
    ck_assert_int_eq(newest_version(), base + 15);
    ck_assert_int_eq(hint_version(), base + 15);
    end[0] = 5;
    assert_rows_once(end);
    ice_api->close(a);
    ice_api->close(inflight_b);
}
END_TEST

/* A commit stalled between writing its files and linking (the hook, at
 * the link) while a vacuum took them (old enough by their mtime: a floor
 * shorter than the stall): the check before the link finds them gone and
 * the commit writes the batch again, publishing no version that names a
 * missing file. */
static int took_inflight;
static size_t inflight_files;

static void vacuum_inflight_at_link(const char *point) {
    if (took_inflight || strcmp(point, TM_FAULT_AFTER_MARKER) != 0)
        return;
    took_inflight = 1;
    inflight_files = count_files("data/*.parquet");
    age_everything();
    touch_staged(); /* the data file and manifests are what goes */
    vacuum(3600);
}

START_TEST(commit_writes_again_files_vacuum_took) {
    tm_marker m[2];
    void *sink = fill(2, m);
    ice_api->close(sink);
    int64_t base = newest_version();
    tm_host_api host = *tm_host_services();
    host.fault = vacuum_inflight_at_link;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_api->open(&host, &fx.config, &sink, &err), TM_OK);
    took_inflight = 0;
    tm_status rc = commit_range(sink, 0, m[0].epoch, 10, 15, &err);
    /* The fault happened where intended: the in-flight file went. */
    ck_assert_msg(took_inflight, "inconclusive: no commit reached the link");
    ck_assert_msg(inflight_files == 5,
                  "inconclusive: %zu data files at the link, not 4 + 1",
                  inflight_files);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
    ck_assert_int_eq(newest_version(), base + 1);
    ice_api->close(sink);
    int64_t end[2] = {15, 10};
    assert_rows_once(end);
}
END_TEST

/* ---- compact racing a connector ----------------------------------------- */

static int compacted;

/* Runs a compact between the connector's temp file and its link: the
 * compact wins v<N+1>, the connector must re-check and go on top. */
static void compact_at_link(const char *point) {
    if (compacted || strcmp(point, TM_FAULT_AFTER_MARKER) != 0)
        return;
    compacted = 1;
    ice_table t;
    ice_compact_result res;
    char why[1024];
    table_open(&t);
    int rc = ice_compact(&t, 1 << 20, &res, why, sizeof why);
    ck_assert_msg(rc == 0, "compact: %s", why);
    ice_table_free(&t);
}

START_TEST(compact_wins_the_link_race) {
    tm_marker m[2];
    void *sink = fill(3, m);
    ice_api->close(sink);
    tm_host_api host = *tm_host_services();
    host.fault = compact_at_link;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_api->open(&host, &fx.config, &sink, &err), TM_OK);
    compacted = 0;
    ck_assert_int_eq(commit_range(sink, 1, m[1].epoch, 15, 20, &err), TM_OK);
    ck_assert_int_eq(compacted, 1);
    ck_assert_str_eq(current_op(), "append");
    ice_api->close(sink);
    int64_t end[2] = {15, 20};
    assert_rows_once(end);
    sink = open_ok();
    tm_marker got;
    read1(sink, 1, &got);
    ck_assert_int_eq(got.next_offset, 20);
    read1(sink, 0, &got);
    ck_assert_int_eq(got.next_offset, 15);
    ice_api->close(sink);
}
END_TEST

/* A stop asked for during a compaction (the callback, asked before each
 * file is read) ends it there: nothing published, its new files gone. */
static int stop_calls;

static int stop_on_second(void *ctx) {
    (void)ctx;
    return ++stop_calls >= 2;
}

START_TEST(compact_stops_between_files) {
    tm_marker m[2];
    void *sink = fill(3, m);
    ice_api->close(sink);
    size_t before = count_files("data/*.parquet");
    ice_table t;
    table_open(&t);
    ice_compact_opts o = {.target = 1 << 20,
                          .small_below = 1 << 20,
                          .max_bytes = INT64_MAX,
                          .min_files = 2,
                          .codec = PQ_CODEC_DEFAULT,
                          .stop = stop_on_second};
    ice_compact_result res;
    char why[1024];
    stop_calls = 0;
    int rc = ice_compact_with(&t, &o, &res, why, sizeof why);
    ice_table_free(&t);
    ck_assert_msg(stop_calls == 2, "inconclusive: asked %d times", stop_calls);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(why, "stopped"), "%s", why);
    ck_assert_str_eq(current_op(), "append");
    ck_assert_uint_eq(count_files("data/*.parquet"), before);
    int64_t end[2] = {15, 15};
    assert_rows_once(end);
}
END_TEST

/* A connector's compaction (max_age_ms) whose new files got older than
 * its bound before the link (the stop callback lets time pass: 5 ms
 * against a bound of 1 ms) publishes nothing. */
static int let_time_pass(void *ctx) {
    (void)ctx;
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return 0;
}

START_TEST(compact_too_old_publishes_nothing) {
    tm_marker m[2];
    void *sink = fill(3, m);
    ice_api->close(sink);
    size_t before = count_files("data/*.parquet");
    ice_table t;
    table_open(&t);
    ice_compact_opts o = {.target = 1 << 20,
                          .small_below = 1 << 20,
                          .max_bytes = INT64_MAX,
                          .min_files = 2,
                          .codec = PQ_CODEC_DEFAULT,
                          .stop = let_time_pass,
                          .max_age_ms = 1};
    ice_compact_result res;
    char why[1024];
    int rc = ice_compact_with(&t, &o, &res, why, sizeof why);
    ice_table_free(&t);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(why, "more than the 1 ms"), "%s", why);
    ck_assert_str_eq(current_op(), "append");
    ck_assert_uint_eq(count_files("data/*.parquet"), before);
    int64_t end[2] = {15, 15};
    assert_rows_once(end);
}
END_TEST

/* A compaction's work is bounded, not only its publish: once half the
 * writers' bound has passed (here the stall of TIDEMARK_FAULT_STALL_MS,
 * 130 s of the 240 s, at every check) it takes no more input files and
 * publishes what it rewrote (the first two small files: a merge needs
 * two); the next run goes on with the rest. Before, a table whose
 * compaction takes longer than the bound was refused at every run. */
START_TEST(compact_bounded_work_publishes_part) {
    tm_marker m[2];
    void *sink = fill(3, m);
    ice_api->close(sink);
    size_t before = count_files("data/*.parquet");
    ck_assert_uint_ge(before, 4); /* else inconclusive */
    ice_table t;
    table_open(&t);
    ice_compact_result res;
    char why[1024];
    setenv(ICE_FAULT_STALL_ENV, "130000", 1);
    int rc = ice_compact(&t, 1 << 20, &res, why, sizeof why);
    unsetenv(ICE_FAULT_STALL_ENV);
    ck_assert_msg(rc == 0, "a compaction past half its bound: %d %s", rc, why);
    ck_assert_str_eq(current_op(), "replace");
    ck_assert_msg(res.files_in == 2 && res.files_out == 1 && res.more,
                  "it took %zu files into %zu (more: %d), want 2 into 1 and "
                  "more to do (of %zu)",
                  res.files_in, res.files_out, res.more, before);
    int64_t end[2] = {15, 15};
    assert_rows_once(end);
    /* The next run, in time, takes the rest. */
    ck_assert_int_eq(ice_table_refresh(&t, why, sizeof why), 0);
    rc = ice_compact(&t, 1 << 20, &res, why, sizeof why);
    ice_table_free(&t);
    ck_assert_msg(rc == 0, "the next run: %d %s", rc, why);
    ck_assert_uint_eq(res.files_in, before - 1);
    ck_assert_int_eq(res.more, 0);
    assert_rows_once(end);
}
END_TEST

/* Past the bound already before a file is read (the stall of 240 001 ms),
 * no file is read at all: the run learns it at once, not after rewriting
 * the table (the stop callback counts the files it was about to read). */
static int count_reads(void *ctx) {
    (void)ctx;
    stop_calls++;
    return 0;
}

START_TEST(compact_past_bound_reads_nothing) {
    tm_marker m[2];
    void *sink = fill(3, m);
    ice_api->close(sink);
    size_t before = count_files("data/*.parquet");
    ice_table t;
    table_open(&t);
    ice_compact_opts o = {.target = 1 << 20,
                          .small_below = 1 << 20,
                          .max_bytes = INT64_MAX,
                          .min_files = 2,
                          .codec = PQ_CODEC_DEFAULT,
                          .stop = count_reads,
                          .max_age_ms = ICE_PUBLISH_MAX_MS};
    ice_compact_result res;
    char why[1024];
    stop_calls = 0;
    setenv(ICE_FAULT_STALL_ENV, "240001", 1);
    int rc = ice_compact_with(&t, &o, &res, why, sizeof why);
    unsetenv(ICE_FAULT_STALL_ENV);
    ice_table_free(&t);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(why, "more than the 240000 ms"), "%s", why);
    ck_assert_msg(stop_calls == 0,
                  "FINDING: a compaction past its bound read %d files before "
                  "refusing",
                  stop_calls);
    ck_assert_uint_eq(count_files("data/*.parquet"), before);
}
END_TEST

/* A compaction whose new files another writer's vacuum deleted while it
 * was staged (the fault point between stage and link) publishes nothing:
 * its check before the link finds them gone. */
static glob_t before_compact;
static int deleted_new;

static void delete_new_files_at_stage(const char *point) {
    if (strcmp(point, ICE_FAULT_MAINT_STAGED) != 0)
        return;
    char pat[512];
    glob_t g;
    snprintf(pat, sizeof pat, "%s/data/*.parquet", fx.table);
    ck_assert_int_eq(glob(pat, 0, NULL, &g), 0);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        int old = 0;
        for (size_t k = 0; k < before_compact.gl_pathc; k++)
            old |= strcmp(g.gl_pathv[i], before_compact.gl_pathv[k]) == 0;
        if (!old) {
            ck_assert_int_eq(unlink(g.gl_pathv[i]), 0);
            deleted_new++;
        }
    }
    globfree(&g);
}

START_TEST(compact_publishes_no_missing_file) {
    tm_marker m[2];
    void *sink = fill(3, m);
    ice_api->close(sink);
    char pat[512];
    snprintf(pat, sizeof pat, "%s/data/*.parquet", fx.table);
    ck_assert_int_eq(glob(pat, 0, NULL, &before_compact), 0);
    ice_owner_hooks h = {.fault = delete_new_files_at_stage};
    ice_table t;
    table_open(&t);
    t.hooks = &h;
    ice_compact_result res;
    char why[1024];
    deleted_new = 0;
    int rc = ice_compact(&t, 1 << 20, &res, why, sizeof why);
    ice_table_free(&t);
    globfree(&before_compact);
    ck_assert_msg(deleted_new > 0, "inconclusive: no new file at the stage");
    ck_assert_msg(rc == -1, "compact: %d: %s", rc, why);
    ck_assert_msg(strstr(why, "deleted before"), "%s", why);
    ck_assert_str_eq(current_op(), "append");
    int64_t end[2] = {15, 15};
    assert_rows_once(end);
}
END_TEST

#define RACE_BATCHES 30

typedef struct racer {
    tm_marker m;
    int failed, compactions;
    char why[1100];
} racer;

static void *connector(void *p) {
    racer *a = p;
    void *sink;
    tm_error err = {sizeof err, ""};
    if (ice_fx_open(&fx, &sink, &err) != TM_OK) {
        a->failed = 1;
        snprintf(a->why, sizeof a->why, "open: %s", err.message);
        return NULL;
    }
    tm_status rc = TM_OK;
    for (int i = 3; rc == TM_OK && i < 3 + RACE_BATCHES; i++)
        rc = commit_range(sink, 0, a->m.epoch, 5 * i, 5 * i + 5, &err);
    if (rc != TM_OK) {
        a->failed = 1;
        snprintf(a->why, sizeof a->why, "%s: %s", tm_status_name(rc),
                 err.message);
    }
    ice_api->close(sink);
    return NULL;
}

static void *compactor(void *p) {
    racer *a = p;
    for (int i = 0; i < 10 && !a->failed; i++) {
        ice_table t;
        ice_compact_result res;
        char why[1024];
        if (ice_table_init(&t, fx.table, 0, 1, why, sizeof why) != 0) {
            a->failed = 1;
            snprintf(a->why, sizeof a->why, "init: %s", why);
            break;
        }
        int rc = ice_compact(&t, 1 << 20, &res, why, sizeof why);
        ice_table_free(&t);
        if (rc < 0) {
            a->failed = 1;
            snprintf(a->why, sizeof a->why, "compact: %s", why);
        }
        a->compactions += rc == 0;
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    return NULL;
}

START_TEST(compact_and_connector_lose_nothing) {
    tm_marker m[2];
    void *sink = fill(3, m);
    ice_api->close(sink);
    racer a[2] = {{.m = m[0]}, {.m = m[0]}};
    pthread_t th[2];
    ck_assert_int_eq(pthread_create(&th[0], NULL, connector, &a[0]), 0);
    ck_assert_int_eq(pthread_create(&th[1], NULL, compactor, &a[1]), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_join(th[i], NULL), 0);
        ck_assert_msg(!a[i].failed, "%s: %s", i ? "compactor" : "connector",
                      a[i].why);
    }
    ck_assert_int_gt(a[1].compactions, 0);
    int64_t end[2] = {5 * (3 + RACE_BATCHES), 15};
    assert_rows_once(end);
    sink = open_ok();
    tm_marker got;
    read1(sink, 0, &got);
    ck_assert_int_eq(got.next_offset, end[0]);
    read1(sink, 1, &got);
    ck_assert_int_eq(got.next_offset, 15);
    ice_api->close(sink);
}
END_TEST

/* ---- background maintenance (ice_auto.c) -------------------------------- */

#define AUTO_SETTINGS                                                          \
    "\"maintenance\": true, \"maintenance_min_files\": 4, "                    \
    "\"maintenance_grace_seconds\": 0, \"keep_snapshots\": 3, "                \
    "\"maintenance_vacuum_interval_seconds\": 0, "                             \
    "\"maintenance_min_age_seconds\": 0"

/* How many snapshots of META are of operation OP. */
static size_t snapshots_of(json_t *meta, const char *op) {
    size_t i, n = 0;
    json_t *snap;
    json_array_foreach(json_object_get(meta, "snapshots"), i, snap) {
        const char *o = json_string_value(
            json_object_get(json_object_get(snap, "summary"), "operation"));
        n += o && strcmp(o, op) == 0;
    }
    return n;
}

static size_t live_files(void) {
    ice_table t;
    ice_datafile *files;
    size_t n;
    char why[1024];
    table_open(&t);
    ck_assert_msg(ice_snapshot_datafiles(&t, ice_meta_current_snapshot(t.meta),
                                         &files, &n, why, sizeof why) == 0,
                  "%s", why);
    ice_datafiles_free(files, n);
    ice_table_free(&t);
    return n;
}

/* 16 batches of one file each: without maintenance the snapshot holds 16
 * files and the directory 16; with it (4 small files start a compaction,
 * grace 0) at most 4 stay live and vacuum removed the replaced ones from
 * the directory; every row once, the markers as the batches left them. */
START_TEST(auto_maintenance_bounds_files) {
    tm_marker m[2];
    void *sink = fill(8, m);
    ice_api->close(sink);
    size_t off_live = live_files(), off_dir = count_files("data/*.parquet");
    ck_assert_uint_eq(off_live, 16);
    ck_assert_uint_eq(off_dir, 16);
    ice_fx_done(&fx, 0);
    ck_assert_int_eq(ice_fx_init(&fx, AUTO_SETTINGS), 0);
    sink = fill(8, m);
    tm_marker got[2];
    read1(sink, 0, &got[0]);
    read1(sink, 1, &got[1]);
    ice_api->close(sink);
    size_t on_live = live_files(), on_dir = count_files("data/*.parquet");
    ck_assert_msg(on_live <= 4 && on_live < off_live,
                  "maintenance on: %zu live files (off: %zu)", on_live,
                  off_live);
    /* A vacuum after every batch that did not compact, grace 0: the
     * files the compactions replaced went once the 3 snapshots kept no
     * longer named them (the directory holds the live files, those the
     * kept snapshots name, and the compactions' new files: fewer than the
     * 16 batch files only if vacuum removed some). */
    ck_assert_msg(on_dir < off_dir,
                  "maintenance on: %zu files in data/ (off: %zu)", on_dir,
                  off_dir);
    ice_table t;
    table_open(&t);
    ck_assert_uint_gt(snapshots_of(t.meta, "replace") +
                          (strcmp(current_op(), "replace") == 0),
                      0);
    ice_table_free(&t);
    int64_t end[2] = {40, 40};
    assert_rows_once(end);
    sink = open_ok();
    for (int32_t p = 0; p < 2; p++) {
        tm_marker now;
        read1(sink, p, &now);
        assert_same_marker(&now, &got[p]);
        ck_assert_int_eq(now.next_offset, 40);
    }
    ice_api->close(sink);
}
END_TEST

/* A maintenance commit staged on top of the version its fence checked;
 * another host claims the partitions before it links (the hook below, at
 * the fault point between stage and link): the link loses, the reload
 * sees the newer epoch, and the zombie publishes nothing. */
static int claimed_at_stage;

static void claim_at_maint_stage(const char *point) {
    if (strcmp(point, ICE_FAULT_MAINT_STAGED) != 0 || claimed_at_stage)
        return;
    claimed_at_stage = 1;
    void *other;
    tm_error err = {sizeof err, ""};
    tm_marker m[2];
    ck_assert_int_eq(ice_fx_open(&fx, &other, &err), TM_OK);
    ck_assert_int_eq(ice_fx_claim(other, m, 2, &err), TM_OK);
    ice_api->close(other);
}

START_TEST(auto_maintenance_fenced_publishes_nothing) {
    ice_fx_done(&fx, 0);
    ck_assert_int_eq(ice_fx_init(&fx, AUTO_SETTINGS), 0);
    tm_host_api host = *tm_host_services();
    host.fault = claim_at_maint_stage;
    tm_error err = {sizeof err, ""};
    void *sink;
    ck_assert_int_eq(ice_api->open(&host, &fx.config, &sink, &err), TM_OK);
    tm_marker m[2];
    ck_assert_int_eq(ice_fx_claim(sink, m, 2, &err), TM_OK);
    claimed_at_stage = 0;
    /* The 4th batch's compaction stages, then the claim happens. */
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(
            commit_range(sink, 0, m[0].epoch, 5 * i, 5 * i + 5, &err), TM_OK);
    ck_assert_msg(claimed_at_stage,
                  "inconclusive: no maintenance commit reached its stage");
    ck_assert_int_eq(count_files("data/*.parquet"), 4);
    ice_table t;
    table_open(&t);
    ck_assert_uint_eq(snapshots_of(t.meta, "replace"), 0);
    ice_table_free(&t);
    ck_assert_str_eq(current_op(), "append");
    /* And its next batch is fenced, as any zombie's. */
    ck_assert_int_eq(commit_range(sink, 0, m[0].epoch, 20, 25, &err),
                     TM_FENCED);
    ice_api->close(sink);
    int64_t end[2] = {20, 0};
    assert_rows_once(end);
}
END_TEST

/* With a grace period, vacuum holds what it found unreferenced (a reader
 * of an older version may still read it): the same 16 batches, a vacuum
 * after each that did not compact, an hour's grace: every file the
 * compactions replaced is still in data/, with the files they wrote. */
START_TEST(auto_maintenance_grace_holds_files) {
    ice_fx_done(&fx, 0);
    ck_assert_int_eq(
        ice_fx_init(&fx, "\"maintenance\": true, \"maintenance_min_files\": 4, "
                         "\"maintenance_grace_seconds\": 3600, "
                         "\"keep_snapshots\": 3, "
                         "\"maintenance_vacuum_interval_seconds\": 0"),
        0);
    tm_marker m[2];
    void *sink = fill(8, m);
    ice_api->close(sink);
    size_t live = live_files(), dir = count_files("data/*.parquet");
    ck_assert_msg(live <= 4, "%zu live files", live);
    /* The 16 batch files, none deleted, and at least one compaction's. */
    ck_assert_msg(dir > 16, "%zu files in data/: vacuum deleted some", dir);
    int64_t end[2] = {40, 40};
    assert_rows_once(end);
}
END_TEST

/* The age floor (its default, 300 s) holds files written since, whatever
 * the grace: the same 16 batches, grace 0, a vacuum after each batch that
 * did not compact: every file (another writer's in flight would be among
 * them) is still in data/. */
START_TEST(auto_maintenance_age_floor_holds_young_files) {
    ice_fx_done(&fx, 0);
    ck_assert_int_eq(
        ice_fx_init(&fx, "\"maintenance\": true, \"maintenance_min_files\": 4, "
                         "\"maintenance_grace_seconds\": 0, "
                         "\"keep_snapshots\": 3, "
                         "\"maintenance_vacuum_interval_seconds\": 0"),
        0);
    tm_marker m[2];
    void *sink = fill(8, m);
    ice_api->close(sink);
    size_t live = live_files(), dir = count_files("data/*.parquet");
    ck_assert_msg(live <= 4, "inconclusive: %zu live files (no compaction)",
                  live);
    ck_assert_msg(dir > 16, "%zu files in data/: vacuum deleted young ones",
                  dir);
    int64_t end[2] = {40, 40};
    assert_rows_once(end);
}
END_TEST

/* Maintenance with every snapshot kept could never vacuum: refused, with
 * the setting's path, by open and validate alike. */
START_TEST(auto_maintenance_needs_expiry) {
    ice_fx_done(&fx, 0);
    ck_assert_int_eq(
        ice_fx_init(&fx, "\"maintenance\": true, \"keep_snapshots\": 0"), 0);
    void *sink;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_msg(strstr(err.message, "$.sink.settings.keep_snapshots: 0"),
                  "%s", err.message);
    err.message[0] = '\0';
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &err),
                     TM_INVALID);
    ck_assert_msg(strstr(err.message, "$.sink.settings.keep_snapshots: 0"),
                  "%s", err.message);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("iceberg_lite_maint");
    TCase *tc = tcase_create("maint");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, compact_keeps_rows_and_markers);
    tcase_add_test(tc, expire_keeps_markers_and_dead_letters);
    tcase_add_test(tc, commits_expire_past_keep_snapshots);
    tcase_add_test(tc, dead_letter_segments_merge_and_old_index_reads);
    tcase_add_test(tc, older_index_listing_a_tagged_snapshot_read_once);
    tcase_add_test(tc, long_segment_path_expires);
    tcase_add_test(tc, rolled_back_to_a_tag_reads_its_dead_letters_once);
    tcase_add_test(tc, vacuum_removes_old_orphans_only);
    tcase_add_test(tc, vacuum_keeps_a_far_future_file);
    tcase_add_test(tc, vacuum_beside_stale_writer_reuses_no_version);
    tcase_add_test(tc, vacuum_beside_stale_writer_without_hint);
    tcase_add_test(tc, vacuum_during_a_commit_reuses_no_version);
    tcase_add_test(tc, commit_writes_again_files_vacuum_took);
    tcase_add_test(tc, compact_wins_the_link_race);
    tcase_add_test(tc, compact_stops_between_files);
    tcase_add_test(tc, compact_publishes_no_missing_file);
    tcase_add_test(tc, compact_too_old_publishes_nothing);
    tcase_add_test(tc, compact_bounded_work_publishes_part);
    tcase_add_test(tc, compact_past_bound_reads_nothing);
    tcase_add_test(tc, compact_and_connector_lose_nothing);
    tcase_add_test(tc, auto_maintenance_bounds_files);
    tcase_add_test(tc, auto_maintenance_fenced_publishes_nothing);
    tcase_add_test(tc, auto_maintenance_age_floor_holds_young_files);
    tcase_add_test(tc, auto_maintenance_needs_expiry);
    tcase_add_test(tc, auto_maintenance_grace_holds_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
