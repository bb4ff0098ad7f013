/* Markers: one row per (connector, topic, partition) in tidemark_markers.
 * claim() is the only place an epoch rises; read_markers() only reads. */
#include <stdio.h>
#include <string.h>

#include "sqlite_sink.h"

/* Sets everything but topic, partition and struct_size (the caller's). */
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

static int bind_key(sq_sink *s, sqlite3_stmt *st, const char *topic,
                    int32_t partition) {
    int rc = sqlite3_bind_text(st, 1, s->config->connector, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, topic, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(st, 3, partition);
    return rc;
}

int sq_marker_get(sq_sink *s, const char *topic, int32_t partition,
                  tm_marker *m) {
    sqlite3_stmt *st = s->stmt[SQ_MK_GET];
    int rc = bind_key(s, st, topic, partition);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(st, 2);
        m->next_offset = sqlite3_column_int64(st, 0);
        m->epoch = sqlite3_column_int64(st, 1);
        snprintf(m->last_batch_id, TM_BATCH_ID_MAX, "%s", id ? id : "");
        m->rows = (uint64_t)sqlite3_column_int64(st, 3);
        m->dead_letters = (uint64_t)sqlite3_column_int64(st, 4);
        m->filtered = (uint64_t)sqlite3_column_int64(st, 5);
        m->duplicates = (uint64_t)sqlite3_column_int64(st, 6);
        if (TM_MARKER_HAS_LINEAGE(m)) {
            const char *h = (const char *)sqlite3_column_text(st, 9);
            m->last_offset = sqlite3_column_int64(st, 7);
            m->last_timestamp_ms = sqlite3_column_int64(st, 8);
            snprintf(m->last_record_hash, TM_RECORD_HASH_MAX, "%s", h ? h : "");
        }
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        set_absent(m);
        rc = SQLITE_OK;
    }
    sq_reuse(st);
    return rc;
}

int sq_marker_put(sq_sink *s, const tm_marker *m) {
    sqlite3_stmt *st = s->stmt[SQ_MK_UPD];
    int rc = bind_key(s, st, m->topic, m->partition);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 4, m->next_offset);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 5, m->epoch);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 6, m->last_batch_id, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 7, (int64_t)m->rows);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 8, (int64_t)m->dead_letters);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 9, (int64_t)m->filtered);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 10, (int64_t)m->duplicates);
    /* m is the sink's own marker (sizeof tm_marker): it has the lineage */
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 11, m->last_offset);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 12, m->last_timestamp_ms);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 13, m->last_record_hash, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        rc = sqlite3_changes(s->db) == 1 ? SQLITE_OK : SQLITE_NOTFOUND;
    sq_reuse(st);
    return rc;
}

/* Raises the epoch of one marker, creating it at m->next_offset. */
static int claim_one(sq_sink *s, tm_marker *m, uint32_t flags) {
    sqlite3_stmt *st = s->stmt[SQ_MK_CLAIM];
    int rc = bind_key(s, st, m->topic, m->partition);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 4, m->next_offset);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(st, 5, (flags & TM_CLAIM_RESET) != 0);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sq_reuse(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

tm_status sq_claim(void *sink, tm_marker *markers, size_t n, uint32_t flags,
                   tm_error *err) {
    sq_sink *s = sink;
    tm_status r = sq_db_ready(s, err);
    if (r != TM_OK)
        return r;
    sq_call_begin(s, 0);
    int dedup = (s->config->flags & TM_CONFIG_DEDUP) != 0;
    if (dedup && !s->set.keys_rows)
        sq_keys_preload(s); /* outside the write lock; its failure: below */
    /* IMMEDIATE: the write lock first, so that two claimers take turns
     * and each sees the other's epoch. */
    int rc = sq_exec(s, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK)
        return sq_fail(s, rc, "claim: BEGIN IMMEDIATE", err);
    /* Where the sink first sees the table for this connector: another
     * connector's table is refused before any marker is written. */
    if ((r = sq_owner_register(s, markers, n, err)) != TM_OK) {
        sq_rollback(s);
        return r;
    }
    const char *step = "claim: raising the epoch";
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++)
        rc = claim_one(s, TM_ELEM(tm_marker, markers, i), flags);
    if (rc == SQLITE_OK)
        step = "claim: reading the markers back";
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
        tm_marker *m = TM_ELEM(tm_marker, markers, i);
        rc = sq_marker_get(s, m->topic, m->partition, m);
    }
    if (rc == SQLITE_OK && dedup && !s->set.keys_rows) {
        /* the connector's keys into memory, as of this claim */
        step = "claim: reading the connector's business keys";
        rc = sq_keys_sync(s);
    }
    if (rc != SQLITE_OK) {
        r = sq_keys_fail(s, rc, step, err);
        sq_rollback(s);
        sq_keys_abort(s);
        return r;
    }
    if ((dedup && s->set.keys_rows &&
         (r = sq_keys_rows_check(s, err)) != TM_OK) ||
        (r = sq_db_same_file(s, err)) != TM_OK) {
        sq_rollback(s); /* no epoch raised in a file no one will find */
        sq_keys_abort(s);
        return r;
    }
    if ((rc = sq_exec(s, "COMMIT")) != SQLITE_OK) {
        sq_keys_abort(s);
        /* Outcome unknown: the host claims again, which raises the epoch
         * once more; harmless (an epoch only has to grow). */
        r = sq_fail(s, rc, "claim: COMMIT", err);
        tm_error scratch = {sizeof scratch, ""}; /* err keeps the cause */
        sq_rollback(s);
        sq_db_reopen(s, &scratch);
        return TM_RETRY;
    }
    sq_keys_committed(s);
    return TM_OK;
}

tm_status sq_read_markers(void *sink, tm_marker *markers, size_t n,
                          tm_error *err) {
    sq_sink *s = sink;
    tm_status r = sq_db_ready(s, err);
    if (r != TM_OK)
        return r;
    sq_call_begin(s, 0);
    /* A read transaction: every marker from the same snapshot. */
    int rc = sq_exec(s, "BEGIN");
    for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
        tm_marker *m = TM_ELEM(tm_marker, markers, i);
        rc = sq_marker_get(s, m->topic, m->partition, m);
    }
    if (rc == SQLITE_OK)
        rc = sq_exec(s, "COMMIT");
    if (rc != SQLITE_OK) {
        r = sq_fail(s, rc, "read_markers", err);
        sq_rollback(s);
        return r;
    }
    return TM_OK;
}
