/* The SQL catalog in PostgreSQL (see catalog.h), through libpq: the same
 * tables and statements as the SQLite backend (catalog_backend.h), in the
 * schema the connection's search_path names first (the URI may set it:
 * "?options=-csearch_path%3Dlake"). The swap is one UPDATE in autocommit;
 * its command tag's row count says who won.
 *
 * No wait is unbounded (docs/iceberg-lite.md, "Vacuum beside writers": a
 * swap runs after the writer's publish check, and a stall between the two
 * must stay below the margin vacuum's age floor leaves): every session
 * sets lock_timeout and statement_timeout, so the server itself cancels a
 * swap waiting on the row (another session holding it FOR UPDATE) and
 * can never commit it later; the client waits for a statement's whole
 * answer (its commit included, which statement_timeout does not cover)
 * that long and a slack, then cancels it (bounded); a (re)connection
 * gives up after connect_timeout; TCP keepalives and tcp_user_timeout
 * find a connection that died while a statement waits for its answer. A
 * cancel the server reports is a refusal (nothing changed, the batch is
 * retried); a connection lost after sending is an unknown outcome
 * (catalog.h). */
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_backend.h"

/* SQLSTATEs: a row of that key exists; a table of that name exists (two
 * writers creating the catalog at once). */
#define UNIQUE_VIOLATION "23505"
#define DUPLICATE_TABLE  "42P07"
/* ... and a statement cancelled by statement_timeout (or a cancel), or
 * by lock_timeout. */
#define QUERY_CANCELED     "57014"
#define LOCK_NOT_AVAILABLE "55P03"

/* The parameters are sent as text (pg_type's oid of text): the server
 * would otherwise deduce $1 as text in one place and varchar in another
 * (the namespace's INSERT ... SELECT) and refuse the statement. */
#define TEXT_OID 25

static PGconn *conn_of(ice_catalog *c) {
    return c->db;
}

/* Fills why with what failed and the server's (or libpq's) message, its
 * last newline dropped; returns rc. */
static int fail(ice_catalog *c, int rc, const char *what, const PGresult *res,
                char *why, size_t why_size) {
    if (c->lost) {
        snprintf(why, why_size,
                 "%s: %s: no answer within %d ms, nor %d ms after a cancel: "
                 "the connection is given up, the outcome unknown",
                 c->ident, what,
                 c->lock_timeout_ms + ICE_CATALOG_DEADLINE_SLACK_MS,
                 ICE_CATALOG_CANCEL_WAIT_MS);
        return rc;
    }
    const char *msg = res ? PQresultErrorMessage(res) : "";
    if (!*msg)
        msg = c->db ? PQerrorMessage(conn_of(c)) : "no connection";
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        n--;
    if (c->cancelled && PQstatus(conn_of(c)) != CONNECTION_OK)
        /* The cancel may not have stopped it before the break. */
        snprintf(why, why_size,
                 "%s: %s: no answer within catalog_lock_timeout_ms (%d ms) "
                 "and %d ms: cancelled, then the connection broke before "
                 "the answer: the outcome unknown (PostgreSQL: %.*s)",
                 c->ident, what, c->lock_timeout_ms,
                 ICE_CATALOG_DEADLINE_SLACK_MS, (int)n, msg);
    else if (c->cancelled)
        snprintf(why, why_size,
                 "%s: %s: no answer within catalog_lock_timeout_ms (%d ms) "
                 "and %d ms (a commit that waits after its statement: a "
                 "deferred trigger, synchronous replication): cancelled, "
                 "nothing changed (PostgreSQL: %.*s)",
                 c->ident, what, c->lock_timeout_ms,
                 ICE_CATALOG_DEADLINE_SLACK_MS, (int)n, msg);
    else
        snprintf(why, why_size, "%s: %s: %.*s", c->ident, what, (int)n, msg);
    return rc;
}

static int is_state(const PGresult *res, const char *state) {
    const char *s = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    return s && strcmp(s, state) == 0;
}

/* Reads the answer to the statement sent until it is whole (libpq's
 * NULL after its results) or DEADLINE (ice_mono_ms) passes: 1 whole (or
 * the connection broke), 0 not by then. The results go to *res, an error
 * replacing what came before it: with the extended protocol the
 * UPDATE's "UPDATE 1" comes before the commit (at Sync), which may still
 * fail (a deferred trigger, a cancel), and the last word is the
 * transaction's outcome. */
