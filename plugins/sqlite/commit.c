/* One batch, one SQLite transaction: the marker check, the rows, the
 * business keys, the dead letters and the advanced markers commit together
 * or not at all (seed 003: "one SQLite transaction for marker and effect").
 * The host's fault hook marks each crash window. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite_sink.h"

/* What one commit call holds. */
typedef struct sq_run {
    sq_sink *s;
    const tm_batch *b;
    tm_marker *stored;           /* per range, read inside the transaction */
    uint64_t *rows, *dls, *dups; /* per range, this batch's own counts */
    int64_t wall_ms;             /* the wall clock as the batch started */
    const char *step;            /* for the error message */
} sq_run;

static int bind_blob(sqlite3_stmt *st, int i, const void *p, size_t n) {
    /* An empty non-NULL value stays an empty blob, not NULL. */
    return p ? sqlite3_bind_blob64(st, i, n ? p : "", n, SQLITE_STATIC)
             : sqlite3_bind_null(st, i);
}

static int bind_text(sqlite3_stmt *st, int i, const char *p) {
    return p ? sqlite3_bind_text(st, i, p, -1, SQLITE_STATIC)
             : sqlite3_bind_null(st, i);
}

/* 1 when this connector already stored this very dead letter for (topic,
 * partition, offset), 0 when not; SQLite result code in *rc. Only a rewind
 * (offsets --reset-to) replays an offset the markers passed, and only the
 * same message (timestamp, key, value) is a replay: after a topic is
 * deleted and recreated, or its log truncated, the offset holds another
 * message, which must be stored. The by-offset index finds the candidates. */
static int dead_letter_stored(sq_run *x, const tm_range *g, int64_t offset,
                              int64_t ts, const void *key, size_t key_len,
                              const void *value, size_t value_len, int *rc) {
    sqlite3_stmt *st = NULL;
    *rc = sqlite3_prepare_v2(x->s->db,
                             "SELECT 1 FROM " SQ_DEAD_LETTERS
                             " WHERE connector = ?1 AND topic = ?2 AND "
                             "\"partition\" = ?3 AND \"offset\" = ?4 AND "
                             "timestamp_ms IS ?5 AND \"key\" IS ?6 AND "
                             "\"value\" IS ?7 LIMIT 1",
                             -1, &st, NULL);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_text(st, 1, x->s->config->connector, -1,
                                SQLITE_STATIC);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_text(st, 2, g->topic, -1, SQLITE_STATIC);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_int(st, 3, g->partition);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_int64(st, 4, offset);
    if (*rc == SQLITE_OK)
        *rc =
            ts >= 0 ? sqlite3_bind_int64(st, 5, ts) : sqlite3_bind_null(st, 5);
    if (*rc == SQLITE_OK)
        *rc = bind_blob(st, 6, key, key_len);
    if (*rc == SQLITE_OK)
        *rc = bind_blob(st, 7, value, value_len);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_step(st);
    int found = *rc == SQLITE_ROW;
    if (*rc == SQLITE_ROW || *rc == SQLITE_DONE)
        *rc = SQLITE_OK;
    sqlite3_finalize(st);
    return found;
}

/* One dead letter of range RANGE into tidemark_dead_letters, counted in
 * the marker. With dedup, the same dead letter already stored for the
 * offset (a replay after a rewind: dead_letter_stored) is not stored
 * again: it is counted as a duplicate, like a replayed record whose key is
 * stored, so the marker's dead_letters stay the number stored and verify
 * counts the replay as "replayed". Another message at that offset is
 * stored. */
