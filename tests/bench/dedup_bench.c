/* dedup_bench: what business keys (dedup) and upsert cost each sink,
 * through the plugin API (loaded with the host's loader), in one run: for
 * each sink, batch size and share of resent records, the same records
 * committed in append mode without dedup, in append mode with dedup
 * (every record keyed: an identity and a payload hash), and in upsert
 * mode; rows/s of each (median of the reps, modes alternated) and the
 * ratios dedup/append and upsert/append. A resent record repeats an
 * earlier record (its values, identity and hash) at a new offset, as a
 * producer's resend does: with dedup it is a duplicate, in upsert an
 * update, in append a row. Not a ctest test: docs/benchmarks.md.
 *
 *   dedup_bench [--rows N] [--reps N] [--sinks sqlite,postgres]
 *               [--batches 1000,10000] [--resent 0,10] [--dir DIR]
 *               [--modes append,dedup,upsert] [--keys ascending|scattered]
 *               [--sqlite-plugin PATH] [--postgres-plugin PATH]
 *
 * --modes: the modes run (to profile one, e.g. under perf); a mode left
 * out, and a ratio it takes part in, prints as 0. --keys: record i's
 * key (id) is i (the default: each new key above every key stored), or
 * i times an odd 64-bit constant (scattered: each new key lands anywhere
 * among those stored, as keys do that do not grow with time; the same
 * keys are resent).
 *
 * PostgreSQL: TIDEMARK_PG_CONNINFO (scripts/env.sh), schema
 * tm_dedup_bench_<pid>, dropped at the end. SQLite: DIR/tm-dedup-bench.db
 * (synchronous FULL, the sink's default). */
#include <errno.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_data.h"
#include "plugin/loader.h"

#define NCOLS 3
/* id is the upsert key; three mapped columns, as in the run. */
static const tm_column COLS[NCOLS] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 1},
    {sizeof(tm_column), "name", TM_TYPE_TEXT, 0, 0},
    {sizeof(tm_column), "amount", TM_TYPE_FLOAT, 0, 0},
};
static const char *TOPIC = "bench.dedup";

static void die(const char *what, const char *why) {
    fprintf(stderr, "dedup_bench: %s: %s\n", what, why);
    exit(1);
}

/* Record i repeats record i / 2 when RESENT percent of the records are
 * resends (every record whose i % 100 < RESENT, spread evenly). */
static size_t source_of(size_t i, unsigned resent) {
    return i > 0 && (i * 37) % 100 < resent ? i / 2 : i;
}

/* 96 bytes of text a record: its name, identity and payload hash. */
static void make_data(bench_data *d, size_t nrows, size_t batch,
                      unsigned resent, int scattered) {
    bench_data_alloc(d, "dedup_bench", nrows, batch, NCOLS, 96);
    for (size_t i = 0; i < nrows; i++) {
        size_t src = source_of(i, resent);
        tm_value *v = &d->values[i * NCOLS];
        char *name = d->text + i * 96, *identity = name + 32, *hash = name + 64;
        int nl = snprintf(name, 32, "customer-%zu", src % 977);
        snprintf(identity, 32, "order-%zu", src);
        /* about a payload hash's size (30 hex digits) */
        snprintf(hash, 32, "%016zx%014zx", src * 2654435761u,
                 src & 0xffffffffffffff);
        /* odd multiplier: one key per source record, in no order */
        v[0].v.i =
            scattered ? (int64_t)(src * 0x9E3779B97F4A7C15u) : (int64_t)src;
        v[1].v.s.ptr = name;
        v[1].v.s.len = (size_t)nl;
        v[2].v.f = (double)(src % 10000) / 100.0;
        bench_data_record(d, i, 1700000000000, name, (size_t)nl);
        d->records[i].identity = identity;
        d->records[i].identity_hash = hash;
    }
}

static void stamp(void *ctx, int64_t epoch) {
    bench_data_batches(ctx, TOPIC, epoch);
}

/* ---- the sinks ---------------------------------------------------------- */

enum { APPEND, DEDUP, UPSERT, NMODES };
static const char *MODE_NAME[NMODES] = {"append", "dedup", "upsert"};

static char schema[64], sqlite_path[1024];

static void quiet(void *arg, const char *message) {
    (void)arg;
    (void)message; /* DROP ... CASCADE notices */
}

static void pg_exec(const char *sql) {
    const char *ci = getenv("TIDEMARK_PG_CONNINFO");
    if (!ci)
        die("postgres", "TIDEMARK_PG_CONNINFO is not set (scripts/env.sh)");
    PGconn *c = PQconnectdb(ci);
    if (PQstatus(c) != CONNECTION_OK)
        die("postgres", PQerrorMessage(c));
    PQsetNoticeProcessor(c, quiet, NULL);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        die(sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
}

static void fresh(int postgres) {
    if (postgres) {
        char sql[128];
        snprintf(sql, sizeof sql, "DROP SCHEMA IF EXISTS %s CASCADE", schema);
        pg_exec(sql);
        return;
    }
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[1100];
        snprintf(p, sizeof p, "%s%s", sqlite_path, suffix[i]);
        if (unlink(p) != 0 && errno != ENOENT)
            die(p, strerror(errno));
    }
}

