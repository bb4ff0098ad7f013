/* sqlite_bench: rows/s of the SQLite sink alone, through the plugin API
 * (loaded with the host's loader), against a bare C loop doing prepared
 * inserts of the same rows into a table of the same shape, in the same
 * batch transactions (BEGIN IMMEDIATE ... COMMIT), with the same PRAGMAs
 * (journal_mode=WAL, the same synchronous), in the same run. Prints both
 * and the ratio sink/bare. Not a ctest test: docs/benchmarks.md.
 *
 *   sqlite_bench [--rows N] [--batch N] [--reps N] [--dir DIR]
 *                [--sync FULL|NORMAL|OFF] [--plugin PATH]
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_data.h"
#include "plugin/loader.h"

#define NCOLS BENCH_ORDERS_NCOLS
#define COLS  BENCH_ORDERS_COLS
/* The table the sink creates for COLS (plugins/sqlite/schema.c). */
static const char BARE_DDL[] =
    "CREATE TABLE bench (\"id\" INTEGER NOT NULL, \"name\" TEXT, \"amount\" "
    "REAL, \"flag\" INTEGER, \"at\" INTEGER, \"doc\" TEXT, _tm_topic TEXT NOT "
    "NULL, _tm_partition INTEGER NOT NULL, _tm_offset INTEGER NOT NULL, "
    "_tm_identity TEXT)";
static const char BARE_INSERT[] =
    "INSERT INTO bench (\"id\", \"name\", \"amount\", \"flag\", \"at\", "
    "\"doc\", _tm_topic, _tm_partition, _tm_offset, _tm_identity) VALUES "
    "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

static const char *TOPIC = "bench.orders";

typedef bench_data data;

static void die(const char *what, const char *why) {
    fprintf(stderr, "sqlite_bench: %s: %s\n", what, why);
    exit(1);
}

static void fresh_db(const char *path) {
    char p[1100];
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", path, suffix[i]);
        if (unlink(p) != 0 && errno != ENOENT)
            die(p, strerror(errno));
    }
}

/* ---- the sink ----------------------------------------------------------- */

static void stamp(void *d, int64_t epoch) {
    bench_data_batches(d, TOPIC, epoch);
}

static double run_sink(const tm_sink_api *api, data *d, const char *path,
                       const char *sync) {
    fresh_db(path);
    json_t *obj = json_pack("{s:s,s:s,s:s}", "path", path, "table", "bench",
                            "synchronous", sync);
    if (!obj)
        die("settings", "out of memory");
    char errstr[1024];
    double t = bench_time_sink(api, obj, "sqlite", COLS, NCOLS, TOPIC, stamp, d,
                               d->batches, d->nbatches, errstr, sizeof errstr);
    json_decref(obj);
    if (t < 0)
        die("sink", errstr);
    return t;
}

static void check(sqlite3 *db, int rc, int want, const char *what) {
    if (rc != want)
        die(what, sqlite3_errmsg(db));
}

