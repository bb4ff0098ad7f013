/* The iceberg-lite sink through its plugin API (loaded like the host loads
 * it): the table layout and metadata a commit leaves, markers from the
 * snapshot summary and epochs from the properties, a writer losing the
 * race for the next version (another commit, or a claim that fences it),
 * recovery that does not trust version-hint.text, empty ranges, file
 * rolling, manifest merging, and refused settings and shapes. */
#define _XOPEN_SOURCE 700 /* nftw in the fixture, glob */

#include <check.h>
#include <glob.h>
#include <pthread.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include "ice_fixture.h"
#include "manifest.h"
#include "parquet_reader.h"
#include "pq_codec.h"
#include "services/host_services.h"

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

static json_t *load_version(int64_t v) {
    char path[512];
    json_error_t je;
    snprintf(path, sizeof path, "%s/metadata/v%lld.metadata.json", fx.table,
             (long long)v);
    json_t *m = json_load_file(path, 0, &je);
    ck_assert_msg(m != NULL, "%s: %s", path, je.text);
    return m;
}

static void *open_ok(void) {
    void *sink;
    tm_error err;
    tm_status rc = ice_fx_open(&fx, &sink, &err);
    ck_assert_msg(rc == TM_OK, "open: %s: %s", tm_status_name(rc), err.message);
    return sink;
}

static tm_status commit(void *sink, ice_fx_batch *kb, tm_error *err) {
    ice_fx_seal(kb);
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return ice_api->commit(sink, &kb->b, err);
}

static void read1(void *sink, int32_t p, tm_marker *m) {
    tm_error err = {sizeof err, ""};
    *m = (tm_marker){
        .struct_size = sizeof *m, .topic = "orders", .partition = p};
    ck_assert_int_eq(ice_api->read_markers(sink, m, 1, &err), TM_OK);
}

START_TEST(layout_and_markers) {
    void *sink = open_ok();
    tm_marker m[2];
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, m, 2, &err), TM_OK);
    ck_assert_int_eq(m[0].epoch, 1);
    ice_fx_batch kb;
    ice_fx_batch_init(&kb, "b-1");
    uint32_t r0 = ice_fx_range(&kb, 0, 0, 10, m[0].epoch);
    ice_fx_range(&kb, 1, 0, 5, m[1].epoch); /* empty: moves the marker */
    for (int64_t o = 0; o < 8; o++)
        ice_fx_record(&kb, r0, o);
    ice_fx_dead_letter(&kb, r0, 8);
    ice_fx_dead_letter(&kb, r0, 9);
    ck_assert_int_eq(commit(sink, &kb, &err), TM_OK);
    ck_assert_int_eq(commit(sink, &kb, &err), TM_ALREADY);
    ice_api->close(sink);

    /* v1 created the table, v2 is the claim, v3 the commit. */
    ck_assert_uint_eq(count_files("metadata/v*.metadata.json"), 3);
    ck_assert_uint_eq(count_files("metadata/*.part"), 0);
    ck_assert_uint_eq(count_files("data/*.parquet"), 1);
    ck_assert_uint_eq(count_files("dead_letters/*.jsonl"), 1);
    ck_assert_uint_eq(count_files("metadata/snap-*.avro"), 1);
    char hint[600];
    snprintf(hint, sizeof hint, "%s/metadata/version-hint.text", fx.table);
    FILE *f = fopen(hint, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fgetc(f), '3');
    fclose(f);

    json_t *meta = load_version(3);
    ck_assert_int_eq(
        json_integer_value(json_object_get(meta, "format-version")), 2);
    ck_assert_int_eq(
        strncmp(json_string_value(json_object_get(meta, "location")),
                "file:///", 8),
        0);
    json_t *snaps = json_object_get(meta, "snapshots");
    ck_assert_uint_eq(json_array_size(snaps), 1);
    json_t *snap = json_array_get(snaps, 0);
    json_int_t id = json_integer_value(json_object_get(snap, "snapshot-id"));
    ck_assert(id > 0 && id < ((json_int_t)1 << 53));
    ck_assert(
        json_integer_value(json_object_get(meta, "current-snapshot-id")) == id);
    json_t *sum = json_object_get(snap, "summary");
    ck_assert_str_eq(json_string_value(json_object_get(sum, "operation")),
                     "append");
    ck_assert_str_eq(json_string_value(json_object_get(
                         sum, "tidemark.marker.unit/orders/0.next-offset")),
                     "10");
    ck_assert_str_eq(json_string_value(json_object_get(
                         sum, "tidemark.marker.unit/orders/0.dead-letters")),
                     "2");
    ck_assert_str_eq(json_string_value(json_object_get(
                         sum, "tidemark.marker.unit/orders/1.next-offset")),
                     "5");
    ck_assert_str_eq(json_string_value(json_object_get(sum, "added-records")),
                     "8");
    ck_assert_ptr_nonnull(json_object_get(sum, "tidemark.dead-letters-file"));
    json_t *props = json_object_get(meta, "properties");
    ck_assert_str_eq(json_string_value(json_object_get(
                         props, "tidemark.marker.unit/orders/0.epoch")),
                     "1");
    ck_assert_uint_eq(json_array_size(json_object_get(meta, "metadata-log")),
                      2);
    json_decref(meta);

    sink = open_ok(); /* a fresh instance reads it all back */
    tm_marker got;
    read1(sink, 0, &got);
    ck_assert_int_eq(got.next_offset, 10);
    ck_assert_int_eq(got.epoch, 1);
    ck_assert_uint_eq(got.rows, 8);
    ck_assert_uint_eq(got.dead_letters, 2);
    ck_assert_str_eq(got.last_batch_id, "b-1");
    read1(sink, 1, &got);
    ck_assert_int_eq(got.next_offset, 5);
    read1(sink, 3, &got);
    ck_assert_int_eq(got.epoch, TM_NO_EPOCH);
    ck_assert_int_eq(got.next_offset, TM_NO_OFFSET);
    size_t rows, dls;
    int64_t max;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, &max), 0);
    ck_assert_uint_eq(rows, 8);
    ck_assert_uint_eq(dls, 2);
    ck_assert_int_eq(max, 9);
    ice_api->close(sink);
    ice_fx_batch_free(&kb);
}
END_TEST

