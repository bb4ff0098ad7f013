/* End-to-end scenarios of the health model (docs/operations.md, Health):
 * a transient cause is retried for ever and shows as DEGRADED, with
 * `tidemark status` exiting 3, and the connector recovers by itself once
 * the cause is gone. Usage: health_e2e TIDEMARK_BIN PLUGIN_DIR SCENARIO;
 * each scenario is one ctest test, e2e.health.<scenario>. What is checked
 * comes from the database's rows, Kafka's own group and offsets, and the
 * exit status of `tidemark status`, never from the host's counters. */
#include <arpa/inet.h>
#include <errno.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* Kafka properties of the scenarios: a member that stops heartbeating is
 * out of the group within seconds. */
#define FAST_GROUP                                                             \
    "\"session.timeout.ms\": \"6000\", \"heartbeat.interval.ms\": \"500\""

/* The bootstrap address of the configs written, when not the broker's
 * (a proxy's). */
static char cfg_bootstrap[64];

/* More members of the configs' "batch" section (", \"k\": v"), when set. */
static char cfg_batch[128];

/* A connector NAME reading TOPIC into FILE.db (table t), its status in
 * WORKDIR/STATE, with the Kafka properties props (JSON members); extra is
 * appended to the sink's settings. */
static const char *config_state(const char *file, const char *name,
                                const char *topic, const char *props,
                                const char *settings_extra, const char *state) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "\"topics\": [\"%s\"], \"start\": \"earliest\", "
             "\"properties\": {%s}}, "
             "\"batch\": {\"max_wait_ms\": 100%s}, "
             "\"sink\": {\"plugin\": \"sqlite\", \"settings\": {\"path\": "
             "\"%s/%s.db\", \"table\": \"t\"%s}}, "
             "\"state_dir\": \"%s/%s\", "
             "\"mapping\": {\"mode\": \"json\", \"columns\": ["
             "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", "
             "\"required\": true}]}}",
             name, cfg_bootstrap[0] ? cfg_bootstrap : h_bootstrap(), topic,
             props, cfg_batch, h_workdir(), file, settings_extra, h_workdir(),
             state);
    char fname[300];
    snprintf(fname, sizeof fname, "%s.json", file);
    return h_write_file(fname, text);
}

/* The same, its status in WORKDIR/state. */
static const char *config_props(const char *file, const char *name,
                                const char *topic, const char *props,
                                const char *settings_extra) {
    return config_state(file, name, topic, props, settings_extra, "state");
}

static const char *config(const char *file, const char *name, const char *topic,
                          const char *settings_extra) {
    return config_props(file, name, topic, FAST_GROUP, settings_extra);
}

/* `tidemark status --state-dir WORKDIR/state CONNECTOR`: its exit status;
 * its output is in WORKDIR/status.out. */
static int status_exit(const char *connector) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/state", h_workdir());
    const char *args[] = {"status", "--state-dir", dir, connector, NULL};
    return h_tidemark("status.out", args);
}

/* Waits until the status file has every needle, the process staying
 * alive; fails after timeout_ms with what the file last said. */
static void wait_status(pid_t pid, const char *connector, const char *needle,
                        const char *needle2, int timeout_ms) {
    int64_t t0 = h_now_ms();
    for (;;) {
        const char *st = h_status_text(connector);
        if (strstr(st, needle) && (!needle2 || strstr(st, needle2)))
            return;
        H_CHECK(waitpid(pid, NULL, WNOHANG) == 0,
                "the host exited while waiting for %s; status: %s", needle, st);
        H_CHECK(h_now_ms() - t0 < timeout_ms,
                "the status never said %s%s%s in %d ms; it says: %s", needle,
                needle2 ? " with " : "", needle2 ? needle2 : "", timeout_ms,
                st);
        h_sleep_ms(100);
    }
}

/* The store is locked at claim time for longer than the claim's patience
 * inside the rebalance (seen: 240 s of "database is locked" became FAILED
 * and stayed FAILED once the lock was gone). The connector must be
 * DEGRADED while the lock is held, with `status` exiting 3, stay in the
 * group owning the partition, and recover by itself once the lock is
 * released: every record applied once, RUNNING, `status` exiting 0. */
static void scenario_claim_locked(void) {
    const char *topic = h_name("health-lock");
    char name[256], group[300];
    snprintf(name, sizeof name, "%s", h_name("health-lock"));
    snprintf(group, sizeof group, "tidemark-%s", name);
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 20, "{\"id\": %d}");
    const char *cfg = config("lock", name, topic, ", \"busy_timeout_ms\": 500");
    char db[4200];
    snprintf(db, sizeof db, "%s/lock.db", h_workdir());
    /* The table and markers exist: a first run applies the 20 records. */
    pid_t pid = h_spawn(cfg, "lock.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    h_stop_clean(pid);
    int64_t epoch0 = h_sqlf(db, "SELECT epoch FROM tidemark_markers");
    h_produce_many(p, topic, 0, 100, 30, "{\"id\": %d}");

    sqlite3 *lock = NULL;
    H_CHECK(sqlite3_open(db, &lock) == SQLITE_OK &&
                sqlite3_exec(lock, "BEGIN EXCLUSIVE", NULL, NULL, NULL) ==
                    SQLITE_OK,
            "cannot take the lock: %s", sqlite3_errmsg(lock));
    pid = h_spawn(cfg, "lock.log");
    wait_status(pid, name, "\"DEGRADED\"", "locked", 60000);
    h_step("lock held: the status says DEGRADED (database is locked)");
    /* Past the claim's patience in the rebalance callback (10 s) and
     * several session timeouts (6 s): still the group's owner of the
     * partition, not FAILED, not exited. */
    h_sleep_ms(20000);
    H_CHECK(h_sqlf(db, "SELECT epoch FROM tidemark_markers") == epoch0,
            "inconclusive: the claim went through despite the lock");
    char owners[1][H_OWNER_MAX];
    owners[0][0] = '\0';
    H_CHECK(h_group_owners(group, topic, 1, owners) == 1 && owners[0][0],
            "the host is not the group's owner of the partition while it "
            "waits for the claim (members or owner missing)");
    wait_status(pid, name, "\"DEGRADED\"", "locked", 5000);
    int rc = status_exit(name);
    H_CHECK(rc == 3,
            "tidemark status of a DEGRADED connector: exit %d, "
            "expected 3; it printed: %s",
            rc, h_read_file("status.out"));
    H_CHECK(strstr(h_read_file("status.out"), "DEGRADED") &&
                strstr(h_read_file("status.out"), "reason"),
            "status does not show DEGRADED with its reason: %s",
            h_read_file("status.out"));
    h_step("after 20 s more: still DEGRADED, in the group, status exit 3");

    sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(lock);
    h_wait_caught_up(db, name, topic, 1, 60000);
    H_CHECK(h_sqlf(db, "SELECT epoch FROM tidemark_markers") > epoch0,
            "caught up without a new claim (epoch %lld)",
            (long long)h_sqlf(db, "SELECT epoch FROM tidemark_markers"));
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 50 &&
                h_sqlf(db, "SELECT count(DISTINCT _tm_offset) FROM t") == 50,
            "rows: expected 50 distinct offsets, found %lld rows",
            (long long)h_sqlf(db, "SELECT count(*) FROM t"));
    wait_status(pid, name, "\"RUNNING\"", NULL, 15000);
    rc = status_exit(name);
    H_CHECK(rc == 0, "tidemark status after the recovery: exit %d: %s", rc,
            h_read_file("status.out"));
    h_step("lock released: claimed by itself, 50 rows once, RUNNING, "
           "status exit 0");
    h_stop_clean(pid);
    rd_kafka_destroy(p);
}

/* A topic of `topics` that does not exist yet: DEGRADED "waiting for
 * topic", the process alive, `status` exit 3; once the topic is created
 * and written, its records land and the connector is RUNNING. */
static void scenario_missing_topic(void) {
    const char *topic = h_name("health-late");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("health-late"));
    const char *cfg = config("late", name, topic, "");
    char db[4200];
    snprintf(db, sizeof db, "%s/late.db", h_workdir());
    pid_t pid = h_spawn(cfg, "late.log");
    wait_status(pid, name, "\"DEGRADED\"", "waiting for topic", 60000);
    int rc = status_exit(name);
    H_CHECK(rc == 3,
            "status while waiting for the topic: exit %d, expected "
            "3: %s",
            rc, h_read_file("status.out"));
    h_step("no topic: DEGRADED waiting for topic, status exit 3");

    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 15, "{\"id\": %d}");
    h_wait_caught_up(db, name, topic, 1, 120000);
    H_CHECK(h_sqlf(db, "SELECT count(DISTINCT _tm_offset) FROM t") == 15 &&
                h_sqlf(db, "SELECT count(*) FROM t") == 15,
            "rows: expected 15 distinct offsets");
    wait_status(pid, name, "\"RUNNING\"", NULL, 15000);
    rc = status_exit(name);
    H_CHECK(rc == 0, "status after the topic appeared: exit %d: %s", rc,
            h_read_file("status.out"));
    h_step("topic created: 15 rows, RUNNING, status exit 0");
    h_stop_clean(pid);
    rd_kafka_destroy(p);
}

/* `status --config` with an invalid config exits 2, as every command does
 * for one (it exited 1, the code of an I/O error). */
static void scenario_status_invalid_config(void) {
    const char *cfg = h_write_file(
        "bad.json", "{\"name\": \"health-bad\", \"kafka\": {\"topics\": "
                    "[\"x\"]}, \"sink\": {\"plugin\": \"sqlite\"}}");
    const char *args[] = {"status", "--config", cfg, NULL};
    int rc = h_tidemark("bad.out", args);
    const char *out = h_read_file("bad.out");
    H_CHECK(strstr(out, "$.kafka.bootstrap_servers"),
            "inconclusive: the config was not refused for its missing "
            "bootstrap_servers: %s",
            out);
    H_CHECK(rc == 2,
            "status --config with an invalid config: exit %d, "
            "expected 2",
            rc);
}

