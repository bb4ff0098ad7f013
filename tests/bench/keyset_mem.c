/* keyset_mem: what a sink's business keys held in memory ("dedup_keys":
 * "memory", docs/sinks/sqlite.md and docs/sinks/postgres.md) cost at
 * claim: a
 * connector with N keys stored (rows of tidemark_key_batches of 10 000
 * digests each, written here directly: random 24-byte digests, as SipHash
 * gives), then the sink opened and the partition claimed (which loads the
 * set), then one batch of 1000 new keys committed. Prints the process's
 * resident set (VmRSS, /proc/self/status) before the open and after the
 * claim, the bytes per key, the claim's and the commit's seconds, and the
 * longest time another connection could not take the file's write lock
 * during the claim (a thread taking and releasing it in a loop). Not a
 * ctest test: docs/benchmarks.md.
 *
 *   keyset_mem --keys N [--dir DIR] [--sqlite-plugin PATH]
 *   keyset_mem --sink postgres --keys N [--postgres-plugin PATH]
 *
 * DIR (default: the current directory) holds the database while it runs:
 * 24 bytes a key and the pages around them. With --sink postgres the keys
 * go into a schema tm_keyset_mem_<pid> of the server TIDEMARK_PG_CONNINFO
 * names (scripts/env.sh), dropped at the end; no lock thread (a claim
 * there takes no lock). */
#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "config/settings.h"
#include "plugin/loader.h"
#include "services/host_services.h"

static const tm_column COLS[] = {{sizeof(tm_column), "id", TM_TYPE_INT, 1, 1}};

static void die(const char *what, const char *why) {
    fprintf(stderr, "keyset_mem: %s: %s\n", what, why);
    exit(1);
}

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

typedef struct sink {
    tm_settings *set;
    tm_sink_config config;
    void *s;
} sink;

/* PostgreSQL: PATH is the schema. */
static int on_pg;

static void sink_open(const tm_sink_api *api, const char *path, sink *k) {
    json_t *obj = on_pg ? json_pack("{s:s,s:s,s:s}", "conninfo",
                                    getenv("TIDEMARK_PG_CONNINFO"), "schema",
                                    path, "table", "t")
                        : json_pack("{s:s,s:s,s:s}", "path", path, "table", "t",
                                    "synchronous", "NORMAL");
    k->set = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    k->config = (tm_sink_config){.struct_size = sizeof(tm_sink_config),
                                 .connector = "mem",
                                 .settings = k->set,
                                 .columns = COLS,
                                 .ncolumns = 1,
                                 .flags = TM_CONFIG_DEDUP};
    tm_error err = {sizeof err, ""};
    if (api->open(tm_host_services(), &k->config, &k->s, &err) != TM_OK)
        die("open", err.message);
}

static int64_t claim(const tm_sink_api *api, sink *k) {
    tm_marker m = {.struct_size = sizeof m, .topic = "t", .partition = 0};
    tm_error err = {sizeof err, ""};
    if (api->claim(k->s, &m, 1, 0, &err) != TM_OK)
        die("claim", err.message);
    return m.epoch;
}

static void sink_close(const tm_sink_api *api, sink *k) {
    api->close(k->s);
    tm_settings_free(k->set);
}

static void sql(sqlite3 *db, const char *text) {
    if (sqlite3_exec(db, text, NULL, NULL, NULL) != SQLITE_OK)
        die(text, sqlite3_errmsg(db));
}

/* N random digests (xorshift64, a's low bit set) into BLOB, 24 a key. */
static void random_keys(unsigned char *blob, size_t m, uint64_t *x) {
    for (size_t i = 0; i < m * 24; i += 8) {
        *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
        uint64_t v = i % 24 == 0 ? *x | 1 : *x;
        memcpy(blob + i, &v, 8); /* little-endian hosts only */
    }
}

static void pg_ok(PGconn *c, PGresult *res, const char *what) {
    if (PQresultStatus(res) != PGRES_COMMAND_OK &&
        PQresultStatus(res) != PGRES_TUPLES_OK)
        die(what, PQerrorMessage(c));
    PQclear(res);
}

/* The same in PostgreSQL (schema SCHEMA), and the connector's generation
 * moved past them, as the sink's commits would have. */
