/* Markers: one row per (connector, topic, partition) in tidemark_markers.
 * claim() is the only place an epoch rises; read_markers() only reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_sink.h"

#define MARKER_COLS                                                            \
    "next_offset, epoch, last_batch_id, \"rows\", dead_letters, filtered, "    \
    "duplicates"

static void set_absent(tm_marker *m) {
    m->next_offset = TM_NO_OFFSET;
    m->epoch = TM_NO_EPOCH;
    m->last_batch_id[0] = '\0';
    m->rows = m->dead_letters = m->filtered = m->duplicates = 0;
}

static void fill(tm_marker *m, PGresult *res) {
    m->next_offset = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    m->epoch = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    snprintf(m->last_batch_id, TM_BATCH_ID_MAX, "%s", PQgetvalue(res, 0, 2));
    m->rows = strtoull(PQgetvalue(res, 0, 3), NULL, 10);
    m->dead_letters = strtoull(PQgetvalue(res, 0, 4), NULL, 10);
    m->filtered = strtoull(PQgetvalue(res, 0, 5), NULL, 10);
    m->duplicates = strtoull(PQgetvalue(res, 0, 6), NULL, 10);
}

/* SQL: PREFIX markers-table SUFFIX, in buf. */
static const char *sql_of(pg_sink *s, pg_buf *b, const char *prefix,
                          const char *suffix) {
    b->len = 0;
    pg_buf_add(b, prefix);
    pg_buf_add(b, s->q_markers);
    pg_buf_add(b, suffix);
    return b->oom ? NULL : b->p;
}

tm_status pg_marker_get(pg_sink *s, const char *topic, int32_t partition,
                        int for_update, tm_marker *m, tm_error *err) {
    char part[16];
    snprintf(part, sizeof part, "%d", (int)partition);
    const char *v[3] = {s->config->connector, topic, part};
    pg_buf b = {0};
    const char *sql =
        sql_of(s, &b, "SELECT " MARKER_COLS " FROM ",
               for_update ? " WHERE connector = $1 AND topic = $2 AND "
                            "\"partition\" = $3::int FOR UPDATE"
                          : " WHERE connector = $1 AND topic = $2 AND "
                            "\"partition\" = $3::int");
    tm_status r = TM_FATAL;
    PGresult *res = sql ? pg_query(s, sql, 3, v, NULL, NULL, 1,
                                   for_update ? "locking the markers"
                                              : "reading the markers",
                                   &r, err)
                        : NULL;
    if (!sql)
        s->host->set_error(err, "out of memory");
    pg_buf_free(&b);
    if (!res)
        return r;
    if (PQntuples(res) == 1)
        fill(m, res);
    else
        set_absent(m);
    PQclear(res);
    return TM_OK;
}

tm_status pg_marker_put(pg_sink *s, const tm_marker *m, tm_error *err) {
    char part[16], next[32], epoch[32], rows[32], dls[32], filt[32], dups[32];
    snprintf(part, sizeof part, "%d", (int)m->partition);
    snprintf(next, sizeof next, "%lld", (long long)m->next_offset);
    snprintf(epoch, sizeof epoch, "%lld", (long long)m->epoch);
    snprintf(rows, sizeof rows, "%llu", (unsigned long long)m->rows);
    snprintf(dls, sizeof dls, "%llu", (unsigned long long)m->dead_letters);
    snprintf(filt, sizeof filt, "%llu", (unsigned long long)m->filtered);
    snprintf(dups, sizeof dups, "%llu", (unsigned long long)m->duplicates);
    const char *v[10] = {s->config->connector, m->topic, part, next, epoch,
                         m->last_batch_id,     rows,     dls,  filt, dups};
    pg_buf b = {0};
    const char *sql = sql_of(
        s, &b, "UPDATE ",
        " SET next_offset = $4::bigint, epoch = $5::bigint, last_batch_id = "
        "$6, \"rows\" = $7::bigint, dead_letters = $8::bigint, filtered = "
        "$9::bigint, duplicates = $10::bigint WHERE connector = $1 AND topic "
        "= $2 AND \"partition\" = $3::int");
    tm_status r = TM_FATAL;
    PGresult *res = sql ? pg_query(s, sql, 10, v, NULL, NULL, 0,
                                   "updating the markers", &r, err)
                        : NULL;
    if (!sql)
        s->host->set_error(err, "out of memory");
    pg_buf_free(&b);
    if (!res)
        return r;
    int one = strcmp(PQcmdTuples(res), "1") == 0;
    PQclear(res);
    if (!one) {
        s->host->set_error(err,
                           "%s[%d]: a marker checked in this transaction has "
                           "no row to update",
                           m->topic, (int)m->partition);
        return TM_FATAL;
    }
    return TM_OK;
}