/* ---- a blackhole for a shared server ----------------------------------
 * A loopback TCP proxy to a shared server (PostgreSQL, the broker) that can
 * be switched to a blackhole: from then on every byte either side sends is
 * read and dropped, and the sockets stay open. The kernel still acks
 * (keepalives and the sink's TCP timeouts see a live peer): to the sink,
 * the server has simply stopped answering, as behind a dead route. Or
 * switched to refusing: every connection is closed, and each new one as
 * soon as it is accepted, as when the server is down. */
#define BH_MAX 64

typedef struct bh_proxy {
    int lfd, port, target_port;
    pthread_t th;
    atomic_int stop, hole, refuse;
    atomic_int refused; /* connections closed at once while refusing */
    /* hold_new: connections accepted from now on are held: never passed
     * to the server, their bytes dropped, while the ones already open go
     * on (a client's new connections stall, its old ones work). */
    atomic_int hold_new, held_count;
    int held[BH_MAX];
    atomic_long swallowed; /* bytes from clients dropped by the hole */
    atomic_int accepted;
    int cfd[BH_MAX], sfd[BH_MAX];
} bh_proxy;

static void bh_close(bh_proxy *x, int i) {
    close(x->cfd[i]);
    if (x->sfd[i] >= 0)
        close(x->sfd[i]);
    x->cfd[i] = x->sfd[i] = -1;
    x->held[i] = 0;
}

static void bh_accept(bh_proxy *x) {
    int c = accept(x->lfd, NULL, NULL);
    if (c < 0)
        return;
    if (atomic_load(&x->refuse)) {
        close(c);
        atomic_fetch_add(&x->refused, 1);
        return;
    }
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)x->target_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int slot = -1;
    for (int i = 0; i < BH_MAX && slot < 0; i++)
        if (x->cfd[i] < 0)
            slot = i;
    int hold = atomic_load(&x->hold_new);
    if (s < 0 || slot < 0 ||
        (!atomic_load(&x->hole) && !hold &&
         connect(s, (struct sockaddr *)&a, sizeof a) != 0)) {
        close(c);
        if (s >= 0)
            close(s);
        return;
    }
    /* In the hole a new connection (a reconnect, a cancel request) is
     * accepted and never reaches the server; held, likewise. */
    x->cfd[slot] = c;
    x->sfd[slot] = s;
    if (hold) {
        close(s);
        x->sfd[slot] = -1;
        x->held[slot] = 1;
        atomic_fetch_add(&x->held_count, 1);
    }
    atomic_fetch_add(&x->accepted, 1);
}

/* Forwards what is readable on from to to; in the hole, drops it. 0, or
 * -1 when the pair is done. */
static int bh_pump(bh_proxy *x, int from, int to, int from_client) {
    char buf[16384];
    ssize_t n = read(from, buf, sizeof buf);
    if (n <= 0)
        return -1;
    if (atomic_load(&x->hole)) {
        if (from_client)
            atomic_fetch_add(&x->swallowed, (long)n);
        return 0;
    }
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w <= 0)
            return -1;
        off += w;
    }
    return 0;
}

static void *bh_main(void *arg) {
    bh_proxy *x = arg;
    while (!atomic_load(&x->stop)) {
        for (int i = 0; i < BH_MAX && atomic_load(&x->refuse); i++)
            if (x->cfd[i] >= 0)
                bh_close(x, i);
        struct pollfd fds[1 + 2 * BH_MAX];
        int idx[1 + 2 * BH_MAX], nf = 0;
        fds[nf] = (struct pollfd){.fd = x->lfd, .events = POLLIN};
        idx[nf++] = -1;
        for (int i = 0; i < BH_MAX; i++) {
            if (x->cfd[i] < 0)
                continue;
            fds[nf] = (struct pollfd){.fd = x->cfd[i], .events = POLLIN};
            idx[nf++] = 2 * i;
            if (x->held[i])
                continue;
            fds[nf] = (struct pollfd){.fd = x->sfd[i], .events = POLLIN};
            idx[nf++] = 2 * i + 1;
        }
        if (poll(fds, (nfds_t)nf, 100) <= 0)
            continue;
        for (int k = 0; k < nf; k++) {
            if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (idx[k] < 0) {
                bh_accept(x);
                continue;
            }
            int i = idx[k] / 2, client = idx[k] % 2 == 0;
            if (x->cfd[i] < 0)
                continue;
            if (x->held[i]) {
                char drop[16384];
                if (read(x->cfd[i], drop, sizeof drop) <= 0)
                    bh_close(x, i);
                continue;
            }
            int from = client ? x->cfd[i] : x->sfd[i];
            int to = client ? x->sfd[i] : x->cfd[i];
            if (bh_pump(x, from, to, client) != 0 && !atomic_load(&x->hole))
                bh_close(x, i);
            else if (fds[k].revents & (POLLHUP | POLLERR) &&
                     !atomic_load(&x->hole))
                bh_close(x, i);
        }
    }
    for (int i = 0; i < BH_MAX; i++)
        if (x->cfd[i] >= 0)
            bh_close(x, i);
    return NULL;
}

/* A proxy to 127.0.0.1:target_port, on a port of its own (x->port). */
static void bh_start(bh_proxy *x, int target_port) {
    memset(x, 0, sizeof *x);
    for (int i = 0; i < BH_MAX; i++)
        x->cfd[i] = x->sfd[i] = -1;
    x->target_port = target_port;
    x->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    H_CHECK(x->lfd >= 0 && bind(x->lfd, (struct sockaddr *)&a, sizeof a) == 0 &&
                listen(x->lfd, 16) == 0 &&
                getsockname(x->lfd, (struct sockaddr *)&a, &len) == 0,
            "proxy: %s", strerror(errno));
    x->port = ntohs(a.sin_port);
    H_CHECK(pthread_create(&x->th, NULL, bh_main, x) == 0,
            "proxy: cannot start its thread");
}

static void bh_stop(bh_proxy *x) {
    atomic_store(&x->stop, 1);
    pthread_join(x->th, NULL);
    close(x->lfd);
}

static void pg_wait_rows(const char *table, int64_t want, int timeout_ms) {
    int64_t t0 = h_now_ms(), rows;
    while ((rows = h_pg_int("SELECT count(DISTINCT _tm_offset) FROM \"%s\"",
                            table)) != want) {
        H_CHECK(h_now_ms() - t0 < timeout_ms,
                "PostgreSQL: %lld distinct offsets in %s after %d ms, "
                "expected %lld",
                (long long)rows, table, timeout_ms, (long long)want);
        h_sleep_ms(50);
    }
}

/* The documented stop (docs/operations.md, Signals): a stopped process
 * exits within about 10 s whatever it is doing. */
#define STOP_LIMIT_MS 10000

/* SIGTERM while the PostgreSQL sink's commit waits on a server that went
 * silent (blackholed, not refused: nothing tells the sink the connection
 * is dead): exit 0 within the documented time, the status STOPPED, never
 * FAILED, nothing of the batch applied; once the server is back a new
 * host applies every record exactly once. */
static void scenario_stop_pg_blackholed(void) {
    const char *topic = h_name("health-pgbh");
    char name[256], table[256];
    snprintf(name, sizeof name, "%s", h_name("health-pgbh"));
    snprintf(table, sizeof table, "%s", h_name("health_pgbh"));
    for (char *t = table; *t; t++)
        if (*t == '-')
            *t = '_';
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 20, "{\"id\": %d}");
    bh_proxy x;
    const char *pg_port = getenv("TIDEMARK_PG_PORT");
    H_CHECK(pg_port && *pg_port, "TIDEMARK_PG_PORT is not set");
    bh_start(&x, atoi(pg_port));
    const char *ci = getenv("TIDEMARK_PG_CONNINFO");
    H_CHECK(ci && *ci, "TIDEMARK_PG_CONNINFO is not set");
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "\"topics\": [\"%s\"], \"start\": \"earliest\", "
             "\"properties\": {\"session.timeout.ms\": \"6000\", "
             "\"heartbeat.interval.ms\": \"500\"}}, "
             "\"batch\": {\"max_wait_ms\": 100}, "
             "\"sink\": {\"plugin\": \"postgres\", \"settings\": "
             "{\"conninfo\": \"%s host=127.0.0.1 port=%d\", "
             "\"table\": \"%s\"}}, \"state_dir\": \"%s/state\", "
             "\"mapping\": {\"mode\": \"json\", \"columns\": ["
             "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", "
             "\"required\": true}]}}",
             name, h_bootstrap(), topic, ci, x.port, table, h_workdir());
    const char *cfg = h_write_file("pgbh.json", text);
    pid_t pid = h_spawn(cfg, "pgbh.log");
    pg_wait_rows(table, 20, 60000);
    H_CHECK(atomic_load(&x.accepted) > 0,
            "inconclusive: the sink did not connect through the proxy");
    h_step("20 rows through the proxy");

    atomic_store(&x.hole, 1);
    long before = atomic_load(&x.swallowed);
    h_produce_many(p, topic, 0, 100, 10, "{\"id\": %d}");
    int64_t t0 = h_now_ms();
    while (atomic_load(&x.swallowed) == before) {
        H_CHECK(h_now_ms() - t0 < 30000,
                "inconclusive: the sink sent nothing into the blackhole");
        h_sleep_ms(50);
    }
    /* Its commit is in the hole: give it time to be well inside its wait. */
    h_sleep_ms(1000);
    H_CHECK(waitpid(pid, NULL, WNOHANG) == 0,
            "inconclusive: the host exited by itself");
    int64_t took;
    int rc = h_stop(pid, SIGTERM, STOP_LIMIT_MS + 20000, &took);
    const char *st = h_status_text(name);
    H_CHECK(rc == 0,
            "SIGTERM with PostgreSQL blackholed: exit %d after %lld "
            "ms, expected 0; status: %s",
            rc, (long long)took, st);
    H_CHECK(took <= STOP_LIMIT_MS,
            "SIGTERM with PostgreSQL blackholed: exited after %lld ms, the "
            "documented limit is %d ms",
            (long long)took, STOP_LIMIT_MS);
    /* What the operator sees: STOPPED (the host's lock is free), and the
     * file the host left does not say FAILED. */
    H_CHECK(!strstr(st, "FAILED"), "the status file says FAILED: %s", st);
    int src = status_exit(name);
    const char *shown = h_read_file("status.out");
    H_CHECK(src == 2 && strstr(shown, "state       STOPPED"),
            "tidemark status after the stop: exit %d, expected 2 and "
            "STOPPED: %s",
            src, shown);
    H_CHECK(h_pg_int("SELECT count(*) FROM \"%s\"", table) == 20,
            "rows moved while the server was blackholed: %lld",
            (long long)h_pg_int("SELECT count(*) FROM \"%s\"", table));
    h_step("SIGTERM in the blackholed commit: exit 0 after %lld ms, STOPPED",
           (long long)took);

    atomic_store(&x.hole, 0);
    pid = h_spawn(cfg, "pgbh.log");
    pg_wait_rows(table, 30, 60000);
    H_CHECK(h_pg_int("SELECT count(*) FROM \"%s\"", table) == 30,
            "rows: expected 30, once each");
    h_stop_clean(pid);
    h_step("server back: 30 rows, once each");
    bh_stop(&x);
    rd_kafka_destroy(p);
}