static void fill_pg(const char *schema, size_t n) {
    PGconn *c = PQconnectdb(getenv("TIDEMARK_PG_CONNINFO"));
    if (PQstatus(c) != CONNECTION_OK)
        die("connect", PQerrorMessage(c));
    char q[2600];
    snprintf(q, sizeof q,
             "INSERT INTO \"%s\".tidemark_key_batches SELECT 'mem', "
             "$1::bigint, 0, 0, $2::bigint, $3::bytea, seed_check FROM "
             "\"%s\".tidemark_keysets WHERE connector = 'mem'",
             schema, schema);
    pg_ok(c, PQexec(c, "BEGIN"), "BEGIN");
    unsigned char *blob = malloc(240000);
    uint64_t x = 88172645463325252ULL;
    int64_t gen = 0;
    for (size_t done = 0; done < n; gen++) {
        size_t m = n - done < 10000 ? n - done : 10000;
        random_keys(blob, m, &x);
        char g[32], nk[32];
        snprintf(g, sizeof g, "%lld", (long long)gen + 1);
        snprintf(nk, sizeof nk, "%zu", m);
        const char *v[3] = {g, nk, (const char *)blob};
        const int lens[3] = {0, 0, (int)(m * 24)}, fmts[3] = {0, 0, 1};
        pg_ok(c, PQexecParams(c, q, 3, NULL, v, lens, fmts, 0), "insert");
        done += m;
    }
    snprintf(q, sizeof q,
             "UPDATE \"%s\".tidemark_keysets SET generation = %lld WHERE "
             "connector = 'mem'",
             schema, (long long)gen);
    pg_ok(c, PQexec(c, q), "update");
    pg_ok(c, PQexec(c, "COMMIT"), "COMMIT");
    free(blob);
    PQfinish(c);
}

static void drop_pg(const char *schema) {
    PGconn *c = PQconnectdb(getenv("TIDEMARK_PG_CONNINFO"));
    char q[1100];
    snprintf(q, sizeof q,
             "SET client_min_messages = warning; DROP SCHEMA IF EXISTS "
             "\"%s\" CASCADE",
             schema);
    if (PQstatus(c) == CONNECTION_OK)
        PQclear(PQexec(c, q));
    PQfinish(c);
}

/* N random digests into tidemark_key_batches, rows of 10 000. */
static void fill(const char *path, size_t n) {
    sqlite3 *db;
    sqlite3_stmt *st;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        die(path, "cannot open");
    sql(db, "BEGIN");
    if (sqlite3_prepare_v2(db,
                           "INSERT INTO tidemark_key_batches VALUES ('mem', "
                           "?1, 0, 0, ?2, ?3)",
                           -1, &st, NULL) != SQLITE_OK)
        die("insert", sqlite3_errmsg(db));
    unsigned char *blob = malloc(240000);
    uint64_t x = 88172645463325252ULL;
    int64_t gen = 0; /* the rows' generations 1, 2, ... */
    for (size_t done = 0; done < n; gen++) {
        size_t m = n - done < 10000 ? n - done : 10000;
        random_keys(blob, m, &x);
        sqlite3_bind_int64(st, 1, gen + 1);
        sqlite3_bind_int64(st, 2, (int64_t)m);
        sqlite3_bind_blob(st, 3, blob, (int)(m * 24), SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_DONE)
            die("insert", sqlite3_errmsg(db));
        sqlite3_reset(st);
        done += m;
    }
    sqlite3_finalize(st);
    sql(db, "COMMIT");
    free(blob);
    sqlite3_close(db);
}

/* Takes and releases the write lock in a loop (no busy wait: BUSY at
 * once) until stop; the longest span in which it was refused. */
typedef struct locker {
    const char *path;
    atomic_int stop;
    double longest;
} locker;

static void *lock_loop(void *arg) {
    locker *l = arg;
    sqlite3 *db;
    if (sqlite3_open(l->path, &db) != SQLITE_OK)
        die(l->path, "cannot open");
    double busy_since = -1;
    while (!atomic_load(&l->stop)) {
        int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        double now = bench_now_s();
        if (rc == SQLITE_OK) {
            sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
            if (busy_since >= 0 && now - busy_since > l->longest)
                l->longest = now - busy_since;
            busy_since = -1;
        } else if (busy_since < 0) {
            busy_since = now;
        }
    }
    sqlite3_close(db);
    return NULL;
}