static int collect(ice_catalog *c, int64_t deadline, PGresult **res) {
    PGconn *conn = conn_of(c);
    for (;;) {
        int ok = PQconsumeInput(conn);
        while (!PQisBusy(conn)) {
            PGresult *r = PQgetResult(conn);
            if (!r)
                return 1;
            if (!*res || PQresultStatus(r) == PGRES_FATAL_ERROR) {
                PQclear(*res);
                *res = r;
            } else {
                PQclear(r);
            }
        }
        if (!ok)
            return 1; /* broken: PQstatus and PQerrorMessage say so */
        int64_t left = deadline - ice_mono_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = PQsocket(conn), .events = POLLIN};
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
            return 1; /* PQconsumeInput would report the socket's error */
    }
}

/* The session's cancel handle, taken again after each (re)connection
 * (its backend and key change). */
static void take_cancel(ice_catalog *c) {
    PQfreeCancel(c->cancel);
    c->cancel = PQgetCancel(conn_of(c));
}

/* Asks the server to cancel what the session runs, waiting for the
 * request to be taken at most until DEADLINE (a cancel that is not
 * changes nothing, or lands later: the caller's wait decides). The
 * session's handle goes to the cancel (catalog_pg_cancel.c) and is taken
 * again while the connection stands; a reconnect takes the new
 * session's. */
static void cancel_statement(ice_catalog *c, int64_t deadline) {
    void *cancel = c->cancel;
    c->cancel = NULL;
    (void)ice_pg_cancel_until(cancel, deadline);
    if (PQstatus(conn_of(c)) == CONNECTION_OK)
        take_cancel(c);
}

/* Sends SQL (NPARAMS of VALS) and takes its result, waiting at most the
 * lock timeout and a slack: the server's timeouts bound the statement,
 * not a commit that waits after it (statement_timeout ends with the
 * statement), which would publish a swap whenever the server gets to it.
 * Past the deadline the statement is cancelled (c->cancelled; a cancel
 * does not stop a commit already writing: it may still answer OK), and
 * without the whole answer ICE_CATALOG_CANCEL_WAIT_MS later the
 * connection is given up (c->lost: the outcome is unknown). The result
 * (the caller clears it); NULL when lost, or nothing was sent
 * (PQerrorMessage). */
static PGresult *bounded_for(ice_catalog *c, const char *sql, int nparams,
                             const Oid *types, const char *const *vals,
                             int wait_ms) {
    PGconn *conn = conn_of(c);
    if (c->lost)
        return NULL; /* given up: made again by the next call's connected */
    c->cancelled = 0;
    if (!PQsendQueryParams(conn, sql, nparams, types, vals, NULL, NULL, 0))
        return NULL;
    PGresult *res = NULL;
    int64_t deadline = ice_mono_ms() + wait_ms;
    if (collect(c, deadline, &res)) {
        /* The connection broke under the statement: its backend may run
         * on (a server learns of a lost client only when it writes to
         * it) and commit whenever its wait ends, long after our publish
         * check. Cancelled; the outcome stays unknown (failed_in). */
        if (PQstatus(conn) != CONNECTION_OK)
            cancel_statement(c, ice_mono_ms() + ICE_CATALOG_CANCEL_WAIT_MS);
        return res;
    }
    /* The cancel's delivery and the answer after it share one wait, so
     * the whole stays within the lock timeout, the slack and this wait
     * (a server that never answers the cancel, a full listen backlog). */
    int64_t end = ice_mono_ms() + ICE_CATALOG_CANCEL_WAIT_MS;
    c->cancelled = 1;
    cancel_statement(c, end);
    if (collect(c, end, &res)) {
        if (PQstatus(conn) != CONNECTION_OK)
            cancel_statement(c, end); /* again, for the orphan: no wait */
        return res;
    }
    PQclear(res);
    c->lost = 1;
    return NULL;
}

static PGresult *bounded(ice_catalog *c, const char *sql, int nparams,
                         const Oid *types, const char *const *vals) {
    return bounded_for(c, sql, nparams, types, vals,
                       c->lock_timeout_ms + ICE_CATALOG_DEADLINE_SLACK_MS);
}

/* Runs SQL with $1 $2 $3 the row's key, $4 p4, $5 p5 (as many as NPARAMS
 * says), bounded. The result (the caller clears it), or NULL (see
 * bounded). */
static PGresult *run(ice_catalog *c, const char *sql, int nparams,
                     const char *p4, const char *p5) {
    const char *vals[5] = {c->name, c->ns, c->table, p4, p5};
    const Oid types[5] = {TEXT_OID, TEXT_OID, TEXT_OID, TEXT_OID, TEXT_OID};
    return bounded(c, sql, nparams, types, vals);
}

