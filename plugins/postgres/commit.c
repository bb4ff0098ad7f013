/* One batch, one PostgreSQL transaction: the marker check on markers held
 * FOR UPDATE, the rows (COPY), the business keys, the dead letters and the
 * advanced markers commit together or not at all. The host's fault hook
 * marks each crash window.
 *
 * Round trips, because they dominate small batches: BEGIN and the marker
 * locks go in one pipeline; the SAVEPOINT in the COPY's query; the marker
 * updates and COMMIT in one pipeline. A plain batch thus costs what a bare
 * BEGIN; COPY; COMMIT costs: four. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg_sink.h"

typedef struct pg_run {
    pg_sink *s;
    const tm_batch *b;
    tm_marker *stored;           /* per range, locked in the transaction */
    unsigned char *present;      /* per range: the marker row exists */
    uint64_t *rows, *dls, *dups; /* per range, this batch's own counts */
    unsigned char *write;        /* per record: 1 when it becomes a row */
    size_t nwrite;
    /* Per record (made at the first): why the database refused its business
     * key for its content; such a record is a dead letter "rejected" when
     * the transaction is run again. redo: run it again. */
    char **refused;
    int redo;
    /* The set statement of the keys (keys.c) was refused for a record's
     * content: the run again decides them one record at a time, which
     * finds the record (refuse_key). */
    int one_by_one;
    /* Keys held in memory (keyset.c): the connector's keysets row is
     * locked before the decisions (a run again after the decisions made
     * without it no longer held), else only after the rows. */
    int keys_lock_first;
    int64_t wall_ms; /* the wall clock as the commit started */
} pg_run;

/* ---- keys and dead letters ---------------------------------------------- */

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One dead letter of range RANGE, counted in the marker. With dedup, the
 * same dead letter already stored for the offset by this connector (a
 * replay after `offsets --reset-to` an earlier offset) is not stored
 * again: it counts as a duplicate, like a replayed record whose key is
 * stored, so the marker's dead_letters stay the number stored. Only the
 * same message (timestamp, key, value) is a replay: after a topic is
 * deleted and recreated, or its log truncated, the offset holds another
 * message, which is stored. The check is the INSERT's own WHERE NOT EXISTS
 * (the by-offset index finds the candidates): no extra round trip. */
static tm_status
insert_dead_letter(pg_run *x, uint32_t range, const tm_range *g, int64_t offset,
                   int64_t ts, const char *reason, const char *detail,
                   const void *key, size_t key_len, const void *value,
                   size_t value_len, const char *headers, tm_error *err) {
    pg_sink *s = x->s;
    char part[16], off[32], tsb[32];
    snprintf(part, sizeof part, "%d", (int)g->partition);
    snprintf(off, sizeof off, "%lld", (long long)offset);
    snprintf(tsb, sizeof tsb, "%lld", (long long)ts);
    /* A detail cut inside a UTF-8 character (by the host's message size,
     * say) would fail this INSERT, and the batch with it, for ever. */
    char *clean = detail ? pg_utf8_valid(detail) : NULL;
    if (detail && !clean) {
        s->host->set_error(err, "out of memory (batch %s)", x->b->batch_id);
        return TM_RETRY;
    }
    detail = clean;
    const char *v[11] = {s->config->connector,
                         g->topic,
                         part,
                         off,
                         ts >= 0 ? tsb : NULL,
                         reason,
                         detail,
                         key ? (key_len ? key : "") : NULL,
                         value ? (value_len ? value : "") : NULL,
                         headers,
                         x->b->batch_id ? x->b->batch_id : ""};
    int lens[11] = {0, 0, 0, 0, 0, 0, 0, (int)key_len, (int)value_len, 0, 0};
    int fmts[11] = {0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0};
    pg_buf b = {0};
    pg_buf_add(&b, "INSERT INTO ");
    pg_buf_add(&b, s->q_dls);
    pg_buf_add(&b, " (connector, topic, \"partition\", \"offset\", "
                   "timestamp_ms, reason, detail, \"key\", \"value\", "
                   "headers, batch_id) SELECT $1, $2, $3::int, $4::bigint, "
                   "$5::bigint, $6, $7, $8::bytea, $9::bytea, $10, $11");
    if (s->config->flags & TM_CONFIG_DEDUP) {
        pg_buf_add(&b, " WHERE NOT EXISTS (SELECT 1 FROM ");
        pg_buf_add(&b, s->q_dls);
        pg_buf_add(&b, " WHERE connector = $1 AND topic = $2 AND "
                       "\"partition\" = $3::int AND \"offset\" = $4::bigint "
                       "AND timestamp_ms IS NOT DISTINCT FROM $5::bigint AND "
                       "\"key\" IS NOT DISTINCT FROM $8::bytea AND "
                       "\"value\" IS NOT DISTINCT FROM $9::bytea)");
    }
    tm_status r = TM_RETRY;
    PGresult *res = b.oom ? NULL
                          : pg_query(s, b.p, 11, v, lens, fmts, 0,
                                     "writing dead letters", &r, err);
    if (res) {
        if (strcmp(PQcmdTuples(res), "0") == 0)
            x->dups[range]++;
        else
            x->dls[range]++;
    }
    pg_buf_free(&b);
    free(clean);
    PQclear(res);
    return r;
}

