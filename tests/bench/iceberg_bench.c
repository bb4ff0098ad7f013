/* iceberg_bench: rows/s and bytes/s of the iceberg-lite sink alone,
 * through the plugin API (loaded with the host's loader; open and claim
 * outside the timing, every commit inside), against the ceiling: our own
 * Parquet encoder writing the same rows, one file per batch, each file
 * written and fdatasync'ed, with no metadata at all. Both in the same run,
 * alternating. Prints both, the medians and the ratio sink/ceiling. Not a
 * ctest test: docs/benchmarks.md.
 *
 *   iceberg_bench [--rows N] [--batch N] [--reps N] [--dir DIR]
 *                 [--keep-snapshots N] [--no-fsync] [--plugin PATH]
 *                 [--compression zstd|snappy|none] [--catalog]
 *                 [--baseline PATH]
 *   iceberg_bench --ages N,N,... [--batch N] [--commits N] [--dir DIR]
 *                 [--keep-snapshots N] [--no-fsync] [--compression C]
 *   iceberg_bench --sync-probe N [--dir DIR]
 * --ages measures commit latency by the table's age instead: for each N a
 * fresh table is aged by N commits of one row (fsync off, the same
 * keep_snapshots: expiry as configured), synced, reopened with fsync as
 * asked, and --commits commits of --batch rows are timed one by one:
 * p50, p99 and max, with the newest metadata file's size.
 * --no-fsync turns off the sink's fsyncs and the ceiling's fdatasync (what
 * is left is the CPU and the page cache); --keep-snapshots is the sink's
 * keep_snapshots setting (its default when absent); --compression is the
 * sink's compression setting and the ceiling's codec (zstd, the sink's
 * default, when absent). --catalog adds a third arm, alternating with the
 * two: the sink with its table in an Iceberg SQL catalog (a SQLite file
 * beside it; the commit is the row's compare-and-swap), and prints the
 * ratio catalog/file-system table. --baseline PATH adds an arm too: the
 * sink of another build of the plugin (e.g. the main branch's), loaded
 * beside --plugin's, run before it on odd reps and after it on even ones,
 * and prints the ratio sink/baseline of the same invocation.
 */
#define _GNU_SOURCE /* nftw, syncfs, sync_file_range */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_data.h"
#include "config/settings.h"
#include "parquet_writer.h"
#include "plugin/loader.h"
#include "services/host_services.h"

#define NCOLS BENCH_ORDERS_NCOLS
#define COLS  BENCH_ORDERS_COLS
/* The Parquet columns the sink writes for COLS (plugins/iceberg-lite/
 * schema.c): the mapping's, then the hidden coordinates. */
#define PQ_NCOLS (NCOLS + 3)
static const pq_column_def PQ_COLS[PQ_NCOLS] = {
    {"id", PQ_INT64, 1, 1},         {"name", PQ_STRING, 0, 2},
    {"amount", PQ_DOUBLE, 0, 3},    {"flag", PQ_BOOLEAN, 0, 4},
    {"at", PQ_TIMESTAMP, 0, 5},     {"doc", PQ_STRING, 0, 6},
    {"_tm_topic", PQ_STRING, 1, 7}, {"_tm_partition", PQ_INT64, 1, 8},
    {"_tm_offset", PQ_INT64, 1, 9},
};

static const char *TOPIC = "bench.orders";

typedef bench_data data;

static void die(const char *what, const char *why) {
    fprintf(stderr, "iceberg_bench: %s: %s\n", what, why);
    exit(1);
}

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0 && errno != ENOENT)
        die(path, strerror(errno));
    return 0;
}

static void fresh_dir(const char *path) {
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
        die(path, strerror(errno));
}

static off_t data_bytes_total;

static int add_size(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw) {
    (void)path;
    (void)ftw;
    if (flag == FTW_F)
        data_bytes_total += st->st_size;
    return 0;
}

/* Bytes of the files under DIR (the Parquet data files). */
static double dir_bytes(const char *dir) {
    data_bytes_total = 0;
    if (nftw(dir, add_size, 16, FTW_PHYS) != 0)
        die(dir, strerror(errno));
    return (double)data_bytes_total;
}