/* Kafka's port, from the bootstrap address (HOST:PORT). */
static int broker_port(void) {
    const char *colon = strrchr(h_bootstrap(), ':');
    int port = colon ? atoi(colon + 1) : 0;
    H_CHECK(port > 0 && strchr(h_bootstrap(), ',') == NULL,
            "inconclusive: the bootstrap %s is not one HOST:PORT",
            h_bootstrap());
    return port;
}

/* A host whose connections to port `from` go to port `to` (the test's
 * proxy, health_redirect.c), with up to four more environment entries
 * (`extra`, NULL-terminated, may be NULL). */
static pid_t spawn_redirected_env(const char *cfg, const char *log, int from,
                                  int to, const char *const *extra) {
    char preload[4200], redirect[64], asan[1024];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", HEALTH_REDIRECT_SO);
    snprintf(redirect, sizeof redirect, "HEALTH_REDIRECT=%d:%d", from, to);
    /* A sanitized host: its runtime is not first with the preload (seen in
     * the ASan stage: the host refused to start, reporting nothing). */
    const char *was = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "ASAN_OPTIONS=%s%sverify_asan_link_order=0",
             was ? was : "", was && *was ? ":" : "");
    const char *env[8] = {preload, redirect, asan};
    int n = 3;
    for (; extra && *extra; extra++) {
        H_CHECK(n < 7, "spawn_redirected_env: too many entries");
        env[n++] = *extra;
    }
    env[n] = NULL;
    return h_spawn_env(cfg, log, env);
}

static pid_t spawn_redirected(const char *cfg, const char *log, int from,
                              int to) {
    return spawn_redirected_env(cfg, log, from, to, NULL);
}

/* Every connection of a host to the broker cut (refused) for longer than
 * the documented threshold, the topic idle (seen: RUNNING with `last
 * error -` for as long as it lasted). The connector must be DEGRADED
 * ("Kafka unreachable"), `status` exiting 3; once the broker is reachable
 * again it must be RUNNING by itself although no record arrives, with no
 * rebalance in between (librdkafka's default session timeout, 45 s, keeps
 * the member in the group: only the reachability can end the DEGRADED),
 * then apply what comes next exactly once. The host's connections go
 * through the test's proxy (health_redirect.c), not the shared broker's
 * own state. */
static void scenario_broker_unreachable(void) {
    const char *topic = h_name("health-kdown");
    char name[256], db[4200];
    snprintf(name, sizeof name, "%s", h_name("health-kdown"));
    snprintf(db, sizeof db, "%s/kdown.db", h_workdir());
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 10, "{\"id\": %d}");
    int bport = broker_port();
    bh_proxy x;
    bh_start(&x, bport);
    const char *cfg = config_props("kdown", name, topic, "", "");
    pid_t pid = spawn_redirected(cfg, "kdown.log", bport, x.port);
    h_wait_caught_up(db, name, topic, 1, 60000);
    H_CHECK(atomic_load(&x.accepted) > 0,
            "inconclusive: the host did not connect through the proxy");
    wait_status(pid, name, "\"RUNNING\"", NULL, 15000);
    int64_t epoch0 = h_sqlf(db, "SELECT epoch FROM tidemark_markers");
    h_step("10 rows through the proxy, RUNNING");

    int64_t t0 = h_now_ms();
    atomic_store(&x.refuse, 1);
    wait_status(pid, name, "\"DEGRADED\"", "Kafka unreachable", 60000);
    int64_t took = h_now_ms() - t0;
    H_CHECK(atomic_load(&x.refused) > 0,
            "inconclusive: the host never tried the broker while it was cut");
    H_CHECK(took >= 10000,
            "DEGRADED %lld ms after the cut, before the documented 10 s",
            (long long)took);
    int rc = status_exit(name);
    H_CHECK(rc == 3 && strstr(h_read_file("status.out"), "Kafka unreachable"),
            "tidemark status with Kafka unreachable: exit %d, expected 3 "
            "with the reason: %s",
            rc, h_read_file("status.out"));
    h_step("broker cut: DEGRADED after %lld ms, status exit 3",
           (long long)took);

    atomic_store(&x.refuse, 0);
    int64_t t1 = h_now_ms();
    wait_status(pid, name, "\"RUNNING\"", NULL, 30000);
    H_CHECK(h_sqlf(db, "SELECT epoch FROM tidemark_markers") == epoch0,
            "inconclusive: the partition was claimed again (a rebalance), "
            "so the recovery was not the broker's reachability alone");
    rc = status_exit(name);
    H_CHECK(rc == 0, "tidemark status once Kafka is back: exit %d: %s", rc,
            h_read_file("status.out"));
    h_step("broker back, topic idle: RUNNING after %lld ms, status exit 0",
           (long long)(h_now_ms() - t1));

    h_produce_many(p, topic, 0, 100, 5, "{\"id\": %d}");
    h_wait_caught_up(db, name, topic, 1, 60000);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 15 &&
                h_sqlf(db, "SELECT count(DISTINCT _tm_offset) FROM t") == 15,
            "rows: expected 15 distinct offsets, found %lld rows",
            (long long)h_sqlf(db, "SELECT count(*) FROM t"));
    h_stop_clean(pid);
    h_step("5 more records: 15 rows, once each");
    bh_stop(&x);
    rd_kafka_destroy(p);
}

/* Waits for DEGRADED with "Kafka unreachable" after a fault made at t0:
 * not before the documented 10 s (less the time before the fault that
 * the outage is dated from: the last answer, at most a fetch's long poll
 * earlier), at most `slack_ms` after them. Then `status` must exit 3. */
static void wait_kafka_degraded(pid_t pid, const char *name, int64_t t0,
                                int slack_ms) {
    wait_status(pid, name, "\"DEGRADED\"", "Kafka unreachable",
                10000 + slack_ms);
    int64_t took = h_now_ms() - t0;
    H_CHECK(took >= 9000,
            "DEGRADED %lld ms after the fault, before the documented 10 s",
            (long long)took);
    int rc = status_exit(name);
    H_CHECK(rc == 3 && strstr(h_read_file("status.out"), "Kafka unreachable"),
            "tidemark status with Kafka unreachable: exit %d, expected 3 "
            "with the reason: %s",
            rc, h_read_file("status.out"));
    h_step("DEGRADED %lld ms after the fault, status exit 3", (long long)took);
}

/* The broker stops answering while the connections stay open (a dead
 * route, a stopped broker: the proxy's hole, every byte dropped, nothing
 * closed). Seen: RUNNING, `status` exit 0, for about 70 s (librdkafka
 * keeps the connection UP until socket.timeout.ms), the partitions lost
 * at 45 s meanwhile. The connector must be DEGRADED within the documented
 * 10 s and a few; once the broker answers again (the stalled connections
 * closed, new ones through), RUNNING, and the next records applied once. */