/* REASON: a tm_dl_reason's name. */
static tm_status record_dead_letter(pg_run *x, const tm_record *r,
                                    const tm_range *g, const char *reason,
                                    const char *detail, tm_error *err) {
    return insert_dead_letter(x, r->range, g, r->offset, r->timestamp_ms,
                              reason, detail, r->key, r->key_len, r->value,
                              r->value_len, r->headers_json, err);
}

/* Forgets the keys applied before min(newest record timestamp of the
 * batch, wall clock now) - retention AND, by the wall clock, before now -
 * retention (docs/sinks/postgres.md). The wall clock caps the horizon: one
 * record stamped years ahead would otherwise forget every key, and the
 * resends of those keys would be stored twice; the wall clock of the
 * application keeps a key stamped long ago for the retention. */
static tm_status prune_keys(pg_run *x, tm_error *err) {
    int64_t newest = INT64_MIN;
    for (size_t j = 0; j < x->b->nrecords; j++) {
        const tm_record *r = TM_CELEM(tm_record, x->b->records, j);
        if (r->identity && pg_applied_at(r, x->wall_ms) > newest)
            newest = pg_applied_at(r, x->wall_ms);
    }
    if (newest == INT64_MIN)
        return TM_OK;
    int64_t now = x->wall_ms;
    if (newest > now)
        newest = now;
    if (pg_keyset_on(x->s))
        return pg_keyset_prune(x->s, newest - x->s->set.retention_s * 1000,
                               now - x->s->set.retention_s * 1000, err);
    char h[32], w[32];
    snprintf(h, sizeof h, "%lld",
             (long long)(newest - x->s->set.retention_s * 1000));
    snprintf(w, sizeof w, "%lld",
             (long long)(now - x->s->set.retention_s * 1000));
    const char *v[3] = {x->s->config->connector, h, w};
    pg_buf b = {0};
    pg_buf_add(&b, "DELETE FROM ");
    pg_buf_add(&b, x->s->q_keys);
    pg_buf_add(&b, " WHERE connector = $1 AND applied_at < $2::bigint AND "
                   "applied_wall < $3::bigint");
    tm_status r = TM_RETRY;
    PGresult *res = b.oom ? NULL
                          : pg_query(x->s, b.p, 3, v, NULL, NULL, 0,
                                     "pruning expired business keys", &r, err);
    pg_buf_free(&b);
    PQclear(res);
    return r;
}

/* Records [from, to) with write[j] set; LEAD (a SAVEPOINT) goes in the
 * same round trip as the COPY. */
