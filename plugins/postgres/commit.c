/* One batch, one PostgreSQL transaction: the marker check on markers held
 * FOR UPDATE, the rows (COPY), the business keys, the dead letters and the
 * advanced markers commit together or not at all. The host's fault hook
 * marks each crash window. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg_sink.h"

typedef struct pg_run {
    pg_sink *s;
    const tm_batch *b;
    tm_marker *stored;           /* per range, locked in the transaction */
    uint64_t *rows, *dls, *dups; /* per range, this batch's own counts */
    unsigned char *write;        /* per record: 1 when it becomes a row */
    size_t nwrite;
    long only; /* >= 0: write only this record */
} pg_run;

/* ---- COPY text format ---------------------------------------------------- */

/* Text per COPY's text format: backslash, newline, CR and tab escaped. */
static void copy_text(pg_buf *b, const char *p, size_t n) {
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        const char *esc = NULL;
        switch (p[i]) {
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default: continue;
        }
        pg_buf_addn(b, p + from, i - from);
        pg_buf_add(b, esc);
        from = i + 1;
    }
    pg_buf_addn(b, p + from, n - from);
}

/* bytea in hex form; its leading backslash escaped for COPY. */
static void copy_bytes(pg_buf *b, const unsigned char *p, size_t n) {
    static const char HEX[] = "0123456789abcdef";
    char chunk[128];
    size_t k = 0;
    pg_buf_add(b, "\\\\x");
    for (size_t i = 0; i < n; i++) {
        chunk[k++] = HEX[p[i] >> 4];
        chunk[k++] = HEX[p[i] & 15];
        if (k == sizeof chunk) {
            pg_buf_addn(b, chunk, k);
            k = 0;
        }
    }
    pg_buf_addn(b, chunk, k);
}

/* Microseconds since 1970-01-01 UTC as a timestamptz literal. */
static void copy_timestamp(pg_buf *b, int64_t us) {
    int64_t secs = us / 1000000, frac = us % 1000000;
    if (frac < 0) {
        frac += 1000000;
        secs -= 1;
    }
    time_t t = (time_t)secs;
    struct tm tm;
    char out[80];
    if (!gmtime_r(&t, &tm)) {
        b->oom = 1; /* out of range: refused as a whole below */
        return;
    }
    long year = (long)tm.tm_year + 1900;
    int bc = year <= 0;
    snprintf(out, sizeof out, "%04ld-%02d-%02d %02d:%02d:%02d.%06d+00%s",
             bc ? 1 - year : year, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (int)frac, bc ? " BC" : "");
    pg_buf_add(b, out);
}

static void copy_value(pg_buf *b, const tm_column *col, const tm_value *v) {
    char num[64];
    if (v->is_null) {
        pg_buf_add(b, "\\N");
        return;
    }
    switch (col->type) {
    case TM_TYPE_INT:
        snprintf(num, sizeof num, "%lld", (long long)v->v.i);
        pg_buf_add(b, num);
        break;
    case TM_TYPE_BOOL: pg_buf_add(b, v->v.i ? "t" : "f"); break;
    case TM_TYPE_FLOAT:
        if (isnan(v->v.f))
            pg_buf_add(b, "NaN");
        else if (isinf(v->v.f))
            pg_buf_add(b, v->v.f > 0 ? "Infinity" : "-Infinity");
        else {
            snprintf(num, sizeof num, "%.17g", v->v.f);
            pg_buf_add(b, num);
        }
        break;
    case TM_TYPE_TIMESTAMP: copy_timestamp(b, v->v.i); break;
    case TM_TYPE_TEXT:
    case TM_TYPE_JSON:
        copy_text(b, v->v.s.ptr ? v->v.s.ptr : "", v->v.s.len);
        break;
    case TM_TYPE_BYTES:
        copy_bytes(b, (const unsigned char *)(v->v.s.ptr ? v->v.s.ptr : ""),
                   v->v.s.len);
        break;
    }
}

/* One COPY line: mapped values, then the hidden coordinates (and the
 * record's index for the upsert staging table). */