/* ---- the sink ----------------------------------------------------------- */

static void stamp(void *d, int64_t epoch) {
    bench_data_batches(d, TOPIC, epoch);
}

static int sync_on = 1;
static long keep_snapshots = -1; /* -1: the sink's default */
static pq_codec codec = PQ_CODEC_DEFAULT;

/* Removes the SQLite catalog of URI and its journal. */
static void remove_catalog(const char *uri) {
    char journal[1200];
    const char *file = uri + strlen("sqlite:///");
    snprintf(journal, sizeof journal, "%s-journal", file);
    if ((unlink(file) != 0 && errno != ENOENT) ||
        (unlink(journal) != 0 && errno != ENOENT))
        die("catalog", strerror(errno));
}

/* CATALOG: the catalog's URI (its file removed first), or NULL. */
static double run_sink(const tm_sink_api *api, data *d, const char *path,
                       const char *catalog, double *bytes) {
    char data_dir[1100];
    fresh_dir(path);
    json_t *obj = json_pack("{s:s, s:b, s:s}", "path", path, "fsync", sync_on,
                            "compression", pq_codec_name(codec));
    if (catalog)
        remove_catalog(catalog);
    if (obj && catalog &&
        (json_object_set_new(obj, "catalog_uri", json_string(catalog)) != 0 ||
         json_object_set_new(obj, "catalog_name", json_string("bench")) != 0 ||
         json_object_set_new(obj, "catalog_namespace", json_string("bench")) !=
             0 ||
         json_object_set_new(obj, "catalog_table", json_string("t")) != 0))
        die("settings", "out of memory");
    if (obj && keep_snapshots >= 0 &&
        json_object_set_new(obj, "keep_snapshots",
                            json_integer(keep_snapshots)) != 0)
        die("settings", "out of memory");
    if (!obj)
        die("settings", "out of memory");
    char errstr[1024];
    double t =
        bench_time_sink(api, obj, "iceberg_lite", COLS, NCOLS, TOPIC, stamp, d,
                        d->batches, d->nbatches, errstr, sizeof errstr);
    json_decref(obj);
    if (t < 0)
        die("sink", errstr);
    snprintf(data_dir, sizeof data_dir, "%s/data", path);
    *bytes = dir_bytes(data_dir);
    return t;
}

/* ---- the ceiling: the encoder and one fdatasync'ed file per batch ------- */

static double run_ceiling(data *d, const char *dir, double *bytes) {
    fresh_dir(dir);
    if (mkdir(dir, 0755) != 0)
        die(dir, strerror(errno));
    *bytes = 0;
    double t0 = bench_now_s();
    for (size_t k = 0; k < d->nbatches; k++) {
        size_t first = k * d->batch, n = bench_data_batch_len(d, k);
        pq_writer *w = pq_writer_new(PQ_COLS, PQ_NCOLS, 0, 0);
        if (!w)
            die("Parquet writer", "out of memory");
        pq_writer_set_codec(w, codec);
        for (size_t i = first; i < first + n; i++) {
            const tm_value *v = &d->values[i * NCOLS];
            pq_put_i64(w, 0, v[0].v.i);
            pq_put_bytes(w, 1, v[1].v.s.ptr, v[1].v.s.len);
            pq_put_double(w, 2, v[2].v.f);
            pq_put_i64(w, 3, v[3].v.i);
            pq_put_i64(w, 4, v[4].v.i);
            pq_put_bytes(w, 5, v[5].v.s.ptr, v[5].v.s.len);
            pq_put_bytes(w, 6, TOPIC, strlen(TOPIC));
            pq_put_i64(w, 7, 0);
            pq_put_i64(w, 8, (int64_t)i);
            pq_end_row(w);
        }
        ib_buf file = {0};
        if (pq_finish(w, NULL, 0, &file) != 0)
            die("Parquet encoder", pq_error(w));
        pq_writer_free(w);
        char path[1200];
        snprintf(path, sizeof path, "%s/%zu.parquet", dir, k);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0)
            die(path, strerror(errno));
        size_t off = 0;
        while (off < file.len) {
            ssize_t wr = write(fd, file.p + off, file.len - off);
            if (wr < 0 && errno != EINTR)
                die(path, strerror(errno));
            if (wr > 0)
                off += (size_t)wr;
        }
        if ((sync_on && fdatasync(fd) != 0) || close(fd) != 0)
            die(path, strerror(errno));
        *bytes += (double)file.len;
        ib_buf_free(&file);
    }
    return bench_now_s() - t0;
}