static tm_status write_rows(pg_run *x, size_t from, size_t to, const char *lead,
                            tm_error *err) {
    const pg_rows rows = {.b = x->b, .write = x->write, .from = from, .to = to};
    return x->s->set.mode == PG_UPSERT ? pg_upsert_rows(x->s, &rows, lead, err)
                                       : pg_copy_rows(x->s, &rows, lead, err);
}

/* The database refused the record's content (pg_state_class: a data
 * exception, a constraint, an index row too large): a row, not the batch. */
static int rejectable(const pg_sink *s) {
    return pg_state_class(s->last_state, 1) == PG_ERR_ROW;
}

/* The business key of record J was refused for its content (e.g. an
 * identity too long for the key index, or not valid UTF-8): the
 * transaction is aborted, so the record is noted and the whole transaction
 * is run again with it as a dead letter (each run notes one more record,
 * so this ends). TM_RETRY with x->redo set; any other failure as is. */
static tm_status refuse_key(pg_run *x, size_t j, tm_status r, tm_error *err) {
    pg_sink *s = x->s;
    if (!s->conn || !rejectable(s))
        return r;
    if (!x->refused &&
        !(x->refused = calloc(x->b->nrecords, sizeof *x->refused))) {
        s->host->set_error(err, "out of memory (batch %s)", x->b->batch_id);
        return TM_RETRY;
    }
    size_t n = strlen(err->message) + 1;
    if (!(x->refused[j] = malloc(n))) {
        s->host->set_error(err, "out of memory (batch %s)", x->b->batch_id);
        return TM_RETRY;
    }
    memcpy(x->refused[j], err->message, n);
    x->redo = 1;
    return TM_RETRY;
}

static tm_status forget_key(pg_run *x, const tm_record *r, tm_error *err) {
    pg_buf b = {0};
    pg_buf_add(&b, "DELETE FROM ");
    pg_buf_add(&b, x->s->q_keys);
    pg_buf_add(&b, " WHERE connector = $1 AND identity = $2");
    const char *v[2] = {x->s->config->connector, r->identity};
    tm_status st = TM_RETRY;
    PGresult *res = b.oom
                        ? NULL
                        : pg_query(x->s, b.p, 2, v, NULL, NULL, 0,
                                   "forgetting a rejected row's key", &st, err);
    pg_buf_free(&b);
    PQclear(res);
    return st;
}

/* Record J, refused by the table for its content (DETAIL): a dead letter
 * "rejected", its business key (if any) forgotten again. */
static tm_status reject_row(pg_run *x, size_t j, const char *detail,
                            tm_error *err) {
    const tm_record *rec = TM_CELEM(tm_record, x->b->records, j);
    const tm_range *g = TM_CELEM(tm_range, x->b->ranges, rec->range);
    tm_status r;
    x->write[j] = 0;
    x->nwrite--;
    x->rows[rec->range]--;
    if (pg_keyset_on(x->s) && rec->identity)
        pg_keyset_drop(x->s, rec); /* staged only: nothing stored yet */
    else if ((x->s->config->flags & TM_CONFIG_DEDUP) && rec->identity &&
             (r = forget_key(x, rec, err)) != TM_OK)
        return r;
    return record_dead_letter(x, rec, g, tm_dl_reason_name(TM_DL_REJECTED),
                              detail, err);
}

/* The rows in one COPY under a savepoint; when the table refuses one, the
 * range is halved and each half written again under its own savepoint, in
 * order (upsert's last-wins holds), down to single refused records, which
 * become dead letters. One refused row among n costs about 2 log2(n)
 * COPYs of shrinking halves, not n round trips: a batch of any size with
 * a refused row commits within its deadline. The deadline and interrupt()
 * are checked before every attempt.
 *
 * Change events go the same way: a write applies each key's last event
 * (copy.c, pg_upsert_rows), so a hot key costs one row, not a round trip
 * per event. A run of events is replaced by its result, which is the
 * result of applying them one at a time whenever the table accepts it
 * (each key's row depends only on its own events); a refusal, whether of
 * an event's content or of the order the collapsed write took, halves
 * the run, and a single event is written alone, exactly. So a batch that
 * is valid one event at a time ends as one event at a time leaves it. */