/* ---- a second writer between our temp file and our link --------------- */

static void *rival;      /* the other instance */
static int rival_action; /* 1: commit p1, 2: claim p0 */
static const tm_host_api *real_host;
static int rival_done;

static void rival_fault(const char *point) {
    if (rival_done || strcmp(point, TM_FAULT_AFTER_MARKER) != 0)
        return;
    rival_done = 1;
    tm_error err = {sizeof err, ""};
    if (rival_action == 1) {
        tm_marker m;
        read1(rival, 1, &m);
        ice_fx_batch kb;
        ice_fx_batch_init(&kb, "rival-1");
        uint32_t r = ice_fx_range(&kb, 1, 0, 3, m.epoch);
        for (int64_t o = 0; o < 3; o++)
            ice_fx_record(&kb, r, o);
        ck_assert_int_eq(commit(rival, &kb, &err), TM_OK);
        ice_fx_batch_free(&kb);
    } else {
        tm_marker m = {.struct_size = sizeof m,
                       .topic = "orders",
                       .partition = 0,
                       .next_offset = 0};
        ck_assert_int_eq(ice_api->claim(rival, &m, 1, 0, &err), TM_OK);
    }
}

static void race(int action, tm_status want) {
    tm_host_api host = *tm_host_services();
    real_host = tm_host_services();
    host.fault = rival_fault;
    void *sink;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_api->open(&host, &fx.config, &sink, &err), TM_OK);
    rival = open_ok();
    tm_marker m[2];
    ck_assert_int_eq(ice_fx_claim(sink, m, 2, &err), TM_OK);
    rival_action = action;
    rival_done = 0;
    ice_fx_batch kb;
    ice_fx_batch_init(&kb, "mine-1");
    uint32_t r = ice_fx_range(&kb, 0, 0, 4, m[0].epoch);
    for (int64_t o = 0; o < 4; o++)
        ice_fx_record(&kb, r, o);
    tm_status rc = commit(sink, &kb, &err);
    ck_assert_msg(rc == want, "commit: %s (%s), want %s", tm_status_name(rc),
                  err.message, tm_status_name(want));
    ck_assert_int_eq(rival_done, 1);
    size_t rows, dls;
    ck_assert_int_eq(ice_fx_scan_count(rival, 0, &rows, &dls, NULL), 0);
    ck_assert_uint_eq(rows, want == TM_OK ? 4 : 0);
    ck_assert_int_eq(ice_fx_scan_count(rival, 1, &rows, &dls, NULL), 0);
    ck_assert_uint_eq(rows, action == 1 ? 3 : 0);
    tm_marker got;
    read1(rival, 0, &got);
    ck_assert_int_eq(got.next_offset, want == TM_OK ? 4 : 0);
    ice_api->close(sink);
    ice_api->close(rival);
    /* Only published files are left: the loser removed its own (counted
     * once both are closed: an open sink keeps its hint's spare). */
    ck_assert_uint_eq(count_files("metadata/*.part"), 0);
    ck_assert_uint_eq(count_files("data/*.parquet"),
                      (want == TM_OK) + (action == 1));
    ice_fx_batch_free(&kb);
}

START_TEST(race_with_a_commit) {
    race(1, TM_OK); /* re-checked on the rival's version, then published */
}
END_TEST

START_TEST(race_with_a_claim) {
    race(2, TM_FENCED); /* the rival raised p0's epoch meanwhile */
}
END_TEST

