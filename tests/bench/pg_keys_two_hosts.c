/* pg_keys_two_hosts: what a retention costs the PostgreSQL sink's business
 * keys held in memory when two hosts of one connector commit in turn
 * (docs/sinks/postgres.md, "Business keys held in memory"). N keys stored
 * (rows of 10 000 digests, or --per-row; with a retention, the oldest row
 * expiring at each commit, else never), then HOSTS sink instances of
 * connector "two" (partitions 0 and 1) claim, and commit in turn, COMMITS
 * batches of one new key each, a little more than the retention apart, so
 * that each commit's pruning removes about one batch row (as continuous
 * traffic does). A removal moves the connector's pruned_generation, which
 * the other host's set follows (before, it was reloaded whole in its next
 * commit).
 *
 * Prints each host's median and worst commit time and, from the server's
 * own statistics (pg_stat_user_tables, read after the sinks closed), how
 * many rows of tidemark_key_batches were read from the claims on (each
 * claim reads the N / 10 000 rows twice: counted and loaded; each pruning
 * reads the rows it removes and the first one it keeps (before, the
 * connector's rows); a whole reload reads them twice more).
 * Not a ctest test.
 *
 *   pg_keys_two_hosts [--keys N] [--per-row M] [--commits C] [--hosts 1|2]
 *                     [--retention S] (0: none) [--postgres-plugin PATH]
 *   pg_keys_two_hosts --stall
 *   pg_keys_two_hosts --deadlock
 *   pg_keys_two_hosts --upgrade OLD_PLUGIN
 *
 * --stall (no stored keys, no retention, statement_timeout_ms 5000): host
 * 0 stops inside a commit once its marker updates are sent, before its
 * COMMIT, and host 1 commits another key on its own partition meanwhile;
 * with "dedup_keys": "rows" and then "memory".
 *
 * --per-row M (default 10 000): keys per stored batch row; small batches
 * make many rows, which each commit's pruning reads (no age index).
 *
 * --upgrade OLD_PLUGIN: host 0 this build (--postgres-plugin), host 1 the
 * PostgreSQL plugin OLD_PLUGIN, of a build from before the keys held in
 * memory (a rolling upgrade); each applies a key, then gets the other's
 * key again on its own partition; prints the rows each key has in the
 * table. Both plugins the same: the control. Plugin paths are absolute.
 *
 * The keys go into a schema tm_two_hosts_<pid> of the server
 * TIDEMARK_PG_CONNINFO names (scripts/env.sh), dropped at the end. */
#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "config/settings.h"
#include "plugin/loader.h"
#include "services/host_services.h"

static const tm_column COLS[] = {{sizeof(tm_column), "id", TM_TYPE_INT, 1, 1}};

static void die(const char *what, const char *why) {
    fprintf(stderr, "pg_keys_two_hosts: %s: %s\n", what, why);
    exit(1);
}

typedef struct host {
    tm_settings *set;
    tm_sink_config config;
    void *s;
    int32_t partition;
    int64_t epoch, next;
    double t[1000];
    size_t nt;
} host;

/* "dedup_keys" of the --stall runs (NULL: the default) */
static const char *keys_mode;
/* --deadlock: "mode": "upsert", and every record's id column this value */
static int upsert_id = -1;
/* the host API of host 0 (NULL: the host's services) */
static const tm_host_api *host0_api;

static void host_open(const tm_sink_api *api, const char *schema,
                      long retention, host *h) {
    json_t *obj =
        json_pack("{s:s,s:s,s:s}", "conninfo", getenv("TIDEMARK_PG_CONNINFO"),
                  "schema", schema, "table", "t");
    if (retention > 0)
        json_object_set_new(obj, "dedup_retention_s", json_integer(retention));
    if (keys_mode) {
        json_object_set_new(obj, "dedup_keys", json_string(keys_mode));
        json_object_set_new(obj, "statement_timeout_ms", json_integer(5000));
    }
    if (upsert_id >= 0)
        json_object_set_new(obj, "mode", json_string("upsert"));
    h->set = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    h->config = (tm_sink_config){.struct_size = sizeof(tm_sink_config),
                                 .connector = "two",
                                 .settings = h->set,
                                 .columns = COLS,
                                 .ncolumns = 1,
                                 .flags = TM_CONFIG_DEDUP};
    tm_error err = {sizeof err, ""};
    const tm_host_api *services =
        h->partition == 0 && host0_api ? host0_api : tm_host_services();
    if (api->open(services, &h->config, &h->s, &err) != TM_OK)
        die("open", err.message);
    tm_marker m = {
        .struct_size = sizeof m, .topic = "t", .partition = h->partition};
    if (api->claim(h->s, &m, 1, 0, &err) != TM_OK)
        die("claim", err.message);
    h->epoch = m.epoch;
    h->next = m.next_offset > 0 ? m.next_offset : 0;
}

