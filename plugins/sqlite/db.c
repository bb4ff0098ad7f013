/* The connection: opening it with the PRAGMAs the claims rest on, the busy
 * and progress handlers that let a call give up (deadline, interrupt()),
 * the mapping of SQLite errors to what the host does next, and the reopen
 * after a COMMIT whose outcome is unknown. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sqlite_sink.h"

int64_t sq_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t sq_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int past_deadline(const sq_sink *s) {
    return s->deadline_ms > 0 && sq_now_ms() > s->deadline_ms;
}

int sq_should_stop(sq_sink *s) {
    return atomic_load(&s->interrupted) || past_deadline(s);
}

/* Called every few thousand VM steps: non-zero makes the statement fail
 * with SQLITE_INTERRUPT, which the caller maps to TM_RETRY. */
static int on_progress(void *arg) {
    sq_sink *s = arg;
    return atomic_load(&s->interrupted) || past_deadline(s);
}

/* Our own busy handler instead of sqlite3_busy_timeout(): the same bounded
 * wait for a lock, but it also gives up on interrupt() and the deadline. */
static int on_busy(void *arg, int count) {
    sq_sink *s = arg;
    int64_t now = sq_now_ms();
    if (count == 0 && !s->busy_pinned)
        s->busy_started_ms = now;
    if (atomic_load(&s->interrupted) || past_deadline(s) ||
        now - s->busy_started_ms >= s->set.busy_timeout_ms)
        return 0;
    /* 1 ms at first (contention is usually a short commit), then 10 ms. */
    struct timespec ts = {0, count < 10 ? 1000000L : 10000000L};
    nanosleep(&ts, NULL);
    return 1;
}

void sq_call_begin(sq_sink *s, int64_t deadline_ms) {
    atomic_store(&s->interrupted, 0);
    s->deadline_ms = deadline_ms > 0 ? deadline_ms : 0;
}

/* The error classes, the one table of them (docs/sinks/sqlite.md, "Error
 * classes"); by primary result code. Not listed: TM_FATAL. */
static const struct {
    int code;
    tm_status status;
} CLASSES[] = {
    /* another writer, or interrupt() / the deadline: try again */
    {SQLITE_BUSY, TM_RETRY},
    {SQLITE_LOCKED, TM_RETRY},
    {SQLITE_INTERRUPT, TM_RETRY},
    /* the store, not the data: a disk that fills, fails, is remounted
     * read-only or is not reachable yet comes back */
    {SQLITE_FULL, TM_RETRY},
    {SQLITE_IOERR, TM_RETRY},
    {SQLITE_READONLY, TM_RETRY},
    {SQLITE_CANTOPEN, TM_RETRY},
    {SQLITE_NOMEM, TM_RETRY},
    /* the file itself: retrying never repairs it */
    {SQLITE_NOTADB, TM_FATAL},
    {SQLITE_CORRUPT, TM_FATAL},
};

tm_status sq_status_of(int rc) {
    for (size_t i = 0; i < sizeof CLASSES / sizeof CLASSES[0]; i++)
        if (CLASSES[i].code == (rc & 0xff))
            return CLASSES[i].status;
    return TM_FATAL;
}

int sq_refused_content(int rc) {
    return (rc & 0xff) == SQLITE_CONSTRAINT || (rc & 0xff) == SQLITE_MISMATCH;
}

tm_status sq_fail(sq_sink *s, int rc, const char *step, tm_error *err) {
    int prim = rc & 0xff;
    const char *msg = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    if (prim == SQLITE_INTERRUPT) {
        s->host->set_error(err, "%s: given up (%s)", step,
                           atomic_load(&s->interrupted)
                               ? "interrupted"
                               : "past the batch deadline");
        return TM_RETRY;
    }
    s->host->set_error(err, "%s on %s: %s", step, s->set.path, msg);
    return sq_status_of(rc);
}

int sq_exec(sq_sink *s, const char *sql) {
    return sqlite3_exec(s->db, sql, NULL, NULL, NULL);
}

void sq_rollback(sq_sink *s) {
    if (s->db && !sqlite3_get_autocommit(s->db) &&
        sq_exec(s, "ROLLBACK") != SQLITE_OK)
        s->host->log(s->config->host_ctx, TM_LOG_WARN,
                     "ROLLBACK failed: %s (the connection is reopened on the "
                     "next error)",
                     sqlite3_errmsg(s->db));
}

void sq_reuse(sqlite3_stmt *st) {
    sqlite3_reset(st); /* its result repeats the last step's: seen there */
    sqlite3_clear_bindings(st);
}

/* One PRAGMA whose single result row must read WANT (case-insensitive).
 * SQLITE_BUSY is waited out here, with the busy handler's bounds: SQLite
 * does not call the handler for the lock upgrade a journal-mode switch
 * needs while another connection switches the same new file (it would
 * risk a deadlock), so two connectors opening one file at once would
 * otherwise see RETRY and wait for the host's backoff. */