static tm_status write_rows_or_reject(pg_run *x, tm_error *err) {
    pg_sink *s = x->s;
    size_t n = x->b->nrecords;
    /* pending ranges, the next one on top: at most one per halving level
     * plus one, so 2 * 64 entries are plenty */
    size_t stack[128][2], top = 0;
    stack[top][0] = 0;
    stack[top++][1] = n;
    while (top > 0) {
        size_t from = stack[top - 1][0], to = stack[top - 1][1];
        top--;
        size_t first = from, count = 0;
        for (size_t j = from; j < to; j++)
            if (x->write[j] && count++ == 0)
                first = j;
        if (count == 0)
            continue;
        if (pg_should_stop(s)) {
            s->host->set_error(err, "batch %s: given up (%s)", x->b->batch_id,
                               atomic_load(&s->interrupted)
                                   ? "interrupted"
                                   : "past the batch deadline");
            return TM_RETRY;
        }
        s->last_state[0] = '\0';
        tm_status r = write_rows(x, from, to, "SAVEPOINT tm_rows", err);
        if (r == TM_OK) {
            if ((r = pg_exec(s, "RELEASE SAVEPOINT tm_rows", "RELEASE", err)) !=
                TM_OK)
                return r;
            continue;
        }
        if (!s->conn || !rejectable(s))
            return r;
        char detail[TM_ERROR_MAX];
        snprintf(detail, sizeof detail, "%s", err->message);
        s->host->log(s->config->host_ctx, TM_LOG_DEBUG,
                     "batch %s: a write of %zu records refused (%s); %s",
                     x->b->batch_id, count, detail,
                     count == 1 ? "a dead letter" : "halved");
        if ((r = pg_exec(s,
                         "ROLLBACK TO SAVEPOINT tm_rows; RELEASE SAVEPOINT "
                         "tm_rows",
                         "ROLLBACK TO", err)) != TM_OK)
            return r;
        if (count == 1) {
            if ((r = reject_row(x, first, detail, err)) != TM_OK)
                return r;
            continue;
        }
        /* halves by index from the first row on; the earlier on top */
        size_t mid = first + (to - first) / 2;
        if (top + 2 > sizeof stack / sizeof stack[0]) {
            s->host->set_error(err, "batch %s: too many halvings",
                               x->b->batch_id);
            return TM_FATAL;
        }
        stack[top][0] = mid;
        stack[top++][1] = to;
        stack[top][0] = first;
        stack[top++][1] = mid;
    }
    err->message[0] = '\0';
    return TM_OK;
}

/* Upsert: the name of the first key column RECORD has null (or missing,
 * which the host makes null), or NULL when every key is set. Such a record
 * has no key to upsert by: DISTINCT ON would merge the null-keyed records
 * of a batch into one row and the unique index would let each of them
 * in, so the row count would hang on the batch size. */
static const char *null_key_column(const pg_sink *s, const tm_record *r) {
    if (s->set.mode != PG_UPSERT)
        return NULL;
    for (size_t k = 0; k < s->config->ncolumns; k++) {
        const tm_column *col = TM_CELEM(tm_column, s->config->columns, k);
        if (col->key && TM_CELEM(tm_value, r->values, k)->is_null)
            return col->name;
    }
    return NULL;
}

/* A record whose business key is decided: it has one, and it is neither
 * a dead letter null_key (upsert) nor one whose key a previous run found
 * refused. */
static int keyed(pg_run *x, size_t j) {
    const tm_record *rec = TM_CELEM(tm_record, x->b->records, j);
    return rec->identity && !null_key_column(x->s, rec) &&
           !(x->refused && x->refused[j]);
}

/* The keyed records' business keys, decided as a set (keys.c). When the
 * database refuses the set statement for a record's content (or a key
 * stored concurrently: 23505), the batch's transaction runs again deciding
 * them one by one, which finds the record (write_each). */