static void host_close(const tm_sink_api *api, host *h) {
    api->close(h->s);
    tm_settings_free(h->set);
}

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One batch of one new key (stamped now) at the host's next offset: its
 * status, ERR its message (dies on anything but OK unless MAY_FAIL). */
static tm_status host_try(const tm_sink_api *api, host *h, int seq,
                          int may_fail, tm_error *err) {
    char id[64], bid[64];
    snprintf(id, sizeof id, "key-%d", seq);
    snprintf(bid, sizeof bid, "two-%d-%lld", (int)h->partition,
             (long long)h->next);
    tm_value v = {.struct_size = sizeof v,
                  .v.i = upsert_id >= 0 ? upsert_id : seq};
    tm_record r = {.struct_size = sizeof r,
                   .offset = h->next,
                   .timestamp_ms = wall_ms(),
                   .values = &v,
                   .identity = id,
                   .identity_hash = "h"};
    tm_range g = {.struct_size = sizeof g,
                  .topic = "t",
                  .partition = h->partition,
                  .start_offset = h->next,
                  .end_offset = h->next + 1,
                  .epoch = h->epoch};
    tm_batch b = {.struct_size = sizeof b,
                  .connector = "two",
                  .batch_id = bid,
                  .ranges = &g,
                  .nranges = 1,
                  .records = &r,
                  .nrecords = 1};
    *err = (tm_error){sizeof *err, ""};
    double t0 = bench_now_s();
    tm_status rc = api->commit(h->s, &b, err);
    if (rc != TM_OK && !may_fail)
        die("commit", err->message);
    if (h->nt < sizeof h->t / sizeof h->t[0])
        h->t[h->nt++] = bench_now_s() - t0;
    if (rc == TM_OK)
        h->next++;
    return rc;
}

static void host_commit(const tm_sink_api *api, host *h, int seq) {
    tm_error err;
    (void)host_try(api, h, seq, 0, &err);
}

/* --stall: host 0 pauses inside its commit once its markers' updates (and
 * its keys' writes) are sent, before COMMIT (the after_marker fault point:
 * a process stopped, a VM paused, a network cut whose backend the server
 * has not noticed yet), and host 1 commits a batch of another key on
 * another partition meanwhile. Prints host 1's status and time. */
static const tm_sink_api *stall_api;
static host *stall_other;
static int stall_fired;
static tm_status stall_rc;
static double stall_s;
static char stall_msg[TM_ERROR_MAX];

static void stall_fault(const char *point) {
    if (stall_fired || !stall_other || strcmp(point, TM_FAULT_AFTER_MARKER))
        return;
    stall_fired = 1;
    tm_error err;
    double t0 = bench_now_s();
    stall_rc = host_try(stall_api, stall_other, 1000, 1, &err);
    stall_s = bench_now_s() - t0;
    snprintf(stall_msg, sizeof stall_msg, "%s", err.message);
}

static void stall_run(const tm_sink_api *api, const char *schema,
                      const char *mode) {
    static tm_host_api with_fault;
    with_fault = *tm_host_services();
    with_fault.fault = stall_fault;
    host0_api = &with_fault;
    keys_mode = mode;
    stall_api = api;
    host h[2] = {{.partition = 0}, {.partition = 1}};
    for (int i = 0; i < 2; i++)
        host_open(api, schema, 0, &h[i]);
    host_commit(api, &h[0], 1); /* each host's first commit, unstalled */
    host_commit(api, &h[1], 2);
    stall_other = &h[1];
    stall_fired = 0;
    host_commit(api, &h[0], 3);
    stall_other = NULL;
    if (!stall_fired)
        die("--stall", "inconclusive: the after_marker point never came");
    printf("dedup_keys %s: while host 0 stood before its COMMIT, host 1's "
           "commit (another partition, another key) was %s after %.3f s%s%s\n",
           mode, tm_status_name(stall_rc), stall_s,
           stall_rc == TM_OK ? "" : ": ", stall_rc == TM_OK ? "" : stall_msg);
    for (int i = 0; i < 2; i++)
        host_close(api, &h[i]);
}

