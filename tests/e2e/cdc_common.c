/* What the change-data-capture end-to-end tests share (cdc_common.h). */
#include "cdc_common.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static uint64_t rng = 0x5eed; /* next_rand's state */

void seed_rand(uint64_t seed) {
    rng = seed;
}

uint64_t next_rand(void) {
    rng += 0x9E3779B97F4A7C15ull;
    uint64_t z = rng;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int64_t count_rows(const target *t, const char *fmt_where, int a,
                   const char *b) {
    char where[512];
    snprintf(where, sizeof where, fmt_where, a, b);
    return t->pg ? h_pg_int("SELECT count(*) FROM \"%s\" %s", t->table, where)
                 : h_sqlf(t->db, "SELECT count(*) FROM \"%s\" %s", t->table,
                          where);
}

int64_t marker_sum(const target *t) {
    const char *q = "SELECT coalesce(sum(next_offset), -1) FROM "
                    "tidemark_markers WHERE connector = '%s' AND topic = '%s'";
    return t->pg ? h_pg_int(q, t->connector, t->topic)
                 : h_sqlf(t->db, q, t->connector, t->topic);
}

int64_t high_sum(const target *t) {
    int64_t sum = 0;
    for (int part = 0; part < PARTITIONS; part++) {
        int64_t lo, hi;
        h_watermarks(t->topic, part, &lo, &hi);
        sum += hi;
    }
    return sum;
}

int wait_markers(const target *t, pid_t pid, int64_t timeout_ms) {
    int64_t want = high_sum(t), t0 = h_now_ms(), at;
    for (;;) {
        int status;
        if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status)
                                     : 128 + WTERMSIG(status);
        if ((at = marker_sum(t)) == want)
            return CAUGHT_UP;
        if (h_now_ms() - t0 > timeout_ms) {
            fprintf(stderr, "markers at %lld of %lld after %lld ms\n",
                    (long long)at, (long long)want, (long long)timeout_ms);
            return CAUGHT_UP_TIMEOUT;
        }
        h_sleep_ms(100);
    }
}

void wait_caught_up(const target *t) {
    H_CHECK(wait_markers(t, 0, 120000) == CAUGHT_UP,
            "the markers did not reach the high watermarks in 120 s");
}

/* The connector's config into the work dir's FILE: batches of up to
 * MAX_RECORDS records, cut after MAX_WAIT_MS. */
const char *config_file(const target *t, const char *mapping, const char *file,
                        int max_records, int max_wait_ms) {
    return config_file_timeout(t, mapping, file, max_records, max_wait_ms, 0);
}

const char *config_file_timeout(const target *t, const char *mapping,
                                const char *file, int max_records,
                                int max_wait_ms, int commit_timeout_ms) {
    char sink[2048], text[8192], timeout[64] = "";
    if (commit_timeout_ms > 0)
        snprintf(timeout, sizeof timeout, ", \"commit_timeout_ms\": %d",
                 commit_timeout_ms);
    if (t->pg)
        snprintf(sink, sizeof sink,
                 "{\"plugin\": \"postgres\", \"settings\": {\"conninfo\": "
                 "\"${env:TIDEMARK_PG_CONNINFO}\", \"table\": \"%s\", "
                 "\"mode\": \"upsert\"}}",
                 t->table);
    else
        snprintf(sink, sizeof sink,
                 "{\"plugin\": \"sqlite\", \"settings\": {\"path\": \"%s\", "
                 "\"table\": \"%s\", \"mode\": \"upsert\"}}",
                 t->db, t->table);
    snprintf(text, sizeof text,
             "{\"name\": \"%s\",\n"
             " \"kafka\": {\"bootstrap_servers\": \"%s\", \"topics\": "
             "[\"%s\"], \"start\": \"earliest\", \"static_membership\": "
             "false, \"properties\": {\"session.timeout.ms\": \"6000\", "
             "\"heartbeat.interval.ms\": \"500\"}},\n"
             " \"batch\": {\"max_records\": %d, \"max_wait_ms\": %d%s},\n"
             " \"sink\": %s,\n"
             " \"state_dir\": \"%s/state\",\n"
             " \"mapping\": %s}\n",
             t->connector, h_bootstrap(), t->topic, max_records, max_wait_ms,
             timeout, sink, h_workdir(), mapping);
    return h_write_file(file, text);
}