static void scenario_broker_stalled(void) {
    const char *topic = h_name("health-kstall");
    char name[256], db[4200];
    snprintf(name, sizeof name, "%s", h_name("health-kstall"));
    snprintf(db, sizeof db, "%s/kstall.db", h_workdir());
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 10, "{\"id\": %d}");
    int bport = broker_port();
    bh_proxy x;
    bh_start(&x, bport);
    const char *cfg = config_props("kstall", name, topic, "", "");
    pid_t pid = spawn_redirected(cfg, "kstall.log", bport, x.port);
    h_wait_caught_up(db, name, topic, 1, 60000);
    H_CHECK(atomic_load(&x.accepted) > 0,
            "inconclusive: the host did not connect through the proxy");
    wait_status(pid, name, "\"RUNNING\"", NULL, 15000);
    h_step("10 rows through the proxy, RUNNING");

    int64_t t0 = h_now_ms();
    long before = atomic_load(&x.swallowed);
    atomic_store(&x.hole, 1);
    wait_kafka_degraded(pid, name, t0, 6000);
    H_CHECK(atomic_load(&x.swallowed) > before,
            "inconclusive: the host sent nothing into the hole");

    /* The stalled connections closed (refused), new ones let through. */
    atomic_store(&x.refuse, 1);
    int64_t tr = h_now_ms();
    while (atomic_load(&x.refused) == 0) {
        H_CHECK(h_now_ms() - tr < 30000,
                "inconclusive: the host did not reconnect after the hole");
        h_sleep_ms(50);
    }
    atomic_store(&x.hole, 0);
    atomic_store(&x.refuse, 0);
    int64_t t1 = h_now_ms();
    wait_status(pid, name, "\"RUNNING\"", NULL, 60000);
    int rc = status_exit(name);
    H_CHECK(rc == 0, "tidemark status once Kafka answers: exit %d: %s", rc,
            h_read_file("status.out"));
    h_step("broker answers again: RUNNING after %lld ms, status exit 0",
           (long long)(h_now_ms() - t1));

    h_produce_many(p, topic, 0, 100, 5, "{\"id\": %d}");
    h_wait_caught_up(db, name, topic, 1, 120000);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 15 &&
                h_sqlf(db, "SELECT count(DISTINCT _tm_offset) FROM t") == 15,
            "rows: expected 15 distinct offsets, found %lld rows",
            (long long)h_sqlf(db, "SELECT count(*) FROM t"));
    h_stop_clean(pid);
    h_step("5 more records: 15 rows, once each");
    bh_stop(&x);
    rd_kafka_destroy(p);
}

/* The bootstrap address answers (proxy A, always forwarding) while the
 * broker the cluster advertises does not (its port redirected to proxy
 * B, which refuses). Seen: RUNNING, `status` exit 0, the partitions lost
 * and no record applied, for as long as it lasted: the bootstrap entry
 * counted as a broker up. The connector must be DEGRADED after the
 * documented 10 s, RUNNING once B lets through, the next records applied
 * once. */
static void scenario_advertised_cut(void) {
    const char *topic = h_name("health-kadv");
    char name[256], db[4200];
    snprintf(name, sizeof name, "%s", h_name("health-kadv"));
    snprintf(db, sizeof db, "%s/kadv.db", h_workdir());
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 10, "{\"id\": %d}");
    int bport = broker_port();
    bh_proxy a, b;
    bh_start(&a, bport);
    bh_start(&b, bport);
    snprintf(cfg_bootstrap, sizeof cfg_bootstrap, "127.0.0.1:%d", a.port);
    const char *cfg = config_props("kadv", name, topic, "", "");
    cfg_bootstrap[0] = '\0';
    pid_t pid = spawn_redirected(cfg, "kadv.log", bport, b.port);
    h_wait_caught_up(db, name, topic, 1, 60000);
    H_CHECK(atomic_load(&a.accepted) > 0 && atomic_load(&b.accepted) > 0,
            "inconclusive: the host did not connect through both proxies "
            "(bootstrap %d, advertised %d connections)",
            atomic_load(&a.accepted), atomic_load(&b.accepted));
    wait_status(pid, name, "\"RUNNING\"", NULL, 15000);
    h_step("10 rows, bootstrap through proxy A, the broker through B");

    int64_t t0 = h_now_ms();
    atomic_store(&b.refuse, 1);
    wait_kafka_degraded(pid, name, t0, 6000);
    H_CHECK(atomic_load(&b.refused) > 0,
            "inconclusive: the host never tried the advertised broker while "
            "it was cut");

    atomic_store(&b.refuse, 0);
    int64_t t1 = h_now_ms();
    wait_status(pid, name, "\"RUNNING\"", NULL, 60000);
    int rc = status_exit(name);
    H_CHECK(rc == 0, "tidemark status once the broker is back: exit %d: %s", rc,
            h_read_file("status.out"));
    h_step("advertised broker back: RUNNING after %lld ms, status exit 0",
           (long long)(h_now_ms() - t1));

    h_produce_many(p, topic, 0, 100, 5, "{\"id\": %d}");
    h_wait_caught_up(db, name, topic, 1, 120000);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 15 &&
                h_sqlf(db, "SELECT count(DISTINCT _tm_offset) FROM t") == 15,
            "rows: expected 15 distinct offsets, found %lld rows",
            (long long)h_sqlf(db, "SELECT count(*) FROM t"));
    h_stop_clean(pid);
    h_step("5 more records: 15 rows, once each");
    bh_stop(&a);
    bh_stop(&b);
    rd_kafka_destroy(p);
}

/* DEGRADED "waiting for topic" (not created yet), then Kafka cut for 16 s
 * and back (seen: RUNNING, `status` exit 0, the topic still missing:
 * Kafka's recovery cleared the other cause). After Kafka answers again
 * the connector must be DEGRADED "waiting for topic" at every look for
 * 10 s, `status` exit 3. */
static void scenario_kafka_recovery_keeps_cause(void) {
    const char *topic = h_name("health-kcause");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("health-kcause"));
    int bport = broker_port();
    bh_proxy x;
    bh_start(&x, bport);
    const char *cfg = config_props("kcause", name, topic, "", "");
    pid_t pid = spawn_redirected(cfg, "kcause.log", bport, x.port);
    wait_status(pid, name, "\"DEGRADED\"", "waiting for topic", 60000);
    H_CHECK(atomic_load(&x.accepted) > 0,
            "inconclusive: the host did not connect through the proxy");
    h_step("no topic: DEGRADED waiting for topic");

    int64_t t0 = h_now_ms();
    atomic_store(&x.refuse, 1);
    wait_status(pid, name, "\"DEGRADED\"", "Kafka unreachable", 60000);
    H_CHECK(atomic_load(&x.refused) > 0,
            "inconclusive: the host never tried the broker while it was cut");
    while (h_now_ms() - t0 < 16000)
        h_sleep_ms(100);
    atomic_store(&x.refuse, 0);
    h_step("Kafka cut for 16 s: DEGRADED Kafka unreachable");

    int64_t t1 = h_now_ms();
    for (;;) {
        /* Back: RUNNING, or the error shown no longer Kafka's (the last
         * error stays in the status once RUNNING). */
        const char *st = h_status_text(name);
        if (strstr(st, "\"RUNNING\"") || strstr(st, "waiting for topic"))
            break;
        H_CHECK(h_now_ms() - t1 < 60000,
                "Kafka back, the status still says it is unreachable: %s", st);
        h_sleep_ms(100);
    }
    int64_t t2 = h_now_ms();
    while (h_now_ms() - t2 < 10000) {
        char st[8192];
        snprintf(st, sizeof st, "%s", h_status_text(name));
        H_CHECK(strstr(st, "\"DEGRADED\"") && strstr(st, "waiting for topic"),
                "after Kafka came back (%lld ms), the topic still missing: %s",
                (long long)(h_now_ms() - t2), st);
        H_CHECK(waitpid(pid, NULL, WNOHANG) == 0, "the host exited");
        h_sleep_ms(200);
    }
    int rc = status_exit(name);
    H_CHECK(rc == 3 && strstr(h_read_file("status.out"), "waiting for topic"),
            "status after Kafka came back, the topic missing: exit %d, "
            "expected 3: %s",
            rc, h_read_file("status.out"));
    h_step("Kafka back, the topic missing: DEGRADED waiting for topic for "
           "10 s, status exit 3");
    h_stop_clean(pid);
    bh_stop(&x);
}

/* `tidemark status --state-dir WORKDIR/DIR CONNECTOR`: its exit status,
 * its output in WORKDIR/OUT. */
static int status_exit_in(const char *dir, const char *connector,
                          const char *out) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", h_workdir(), dir);
    const char *args[] = {"status", "--state-dir", path, connector, NULL};
    return h_tidemark(out, args);
}

/* Two hosts of one connector on a topic of one partition, the bootstrap
 * address "localhost:PORT" while the broker advertises another name for
 * itself (a DNS alias, a load balancer). Seen: the host without a
 * partition DEGRADED "Kafka unreachable for 10 s: broker ...: connection
 * INIT", `status` exit 3, for as long as it ran, the cluster healthy: its
 * learned broker is never connected (nothing to fetch from it). Both
 * hosts must stay RUNNING, `status` exit 0, for 25 s, past the 10 s. */
static void scenario_standby_alias(void) {
    const char *topic = h_name("health-kalias");
    char name[256], db[4200];
    snprintf(name, sizeof name, "%s", h_name("health-kalias"));
    snprintf(db, sizeof db, "%s/kalias.db", h_workdir());
    H_CHECK(strncmp(h_bootstrap(), "localhost:", 10) != 0,
            "inconclusive: the broker is already reached as localhost");
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 10, "{\"id\": %d}");
    snprintf(cfg_bootstrap, sizeof cfg_bootstrap, "localhost:%d",
             broker_port());
    /* One config file per host: each its own status directory. */
    const char *cfg_a =
        config_state("kalias", name, topic, FAST_GROUP, "", "state-a");
    pid_t a = h_spawn(cfg_a, "kalias-a.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    int rc = status_exit_in("state-a", name, "status-a.out");
    H_CHECK(rc == 0, "host A alone: status exit %d: %s", rc,
            h_read_file("status-a.out"));
    const char *cfg_b =
        config_state("kalias", name, topic, FAST_GROUP, "", "state-b");
    cfg_bootstrap[0] = '\0';
    pid_t b = h_spawn(cfg_b, "kalias-b.log");
    h_produce_many(p, topic, 0, 100, 5, "{\"id\": %d}");
    h_wait_caught_up(db, name, topic, 1, 120000);
    h_step("two hosts up, bootstrap localhost, 15 rows");

    int64_t t0 = h_now_ms();
    int checks = 0;
    while (h_now_ms() - t0 < 25000) {
        int ra = status_exit_in("state-a", name, "status-a.out");
        int rb = status_exit_in("state-b", name, "status-b.out");
        H_CHECK(ra == 0 && rb == 0,
                "after %lld ms: status exit %d (host A: %s) and %d (host B: "
                "%s)",
                (long long)(h_now_ms() - t0), ra, h_read_file("status-a.out"),
                rb, h_read_file("status-b.out"));
        H_CHECK(waitpid(a, NULL, WNOHANG) == 0 &&
                    waitpid(b, NULL, WNOHANG) == 0,
                "a host exited");
        checks++;
        h_sleep_ms(1000);
    }
    h_step("both hosts RUNNING, status exit 0, for 25 s (%d checks)", checks);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 15 &&
                h_sqlf(db, "SELECT count(DISTINCT _tm_offset) FROM t") == 15,
            "rows: expected 15 distinct offsets");
    h_stop_clean(b);
    h_stop_clean(a);
    rd_kafka_destroy(p);
}

