/* nftw (XSI): a passed scenario's work dir is removed. */
#define _XOPEN_SOURCE 700
#include "harness.h"

#include <errno.h>
#include <ftw.h>
#include <libpq-fe.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char bootstrap[256], tidemark_bin[4096], plugin_dir[4096];
static char workdir[4096], run_id[32], scenario_name[64];
static char last_log[4096];

int64_t h_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void h_sleep_ms(int64_t ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void h_dump_log(const char *log_name) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", workdir, log_name);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    fprintf(stderr, "---- %s (last 60 lines) ----\n", path);
    char *lines[60] = {0};
    char buf[4096];
    size_t n = 0;
    while (fgets(buf, sizeof buf, f)) {
        free(lines[n % 60]);
        lines[n % 60] = strdup(buf);
        n++;
    }
    for (size_t i = n > 60 ? n - 60 : 0; i < n; i++) {
        fputs(lines[i % 60] ? lines[i % 60] : "", stderr);
        free(lines[i % 60]);
        lines[i % 60] = NULL;
    }
    fclose(f);
}

/* The hosts this process spawned, so that a failed test does not leave
 * them running (holding their groups, locks and files) after it exits. */
#define MAX_SPAWNED 64
static pid_t spawned[MAX_SPAWNED];
static size_t nspawned;
static pid_t spawner; /* the test process: a forked child kills nothing */

static void track(pid_t pid) {
    spawner = getpid();
    for (size_t i = 0; i < nspawned; i++)
        if (spawned[i] == pid)
            return;
    if (nspawned < MAX_SPAWNED)
        spawned[nspawned++] = pid;
}

/* SIGKILL (stopped ones too) and reaps every spawned host not reaped yet;
 * one already reaped is skipped: its pid may belong to another process. */
static void kill_spawned(void) {
    if (getpid() != spawner)
        return;
    for (size_t i = 0; i < nspawned; i++) {
        if (waitpid(spawned[i], NULL, WNOHANG) != 0)
            continue; /* reaped now or before */
        kill(spawned[i], SIGKILL);
        waitpid(spawned[i], NULL, 0);
    }
    nspawned = 0;
}

void h_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL [%s]: ", scenario_name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (last_log[0])
        h_dump_log(last_log);
    kill_spawned();
    exit(1);
}

void h_step(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[%s] ", scenario_name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

void h_init(const char *bin, const char *plugins, const char *scenario) {
    const char *b = getenv("TIDEMARK_KAFKA_BOOTSTRAP");
    if (!b || !*b)
        h_fail("TIDEMARK_KAFKA_BOOTSTRAP is not set (scripts/test.sh sets "
               "it after starting the broker)");
    snprintf(bootstrap, sizeof bootstrap, "%s", b);
    snprintf(tidemark_bin, sizeof tidemark_bin, "%s", bin);
    snprintf(plugin_dir, sizeof plugin_dir, "%s", plugins);
    snprintf(scenario_name, sizeof scenario_name, "%s", scenario);
    snprintf(run_id, sizeof run_id, "%ld%03ld", (long)time(NULL) % 100000,
             (long)getpid() % 1000);
    const char *tmp = getenv("TMPDIR");
    snprintf(workdir, sizeof workdir, "%s/tidemark-e2e-%s-%s",
             tmp && *tmp ? tmp : "/tmp", scenario, run_id);
    if (mkdir(workdir, 0700) != 0)
        h_fail("mkdir %s: %s", workdir, strerror(errno));
    setenv("TIDEMARK_PLUGIN_PATH", plugin_dir, 1);
    h_step("work dir %s, broker %s", workdir, bootstrap);
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0 && errno != ENOENT)
        fprintf(stderr, "[%s] could not remove %s: %s\n", scenario_name, path,
                strerror(errno));
    return 0;
}

/* A passed scenario leaves nothing behind (a crash suite's run left
 * hundreds of MB); a failed one keeps its logs, named in the failure. */