/* Seconds for every batch of D into a fresh table in MODE. */
static double run(const tm_sink_api *api, int postgres, int mode,
                  bench_data *d) {
    fresh(postgres);
    const char *m = mode == UPSERT ? "upsert" : "append";
    json_t *obj = postgres ? json_pack("{s:s,s:s,s:s,s:s}", "conninfo",
                                       getenv("TIDEMARK_PG_CONNINFO"), "schema",
                                       schema, "table", "t", "mode", m)
                           : json_pack("{s:s,s:s,s:s}", "path", sqlite_path,
                                       "table", "t", "mode", m);
    if (!obj)
        die("settings", "out of memory");
    char errstr[1024];
    double t = bench_time_sink_flags(
        api, obj, postgres ? "postgres" : "sqlite", COLS, NCOLS,
        mode == DEDUP ? TM_CONFIG_DEDUP : 0, TOPIC, stamp, d, d->batches,
        d->nbatches, errstr, sizeof errstr);
    json_decref(obj);
    if (t < 0)
        die(MODE_NAME[mode], errstr);
    return t;
}

/* A comma list of numbers into out[0..max); their count. */
static size_t list(const char *s, size_t *out, size_t max) {
    size_t n = 0;
    for (const char *p = s; *p && n < max;) {
        char *end;
        out[n++] = strtoul(p, &end, 10);
        if (end == p)
            die("a list of numbers", s);
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

int main(int argc, char **argv) {
    size_t rows = 100000, reps = 3, batches[8], resents[8];
    size_t nb = list("1000,10000", batches, 8), nr = list("0,10", resents, 8);
    const char *sinks = "sqlite,postgres", *dir = "/tmp";
    const char *modes = "append,dedup,upsert", *keys = "ascending";
    const char *plugins[2] = {TM_SQLITE_PLUGIN, TM_POSTGRES_PLUGIN};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rows"))
            rows = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reps"))
            reps = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--sinks"))
            sinks = argv[i + 1];
        else if (!strcmp(argv[i], "--batches"))
            nb = list(argv[i + 1], batches, 8);
        else if (!strcmp(argv[i], "--resent"))
            nr = list(argv[i + 1], resents, 8);
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--modes"))
            modes = argv[i + 1];
        else if (!strcmp(argv[i], "--keys"))
            keys = argv[i + 1];
        else if (!strcmp(argv[i], "--sqlite-plugin"))
            plugins[0] = argv[i + 1];
        else if (!strcmp(argv[i], "--postgres-plugin"))
            plugins[1] = argv[i + 1];
        else
            die("bad argument", argv[i]);
    }
    if (strcmp(keys, "ascending") != 0 && strcmp(keys, "scattered") != 0)
        die("--keys", "ascending or scattered");
    if (!rows || !reps || reps > 100)
        die("arguments", "--rows and --reps must be > 0 (reps <= 100)");
    for (size_t i = 0; i < nb; i++)
        if (!batches[i])
            die("--batches", "a batch size must be > 0");
    for (size_t i = 0; i < nr; i++)
        if (resents[i] > 100)
            die("--resent", "a percentage: 0 to 100");
    snprintf(schema, sizeof schema, "tm_dedup_bench_%d", (int)getpid());
    snprintf(sqlite_path, sizeof sqlite_path, "%s/tm-dedup-bench.db", dir);
    printf("# dedup_bench: %zu rows, %zu reps, sinks %s, keys %s\n", rows, reps,
           sinks, keys);
    printf("%-8s %6s %6s %12s %12s %12s %8s %8s\n", "sink", "batch", "resent",
           "append/s", "dedup/s", "upsert/s", "dedup/a", "upsert/a");
    for (int postgres = 0; postgres < 2; postgres++) {
        const char *name = postgres ? "postgres" : "sqlite";
        if (!strstr(sinks, name))
            continue;
        char errstr[1024];
        tm_plugin loaded;
        if (tm_plugin_load(plugins[postgres], NULL, 0, &loaded, errstr,
                           sizeof errstr) != 0)
            die("load", errstr);
        for (size_t bi = 0; bi < nb; bi++)
            for (size_t ri = 0; ri < nr; ri++) {
                bench_data d;
                make_data(&d, rows, batches[bi], (unsigned)resents[ri],
                          keys[0] == 's');
                double t[NMODES][100], med[NMODES];
                for (size_t r = 0; r < reps; r++) /* alternated */
                    for (int m = 0; m < NMODES; m++)
                        t[m][r] = strstr(modes, MODE_NAME[m])
                                      ? run(loaded.api, postgres, m, &d)
                                      : INFINITY;
                for (int m = 0; m < NMODES; m++)
                    med[m] = bench_median(t[m], reps);
                printf("%-8s %6zu %5zu%% %12.0f %12.0f %12.0f %8.3f %8.3f\n",
                       name, batches[bi], resents[ri],
                       (double)rows / med[APPEND], (double)rows / med[DEDUP],
                       (double)rows / med[UPSERT], med[APPEND] / med[DEDUP],
                       med[APPEND] / med[UPSERT]);
                fflush(stdout);
                bench_data_free(&d);
            }
        fresh(postgres);
    }
    return 0;
}