static void commit_one(void *sink, int64_t epoch, int64_t at, int n) {
    ice_fx_batch kb;
    char id[32];
    tm_error err;
    snprintf(id, sizeof id, "b-%lld", (long long)at);
    ice_fx_batch_init(&kb, id);
    uint32_t r = ice_fx_range(&kb, 0, at, at + n, epoch);
    for (int64_t o = at; o < at + n; o++)
        ice_fx_record(&kb, r, o);
    tm_status rc = commit(sink, &kb, &err);
    ck_assert_msg(rc == TM_OK, "commit at %lld: %s", (long long)at,
                  err.message);
    ice_fx_batch_free(&kb);
}

static void write_hint(const char *text) {
    char path[600];
    snprintf(path, sizeof path, "%s/metadata/version-hint.text", fx.table);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(hint_is_only_a_hint) {
    void *sink = open_ok();
    tm_marker m;
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    for (int i = 0; i < 5; i++)
        commit_one(sink, m.epoch, i * 2, 2);
    ice_api->close(sink);
    static const char *const hints[] = {"1", "", "junk", "999"};
    for (int k = 0; k < 5; k++) {
        if (k < 4) {
            write_hint(hints[k]);
        } else {
            char path[600];
            snprintf(path, sizeof path, "%s/metadata/version-hint.text",
                     fx.table);
            ck_assert_int_eq(unlink(path), 0);
        }
        sink = open_ok();
        tm_marker got;
        read1(sink, 0, &got);
        ck_assert_msg(got.next_offset == 10, "hint %d: marker at %lld", k,
                      (long long)got.next_offset);
        ice_api->close(sink);
    }
}
END_TEST

START_TEST(manifests_merge_and_files_roll) {
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\", "
                                          "\"target_file_size\": 65536}"),
                     0);
    void *sink = open_ok();
    tm_marker m;
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    for (int i = 0; i < 20; i++)
        commit_one(sink, m.epoch, i, 1);
    commit_one(sink, m.epoch, 20, 5000); /* rolls at 64 KiB */
    size_t rows, dls;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, NULL), 0);
    ck_assert_uint_eq(rows, 5020);
    ice_api->close(sink);
    size_t files = count_files("data/*.parquet");
    ck_assert_uint_gt(files, 21);

    /* The current manifest list stays short. */
    glob_t g;
    char pat[600];
    snprintf(pat, sizeof pat, "%s/metadata/v*.metadata.json", fx.table);
    ck_assert_int_eq(glob(pat, 0, NULL, &g), 0);
    int64_t last = (int64_t)g.gl_pathc;
    globfree(&g);
    json_t *meta = load_version(last);
    json_t *snaps = json_object_get(meta, "snapshots");
    json_t *cur = json_array_get(snaps, json_array_size(snaps) - 1);
    const char *list = json_string_value(json_object_get(cur, "manifest-list"));
    FILE *f = fopen(list + 7, "rb");
    ck_assert_ptr_nonnull(f);
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ice_mfile *mf;
    size_t nmf;
    ck_assert_int_eq(ice_manifest_list_decode(buf, n, &mf, &nmf), 0);
    ck_assert_uint_le(nmf, 8);
    int64_t total = 0;
    for (size_t i = 0; i < nmf; i++)
        total += mf[i].added_files + mf[i].existing_files;
    ck_assert_int_eq(total, (int64_t)files);
    ice_mfiles_free(mf, nmf);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(cur, "summary"), "total-records")),
                     "5020");
    json_decref(meta);
}
END_TEST

START_TEST(refusals) {
    void *sink;
    tm_error err;
    /* create false on a missing table */
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\", "
                                          "\"create\": false}"),
                     0);
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "\"path\""));
    /* bad target size, unknown key */
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\", "
                                          "\"target_file_size\": 10}"),
                     0);
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_msg(strstr(err.message, "$.sink.settings.target_file_size: "
                                      "expected an integer from 65536 to "
                                      "17179869184, found integer 10"),
                  "%s", err.message);
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\", \"fsnyc\": 1}"),
                     0);
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "fsnyc"));
    /* a table of another shape */
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\"}"), 0);
    sink = open_ok();
    ice_api->close(sink);
    size_t ncols = fx.config.ncolumns;
    fx.config.ncolumns = 2;
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    /* (a mapping that drops columns: schema evolution refuses it) */
    ck_assert_msg(strstr(err.message, "column \"amount\" (double, field id "
                                      "3), the mapping does not: dropping"),
                  "%s", err.message);
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &err),
                     TM_INVALID);
    fx.config.ncolumns = ncols;
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &err),
                     TM_OK);
    /* no dedup capability */
    fx.config.flags = TM_CONFIG_DEDUP;
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &err),
                     TM_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "dedup"));
    fx.config.flags = 0;
    /* hidden column names are the sink's */
    tm_column bad[] = {{sizeof(tm_column), "_tm_offset", TM_TYPE_INT, 0, 0}};
    const tm_column *keep = fx.config.columns;
    fx.config.columns = bad;
    fx.config.ncolumns = 1;
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    /* in any case: DuckDB matches column names without case */
    bad[0].name = "_TM_Offset";
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "\"_TM_Offset\": names"));
    fx.config.columns = keep;
    fx.config.ncolumns = ncols;
}
END_TEST