/* A statement without parameters (BEGIN, COMMIT, SET), bounded the
 * same. */
static PGresult *run0(ice_catalog *c, const char *sql) {
    return bounded(c, sql, 0, NULL, NULL);
}

/* Runs one SET; 0 or -1 with why. */
static int set_one(ice_catalog *c, const char *sql, const char *what, char *why,
                   size_t why_size) {
    PGresult *res = run0(c, sql);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok)
        fail(c, 0, what, res, why, why_size);
    PQclear(res);
    return ok ? 0 : -1;
}

/* Prepares a new session (the first one and every one a reset makes): no
 * statement waits longer than the lock timeout, and a swap is durable
 * when it returns, whatever the server's or the connection's default. 0
 * or -1 with why. */
static int session_setup(ice_catalog *c, char *why, size_t why_size) {
    char sql[96];
    snprintf(sql, sizeof sql, "SET lock_timeout TO %d", c->lock_timeout_ms);
    if (set_one(c, sql, "setting lock_timeout", why, why_size) != 0)
        return -1;
    snprintf(sql, sizeof sql, "SET statement_timeout TO %d",
             c->lock_timeout_ms);
    if (set_one(c, sql, "setting statement_timeout", why, why_size) != 0)
        return -1;
    if (!c->fsync)
        return 0;
    return set_one(c, "SET synchronous_commit TO on",
                   "setting synchronous_commit", why, why_size);
}

/* The connection, made again when it was lost: a new session, set up
 * again (a SET lives only as long as its session). 0 or -1 with why. */
static int connected(ice_catalog *c, char *why, size_t why_size) {
    if (!c->lost && PQstatus(conn_of(c)) == CONNECTION_OK)
        return 0;
    c->lost = 0;      /* what was in flight on the old one is abandoned */
    c->cancelled = 0; /* ... and its cancel is no part of what comes */
    PQreset(conn_of(c));
    if (PQstatus(conn_of(c)) != CONNECTION_OK)
        return fail(c, -1, "connecting", NULL, why, why_size);
    take_cancel(c);
    return session_setup(c, why, why_size);
}

static int pg_load(ice_catalog *c, char **loc, char *why, size_t why_size) {
    const char *what = "reading the table's row";
    if (connected(c, why, why_size) != 0)
        return -1;
    PGresult *res = run(c, ICE_CAT_LOAD[c->has_type], 3, NULL, NULL);
    int r;
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        r = fail(c, -1, what, res, why, why_size);
    else if (PQntuples(res) == 0)
        r = 1;
    else
        r = ice_catalog_row(
            c, PQgetisnull(res, 0, 0) ? NULL : PQgetvalue(res, 0, 0),
            PQgetisnull(res, 0, 1) ? NULL : PQgetvalue(res, 0, 1), loc, why,
            why_size);
    PQclear(res);
    return r;
}

/* A statement of a transaction that failed: -2 when the connection went
 * (the outcome of what was sent is unknown), else -1 (the server refused
 * it: nothing of the transaction stays). */
static int failed_in(ice_catalog *c) {
    return !c->lost && PQstatus(conn_of(c)) == CONNECTION_OK ? -1 : -2;
}

/* Registers the table: the namespace (when new) and the row in one
 * transaction, which fails on the row's primary key when another writer
 * registered it first. */
static int pg_insert(ice_catalog *c, const char *loc, char *why,
                     size_t why_size) {
    PGresult *res = run0(c, "BEGIN");
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok)
        fail(c, 0, "registering the table", res, why, why_size);
    PQclear(res);
    if (!ok)
        return -1;
    int r = 0;
    res = run(c, ICE_CAT_ADD_NAMESPACE, 2, NULL, NULL);
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        r = fail(c, failed_in(c), "registering the namespace", res, why,
                 why_size);
    PQclear(res);
    if (r == 0) {
        res = run(c, ICE_CAT_INSERT[c->has_type], 4, loc, NULL);
        if (PQresultStatus(res) != PGRES_COMMAND_OK)
            r = is_state(res, UNIQUE_VIOLATION)
                    ? 1
                    : fail(c, failed_in(c), "registering the table", res, why,
                           why_size);
        PQclear(res);
    }
    if (r != 0) {
        PQclear(run0(c, "ROLLBACK"));
        return r;
    }
    res = run0(c, "COMMIT");
    /* A COMMIT the server answered with an error rolled back; one whose
     * answer was lost may have committed. */
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
        r = fail(c, failed_in(c), "committing the table's registration", res,
                 why, why_size);
    PQclear(res);
    return r;
}