/* ---- commit latency by the table's age ---------------------------------- */

typedef struct aged {
    const tm_sink_api *api;
    tm_settings *set;
    tm_sink_config config;
    tm_log_context logctx;
    void *sink;
    int64_t epoch;
} aged;

/* Opens the sink on PATH with fsync as given and claims partition 0. */
static void aged_open(aged *a, const tm_sink_api *api, const char *path,
                      int fsync) {
    json_t *obj = json_pack("{s:s, s:b, s:s}", "path", path, "fsync", fsync,
                            "compression", pq_codec_name(codec));
    if (obj && keep_snapshots >= 0 &&
        json_object_set_new(obj, "keep_snapshots",
                            json_integer(keep_snapshots)) != 0)
        die("settings", "out of memory");
    if (!obj || !(a->set = tm_settings_new(obj, "$.sink.settings")))
        die("settings", "out of memory");
    json_decref(obj);
    a->api = api;
    a->logctx = (tm_log_context){"bench", "iceberg_lite"};
    a->config = (tm_sink_config){.struct_size = sizeof a->config,
                                 .connector = "bench",
                                 .settings = a->set,
                                 .columns = COLS,
                                 .ncolumns = NCOLS,
                                 .host_ctx = &a->logctx};
    tm_error err = {sizeof err, ""};
    if (api->open(tm_host_services(), &a->config, &a->sink, &err) != TM_OK)
        die("open", err.message);
    tm_marker m = {.struct_size = sizeof m, .topic = TOPIC};
    if (api->claim(a->sink, &m, 1, 0, &err) != TM_OK)
        die("claim", err.message);
    a->epoch = m.epoch;
}

static void aged_close(aged *a) {
    a->api->close(a->sink);
    tm_settings_free(a->set);
}

/* Commits rows [first, first + n) of d as one batch; its seconds. */
static double aged_commit(aged *a, data *d, size_t first, size_t n) {
    char id[32];
    snprintf(id, sizeof id, "age-%zu", first);
    tm_range g = {.struct_size = sizeof g,
                  .topic = TOPIC,
                  .partition = 0,
                  .start_offset = (int64_t)first,
                  .end_offset = (int64_t)(first + n),
                  .epoch = a->epoch};
    tm_batch b = {.struct_size = sizeof b,
                  .connector = "bench",
                  .batch_id = id,
                  .ranges = &g,
                  .nranges = 1,
                  .records = &d->records[first],
                  .nrecords = n};
    tm_error err = {sizeof err, ""};
    double t0 = bench_now_s();
    tm_status rc = a->api->commit(a->sink, &b, &err);
    double t = bench_now_s() - t0;
    if (rc != TM_OK)
        die("commit", err.message);
    return t;
}

/* Bytes of the newest v<N>.metadata.json (the hint names it). */
static long newest_metadata_bytes(const char *path) {
    char hint[1200], file[1300];
    snprintf(hint, sizeof hint, "%s/metadata/version-hint.text", path);
    FILE *f = fopen(hint, "r");
    long v = 0;
    if (!f || fscanf(f, "%ld", &v) != 1)
        v = 0;
    if (f)
        fclose(f);
    snprintf(file, sizeof file, "%s/metadata/v%ld.metadata.json", path, v);
    struct stat st;
    return stat(file, &st) == 0 ? (long)st.st_size : -1;
}

