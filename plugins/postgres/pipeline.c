/* Several statements in one round trip: libpq's pipeline mode (libpq 14+).
 * A commit's fixed work (BEGIN with the marker locks, the marker updates
 * with COMMIT) would otherwise cost a round trip per statement, which is
 * what dominates small batches. Statements go out as the extended protocol
 * (parameters, never spliced values) with one Sync at the end; the server
 * skips everything after the first error up to that Sync, so a statement
 * that fails stops the ones queued behind it (a COMMIT among them). A
 * Sync in the middle (pg_pipe_sync) ends that skipping, but not the
 * transaction: after an error there, a COMMIT answers ROLLBACK. */
#include <stdio.h>
#include <string.h>

#include "pg_sink.h"

#ifndef LIBPQ_HAS_PIPELINING
#error "the PostgreSQL sink needs libpq 14 or newer (pipeline mode)"
#endif

/* The connection cannot be trusted to be idle and out of pipeline mode:
 * drop it (the server rolls back what the session had open). */
static tm_status abandon(pg_sink *s, const char *step, tm_error *err) {
    char msg[400];
    snprintf(msg, sizeof msg, "%s",
             s->conn ? PQerrorMessage(s->conn) : "no connection");
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    s->host->set_error(err, "%s on %s: %s", step,
                       s->q_table ? s->q_table : s->set.table,
                       n ? msg : "the session is not idle");
    pg_disconnect(s);
    return TM_RETRY;
}

tm_status pg_pipe_begin(pg_sink *s, const char *step, tm_error *err) {
    if (!s->conn) {
        s->host->set_error(err, "%s: no connection", step);
        return TM_RETRY;
    }
    tm_status r = pg_if_interrupted(s, step, err);
    if (r != TM_OK)
        return r;
    if (PQenterPipelineMode(s->conn) != 1)
        return abandon(s, step, err);
    return TM_OK;
}

tm_status pg_pipe_send(pg_sink *s, const pg_stmt *st, tm_error *err) {
    int sent = st->name
                   ? PQsendQueryPrepared(s->conn, st->name, st->n, st->vals,
                                         st->lens, st->formats, 0)
                   : PQsendQueryParams(s->conn, st->sql, st->n, NULL, st->vals,
                                       st->lens, st->formats, 0);
    if (sent != 1)
        return pg_fail(s, NULL, st->step, err);
    return TM_OK;
}

tm_status pg_pipe_sync(pg_sink *s, const char *step, tm_error *err) {
    if (PQpipelineSync(s->conn) != 1) /* sends it: flushes */
        return pg_fail(s, NULL, step, err);
    return TM_OK;
}

tm_status pg_pipe_abort(pg_sink *s, tm_status r) {
    pg_disconnect(s);
    return r == TM_FATAL ? TM_FATAL : TM_RETRY;
}

static int wanted(const pg_stmt *st, ExecStatusType t) {
    return t == (st->want_tuples ? PGRES_TUPLES_OK : PGRES_COMMAND_OK);
}

tm_status pg_pipe_end(pg_sink *s, pg_stmt *st, size_t n, tm_error *err) {
    if (PQpipelineSync(s->conn) != 1)
        return pg_fail(s, NULL, "sending a pipeline", err);
    tm_status r = TM_OK;
    PGresult *first_error = NULL;
    size_t failed = 0;
    for (size_t i = 0; i < n; i++)
        st[i].res = NULL;
    for (size_t i = 0; i < n; i++) {
        PGresult *res = PQgetResult(s->conn);
        ExecStatusType t = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (res && wanted(&st[i], t)) {
            st[i].res = res;
        } else if (t == PGRES_PIPELINE_ABORTED) {
            PQclear(res); /* skipped by the server after an earlier error */
        } else if (!first_error && res) {
            first_error = res;
            failed = i;
        } else {
            PQclear(res);
            if (!first_error) { /* no result at all: the link is gone */
                r = pg_fail(s, NULL, st[i].step, err);
                break;
            }
        }
        if (PQstatus(s->conn) != CONNECTION_OK)
            break;
        /* Each statement's results end with a NULL. */
        while ((res = PQgetResult(s->conn)) != NULL) {
            PQclear(res);
            if (PQstatus(s->conn) != CONNECTION_OK)
                break;
        }
        if (st[i].sync_after && PQstatus(s->conn) == CONNECTION_OK) {
            res = PQgetResult(s->conn); /* pg_pipe_sync's */
            int synced = res && PQresultStatus(res) == PGRES_PIPELINE_SYNC;
            PQclear(res);
            if (!synced) {
                if (!first_error)
                    r = pg_fail(s, NULL, st[i].step, err);
                break;
            }
        }
    }
    if (r == TM_OK && first_error)
        r = pg_fail(s, first_error, st[failed].step, err);
    else if (r == TM_OK && PQstatus(s->conn) != CONNECTION_OK)
        r = pg_fail(s, NULL, st[n ? n - 1 : 0].step, err);
    if (r != TM_OK)
        for (size_t i = 0; i < n; i++) {
            PQclear(st[i].res);
            st[i].res = NULL;
        }
    if (!s->conn) /* pg_fail dropped a lost connection */
        return r;
    PGresult *sync = PQgetResult(s->conn);
    int synced = sync && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    PQclear(sync);
    if (!synced || PQexitPipelineMode(s->conn) != 1) {
        char msg[TM_ERROR_MAX];
        snprintf(msg, sizeof msg, "%s", err->message);
        tm_status a = abandon(s, "ending a pipeline", err);
        if (r != TM_OK) /* the first failure is the one that tells why */
            s->host->set_error(err, "%s", msg);
        r = r == TM_OK ? a : TM_RETRY;
        for (size_t i = 0; i < n; i++) {
            PQclear(st[i].res);
            st[i].res = NULL;
        }
    }
    return r;
}