static PGresult *must(PGconn *c, PGresult *res, const char *what) {
    if (PQresultStatus(res) != PGRES_COMMAND_OK &&
        PQresultStatus(res) != PGRES_TUPLES_OK)
        die(what, PQerrorMessage(c));
    return res;
}

/* N random digests in rows of PER, and the connector's generation moved
 * past them. Without a retention they never expire; with one (RETENTION
 * s), row g expires a little before the g-th commit (commits come
 * RETENTION s and 0.1 s apart), so that each commit's pruning removes about
 * one row, the oldest, and the set stays about N keys. Returns the rows
 * written. */
static long fill(PGconn *c, const char *schema, size_t n, size_t per,
                 long retention) {
    char q[512];
    snprintf(q, sizeof q,
             "INSERT INTO \"%s\".tidemark_key_batches SELECT 'two', "
             "$1::bigint, $4::bigint, $4::bigint, $2::bigint, $3::bytea, "
             "seed_check FROM \"%s\".tidemark_keysets WHERE connector = "
             "'two'",
             schema, schema);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long now_ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    PQclear(must(c, PQexec(c, "BEGIN"), "BEGIN"));
    unsigned char *blob = malloc(240000);
    uint64_t x = 88172645463325252ULL;
    long gen = 0;
    for (size_t done = 0; done < n; gen++) {
        size_t m = n - done < per ? n - done : per;
        for (size_t i = 0; i < m * 24; i += 8) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint64_t v = i % 24 == 0 ? x | 1 : x;
            memcpy(blob + i, &v, 8); /* little-endian hosts only */
        }
        char g[32], nk[32], at[32];
        snprintf(g, sizeof g, "%ld", gen + 1);
        snprintf(nk, sizeof nk, "%zu", m);
        snprintf(at, sizeof at, "%lld",
                 retention > 0 ? now_ms + gen * (retention * 1000 + 100) -
                                     retention * 1000 + 50
                               : 4000000000000000LL);
        const char *v[4] = {g, nk, (const char *)blob, at};
        const int lens[4] = {0, 0, (int)(m * 24), 0}, fmts[4] = {0, 0, 1, 0};
        PQclear(
            must(c, PQexecParams(c, q, 4, NULL, v, lens, fmts, 0), "insert"));
        done += m;
    }
    snprintf(q, sizeof q,
             "UPDATE \"%s\".tidemark_keysets SET generation = %ld WHERE "
             "connector = 'two'",
             schema, gen);
    PQclear(must(c, PQexec(c, q), "update"));
    PQclear(must(c, PQexec(c, "COMMIT"), "COMMIT"));
    free(blob);
    return gen;
}

