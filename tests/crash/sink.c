/* The sink abstraction of the crash suite: where a connector writes, and
 * how the judge reads the database itself (sqlite3 / libpq as observers). */
#include "crash.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static PGconn *pg_conn;
static char pg_schema[128];

void cs_init(crash_sink *s, const char *name, const char *scenario) {
    memset(s, 0, sizeof *s);
    if (strcmp(name, "sqlite") == 0) {
        s->kind = CS_SQLITE;
        s->name = "sqlite";
        snprintf(s->db, sizeof s->db, "%s/%s.db", h_workdir(), scenario);
    } else if (strcmp(name, "postgres") == 0) {
        s->kind = CS_POSTGRES;
        s->name = "postgres";
        const char *ci = getenv("TIDEMARK_PG_CONNINFO");
        H_CHECK(ci && *ci, "TIDEMARK_PG_CONNINFO is not set (. scripts/env.sh "
                           "after scripts/postgres.sh start)");
        /* h_name gives "<base>-<run id>"; a schema wants no dash. */
        snprintf(s->schema, sizeof s->schema, "crash_%s", h_name(scenario));
        for (char *c = s->schema; *c; c++)
            if (*c == '-')
                *c = '_';
        snprintf(pg_schema, sizeof pg_schema, "%s", s->schema);
    } else
        h_fail("unknown sink %s (sqlite or postgres)", name);
}

const char *cs_sink_json(const crash_sink *s, const char *table) {
    static char buf[4][8192];
    static int next;
    char *b = buf[next++ % 4];
    if (s->kind == CS_SQLITE)
        snprintf(b, 8192,
                 "{\"plugin\": \"sqlite\", \"settings\": {\"path\": \"%s\", "
                 "\"table\": \"%s\"}}",
                 s->db, table);
    else
        snprintf(b, 8192,
                 "{\"plugin\": \"postgres\", \"settings\": {\"conninfo\": "
                 "\"${env:TIDEMARK_PG_CONNINFO}\", \"schema\": \"%s\", "
                 "\"table\": \"%s\", \"connect_timeout_s\": 2}}",
                 s->schema, table);
    return b;
}

static void quiet(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

/* The observer's session; made again after the server restarted. */
static PGconn *pg(void) {
    if (pg_conn && PQstatus(pg_conn) == CONNECTION_OK)
        return pg_conn;
    if (pg_conn)
        PQfinish(pg_conn);
    pg_conn = PQconnectdb(getenv("TIDEMARK_PG_CONNINFO"));
    if (PQstatus(pg_conn) != CONNECTION_OK)
        return pg_conn; /* the caller sees the failure */
    PQsetNoticeProcessor(pg_conn, quiet, NULL);
    char sql[256];
    snprintf(sql, sizeof sql, "SET search_path TO \"%s\"", pg_schema);
    PQclear(PQexec(pg_conn, sql));
    return pg_conn;
}

/* Runs sql; for a query, calls row(value of column 0) per row. Returns 0,
 * or -1 on an error (message in err). */
static int run(const crash_sink *s, const char *sql,
               void (*row)(void *, int isnull, int64_t), void *ctx,
               int64_t *changed, char *err, size_t errsize) {
    err[0] = '\0';
    if (s->kind == CS_SQLITE) {
        sqlite3 *h = NULL;
        int flags = changed ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY;
        if (sqlite3_open_v2(s->db, &h, flags, NULL) != SQLITE_OK) {
            snprintf(err, errsize, "open %.512s: %.400s", s->db,
                     sqlite3_errmsg(h));
            sqlite3_close(h);
            return -1;
        }
        sqlite3_busy_timeout(h, 10000);
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(h, sql, -1, &st, NULL);
        while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            if (row)
                row(ctx, sqlite3_column_type(st, 0) == SQLITE_NULL,
                    sqlite3_column_int64(st, 0));
            rc = SQLITE_OK;
        }
        int ok = rc == SQLITE_DONE;
        if (!ok)
            snprintf(err, errsize, "%s", sqlite3_errmsg(h));
        if (ok && changed)
            *changed = sqlite3_changes(h);
        sqlite3_finalize(st);
        sqlite3_close(h);
        return ok ? 0 : -1;
    }
    PGconn *c = pg();
    if (PQstatus(c) != CONNECTION_OK) {
        snprintf(err, errsize, "%s", PQerrorMessage(c));
        return -1;
    }
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    int ok = st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK;
    if (!ok)
        snprintf(err, errsize, "%s", PQresultErrorMessage(r));
    for (int i = 0; ok && row && i < PQntuples(r); i++)
        row(ctx, PQgetisnull(r, i, 0),
            PQgetisnull(r, i, 0) ? 0 : strtoll(PQgetvalue(r, i, 0), NULL, 10));
    if (ok && changed)
        *changed = strtoll(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return ok ? 0 : -1;
}

static void first_row(void *ctx, int isnull, int64_t v) {
    *(int64_t *)ctx = isnull ? 0 : v;
}

int64_t cs_int(const crash_sink *s, const char *fmt, ...) {
    char sql[4096], err[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    int64_t v = 0;
    return run(s, sql, first_row, &v, NULL, err, sizeof err) == 0 ? v : -1;
}

typedef struct {
    int64_t *v;
    size_t n, cap;
} list;

static void add_row(void *ctx, int isnull, int64_t v) {
    list *l = ctx;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 1024;
        int64_t *grown = realloc(l->v, l->cap * sizeof *grown);
        H_CHECK(grown != NULL, "out of memory");
        l->v = grown;
    }
    l->v[l->n++] = isnull ? -1 : v;
}

size_t cs_list(const crash_sink *s, int64_t **out, const char *fmt, ...) {
    char sql[4096], err[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    list l = {0};
    H_CHECK(run(s, sql, add_row, &l, NULL, err, sizeof err) == 0,
            "%s sink: %s: %s", s->name, sql, err);
    *out = l.v;
    return l.n;
}

int64_t cs_exec(const crash_sink *s, const char *fmt, ...) {
    char sql[4096], err[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    int64_t changed = 0;
    H_CHECK(run(s, sql, NULL, NULL, &changed, err, sizeof err) == 0,
            "%s sink: %s: %s", s->name, sql, err);
    return changed;
}

void cs_cleanup(const crash_sink *s) {
    if (s->kind != CS_POSTGRES)
        return;
    char sql[256], err[1024];
    snprintf(sql, sizeof sql, "DROP SCHEMA IF EXISTS \"%s\" CASCADE",
             s->schema);
    int64_t changed = 0;
    if (run(s, sql, NULL, NULL, &changed, err, sizeof err) != 0)
        h_step("cleanup: %s", err);
}