/* The codecs of the table's data files, as their footers say: a bit
 * (1 << codec) for each. */
static unsigned data_codecs(void) {
    char pat[512], why[256];
    glob_t g;
    snprintf(pat, sizeof pat, "%s/data/*.parquet", fx.table);
    ck_assert_int_eq(glob(pat, 0, NULL, &g), 0);
    unsigned seen = 0;
    static uint8_t data[1 << 20];
    for (size_t i = 0; i < g.gl_pathc; i++) {
        FILE *f = fopen(g.gl_pathv[i], "rb");
        ck_assert_ptr_nonnull(f);
        size_t n = fread(data, 1, sizeof data, f);
        ck_assert_int_eq(feof(f), 1); /* the whole file */
        fclose(f);
        pq_reader *r = pq_reader_open(data, n, why, sizeof why);
        ck_assert_msg(r != NULL, "%s", why);
        int codec = pq_reader_codec(r, 0);
        pq_reader_free(r);
        ck_assert_int_ge(codec, 0);
        seen |= 1u << codec;
    }
    globfree(&g);
    return seen;
}

/* "compression": zstd by default, snappy and none as settings, anything
 * else refused by open and validate naming the JSON path. A table whose
 * files are uncompressed (as every table written before the setting
 * existed) opens and appends in zstd, and scan reads both kinds. */
START_TEST(compression_setting) {
    void *sink;
    tm_error err;
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\", "
                                          "\"compression\": \"lz4\"}"),
                     0);
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_msg(strstr(err.message, "$.sink.settings.compression") &&
                      strstr(err.message, "\"lz4\"") &&
                      strstr(err.message, "\"zstd\", \"snappy\" or \"none\""),
                  "%s", err.message);
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &err),
                     TM_INVALID);
    ck_assert_msg(strstr(err.message, "$.sink.settings.compression"), "%s",
                  err.message);
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\", "
                                          "\"compression\": 6}"),
                     0);
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_msg(strstr(err.message, "compression"), "%s", err.message);

    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\", "
                                          "\"compression\": \"none\"}"),
                     0);
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &err),
                     TM_OK);
    sink = open_ok();
    tm_marker m;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    commit_one(sink, m.epoch, 0, 5);
    ice_api->close(sink);
    ck_assert_uint_eq(data_codecs(), 1u << PQ_CODEC_NONE);

    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\"}"), 0);
    sink = open_ok();
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    commit_one(sink, m.epoch, 5, 5);
    size_t rows = 0, dls = 0;
    int64_t max = -1;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, &max), 0);
    ck_assert_uint_eq(rows, 10);
    ck_assert_int_eq(max, 9);
    ice_api->close(sink);
    ck_assert_uint_eq(count_files("data/*.parquet"), 2);
    ck_assert_uint_eq(data_codecs(),
                      (1u << PQ_CODEC_NONE) | (1u << PQ_CODEC_ZSTD));
    /* snappy when asked */
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\", "
                                          "\"compression\": \"snappy\"}"),
                     0);
    sink = open_ok();
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    commit_one(sink, m.epoch, 10, 5);
    ice_api->close(sink);
    ck_assert_uint_eq(data_codecs(), (1u << PQ_CODEC_NONE) |
                                         (1u << PQ_CODEC_ZSTD) |
                                         (1u << PQ_CODEC_SNAPPY));
}
END_TEST

/* A connector name far longer than any fixed key buffer: each partition
 * keeps its own marker (a cut key would make p1 share p0's marker, so p1
 * [0,5) after p0 [0,10) would answer ALREADY and skip five records). */
