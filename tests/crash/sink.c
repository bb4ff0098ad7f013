/* The sink abstraction of the crash suite: where a connector writes, and
 * how the judge reads the database itself (sqlite3 / libpq as observers). */
#include "crash.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static PGconn *pg_conn;
static char pg_schema[128];
/* iceberg-lite's observer (iceberg_observer.py), one per test process:
 * requests on to_obs, answers on from_obs. */
static FILE *to_obs, *from_obs;
static int observer_ask(const crash_sink *s, const char *request,
                        void (*row)(void *, int isnull, int64_t), void *ctx,
                        int64_t *changed, char *err, size_t errsize);

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
    } else if (strcmp(name, "iceberg_lite") == 0 ||
               strcmp(name, "iceberg_catalog") == 0) {
        s->kind = CS_ICEBERG;
        s->catalog = strcmp(name, "iceberg_catalog") == 0;
        s->name = s->catalog ? "iceberg_catalog" : "iceberg_lite";
        snprintf(s->db, sizeof s->db, "%s/lake", h_workdir());
        /* The plugin makes a table's folder, not its parents. */
        H_CHECK(mkdir(s->db, 0700) == 0, "mkdir %s", s->db);
        /* Started and asked once now, so that its imports (a second or
         * two) are done before the first look, which must be quick: the
         * kills wait for progress. */
        char err[1024];
        H_CHECK(observer_ask(s, "SQL SELECT 1", NULL, NULL, NULL, err,
                             sizeof err) == 0,
                "the iceberg observer: %s", err);
    } else
        h_fail("unknown sink %s (sqlite, postgres, iceberg_lite or "
               "iceberg_catalog)",
               name);
    s->dedup = s->kind != CS_ICEBERG; /* iceberg-lite has no dedup */
}

const char *cs_sink_json(const crash_sink *s, const char *table) {
    static char buf[4][16384];
    static int next;
    char *b = buf[next++ % 4];
    if (s->kind == CS_SQLITE)
        snprintf(b, sizeof buf[0],
                 "{\"plugin\": \"sqlite\", \"settings\": {\"path\": \"%s\", "
                 "\"table\": \"%s\"}}",
                 s->db, table);
    else if (s->kind == CS_ICEBERG && s->catalog)
        /* The catalog's table name is the folder's: the observer finds
         * each table's row by it. Partitioned (raw mode's columns), zstd
         * (the default codec) and maintained in the background, so the
         * kills land among compactions and partitioned files too; few
         * snapshots kept, so that expiries run among the kills as well. */
        snprintf(b, sizeof buf[0],
                 "{\"plugin\": \"iceberg_lite\", \"settings\": {\"path\": "
                 "\"%s/%s\", \"catalog_uri\": \"sqlite:///%s/catalog.db\", "
                 "\"catalog_name\": \"crash\", \"catalog_namespace\": "
                 "\"crash\", \"catalog_table\": \"%s\", \"partition\": "
                 "\"bucket[4](offset), day(timestamp)\", \"maintenance\": "
                 "true, \"maintenance_min_files\": 4, \"keep_snapshots\": "
                 "3}}",
                 s->db, table, s->db, table);
    else if (s->kind == CS_ICEBERG)
        snprintf(b, sizeof buf[0],
                 "{\"plugin\": \"iceberg_lite\", \"settings\": {\"path\": "
                 "\"%s/%s\"}}",
                 s->db, table);
    else
        snprintf(b, sizeof buf[0],
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

/* Starts the observer on first use: the venv's Python (scripts/
 * python-venv.sh; TIDEMARK_VENV_PYTHON) running iceberg_observer.py on the
 * lake folder. It ends when this process does (its stdin closes). */
static void observer_start(const crash_sink *s) {
    if (to_obs)
        return;
    const char *py = getenv("TIDEMARK_VENV_PYTHON");
    H_CHECK(py && *py, "TIDEMARK_VENV_PYTHON is not set (scripts/"
                       "python-venv.sh makes the venv; ctest sets it)");
    int in[2], out[2];
    H_CHECK(pipe(in) == 0 && pipe(out) == 0, "pipe");
    pid_t pid = fork();
    H_CHECK(pid >= 0, "fork");
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execl(py, py, CRASH_ICEBERG_OBSERVER, s->db,
              s->catalog ? "--catalog" : (char *)NULL, (char *)NULL);
        perror("exec the iceberg observer");
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    /* Not inherited by what this process starts later: a broker started
     * again by a restart scenario holding the observer's stdin would keep
     * it alive past the test, and ctest waiting for its stderr. */
    H_CHECK(fcntl(in[1], F_SETFD, FD_CLOEXEC) == 0 &&
                fcntl(out[0], F_SETFD, FD_CLOEXEC) == 0,
            "fcntl FD_CLOEXEC");
    signal(SIGPIPE, SIG_IGN); /* a dead observer is an error, not a kill */
    to_obs = fdopen(in[1], "w");
    from_obs = fdopen(out[0], "r");
    H_CHECK(to_obs && from_obs, "fdopen");
}

/* One request to the observer: calls row() per "ROW" line; 0 on "OK n"
 * (n in *changed when given), -1 on "ERR message" or a dead observer. */
static int observer_ask(const crash_sink *s, const char *request,
                        void (*row)(void *, int isnull, int64_t), void *ctx,
                        int64_t *changed, char *err, size_t errsize) {
    observer_start(s);
    H_CHECK(!strchr(request, '\n'), "a request must be one line");
    if (fprintf(to_obs, "%s\n", request) < 0 || fflush(to_obs) != 0) {
        snprintf(err, errsize, "the iceberg observer is gone");
        return -1;
    }
    static char line[8192];
    while (fgets(line, sizeof line, from_obs)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "ROW ", 4) == 0) {
            int isnull = strcmp(line + 4, "NULL") == 0;
            if (row)
                row(ctx, isnull, isnull ? 0 : strtoll(line + 4, NULL, 10));
        } else if (strncmp(line, "OK ", 3) == 0) {
            if (changed)
                *changed = strtoll(line + 3, NULL, 10);
            return 0;
        } else {
            snprintf(err, errsize, "%.900s",
                     strncmp(line, "ERR ", 4) == 0 ? line + 4 : line);
            return -1;
        }
    }
    snprintf(err, errsize,
             "the iceberg observer ended (see the test's "
             "stderr)");
    return -1;
}