sqlite3 *sqlite_write_lock(const target *t) {
    sqlite3 *lock = NULL;
    H_CHECK(sqlite3_open(t->db, &lock) == SQLITE_OK &&
                sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL) ==
                    SQLITE_OK,
            "inconclusive: cannot take the write lock: %s",
            sqlite3_errmsg(lock));
    return lock;
}

void sqlite_write_unlock(sqlite3 *lock) {
    sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(lock);
}

const char *config_with(const target *t, const char *mapping) {
    return config_file(t, mapping, "cdc.json", 40, 100);
}

const char *config(const target *t) {
    return config_with(t, DEBEZIUM_MAPPING);
}

void init_target(target *t, int pg) {
    memset(t, 0, sizeof *t);
    t->pg = pg;
    snprintf(t->topic, sizeof t->topic, "%s", h_name("cdc-events"));
    snprintf(t->connector, sizeof t->connector, "%s", h_name("cdc"));
    snprintf(t->table, sizeof t->table, "%s", h_name("cdc_customers"));
    for (char *c = t->table; *c; c++)
        if (*c == '-')
            *c = '_';
    snprintf(t->db, sizeof t->db, "%s/cdc.db", h_workdir());
}

/* A target of its own in the scenario (SUFFIX on its names). */
void init_target_as(target *t, int pg, const char *suffix) {
    init_target(t, pg);
    size_t n = strlen(t->table);
    snprintf(t->table + n, sizeof t->table - n, "_%s", suffix);
    n = strlen(t->topic);
    snprintf(t->topic + n, sizeof t->topic - n, "-%s", suffix);
    n = strlen(t->connector);
    snprintf(t->connector + n, sizeof t->connector - n, "-%s", suffix);
}

/* A malformed event: a dead letter "envelope" that carries its batch id. */
void bad_marker(rd_kafka_t *p, const target *t) {
    static const char BAD[] = "{\"before\":null,\"after\":null,\"op\":\"x\"}";
    h_produce_async(p, t->topic, 0, "{\"id\":0}", BAD, strlen(BAD));
}

int64_t dead_letters(const target *t, const char *reason) {
    const char *q = "SELECT count(*) FROM tidemark_dead_letters WHERE "
                    "connector = '%s' AND reason = '%s'";
    return t->pg ? h_pg_int(q, t->connector, reason)
                 : h_sqlf(t->db, q, t->connector, reason);
}

/* The bad markers at offsets FIRST and LAST of partition 0 are dead
 * letters of one batch, so every event between them was in it; else the
 * scenario is inconclusive. */
void check_one_batch(const target *t, int64_t first, int64_t last) {
    const char *q = "SELECT count(*) * 10 + count(DISTINCT batch_id) FROM "
                    "tidemark_dead_letters WHERE connector = '%s' AND "
                    "\"partition\" = 0 AND \"offset\" IN (%lld, %lld)";
    int64_t n =
        t->pg
            ? h_pg_int(q, t->connector, (long long)first, (long long)last)
            : h_sqlf(t->db, q, t->connector, (long long)first, (long long)last);
    H_CHECK(n == 21,
            "inconclusive: offsets %lld to %lld not in one batch (%lld dead "
            "letters in %lld batches)",
            (long long)first, (long long)last, (long long)(n / 10),
            (long long)(n % 10));
}

void check_verify(const char *cfg) {
    const char *args[] = {"verify", cfg, NULL};
    int rc = h_tidemark("verify.out", args);
    H_CHECK(rc == 0, "tidemark verify: exit %d\n%s", rc,
            h_read_file("verify.out"));
}

/* Runs SQL (statements without results) on PostgreSQL; any error fails
 * the test as inconclusive. */