START_TEST(marker_keys_never_truncated) {
    static char name[2101];
    memset(name, 'c', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    fx.config.connector = name;
    void *sink = open_ok();
    tm_marker m[2];
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, m, 2, &err), TM_OK);
    ice_fx_batch kb;
    ice_fx_batch_init(&kb, "long-p0");
    uint32_t r = ice_fx_range(&kb, 0, 0, 10, m[0].epoch);
    for (int64_t o = 0; o < 10; o++)
        ice_fx_record(&kb, r, o);
    ck_assert_int_eq(commit(sink, &kb, &err), TM_OK);
    ice_fx_batch_free(&kb);
    ice_fx_batch_init(&kb, "long-p1");
    r = ice_fx_range(&kb, 1, 0, 5, m[1].epoch);
    for (int64_t o = 0; o < 5; o++)
        ice_fx_record(&kb, r, o);
    tm_status rc = commit(sink, &kb, &err);
    ice_fx_batch_free(&kb);
    ck_assert_msg(rc == TM_OK, "p1: %s: %s", tm_status_name(rc), err.message);
    tm_marker got;
    read1(sink, 0, &got);
    ck_assert_int_eq(got.next_offset, 10);
    ck_assert_str_eq(got.last_batch_id, "long-p0");
    read1(sink, 1, &got);
    ck_assert_int_eq(got.next_offset, 5);
    ck_assert_str_eq(got.last_batch_id, "long-p1");
    size_t rows, dls;
    ck_assert_int_eq(ice_fx_scan_count(sink, 1, &rows, &dls, NULL), 0);
    ck_assert_uint_eq(rows, 5);
    /* The full key is in the metadata, untruncated. */
    ice_api->close(sink);
    json_t *meta = load_version(4);
    json_t *cur = json_array_get(json_object_get(meta, "snapshots"), 1);
    char key[2300];
    snprintf(key, sizeof key, "tidemark.marker.%s/orders/1.next-offset", name);
    ck_assert_str_eq(json_string_value(
                         json_object_get(json_object_get(cur, "summary"), key)),
                     "5");
    json_decref(meta);
    /* A claim after the commits carries both markers over. */
    sink = open_ok();
    ck_assert_int_eq(ice_fx_claim(sink, m, 2, &err), TM_OK);
    ck_assert_int_eq(m[0].next_offset, 10);
    ck_assert_int_eq(m[1].next_offset, 5);
    ice_api->close(sink);
    fx.config.connector = "unit";
}
END_TEST

/* A table directory whose path leaves no room for the file names built
 * under it: refused with a clear error, never written under cut names. */
START_TEST(long_table_path_refused_not_cut) {
    char part[201];
    memset(part, 'd', sizeof part - 1);
    part[sizeof part - 1] = '\0';
    ck_assert_int_eq(chdir(fx.dir), 0);
    /* About 4040 bytes in all, still below PATH_MAX. */
    size_t len = strlen(fx.dir);
    while (len + 201 < 4040 - 8) {
        ck_assert_int_eq(mkdir(part, 0755), 0);
        ck_assert_int_eq(chdir(part), 0);
        len += 201;
    }
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"table\"}"), 0);
    void *sink;
    tm_error err;
    tm_status rc = ice_fx_open(&fx, &sink, &err);
    if (rc == TM_OK)
        ice_api->close(sink);
    ck_assert_msg(rc == TM_INVALID && strstr(err.message, "bytes long"),
                  "%s: %s", tm_status_name(rc), err.message);
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &err),
                     TM_INVALID);
    ck_assert_msg(strstr(err.message, "bytes long"), "%s", err.message);
    ck_assert_int_eq(access("table/metadata", F_OK), -1);
}
END_TEST

/* validate refuses what open refuses: a table path whose parent
 * directory is missing (only the table's own directory is created). */
START_TEST(validate_refuses_missing_parent) {
    char json[1400];
    snprintf(json, sizeof json, "{\"path\": \"%s/no-such-dir/table\"}", fx.dir);
    ck_assert_int_eq(ice_fx_settings(&fx, json), 0);
    tm_error verr = {sizeof verr, ""}, oerr;
    tm_status v = ice_api->validate(tm_host_services(), &fx.config, &verr);
    void *sink;
    tm_status o = ice_fx_open(&fx, &sink, &oerr);
    if (o == TM_OK)
        ice_api->close(sink);
    ck_assert_msg(o == TM_INVALID, "open: %s", tm_status_name(o));
    ck_assert_msg(v == TM_INVALID, "validate: %s: %s", tm_status_name(v),
                  verr.message);
    ck_assert_str_eq(verr.message, oerr.message);
    ck_assert_msg(strstr(verr.message, "no-such-dir") &&
                      strstr(verr.message, "\"path\""),
                  "%s", verr.message);
    /* A file where the parent should be: the same. */
    char file[600];
    snprintf(file, sizeof file, "%s/plain-file", fx.dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    snprintf(json, sizeof json, "{\"path\": \"%s/table\"}", file);
    ck_assert_int_eq(ice_fx_settings(&fx, json), 0);
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &verr),
                     TM_INVALID);
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &oerr), TM_INVALID);
    ck_assert_str_eq(verr.message, oerr.message);
}
END_TEST

/* The sink's file:// locations are not percent-encoded, so a table
 * created where the real path holds '#', '?' or '%' is one readers cannot
 * open: refused at validate and at open (before any directory is made),
 * naming the setting's JSON path and the character, whether the directory
 * is missing or there without a table. An existing table at such a path
 * still opens (its writer is not locked out). */