static tm_status decide_keys(pg_run *x, pg_key_set *keys, tm_error *err) {
    const tm_batch *b = x->b;
    size_t n = b->nrecords ? b->nrecords : 1;
    unsigned char *want = calloc(n, 1);
    keys->outcome = calloc(n, 1);
    if (!want || !keys->outcome) {
        free(want);
        x->s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
        return TM_RETRY;
    }
    for (size_t j = 0; j < b->nrecords; j++)
        want[j] = (unsigned char)keyed(x, j);
    tm_status r = pg_keyset_on(x->s)
                      ? pg_keyset_decide(x->s, b, want, x->wall_ms, keys, err)
                      : pg_keys_decide(x->s, b, want, x->wall_ms, keys, err);
    free(want);
    if (r != TM_OK && !pg_keyset_on(x->s) && x->s->conn && rejectable(x->s)) {
        x->s->host->log(x->s->config->host_ctx, TM_LOG_WARN,
                        "batch %s: the set of business keys failed (%s); "
                        "deciding them one record at a time",
                        b->batch_id, err->message);
        x->one_by_one = 1;
        x->redo = 1;
    }
    return r;
}

/* Every record in offset order: without an upsert key a dead letter
 * null_key; with dedup a duplicate, a conflict or a row (KEYS, or one
 * record at a time after the set was refused); then the rows in one COPY;
 * then the host's dead letters. */
static tm_status write_each(pg_run *x, const pg_key_set *keys, tm_error *err) {
    const tm_batch *b = x->b;
    int dedup = (x->s->config->flags & TM_CONFIG_DEDUP) != 0;
    tm_status r = TM_OK;
    char detail[512];
    for (size_t j = 0; j < b->nrecords; j++) {
        const tm_record *rec = TM_CELEM(tm_record, b->records, j);
        const tm_range *g = TM_CELEM(tm_range, b->ranges, rec->range);
        if ((j & 255) == 0 && pg_should_stop(x->s)) {
            x->s->host->set_error(err, "batch %s: given up (%s)", b->batch_id,
                                  atomic_load(&x->s->interrupted)
                                      ? "interrupted"
                                      : "past the batch deadline");
            return TM_RETRY;
        }
        const char *nulled = null_key_column(x->s, rec);
        if (nulled) {
            snprintf(detail, sizeof detail,
                     "key column \"%.*s\" is null or missing: mode upsert "
                     "has no key to write the row by",
                     (int)pg_utf8_prefix(nulled, 200), nulled);
            if ((r = record_dead_letter(x, rec, g,
                                        tm_dl_reason_name(TM_DL_NULL_KEY),
                                        detail, err)) != TM_OK)
                return r;
            continue;
        }
        if (x->refused && x->refused[j]) {
            if ((r = record_dead_letter(x, rec, g,
                                        tm_dl_reason_name(TM_DL_REJECTED),
                                        x->refused[j], err)) != TM_OK)
                return r;
            continue;
        }
        int outcome = 0;
        const char *why = detail;
        if (dedup && rec->identity && x->one_by_one) {
            x->s->last_state[0] = '\0';
            outcome = pg_key_one(x->s, rec, g, x->wall_ms, detail,
                                 sizeof detail, &r, err);
            if (outcome < 0)
                return refuse_key(x, j, r, err);
        } else if (dedup && rec->identity) {
            outcome = keys->outcome[j];
            why = outcome == 2 ? keys->detail[j] : NULL;
        }
        if (outcome == 1) {
            x->dups[rec->range]++;
        } else if (outcome == 2) {
            if ((r = record_dead_letter(
                     x, rec, g, tm_dl_reason_name(TM_DL_IDENTITY_CONFLICT), why,
                     err)) != TM_OK)
                return r;
        } else {
            x->write[j] = 1;
            x->nwrite++;
            x->rows[rec->range]++;
        }
    }
    if (x->nwrite > 0 && (r = write_rows_or_reject(x, err)) != TM_OK)
        return r;
    for (size_t j = 0; j < b->ndead_letters; j++) {
        const tm_dead_letter *d = TM_CELEM(tm_dead_letter, b->dead_letters, j);
        const tm_range *g = TM_CELEM(tm_range, b->ranges, d->range);
        if ((r = insert_dead_letter(x, d->range, g, d->offset, d->timestamp_ms,
                                    tm_dl_reason_name(d->reason), d->detail,
                                    d->key, d->key_len, d->value, d->value_len,
                                    d->headers_json, err)) != TM_OK)
            return r;
    }
    return TM_OK;
}