/* A claim that answers FATAL while the host is stopping (seen: the stop
 * path took every non-OK claim for "stopped": exit 0, STOPPED, the
 * refusal lost). Connector A owns table t; connector B on the same file
 * is held just before its claim (fault point before_claim), told to stop,
 * and let go: the sink refuses the table (another connector's), and that
 * must end FAILED, exit 1, `tidemark status` exit 2 with the reason. Only
 * a RETRY during a stop is a clean stop. */
static void scenario_claim_fatal_stopping(void) {
    const char *topic_a = h_name("health-own-a");
    char name_a[256], name_b[256], topic_b[256];
    snprintf(name_a, sizeof name_a, "%s", topic_a);
    snprintf(name_b, sizeof name_b, "%s", h_name("health-own-b"));
    snprintf(topic_b, sizeof topic_b, "%s", name_b);
    h_create_topic(topic_a, 1, NULL, NULL);
    h_create_topic(topic_b, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic_a, 0, 0, 5, "{\"id\": %d}");
    h_produce_many(p, topic_b, 0, 0, 5, "{\"id\": %d}");
    const char *db = h_path("own.db");
    pid_t pid = h_spawn(config("own", name_a, topic_a, ""), "own-a.log");
    h_wait_caught_up(db, name_a, topic_a, 1, 60000);
    h_stop_clean(pid);
    h_step("connector A owns table t");

    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    const char *env[] = {"TIDEMARK_FAULT=before_claim",
                         "TIDEMARK_FAULT_ACTION=stop", fp.fd_env, NULL};
    pid = h_spawn_env(config("own", name_b, topic_b, ""), "own-b.log", env);
    h_fault_wait(&fp, "before_claim", pid, 1);
    H_CHECK(kill(pid, SIGTERM) == 0, "SIGTERM: %s", strerror(errno));
    int64_t took;
    int rc = h_stop(pid, SIGCONT, 30000, &took);
    static char st[65536], log[65536];
    snprintf(st, sizeof st, "%s", h_status_text(name_b));
    snprintf(log, sizeof log, "%s", h_read_file("own-b.log"));
    H_CHECK(strstr(log, "SIGTERM: stopping") && strstr(log, "shared_table"),
            "inconclusive: the stop or the sink's refusal did not happen "
            "(exit %d); log: %s",
            rc, log);
    H_CHECK(rc == 1 && strstr(st, "\"FAILED\""),
            "a claim refused while stopping: exit %d, expected 1 and "
            "FAILED; status: %s",
            rc, st);
    H_CHECK(strstr(st, "while stopping"),
            "inconclusive: the claim answered before the stop was seen; "
            "status: %s",
            st);
    int src = status_exit(name_b);
    const char *shown = h_read_file("status.out");
    H_CHECK(src == 2 && strstr(shown, "FAILED") && strstr(shown, "reason"),
            "tidemark status after a claim refused while stopping: exit %d, "
            "expected 2 with FAILED and the reason: %s",
            src, shown);
    H_CHECK(h_sqlf(db,
                   "SELECT count(*) FROM tidemark_markers WHERE "
                   "connector = '%s'",
                   name_b) == 0,
            "connector B has a marker: its claim went through");
    h_step("claim refused while stopping: exit 1, FAILED, status exit 2");
    rd_kafka_destroy(p);
}

/* The lineage read-back at claim (commit/lineage.c) stalls: the broker
 * does not answer the new client it reads with (seen: retried for up to 2
 * minutes inside the rebalance callback, so a member joining meanwhile
 * waited for the rebalance timeout and the stalled host was thrown out of
 * the group). Host A's new connections are held by the proxy from its
 * claim on (its consumer's own connections go on); a second host B joins.
 * The group must rebalance with both members within A's rebalance
 * timeout, A DEGRADED with the read-back's error; once the broker answers
 * again A claims its partition by itself and every record lands once. */
static void scenario_lineage_stall(void) {
    const char *topic = h_name("health-lin");
    char name[256], group[300];
    snprintf(name, sizeof name, "%s", topic);
    snprintf(group, sizeof group, "tidemark-%s", name);
    h_create_topic(topic, 2, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < 2; part++)
        h_produce_many(p, topic, part, part * 1000, 10, "{\"id\": %d}");
    const char *props = FAST_GROUP ", \"max.poll.interval.ms\": \"25000\"";
    const char *cfg_a = config_state("lin", name, topic, props, "", "state");
    const char *db = h_path("lin.db");
    pid_t a = h_spawn(cfg_a, "lin-a.log");
    h_wait_caught_up(db, name, topic, 2, 60000);
    h_stop_clean(a);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM tidemark_markers WHERE "
                       "last_offset >= 0") == 2,
            "inconclusive: the markers keep no lineage to read back");
    h_step("20 rows, both markers with their lineage");

    int bport = broker_port();
    bh_proxy x;
    bh_start(&x, bport);
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    const char *fault[] = {"TIDEMARK_FAULT=before_claim",
                           "TIDEMARK_FAULT_ACTION=stop", fp.fd_env, NULL};
    a = spawn_redirected_env(cfg_a, "lin-a.log", bport, x.port, fault);
    h_fault_wait(&fp, "before_claim", a, 1);
    atomic_store(&x.hold_new, 1);
    H_CHECK(kill(a, SIGCONT) == 0, "SIGCONT: %s", strerror(errno));
    int64_t t0 = h_now_ms();
    while (!strstr(h_read_file("lin-a.log"), "reading back the records")) {
        H_CHECK(h_now_ms() - t0 < 30000,
                "inconclusive: host A's read-back never failed (held "
                "connections: %d)",
                atomic_load(&x.held_count));
        h_sleep_ms(100);
    }
    H_CHECK(atomic_load(&x.held_count) > 0,
            "inconclusive: no connection of host A was held");
    h_step("host A's read-back stalls (%d connection(s) held)",
           atomic_load(&x.held_count));

    const char *cfg_b = config_state("lin", name, topic, props, "", "state-b");
    pid_t b = h_spawn(cfg_b, "lin-b.log");
    int64_t tb = h_now_ms();
    char owners[2][H_OWNER_MAX];
    for (;;) {
        owners[0][0] = owners[1][0] = '\0';
        int members = h_group_owners(group, topic, 2, owners);
        if (members == 2 && owners[0][0] && owners[1][0] &&
            strcmp(owners[0], owners[1]) != 0)
            break;
        H_CHECK(waitpid(a, NULL, WNOHANG) == 0, "host A exited");
        H_CHECK(h_now_ms() - tb < 45000,
                "the group did not rebalance to both hosts within 45 s of "
                "host B joining (members %d, owners \"%s\" and \"%s\"): host "
                "A's stalled read-back blocks the rebalance",
                members, owners[0], owners[1]);
        h_sleep_ms(200);
    }
    h_step("the group rebalanced to both hosts %lld ms after B joined",
           (long long)(h_now_ms() - tb));
    wait_status(a, name, "\"DEGRADED\"", "reading back", 30000);
    int rc = status_exit(name);
    H_CHECK(rc == 3, "tidemark status of host A: exit %d, expected 3: %s", rc,
            h_read_file("status.out"));

    atomic_store(&x.hold_new, 0);
    for (int part = 0; part < 2; part++)
        h_produce_many(p, topic, part, part * 1000 + 100, 5, "{\"id\": %d}");
    h_wait_caught_up(db, name, topic, 2, 90000);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 30 &&
                h_sqlf(db, "SELECT count(DISTINCT _tm_partition || ':' || "
                           "_tm_offset) FROM t") == 30,
            "rows: expected 30 distinct offsets, found %lld rows",
            (long long)h_sqlf(db, "SELECT count(*) FROM t"));
    wait_status(a, name, "\"RUNNING\"", NULL, 30000);
    h_step("read-back answered: host A claimed, RUNNING, 30 rows once each");
    h_stop_clean(a);
    h_stop_clean(b);
    bh_stop(&x);
    rd_kafka_destroy(p);
}

/* `tidemark verify CONFIG`: its exit status; its output in WORKDIR/out. */
static int verify_exit(const char *cfg, const char *out) {
    const char *args[] = {"verify", cfg, NULL};
    return h_tidemark(out, args);
}

/* Dead letters that go to the dead-letter topic only ("sink": false): the
 * sink stores nothing for their offsets (seen: verify reported each as a
 * gap on a run that lost nothing). verify must account them from the
 * topic itself, and still report one the topic no longer holds. */