static void copy_line(pg_run *x, pg_buf *b, size_t j, int with_seq) {
    const tm_sink_config *c = x->s->config;
    const tm_record *r = TM_CELEM(tm_record, x->b->records, j);
    const tm_range *g = TM_CELEM(tm_range, x->b->ranges, r->range);
    char num[64];
    for (size_t k = 0; k < c->ncolumns; k++) {
        copy_value(b, TM_CELEM(tm_column, c->columns, k),
                   TM_CELEM(tm_value, r->values, k));
        pg_buf_add(b, "\t");
    }
    copy_text(b, g->topic, strlen(g->topic));
    snprintf(num, sizeof num, "\t%d\t%lld\t", (int)g->partition,
             (long long)r->offset);
    pg_buf_add(b, num);
    if (r->identity)
        copy_text(b, r->identity, strlen(r->identity));
    else
        pg_buf_add(b, "\\N");
    if (with_seq) {
        snprintf(num, sizeof num, "\t%zu", j);
        pg_buf_add(b, num);
    }
    pg_buf_add(b, "\n");
}

static void column_list(pg_sink *s, pg_buf *b, int with_seq) {
    for (size_t i = 0; i < s->config->ncolumns; i++) {
        pg_buf_ident(s, b, TM_CELEM(tm_column, s->config->columns, i)->name);
        pg_buf_add(b, ", ");
    }
    pg_buf_add(b, "_tm_topic, _tm_partition, _tm_offset, _tm_identity");
    if (with_seq)
        pg_buf_add(b, ", _tm_seq");
}

/* Ends a COPY, sending ERRMSG (abort) or nothing; the final result. */
static tm_status copy_finish(pg_sink *s, const char *errmsg, tm_error *err) {
    tm_status r = TM_OK;
    if (PQputCopyEnd(s->conn, errmsg) != 1) {
        r = pg_fail(s, NULL, "COPY: ending", err);
        return r;
    }
    PGresult *res;
    while (s->conn && (res = PQgetResult(s->conn)) != NULL) {
        if (PQresultStatus(res) != PGRES_COMMAND_OK && r == TM_OK)
            r = pg_fail(s, res, "COPY rows", err);
        else
            PQclear(res);
    }
    if (r == TM_OK && s->conn && PQstatus(s->conn) != CONNECTION_OK)
        r = pg_fail(s, NULL, "COPY rows", err);
    return r;
}

/* COPY of the records that become rows into TARGET. */
static tm_status copy_rows(pg_run *x, const char *target, int with_seq,
                           tm_error *err) {
    pg_sink *s = x->s;
    pg_buf sql = {0}, data = {0};
    pg_buf_add(&sql, "COPY ");
    pg_buf_add(&sql, target);
    pg_buf_add(&sql, " (");
    column_list(s, &sql, with_seq);
    pg_buf_add(&sql, ") FROM STDIN");
    if (sql.oom) {
        pg_buf_free(&sql);
        s->host->set_error(err, "out of memory");
        return TM_RETRY;
    }
    PGresult *res = PQexec(s->conn, sql.p);
    pg_buf_free(&sql);
    if (!res || PQresultStatus(res) != PGRES_COPY_IN)
        return pg_fail(s, res, "COPY: starting", err);
    PQclear(res);
    const char *abort_msg = NULL;
    for (size_t j = 0; j < x->b->nrecords && !abort_msg; j++) {
        if (!x->write[j] || (x->only >= 0 && (size_t)x->only != j))
            continue;
        copy_line(x, &data, j, with_seq);
        if (data.oom) {
            abort_msg = "out of memory (or a timestamp out of range)";
            break;
        }
        if (data.len >= 65536 || j + 1 == x->b->nrecords) {
            if (pg_should_stop(s))
                abort_msg = "interrupted or past the batch deadline";
            else if (PQputCopyData(s->conn, data.p, (int)data.len) != 1) {
                pg_buf_free(&data);
                return pg_fail(s, NULL, "COPY: sending rows", err);
            }
            data.len = 0;
        }
    }
    if (!abort_msg && data.len > 0 &&
        PQputCopyData(s->conn, data.p, (int)data.len) != 1) {
        pg_buf_free(&data);
        return pg_fail(s, NULL, "COPY: sending rows", err);
    }
    pg_buf_free(&data);
    tm_status r = copy_finish(s, abort_msg, err);
    if (abort_msg) {
        s->host->set_error(err, "batch %s: COPY given up: %s", x->b->batch_id,
                           abort_msg);
        return strncmp(abort_msg, "out of", 6) == 0 ? TM_FATAL : TM_RETRY;
    }
    return r;
}