START_TEST(uri_chars_refused_when_created) {
    static const char BAD[] = "#?%";
    char json[1400], path[700], want[8];
    tm_error verr = {sizeof verr, ""}, oerr = {sizeof oerr, ""};
    void *sink;
    for (int pass = 0; pass < 2; pass++) {
        for (const char *c = BAD; *c; c++) {
            snprintf(path, sizeof path, "%s/t%d%cx", fx.dir, pass, *c);
            if (pass == 1) /* there, but holding no table */
                ck_assert_int_eq(mkdir(path, 0755), 0);
            snprintf(json, sizeof json, "{\"path\": \"%s\"}", path);
            ck_assert_int_eq(ice_fx_settings(&fx, json), 0);
            tm_status v =
                ice_api->validate(tm_host_services(), &fx.config, &verr);
            tm_status o = ice_fx_open(&fx, &sink, &oerr);
            if (o == TM_OK)
                ice_api->close(sink);
            ck_assert_msg(v == TM_INVALID, "validate %s: %s", path,
                          tm_status_name(v));
            ck_assert_msg(o == TM_INVALID, "open %s: %s", path,
                          tm_status_name(o));
            ck_assert_str_eq(verr.message, oerr.message);
            snprintf(want, sizeof want, "'%c'", *c);
            ck_assert_msg(strstr(verr.message, "$.sink.settings.path") &&
                              strstr(verr.message, want),
                          "%s", verr.message);
            char sub[800];
            snprintf(sub, sizeof sub, "%s/metadata", path);
            ck_assert_msg(access(pass ? sub : path, F_OK) == -1, "%s was made",
                          pass ? sub : path);
        }
    }
    /* In a catalog the table's location is the same URI: the same. */
    snprintf(json, sizeof json,
             "{\"path\": \"%s/c#t\", \"catalog_uri\": \"sqlite:///%s/c.db\", "
             "\"catalog_name\": \"lake\", \"catalog_namespace\": \"ns\", "
             "\"catalog_table\": \"t\"}",
             fx.dir, fx.dir);
    ck_assert_int_eq(ice_fx_settings(&fx, json), 0);
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &verr),
                     TM_INVALID);
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &oerr), TM_INVALID);
    ck_assert_str_eq(verr.message, oerr.message);
    ck_assert_msg(strstr(oerr.message, "$.sink.settings.path") &&
                      strstr(oerr.message, "'#'"),
                  "%s", oerr.message);
    /* A space needs no escape pyiceberg does not do: accepted. */
    snprintf(json, sizeof json, "{\"path\": \"%s/sp ace\"}", fx.dir);
    ck_assert_int_eq(ice_fx_settings(&fx, json), 0);
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &verr),
                     TM_OK);
    /* A table made at a plain path, then its directory renamed to one
     * with '#': it still opens. */
    snprintf(json, sizeof json, "{\"path\": \"%s/plain\"}", fx.dir);
    ck_assert_int_eq(ice_fx_settings(&fx, json), 0);
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &oerr), TM_OK);
    ice_api->close(sink);
    char from[700];
    snprintf(from, sizeof from, "%s/plain", fx.dir);
    snprintf(path, sizeof path, "%s/old#t", fx.dir);
    ck_assert_int_eq(rename(from, path), 0);
    snprintf(json, sizeof json, "{\"path\": \"%s\"}", path);
    ck_assert_int_eq(ice_fx_settings(&fx, json), 0);
    tm_status v = ice_api->validate(tm_host_services(), &fx.config, &verr);
    ck_assert_msg(v == TM_OK, "%s", verr.message);
    tm_status o = ice_fx_open(&fx, &sink, &oerr);
    ck_assert_msg(o == TM_OK, "%s", oerr.message);
    ice_api->close(sink);
}
END_TEST

/* A tab, line feed or carriage return in the table's real path: URI
 * parsers (pyiceberg's, Python's urllib) drop them from a file:// URI, so
 * pyiceberg looked for the table's files elsewhere ("Failed to open local
 * file"). Refused when the table would be created, as '#' is. */
START_TEST(control_chars_refused_when_created) {
    static const struct {
        const char *json, *name;
        char c;
    } BAD[] = {{"\\t", "a tab", '\t'},
               {"\\n", "a line feed", '\n'},
               {"\\r", "a carriage return", '\r'}};
    char json[1400], path[700];
    tm_error verr = {sizeof verr, ""}, oerr = {sizeof oerr, ""};
    void *sink;
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        snprintf(json, sizeof json, "{\"path\": \"%s/t%sx\"}", fx.dir,
                 BAD[i].json);
        snprintf(path, sizeof path, "%s/t%cx", fx.dir, BAD[i].c);
        ck_assert_int_eq(ice_fx_settings(&fx, json), 0);
        tm_status v = ice_api->validate(tm_host_services(), &fx.config, &verr);
        tm_status o = ice_fx_open(&fx, &sink, &oerr);
        if (o == TM_OK)
            ice_api->close(sink);
        ck_assert_msg(v == TM_INVALID, "validate %s: %s", BAD[i].name,
                      tm_status_name(v));
        ck_assert_msg(o == TM_INVALID, "open %s: %s", BAD[i].name,
                      tm_status_name(o));
        ck_assert_str_eq(verr.message, oerr.message);
        ck_assert_msg(strstr(verr.message, "$.sink.settings.path") &&
                          strstr(verr.message, BAD[i].name),
                      "%s", verr.message);
        ck_assert_msg(access(path, F_OK) == -1, "%s was made", BAD[i].name);
    }
}
END_TEST