void pg_do(const char *sql) {
    static PGconn *conn;
    if (!conn) {
        const char *ci = getenv("TIDEMARK_PG_CONNINFO");
        H_CHECK(ci && *ci, "TIDEMARK_PG_CONNINFO is not set");
        conn = PQconnectdb(ci);
        H_CHECK(PQstatus(conn) == CONNECTION_OK, "PostgreSQL: %s",
                PQerrorMessage(conn));
    }
    PGresult *r = PQexec(conn, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    H_CHECK(ok, "inconclusive: %s: %s", sql, PQerrorMessage(conn));
}

/* Creates the target table (id, name) before the host does, NAME_SQL
 * the name column's type and constraint, and upsert's unique index on
 * the key. */
void create_table_as(const target *t, const char *name_sql) {
    const char *ddl =
        "CREATE TABLE \"%s\" (id %s, name %s, "
        "_tm_topic text NOT NULL, _tm_partition integer NOT NULL, "
        "_tm_offset bigint NOT NULL, _tm_identity text); CREATE UNIQUE "
        "INDEX \"%s_id\" ON \"%s\" (id)";
    char sql[1024];
    snprintf(sql, sizeof sql, ddl, t->table, t->pg ? "bigint" : "INTEGER",
             name_sql, t->table, t->table);
    if (t->pg) {
        pg_do(sql);
        return;
    }
    sqlite3 *db = NULL;
    int rc = sqlite3_open(t->db, &db);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    H_CHECK(rc == SQLITE_OK, "inconclusive: creating %s: %s", t->table,
            sqlite3_errmsg(db));
    sqlite3_close(db);
}

/* With a CHECK refusing the name "bad". */
void create_checked_table(const target *t) {
    create_table_as(t, "text CHECK (name <> 'bad')");
}

/* One bare Debezium event of key id into partition 0 (name NULL: a
 * delete). */
void plain_event(rd_kafka_t *p, const target *t, int id, const char *op,
                 const char *name) {
    char key[64], value[512];
    snprintf(key, sizeof key, "{\"id\":%d}", id);
    if (name)
        snprintf(value, sizeof value,
                 "{\"before\":null,\"after\":{\"id\":%d,\"name\":\"%s\"},"
                 "\"op\":\"%s\"}",
                 id, name, op);
    else
        snprintf(value, sizeof value,
                 "{\"before\":{\"id\":%d,\"name\":null},\"after\":null,"
                 "\"op\":\"%s\"}",
                 id, op);
    h_produce_async(p, t->topic, 0, key, value, strlen(value));
}

/* Runs the host on T's topic until it caught up, then stops it. */
void run_until_caught_up(const target *t, const char *cfg, const char *log) {
    pid_t pid = h_spawn(cfg, log);
    wait_caught_up(t);
    h_stop_clean(pid);
}

void schema_create(rd_kafka_t *p, const target *t, int32_t partition,
                   const char *key, const char *rowfields, const char *after) {
    char value[4096];
    int n =
        snprintf(value, sizeof value,
                 "{\"schema\":{\"type\":\"struct\",\"fields\":["
                 "{\"field\":\"before\",\"type\":\"struct\",\"optional\":true,"
                 "\"fields\":[%s]},{\"field\":\"after\",\"type\":\"struct\","
                 "\"optional\":true,\"fields\":[%s]},"
                 "{\"field\":\"op\",\"type\":\"string\",\"optional\":false}]},"
                 "\"payload\":{\"before\":null,\"after\":%s,\"op\":\"c\"}}",
                 rowfields, rowfields, after);
    H_CHECK(n > 0 && (size_t)n < sizeof value, "inconclusive: event too long");
    h_produce_async(p, t->topic, partition, key, value, strlen(value));
}

const char *enveloped_id_key(char *buf, size_t n, int id) {
    snprintf(buf, n,
             "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"field\":"
             "\"id\",\"type\":\"int32\",\"optional\":false}]},"
             "\"payload\":{\"id\":%d}}",
             id);
    return buf;
}

int run_caught_up(const target *t, const char *cfg, const char *log) {
    pid_t pid = h_spawn(cfg, log);
    int rc = wait_markers(t, pid, 60000);
    if (rc >= 0) {
        h_step("the host exited by itself (status %d)", rc);
        return 0;
    }
    fprintf(stderr, "status after the run: %s\n", h_status_text(t->connector));
    h_stop(pid, SIGTERM, 30000, NULL);
    return rc == CAUGHT_UP;
}