/* 1 when a record of the batch has a business key. */
static int any_identity(const tm_batch *b) {
    for (size_t j = 0; j < b->nrecords; j++)
        if (TM_CELEM(tm_record, b->records, j)->identity)
            return 1;
    return 0;
}

/* With dedup: expired keys pruned (a retention), the keys decided; then
 * every record's effect. Keys held in memory: the connector's keysets row
 * locked first when the set must be brought up to it, with a retention
 * (its pruning deletes batch rows that another host pruning them too
 * would hold while waiting for that lock), and in upsert mode (two hosts'
 * rows of one key wait for each other: locked after the rows by one host
 * and before them by another, a run again, they deadlocked); else the
 * decisions are checked under it after the rows (pg_keyset_finish). */
static tm_status write_effects(pg_run *x, tm_error *err) {
    int dedup = (x->s->config->flags & TM_CONFIG_DEDUP) != 0;
    int memory = pg_keyset_on(x->s) && any_identity(x->b);
    int lock_first = x->keys_lock_first || x->s->set.retention_s > 0 ||
                     x->s->set.mode == PG_UPSERT;
    tm_status r = TM_OK;
    if (memory && (r = pg_keyset_begin(x->s, lock_first, err)) != TM_OK)
        return r;
    if (dedup && x->s->set.retention_s > 0 && (r = prune_keys(x, err)) != TM_OK)
        return r;
    pg_key_set keys = {0};
    if (dedup && !x->one_by_one)
        r = decide_keys(x, &keys, err);
    if (r == TM_OK)
        r = write_each(x, &keys, err);
    pg_key_set_free(&keys, x->b->nrecords);
    if (r == TM_OK && memory) {
        int redo = 0;
        r = pg_keyset_finish(x->s, x->b, x->wall_ms, &redo, err);
        if (redo) {
            x->s->host->log(x->s->config->host_ctx, TM_LOG_DEBUG, "%s",
                            err->message);
            x->keys_lock_first = 1;
            x->redo = 1;
        }
    }
    return r;
}

/* One round trip: BEGIN, SET CONSTRAINTS ALL IMMEDIATE and every
 * partition's SELECT ... FOR UPDATE of its marker, in one pipeline.
 * Deferred constraints (DEFERRABLE INITIALLY DEFERRED, as Django makes its
 * foreign keys) are checked at each statement instead of at COMMIT: a row
 * they refuse is then a dead letter found by its own COPY, where at COMMIT
 * it would fail the whole batch again on every retry. */
static tm_status begin_and_lock(pg_run *x, tm_error *err) {
    pg_sink *s = x->s;
    const tm_batch *b = x->b;
    size_t n = b->nranges;
    pg_stmt *st = calloc(n + 2, sizeof *st);
    pg_marker_params *p = calloc(n ? n : 1, sizeof *p);
    tm_status r = TM_OK;
    if (!st || !p) {
        s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
        r = TM_RETRY;
    }
    if (r == TM_OK) {
        st[0] = (pg_stmt){.sql = "BEGIN", .step = "BEGIN"};
        st[1] = (pg_stmt){.sql = "SET CONSTRAINTS ALL IMMEDIATE",
                          .step = "SET CONSTRAINTS"};
        for (size_t i = 0; i < n; i++) {
            const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
            x->stored[i].struct_size = sizeof(tm_marker);
            x->stored[i].topic = g->topic;
            x->stored[i].partition = g->partition;
            pg_marker_params_of(s, &x->stored[i], &p[i]);
            st[i + 2] = (pg_stmt){.name = PG_STMT_LOCK,
                                  .n = 3,
                                  .vals = p[i].v,
                                  .want_tuples = 1,
                                  .step = "locking the markers"};
        }
        r = pg_pipe_begin(s, "BEGIN", err);
        for (size_t i = 0; r == TM_OK && i < n + 2; i++)
            r = pg_pipe_send(s, &st[i], err);
        r = r == TM_OK ? pg_pipe_end(s, st, n + 2, err) : pg_pipe_abort(s, r);
    }
    if (r == TM_OK) {
        PQclear(st[0].res);
        PQclear(st[1].res);
        for (size_t i = 0; i < n; i++) {
            x->present[i] =
                (unsigned char)pg_marker_fill(&x->stored[i], st[i + 2].res);
            PQclear(st[i + 2].res);
        }
    }
    free(st);
    free(p);
    return r;
}