/* Upsert: COPY into a session-temporary staging table, then one INSERT ...
 * ON CONFLICT (keys) DO UPDATE; the last record of a key in the batch
 * wins, as if the records were applied one by one. */
static tm_status upsert_rows(pg_run *x, tm_error *err) {
    pg_sink *s = x->s;
    const tm_sink_config *c = s->config;
    pg_buf b = {0}, keys = {0};
    pg_buf_add(&b, "CREATE TEMP TABLE IF NOT EXISTS tm_stage (LIKE ");
    pg_buf_add(&b, s->q_table);
    pg_buf_add(&b, ", _tm_seq bigint) ON COMMIT DELETE ROWS");
    tm_status r =
        b.oom ? TM_RETRY : pg_exec(s, b.p, "creating the staging table", err);
    pg_buf_free(&b);
    if (r != TM_OK)
        return r;
    if ((r = copy_rows(x, "pg_temp.tm_stage", 1, err)) != TM_OK)
        return r;
    const char *sep = "";
    for (size_t i = 0; i < c->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, c->columns, i);
        if (!col->key)
            continue;
        pg_buf_add(&keys, sep);
        pg_buf_ident(s, &keys, col->name);
        sep = ", ";
    }
    pg_buf_add(&b, "INSERT INTO ");
    pg_buf_add(&b, s->q_table);
    pg_buf_add(&b, " AS t (");
    column_list(s, &b, 0);
    pg_buf_add(&b, ") SELECT ");
    column_list(s, &b, 0);
    pg_buf_add(&b, " FROM (SELECT DISTINCT ON (");
    pg_buf_add(&b, keys.p ? keys.p : "");
    pg_buf_add(&b, ") * FROM pg_temp.tm_stage ORDER BY ");
    pg_buf_add(&b, keys.p ? keys.p : "");
    pg_buf_add(&b, ", _tm_seq DESC) AS staged ON CONFLICT (");
    pg_buf_add(&b, keys.p ? keys.p : "");
    pg_buf_add(&b, ") DO UPDATE SET ");
    for (size_t i = 0; i < c->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, c->columns, i);
        if (col->key)
            continue;
        pg_buf_ident(s, &b, col->name);
        pg_buf_add(&b, " = EXCLUDED.");
        pg_buf_ident(s, &b, col->name);
        pg_buf_add(&b, ", ");
    }
    pg_buf_add(&b, "_tm_topic = EXCLUDED._tm_topic, _tm_partition = "
                   "EXCLUDED._tm_partition, _tm_offset = EXCLUDED._tm_offset, "
                   "_tm_identity = EXCLUDED._tm_identity");
    r = b.oom || keys.oom ? TM_RETRY
                          : pg_exec(s, b.p, "upserting the staged rows", err);
    pg_buf_free(&b);
    pg_buf_free(&keys);
    if (r == TM_OK) /* one-by-one retries stage again */
        r = pg_exec(s, "DELETE FROM pg_temp.tm_stage",
                    "clearing the staging table", err);
    return r;
}

/* ---- keys and dead letters ---------------------------------------------- */

static int64_t applied_at(const tm_record *r) {
    if (r->timestamp_ms >= 0)
        return r->timestamp_ms;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static tm_status insert_dead_letter(pg_run *x, const tm_range *g,
                                    int64_t offset, int64_t ts,
                                    const char *reason, const char *detail,
                                    const void *key, size_t key_len,
                                    const void *value, size_t value_len,
                                    const char *headers, tm_error *err) {
    pg_sink *s = x->s;
    char part[16], off[32], tsb[32];
    snprintf(part, sizeof part, "%d", (int)g->partition);
    snprintf(off, sizeof off, "%lld", (long long)offset);
    snprintf(tsb, sizeof tsb, "%lld", (long long)ts);
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
                   "headers, batch_id) VALUES ($1, $2, $3::int, $4::bigint, "
                   "$5::bigint, $6, $7, $8::bytea, $9::bytea, $10, $11)");
    tm_status r = TM_RETRY;
    PGresult *res = b.oom ? NULL
                          : pg_query(s, b.p, 11, v, lens, fmts, 0,
                                     "writing dead letters", &r, err);
    pg_buf_free(&b);
    PQclear(res);
    return r;
}

