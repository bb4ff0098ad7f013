/* Writes seed corpora for the fuzz targets into OUTDIR/<target>/, made by
 * the code that writes the real files (the iceberg-lite tests' sample
 * generators, the manifest and metadata writers, the status file's JSON),
 * so the fuzzers start from valid inputs. The config seeds are the repo's
 * own config files (run_fuzz.sh copies them). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_tmp.h"
#include "ice_samples.h"
#include "manifest.h"
#include "marker_keys.h"
#include "status/status_json.h"
#include "table_meta.h"

static const char *outdir;

static void fail(const char *what) {
    fprintf(stderr, "fuzz_seeds: %s failed\n", what);
    exit(1);
}

static void seed(const char *target, const char *name, const void *p,
                 size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", outdir, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        fail(path);
    snprintf(path, sizeof path, "%s/%s/%s", outdir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
        fail(path);
}

static void seed_json(const char *target, const char *name, json_t *doc) {
    char *s = doc ? json_dumps(doc, JSON_INDENT(1)) : NULL;
    if (!s)
        fail(name);
    seed(target, name, s, strlen(s));
    free(s);
    json_decref(doc);
}

/* Parquet files, and their footers as Thrift seeds (a selector byte
 * first: fuzz_thrift.c skips with 1, walks with 0). */
static void parquet_seeds(void) {
    static const struct {
        size_t rows, page, group;
    } S[] = {{1, 0, 0}, {40, 0, 0}, {120, 512, 2048}};
    for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
        ib_buf f = {0};
        char name[32];
        if (ice_sample_parquet(S[i].rows, S[i].page, S[i].group, &f) != 0)
            fail("ice_sample_parquet");
        snprintf(name, sizeof name, "sample-%zu.parquet", i);
        seed("parquet", name, f.p, f.len);
        size_t flen = (size_t)f.p[f.len - 8] | (size_t)f.p[f.len - 7] << 8 |
                      (size_t)f.p[f.len - 6] << 16 |
                      (size_t)f.p[f.len - 5] << 24;
        uint8_t *t = malloc(flen + 1);
        if (!t)
            fail("malloc");
        memcpy(t + 1, f.p + f.len - 8 - flen, flen);
        for (uint8_t how = 0; how < 2; how++) {
            t[0] = how;
            snprintf(name, sizeof name, "footer-%zu-%u", i, how);
            seed("thrift", name, t, flen + 1);
        }
        free(t);
        ib_buf_free(&f);
    }
}

static void avro_seeds(void) {
    ib_buf b = {0};
    if (ice_sample_avro(5, &b) != 0)
        fail("ice_sample_avro");
    seed("avro", "sample.avro", b.p, b.len);
    ib_buf_reset(&b);
    /* Partitioned by bucket[4](id): a tuple of one int, and metrics of
     * one column, so the fuzzer starts from both. */
    uint8_t part[] = {2, 6}, metrics[] = {2, 2, 2, 20, 0, 2, 2, 2, 0, 0, 2,
                                          2, 2, 2, 1,  0, 2, 2, 2, 2, 9, 0};
    ice_datafile files[] = {
        {"file:///t/data/a.parquet", 10, 4096, 42, -1, -1, part, metrics,
         sizeof part, sizeof metrics},
        {"file:///t/data/b.parquet", 7, 2048, 41, 2, 2, part, NULL, sizeof part,
         0},
    };
    json_t *schema = json_pack("[{s:i, s:s, s:s, s:b}]", "id", 1, "name", "id",
                               "type", "long", "required", 1);
    json_t *fields =
        json_pack("[{s:i, s:i, s:s, s:s}]", "source-id", 1, "field-id", 1000,
                  "name", "id_bucket", "transform", "bucket[4]");
    ice_pspec spec;
    char why[256];
    if (ice_pspec_build(schema, fields, &spec, why, sizeof why) != 0 ||
        ice_manifest_encode(files, 2, 42,
                            "{\"type\":\"struct\",\"schema-id\":0}", &spec,
                            &b) != 0)
        fail("ice_manifest_encode");
    ice_pspec_free(&spec);
    json_decref(schema);
    json_decref(fields);
    seed("avro", "manifest.avro", b.p, b.len);
    ib_buf_reset(&b);
    ice_mfile m[] = {
        {"file:///t/metadata/m0.avro", 3000, 3, 1, 42, 1, 1, 0, 10, 7, 0},
        {"file:///t/metadata/m1.avro", 2000, 2, 2, 41, 1, 0, 0, 7, 0, 0},
    };
    if (ice_manifest_list_encode(m, 2, 42, 41, 3, &b) != 0)
        fail("ice_manifest_list_encode");
    seed("avro", "manifest-list.avro", b.p, b.len);
    ib_buf_free(&b);
}

