/* Markers: one row per (connector, topic, partition) in tidemark_markers.
 * claim() is the only place an epoch rises; read_markers() only reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_sink.h"

#define MARKER_COLS                                                            \
    "next_offset, epoch, last_batch_id, \"rows\", dead_letters, filtered, "    \
    "duplicates, last_offset, last_timestamp_ms, last_record_hash"

static void set_absent(tm_marker *m) {
    m->next_offset = TM_NO_OFFSET;
    m->epoch = TM_NO_EPOCH;
    m->last_batch_id[0] = '\0';
    m->rows = m->dead_letters = m->filtered = m->duplicates = 0;
    if (TM_MARKER_HAS_LINEAGE(m)) {
        m->last_offset = TM_NO_OFFSET;
        m->last_timestamp_ms = -1;
        m->last_record_hash[0] = '\0';
    }
}

static void fill(tm_marker *m, PGresult *res) {
    m->next_offset = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    m->epoch = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
    snprintf(m->last_batch_id, TM_BATCH_ID_MAX, "%s", PQgetvalue(res, 0, 2));
    m->rows = strtoull(PQgetvalue(res, 0, 3), NULL, 10);
    m->dead_letters = strtoull(PQgetvalue(res, 0, 4), NULL, 10);
    m->filtered = strtoull(PQgetvalue(res, 0, 5), NULL, 10);
    m->duplicates = strtoull(PQgetvalue(res, 0, 6), NULL, 10);
    if (TM_MARKER_HAS_LINEAGE(m)) {
        m->last_offset = strtoll(PQgetvalue(res, 0, 7), NULL, 10);
        m->last_timestamp_ms = strtoll(PQgetvalue(res, 0, 8), NULL, 10);
        snprintf(m->last_record_hash, TM_RECORD_HASH_MAX, "%s",
                 PQgetvalue(res, 0, 9));
    }
}

int pg_marker_fill(tm_marker *m, PGresult *res) {
    if (PQntuples(res) == 1) {
        fill(m, res);
        return 1;
    }
    set_absent(m);
    return 0;
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

const char *pg_marker_select_sql(pg_sink *s, pg_buf *b, int for_update) {
    return sql_of(s, b, "SELECT " MARKER_COLS " FROM ",
                  for_update ? " WHERE connector = $1 AND topic = $2 AND "
                               "\"partition\" = $3::int FOR UPDATE"
                             : " WHERE connector = $1 AND topic = $2 AND "
                               "\"partition\" = $3::int");
}

void pg_marker_params_of(pg_sink *s, const tm_marker *m, pg_marker_params *p) {
    snprintf(p->part, sizeof p->part, "%d", (int)m->partition);
    snprintf(p->next, sizeof p->next, "%lld", (long long)m->next_offset);
    snprintf(p->epoch, sizeof p->epoch, "%lld", (long long)m->epoch);
    snprintf(p->rows, sizeof p->rows, "%llu", (unsigned long long)m->rows);
    snprintf(p->dls, sizeof p->dls, "%llu",
             (unsigned long long)m->dead_letters);
    snprintf(p->filt, sizeof p->filt, "%llu", (unsigned long long)m->filtered);
    snprintf(p->dups, sizeof p->dups, "%llu",
             (unsigned long long)m->duplicates);
    /* m is the sink's own marker (sizeof tm_marker): it has the lineage */
    snprintf(p->last, sizeof p->last, "%lld", (long long)m->last_offset);
    snprintf(p->last_ts, sizeof p->last_ts, "%lld",
             (long long)m->last_timestamp_ms);
    const char *v[PG_MARKER_NPARAMS] = {s->config->connector,
                                        m->topic,
                                        p->part,
                                        p->next,
                                        p->epoch,
                                        m->last_batch_id,
                                        p->rows,
                                        p->dls,
                                        p->filt,
                                        p->dups,
                                        p->last,
                                        p->last_ts,
                                        m->last_record_hash};
    memcpy(p->v, v, sizeof v);
}