static tm_status record_dead_letter(pg_run *x, const tm_record *r,
                                    const tm_range *g, tm_dl_reason reason,
                                    const char *detail, tm_error *err) {
    x->dls[r->range]++;
    return insert_dead_letter(
        x, g, r->offset, r->timestamp_ms, tm_dl_reason_name(reason), detail,
        r->key, r->key_len, r->value, r->value_len, r->headers_json, err);
}

/* 0 new (write the row), 1 duplicate, 2 conflict (detail filled); -1 on
 * failure with *r set. */
static int key_outcome(pg_run *x, const tm_record *r, const tm_range *g,
                       char *detail, size_t size, tm_status *st,
                       tm_error *err) {
    pg_sink *s = x->s;
    char part[16], off[32], at[32];
    snprintf(part, sizeof part, "%d", (int)g->partition);
    snprintf(off, sizeof off, "%lld", (long long)r->offset);
    snprintf(at, sizeof at, "%lld", (long long)applied_at(r));
    const char *v[7] = {s->config->connector,
                        r->identity,
                        r->identity_hash,
                        g->topic,
                        part,
                        off,
                        at};
    pg_buf b = {0};
    pg_buf_add(&b, "INSERT INTO ");
    pg_buf_add(&b, s->q_keys);
    pg_buf_add(&b, " (connector, identity, payload_hash, first_topic, "
                   "first_partition, first_offset, applied_at) VALUES ($1, "
                   "$2, $3, $4, $5::int, $6::bigint, $7::bigint) ON CONFLICT "
                   "DO NOTHING RETURNING 1");
    PGresult *res = b.oom ? NULL
                          : pg_query(s, b.p, 7, v, NULL, NULL, 1,
                                     "storing business keys", st, err);
    if (!res) {
        if (b.oom)
            *st = TM_RETRY;
        pg_buf_free(&b);
        return -1;
    }
    int fresh = PQntuples(res) == 1;
    PQclear(res);
    if (fresh) {
        pg_buf_free(&b);
        return 0;
    }
    b.len = 0;
    pg_buf_add(&b, "SELECT payload_hash, first_topic, first_partition, "
                   "first_offset FROM ");
    pg_buf_add(&b, s->q_keys);
    pg_buf_add(&b, " WHERE connector = $1 AND identity = $2");
    res = b.oom ? NULL
                : pg_query(s, b.p, 2, v, NULL, NULL, 1,
                           "comparing business keys", st, err);
    pg_buf_free(&b);
    if (!res)
        return -1;
    if (PQntuples(res) != 1) {
        /* ON CONFLICT saw it, the read does not: deleted concurrently. */
        PQclear(res);
        s->host->set_error(err, "business key %.100s vanished concurrently",
                           r->identity);
        *st = TM_RETRY;
        return -1;
    }
    const char *h = PQgetisnull(res, 0, 0) ? NULL : PQgetvalue(res, 0, 0);
    int same = (!h && !r->identity_hash) ||
               (h && r->identity_hash && strcmp(h, r->identity_hash) == 0);
    if (!same)
        snprintf(detail, size,
                 "identity %.120s first applied from %.100s[%s]@%s with "
                 "payload hash %.80s, now %.80s",
                 r->identity, PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 2),
                 PQgetvalue(res, 0, 3), h ? h : "(none)",
                 r->identity_hash ? r->identity_hash : "(none)");
    PQclear(res);
    return same ? 1 : 2;
}