static int by_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run_ages(const tm_sink_api *api, const char *dir, const char *ages,
                     size_t batch, size_t commits) {
    char path[1100];
    printf("# commit latency by table age: %zu commits of %zu rows, %s, "
           "keep_snapshots %ld, compression %s\n",
           commits, batch, sync_on ? "fsync" : "no fsync", keep_snapshots,
           pq_codec_name(codec));
    printf("%10s %10s %10s %10s %14s\n", "age", "p50 ms", "p99 ms", "max ms",
           "metadata B");
    double *lat = calloc(commits, sizeof *lat);
    if (!lat)
        die("latencies", "out of memory");
    for (const char *p = ages; *p;) {
        char *end;
        size_t age = strtoul(p, &end, 10);
        if (end == p)
            die("--ages", ages);
        p = *end == ',' ? end + 1 : end;
        data d;
        bench_data_orders(&d, "iceberg_bench", age + commits * batch, batch);
        /* A table per age, all removed at the end (as the reps' above). */
        snprintf(path, sizeof path, "%s/tm-bench-ice-age-%zu", dir, age);
        fresh_dir(path);
        aged a;
        aged_open(&a, api, path, 0);
        for (size_t k = 0; k < age; k++)
            aged_commit(&a, &d, k, 1);
        aged_close(&a);
        sync(); /* the aging's writes are not the measured commits' */
        aged_open(&a, api, path, sync_on);
        for (size_t j = 0; j < commits; j++)
            lat[j] = aged_commit(&a, &d, age + j * batch, batch) * 1e3;
        aged_close(&a);
        qsort(lat, commits, sizeof *lat, by_double);
        printf("%10zu %10.2f %10.2f %10.2f %14ld\n", age, lat[commits / 2],
               lat[(commits * 99) / 100], lat[commits - 1],
               newest_metadata_bytes(path));
        fflush(stdout);
        bench_data_free(&d);
    }
    for (const char *p = ages; *p;) {
        char *end;
        size_t age = strtoul(p, &end, 10);
        p = *end == ',' ? end + 1 : end;
        snprintf(path, sizeof path, "%s/tm-bench-ice-age-%zu", dir, age);
        fresh_dir(path);
    }
    free(lat);
}

/* ---- the barrier against per-file syncs --------------------------------- */

/* --sync-probe N: what the commit's one barrier costs against syncing each
 * new file instead, on the files of a commit (a data file in data/, a
 * manifest, a manifest list and a metadata file in metadata/, of the
 * sizes the bench's commits of 1000 rows write), N times each,
 * alternating: syncfs of the file system, or sync_file_range(WRITE) on
 * each then fdatasync of each and fsync of both directories (their new
 * entries). Only the sync is timed. */
static void run_sync_probe(const char *dir, size_t n) {
    static const size_t sizes[4] = {9000, 3000, 1500, 72000};
    char root[1100], sub[2][1200], path[1300];
    snprintf(root, sizeof root, "%s/tm-bench-ice-syncprobe", dir);
    fresh_dir(root);
    snprintf(sub[0], sizeof sub[0], "%s/data", root);
    snprintf(sub[1], sizeof sub[1], "%s/metadata", root);
    if (mkdir(root, 0755) != 0 || mkdir(sub[0], 0755) != 0 ||
        mkdir(sub[1], 0755) != 0)
        die(root, strerror(errno));
    int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char *buf = malloc(sizes[3]);
    double *t[2] = {calloc(n, sizeof(double)), calloc(n, sizeof(double))};
    if (rootfd < 0 || !buf || !t[0] || !t[1])
        die("sync probe", strerror(errno ? errno : ENOMEM));
    memset(buf, 'x', sizes[3]);
    for (size_t i = 0; i < 2 * n; i++) {
        int mode = (int)(i % 2), fds[4];
        for (int k = 0; k < 4; k++) {
            snprintf(path, sizeof path, "%s/f-%zu-%d", sub[k > 0], i, k);
            fds[k] = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fds[k] < 0 || write(fds[k], buf, sizes[k]) != (ssize_t)sizes[k])
                die(path, strerror(errno));
        }
        double t0 = bench_now_s();
        if (mode == 0 && syncfs(rootfd) != 0)
            die("syncfs", strerror(errno));
        for (int k = 0; mode == 1 && k < 4; k++)
            if (sync_file_range(fds[k], 0, 0, SYNC_FILE_RANGE_WRITE) != 0)
                die("sync_file_range", strerror(errno));
        for (int k = 0; mode == 1 && k < 4; k++)
            if (fdatasync(fds[k]) != 0)
                die("fdatasync", strerror(errno));
        for (int k = 0; mode == 1 && k < 2; k++) {
            int dfd = open(sub[k], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (dfd < 0 || fsync(dfd) != 0 || close(dfd) != 0)
                die(sub[k], strerror(errno));
        }
        t[mode][i / 2] = (bench_now_s() - t0) * 1e3;
        for (int k = 0; k < 4; k++)
            close(fds[k]);
    }
    const char *names[2] = {"syncfs", "per file (4 fdatasync, 2 dir fsync)"};
    for (int mode = 0; mode < 2; mode++) {
        qsort(t[mode], n, sizeof(double), by_double);
        printf("%-38s p50 %.3f ms, p90 %.3f ms, p99 %.3f ms\n", names[mode],
               t[mode][n / 2], t[mode][(n * 9) / 10], t[mode][(n * 99) / 100]);
    }
    close(rootfd);
    free(buf);
    free(t[0]);
    free(t[1]);
    fresh_dir(root);
}