/* The UPDATE goes out in one pipeline with the COMMIT, so a marker row
 * that is not there must fail on the server, where it stops the COMMIT:
 * the client would learn of it too late. The row is locked FOR UPDATE by
 * this transaction, so this is a guard, not a path: the CASE yields text
 * that is no boolean exactly when the UPDATE matched no single row (the
 * cast is of a non-constant, so it runs at execution, never at planning). */
static const char *marker_update_sql(pg_sink *s, pg_buf *b) {
    return sql_of(
        s, b, "WITH u AS (UPDATE ",
        " SET next_offset = $4::bigint, epoch = $5::bigint, last_batch_id = "
        "$6, \"rows\" = $7::bigint, dead_letters = $8::bigint, filtered = "
        "$9::bigint, duplicates = $10::bigint, last_offset = $11::bigint, "
        "last_timestamp_ms = $12::bigint, last_record_hash = $13 WHERE "
        "connector = $1 AND topic "
        "= $2 AND \"partition\" = $3::int RETURNING 1) SELECT (CASE count(*) "
        "WHEN 1 THEN 'true' ELSE 'tidemark: no marker row to update for ' || "
        "$2 || '[' || $3 || ']' END)::boolean FROM u");
}

tm_status pg_marker_prepare(pg_sink *s, tm_error *err) {
    if (s->prepared)
        return TM_OK;
    if (!s->conn) {
        s->host->set_error(err, "preparing the marker statements: no "
                                "connection");
        return TM_RETRY;
    }
    pg_buf b = {0};
    tm_status r = pg_prepare(s, PG_STMT_LOCK, pg_marker_select_sql(s, &b, 1), 3,
                             "preparing the marker lock", err);
    if (r == TM_OK)
        r = pg_prepare(s, PG_STMT_UPDATE, marker_update_sql(s, &b),
                       PG_MARKER_NPARAMS, "preparing the marker update", err);
    pg_buf_free(&b);
    s->prepared = r == TM_OK;
    /* Half prepared, a second try would fail on the name that exists: the
     * next call starts from a new session instead. */
    if (r != TM_OK)
        pg_disconnect(s);
    return r;
}

tm_status pg_marker_get(pg_sink *s, const char *topic, int32_t partition,
                        tm_marker *m, tm_error *err) {
    char part[16];
    snprintf(part, sizeof part, "%d", (int)partition);
    const char *v[3] = {s->config->connector, topic, part};
    pg_buf b = {0};
    const char *sql = pg_marker_select_sql(s, &b, 0);
    tm_status r = TM_FATAL;
    PGresult *res = sql ? pg_query(s, sql, 3, v, NULL, NULL, 1,
                                   "reading the markers", &r, err)
                        : NULL;
    if (!sql)
        s->host->set_error(err, "out of memory");
    pg_buf_free(&b);
    if (!res)
        return r;
    pg_marker_fill(m, res);
    PQclear(res);
    return TM_OK;
}

/* Creates the marker at m->next_offset if missing, raises its epoch (with
 * TM_CLAIM_RESET also sets next_offset and forgets the lineage: no record
 * is known applied there) and reads it back. */
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
        "THEN $4::bigint ELSE next_offset END, last_offset = CASE WHEN "
        "$5::boolean THEN -1 ELSE last_offset END, last_record_hash = CASE "
        "WHEN $5::boolean THEN '' ELSE last_record_hash END WHERE connector = "
        "$1 "
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
    if (r == TM_OK)
        r = pg_owner_register(s, err);
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
    /* The business keys held in memory, read before the first commit (in
     * a snapshot of their own: no lock held while loading). */
    if (r == TM_OK)
        r = pg_keyset_claim(s, err);
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
        r = pg_marker_get(s, m->topic, m->partition, m, err);
    }
    if (r == TM_OK)
        r = pg_exec(s, "COMMIT", "read_markers: COMMIT", err);
    if (r != TM_OK)
        pg_rollback(s);
    return r == TM_OK || r == TM_RETRY ? r : TM_FATAL;
}