/* The session whose transaction holds the table's row locked (its id is
 * the row's xmax: a SELECT ... FOR UPDATE, or another writer's UPDATE not
 * committed yet), as pg_stat_activity shows it; none when the lock is
 * gone, or shared by several (xmax is then a multixact). Asked only after
 * a wait PostgreSQL says was on the row's tuple: a FOR KEY SHARE holder
 * is in xmax too but never blocks the swap. */
static const char HOLDER_SQL[] =
    "SELECT a.pid, coalesce(a.usename, '?'), "
    "coalesce(nullif(a.application_name, ''), '-'), "
    "CASE WHEN a.client_addr IS NOT NULL THEN host(a.client_addr) "
    "WHEN a.client_port = -1 THEN 'a local socket' ELSE 'unknown' END, "
    "coalesce(a.state, '?'), "
    "coalesce(extract(epoch FROM now() - a.xact_start)::bigint, 0) "
    "FROM iceberg_tables t JOIN pg_stat_activity a ON a.backend_xid = t.xmax "
    "WHERE t.catalog_name = $1 AND t.table_namespace = $2 "
    "AND t.table_name = $3 AND a.pid <> pg_backend_pid()";
/* The look-up's own wait: a detail of a refusal, never a second lock
 * timeout. */
#define HOLDER_WAIT_MS 500

/* "pid N, user U, application A, client C, STATE, S s in its
 * transaction" of the row lock's holder into out; "" when PostgreSQL does
 * not say (a failed look-up only loses the detail). */
static void lock_holder(ice_catalog *c, char *out, size_t size) {
    const char *vals[3] = {c->name, c->ns, c->table};
    const Oid types[3] = {TEXT_OID, TEXT_OID, TEXT_OID};
    PGresult *res = bounded_for(c, HOLDER_SQL, 3, types, vals, HOLDER_WAIT_MS);
    out[0] = '\0';
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
        snprintf(out, size,
                 "pid %s, user %s, application %s, client %s, %s, %s s in "
                 "its transaction",
                 PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
                 PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3),
                 PQgetvalue(res, 0, 4), PQgetvalue(res, 0, 5));
    PQclear(res);
}

/* A swap the server cancelled at the session's timeouts. Both are
 * catalog_lock_timeout_ms, and PostgreSQL then reports the statement
 * timeout (its timer started first) even when the wait was for the
 * row's lock: what was waited for, and who held it, is said here. The
 * holder is named only when the error's context names the tuple (a row
 * lock's wait); another wait (a lock on the whole table) names none. -1
 * (nothing changed) with why; 0 when it was no timeout (the caller
 * reports the server's message as it is). */
static int refused_wait(ice_catalog *c, const PGresult *res, char *why,
                        size_t why_size) {
    if (!is_state(res, QUERY_CANCELED) && !is_state(res, LOCK_NOT_AVAILABLE))
        return 0;
    const char *ctx = PQresultErrorField(res, PG_DIAG_CONTEXT);
    const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    if (!msg)
        msg = "cancelled";
    if (is_state(res, QUERY_CANCELED) && !strstr(msg, "timeout"))
        return 0; /* an administrator's cancel, not a bound */
    if (!(ctx && strstr(ctx, " tuple "))) {
        snprintf(why, why_size,
                 "%s: the commit's compare-and-swap waited "
                 "catalog_lock_timeout_ms (%d ms), not for the table's "
                 "catalog row (for a lock on the whole table, or else): "
                 "which session held it, PostgreSQL does not say: nothing "
                 "changed (PostgreSQL: %s)",
                 c->ident, c->lock_timeout_ms, msg);
        return -1;
    }
    char holder[1024];
    lock_holder(c, holder, sizeof holder);
    snprintf(why, why_size,
             "%s: the commit's compare-and-swap waited catalog_lock_timeout_ms "
             "(%d ms) for the lock on the table's catalog row, held by "
             "another session (%s): nothing changed (PostgreSQL: %s)",
             c->ident, c->lock_timeout_ms,
             holder[0] ? holder : "could not tell which", msg);
    return -1;
}