/* Opens the table as connector NAME with its own config (the sink keeps
 * a pointer to it). */
static tm_status open_as(const char *name, tm_sink_config *cfg, void **sink,
                         tm_error *err) {
    *cfg = fx.config;
    cfg->connector = name;
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return ice_api->open(tm_host_services(), cfg, sink, err);
}

static void assert_names_unit(const char *msg) {
    ck_assert_msg(strstr(msg, "\"unit\"") && strstr(msg, "shared_table") &&
                      strstr(msg, fx.table),
                  "%s", msg);
}

/* A second connector on a table whose markers are another's: refused at
 * open (and validate), and at claim when both opened the table before
 * either claimed; accepted with "shared_table": true set by both. */
START_TEST(second_connector_refused) {
    tm_sink_config cb;
    void *a = open_ok(), *b;
    tm_marker m, mb;
    tm_error err;
    /* No markers yet: nothing to refuse. */
    ck_assert_int_eq(open_as("other", &cb, &b, &err), TM_OK);
    ck_assert_int_eq(ice_fx_claim(a, &m, 1, &err), TM_OK);
    commit_one(a, m.epoch, 0, 3);
    /* b's claim sees unit's markers: refused. */
    mb = (tm_marker){.struct_size = sizeof mb,
                     .topic = "orders",
                     .partition = 1,
                     .next_offset = 0};
    tm_status rc = ice_api->claim(b, &mb, 1, 0, &err);
    ck_assert_msg(rc == TM_FATAL, "claim: %s: %s", tm_status_name(rc),
                  err.message);
    assert_names_unit(err.message);
    ice_api->close(b);
    /* A fresh open of "other": refused, and by validate the same way. */
    rc = open_as("other", &cb, &b, &err);
    if (rc == TM_OK)
        ice_api->close(b);
    ck_assert_msg(rc == TM_INVALID, "open: %s", tm_status_name(rc));
    assert_names_unit(err.message);
    tm_error verr = {sizeof verr, ""};
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &cb, &verr),
                     TM_INVALID);
    ck_assert_str_eq(verr.message, err.message);
    /* Meant: shared_table true, in both: other alone setting it is still
     * refused (unit never consented); once unit's claim records it, other
     * is accepted. */
    ck_assert_int_eq(
        ice_fx_settings(&fx, "{\"path\": \"$T\", \"shared_table\": true}"), 0);
    cb.settings = fx.config.settings;
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &cb, &verr),
                     TM_INVALID);
    assert_names_unit(verr.message);
    ice_api->close(a);
    a = open_ok();
    ck_assert_int_eq(ice_fx_claim(a, &m, 1, &err), TM_OK);
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &cb, &verr), TM_OK);
    ck_assert_int_eq(open_as("other", &cb, &b, &err), TM_OK);
    ck_assert_int_eq(ice_api->claim(b, &mb, 1, 0, &err), TM_OK);
    ice_fx_batch kb;
    ice_fx_batch_init(&kb, "other-1");
    uint32_t r = ice_fx_range(&kb, 1, 0, 2, mb.epoch);
    ice_fx_record(&kb, r, 0);
    ice_fx_record(&kb, r, 1);
    ck_assert_int_eq(commit(b, &kb, &err), TM_OK);
    ice_fx_batch_free(&kb);
    ice_api->close(b);
    ice_api->close(a);
    /* Now the table holds other's markers too: unit without the setting
     * is refused in turn, with it accepted. */
    rc = open_as("unit", &cb, &a, &err);
    ck_assert_int_eq(rc, TM_OK);
    ice_api->close(a);
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\"}"), 0);
    rc = open_as("unit", &cb, &a, &err);
    if (rc == TM_OK)
        ice_api->close(a);
    ck_assert_int_eq(rc, TM_INVALID);
    ck_assert_msg(strstr(err.message, "\"other\""), "%s", err.message);
}
END_TEST

START_TEST(no_fsync_still_commits) {
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\", "
                                          "\"fsync\": false}"),
                     0);
    void *sink = open_ok();
    tm_marker m;
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    commit_one(sink, m.epoch, 0, 3);
    tm_marker got;
    read1(sink, 0, &got);
    ck_assert_int_eq(got.next_offset, 3);
    ice_api->close(sink);
}
END_TEST

/* ---- two writers at once ------------------------------------------------ */

#define WRITER_BATCHES 30

typedef struct writer_arg {
    int32_t partition;
    int dead; /* the second offset of each batch a dead letter */
    int failed;
    char why[TM_ERROR_MAX + 32];
} writer_arg;