static tm_status prune_keys(pg_run *x, tm_error *err) {
    int64_t newest = INT64_MIN;
    for (size_t j = 0; j < x->b->nrecords; j++) {
        const tm_record *r = TM_CELEM(tm_record, x->b->records, j);
        if (r->identity && applied_at(r) > newest)
            newest = applied_at(r);
    }
    if (newest == INT64_MIN)
        return TM_OK;
    char h[32];
    snprintf(h, sizeof h, "%lld",
             (long long)(newest - x->s->set.retention_s * 1000));
    const char *v[2] = {x->s->config->connector, h};
    pg_buf b = {0};
    pg_buf_add(&b, "DELETE FROM ");
    pg_buf_add(&b, x->s->q_keys);
    pg_buf_add(&b, " WHERE connector = $1 AND applied_at < $2::bigint");
    tm_status r = TM_RETRY;
    PGresult *res = b.oom ? NULL
                          : pg_query(x->s, b.p, 2, v, NULL, NULL, 0,
                                     "pruning expired business keys", &r, err);
    pg_buf_free(&b);
    PQclear(res);
    return r;
}

static tm_status write_rows(pg_run *x, tm_error *err) {
    return x->s->set.mode == PG_UPSERT ? upsert_rows(x, err)
                                       : copy_rows(x, x->s->q_table, 0, err);
}

/* A data exception (22xxx: bad encoding, NUL byte, out of range) or an
 * integrity constraint (23xxx: NOT NULL, CHECK, a unique index of the
 * user's) refuses a row, not the batch. */