static double run_bare(data *d, const char *path, const char *sync) {
    sqlite3 *db;
    sqlite3_stmt *st;
    char pragma[64];
    fresh_db(path);
    int rc = sqlite3_open_v2(
        path, &db,
        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    check(db, rc, SQLITE_OK, "open");
    snprintf(pragma, sizeof pragma, "PRAGMA synchronous=%s", sync);
    check(db, sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL),
          SQLITE_OK, "WAL");
    check(db, sqlite3_exec(db, pragma, NULL, NULL, NULL), SQLITE_OK, pragma);
    check(db, sqlite3_busy_timeout(db, 5000), SQLITE_OK, "busy_timeout");
    check(db, sqlite3_exec(db, BARE_DDL, NULL, NULL, NULL), SQLITE_OK, "DDL");
    check(db,
          sqlite3_prepare_v3(db, BARE_INSERT, -1, SQLITE_PREPARE_PERSISTENT,
                             &st, NULL),
          SQLITE_OK, "prepare");
    double t0 = bench_now_s();
    for (size_t k = 0; k < d->nbatches; k++) {
        size_t first = k * d->batch, n = bench_data_batch_len(d, k);
        check(db, sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL),
              SQLITE_OK, "BEGIN");
        for (size_t i = first; i < first + n; i++) {
            const tm_value *v = &d->values[i * NCOLS];
            sqlite3_bind_int64(st, 1, v[0].v.i);
            sqlite3_bind_text64(st, 2, v[1].v.s.ptr, v[1].v.s.len,
                                SQLITE_STATIC, SQLITE_UTF8);
            sqlite3_bind_double(st, 3, v[2].v.f);
            sqlite3_bind_int64(st, 4, v[3].v.i);
            sqlite3_bind_int64(st, 5, v[4].v.i);
            sqlite3_bind_text64(st, 6, v[5].v.s.ptr, v[5].v.s.len,
                                SQLITE_STATIC, SQLITE_UTF8);
            sqlite3_bind_text(st, 7, TOPIC, -1, SQLITE_STATIC);
            sqlite3_bind_int(st, 8, 0);
            sqlite3_bind_int64(st, 9, (int64_t)i);
            sqlite3_bind_null(st, 10);
            check(db, sqlite3_step(st), SQLITE_DONE, "insert");
            sqlite3_reset(st);
            sqlite3_clear_bindings(st);
        }
        check(db, sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK,
              "COMMIT");
    }
    double t = bench_now_s() - t0;
    sqlite3_finalize(st);
    check(db, sqlite3_close(db), SQLITE_OK, "close");
    return t;
}

int main(int argc, char **argv) {
    size_t rows = 200000, batch = 1000, reps = 5;
    const char *dir = "/tmp", *sync = "FULL", *plugin = TM_SQLITE_PLUGIN;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rows"))
            rows = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--batch"))
            batch = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reps"))
            reps = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--sync"))
            sync = argv[i + 1];
        else if (!strcmp(argv[i], "--plugin"))
            plugin = argv[i + 1];
        else
            die("bad argument", argv[i]);
    }
    if (!rows || !batch || !reps || reps > 100)
        die("arguments",
            "--rows, --batch and --reps must be > 0 (reps <= 100)");
    tm_plugin loaded;
    char errstr[1024], sink_db[1024], bare_db[1024];
    if (tm_plugin_load(plugin, NULL, 0, &loaded, errstr, sizeof errstr) != 0)
        die("load", errstr);
    snprintf(sink_db, sizeof sink_db, "%s/tm-bench-sink.db", dir);
    snprintf(bare_db, sizeof bare_db, "%s/tm-bench-bare.db", dir);
    data d;
    bench_data_orders(&d, "sqlite_bench", rows, batch);
    printf("# sqlite_bench: %zu rows, %zu per batch, %zu reps, "
           "synchronous=%s, dir %s, SQLite %s\n",
           rows, batch, reps, sync, dir, sqlite3_libversion());
    double ts[100], tb[100];
    for (size_t r = 0; r < reps; r++) { /* alternate: same conditions */
        tb[r] = run_bare(&d, bare_db, sync);
        ts[r] = run_sink(loaded.api, &d, sink_db, sync);
        printf("rep %zu: bare %.0f rows/s, sink %.0f rows/s\n", r + 1,
               (double)rows / tb[r], (double)rows / ts[r]);
    }
    double ms = bench_median(ts, reps), mb = bench_median(tb, reps);
    printf("bare loop: %.0f rows/s (median of %zu)\n", (double)rows / mb, reps);
    printf("sink:      %.0f rows/s (median of %zu)\n", (double)rows / ms, reps);
    printf("ratio sink/bare: %.3f\n", mb / ms);
    fresh_db(sink_db);
    fresh_db(bare_db);
    bench_data_free(&d);
    return 0;
}