static int insert_dead_letter(sq_run *x, uint32_t range, const tm_range *g,
                              int64_t offset, int64_t ts, const char *reason,
                              const char *detail, const void *key,
                              size_t key_len, const void *value,
                              size_t value_len, const char *headers) {
    int rc = SQLITE_OK;
    if ((x->s->config->flags & TM_CONFIG_DEDUP) &&
        (dead_letter_stored(x, g, offset, ts, key, key_len, value, value_len,
                            &rc) ||
         rc != SQLITE_OK)) {
        if (rc == SQLITE_OK)
            x->dups[range]++;
        return rc;
    }
    x->dls[range]++;
    sqlite3_stmt *st = x->s->stmt[SQ_INS_DL];
    rc = sqlite3_bind_text(st, 1, x->s->config->connector, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, g->topic, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(st, 3, g->partition);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 4, offset);
    if (rc == SQLITE_OK)
        rc = ts >= 0 ? sqlite3_bind_int64(st, 5, ts) : sqlite3_bind_null(st, 5);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 6, reason, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = bind_text(st, 7, detail);
    if (rc == SQLITE_OK)
        rc = bind_blob(st, 8, key, key_len);
    if (rc == SQLITE_OK)
        rc = bind_blob(st, 9, value, value_len);
    if (rc == SQLITE_OK)
        rc = bind_text(st, 10, headers);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 11, x->b->batch_id ? x->b->batch_id : "", -1,
                               SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sq_reuse(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int record_dead_letter(sq_run *x, const tm_record *r, const tm_range *g,
                              tm_dl_reason reason, const char *detail) {
    return insert_dead_letter(
        x, r->range, g, r->offset, r->timestamp_ms, tm_dl_reason_name(reason),
        detail, r->key, r->key_len, r->value, r->value_len, r->headers_json);
}

/* Binds a record's mapped values (keys_only: its key columns' values)
 * from parameter 1 on; *next is the parameter after them. */
static int bind_values(sqlite3_stmt *st, const tm_sink_config *c,
                       const tm_record *r, int keys_only, int *next) {
    int rc = SQLITE_OK;
    int n = 0; /* parameters bound */
    for (size_t k = 0; rc == SQLITE_OK && k < c->ncolumns; k++) {
        const tm_column *col = TM_CELEM(tm_column, c->columns, k);
        const tm_value *v = TM_CELEM(tm_value, r->values, k);
        if (keys_only && !col->key)
            continue;
        int at = ++n;
        if (v->is_null) {
            rc = sqlite3_bind_null(st, at);
            continue;
        }
        switch (col->type) {
        case TM_TYPE_INT:
        case TM_TYPE_BOOL:
        case TM_TYPE_TIMESTAMP: rc = sqlite3_bind_int64(st, at, v->v.i); break;
        case TM_TYPE_FLOAT: rc = sqlite3_bind_double(st, at, v->v.f); break;
        case TM_TYPE_TEXT:
        case TM_TYPE_JSON:
            rc = sqlite3_bind_text64(st, at, v->v.s.ptr ? v->v.s.ptr : "",
                                     v->v.s.len, SQLITE_STATIC, SQLITE_UTF8);
            break;
        case TM_TYPE_BYTES:
            rc = sqlite3_bind_blob64(st, at, v->v.s.ptr ? v->v.s.ptr : "",
                                     v->v.s.len, SQLITE_STATIC);
            break;
        }
    }
    *next = n + 1;
    return rc;
}

/* A change event's delete (TM_OP_DELETE): the row of its key, if any. */
static int delete_row(sq_run *x, const tm_record *r) {
    sqlite3_stmt *st = x->s->stmt[SQ_DEL_ROW];
    int next;
    int rc = bind_values(st, x->s->config, r, 1, &next);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sq_reuse(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* 1 when record R has a null in the column that is the table's rowid
 * (s->null_key_detail): refused as a NOT NULL column refuses it. */
static int null_key(const sq_sink *s, const tm_record *r) {
    return s->null_key_detail[0] &&
           TM_CELEM(tm_value, r->values, s->null_key_col)->is_null;
}

/* Binds one record's mapped values and coordinates, steps, resets. */
static int insert_row(sq_run *x, const tm_record *r, const tm_range *g) {
    sqlite3_stmt *st = x->s->stmt[SQ_INS_ROW];
    int i;
    int rc = bind_values(st, x->s->config, r, 0, &i);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, i++, g->topic, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(st, i++, g->partition);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, i++, r->offset);
    if (rc == SQLITE_OK)
        rc = bind_text(st, i, r->identity);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sq_reuse(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* When a business key counts as applied by the data: the record's Kafka
 * timestamp (so the retention boundary is a fact of the data, the same on
 * every resend), or the wall clock for records without one. The wall
 * clock of the application is stored beside it (applied_wall): a record
 * stamped in the past must not be forgotten as soon as it is applied. */
static int64_t applied_at(const sq_run *x, const tm_record *r) {
    return r->timestamp_ms >= 0 ? r->timestamp_ms : x->wall_ms;
}

/* Outcome of a business key: 0 new (write the row), 1 duplicate, 2
 * conflict (detail filled). SQLite result code in *rc. */
static int key_outcome(sq_run *x, const tm_record *r, const tm_range *g,
                       char *detail, size_t size, int *rc) {
    sq_sink *s = x->s;
    sqlite3_stmt *st = s->stmt[SQ_KEY_INS];
    *rc = sqlite3_bind_text(st, 1, x->s->config->connector, -1, SQLITE_STATIC);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_text(st, 2, r->identity, -1, SQLITE_STATIC);
    if (*rc == SQLITE_OK)
        *rc = bind_text(st, 3, r->identity_hash);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_text(st, 4, g->topic, -1, SQLITE_STATIC);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_int(st, 5, g->partition);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_int64(st, 6, r->offset);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_int64(st, 7, applied_at(x, r));
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_int64(st, 8, x->wall_ms);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_step(st);
    sq_reuse(st);
    if (*rc != SQLITE_DONE)
        return 0;
    *rc = SQLITE_OK;
    if (sqlite3_changes(s->db) == 1)
        return 0; /* first time: the key is stored, the row follows */
    st = s->stmt[SQ_KEY_GET];
    *rc = sqlite3_bind_text(st, 1, x->s->config->connector, -1, SQLITE_STATIC);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_text(st, 2, r->identity, -1, SQLITE_STATIC);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_step(st);
    int out = 0;
    if (*rc == SQLITE_ROW) {
        const char *h = (const char *)sqlite3_column_text(st, 0);
        const char *ft = (const char *)sqlite3_column_text(st, 1);
        int same = (!h && !r->identity_hash) ||
                   (h && r->identity_hash && strcmp(h, r->identity_hash) == 0);
        out = same ? 1 : 2;
        if (!same)
            snprintf(detail, size,
                     "identity %.120s first applied from %.100s[%d]@%lld "
                     "with payload hash %.80s, now %.80s",
                     r->identity, ft ? ft : "?", sqlite3_column_int(st, 2),
                     (long long)sqlite3_column_int64(st, 3), h ? h : "(none)",
                     r->identity_hash ? r->identity_hash : "(none)");
        *rc = SQLITE_OK;
    } else if (*rc == SQLITE_DONE) {
        *rc = SQLITE_CORRUPT; /* ignored, yet not there: cannot happen */
    }
    sq_reuse(st);
    return out;
}

/* key_outcome against the keys held in memory (keyset.c). A conflict
 * with a key first seen in this batch names that record; a stored key
 * left no text behind (its digests only). */
static int memory_outcome(sq_run *x, size_t j, const tm_record *r, sq_key *key,
                          char *detail, size_t size) {
    int32_t earlier;
    int out = sq_keys_decide(x->s, j, x->b->nrecords, key, &earlier);
    if (out != 2)
        return out;
    const char *now = r->identity_hash ? r->identity_hash : "(none)";
    if (earlier >= 0) {
        const tm_record *e = TM_CELEM(tm_record, x->b->records, earlier);
        const tm_range *eg = TM_CELEM(tm_range, x->b->ranges, e->range);
        snprintf(detail, size,
                 "identity %.120s first applied from %.100s[%d]@%lld with "
                 "payload hash %.80s, now %.80s",
                 r->identity, eg->topic, eg->partition, (long long)e->offset,
                 e->identity_hash ? e->identity_hash : "(none)", now);
    } else {
        snprintf(detail, size,
                 "identity %.120s was applied before with another payload "
                 "hash (the sink keeps 64-bit digests of them, not the "
                 "text), now %.80s",
                 r->identity, now);
    }
    return 2;
}

/* A key stored for a row the table then refused must go again. */
static int forget_key(sq_run *x, const tm_record *r) {
    sqlite3_stmt *st = x->s->stmt[SQ_KEY_DEL];
    int rc =
        sqlite3_bind_text(st, 1, x->s->config->connector, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, r->identity, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sq_reuse(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Dedup retention: forget keys applied more than the retention before the
 * newest record of this batch, or before now if that is earlier (inside
 * the batch's transaction, so a resend of the batch prunes the same, as
 * long as its records are older than the wall clock), AND applied (by the
 * wall clock) more than the retention before now. The wall clock caps the
 * horizon: one record from a producer whose clock runs years ahead must
 * not prune the keys applied within the retention of now; and a key whose
 * record is stamped long ago (a producer clock behind, a backfill) is
 * kept the retention from its application, not forgotten at once. */
static int prune_keys(sq_run *x, int in_memory) {
    const tm_batch *b = x->b;
    int64_t newest = INT64_MIN;
    for (size_t j = 0; j < b->nrecords; j++) {
        const tm_record *r = TM_CELEM(tm_record, b->records, j);
        if (r->identity && applied_at(x, r) > newest)
            newest = applied_at(x, r);
    }
    if (newest == INT64_MIN)
        return SQLITE_OK;
    int64_t now = x->wall_ms;
    if (newest > now)
        newest = now;
    if (in_memory)
        return sq_keys_prune(x->s, newest - x->s->set.retention_s * 1000,
                             now - x->s->set.retention_s * 1000);
    sqlite3_stmt *st = x->s->stmt[SQ_KEY_PRUNE];
    int rc =
        sqlite3_bind_text(st, 1, x->s->config->connector, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 2, newest - x->s->set.retention_s * 1000);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 3, now - x->s->set.retention_s * 1000);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sq_reuse(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* 1 when the failure RC of statement STMT (the row's INSERT or a change
 * event's DELETE: a trigger may RAISE, a foreign key refuse) was the
 * record's content, not the statement or the store: a constraint or
 * datatype rule (SQLite undid only that statement), or an error raised while
 * computing the row — a CHECK or generated column whose function fails on this
 * value (json_extract on text that is not JSON: SQLITE_ERROR), a value past
 * SQLite's size limits (SQLITE_TOOBIG) — as long as the transaction is
 * still open (only the statement was undone) and the statement's SQL still
 * compiles (an SQLITE_ERROR of a table dropped or changed under the sink
 * is the statement's: FATAL, never a dead letter per record). */
static int refused_row(sq_run *x, int rc, int stmt) {
    /* The transaction is gone (a trigger's RAISE(ROLLBACK), SQLite's own
     * rollback on a full disk): the whole batch was undone, not this row;
     * going on would write the rest and the marker outside any
     * transaction (test trigger_rollback_is_not_a_refused_row). */
    if (sqlite3_get_autocommit(x->s->db))
        return 0;
    if (sq_refused_content(rc))
        return 1;
    int prim = rc & 0xff;
    if (prim != SQLITE_ERROR && prim != SQLITE_TOOBIG)
        return 0;
    if (prim == SQLITE_TOOBIG)
        return 1;
    sqlite3_stmt *again = NULL;
    int ok = sqlite3_prepare_v2(x->s->db, sqlite3_sql(x->s->stmt[stmt]), -1,
                                &again, NULL) == SQLITE_OK;
    sqlite3_finalize(again);
    return ok;
}

/* Every record: a row, or with dedup a duplicate or a conflict. A row the
 * table refuses for its content (refused_row) becomes a dead letter
 * "rejected". */
static int write_records(sq_run *x) {
    const tm_batch *b = x->b;
    int dedup = (x->s->config->flags & TM_CONFIG_DEDUP) != 0;
    int in_memory = dedup && !x->s->set.keys_rows;
    int rc = SQLITE_OK;
    char detail[512];
    if (in_memory) {
        x->step = "reading the connector's business keys";
        if ((rc = sq_keys_sync(x->s)) != SQLITE_OK ||
            (rc = sq_keys_prepare(x->s, b)) != SQLITE_OK)
            return rc;
    }
    if (dedup && x->s->set.retention_s > 0) {
        x->step = "pruning expired business keys";
        if ((rc = prune_keys(x, in_memory)) != SQLITE_OK)
            return rc;
    }
    x->step = "writing rows";
    for (size_t j = 0; rc == SQLITE_OK && j < b->nrecords; j++) {
        const tm_record *r = TM_CELEM(tm_record, b->records, j);
        const tm_range *g = TM_CELEM(tm_range, b->ranges, r->range);
        /* The progress handler covers long statements; this covers a
         * call that starts late or a batch of many short ones. */
        if ((j & 255) == 0 && sq_should_stop(x->s)) {
            rc = SQLITE_INTERRUPT;
            break;
        }
        int keyed = dedup && r->identity;
        sq_key key;
        int outcome = 0;
        if (keyed && in_memory)
            outcome = memory_outcome(x, j, r, &key, detail, sizeof detail);
        else if (keyed)
            outcome = key_outcome(x, r, g, detail, sizeof detail, &rc);
        if (rc != SQLITE_OK)
            break;
        if (outcome == 1) {
            x->dups[r->range]++;
            continue;
        }
        if (outcome == 2) {
            rc = record_dead_letter(x, r, g, TM_DL_IDENTITY_CONFLICT, detail);
            continue;
        }
        /* a delete is applied even when no row had its key: counted with
         * the rows (docs/exactly-once.md) */
        int del = TM_RECORD_OP(r) == TM_OP_DELETE;
        if (!del && null_key(x->s, r)) {
            rc = SQLITE_CONSTRAINT_NOTNULL;
            snprintf(detail, sizeof detail, "%s", x->s->null_key_detail);
        } else {
            rc = del ? delete_row(x, r) : insert_row(x, r, g);
            if (rc != SQLITE_OK) /* before refused_row's prepare clears it */
                snprintf(detail, sizeof detail, "%s", sqlite3_errmsg(x->s->db));
        }
        if (rc != SQLITE_OK &&
            refused_row(x, rc, del ? SQ_DEL_ROW : SQ_INS_ROW)) {
            /* Only this statement was undone; the transaction goes on.
             * In memory the key was not staged yet: nothing to forget. */
            rc = keyed && !in_memory ? forget_key(x, r) : SQLITE_OK;
            if (rc == SQLITE_OK)
                rc = record_dead_letter(x, r, g, TM_DL_REJECTED, detail);
            continue;
        }
        if (rc == SQLITE_OK && keyed && in_memory)
            rc = sq_keys_stage(x->s, key, (int32_t)j, applied_at(x, r));
        if (rc == SQLITE_OK)
            x->rows[r->range]++;
    }
    if (rc == SQLITE_OK && in_memory) {
        x->step = "writing the batch's business keys";
        rc = sq_keys_write(x->s, x->wall_ms);
    }
    if (rc != SQLITE_OK)
        return rc;
    x->step = "writing dead letters";
    for (size_t j = 0; rc == SQLITE_OK && j < b->ndead_letters; j++) {
        const tm_dead_letter *d = TM_CELEM(tm_dead_letter, b->dead_letters, j);
        const tm_range *g = TM_CELEM(tm_range, b->ranges, d->range);
        rc = insert_dead_letter(x, d->range, g, d->offset, d->timestamp_ms,
                                tm_dl_reason_name(d->reason), d->detail, d->key,
                                d->key_len, d->value, d->value_len,
                                d->headers_json);
    }
    return rc;
}

/* "dedup_keys": "rows" for a connector whose keys are held as batches
 * would not see them: refused (FATAL, also at claim). */
tm_status sq_keys_rows_check(sq_sink *s, tm_error *err) {
    int allowed = 1;
    int rc = sq_keys_rows_allowed(s, &allowed);
    if (rc != SQLITE_OK)
        return sq_keys_fail(s, rc, "reading " SQ_KEYSETS, err);
    if (allowed)
        return TM_OK;
    s->host->set_error(
        err,
        "setting \"dedup_keys\": \"rows\", but connector \"%s\" already holds "
        "its business keys as batches in %s (" SQ_KEY_BATCHES
        ", written with \"memory\"): one row per key would not see them; "
        "keep \"memory\"",
        s->config->connector, s->set.path);
    return TM_FATAL;
}

/* Steps 1-3 inside the transaction; COMMIT is the caller's. */
static tm_status apply(sq_run *x, tm_error *err) {
    sq_sink *s = x->s;
    const tm_batch *b = x->b;
    int rc = SQLITE_OK;
    x->step = "reading the markers";
    for (size_t i = 0; rc == SQLITE_OK && i < b->nranges; i++) {
        const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
        x->stored[i].struct_size = sizeof(tm_marker);
        x->stored[i].topic = g->topic;
        x->stored[i].partition = g->partition;
        rc = sq_marker_get(s, g->topic, g->partition, &x->stored[i]);
    }
    if (rc != SQLITE_OK)
        return sq_fail(s, rc, x->step, err);
    /* The write lock is held (BEGIN IMMEDIATE): the markers cannot move
     * under the check. ALREADY / FENCED / CONFLICT write nothing. */
    tm_status r = s->host->marker_check(b, x->stored, err);
    if (r != TM_OK)
        return r;
    if ((s->config->flags & TM_CONFIG_DEDUP) && s->set.keys_rows &&
        (r = sq_keys_rows_check(s, err)) != TM_OK)
        return r;
    /* the table takes the batch's columns with its rows, or neither */
    x->step = "fitting the table to the batch's columns";
    if ((r = sq_evolve(s, b, err)) != TM_OK)
        return r;
    if ((rc = write_records(x)) != SQLITE_OK)
        return sq_keys_fail(s, rc, x->step, err);
    s->host->fault(TM_FAULT_AFTER_EFFECTS);
    x->step = "updating the markers";
    for (size_t i = 0; rc == SQLITE_OK && i < b->nranges; i++) {
        s->host->marker_advance(&x->stored[i], b, i, x->rows[i], x->dls[i],
                                x->dups[i]);
        rc = sq_marker_put(s, &x->stored[i]);
    }
    if (rc == SQLITE_NOTFOUND) {
        s->host->set_error(err,
                           "batch %s: a marker checked in this "
                           "transaction has no row to update",
                           b->batch_id);
        return TM_FATAL;
    }
    if (rc != SQLITE_OK)
        return sq_fail(s, rc, x->step, err);
    s->host->fault(TM_FAULT_AFTER_MARKER);
    return TM_OK;
}

tm_status sq_commit(void *sink, const tm_batch *b, tm_error *err) {
    sq_sink *s = sink;
    sq_run x = {.s = s, .b = b, .wall_ms = sq_wall_ms()};
    s->host->fault(TM_FAULT_BEFORE_BEGIN);
    tm_status r = sq_db_ready(s, err);
    if (r != TM_OK)
        return r;
    sq_call_begin(s, b->deadline_ms);
    size_t n = b->nranges ? b->nranges : 1;
    x.stored = calloc(n, sizeof *x.stored);
    x.rows = calloc(3 * n, sizeof *x.rows);
    if (!x.stored || !x.rows) {
        free(x.stored);
        free(x.rows);
        s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
        return TM_RETRY;
    }
    x.dls = x.rows + n;
    x.dups = x.rows + 2 * n;
    int rc = sq_exec(s, "BEGIN IMMEDIATE");
    r = rc == SQLITE_OK ? apply(&x, err)
                        : sq_fail(s, rc, "BEGIN IMMEDIATE", err);
    if (r != TM_OK) {
        sq_rollback(s);
    } else if ((r = sq_db_same_file(s, err)) != TM_OK) {
        /* Checked with the write lock held, right before COMMIT: a file
         * removed or replaced while running never gets a batch reported
         * applied (its rows would vanish with the process). */
        sq_rollback(s);
    } else {
        /* A commit that got this far is not thrown away for the deadline;
         * interrupt() still stops it. */
        s->deadline_ms = 0;
        if ((rc = sq_exec(s, "COMMIT")) != SQLITE_OK) {
            /* Outcome unknown (SQLite may or may not have made it durable):
             * roll back what is left, start from a fresh connection, and
             * let the resend's marker check settle it (OK or ALREADY). */
            tm_error scratch = {sizeof scratch, ""};
            sq_fail(s, rc, "COMMIT", err);
            sq_rollback(s);
            sq_db_reopen(s, &scratch);
            r = TM_RETRY;
        }
    }
    free(x.stored);
    free(x.rows);
    if ((s->config->flags & TM_CONFIG_DEDUP) && !s->set.keys_rows) {
        /* the batch's keys reach the set only once COMMIT returned OK */
        if (r == TM_OK)
            sq_keys_committed(s);
        else
            sq_keys_abort(s);
    }
    if (r != TM_OK && s->schema_cols) {
        /* Rolled back, or not known committed: the table may lack the
         * columns this batch added. The next batch fits it again. */
        s->follow.ready = 0;
    }
    if (r == TM_OK)
        s->host->fault(TM_FAULT_AFTER_COMMIT);
    return r;
}