void h_pass(void) {
    h_step("PASS");
    const char *keep = getenv("TIDEMARK_KEEP_WORKDIR");
    if (keep && *keep) {
        h_step("work dir kept (TIDEMARK_KEEP_WORKDIR): %s", workdir);
        return;
    }
    nftw(workdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int h_main(int argc, char **argv, const char *prog, const h_scenario *list,
           size_t n) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s TIDEMARK_BIN PLUGIN_DIR SCENARIO\n", prog);
        return 2;
    }
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i].name, argv[3]) == 0) {
            h_init(argv[1], argv[2], argv[3]);
            list[i].fn();
            h_pass();
            return 0;
        }
    fprintf(stderr, "%s: unknown scenario %s\n", prog, argv[3]);
    return 2;
}

const char *h_name(const char *base) {
    static char bufs[8][256];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, 256, "%s-%s", base, run_id);
    return b;
}

const char *h_workdir(void) {
    return workdir;
}
const char *h_bootstrap(void) {
    return bootstrap;
}

const char *h_write_file(const char *name, const char *text) {
    static char paths[8][8192];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 8192, "%s/%s", workdir, name);
    FILE *f = fopen(p, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        h_fail("write %s: %s", p, strerror(errno));
    return p;
}

/* ---- Kafka ---------------------------------------------------------- */

static void set(rd_kafka_conf_t *c, const char *k, const char *v) {
    char err[512];
    if (rd_kafka_conf_set(c, k, v, err, sizeof err) != RD_KAFKA_CONF_OK)
        h_fail("librdkafka %s=%s: %s", k, v, err);
}

static rd_kafka_t *client(rd_kafka_type_t type, rd_kafka_conf_t *c) {
    char err[512];
    set(c, "bootstrap.servers", bootstrap);
    rd_kafka_t *rk = rd_kafka_new(type, c, err, sizeof err);
    if (!rk)
        h_fail("rd_kafka_new: %s", err);
    return rk;
}

void h_create_topic(const char *topic, int partitions, const char *cfg_key,
                    const char *cfg_value) {
    const char *cfg[] = {cfg_key, cfg_value, NULL};
    h_create_topic_cfg(topic, partitions, cfg_key ? cfg : NULL);
}

void h_dl_setup(const char *prefix, char *topic, char *dlq, char *name,
                size_t size, const char *dlq_key, const char *dlq_value) {
    char dlqp[200]; /* h_name's buffer takes it with the run id */
    snprintf(dlqp, sizeof dlqp, "%s-dl", prefix);
    snprintf(topic, size, "%s", h_name(prefix));
    snprintf(dlq, size, "%s", h_name(dlqp));
    snprintf(name, size, "%s", h_name(prefix));
    h_create_topic(topic, 1, NULL, NULL);
    h_create_topic(dlq, 1, dlq_key, dlq_value);
}

/* CreateTopics answers once the controller has the topic; the broker's
 * metadata cache follows later. A producer that reads metadata in between sees
 * fewer partitions and fails a record to a missing one at once
 * (_UNKNOWN_PARTITION; CI: "record 0 to ops3-a [2] not delivered"). So a
 * created topic is ready only when metadata shows every partition led. */
static void wait_topic_ready(rd_kafka_t *rk, const char *topic,
                             int partitions) {
    rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
    if (!t)
        h_fail("topic handle %s: %s", topic,
               rd_kafka_err2str(rd_kafka_last_error()));
    int64_t t0 = h_now_ms();
    for (;;) {
        const struct rd_kafka_metadata *md = NULL;
        int led = 0;
        if (rd_kafka_metadata(rk, 0, t, &md, 5000) ==
            RD_KAFKA_RESP_ERR_NO_ERROR) {
            if (md->topic_cnt == 1 && !md->topics[0].err &&
                md->topics[0].partition_cnt == partitions) {
                for (int i = 0; i < partitions; i++)
                    led += md->topics[0].partitions[i].leader >= 0 &&
                           !md->topics[0].partitions[i].err;
            }
            rd_kafka_metadata_destroy(md);
        }
        if (led == partitions)
            break;
        if (h_now_ms() - t0 > 30000)
            h_fail("topic %s: %d of %d partitions led after 30 s", topic, led,
                   partitions);
        h_sleep_ms(50);
    }
    rd_kafka_topic_destroy(t);
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    int64_t *out = m->_private;
    if (out)
        *out = m->err ? -1000 - (int64_t)m->err : m->offset;
}