/* Rows of tidemark_key_batches the server has read (by index or scan). */
static long long rows_read(PGconn *c, const char *schema) {
    char q[512];
    snprintf(q, sizeof q,
             "SELECT pg_stat_clear_snapshot(); SELECT coalesce(seq_tup_read, "
             "0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables WHERE "
             "schemaname = '%s' AND relname = 'tidemark_key_batches'",
             schema);
    PGresult *res = must(c, PQexec(c, q), "pg_stat_user_tables");
    long long n = atoll(PQgetvalue(res, 0, 0));
    PQclear(res);
    return n;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* --upgrade OLD: host 0 runs this build (keys held in memory), host 1 the
 * plugin OLD (a build from before them, one per-key row in tidemark_keys),
 * as in a rolling upgrade. Each applies a key of its own, then each gets
 * the other's key again (a resend on its own partition: dedup is across
 * the connector's partitions). Prints how many rows each key has in the
 * table: 1 is a duplicate caught. */
static void upgrade_run(const tm_sink_api *api, const tm_sink_api *old,
                        PGconn *c, const char *schema) {
    host h[2] = {{.partition = 0}, {.partition = 1}};
    host_open(api, schema, 0, &h[0]);
    host_open(old, schema, 0, &h[1]);
    /* key-1 by the new build, key-2 by the old; then each again to the
     * other (this build refuses the old build's key rows for a connector
     * held in memory: its commits fail, printed) */
    const struct { int h, seq; } step[] = {{0, 1}, {1, 2}, {0, 2}, {1, 1}};
    for (int i = 0; i < 4; i++) {
        tm_error err;
        host *x = &h[step[i].h];
        tm_status rc = host_try(step[i].h ? old : api, x, step[i].seq, 1, &err);
        if (rc != TM_OK)
            printf("host %d (%s build), key-%d: %s: %s\n", step[i].h,
                   step[i].h ? "old" : "this", step[i].seq, tm_status_name(rc),
                   err.message);
    }
    host_close(api, &h[0]);
    host_close(old, &h[1]);
    char q[512];
    snprintf(q, sizeof q,
             "SELECT _tm_identity, count(*) FROM \"%s\".t GROUP BY 1 ORDER "
             "BY 1",
             schema);
    PGresult *res = must(c, PQexec(c, q), "counting rows");
    for (int i = 0; i < PQntuples(res); i++)
        printf("%s: %s row(s) in the table (applied by host %d, sent again "
               "to host %d)\n",
               PQgetvalue(res, i, 0), PQgetvalue(res, i, 1),
               strcmp(PQgetvalue(res, i, 0), "key-1") ? 1 : 0,
               strcmp(PQgetvalue(res, i, 0), "key-1") ? 0 : 1);
    PQclear(res);
}

/* --deadlock: two hosts of one connector in upsert mode write the same
 * row key (id 1) from partitions 0 and 1, under different business keys.
 * Host 0 decides again with the connector's row locked first (its set
 * made stale: another host's removal of tidemark_keys rows, legacy_pruned
 * moved), and a
 * trigger holds its row's INSERT 1.5 s (partition 0 only); host 1, whose
 * set is current, commits from a thread meanwhile: it writes the row first
 * and then waits for the connector's row. Prints both outcomes: a cycle
 * (host 0 holding the connector's row and waiting for the table's row,
 * host 1 the other way round) ends with one of them aborted by the
 * server's deadlock detector. */
typedef struct dl_call {
    const tm_sink_api *api;
    host *h;
    int seq;
    tm_status rc;
    double s;
    char msg[TM_ERROR_MAX];
} dl_call;

static void *dl_commit(void *arg) {
    dl_call *c = arg;
    tm_error err;
    double t0 = bench_now_s();
    c->rc = host_try(c->api, c->h, c->seq, 1, &err);
    c->s = bench_now_s() - t0;
    snprintf(c->msg, sizeof c->msg, "%s", err.message);
    return NULL;
}

static void deadlock_run(const tm_sink_api *api, PGconn *c,
                         const char *schema) {
    upsert_id = 1;
    host h[2] = {{.partition = 0}, {.partition = 1}};
    for (int i = 0; i < 2; i++)
        host_open(api, schema, 0, &h[i]);
    host_commit(api, &h[0], 1);
    host_commit(api, &h[1], 2);
    char q[1024];
    snprintf(q, sizeof q,
             "CREATE FUNCTION \"%s\".slow() RETURNS trigger LANGUAGE plpgsql "
             "AS $$BEGIN IF NEW._tm_partition = 0 THEN PERFORM "
             "pg_sleep(1.5); END IF; RETURN NEW; END$$; CREATE TRIGGER slow "
             "BEFORE INSERT ON \"%s\".t FOR EACH ROW EXECUTE FUNCTION "
             "\"%s\".slow(); UPDATE \"%s\".tidemark_keysets SET "
             "legacy_pruned = legacy_pruned + 1",
             schema, schema, schema, schema);
    PQclear(must(c, PQexec(c, q), "trigger"));
    /* host 1 claims again: its set current, host 0's stale */
    tm_marker m = {.struct_size = sizeof m, .topic = "t", .partition = 1};
    tm_error err = {sizeof err, ""};
    if (api->claim(h[1].s, &m, 1, 0, &err) != TM_OK)
        die("claim", err.message);
    h[1].epoch = m.epoch;
    dl_call a = {.api = api, .h = &h[0], .seq = 3},
            b = {.api = api, .h = &h[1], .seq = 4};
    pthread_t ta, tb;
    if (pthread_create(&ta, NULL, dl_commit, &a) != 0)
        die("thread", "cannot start");
    /* host 0: its first run's row (1.5 s), then the connector's row and
     * its second run's row (1.5 s more): host 1 comes into that */
    nanosleep(&(struct timespec){.tv_sec = 2, .tv_nsec = 200000000}, NULL);
    if (pthread_create(&tb, NULL, dl_commit, &b) != 0)
        die("thread", "cannot start");
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    dl_call *calls[2] = {&a, &b};
    for (int i = 0; i < 2; i++)
        printf("host %d: %s after %.3f s%s%s\n", i,
               tm_status_name(calls[i]->rc), calls[i]->s,
               calls[i]->rc == TM_OK ? "" : ": ",
               calls[i]->rc == TM_OK ? "" : calls[i]->msg);
    for (int i = 0; i < 2; i++)
        host_close(api, &h[i]);
}

int main(int argc, char **argv) {
    size_t n = 1000000, per = 10000;
    int commits = 10, hosts = 2, stall = 0, deadlock = 0;
    long retention = 1;
    const char *plugin_path = TM_POSTGRES_PLUGIN, *old_path = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--stall")) {
            stall = 1;
            i--;
        } else if (!strcmp(argv[i], "--deadlock")) {
            deadlock = 1;
            i--;
        } else if (i + 1 >= argc)
            die("bad argument", argv[i]);
        else if (!strcmp(argv[i], "--keys"))
            n = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--per-row"))
            per = strtoul(argv[i + 1], NULL, 10)
                      ? strtoul(argv[i + 1], NULL, 10)
                      : 1;
        else if (!strcmp(argv[i], "--commits"))
            commits = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--hosts"))
            hosts = atoi(argv[i + 1]) == 1 ? 1 : 2;
        else if (!strcmp(argv[i], "--retention"))
            retention = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--postgres-plugin"))
            plugin_path = argv[i + 1];
        else if (!strcmp(argv[i], "--upgrade"))
            old_path = argv[i + 1];
        else
            die("bad argument", argv[i]);
    }
    if (!getenv("TIDEMARK_PG_CONNINFO"))
        die("TIDEMARK_PG_CONNINFO", "not set (scripts/env.sh)");
    char schema[64];
    snprintf(schema, sizeof schema, "tm_two_hosts_%d", (int)getpid());
    tm_plugin plugin;
    char errstr[512];
    if (tm_plugin_load(plugin_path, NULL, 0, &plugin, errstr, sizeof errstr))
        die("load", errstr);
    const tm_sink_api *api = plugin.api;
    PGconn *c = PQconnectdb(getenv("TIDEMARK_PG_CONNINFO"));
    if (PQstatus(c) != CONNECTION_OK)
        die("connect", PQerrorMessage(c));
    char q[256];
    snprintf(q, sizeof q,
             "SET client_min_messages = warning; DROP SCHEMA IF EXISTS "
             "\"%s\" CASCADE",
             schema);
    if (old_path) {
        tm_plugin oldp;
        if (tm_plugin_load(old_path, NULL, 0, &oldp, errstr, sizeof errstr))
            die("load", errstr);
        upgrade_run(api, oldp.api, c, schema);
        PQclear(PQexec(c, q));
        PQfinish(c);
        return 0;
    }
    if (deadlock) {
        deadlock_run(api, c, schema);
        PQclear(PQexec(c, q));
        PQfinish(c);
        return 0;
    }
    if (stall) {
        const char *modes[2] = {"rows", "memory"};
        for (int i = 0; i < 2; i++) {
            stall_run(api, schema, modes[i]);
            PQclear(PQexec(c, q));
        }
        PQfinish(c);
        return 0;
    }
    host h[2] = {{.partition = 0}, {.partition = 1}};
    /* made by the sink: its tables and the connector's keysets row */
    host_open(api, schema, retention, &h[0]);
    host_close(api, &h[0]);
    long stored = fill(c, schema, n, per, retention);
    /* from before the claims: a backend's statistics may reach the server
     * only as it exits */
    long long before = rows_read(c, schema);
    for (int i = 0; i < hosts; i++)
        host_open(api, schema, retention, &h[i]);
    for (int k = 0; k < commits; k++) {
        /* past the retention since the commit before: each commit's
         * pruning removes an earlier commit's batch row */
        if (retention > 0)
            nanosleep(
                &(struct timespec){.tv_sec = retention, .tv_nsec = 100000000},
                NULL);
        host_commit(api, &h[k % hosts], k);
    }
    for (int i = 0; i < hosts; i++)
        host_close(api, &h[i]);
    sleep(1); /* the backends' statistics flushed as they exit */
    long long read = rows_read(c, schema) - before;
    printf("keys %zu in %ld rows, %d host(s), retention %ld s, %d commits:\n",
           n, stored, hosts, retention, commits);
    for (int i = 0; i < hosts; i++) {
        qsort(h[i].t, h[i].nt, sizeof h[i].t[0], by_value);
        printf("  host %d: %zu commits, median %.4f s, worst %.4f s\n", i,
               h[i].nt, h[i].t[h[i].nt / 2], h[i].t[h[i].nt - 1]);
    }
    printf("  rows of tidemark_key_batches read by the server from the "
           "claims on: %lld (%.1f a commit)\n",
           read, (double)read / commits);
    PQclear(PQexec(c, q));
    PQfinish(c);
    return 0;
}