int main(int argc, char **argv) {
    size_t n = 1000000;
    const char *dir = ".", *plugin_path = TM_SQLITE_PLUGIN;
    const char *pg_plugin = TM_POSTGRES_PLUGIN;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--keys"))
            n = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--sqlite-plugin"))
            plugin_path = argv[i + 1];
        else if (!strcmp(argv[i], "--postgres-plugin"))
            pg_plugin = argv[i + 1];
        else if (!strcmp(argv[i], "--sink"))
            on_pg = !strcmp(argv[i + 1], "postgres");
        else
            die("bad argument", argv[i]);
    }
    char path[1024];
    if (on_pg && !getenv("TIDEMARK_PG_CONNINFO"))
        die("--sink postgres", "TIDEMARK_PG_CONNINFO is not set");
    if (on_pg)
        snprintf(path, sizeof path, "tm_keyset_mem_%d", (int)getpid());
    else
        snprintf(path, sizeof path, "%s/tm-keyset-mem-%d.db", dir,
                 (int)getpid());
    if (on_pg)
        plugin_path = pg_plugin;
    tm_plugin plugin;
    char errstr[512];
    if (tm_plugin_load(plugin_path, NULL, 0, &plugin, errstr, sizeof errstr))
        die("load", errstr);
    const tm_sink_api *api = plugin.api;
    sink k;
    /* made by the sink: its tables and the connector's keysets row */
    sink_open(api, path, &k);
    claim(api, &k);
    sink_close(api, &k);
    if (on_pg)
        fill_pg(path, n);
    else
        fill(path, n);
    long before = rss_kib();
    double t0 = bench_now_s();
    sink_open(api, path, &k);
    locker lk = {.path = path};
    pthread_t th;
    if (!on_pg && pthread_create(&th, NULL, lock_loop, &lk) != 0)
        die("thread", "cannot start");
    int64_t epoch = claim(api, &k);
    double t_claim = bench_now_s() - t0;
    atomic_store(&lk.stop, 1);
    if (!on_pg)
        pthread_join(th, NULL);
    long after = rss_kib();
    /* one batch of 1000 new keys against the full set */
    enum { NB = 1000 };
    static tm_record rec[NB];
    static tm_value val[NB];
    static char ids[NB][32];
    for (size_t i = 0; i < NB; i++) {
        snprintf(ids[i], sizeof ids[i], "order-%zu", i);
        val[i] = (tm_value){.struct_size = sizeof(tm_value), .v.i = (int)i};
        rec[i] = (tm_record){.struct_size = sizeof(tm_record),
                             .offset = (int64_t)i,
                             .timestamp_ms = 1700000000000,
                             .values = &val[i],
                             .identity = ids[i],
                             .identity_hash = "h"};
    }
    tm_range range = {.struct_size = sizeof range,
                      .topic = "t",
                      .start_offset = 0,
                      .end_offset = NB,
                      .epoch = epoch};
    tm_batch b = {.struct_size = sizeof b,
                  .connector = "mem",
                  .batch_id = "mem-1",
                  .ranges = &range,
                  .nranges = 1,
                  .records = rec,
                  .nrecords = NB};
    tm_error err = {sizeof err, ""};
    t0 = bench_now_s();
    if (api->commit(k.s, &b, &err) != TM_OK)
        die("commit", err.message);
    double t_commit = bench_now_s() - t0;
    sink_close(api, &k);
    printf("keys %zu: VmRSS %ld KiB before open, %ld KiB after claim: %.1f "
           "bytes a key; claim %.2f s (the write lock refused to another "
           "connection for %.3f s at most), a commit of 1000 new keys "
           "%.4f s\n",
           n, before, after, (double)(after - before) * 1024.0 / (double)n,
           t_claim, lk.longest, t_commit);
    if (on_pg) {
        drop_pg(path);
        return 0;
    }
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[1100];
        snprintf(p, sizeof p, "%s%s", path, suffix[i]);
        unlink(p);
    }
    return 0;
}