/* One writer: its own instance, its own partition, commits in a loop.
 * Every commit races the other writer's for the next version. */
static void *writer(void *p) {
    writer_arg *a = p;
    void *sink;
    tm_error err = {sizeof err, ""};
    if (ice_fx_open(&fx, &sink, &err) != TM_OK) {
        a->failed = 1;
        snprintf(a->why, sizeof a->why, "open: %s", err.message);
        return NULL;
    }
    tm_marker m = {.struct_size = sizeof m,
                   .topic = "orders",
                   .partition = a->partition,
                   .next_offset = 0};
    tm_status rc = ice_api->claim(sink, &m, 1, 0, &err);
    for (int i = 0; rc == TM_OK && i < WRITER_BATCHES; i++) {
        ice_fx_batch kb;
        char id[32];
        snprintf(id, sizeof id, "w%d-%d", (int)a->partition, i);
        ice_fx_batch_init(&kb, id);
        uint32_t r = ice_fx_range(&kb, a->partition, 2 * i, 2 * i + 2, m.epoch);
        ice_fx_record(&kb, r, 2 * i);
        if (a->dead)
            ice_fx_dead_letter(&kb, r, 2 * i + 1);
        else
            ice_fx_record(&kb, r, 2 * i + 1);
        rc = commit(sink, &kb, &err);
        ice_fx_batch_free(&kb);
    }
    if (rc != TM_OK) {
        a->failed = 1;
        snprintf(a->why, sizeof a->why, "%s: %s", tm_status_name(rc),
                 err.message);
    }
    ice_api->close(sink);
    return NULL;
}

/* Both writers at once, each to its end. */
static void run_writers(writer_arg a[2]) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, writer, &a[i]), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
        ck_assert_msg(!a[i].failed, "writer %d: %s", i, a[i].why);
    }
}

START_TEST(two_writers_lose_nothing) {
    void *sink = open_ok(); /* creates the table before the race */
    ice_api->close(sink);
    writer_arg a[2] = {{.partition = 0}, {.partition = 1}};
    run_writers(a);
    sink = open_ok();
    for (int32_t p = 0; p < 2; p++) {
        tm_marker got;
        size_t rows, dls;
        read1(sink, p, &got);
        ck_assert_int_eq(got.next_offset, 2 * WRITER_BATCHES);
        ck_assert_uint_eq(got.rows, 2 * WRITER_BATCHES);
        ck_assert_int_eq(ice_fx_scan_count(sink, p, &rows, &dls, NULL), 0);
        ck_assert_uint_eq(rows, 2 * WRITER_BATCHES);
    }
    ice_api->close(sink);
    /* one snapshot per commit, one version per commit or claim */
    ck_assert_uint_eq(count_files("metadata/v*.metadata.json"),
                      1 + 2 + 2 * WRITER_BATCHES);
    ck_assert_uint_eq(count_files("metadata/*.part"), 0);
}
END_TEST

/* The same race with keep_snapshots 1 and a dead letter a batch: every
 * commit expires, and the dead-letter index segment each writes (merging
 * the smaller ones) is built again on the winner's version when it loses
 * the race; every dead letter is read once. */
START_TEST(two_writers_expiring_keep_every_dead_letter) {
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\", "
                                          "\"keep_snapshots\": 1}"),
                     0);
    void *sink = open_ok();
    ice_api->close(sink);
    writer_arg a[2] = {{.partition = 0, .dead = 1},
                       {.partition = 1, .dead = 1}};
    run_writers(a);
    sink = open_ok();
    for (int32_t p = 0; p < 2; p++) {
        size_t rows, dls;
        ck_assert_int_eq(ice_fx_scan_count(sink, p, &rows, &dls, NULL), 0);
        ck_assert_uint_eq(rows, WRITER_BATCHES);
        ck_assert_uint_eq(dls, WRITER_BATCHES);
    }
    ice_api->close(sink);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("iceberg_lite_table");
    TCase *tc = tcase_create("table");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, layout_and_markers);
    tcase_add_test(tc, race_with_a_commit);
    tcase_add_test(tc, race_with_a_claim);
    tcase_add_test(tc, hint_is_only_a_hint);
    tcase_add_test(tc, manifests_merge_and_files_roll);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, compression_setting);
    tcase_add_test(tc, marker_keys_never_truncated);
    tcase_add_test(tc, long_table_path_refused_not_cut);
    tcase_add_test(tc, validate_refuses_missing_parent);
    tcase_add_test(tc, uri_chars_refused_when_created);
    tcase_add_test(tc, control_chars_refused_when_created);
    tcase_add_test(tc, second_connector_refused);
    tcase_add_test(tc, no_fsync_still_commits);
    tcase_add_test(tc, two_writers_lose_nothing);
    tcase_add_test(tc, two_writers_expiring_keep_every_dead_letter);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