/* One round trip: the keys' writes (keys held in memory: the batch's row
 * of keys, the connector's row moved), every marker UPDATE, then COMMIT,
 * in one pipeline. The UPDATEs are put on the wire before the after_marker
 * crash point, so that it falls where its name says: markers sent, no
 * COMMIT yet. */
static tm_status update_and_commit(pg_run *x, tm_error *err) {
    pg_sink *s = x->s;
    const tm_batch *b = x->b;
    /* first the keys' writes (keys held in memory), then the markers */
    pg_stmt *st = calloc(b->nranges + 3, sizeof *st);
    pg_marker_params *p = calloc(b->nranges ? b->nranges : 1, sizeof *p);
    size_t k = st ? pg_keyset_stmts(s, st) : 0, n = k + b->nranges;
    tm_status r = TM_OK;
    if (!st || !p) {
        s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
        r = TM_RETRY;
    }
    if (r == TM_OK) {
        for (size_t i = 0; i < b->nranges; i++) {
            s->host->marker_advance(&x->stored[i], b, i, x->rows[i], x->dls[i],
                                    x->dups[i]);
            pg_marker_params_of(s, &x->stored[i], &p[i]);
            st[k + i] = (pg_stmt){.name = PG_STMT_UPDATE,
                                  .n = PG_MARKER_NPARAMS,
                                  .vals = p[i].v,
                                  .want_tuples = 1,
                                  .step = "updating the markers"};
        }
        st[n] = (pg_stmt){.sql = "COMMIT", .step = "COMMIT"};
        r = pg_pipe_begin(s, "updating the markers", err);
        for (size_t i = 0; r == TM_OK && i < n; i++)
            r = pg_pipe_send(s, &st[i], err);
        /* synced, not only flushed: a host stopped at the fault point
         * below leaves its session idle in transaction, which the server
         * ends (conn.c, pg_idle_timeout_ms); the COMMIT after an error
         * before it answers ROLLBACK (below) */
        if (r == TM_OK && n) {
            st[n - 1].sync_after = 1;
            r = pg_pipe_sync(s, "updating the markers", err);
        }
        if (r == TM_OK) {
            s->host->fault(TM_FAULT_AFTER_MARKER);
            /* A batch whose COMMIT is on its way is not given up. */
            s->deadline_ms = 0;
            r = pg_pipe_send(s, &st[n], err);
        }
        r = r == TM_OK ? pg_pipe_end(s, st, n + 1, err) : pg_pipe_abort(s, r);
    }
    if (r == TM_OK) {
        if (strcmp(PQcmdStatus(st[n].res), "COMMIT") != 0) {
            /* "ROLLBACK": the transaction had failed */
            s->host->set_error(err, "batch %s: COMMIT rolled back",
                               b->batch_id);
            r = TM_RETRY;
        }
        for (size_t i = 0; i <= n; i++)
            PQclear(st[i].res);
    }
    free(st);
    free(p);
    return r;
}