rd_kafka_t *h_producer(const char *transactional_id, const char *max_bytes) {
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    set(c, "enable.idempotence", "true");
    set(c, "linger.ms", "0");
    if (max_bytes)
        set(c, "message.max.bytes", max_bytes);
    if (transactional_id)
        set(c, "transactional.id", transactional_id);
    rd_kafka_conf_set_dr_msg_cb(c, dr_cb);
    rd_kafka_t *p = client(RD_KAFKA_PRODUCER, c);
    if (transactional_id) {
        rd_kafka_error_t *e = rd_kafka_init_transactions(p, 30000);
        if (e)
            h_fail("init_transactions: %s", rd_kafka_error_string(e));
    }
    return p;
}

int64_t h_produce(rd_kafka_t *p, const char *topic, int32_t partition,
                  const void *key, size_t klen, const void *val, size_t vlen,
                  const char *hname, const char *hval) {
    int64_t off = -1;
    rd_kafka_headers_t *h = NULL;
    if (hname) {
        h = rd_kafka_headers_new(1);
        rd_kafka_header_add(h, hname, -1, hval, hval ? -1 : 0);
    }
    rd_kafka_resp_err_t err;
    if (h)
        err = rd_kafka_producev(
            p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
            RD_KAFKA_V_KEY((void *)key, klen),
            RD_KAFKA_V_VALUE((void *)val, vlen),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(&off),
            RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
    else
        err = rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic),
                                RD_KAFKA_V_PARTITION(partition),
                                RD_KAFKA_V_KEY((void *)key, klen),
                                RD_KAFKA_V_VALUE((void *)val, vlen),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_OPAQUE(&off), RD_KAFKA_V_END);
    if (err) {
        if (h)
            rd_kafka_headers_destroy(h);
        h_fail("produce to %s: %s", topic, rd_kafka_err2str(err));
    }
    rd_kafka_flush(p, 30000);
    if (off < 0)
        h_fail("delivery to %s [%d] failed: %s", topic, (int)partition,
               off <= -1000
                   ? rd_kafka_err2str((rd_kafka_resp_err_t)(-(off + 1000)))
                   : "no delivery report");
    return off;
}

void h_watermarks(const char *topic, int32_t partition, int64_t *lo,
                  int64_t *hi) {
    static rd_kafka_t *rk;
    if (!rk)
        rk = client(RD_KAFKA_PRODUCER, rd_kafka_conf_new());
    rd_kafka_resp_err_t err =
        rd_kafka_query_watermark_offsets(rk, topic, partition, lo, hi, 10000);
    if (err)
        h_fail("watermarks %s [%d]: %s", topic, (int)partition,
               rd_kafka_err2str(err));
}

int64_t h_group_offset(const char *group, const char *topic,
                       int32_t partition) {
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    set(c, "group.id", group);
    rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, c);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, partition);
    rd_kafka_resp_err_t err = rd_kafka_committed(rk, l, 10000);
    if (err)
        h_fail("committed offsets of %s: %s", group, rd_kafka_err2str(err));
    int64_t off = l->elems[0].offset;
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
    return off;
}

/* ---- the host ------------------------------------------------------- */

pid_t h_spawn(const char *config_path, const char *log_name) {
    return h_spawn_env(config_path, log_name, NULL);
}

static pid_t spawn(const char *config_path, const char *config_b,
                   const char *log_name, const char *const *env);

pid_t h_spawn_env(const char *config_path, const char *log_name,
                  const char *const *env) {
    return spawn(config_path, NULL, log_name, env);
}

pid_t h_spawn2(const char *config_a, const char *config_b,
               const char *log_name) {
    return spawn(config_a, config_b, log_name, NULL);
}

static pid_t spawn(const char *config_path, const char *config_b,
                   const char *log_name, const char *const *env) {
    char log[8192];
    snprintf(log, sizeof log, "%s/%s", workdir, log_name);
    snprintf(last_log, sizeof last_log, "%s", log_name);
    pid_t pid = fork();
    if (pid < 0)
        h_fail("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        for (size_t i = 0; env && env[i]; i++) {
            char kv[1024];
            snprintf(kv, sizeof kv, "%s", env[i]);
            char *eq = strchr(kv, '=');
            if (eq) {
                *eq = '\0';
                setenv(kv, eq + 1, 1);
            }
        }
        execl(tidemark_bin, tidemark_bin, "run", config_path, config_b,
              (char *)NULL);
        _exit(127);
    }
    track(pid);
    return pid;
}

