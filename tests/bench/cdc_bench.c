/* cdc_bench: what a batch of change events costs each sink by how its
 * events spread over keys, through the plugin API (loaded with the host's
 * loader), in one run: the same number of events committed in batches of
 * one size, as WIDE (every event a create of a key of its own), HOT (every
 * event an update of one key) and CHURN (a tenth of the batch's size in
 * keys, every fifth event a delete); events/s of each (median of the
 * reps, workloads alternated) and the ratios hot/wide and churn/wide. A
 * hot key must cost about what distinct keys cost (docs/sinks/postgres.md,
 * step 4). Not a ctest test: docs/benchmarks.md.
 *
 *   cdc_bench [--events N] [--reps N] [--batch N] [--sinks sqlite,postgres]
 *             [--dir DIR] [--sqlite-plugin PATH] [--postgres-plugin PATH]
 *
 * PostgreSQL: TIDEMARK_PG_CONNINFO (scripts/env.sh), schema
 * tm_cdc_bench_<pid>, dropped at the end. SQLite: DIR/tm-cdc-bench.db. */
#include <errno.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_data.h"
#include "plugin/loader.h"

#define NCOLS 2
static const tm_column COLS[NCOLS] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 1},
    {sizeof(tm_column), "name", TM_TYPE_TEXT, 0, 0},
};
static const char *TOPIC = "bench.cdc";

enum { WIDE, HOT, CHURN, NLOADS };

static void die(const char *what, const char *why) {
    fprintf(stderr, "cdc_bench: %s: %s\n", what, why);
    exit(1);
}

/* Event i of LOAD: its key and op. */
static void event_of(int load, size_t i, size_t batch, int64_t *key,
                     uint32_t *op) {
    size_t keys = batch / 10 ? batch / 10 : 1;
    *op = TM_OP_UPSERT;
    switch (load) {
    case WIDE: *key = (int64_t)i + 1; break;
    case HOT: *key = 1; break;
    default:
        *key = (int64_t)(i % keys) + 1;
        if (i % 5 == 4)
            *op = TM_OP_DELETE;
    }
}

/* The events of LOAD in batches of BATCH: 24 bytes of text a row, a
 * value's name (a delete carries only its key). */
static void make_data(bench_data *d, int load, size_t nevents, size_t batch) {
    bench_data_alloc(d, "cdc_bench", nevents, batch, NCOLS, 24);
    for (size_t i = 0; i < nevents; i++) {
        tm_value *v = &d->values[i * NCOLS];
        char *name = d->text + i * 24;
        uint32_t op;
        event_of(load, i, batch, &v[0].v.i, &op);
        int nl = snprintf(name, 24, "v%zu", i);
        v[1].is_null = op == TM_OP_DELETE;
        v[1].v.s.ptr = name;
        v[1].v.s.len = (size_t)nl;
        bench_data_record(d, i, 1700000000000, name, (size_t)nl);
        d->records[i].op = op;
    }
}

static void stamp(void *ctx, int64_t epoch) {
    bench_data_batches(ctx, TOPIC, epoch);
}

static char schema[64], sqlite_path[1024];

static void quiet(void *arg, const char *message) {
    (void)arg;
    (void)message; /* DROP ... CASCADE notices */
}

static void fresh(int postgres) {
    if (postgres) {
        const char *ci = getenv("TIDEMARK_PG_CONNINFO");
        if (!ci)
            die("postgres", "TIDEMARK_PG_CONNINFO is not set (scripts/env.sh)");
        PGconn *c = PQconnectdb(ci);
        if (PQstatus(c) != CONNECTION_OK)
            die("postgres", PQerrorMessage(c));
        PQsetNoticeProcessor(c, quiet, NULL);
        char sql[128];
        snprintf(sql, sizeof sql, "DROP SCHEMA IF EXISTS %s CASCADE", schema);
        PGresult *r = PQexec(c, sql);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            die(sql, PQerrorMessage(c));
        PQclear(r);
        PQfinish(c);
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

/* Seconds for every batch of D into a fresh table (upsert, change
 * events). */
static double run(const tm_sink_api *api, int postgres, bench_data *d) {
    fresh(postgres);
    json_t *obj = postgres ? json_pack("{s:s,s:s,s:s,s:s}", "conninfo",
                                       getenv("TIDEMARK_PG_CONNINFO"), "schema",
                                       schema, "table", "t", "mode", "upsert")
                           : json_pack("{s:s,s:s,s:s}", "path", sqlite_path,
                                       "table", "t", "mode", "upsert");
    if (!obj)
        die("settings", "out of memory");
    char errstr[1024];
    double t = bench_time_sink_flags(
        api, obj, postgres ? "postgres" : "sqlite", COLS, NCOLS, TM_CONFIG_CDC,
        TOPIC, stamp, d, d->batches, d->nbatches, errstr, sizeof errstr);
    json_decref(obj);
    if (t < 0)
        die("commit", errstr);
    return t;
}

int main(int argc, char **argv) {
    size_t events = 100000, reps = 3, batch = 10000;
    const char *sinks = "sqlite,postgres", *dir = "/tmp";
    const char *plugins[2] = {TM_SQLITE_PLUGIN, TM_POSTGRES_PLUGIN};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--events"))
            events = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reps"))
            reps = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--batch"))
            batch = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--sinks"))
            sinks = argv[i + 1];
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--sqlite-plugin"))
            plugins[0] = argv[i + 1];
        else if (!strcmp(argv[i], "--postgres-plugin"))
            plugins[1] = argv[i + 1];
        else
            die("bad argument", argv[i]);
    }
    if (!events || !batch || !reps || reps > 100)
        die("arguments", "--events, --batch, --reps must be > 0 (reps <= 100)");
    snprintf(schema, sizeof schema, "tm_cdc_bench_%d", (int)getpid());
    snprintf(sqlite_path, sizeof sqlite_path, "%s/tm-cdc-bench.db", dir);
    printf("# cdc_bench: %zu events in batches of %zu, %zu reps\n", events,
           batch, reps);
    printf("%-8s %12s %12s %12s %8s %8s\n", "sink", "wide/s", "hot/s",
           "churn/s", "hot/w", "churn/w");
    for (int postgres = 0; postgres < 2; postgres++) {
        const char *name = postgres ? "postgres" : "sqlite";
        if (!strstr(sinks, name))
            continue;
        char errstr[1024];
        tm_plugin loaded;
        if (tm_plugin_load(plugins[postgres], NULL, 0, &loaded, errstr,
                           sizeof errstr) != 0)
            die("load", errstr);
        bench_data d[NLOADS];
        for (int l = 0; l < NLOADS; l++)
            make_data(&d[l], l, events, batch);
        double t[NLOADS][100], med[NLOADS];
        for (size_t r = 0; r < reps; r++) /* alternated */
            for (int l = 0; l < NLOADS; l++)
                t[l][r] = run(loaded.api, postgres, &d[l]);
        for (int l = 0; l < NLOADS; l++) {
            med[l] = bench_median(t[l], reps);
            bench_data_free(&d[l]);
        }
        printf("%-8s %12.0f %12.0f %12.0f %8.3f %8.3f\n", name,
               (double)events / med[WIDE], (double)events / med[HOT],
               (double)events / med[CHURN], med[WIDE] / med[HOT],
               med[WIDE] / med[CHURN]);
        fflush(stdout);
        fresh(postgres);
    }
    return 0;
}