static void scenario_verify_dlq_topic_only(void) {
    const char *topic = h_name("health-dlq");
    char name[256], dlq[256];
    snprintf(name, sizeof name, "%s", topic);
    snprintf(dlq, sizeof dlq, "%s", h_name("health-dlq-dl"));
    h_create_topic(topic, 1, NULL, NULL);
    h_create_topic(dlq, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 10, "{\"id\": %d}");
    const char *bad = "{\"id\": \"not a number\"}";
    for (int i = 0; i < 3; i++)
        h_produce(p, topic, 0, NULL, 0, bad, strlen(bad), NULL, NULL);
    h_produce_many(p, topic, 0, 100, 5, "{\"id\": %d}");
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "\"topics\": [\"%s\"], \"start\": \"earliest\"}, "
             "\"batch\": {\"max_wait_ms\": 100}, "
             "\"dead_letters\": {\"sink\": false, \"topic\": \"%s\"}, "
             "\"sink\": {\"plugin\": \"sqlite\", \"settings\": {\"path\": "
             "\"%s/dlq.db\", \"table\": \"t\"}}, \"state_dir\": \"%s/state\", "
             "\"mapping\": {\"mode\": \"json\", \"columns\": ["
             "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", "
             "\"required\": true}]}}",
             name, h_bootstrap(), topic, dlq, h_workdir(), h_workdir());
    const char *cfg = h_write_file("dlq.json", text);
    const char *db = h_path("dlq.db");
    pid_t pid = h_spawn(cfg, "dlq.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    h_stop_clean(pid);
    int64_t lo, hi;
    h_watermarks(dlq, 0, &lo, &hi);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 15 && hi - lo == 3,
            "inconclusive: expected 15 rows and 3 dead letters in %s, found "
            "%lld rows and %lld dead letters",
            dlq, (long long)h_sqlf(db, "SELECT count(*) FROM t"),
            (long long)(hi - lo));
    h_step("15 rows, 3 dead letters in the topic only");

    int rc = verify_exit(cfg, "verify.out");
    H_CHECK(rc == 0 && strstr(h_read_file("verify.out"), "gaps=0") &&
                strstr(h_read_file("verify.out"), "dead_letters=3"),
            "verify of a run that lost nothing: exit %d, expected 0 with the "
            "3 dead letters accounted: %s",
            rc, h_read_file("verify.out"));
    h_step("verify: exit 0, the 3 dead letters found in the topic");

    /* The first dead letter gone from the topic: that one is a gap. */
    h_delete_records(dlq, 0, lo + 1);
    rc = verify_exit(cfg, "verify2.out");
    H_CHECK(rc == 1 && strstr(h_read_file("verify2.out"), "gaps=1"),
            "verify with a dead letter missing from the topic: exit %d, "
            "expected 1 with one gap: %s",
            rc, h_read_file("verify2.out"));
    h_step("a dead letter deleted from the topic: verify exit 1, one gap");
    rd_kafka_destroy(p);
}

/* Connector NAME of consumer group GROUP reading TOPIC into FILE.db
 * (table t), its status in WORKDIR/STATE: two groups writing one table. */
static const char *config_group(const char *file, const char *name,
                                const char *group, const char *topic,
                                const char *state) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "\"topics\": [\"%s\"], \"start\": \"earliest\", "
             "\"group_id\": \"%s\", \"properties\": {" FAST_GROUP "}}, "
             "\"batch\": {\"max_wait_ms\": 100}, "
             "\"sink\": {\"plugin\": \"sqlite\", \"settings\": {\"path\": "
             "\"%s/%s.db\", \"table\": \"t\"}}, "
             "\"state_dir\": \"%s/%s\", "
             "\"mapping\": {\"mode\": \"json\", \"columns\": ["
             "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", "
             "\"required\": true}]}}",
             name, h_bootstrap(), topic, group, h_workdir(), file, h_workdir(),
             state);
    char fname[300];
    snprintf(fname, sizeof fname, "%s-%s.json", file, state);
    return h_write_file(fname, text);
}

/* Waits until host pid's log (log_name) has needle. */
static void wait_log(pid_t pid, const char *log_name, const char *needle,
                     int timeout_ms) {
    int64_t t0 = h_now_ms();
    while (!strstr(h_read_file(log_name), needle)) {
        H_CHECK(waitpid(pid, NULL, WNOHANG) == 0,
                "the host exited while waiting for \"%s\" in %s", needle,
                log_name);
        H_CHECK(h_now_ms() - t0 < timeout_ms,
                "inconclusive: \"%s\" never in %s within %d ms", needle,
                log_name, timeout_ms);
        h_sleep_ms(100);
    }
}

/* A fenced partition the group never revokes is claimed again after the
 * bound (2 x session.timeout.ms); that claim raises the marker's epoch in
 * the sink, and when the read-back of its lineage then stalls, the claim
 * is deferred. Seen: the next look took the raised epoch for another
 * writer ("another live writer ... keeps committing") and waited one more
 * bound. Host A (group one) is fenced by host B (group two, same table)
 * which then stops; A's new connections are held when its re-claim reads
 * back. The claim must take the sink (the marker's epoch above B's) and be
 * deferred; then, the broker answering again, A claims again without ever
 * reporting another writer, and every record lands once. */
static void scenario_fenced_reclaim_deferred(void) {
    const char *topic = h_name("health-frd");
    char name[256], ga[300], gb[300];
    snprintf(name, sizeof name, "%s", topic);
    snprintf(ga, sizeof ga, "%s-one", name);
    snprintf(gb, sizeof gb, "%s-two", name);
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 10, "{\"id\": %d}");
    char cfg_a[4200], cfg_b[4200];
    snprintf(cfg_a, sizeof cfg_a, "%s",
             config_group("frd", name, ga, topic, "state"));
    snprintf(cfg_b, sizeof cfg_b, "%s",
             config_group("frd", name, gb, topic, "state-b"));
    const char *db = h_path("frd.db");
    int bport = broker_port();
    bh_proxy x;
    bh_start(&x, bport);
    pid_t a = spawn_redirected(cfg_a, "frd-a.log", bport, x.port);
    h_wait_caught_up(db, name, topic, 1, 60000);
    int64_t epoch_a = h_sqlf(db, "SELECT epoch FROM tidemark_markers");
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM tidemark_markers WHERE "
                       "last_offset >= 0") == 1,
            "inconclusive: the marker keeps no lineage to read back");
    h_step("host A (group one): 10 rows, epoch %lld", (long long)epoch_a);

    pid_t b = h_spawn(cfg_b, "frd-b.log");
    int64_t t0 = h_now_ms();
    while (h_sqlf(db, "SELECT epoch FROM tidemark_markers") == epoch_a) {
        H_CHECK(h_now_ms() - t0 < 60000, "host B never claimed the partition");
        h_sleep_ms(100);
    }
    wait_status(b, name, "\"RUNNING\"", NULL, 15000);
    h_stop_clean(b);
    int64_t epoch_b = h_sqlf(db, "SELECT epoch FROM tidemark_markers");
    h_produce_many(p, topic, 0, 100, 5, "{\"id\": %d}");
    wait_log(a, "frd-a.log", "fenced: epoch", 30000);
    atomic_store(&x.hold_new, 1);
    h_step("host B (group two) claimed (epoch %lld) and stopped; A fenced, "
           "its new connections held",
           (long long)epoch_b);

    /* The bound is 12 s, the read-back's own 10 s. */
    wait_log(a, "frd-a.log", "the claim is retried", 60000);
    int64_t epoch_claimed = h_sqlf(db, "SELECT epoch FROM tidemark_markers");
    H_CHECK(epoch_claimed > epoch_b && atomic_load(&x.held_count) > 0,
            "inconclusive: the re-claim did not take the sink before its "
            "read-back stalled (epoch %lld, B's %lld, %d connection(s) held)",
            (long long)epoch_claimed, (long long)epoch_b,
            atomic_load(&x.held_count));
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 10,
            "inconclusive: A applied records while fenced");
    h_step("A's re-claim took the sink (epoch %lld) and was deferred",
           (long long)epoch_claimed);

    atomic_store(&x.hold_new, 0);
    h_wait_caught_up(db, name, topic, 1, 90000);
    const char *log = h_read_file("frd-a.log");
    H_CHECK(!strstr(log, "another live writer"),
            "host A took its own deferred claim for another writer: %s",
            strstr(log, "another live writer"));
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 15 &&
                h_sqlf(db, "SELECT count(DISTINCT _tm_offset) FROM t") == 15,
            "rows: expected 15 distinct offsets, found %lld rows",
            (long long)h_sqlf(db, "SELECT count(*) FROM t"));
    h_stop_clean(a);
    h_step("claimed again, no other writer reported: 15 rows, once each");
    bh_stop(&x);
    rd_kafka_destroy(p);
}

/* A dead letter as a tidemark older than the group header wrote it:
 * Kafka Connect's headers naming connector and source record, no
 * TM_DLQ_GROUP_HEADER; value the given bytes. */