static int pg_swap(ice_catalog *c, const char *old, const char *new_loc,
                   char *why, size_t why_size) {
    if (connected(c, why, why_size) != 0)
        return -1; /* nothing was sent */
    if (!old)
        return pg_insert(c, new_loc, why, why_size);
    PGresult *res = run(c, ICE_CAT_SWAP, 5, new_loc, old);
    int r;
    if (PQresultStatus(res) == PGRES_COMMAND_OK)
        r = strcmp(PQcmdTuples(res), "1") == 0 ? 0 : 1;
    else if (failed_in(c) == -1 && !c->cancelled &&
             refused_wait(c, res, why, why_size) != 0)
        r = -1;
    else
        r = fail(c, failed_in(c), "the commit's compare-and-swap", res, why,
                 why_size);
    PQclear(res);
    return r;
}

static void pg_close(ice_catalog *c) {
    PQfreeCancel(c->cancel);
    c->cancel = NULL;
    PQfinish(conn_of(c));
    c->db = NULL;
}

/* The server's notices ("relation ... already exists, skipping") are not
 * the host's to print. */
static void quiet(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

static const ice_catalog_ops PG_OPS = {
    .load = pg_load, .swap = pg_swap, .close = pg_close};

/* One query's first cell is "t". 1, 0, or -1 with why. */
static int query_true(ice_catalog *c, const char *sql, const char *what,
                      char *why, size_t why_size) {
    PGresult *res = PQexec(conn_of(c), sql);
    int r = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1
                ? strcmp(PQgetvalue(res, 0, 0), "t") == 0
                : fail(c, -1, what, res, why, why_size);
    PQclear(res);
    return r;
}

/* Creates the tables when missing. Two writers creating them at once:
 * the loser's CREATE fails on the catalog's own unique index; it looks
 * again. 0 or -1 with why. */
static int create_tables(ice_catalog *c, char *why, size_t why_size) {
    for (int attempt = 0;; attempt++) {
        PGresult *res = PQexec(conn_of(c), ICE_CAT_CREATE_TABLES);
        int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
        int race =
            is_state(res, UNIQUE_VIOLATION) || is_state(res, DUPLICATE_TABLE);
        if (!ok && (!race || attempt > 0))
            fail(c, 0, "creating the catalog's tables", res, why, why_size);
        PQclear(res);
        if (ok)
            return 0;
        if (!race || attempt > 0)
            return -1;
    }
}

/* Connects by CONNINFO (a URI or key=value text) with the bounds of the
 * file's head as defaults: they come before the expanded dbname, so what
 * CONNINFO says itself wins. PQreset reuses them. */
static PGconn *connect_bounded(const char *conninfo, int lock_timeout_ms) {
    char user_timeout[32];
    snprintf(user_timeout, sizeof user_timeout, "%d", lock_timeout_ms);
    const char *const keys[] = {"connect_timeout",  "keepalives",
                                "keepalives_idle",  "keepalives_interval",
                                "keepalives_count", "tcp_user_timeout",
                                "dbname",           NULL};
    const char *const vals[] = {ICE_CATALOG_CONNECT_TIMEOUT_S,
                                "1",
                                "5",
                                "2",
                                "3",
                                user_timeout,
                                conninfo,
                                NULL};
    return PQconnectdbParams(keys, vals, 1);
}

int ice_catalog_pg_open(ice_catalog *c, const char *conninfo, int create,
                        int fsync, char *why, size_t why_size) {
    c->ops = &PG_OPS;
    c->db = connect_bounded(conninfo, c->lock_timeout_ms);
    if (!c->db) {
        snprintf(why, why_size, "%s: out of memory (connection)", c->ident);
        return -1;
    }
    if (PQstatus(conn_of(c)) != CONNECTION_OK)
        return fail(c, -1, "connecting", NULL, why, why_size);
    take_cancel(c);
    PQsetNoticeProcessor(conn_of(c), quiet, NULL);
    c->fsync = fsync;
    if (session_setup(c, why, why_size) != 0 ||
        (create && create_tables(c, why, why_size) != 0))
        return -1;
    int has = query_true(c, "SELECT to_regclass('iceberg_tables') IS NOT NULL",
                         "reading the schema", why, why_size);
    if (has < 0)
        return -1;
    if (has == 0) {
        c->empty = 1; /* no catalog tables yet (and !create) */
        return 0;
    }
    /* A catalog made by an older JdbcCatalog has no iceberg_type. */
    has = query_true(c,
                     "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE "
                     "attrelid = to_regclass('iceberg_tables') AND attname = "
                     "'iceberg_type' AND NOT attisdropped)",
                     "reading the schema", why, why_size);
    if (has < 0)
        return -1;
    c->has_type = has;
    return 0;
}