/* The directories (and catalog) of rep R under DIR. */
static void rep_dirs(const char *dir, size_t r, char sink[1024],
                     char bare[1024], char cat[1024], char cat_uri[1100],
                     char base[1024]) {
    snprintf(base, 1024, "%s/tm-bench-ice-baseline-%zu", dir, r);
    snprintf(sink, 1024, "%s/tm-bench-ice-sink-%zu", dir, r);
    snprintf(bare, 1024, "%s/tm-bench-ice-ceiling-%zu", dir, r);
    snprintf(cat, 1024, "%s/tm-bench-ice-catalog-%zu", dir, r);
    snprintf(cat_uri, 1100, "sqlite:///%s/tm-bench-ice-catalog-%zu.db", dir, r);
}

int main(int argc, char **argv) {
    size_t rows = 200000, batch = 1000, reps = 5, commits = 200;
    const char *ages = NULL;
    size_t probe = 0;
    const char *dir = "/tmp", *plugin = TM_ICEBERG_PLUGIN;
    int with_catalog = 0;
    const char *baseline = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--no-fsync")) {
            sync_on = 0;
            i--; /* no value */
            continue;
        }
        if (!strcmp(argv[i], "--catalog")) {
            with_catalog = 1;
            i--; /* no value */
            continue;
        }
        if (i + 1 >= argc)
            die("option without a value", argv[i]);
        if (!strcmp(argv[i], "--keep-snapshots"))
            keep_snapshots = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--rows"))
            rows = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--batch"))
            batch = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reps"))
            reps = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--plugin"))
            plugin = argv[i + 1];
        else if (!strcmp(argv[i], "--ages"))
            ages = argv[i + 1];
        else if (!strcmp(argv[i], "--baseline"))
            baseline = argv[i + 1];
        else if (!strcmp(argv[i], "--sync-probe"))
            probe = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--commits"))
            commits = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--compression")) {
            if (pq_codec_parse(argv[i + 1], &codec) != 0)
                die("--compression: expected " PQ_CODEC_NAMES, argv[i + 1]);
        } else
            die("bad argument", argv[i]);
    }
    if (!rows || !batch || !reps || reps > 100)
        die("arguments",
            "--rows, --batch and --reps must be > 0 (reps <= 100)");
    if (probe) {
        run_sync_probe(dir, probe);
        return 0;
    }
    tm_plugin loaded;
    char errstr[1024], sink_dir[1024], bare_dir[1024], cat_dir[1024],
        cat_uri[1100], base_dir[1024];
    tm_plugin base;
    if (tm_plugin_load(plugin, NULL, 0, &loaded, errstr, sizeof errstr) != 0)
        die("load", errstr);
    if (baseline &&
        tm_plugin_load(baseline, NULL, 0, &base, errstr, sizeof errstr) != 0)
        die("load (baseline)", errstr);
    if (ages) {
        if (!commits)
            die("arguments", "--commits must be > 0");
        run_ages(loaded.api, dir, ages, batch, commits);
        return 0;
    }
    data d;
    bench_data_orders(&d, "iceberg_bench", rows, batch);
    printf("# iceberg_bench: %zu rows, %zu per batch (%zu commits), %zu reps, "
           "dir %s, %s, keep_snapshots %ld, compression %s\n",
           rows, batch, d.nbatches, reps, dir, sync_on ? "fsync" : "no fsync",
           keep_snapshots, pq_codec_name(codec));
    double ts[100], tb[100], tc[100], tl[100], bs = 0, bb = 0, bc = 0, bl = 0;
    for (size_t r = 0; r < reps; r++) { /* alternate: same conditions */
        /* A directory per rep, all removed at the end, not between runs:
         * on an ext4 without a journal every new inode steps over the
         * inodes freed in its group in the last minute (five when their
         * block is still dirty), so removing a run's thousand files just
         * before the next run would charge that run for them. */
        rep_dirs(dir, r, sink_dir, bare_dir, cat_dir, cat_uri, base_dir);
        tb[r] = run_ceiling(&d, bare_dir, &bb);
        /* The baseline build first on odd reps, second on even ones. */
        if (baseline && r % 2 == 0)
            tl[r] = run_sink(base.api, &d, base_dir, NULL, &bl);
        ts[r] = run_sink(loaded.api, &d, sink_dir, NULL, &bs);
        if (baseline && r % 2 == 1)
            tl[r] = run_sink(base.api, &d, base_dir, NULL, &bl);
        printf("rep %zu: ceiling %.0f rows/s, sink %.0f rows/s", r + 1,
               (double)rows / tb[r], (double)rows / ts[r]);
        if (baseline)
            printf(", baseline sink %.0f rows/s", (double)rows / tl[r]);
        if (with_catalog) {
            tc[r] = run_sink(loaded.api, &d, cat_dir, cat_uri, &bc);
            printf(", sink in a catalog %.0f rows/s", (double)rows / tc[r]);
        }
        printf("\n");
    }
    double ms = bench_median(ts, reps), mb = bench_median(tb, reps);
    printf("ceiling (encoder + fdatasync per batch): %.0f rows/s, %.1f MB/s "
           "(median of %zu)\n",
           (double)rows / mb, bb / mb / 1e6, reps);
    printf("sink:                                    %.0f rows/s, %.1f MB/s "
           "(median of %zu)\n",
           (double)rows / ms, bs / ms / 1e6, reps);
    printf("data files: %.1f bytes/row (sink), %.1f bytes/row (ceiling)\n",
           bs / (double)rows, bb / (double)rows);
    printf("ratio sink/ceiling: %.3f\n", mb / ms);
    if (baseline) {
        double ml = bench_median(tl, reps);
        printf("baseline sink:                           %.0f rows/s "
               "(median of %zu)\n",
               (double)rows / ml, reps);
        printf("ratio baseline/ceiling: %.3f\n", mb / ml);
        printf("ratio sink/baseline: %.3f\n", ml / ms);
    }
    if (with_catalog) {
        double mc = bench_median(tc, reps);
        printf("sink in a catalog (SQLite):              %.0f rows/s "
               "(median of %zu)\n",
               (double)rows / mc, reps);
        printf("ratio catalog/file-system table: %.3f\n", ms / mc);
    }
    for (size_t r = 0; r < reps; r++) {
        rep_dirs(dir, r, sink_dir, bare_dir, cat_dir, cat_uri, base_dir);
        fresh_dir(sink_dir);
        fresh_dir(bare_dir);
        fresh_dir(base_dir);
        if (with_catalog) {
            fresh_dir(cat_dir);
            remove_catalog(cat_uri);
        }
    }
    bench_data_free(&d);
    return 0;
}