static void produce_old_dead_letter(rd_kafka_t *p, const char *dlq,
                                    const char *connector, const char *topic,
                                    int64_t offset, const char *value) {
    char off[32];
    snprintf(off, sizeof off, "%lld", (long long)offset);
    rd_kafka_headers_t *h = rd_kafka_headers_new(4);
    H_CHECK(
        h &&
            !rd_kafka_header_add(h, "__connect.errors.connector.name", -1,
                                 connector, -1) &&
            !rd_kafka_header_add(h, "__connect.errors.topic", -1, topic, -1) &&
            !rd_kafka_header_add(h, "__connect.errors.partition", -1, "0",
                                 -1) &&
            !rd_kafka_header_add(h, "__connect.errors.offset", -1, off, -1),
        "cannot build a dead letter's headers");
    rd_kafka_resp_err_t err =
        rd_kafka_producev(p, RD_KAFKA_V_TOPIC(dlq), RD_KAFKA_V_PARTITION(0),
                          RD_KAFKA_V_VALUE((void *)value, strlen(value)),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                          RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
    if (err)
        rd_kafka_headers_destroy(h);
    H_CHECK(!err && rd_kafka_flush(p, 30000) == 0,
            "cannot produce a dead letter to %s: %s", dlq,
            rd_kafka_err2str(err));
}

/* verify's dead letters in the topic must be the deployment's own, of
 * the records it holds. Production and staging run the same connector
 * name from the same topic in two groups, both with "sink": false into
 * one dead-letter topic; production's dead letters are then lost (seen:
 * verify of production passed on staging's). verify of production must
 * report each as a gap. Then dead letters without the group header (as an
 * older tidemark wrote them): with bytes other than the record's (an
 * older log of a topic created again) each is still a gap; with the
 * record's own bytes each counts. */
static void scenario_verify_dlq_foreign(void) {
    const char *topic = h_name("health-dlqf");
    char name[256], dlq[256];
    snprintf(name, sizeof name, "%s", topic);
    snprintf(dlq, sizeof dlq, "%s", h_name("health-dlqf-dl"));
    h_create_topic(topic, 1, NULL, NULL);
    h_create_topic(dlq, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 5, "{\"id\": %d}");
    const char *bad = "{\"id\": \"not a number\"}";
    int64_t bad_at[3];
    for (int i = 0; i < 3; i++)
        bad_at[i] =
            h_produce(p, topic, 0, NULL, 0, bad, strlen(bad), NULL, NULL);
    h_produce_many(p, topic, 0, 100, 5, "{\"id\": %d}");
    char cfgs[2][4200], dbs[2][4200];
    for (int i = 0; i < 2; i++) {
        char text[4096], file[64];
        const char *who = i == 0 ? "prod" : "staging";
        snprintf(text, sizeof text,
                 "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": "
                 "\"%s\", \"topics\": [\"%s\"], \"start\": \"earliest\", "
                 "\"group_id\": \"%s-%s\"}, "
                 "\"batch\": {\"max_wait_ms\": 100}, "
                 "\"dead_letters\": {\"sink\": false, \"topic\": \"%s\"}, "
                 "\"sink\": {\"plugin\": \"sqlite\", \"settings\": "
                 "{\"path\": \"%s/%s.db\", \"table\": \"t\"}}, "
                 "\"state_dir\": \"%s/state-%s\", "
                 "\"mapping\": {\"mode\": \"json\", \"columns\": ["
                 "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": "
                 "\"int\", \"required\": true}]}}",
                 name, h_bootstrap(), topic, name, who, dlq, h_workdir(), who,
                 h_workdir(), who);
        snprintf(file, sizeof file, "dlqf-%s.json", who);
        snprintf(cfgs[i], sizeof cfgs[i], "%s", h_write_file(file, text));
        snprintf(file, sizeof file, "%s.db", who);
        snprintf(dbs[i], sizeof dbs[i], "%s", h_path(file));
        char log[64];
        snprintf(log, sizeof log, "dlqf-%s.log", who);
        pid_t pid = h_spawn(cfgs[i], log);
        h_wait_caught_up(dbs[i], name, topic, 1, 60000);
        h_stop_clean(pid);
    }
    int64_t lo, hi;
    h_watermarks(dlq, 0, &lo, &hi);
    H_CHECK(hi - lo == 6 && h_sqlf(dbs[0], "SELECT count(*) FROM t") == 10,
            "inconclusive: expected 6 dead letters in %s (3 each) and 10 "
            "rows, found %lld and %lld",
            dlq, (long long)(hi - lo),
            (long long)h_sqlf(dbs[0], "SELECT count(*) FROM t"));
    int rc = verify_exit(cfgs[0], "dlqf0.out");
    H_CHECK(rc == 0 && strstr(h_read_file("dlqf0.out"), "dead_letters=3"),
            "inconclusive: verify of production before the loss: exit %d: %s",
            rc, h_read_file("dlqf0.out"));
    h_step("production and staging: 3 dead letters each in %s", dlq);

    /* Production's are the first three: gone. */
    h_delete_records(dlq, 0, lo + 3);
    rc = verify_exit(cfgs[0], "dlqf1.out");
    H_CHECK(rc == 1 && strstr(h_read_file("dlqf1.out"), "gaps=3"),
            "verify of production, its dead letters lost, staging's in the "
            "topic: exit %d, expected 1 with 3 gaps: %s",
            rc, h_read_file("dlqf1.out"));
    rc = verify_exit(cfgs[1], "dlqf2.out");
    H_CHECK(rc == 0 && strstr(h_read_file("dlqf2.out"), "dead_letters=3"),
            "verify of staging, its dead letters kept: exit %d: %s", rc,
            h_read_file("dlqf2.out"));
    h_step("staging's dead letters do not count for production: 3 gaps");

    for (int i = 0; i < 3; i++)
        produce_old_dead_letter(p, dlq, name, topic, bad_at[i],
                                "{\"id\": \"an older log\"}");
    rc = verify_exit(cfgs[0], "dlqf3.out");
    H_CHECK(rc == 1 && strstr(h_read_file("dlqf3.out"), "gaps=3"),
            "verify with dead letters of other bytes at those offsets: exit "
            "%d, expected 1 with 3 gaps: %s",
            rc, h_read_file("dlqf3.out"));
    for (int i = 0; i < 3; i++)
        produce_old_dead_letter(p, dlq, name, topic, bad_at[i], bad);
    rc = verify_exit(cfgs[0], "dlqf4.out");
    H_CHECK(rc == 0 && strstr(h_read_file("dlqf4.out"), "gaps=0") &&
                strstr(h_read_file("dlqf4.out"), "dead_letters=3"),
            "verify with dead letters without the group header, the "
            "records' own bytes: exit %d, expected 0: %s",
            rc, h_read_file("dlqf4.out"));
    h_step("without the group header: other bytes are gaps, the record's "
           "own count");
    rd_kafka_destroy(p);
}

/* A connector NAME reading TOPIC in group GROUP, its dead letters only in
 * the topic DLQ ("sink": false), into WORKDIR/dlqr.db; the config file
 * dlqr.json (rewritten at each call). */
static const char *config_dlq_group(const char *name, const char *topic,
                                    const char *group, const char *dlq) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": "
             "\"%s\", \"topics\": [\"%s\"], \"start\": \"earliest\", "
             "\"group_id\": \"%s\"}, "
             "\"batch\": {\"max_wait_ms\": 100}, "
             "\"dead_letters\": {\"sink\": false, \"topic\": \"%s\"}, "
             "\"sink\": {\"plugin\": \"sqlite\", \"settings\": "
             "{\"path\": \"%s/dlqr.db\", \"table\": \"t\"}}, "
             "\"state_dir\": \"%s/state\", "
             "\"mapping\": {\"mode\": \"json\", \"columns\": ["
             "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": "
             "\"int\", \"required\": true}]}}",
             name, h_bootstrap(), topic, group, dlq, h_workdir(), h_workdir());
    return h_write_file("dlqr.json", text);
}

/* $.kafka.group_id renamed (documented as never read for correctness):
 * the dead letters written under the old group carry its name (seen:
 * verify reported each as a gap, with nothing saying why). verify must
 * still not take them on their bytes alone (another deployment's, of
 * the same connector name, have the same bytes): without the option it
 * reports the gaps and names `--dead-letter-group OLD`; with it, OK. */
static void scenario_verify_dlq_group_renamed(void) {
    const char *topic = h_name("health-dlqr");
    char name[256], dlq[256], g1[300], g2[300];
    snprintf(name, sizeof name, "%s", topic);
    snprintf(dlq, sizeof dlq, "%s", h_name("health-dlqr-dl"));
    snprintf(g1, sizeof g1, "%s-old", name);
    snprintf(g2, sizeof g2, "%s-new", name);
    h_create_topic(topic, 1, NULL, NULL);
    h_create_topic(dlq, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 5, "{\"id\": %d}");
    const char *bad = "{\"id\": \"not a number\"}";
    for (int i = 0; i < 2; i++)
        h_produce(p, topic, 0, NULL, 0, bad, strlen(bad), NULL, NULL);
    h_produce_many(p, topic, 0, 100, 5, "{\"id\": %d}");
    const char *cfg = config_dlq_group(name, topic, g1, dlq);
    pid_t pid = h_spawn(cfg, "dlqr.log");
    h_wait_caught_up(h_path("dlqr.db"), name, topic, 1, 60000);
    h_stop_clean(pid);
    int64_t lo, hi;
    h_watermarks(dlq, 0, &lo, &hi);
    int rc = verify_exit(cfg, "dlqr0.out");
    H_CHECK(hi - lo == 2 && rc == 0 &&
                strstr(h_read_file("dlqr0.out"), "dead_letters=2"),
            "inconclusive: expected 2 dead letters in %s and verify OK, "
            "found %lld, verify exit %d: %s",
            dlq, (long long)(hi - lo), rc, h_read_file("dlqr0.out"));
    h_step("group %s: 10 rows, 2 dead letters, verify OK", g1);

    cfg = config_dlq_group(name, topic, g2, dlq);
    rc = verify_exit(cfg, "dlqr1.out");
    char want[400];
    snprintf(want, sizeof want, "--dead-letter-group %s", g1);
    H_CHECK(rc == 1 && strstr(h_read_file("dlqr1.out"), "gaps=2") &&
                strstr(h_read_file("dlqr1.out"), want),
            "verify after the group renamed to %s, without the option: exit "
            "%d, expected 1 with 2 gaps and a problem naming '%s': %s",
            g2, rc, want, h_read_file("dlqr1.out"));
    h_step("group renamed to %s: 2 gaps, the option named", g2);

    const char *args[] = {"verify", "--dead-letter-group", g1, cfg, NULL};
    rc = h_tidemark("dlqr2.out", args);
    H_CHECK(rc == 0 && strstr(h_read_file("dlqr2.out"), "gaps=0") &&
                strstr(h_read_file("dlqr2.out"), "dead_letters=2"),
            "verify --dead-letter-group %s: exit %d, expected 0 with 2 dead "
            "letters: %s",
            g1, rc, h_read_file("dlqr2.out"));
    h_step("verify --dead-letter-group %s: OK, 2 dead letters", g1);
    rd_kafka_destroy(p);
}