static int rejectable(const pg_sink *s) {
    return strncmp(s->last_state, "22", 2) == 0 ||
           strncmp(s->last_state, "23", 2) == 0;
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

/* All rows in one COPY under a savepoint; when the table refuses one, the
 * rows again one by one (a savepoint each): a refused row becomes a dead
 * letter "rejected" (its business key, if any, is forgotten again). */
static tm_status write_rows_or_reject(pg_run *x, tm_error *err) {
    pg_sink *s = x->s;
    int dedup = (s->config->flags & TM_CONFIG_DEDUP) != 0;
    tm_status r = pg_exec(s, "SAVEPOINT tm_rows", "SAVEPOINT", err);
    if (r != TM_OK)
        return r;
    s->last_state[0] = '\0';
    if ((r = write_rows(x, err)) == TM_OK || !s->conn || !rejectable(s))
        return r;
    if ((r = pg_exec(s, "ROLLBACK TO SAVEPOINT tm_rows", "ROLLBACK TO", err)) !=
        TM_OK)
        return r;
    for (size_t j = 0; j < x->b->nrecords; j++) {
        if (!x->write[j])
            continue;
        const tm_record *rec = TM_CELEM(tm_record, x->b->records, j);
        const tm_range *g = TM_CELEM(tm_range, x->b->ranges, rec->range);
        if ((r = pg_exec(s, "SAVEPOINT tm_row", "SAVEPOINT", err)) != TM_OK)
            return r;
        x->only = (long)j;
        s->last_state[0] = '\0';
        r = write_rows(x, err);
        x->only = -1;
        if (r == TM_OK) {
            if ((r = pg_exec(s, "RELEASE SAVEPOINT tm_row", "RELEASE", err)) !=
                TM_OK)
                return r;
            continue;
        }
        if (!s->conn || !rejectable(s))
            return r;
        char detail[TM_ERROR_MAX];
        snprintf(detail, sizeof detail, "%s", err->message);
        if ((r = pg_exec(s, "ROLLBACK TO SAVEPOINT tm_row", "ROLLBACK TO",
                         err)) != TM_OK)
            return r;
        x->write[j] = 0;
        x->nwrite--;
        x->rows[rec->range]--;
        if (dedup && rec->identity && (r = forget_key(x, rec, err)) != TM_OK)
            return r;
        if ((r = record_dead_letter(x, rec, g, TM_DL_REJECTED, detail, err)) !=
            TM_OK)
            return r;
    }
    err->message[0] = '\0';
    return TM_OK;
}

/* Every record: with dedup a duplicate, a conflict or a row; then the
 * rows in one COPY; then the host's dead letters. */
static tm_status write_effects(pg_run *x, tm_error *err) {
    const tm_batch *b = x->b;
    int dedup = (x->s->config->flags & TM_CONFIG_DEDUP) != 0;
    tm_status r = TM_OK;
    char detail[512];
    if (dedup && x->s->set.retention_s > 0 && (r = prune_keys(x, err)) != TM_OK)
        return r;
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
        int outcome = 0;
        if (dedup && rec->identity) {
            outcome = key_outcome(x, rec, g, detail, sizeof detail, &r, err);
            if (outcome < 0)
                return r;
        }
        if (outcome == 1) {
            x->dups[rec->range]++;
        } else if (outcome == 2) {
            if ((r = record_dead_letter(x, rec, g, TM_DL_IDENTITY_CONFLICT,
                                        detail, err)) != TM_OK)
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
        x->dls[d->range]++;
        if ((r = insert_dead_letter(x, g, d->offset, d->timestamp_ms,
                                    tm_dl_reason_name(d->reason), d->detail,
                                    d->key, d->key_len, d->value, d->value_len,
                                    d->headers_json, err)) != TM_OK)
            return r;
    }
    return TM_OK;
}

/* Inside the transaction: lock and check the markers, effects, markers. */
static tm_status apply(pg_run *x, tm_error *err) {
    pg_sink *s = x->s;
    const tm_batch *b = x->b;
    tm_status r = TM_OK;
    for (size_t i = 0; r == TM_OK && i < b->nranges; i++) {
        const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
        x->stored[i].struct_size = sizeof(tm_marker);
        x->stored[i].topic = g->topic;
        x->stored[i].partition = g->partition;
        r = pg_marker_get(s, g->topic, g->partition, 1, &x->stored[i], err);
    }
    if (r != TM_OK)
        return r;
    /* The marker rows are locked FOR UPDATE: they cannot move under the
     * check. ALREADY / FENCED / CONFLICT write nothing. */
    if ((r = s->host->marker_check(b, x->stored, err)) != TM_OK)
        return r;
    if ((r = write_effects(x, err)) != TM_OK)
        return r;
    s->host->fault(TM_FAULT_AFTER_EFFECTS);
    for (size_t i = 0; r == TM_OK && i < b->nranges; i++) {
        s->host->marker_advance(&x->stored[i], b, i, x->rows[i], x->dls[i],
                                x->dups[i]);
        r = pg_marker_put(s, &x->stored[i], err);
    }
    if (r != TM_OK)
        return r;
    s->host->fault(TM_FAULT_AFTER_MARKER);
    return TM_OK;
}

tm_status pg_commit(void *sink, const tm_batch *b, tm_error *err) {
    pg_sink *s = sink;
    pg_run x = {.s = s, .b = b, .only = -1};
    s->host->fault(TM_FAULT_BEFORE_BEGIN);
    tm_status r = pg_ready(s, err);
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
    x.rows = calloc(3 * n, sizeof *x.rows);
    x.write = calloc(b->nrecords ? b->nrecords : 1, 1);
    if (!x.stored || !x.rows || !x.write) {
        free(x.stored);
        free(x.rows);
        free(x.write);
        s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
        return TM_RETRY;
    }
    x.dls = x.rows + n;
    x.dups = x.rows + 2 * n;
    r = pg_exec(s, "BEGIN", "BEGIN", err);
    if (r == TM_OK)
        r = apply(&x, err);
    if (r != TM_OK) {
        pg_rollback(s);
    } else {
        /* A lost connection here leaves the outcome unknown: RETRY, and the
         * resend's marker check settles it (OK or ALREADY). */
        s->deadline_ms = 0;
        PGresult *res = PQexec(s->conn, "COMMIT");
        if (res && PQresultStatus(res) == PGRES_COMMAND_OK &&
            strcmp(PQcmdStatus(res), "COMMIT") == 0) {
            PQclear(res);
        } else if (res && PQresultStatus(res) == PGRES_COMMAND_OK) {
            PQclear(res); /* "ROLLBACK": the transaction had failed */
            s->host->set_error(err, "batch %s: COMMIT rolled back",
                               b->batch_id);
            r = TM_RETRY;
        } else {
            r = pg_fail(s, res, "COMMIT", err);
            if (r == TM_FATAL && s->conn &&
                PQstatus(s->conn) == CONNECTION_OK) {
                pg_rollback(s);
            } else {
                r = TM_RETRY;
            }
        }
    }
    free(x.stored);
    free(x.rows);
    free(x.write);
    if (r == TM_OK)
        s->host->fault(TM_FAULT_AFTER_COMMIT);
    return r;
}