static tm_status pragma_expect(sq_sink *s, const char *sql, const char *want,
                               const char *key, tm_error *err) {
    sqlite3_stmt *st = NULL;
    int rc;
    /* One wait across the attempts: the handler SQLite calls inside each
     * step starts no new one (else each attempt could wait it all). */
    s->busy_started_ms = sq_now_ms();
    s->busy_pinned = 1;
    for (int count = 1;; count++) {
        rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(st);
        if ((rc & 0xff) != SQLITE_BUSY || !on_busy(s, count))
            break;
        sqlite3_finalize(st);
        st = NULL;
    }
    s->busy_pinned = 0;
    if (rc != SQLITE_ROW) {
        /* Not a database, corrupt: FATAL; read-only, I/O, busy: RETRY. */
        tm_status r = sq_fail(s, rc, sql, err);
        sqlite3_finalize(st);
        return r;
    }
    const char *got = (const char *)sqlite3_column_text(st, 0);
    int ok = got && strcasecmp(got, want) == 0;
    if (!ok)
        s->host->set_error(err,
                           "setting \"%s\": %s gave \"%s\", expected \"%s\" "
                           "(an in-memory or read-only database cannot keep "
                           "the sink's claims)",
                           key, sql, got ? got : "(null)", want);
    sqlite3_finalize(st);
    return ok ? TM_OK : TM_INVALID;
}

tm_status sq_db_open(sq_sink *s, int readonly, tm_error *err) {
    int flags = readonly ? SQLITE_OPEN_READONLY
                         : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    /* NOMUTEX: calls on one instance are serialised by the host; interrupt
     * comes through sqlite3_interrupt, which needs no mutex. */
    int rc =
        sqlite3_open_v2(s->set.path, &s->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        s->host->set_error(err, "setting \"path\": cannot open %s: %s",
                           s->set.path,
                           s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        sqlite3_close(s->db); /* a handle comes back even on failure */
        s->db = NULL;
        return sq_status_of(rc);
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_handler(s->db, on_busy, s);
    sqlite3_progress_handler(s->db, 4096, on_progress, s);
    if (readonly)
        return TM_OK;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", s->set.synchronous);
    tm_status r =
        pragma_expect(s, "PRAGMA journal_mode=WAL", "wal", "path", err);
    if (r == TM_OK && (rc = sq_exec(s, sql)) != SQLITE_OK)
        r = sq_fail(s, rc, sql, err);
    /* sqlite3_open_v2 opened the file (and the WAL check refused an
     * in-memory one): its identity, checked before each commit. */
    if (r == TM_OK)
        r = sq_fileid_record(s, err);
    if (r != TM_OK) {
        sqlite3_close(s->db);
        s->db = NULL;
    }
    return r;
}

int sq_column_limit(void) {
    sqlite3 *db = NULL;
    int limit = -1;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, NULL) ==
        SQLITE_OK) {
        /* every column is a bound parameter of the INSERT too */
        int cols = sqlite3_limit(db, SQLITE_LIMIT_COLUMN, -1);
        int vars = sqlite3_limit(db, SQLITE_LIMIT_VARIABLE_NUMBER, -1);
        limit = cols < vars ? cols : vars;
    }
    sqlite3_close(db);
    return limit;
}

void sq_db_close(sq_sink *s) {
    for (int i = 0; i < SQ_NSTMTS; i++) {
        sqlite3_finalize(s->stmt[i]);
        s->stmt[i] = NULL;
    }
    if (!s->db)
        return;
    /* interrupt() may be calling sqlite3_interrupt on this handle: wait for
     * it (it holds the flag only for that one call). */
    while (atomic_flag_test_and_set(&s->db_busy))
        ;
    sqlite3 *db = s->db;
    s->db = NULL;
    atomic_flag_clear(&s->db_busy);
    if (sqlite3_close(db) != SQLITE_OK) {
        s->host->log(s->config->host_ctx, TM_LOG_WARN,
                     "sqlite3_close: %s (closed when its last statement is)",
                     sqlite3_errmsg(db));
        sqlite3_close_v2(db);
    }
}

tm_status sq_db_ready(sq_sink *s, tm_error *err) {
    if (s->db)
        return TM_OK;
    tm_status r = sq_db_open(s, 0, err);
    if (r == TM_OK && (r = sq_prepare_all(s, err)) != TM_OK)
        sq_db_close(s);
    /* A file that is not (or no longer) a database stays FATAL: RETRY
     * would try it for ever. A statement the table no longer fits
     * (INVALID at open) cannot be fixed by trying again either. */
    return r == TM_INVALID ? TM_FATAL : r;
}

tm_status sq_db_reopen(sq_sink *s, tm_error *err) {
    sq_db_close(s);
    return sq_db_ready(s, err);
}