/* A statistics.interval.ms far above the 10 s after which Kafka
 * unreachable is DEGRADED delays it (and its end) by up to the interval
 * (seen: a config with 60000 validated silently). `validate` must accept
 * it with a warning naming the property; an interval below the threshold
 * gets none. */
static void scenario_validate_stats_interval(void) {
    const char *name = h_name("health-stint");
    const char *slow = config_props(
        "stint-slow", name, name, "\"statistics.interval.ms\": \"60000\"", "");
    const char *args[] = {"validate", slow, NULL};
    int rc = h_tidemark("stint-slow.out", args);
    const char *out = h_read_file("stint-slow.out");
    H_CHECK(rc == 0 &&
                strstr(out, "warning: $.kafka.properties.statistics."
                            "interval.ms: 60000 ms") &&
                strstr(out, "DEGRADED"),
            "validate with statistics.interval.ms 60000: exit %d, expected 0 "
            "with a warning: %s",
            rc, out);
    const char *fast = config_props("stint-fast", name, name,
                                    "\"statistics.interval.ms\": \"5000\"", "");
    const char *args2[] = {"validate", fast, NULL};
    rc = h_tidemark("stint-fast.out", args2);
    out = h_read_file("stint-fast.out");
    H_CHECK(rc == 0 && !strstr(out, "warning"),
            "validate with statistics.interval.ms 5000: exit %d, expected 0 "
            "without a warning: %s",
            rc, out);
    h_step("validate: a warning for 60000 ms, none for 5000 ms");
}

/* A failed check (h_fail) must not leave the hosts the test spawned
 * running after it (seen: hosts of failed runs kept their groups and
 * files for as long as the machine ran). A child process spawns a host,
 * reports its pid and fails on purpose; once the child exited, the host
 * must be gone. */
static void scenario_fail_stops_hosts(void) {
    const char *topic = h_name("health-hfail");
    h_create_topic(topic, 1, NULL, NULL);
    const char *cfg = config("hfail", topic, topic, "");
    int fds[2];
    H_CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
    pid_t child = fork();
    H_CHECK(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        close(fds[0]);
        pid_t host = h_spawn(cfg, "hfail.log");
        ssize_t w = write(fds[1], &host, sizeof host);
        (void)w;
        close(fds[1]);
        h_sleep_ms(500);
        h_fail("failing on purpose (what a failure leaves behind is "
               "checked), host %d running",
               (int)host);
    }
    close(fds[1]);
    pid_t host = 0;
    ssize_t r = read(fds[0], &host, sizeof host);
    close(fds[0]);
    int st = 0;
    waitpid(child, &st, 0);
    H_CHECK(r == (ssize_t)sizeof host && host > 0 && WIFEXITED(st) &&
                WEXITSTATUS(st) == 1,
            "inconclusive: the child did not spawn a host and fail");
    char state = h_proc_state(host);
    if (state != '?' && state != 'Z') {
        kill(host, SIGKILL); /* not ours to reap: init's now */
        h_fail("host %d (state %c) still runs after the test that spawned "
               "it failed",
               (int)host, state);
    }
    h_step("the failed test's host is gone");
}

/* commit_overdue: a sink's commit that never returns (a plugin that
 * ignores its deadline, a driver blocked for good; here the fault point
 * before_begin inside the SQLite sink's commit, made to hang its thread
 * alone). The status pulse keeps the status file fresh and says what the
 * connector waits on, so the file is not stale; but the wait is past the
 * end the host gave it (commit_timeout_ms) by more than TM_STATUS_STALE_MS,
 * and `tidemark status` must say so and exit 3 (DEGRADED), not 0. Before
 * the fix it printed RUNNING with "waiting since ..." and exited 0 for as
 * long as the commit hung. */
static void scenario_commit_overdue(void) {
    const char *topic = h_name("health-overdue");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("health-overdue"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 5, "{\"id\": %d}");
    snprintf(cfg_batch, sizeof cfg_batch, ", \"commit_timeout_ms\": 2000");
    const char *cfg = config("overdue", name, topic, "");
    cfg_batch[0] = '\0';
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    const char *env[] = {"TIDEMARK_FAULT=before_begin",
                         "TIDEMARK_FAULT_ACTION=hang", fp.fd_env, NULL};
    pid_t pid = h_spawn_env(cfg, "overdue.log", env);
    h_fault_wait(&fp, "before_begin", pid, 0);
    wait_status(pid, name, "\"waiting\"", "the sink's commit", 30000);
    h_step("the sink's commit hangs; the status says it waits on it");
    /* 2 s of commit_timeout_ms, then TM_STATUS_STALE_MS (10 s): overdue
     * from 12 s into the wait; looked at for 60 s. */
    int rc = 0;
    int64_t t0 = h_now_ms();
    while ((rc = status_exit(name)) == 0 && h_now_ms() - t0 < 60000)
        h_sleep_ms(500);
    H_CHECK(h_proc_state(pid) != '?' && h_proc_state(pid) != 'T',
            "inconclusive: the host is gone or stopped (state %c)",
            h_proc_state(pid));
    const char *out = h_read_file("status.out");
    H_CHECK(rc == 3,
            "a commit hanging %lld s past its 2 s deadline: tidemark status "
            "exit %d, expected 3; it printed: %s",
            (long long)(h_now_ms() - t0) / 1000, rc, out);
    H_CHECK(strstr(out, "\n  overdue     ") && strstr(out, "waiting"),
            "status exit 3 but no overdue line under the wait: %s", out);
    h_step("tidemark status: exit 3, the wait overdue");
    const char *json_args[] = {"status",        "--json", "--state-dir",
                               h_path("state"), name,     NULL};
    h_tidemark("status.json.out", json_args);
    H_CHECK(strstr(h_read_file("status.json.out"), "\"overdue_ms\": "),
            "status --json names no overdue_ms: %s",
            h_read_file("status.json.out"));
    const char *prom_args[] = {"status", "--state-dir", h_path("state"),
                               name,     "--format",    "prometheus",
                               NULL};
    rc = h_tidemark("status.prom", prom_args);
    char sample[400];
    snprintf(sample, sizeof sample,
             "\ntidemark_connector_wait_overdue{connector=\"%s\"} 1\n", name);
    H_CHECK(rc == 3 && strstr(h_read_file("status.prom"), sample),
            "status --format prometheus: exit %d, expected 3 with %s: %s", rc,
            sample, h_read_file("status.prom"));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    rd_kafka_destroy(p);
}

/* status_write_fails_once: a host that cannot write its status file (a
 * full disk under its state directory; here the failure point
 * status.write, every write from the first on) says so once, not once a
 * second for as long as it lasts (before: a WARN line a second, 86 400 a
 * day), and goes on applying records. */
static void scenario_status_write_fails_once(void) {
    const char *topic = h_name("health-nowrite");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("health-nowrite"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 5, "{\"id\": %d}");
    const char *cfg = config("nowrite", name, topic, "");
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    const char *env[] = {"TIDEMARK_FAULT=status.write",
                         "TIDEMARK_FAULT_ACTION=fail-from", fp.fd_env, NULL};
    pid_t pid = h_spawn_env(cfg, "nowrite.log", env);
    h_fault_wait(&fp, "status.write", pid, 0);
    h_wait_caught_up(h_path("nowrite.db"), name, topic, 1, 60000);
    /* Five seconds more of failing writes: the tick writes every second,
     * the pulse rewrites besides. */
    h_sleep_ms(5000);
    H_CHECK(waitpid(pid, NULL, WNOHANG) == 0, "the host exited: %s",
            h_read_file("nowrite.log"));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    const char *log = h_read_file("nowrite.log");
    int lines = 0;
    for (const char *at = log; (at = strstr(at, "cannot write ")); at++)
        lines++;
    H_CHECK(lines >= 1, "inconclusive: no failed status write was logged: %s",
            log);
    H_CHECK(lines == 1,
            "a status file that cannot be written for 5 s and more: %d log "
            "lines saying so, expected 1: %s",
            lines, log);
    rd_kafka_destroy(p);
}

static const h_scenario SCENARIOS[] = {
    {"claim_locked", scenario_claim_locked},
    {"missing_topic", scenario_missing_topic},
    {"status_invalid_config", scenario_status_invalid_config},
    {"stop_pg_blackholed", scenario_stop_pg_blackholed},
    {"broker_unreachable", scenario_broker_unreachable},
    {"broker_stalled", scenario_broker_stalled},
    {"advertised_cut", scenario_advertised_cut},
    {"standby_alias", scenario_standby_alias},
    {"kafka_recovery_keeps_cause", scenario_kafka_recovery_keeps_cause},
    {"claim_fatal_stopping", scenario_claim_fatal_stopping},
    {"lineage_stall", scenario_lineage_stall},
    {"verify_dlq_topic_only", scenario_verify_dlq_topic_only},
    {"verify_dlq_foreign", scenario_verify_dlq_foreign},
    {"verify_dlq_group_renamed", scenario_verify_dlq_group_renamed},
    {"validate_stats_interval", scenario_validate_stats_interval},
    {"fenced_reclaim_deferred", scenario_fenced_reclaim_deferred},
    {"fail_stops_hosts", scenario_fail_stops_hosts},
    {"commit_overdue", scenario_commit_overdue},
    {"status_write_fails_once", scenario_status_write_fails_once},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "health_e2e", SCENARIOS, H_NSCENARIOS(SCENARIOS));
}