int h_stop(pid_t pid, int sig, int timeout_ms, int64_t *took_ms) {
    int64_t t0 = h_now_ms();
    if (sig)
        kill(pid, sig);
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (took_ms)
                *took_ms = h_now_ms() - t0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        if (h_now_ms() - t0 > timeout_ms) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            h_fail("tidemark (pid %ld) did not exit within %d ms of signal "
                   "%d",
                   (long)pid, timeout_ms, sig);
        }
        h_sleep_ms(20);
    }
}

/* ---- SQLite --------------------------------------------------------- */

int64_t h_sql_int(const char *db, const char *sql) {
    sqlite3 *h = NULL;
    if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(h);
        return -1; /* not created yet */
    }
    sqlite3_busy_timeout(h, 5000);
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

int64_t h_sqlf(const char *db, const char *fmt, ...) {
    char sql[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    return h_sql_int(db, sql);
}

const char *h_path(const char *name) {
    static char p[8][sizeof workdir + 256];
    static int next;
    char *b = p[next++ % 8];
    snprintf(b, sizeof p[0], "%s/%.255s", workdir, name);
    return b;
}

const char *h_status_text(const char *connector) {
    char rel[1024];
    snprintf(rel, sizeof rel, "state/%s/status.json", connector);
    return h_read_file(rel);
}

int64_t h_pg_int(const char *fmt, ...) {
    static PGconn *conn;
    if (!conn) {
        const char *ci = getenv("TIDEMARK_PG_CONNINFO");
        H_CHECK(ci && *ci, "TIDEMARK_PG_CONNINFO is not set");
        conn = PQconnectdb(ci);
        H_CHECK(PQstatus(conn) == CONNECTION_OK, "PostgreSQL: %s",
                PQerrorMessage(conn));
    }
    char sql[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    PGresult *r = PQexec(conn, sql);
    int64_t v = -1;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
        !PQgetisnull(r, 0, 0))
        v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return v;
}

void h_stop_clean(pid_t pid) {
    int64_t took;
    int rc = h_stop(pid, SIGTERM, 10000, &took);
    H_CHECK(rc == 0, "tidemark exited %d after SIGTERM (expected 0)", rc);
    h_step("SIGTERM: exit 0 after %lld ms", (long long)took);
}

void h_wait_caught_up(const char *db, const char *connector, const char *topic,
                      int partitions, int timeout_ms) {
    int64_t t0 = h_now_ms();
    for (;;) {
        int behind = -1;
        int64_t at = 0, hw = 0;
        for (int p = 0; p < partitions; p++) {
            int64_t lo;
            h_watermarks(topic, p, &lo, &hw);
            char sql[1024];
            snprintf(sql, sizeof sql,
                     "SELECT next_offset FROM tidemark_markers WHERE "
                     "connector='%s' AND topic='%s' AND \"partition\"=%d",
                     connector, topic, p);
            at = h_sql_int(db, sql);
            if (at != hw) {
                behind = p;
                break;
            }
        }
        if (behind < 0)
            return;
        if (h_now_ms() - t0 > timeout_ms)
            h_fail("%s [%d]: marker at %lld, high watermark %lld after %d ms",
                   topic, behind, (long long)at, (long long)hw, timeout_ms);
        h_sleep_ms(100);
    }
}

void h_produce_many(rd_kafka_t *p, const char *topic, int32_t partition,
                    int first, int n, const char *fmt) {
    int64_t *offs = malloc((size_t)n * sizeof *offs);
    if (!offs)
        h_fail("out of memory");
    for (int i = 0; i < n; i++) {
        char val[512];
        snprintf(val, sizeof val, fmt, first + i);
        offs[i] = -1;
        rd_kafka_resp_err_t err;
        while ((err = rd_kafka_producev(
                    p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                    RD_KAFKA_V_VALUE(val, strlen(val)),
                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                    RD_KAFKA_V_OPAQUE(&offs[i]), RD_KAFKA_V_END)) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(p, 50);
        if (err)
            h_fail("produce to %s: %s", topic, rd_kafka_err2str(err));
        rd_kafka_poll(p, 0);
    }
    if (rd_kafka_flush(p, 60000))
        h_fail("flush to %s: not all delivered in 60 s", topic);
    for (int i = 0; i < n; i++)
        if (offs[i] < 0)
            h_fail("record %d to %s [%d] not delivered: %s", first + i, topic,
                   (int)partition,
                   offs[i] <= -1000 ? rd_kafka_err2str((
                                          rd_kafka_resp_err_t)(-1000 - offs[i]))
                                    : "no delivery report");
    free(offs);
}

int h_tidemark(const char *out_name, const char *const *args) {
    char out[8192];
    snprintf(out, sizeof out, "%s/%s", workdir, out_name);
    pid_t pid = fork();
    if (pid < 0)
        h_fail("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        const char *argv[32] = {tidemark_bin};
        size_t n = 1;
        for (size_t i = 0; args[i] && n < 31; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(tidemark_bin, (char *const *)argv);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        h_fail("waitpid: %s", strerror(errno));
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

const char *h_read_file(const char *name) {
    static char buf[1 << 16];
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", workdir, name);
    FILE *f = fopen(path, "r");
    buf[0] = '\0';
    if (!f)
        return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

void h_delete_records(const char *topic, int32_t partition, int64_t offset) {
    rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, rd_kafka_conf_new());
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, partition)->offset = offset;
    rd_kafka_DeleteRecords_t *del = rd_kafka_DeleteRecords_new(l);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_DeleteRecords(rk, &del, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    if (!ev || rd_kafka_event_error(ev))
        h_fail("DeleteRecords %s [%d] below %lld: %s", topic, (int)partition,
               (long long)offset,
               ev ? rd_kafka_event_error_string(ev) : "no answer in 30 s");
    const rd_kafka_topic_partition_list_t *res =
        rd_kafka_DeleteRecords_result_offsets(
            rd_kafka_event_DeleteRecords_result(ev));
    if (!res || res->cnt != 1 || res->elems[0].err)
        h_fail("DeleteRecords %s [%d]: %s", topic, (int)partition,
               res && res->cnt ? rd_kafka_err2str(res->elems[0].err)
                               : "no result");
    rd_kafka_event_destroy(ev);
    rd_kafka_DeleteRecords_destroy(del);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
}

/* ---- additions for the crash suite (tests/crash) ---------------------- */

void h_create_topic_cfg(const char *topic, int partitions,
                        const char *const *cfg) {
    rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, rd_kafka_conf_new());
    char err[512];
    rd_kafka_NewTopic_t *nt =
        rd_kafka_NewTopic_new(topic, partitions, 1, err, sizeof err);
    if (!nt)
        h_fail("NewTopic %s: %s", topic, err);
    for (size_t i = 0; cfg && cfg[i] && cfg[i + 1]; i += 2)
        if (rd_kafka_NewTopic_set_config(nt, cfg[i], cfg[i + 1]))
            h_fail("NewTopic %s: cannot set %s", topic, cfg[i]);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opt =
        rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_operation_timeout(opt, 20000, err, sizeof err);
    rd_kafka_CreateTopics(rk, &nt, 1, opt, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    if (!ev)
        h_fail("CreateTopics %s: no answer in 30 s", topic);
    size_t n = 0;
    const rd_kafka_topic_result_t **tr = rd_kafka_CreateTopics_result_topics(
        rd_kafka_event_CreateTopics_result(ev), &n);
    if (rd_kafka_event_error(ev) || n != 1 ||
        rd_kafka_topic_result_error(tr[0]))
        h_fail("CreateTopics %s: %s", topic,
               rd_kafka_event_error(ev) ? rd_kafka_event_error_string(ev)
               : n ? rd_kafka_topic_result_error_string(tr[0])
                   : "no result");
    rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_queue_destroy(q);
    wait_topic_ready(rk, topic, partitions);
    rd_kafka_destroy(rk);
}

size_t h_read_offsets(const char *topic, int32_t partition, int64_t **out) {
    int64_t lo, hi;
    h_watermarks(topic, partition, &lo, &hi);
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    /* Not h_name: its buffers rotate, and a scenario's own names held
     * across calls of this function in a loop were overwritten by it (a
     * compaction wait of more than 7 reads then read a topic named
     * "offset-reader-...": "no end after 60 s (0 records)"). */
    char group[64];
    snprintf(group, sizeof group, "offset-reader-%s", run_id);
    set(c, "group.id", group);
    set(c, "isolation.level", "read_committed");
    set(c, "enable.partition.eof", "true");
    set(c, "enable.auto.commit", "false");
    rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, c);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, partition)->offset =
        RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_resp_err_t err = rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (err)
        h_fail("assign %s [%d]: %s", topic, (int)partition,
               rd_kafka_err2str(err));
    size_t n = 0, cap = 1024;
    int64_t *offs = malloc(cap * sizeof *offs);
    if (!offs)
        h_fail("out of memory");
    int64_t t0 = h_now_ms();
    for (int done = 0; !done;) {
        if (h_now_ms() - t0 > 60000)
            h_fail("reading %s [%d]: no end after 60 s (%zu records)", topic,
                   (int)partition, n);
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 500);
        if (!m)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
            done = 1;
        else if (m->err)
            h_fail("reading %s [%d]: %s", topic, (int)partition,
                   rd_kafka_message_errstr(m));
        else {
            if (n == cap) {
                cap *= 2;
                int64_t *grown = realloc(offs, cap * sizeof *offs);
                if (!grown)
                    h_fail("out of memory");
                offs = grown;
            }
            offs[n++] = m->offset;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    *out = offs;
    return n;
}

pid_t h_spawn_many(const char *const *configs, const char *log_name,
                   const char *const *env) {
    char log[8192];
    snprintf(log, sizeof log, "%s/%s", workdir, log_name);
    snprintf(last_log, sizeof last_log, "%s", log_name);
    pid_t pid = fork();
    if (pid < 0)
        h_fail("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        for (size_t i = 0; env && env[i]; i++) {
            char kv[1024];
            snprintf(kv, sizeof kv, "%s", env[i]);
            char *eq = strchr(kv, '=');
            if (eq) {
                *eq = '\0';
                setenv(kv, eq + 1, 1);
            }
        }
        const char *argv[34] = {tidemark_bin, "run"};
        size_t n = 2;
        for (size_t i = 0; configs[i] && n < 33; i++)
            argv[n++] = configs[i];
        argv[n] = NULL;
        execv(tidemark_bin, (char *const *)argv);
        _exit(127);
    }
    track(pid);
    return pid;
}

/* One admin call's event, or a failure naming what. */
static rd_kafka_event_t *admin_wait(rd_kafka_queue_t *q, const char *what) {
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    if (!ev)
        h_fail("%s: no answer in 30 s", what);
    if (rd_kafka_event_error(ev))
        h_fail("%s: %s", what, rd_kafka_event_error_string(ev));
    return ev;
}

int h_group_owners(const char *group, const char *topic, int partitions,
                   char (*owners)[H_OWNER_MAX]) {
    rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, rd_kafka_conf_new());
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    const char *groups[1] = {group};
    rd_kafka_DescribeConsumerGroups(rk, groups, 1, NULL, q);
    rd_kafka_event_t *ev = admin_wait(q, "DescribeConsumerGroups");
    size_t n = 0;
    const rd_kafka_ConsumerGroupDescription_t **d =
        rd_kafka_DescribeConsumerGroups_result_groups(
            rd_kafka_event_DescribeConsumerGroups_result(ev), &n);
    if (n != 1)
        h_fail("DescribeConsumerGroups %s: %zu results", group, n);
    const rd_kafka_error_t *e = rd_kafka_ConsumerGroupDescription_error(d[0]);
    if (e)
        h_fail("DescribeConsumerGroups %s: %s", group,
               rd_kafka_error_string(e));
    for (int p = 0; owners && p < partitions; p++)
        owners[p][0] = '\0';
    int members = (int)rd_kafka_ConsumerGroupDescription_member_count(d[0]);
    for (int i = 0; i < members; i++) {
        const rd_kafka_MemberDescription_t *m =
            rd_kafka_ConsumerGroupDescription_member(d[0], (size_t)i);
        const char *id = rd_kafka_MemberDescription_group_instance_id(m);
        char both[H_OWNER_MAX];
        if (!id || !*id) {
            const char *cid = rd_kafka_MemberDescription_client_id(m);
            snprintf(both, sizeof both, "%s/%s", cid ? cid : "",
                     rd_kafka_MemberDescription_consumer_id(m));
            id = both;
        }
        const rd_kafka_topic_partition_list_t *l =
            rd_kafka_MemberAssignment_partitions(
                rd_kafka_MemberDescription_assignment(m));
        for (int j = 0; owners && l && j < l->cnt; j++)
            if (strcmp(l->elems[j].topic, topic) == 0 &&
                l->elems[j].partition >= 0 &&
                l->elems[j].partition < partitions)
                snprintf(owners[l->elems[j].partition], H_OWNER_MAX, "%s",
                         id ? id : "?");
    }
    rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return members;
}

void h_alter_topic_cfg(const char *topic, const char *const *cfg) {
    rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, rd_kafka_conf_new());
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_ConfigResource_t *r =
        rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    for (size_t i = 0; cfg[i] && cfg[i + 1]; i += 2)
        if (rd_kafka_ConfigResource_set_config(r, cfg[i], cfg[i + 1]))
            h_fail("AlterConfigs %s: cannot set %s", topic, cfg[i]);
    rd_kafka_AlterConfigs(rk, &r, 1, NULL, q);
    rd_kafka_event_t *ev = admin_wait(q, "AlterConfigs");
    size_t n = 0;
    const rd_kafka_ConfigResource_t **res =
        rd_kafka_AlterConfigs_result_resources(
            rd_kafka_event_AlterConfigs_result(ev), &n);
    if (n != 1 || rd_kafka_ConfigResource_error(res[0]))
        h_fail("AlterConfigs %s: %s", topic,
               n ? rd_kafka_ConfigResource_error_string(res[0]) : "no result");
    rd_kafka_event_destroy(ev);
    rd_kafka_ConfigResource_destroy(r);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
}

void h_delete_group(const char *group) {
    rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, rd_kafka_conf_new());
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_DeleteGroup_t *del = rd_kafka_DeleteGroup_new(group);
    rd_kafka_DeleteGroups(rk, &del, 1, NULL, q);
    rd_kafka_event_t *ev = admin_wait(q, "DeleteGroups");
    size_t n = 0;
    const rd_kafka_group_result_t **r = rd_kafka_DeleteGroups_result_groups(
        rd_kafka_event_DeleteGroups_result(ev), &n);
    if (n != 1 || rd_kafka_group_result_error(r[0]))
        h_fail("DeleteGroups %s: %s", group,
               n ? rd_kafka_error_string(rd_kafka_group_result_error(r[0]))
                 : "no result");
    rd_kafka_event_destroy(ev);
    rd_kafka_DeleteGroup_destroy(del);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
}