static void table_meta_seeds(void) {
    char root[512], why[256];
    ice_table t;
    fuzz_path(root, sizeof root, "seed-table");
    if (ice_table_init(&t, root, 1, 0, why, sizeof why) != 0)
        fail(why);
    json_t *fields =
        json_pack("[{s:i, s:s, s:b, s:s}, {s:i, s:s, s:b, s:s}]", "id", 1,
                  "name", "id", "required", 1, "type", "long", "id", 2, "name",
                  "body", "required", 0, "type", "string");
    /* partitioned: the spec in partition-specs */
    json_t *spec =
        json_pack("[{s:i, s:i, s:s, s:s}]", "source-id", 1, "field-id", 1000,
                  "name", "id_bucket", "transform", "bucket[4]");
    json_t *meta =
        fields && spec ? ice_meta_initial(&t, fields, 2, spec) : NULL;
    json_decref(fields);
    json_decref(spec);
    if (!meta)
        fail("ice_meta_initial");
    seed_json("table_meta", "initial.json", json_deep_copy(meta));
    tm_marker mk = {.struct_size = sizeof mk,
                    .topic = "t",
                    .partition = 0,
                    .next_offset = 100,
                    .epoch = 3,
                    .last_batch_id = "b-1",
                    .rows = 99};
    json_t *summary = json_pack("{s:s}", "operation", "append");
    if (!summary ||
        ice_marker_put_summary(summary, ICE_MARKER_PREFIX "fz/t/0.", &mk) !=
            0 ||
        ice_meta_add_snapshot(meta, 42, -1, 1,
                              "file:///t/metadata/snap-42.avro", summary) != 0)
        fail("ice_meta_add_snapshot");
    seed_json("table_meta", "one-snapshot.json", meta);
    ice_table_free(&t);
}

static void status_seeds(void) {
    tm_status_partition p[2] = {
        {.topic = "orders",
         .partition = 0,
         .next_offset = 120,
         .epoch = 2,
         .high_watermark = 130,
         .rows = 119},
        {.topic = "orders",
         .partition = 1,
         .next_offset = -1,
         .epoch = -1,
         .high_watermark = -1,
         .paused = 1},
    };
    tm_status_snapshot s = {.connector = "fz",
                            .plugin = "sqlite",
                            .plugin_version = "1.0",
                            .instance_id = "i-1",
                            .pid = 1234,
                            .state = TM_CONN_RUNNING,
                            .started_ms = INT64_C(1764770000000),
                            .updated_ms = INT64_C(1764770060000),
                            .last_batch_id = "b-7",
                            .last_batch_ms = INT64_C(1764770059000),
                            .last_batch_records = 100,
                            .partitions = p,
                            .npartitions = 2,
                            .last_error = "sink: retrying",
                            .last_error_ms = INT64_C(1764770001000)};
    seed_json("status", "running.json", tm_status_to_json(&s));
    s.npartitions = 0;
    s.state = TM_CONN_FAILED;
    seed_json("status", "failed.json", tm_status_to_json(&s));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds OUTDIR\n");
        return 2;
    }
    outdir = argv[1];
    parquet_seeds();
    avro_seeds();
    table_meta_seeds();
    status_seeds();
    return 0;
}