/* Inside the transaction: the markers locked and checked, the effects. */
static tm_status lock_check_write(pg_run *x, tm_error *err) {
    pg_sink *s = x->s;
    const tm_batch *b = x->b;
    tm_status r = begin_and_lock(x, err);
    if (r != TM_OK)
        return r;
    /* The marker rows are locked FOR UPDATE: they cannot move under the
     * check. ALREADY / FENCED / CONFLICT write nothing. */
    if ((r = s->host->marker_check(b, x->stored, err)) != TM_OK)
        return r;
    /* the table takes the batch's columns with its rows, or neither */
    if ((r = pg_evolve(s, b, err)) != TM_OK)
        return r;
    for (size_t i = 0; i < b->nranges; i++)
        if (!x->present[i]) {
            const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
            s->host->set_error(err,
                               "%s[%d]: a marker checked in this transaction "
                               "has no row to update",
                               g->topic, (int)g->partition);
            return TM_FATAL;
        }
    if ((r = write_effects(x, err)) != TM_OK)
        return r;
    s->host->fault(TM_FAULT_AFTER_EFFECTS);
    return TM_OK;
}

tm_status pg_commit(void *sink, const tm_batch *b, tm_error *err) {
    pg_sink *s = sink;
    pg_run x = {.s = s, .b = b, .wall_ms = wall_ms()};
    s->host->fault(TM_FAULT_BEFORE_BEGIN);
    tm_status r = pg_ready(s, err);
    if (r == TM_OK)
        r = pg_marker_prepare(s, err);
    if (r != TM_OK)
        return r;
    pg_call_begin(s, b->deadline_ms);
    if (pg_should_stop(s)) {
        s->host->set_error(
            err, "batch %s: given up before BEGIN (%s)", b->batch_id,
            atomic_load(&s->interrupted) ? "interrupted"
                                         : "past the batch deadline");
        return TM_RETRY;
    }
    size_t n = b->nranges ? b->nranges : 1;
    x.stored = calloc(n, sizeof *x.stored);
    x.present = calloc(n, 1);
    x.rows = calloc(3 * n, sizeof *x.rows);
    x.write = calloc(b->nrecords ? b->nrecords : 1, 1);
    if (!x.stored || !x.present || !x.rows || !x.write) {
        free(x.stored);
        free(x.present);
        free(x.rows);
        free(x.write);
        s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
        return TM_RETRY;
    }
    x.dls = x.rows + n;
    x.dups = x.rows + 2 * n;
    r = lock_check_write(&x, err);
    while (r != TM_OK && x.redo) {
        /* a record's key refused: again, that record a dead letter; or the
         * keys held in memory decided again, the connector's row locked
         * first */
        pg_rollback(s);
        pg_keyset_abort(s);
        s->follow.ready = 0; /* the DDL went back too */
        x.redo = 0;
        x.nwrite = 0;
        memset(x.rows, 0, 3 * n * sizeof *x.rows);
        memset(x.write, 0, b->nrecords ? b->nrecords : 1);
        r = s->conn ? lock_check_write(&x, err) : TM_RETRY;
    }
    if (r != TM_OK) {
        pg_rollback(s);
        s->follow.ready = 0; /* the DDL went back too */
        pg_keyset_abort(s);
    } else if ((r = update_and_commit(&x, err)) != TM_OK) {
        /* An error the server answered means no COMMIT happened (it skips
         * the rest of a pipeline after an error); a lost connection leaves
         * the outcome unknown: RETRY, and the resend's marker check settles
         * it (OK or ALREADY). */
        if (r != TM_FATAL || !s->conn || PQstatus(s->conn) != CONNECTION_OK)
            r = TM_RETRY;
        pg_rollback(s);
        s->follow.ready = 0; /* the DDL went back too */
        /* the set as it was: a batch that landed is loaded by the next
         * commit as another host's would be */
        pg_keyset_abort(s);
    } else {
        pg_keyset_committed(s);
    }
    free(x.stored);
    free(x.present);
    free(x.rows);
    free(x.write);
    for (size_t j = 0; x.refused && j < b->nrecords; j++)
        free(x.refused[j]);
    free(x.refused);
    if (r == TM_OK)
        s->host->fault(TM_FAULT_AFTER_COMMIT);
    return r;
}