/* Creates the marker at m->next_offset if missing, raises its epoch (with
 * TM_CLAIM_RESET also sets next_offset) and reads it back. */
static tm_status claim_one(pg_sink *s, pg_buf *b, tm_marker *m, uint32_t flags,
                           tm_error *err) {
    char part[16], next[32];
    snprintf(part, sizeof part, "%d", (int)m->partition);
    snprintf(next, sizeof next, "%lld", (long long)m->next_offset);
    const char *v[5] = {s->config->connector, m->topic, part, next,
                        (flags & TM_CLAIM_RESET) ? "t" : "f"};
    tm_status r = TM_FATAL;
    const char *sql = sql_of(s, b, "INSERT INTO ",
                             " (connector, topic, \"partition\", next_offset, "
                             "epoch) VALUES ($1, $2, $3::int, $4::bigint, 0) "
                             "ON CONFLICT DO NOTHING");
    PGresult *res = sql ? pg_query(s, sql, 4, v, NULL, NULL, 0,
                                   "claim: creating the markers", &r, err)
                        : NULL;
    if (!res)
        return sql ? r : TM_FATAL;
    PQclear(res);
    sql = sql_of(
        s, b, "UPDATE ",
        " SET epoch = epoch + 1, next_offset = CASE WHEN $5::boolean "
        "THEN $4::bigint ELSE next_offset END WHERE connector = $1 "
        "AND topic = $2 AND \"partition\" = $3::int RETURNING " MARKER_COLS);
    res = sql ? pg_query(s, sql, 5, v, NULL, NULL, 1,
                         "claim: raising the epoch", &r, err)
              : NULL;
    if (!res)
        return sql ? r : TM_FATAL;
    if (PQntuples(res) != 1) {
        PQclear(res);
        s->host->set_error(err, "claim: %s[%d]: no marker row after insert",
                           m->topic, (int)m->partition);
        return TM_FATAL;
    }
    fill(m, res);
    PQclear(res);
    return TM_OK;
}

tm_status pg_claim(void *sink, tm_marker *markers, size_t n, uint32_t flags,
                   tm_error *err) {
    pg_sink *s = sink;
    tm_status r = pg_ready(s, err);
    if (r != TM_OK)
        return r;
    pg_call_begin(s, 0);
    pg_buf b = {0};
    r = pg_exec(s, "BEGIN", "claim: BEGIN", err);
    for (size_t i = 0; r == TM_OK && i < n; i++)
        r = claim_one(s, &b, TM_ELEM(tm_marker, markers, i), flags, err);
    pg_buf_free(&b);
    if (r == TM_OK) {
        /* Outcome unknown on a lost COMMIT: the host claims again, which
         * raises the epoch once more; harmless (an epoch only grows). */
        r = pg_exec(s, "COMMIT", "claim: COMMIT", err);
        if (r != TM_OK)
            r = TM_RETRY;
    }
    if (r != TM_OK) {
        if (b.oom)
            s->host->set_error(err, "claim: out of memory");
        pg_rollback(s);
    }
    return r == TM_FATAL || r == TM_RETRY || r == TM_OK ? r : TM_FATAL;
}

tm_status pg_read_markers(void *sink, tm_marker *markers, size_t n,
                          tm_error *err) {
    pg_sink *s = sink;
    tm_status r = pg_ready(s, err);
    if (r != TM_OK)
        return r;
    pg_call_begin(s, 0);
    /* Every marker from the same snapshot; read-only, so it never waits for
     * a writer's row lock and never raises an epoch. */
    r = pg_exec(s, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
                "read_markers: BEGIN", err);
    for (size_t i = 0; r == TM_OK && i < n; i++) {
        tm_marker *m = TM_ELEM(tm_marker, markers, i);
        r = pg_marker_get(s, m->topic, m->partition, 0, m, err);
    }
    if (r == TM_OK)
        r = pg_exec(s, "COMMIT", "read_markers: COMMIT", err);
    if (r != TM_OK)
        pg_rollback(s);
    return r == TM_OK || r == TM_RETRY ? r : TM_FATAL;
}