void h_alter_group_offsets(const char *group, const char *topic, int n,
                           const int64_t *offsets) {
    rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, rd_kafka_conf_new());
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
    for (int p = 0; p < n; p++)
        rd_kafka_topic_partition_list_add(l, topic, p)->offset = offsets[p];
    rd_kafka_AlterConsumerGroupOffsets_t *a =
        rd_kafka_AlterConsumerGroupOffsets_new(group, l);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_AlterConsumerGroupOffsets(rk, &a, 1, NULL, q);
    rd_kafka_event_t *ev = admin_wait(q, "AlterConsumerGroupOffsets");
    size_t cnt = 0;
    const rd_kafka_group_result_t **r =
        rd_kafka_AlterConsumerGroupOffsets_result_groups(
            rd_kafka_event_AlterConsumerGroupOffsets_result(ev), &cnt);
    if (cnt != 1 || rd_kafka_group_result_error(r[0]))
        h_fail("AlterConsumerGroupOffsets %s: %s", group,
               cnt ? rd_kafka_error_string(rd_kafka_group_result_error(r[0]))
                   : "no result");
    const rd_kafka_topic_partition_list_t *res =
        rd_kafka_group_result_partitions(r[0]);
    for (int i = 0; res && i < res->cnt; i++)
        if (res->elems[i].err)
            h_fail("AlterConsumerGroupOffsets %s [%d]: %s", group,
                   (int)res->elems[i].partition,
                   rd_kafka_err2str(res->elems[i].err));
    rd_kafka_event_destroy(ev);
    rd_kafka_AlterConsumerGroupOffsets_destroy(a);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
}