/* Runs sql; for a query, calls row(value of column 0) per row. Returns 0,
 * or -1 on an error (message in err). */
static int run(const crash_sink *s, const char *sql,
               void (*row)(void *, int isnull, int64_t), void *ctx,
               int64_t *changed, char *err, size_t errsize) {
    err[0] = '\0';
    if (s->kind == CS_ICEBERG) {
        char request[4200];
        snprintf(request, sizeof request, "SQL %s", sql);
        return observer_ask(s, request, row, ctx, changed, err, errsize);
    }
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

int64_t cs_quick_count(const crash_sink *s, const char *table) {
    if (s->kind != CS_ICEBERG)
        return cs_int(s, "SELECT count(*) FROM %s", table);
    char request[512], err[1024];
    snprintf(request, sizeof request, "TOTAL %s", table);
    int64_t v = 0;
    return observer_ask(s, request, first_row, &v, NULL, err, sizeof err) == 0
               ? v
               : -1;
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

int64_t cs_forget_markers(const crash_sink *s, const char *const *connectors,
                          int n) {
    char req[4096], err[1024];
    int64_t changed = 0;
    size_t o = 0;
    if (s->kind == CS_ICEBERG) {
        /* Markers live in the table's metadata: the observer publishes the
         * next version without them, the rows (data files) untouched. */
        o = (size_t)snprintf(req, sizeof req, "FORGET");
        for (int i = 0; i < n && o < sizeof req; i++)
            o +=
                (size_t)snprintf(req + o, sizeof req - o, " %s", connectors[i]);
        H_CHECK(observer_ask(s, req, NULL, NULL, &changed, err, sizeof err) ==
                    0,
                "iceberg_lite: %s: %s", req, err);
        return changed;
    }
    o = (size_t)snprintf(req, sizeof req,
                         "DELETE FROM tidemark_markers WHERE connector IN (");
    for (int i = 0; i < n && o < sizeof req; i++)
        o += (size_t)snprintf(req + o, sizeof req - o, "%s'%s'", i ? ", " : "",
                              connectors[i]);
    if (o < sizeof req)
        snprintf(req + o, sizeof req - o, ")");
    H_CHECK(run(s, req, NULL, NULL, &changed, err, sizeof err) == 0,
            "%s sink: %s: %s", s->name, req, err);
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