void h_produce_async(rd_kafka_t *p, const char *topic, int32_t partition,
                     const char *key, const void *val, size_t vlen) {
    rd_kafka_resp_err_t err;
    while ((err = rd_kafka_producev(
                p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                RD_KAFKA_V_KEY((void *)key, key ? strlen(key) : 0),
                RD_KAFKA_V_VALUE((void *)val, vlen),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
           RD_KAFKA_RESP_ERR__QUEUE_FULL)
        rd_kafka_poll(p, 50);
    if (err)
        h_fail("produce to %s: %s", topic, rd_kafka_err2str(err));
    rd_kafka_poll(p, 0);
}

void h_flush(rd_kafka_t *p) {
    if (rd_kafka_flush(p, 60000))
        h_fail("flush: not all delivered in 60 s");
}

void h_fault_pipe_open(h_fault_pipe *fp) {
    int fds[2];
    if (pipe(fds) != 0)
        h_fail("pipe: %s", strerror(errno));
    fp->rfd = fds[0];
    fp->wfd = fds[1];
    snprintf(fp->fd_env, sizeof fp->fd_env, "TIDEMARK_FAULT_FD=%d", fds[1]);
}

void h_fault_pipe_spawned(h_fault_pipe *fp) {
    if (fp->wfd >= 0)
        close(fp->wfd);
    fp->wfd = -1;
    if (fcntl(fp->rfd, F_SETFD, FD_CLOEXEC) != 0)
        h_fail("fcntl FD_CLOEXEC: %s", strerror(errno));
}

void h_fault_pipe_close(h_fault_pipe *fp) {
    if (fp->wfd >= 0)
        close(fp->wfd);
    if (fp->rfd >= 0)
        close(fp->rfd);
    fp->wfd = fp->rfd = -1;
}

const char *const *h_fault_hold_env(h_fault_pipe *fp, const char *point,
                                    int hit) {
    snprintf(fp->point_env, sizeof fp->point_env, "TIDEMARK_FAULT=%s", point);
    snprintf(fp->hit_env, sizeof fp->hit_env, "TIDEMARK_FAULT_HIT=%d", hit);
    fp->env[0] = fp->point_env;
    fp->env[1] = "TIDEMARK_FAULT_ACTION=stop";
    fp->env[2] = fp->hit_env;
    fp->env[3] = fp->fd_env;
    fp->env[4] = NULL;
    return fp->env;
}

pid_t h_spawn_held(const char *config_path, const char *log_name,
                   const char *point, int hit) {
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    pid_t pid =
        h_spawn_env(config_path, log_name, h_fault_hold_env(&fp, point, hit));
    h_fault_pipe_spawned(&fp);
    h_fault_wait(&fp, point, pid, 1);
    return pid;
}

char h_proc_state(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' ? rp[2] : '?';
}

void h_fault_wait(h_fault_pipe *fp, const char *point, pid_t pid, int stopped) {
    if (fp->wfd >= 0)
        close(fp->wfd);
    fp->wfd = -1;
    char name[64] = "";
    ssize_t got = 0;
    struct pollfd pfd = {fp->rfd, POLLIN, 0};
    /* The name and its newline come in two writes: read to the newline or
     * the end (the writer dies). */
    while ((size_t)got < sizeof name - 1 && !memchr(name, '\n', (size_t)got) &&
           poll(&pfd, 1, 60000) == 1) {
        ssize_t n = read(fp->rfd, name + got, sizeof name - 1 - (size_t)got);
        if (n <= 0)
            break;
        got += n;
    }
    close(fp->rfd);
    fp->rfd = -1;
    size_t len = strlen(point);
    if (!(got > (ssize_t)len && strncmp(name, point, len) == 0 &&
          name[len] == '\n'))
        h_fail("inconclusive: the fault point %s was not reported (read %zd "
               "bytes)",
               point, got);
    if (!stopped)
        return;
    int64_t t0 = h_now_ms();
    while (h_proc_state(pid) != 'T') {
        if (h_now_ms() - t0 > 5000)
            h_fail("inconclusive: the host did not stop at %s", point);
        h_sleep_ms(10);
    }
}
