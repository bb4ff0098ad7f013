/* Rows with COPY: the COPY text format of every column type, one COPY of
 * a batch's rows straight into the table (append) or into a staging table
 * followed by one INSERT ... ON CONFLICT (upsert). The statement that goes
 * before a COPY (a SAVEPOINT) travels in the same round trip. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "binarray.h"
#include "pg_sink.h"

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

/* bytea in hex form; its leading backslash escaped for COPY (ESC) or as
 * the type's input function reads it. */
static void copy_bytes(pg_buf *b, const unsigned char *p, size_t n, int esc) {
    static const char HEX[] = "0123456789abcdef";
    char chunk[128];
    size_t k = 0;
    pg_buf_add(b, esc ? "\\\\x" : "\\x");
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

/* JSON text; a string with a NUL byte as {"base64": ...} (jsonb_text.c). */
static void copy_json(pg_buf *b, const char *p, size_t n, int esc) {
    pg_buf fixed = {0};
    if (pg_jsonb_text(p, n, &fixed)) {
        p = fixed.p ? fixed.p : "";
        n = fixed.len;
    }
    if (esc)
        copy_text(b, p, n);
    else
        pg_buf_addn(b, p, n);
    if (fixed.oom)
        b->oom = 1;
    pg_buf_free(&fixed);
}

/* A value in its type's text form, escaped for COPY's text format (ESC)
 * or as it is (an array element sent in binary). */
static void copy_value(pg_buf *b, const tm_column *col, const tm_value *v,
                       int esc) {
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
        if (esc)
            copy_text(b, v->v.s.ptr ? v->v.s.ptr : "", v->v.s.len);
        else
            pg_buf_addn(b, v->v.s.ptr ? v->v.s.ptr : "", v->v.s.len);
        break;
    case TM_TYPE_JSON:
        copy_json(b, v->v.s.ptr ? v->v.s.ptr : "", v->v.s.len, esc);
        break;
    case TM_TYPE_BYTES:
        copy_bytes(b, (const unsigned char *)(v->v.s.ptr ? v->v.s.ptr : ""),
                   v->v.s.len, esc);
        break;
    }
}

/* One COPY line: mapped values, then the hidden coordinates (and the
 * record's index for the upsert staging table). */
static void copy_line(const pg_sink *s, const tm_batch *bt, pg_buf *b, size_t j,
                      int with_seq) {
    const tm_sink_config *c = s->config;
    const tm_record *r = TM_CELEM(tm_record, bt->records, j);
    const tm_range *g = TM_CELEM(tm_range, bt->ranges, r->range);
    char num[64];
    for (size_t k = 0; k < c->ncolumns; k++) {
        copy_value(b, TM_CELEM(tm_column, c->columns, k),
                   TM_CELEM(tm_value, r->values, k), 1);
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
        snprintf(num, sizeof num, "\t%zu\t%u", j, (unsigned)TM_RECORD_OP(r));
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
        pg_buf_add(b, ", _tm_seq, _tm_op");
}

/* Ends a COPY, sending ERRMSG (abort) or nothing; the final result. */
tm_status pg_copy_finish(pg_sink *s, const char *errmsg, const char *step,
                         tm_error *err) {
    tm_status r = TM_OK;
    if (PQputCopyEnd(s->conn, errmsg) != 1) {
        r = pg_fail(s, NULL, "COPY: ending", err);
        return r;
    }
    PGresult *res;
    while (s->conn && (res = PQgetResult(s->conn)) != NULL) {
        if (PQresultStatus(res) != PGRES_COMMAND_OK && r == TM_OK)
            r = pg_fail(s, res, step, err);
        else
            PQclear(res);
    }
    if (r == TM_OK && s->conn && PQstatus(s->conn) != CONNECTION_OK)
        r = pg_fail(s, NULL, step, err);
    return r;
}

/* Sends LEAD and the COPY as one simple query (one round trip) and reads
 * up to the server's CopyInResponse. A failing LEAD statement makes the
 * server skip the COPY: its error is the one reported. */
tm_status pg_copy_start(pg_sink *s, const char *lead, const char *copy,
                        tm_error *err) {
    tm_status stop = pg_if_interrupted(s, "COPY: starting", err);
    if (stop != TM_OK)
        return stop;
    pg_buf sql = {0};
    if (lead) {
        pg_buf_add(&sql, lead);
        pg_buf_add(&sql, "; ");
    }
    pg_buf_add(&sql, copy);
    if (sql.oom) {
        pg_buf_free(&sql);
        s->host->set_error(err, "out of memory");
        return TM_RETRY;
    }
    int sent = PQsendQuery(s->conn, sql.p);
    pg_buf_free(&sql);
    if (sent != 1)
        return pg_fail(s, NULL, "COPY: starting", err);
    for (;;) {
        PGresult *res = PQgetResult(s->conn);
        ExecStatusType t = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (t == PGRES_COPY_IN) {
            PQclear(res);
            return TM_OK;
        }
        if (res && t == PGRES_COMMAND_OK) { /* a LEAD statement */
            PQclear(res);
            continue;
        }
        tm_status r = pg_fail(s, res, "COPY: starting", err);
        while (s->conn && PQstatus(s->conn) == CONNECTION_OK &&
               (res = PQgetResult(s->conn)) != NULL)
            PQclear(res); /* up to ReadyForQuery */
        return r;
    }
}

/* COPY of the records that become rows into TARGET. */
static tm_status copy_rows(pg_sink *s, const pg_rows *x, const char *target,
                           int with_seq, const char *lead, tm_error *err) {
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
    tm_status started = pg_copy_start(s, lead, sql.p, err);
    pg_buf_free(&sql);
    if (started != TM_OK)
        return started;
    const char *abort_msg = NULL;
    for (size_t j = x->from; j < x->to && !abort_msg; j++) {
        if (!x->write[j])
            continue;
        copy_line(s, x->b, &data, j, with_seq);
        if (data.oom) {
            abort_msg = "out of memory (or a timestamp out of range)";
            break;
        }
        if (data.len >= 65536 || j + 1 == x->to) {
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
    tm_status r = pg_copy_finish(s, abort_msg, "COPY rows", err);
    if (abort_msg) {
        s->host->set_error(err, "batch %s: COPY given up: %s", x->b->batch_id,
                           abort_msg);
        return strncmp(abort_msg, "out of", 6) == 0 ? TM_FATAL : TM_RETRY;
    }
    return r;
}

/* "k1, k2": the key columns. */
static void key_list(pg_sink *s, pg_buf *b) {
    const char *sep = "";
    for (size_t i = 0; i < s->config->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, s->config->columns, i);
        if (!col->key)
            continue;
        pg_buf_add(b, sep);
        pg_buf_ident(s, b, col->name);
        sep = ", ";
    }
}

/* ON CONFLICT (KEYS) DO UPDATE of every mapped and hidden column (the key
 * columns too with change events: a row is its last event's image). */
static void on_conflict_update(pg_sink *s, pg_buf *b, const char *keys,
                               int cdc) {
    pg_buf_add(b, " ON CONFLICT (");
    pg_buf_add(b, keys);
    pg_buf_add(b, ") DO UPDATE SET ");
    for (size_t i = 0; i < s->config->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, s->config->columns, i);
        if (col->key && !cdc)
            continue;
        pg_buf_ident(s, b, col->name);
        pg_buf_add(b, " = EXCLUDED.");
        pg_buf_ident(s, b, col->name);
        pg_buf_add(b, ", ");
    }
    pg_buf_add(b, "_tm_topic = EXCLUDED._tm_topic, _tm_partition = "
                  "EXCLUDED._tm_partition, _tm_offset = EXCLUDED._tm_offset, "
                  "_tm_identity = EXCLUDED._tm_identity");
}

/* The staged records, the last of each key (KEYS) only. */
static void last_of_each_key(pg_buf *b, const char *keys) {
    pg_buf_add(b, "(SELECT DISTINCT ON (");
    pg_buf_add(b, keys);
    pg_buf_add(b, ") * FROM pg_temp.tm_stage ORDER BY ");
    pg_buf_add(b, keys);
    pg_buf_add(b, ", _tm_seq DESC) AS staged");
}

/* Change events: every key with a delete among its staged events loses
 * its row first (a key not stored is fine), so that a key deleted and
 * created again in one write gets a new row (the columns the mapping
 * leaves out take their defaults again), as one event at a time would
 * give it; the INSERT then takes the keys whose last event is an upsert.
 * The join is the key columns' own equality (their collation). */
static void delete_staged(pg_sink *s, pg_buf *b, const char *keys) {
    const char *sep = " WHERE ";
    pg_buf_add(b, "DELETE FROM ");
    pg_buf_add(b, s->q_table);
    pg_buf_add(b, " AS t USING (SELECT ");
    pg_buf_add(b, keys);
    pg_buf_add(b, " FROM pg_temp.tm_stage WHERE _tm_op = 1) AS gone");
    for (size_t i = 0; i < s->config->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, s->config->columns, i);
        if (!col->key)
            continue;
        pg_buf_add(b, sep);
        pg_buf_add(b, "t.");
        pg_buf_ident(s, b, col->name);
        pg_buf_add(b, " = gone.");
        pg_buf_ident(s, b, col->name);
        sep = " AND ";
    }
    pg_buf_add(b, "; ");
}

/* Upsert: COPY into a session-temporary staging table, then one INSERT ...
 * ON CONFLICT (keys) DO UPDATE; the last record of a key in the batch
 * wins, as if the records were applied one by one. Which records share a
 * key is the database's decision (DISTINCT ON compares by the key
 * columns' equality, their collation included: the staging table takes
 * the table's column collations), never the bytes.
 *
 * Change events (TM_CONFIG_CDC), docs/sinks/postgres.md step 4: each key
 * collapses to its last event; the keys with a delete lose their row
 * first (delete_staged), then the last upserts are inserted in offset
 * order (_tm_seq), their key columns set too, so a row is its last
 * event's image, the key's spelling under a case-insensitive collation
 * included. Deleting first only frees values a UNIQUE constraint could
 * meet, and inserting in offset order applies a value handed from one
 * key to another in its order: a batch that is valid one event at a time
 * is most often accepted as it is. Any order it does not keep (a value
 * swapped between keys, a foreign key within the table) makes the table
 * refuse the write, and the caller's halving (commit.c) applies smaller
 * runs, down to single events, which are exact. */
static tm_status stage_upsert(pg_sink *s, const pg_rows *x, const char *lead,
                              tm_error *err) {
    const tm_sink_config *c = s->config;
    pg_buf b = {0}, keys = {0};
    if (lead) {
        pg_buf_add(&b, lead);
        pg_buf_add(&b, "; ");
    }
    /* The mapped and hidden columns only, with their types and without
     * their constraints: (LIKE table) would copy the NOT NULL of columns
     * the mapping leaves to their defaults (a bigserial key, a created_at
     * DEFAULT now()) but not the defaults, and refuse every record. */
    pg_buf_add(&b, "CREATE TEMP TABLE IF NOT EXISTS tm_stage ON COMMIT "
                   "DELETE ROWS AS SELECT ");
    column_list(s, &b, 0);
    pg_buf_add(&b, ", NULL::bigint AS _tm_seq, NULL::integer AS _tm_op FROM ");
    pg_buf_add(&b, s->q_table);
    pg_buf_add(&b, " WITH NO DATA");
    if (b.oom) {
        pg_buf_free(&b);
        s->host->set_error(err, "out of memory");
        return TM_RETRY;
    }
    tm_status r = copy_rows(s, x, "pg_temp.tm_stage", 1, b.p, err);
    pg_buf_free(&b);
    if (r != TM_OK)
        return r;
    key_list(s, &keys);
    int cdc = (c->flags & TM_CONFIG_CDC) != 0;
    if (cdc)
        delete_staged(s, &b, keys.p ? keys.p : "");
    pg_buf_add(&b, "INSERT INTO ");
    pg_buf_add(&b, s->q_table);
    pg_buf_add(&b, " AS t (");
    column_list(s, &b, 0);
    pg_buf_add(&b, ") SELECT ");
    column_list(s, &b, 0);
    pg_buf_add(&b, " FROM ");
    last_of_each_key(&b, keys.p ? keys.p : "");
    if (cdc)
        pg_buf_add(&b, " WHERE staged._tm_op = 0 ORDER BY staged._tm_seq");
    on_conflict_update(s, &b, keys.p ? keys.p : "", cdc);
    /* Emptied in the same round trip: one-by-one retries stage again. */
    pg_buf_add(&b, "; DELETE FROM pg_temp.tm_stage");
    r = b.oom || keys.oom ? TM_RETRY
                          : pg_exec(s, b.p, "upserting the staged rows", err);
    if (b.oom || keys.oom)
        s->host->set_error(err, "out of memory");
    pg_buf_free(&b);
    pg_buf_free(&keys);
    return r;
}

/* ---- upsert, the keys decided by the sink ---------------------------- */

/* A record to write and its key: the key columns' values as their types'
 * text, each length-prefixed (so "a","bc" and "ab","c" differ). */
typedef struct up_key {
    const char *p;
    size_t len, j;
    uint64_t digest; /* of the bytes, never 0 (up_seen) */
    int hinted;      /* in upsert_seen before this write */
} up_key;

/* FNV-1a over the key's bytes, finished by splitmix64's mixer (every bit
 * of the digest depends on every byte: its low bits index up_seen). */
static uint64_t up_digest(const char *p, size_t n) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h ? h : 1;
}

/* ---- the keys this sink wrote: a hint ---------------------------------- */

/* An open-addressing set of key digests (0: an empty slot). A digest in
 * it says the key was probably stored by this sink; a wrong answer either
 * way costs a path, never a row (pg_upsert_rows). Bounded: past
 * UP_SEEN_MAX slots half full, it starts again empty. */
enum { UP_SEEN_MIN = 1 << 12, UP_SEEN_MAX = 1 << 21 };

static int up_seen_has(const pg_sink *s, uint64_t d) {
    if (!s->upsert_seen_cap)
        return 0;
    size_t mask = s->upsert_seen_cap - 1;
    for (size_t i = (size_t)d & mask;; i = (i + 1) & mask) {
        if (s->upsert_seen[i] == d)
            return 1;
        if (s->upsert_seen[i] == 0)
            return 0;
    }
}

/* 1 when D was in T already, else puts it. */
static int up_seen_put(uint64_t *t, size_t cap, uint64_t d, size_t *n) {
    size_t mask = cap - 1;
    for (size_t i = (size_t)d & mask;; i = (i + 1) & mask) {
        if (t[i] == d)
            return 1;
        if (t[i] == 0) {
            t[i] = d;
            (*n)++;
            return 0;
        }
    }
}

/* Adds D: 1 when it was there already. Out of memory only forgets (it is
 * a hint). */
static int up_seen_add(pg_sink *s, uint64_t d) {
    if ((s->upsert_seen_n + 1) * 2 > s->upsert_seen_cap) {
        size_t cap = s->upsert_seen_cap ? s->upsert_seen_cap * 2 : UP_SEEN_MIN;
        if (cap > UP_SEEN_MAX) {
            memset(s->upsert_seen, 0,
                   s->upsert_seen_cap * sizeof *s->upsert_seen);
            s->upsert_seen_n = 0;
        } else {
            uint64_t *t = calloc(cap, sizeof *t);
            if (!t)
                return up_seen_has(s, d);
            size_t n = 0;
            for (size_t i = 0; i < s->upsert_seen_cap; i++)
                if (s->upsert_seen[i])
                    up_seen_put(t, cap, s->upsert_seen[i], &n);
            free(s->upsert_seen);
            s->upsert_seen = t;
            s->upsert_seen_cap = cap;
            s->upsert_seen_n = n;
        }
    }
    return up_seen_put(s->upsert_seen, s->upsert_seen_cap, d,
                       &s->upsert_seen_n);
}

static int up_key_cmp(const void *a, const void *b) {
    const up_key *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, n);
    if (c == 0 && x->len != y->len)
        c = x->len < y->len ? -1 : 1;
    if (c == 0)
        c = x->j < y->j ? -1 : x->j > y->j;
    return c;
}

/* The batch's keys and, per key column, an array of its values' text. */
typedef struct up_plan {
    up_key *keys; /* the last record of each key, sorted by key */
    size_t nkeys;
    pg_buf text;           /* the keys' bytes */
    unsigned char *stored; /* by j: the key is stored already */
    pg_binarray *cols;     /* one array a key column */
    size_t ncols;
} up_plan;

static void up_plan_free(up_plan *p) {
    free(p->keys);
    free(p->stored);
    pg_buf_free(&p->text);
    for (size_t i = 0; i < p->ncols; i++)
        pg_binarray_free(&p->cols[i]);
    free(p->cols);
}

/* The records of X to write, their in-write repeats resolved last-wins in
 * offset order by the key's bytes (a key equal to another for the
 * database only, under a case-insensitive collation, say, is not merged
 * here: the COPY then meets the unique index and the write is staged),
 * and the probe's arrays. 0, or -1 when out of memory or too big. */
static int up_plan_make(pg_sink *s, const pg_rows *x, up_plan *p) {
    const tm_sink_config *c = s->config;
    size_t n = 0;
    for (size_t j = x->from; j < x->to; j++)
        n += x->write[j] != 0;
    if (!(p->keys = calloc(n ? n : 1, sizeof *p->keys)) ||
        !(p->stored = calloc(x->to ? x->to : 1, 1)))
        return -1;
    size_t *at = calloc(n ? n : 1, sizeof *at);
    if (!at)
        return -1;
    pg_buf one = {0};
    for (size_t j = x->from, i = 0; j < x->to; j++) {
        if (!x->write[j])
            continue;
        const tm_record *r = TM_CELEM(tm_record, x->b->records, j);
        at[i] = p->text.len;
        for (size_t k = 0; k < c->ncolumns; k++) {
            const tm_column *col = TM_CELEM(tm_column, c->columns, k);
            if (!col->key)
                continue;
            one.len = 0;
            copy_value(&one, col, TM_CELEM(tm_value, r->values, k), 0);
            uint64_t len = one.len;
            pg_buf_addn(&p->text, (const char *)&len, sizeof len);
            pg_buf_addn(&p->text, one.p ? one.p : "", one.len);
        }
        p->keys[i].len = p->text.len - at[i];
        p->keys[i++].j = j;
    }
    pg_buf_free(&one);
    if (p->text.oom) {
        free(at);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        p->keys[i].p = p->text.p + at[i];
        p->keys[i].digest = up_digest(p->keys[i].p, p->keys[i].len);
    }
    free(at);
    qsort(p->keys, n, sizeof *p->keys, up_key_cmp);
    /* the last of each run of equal keys */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && p->keys[i].len == p->keys[i + 1].len &&
            memcmp(p->keys[i].p, p->keys[i + 1].p, p->keys[i].len) == 0)
            continue;
        p->keys[m++] = p->keys[i];
    }
    p->nkeys = m;
    size_t nkeycols = 0;
    for (size_t k = 0; k < c->ncolumns; k++)
        nkeycols += TM_CELEM(tm_column, c->columns, k)->key != 0;
    if (!(p->cols = calloc(nkeycols ? nkeycols : 1, sizeof *p->cols)))
        return -1;
    for (; p->ncols < nkeycols; p->ncols++)
        pg_binarray_start(&p->cols[p->ncols], PG_OID_TEXT);
    for (size_t i = 0; i < m; i++) {
        const char *q = p->keys[i].p;
        for (size_t k = 0; k < p->ncols; k++) {
            uint64_t len;
            memcpy(&len, q, sizeof len);
            pg_binarray_textn(&p->cols[k], q + sizeof len, (size_t)len);
            q += sizeof len + len;
        }
    }
    for (size_t k = 0; k < p->ncols; k++)
        if (pg_binarray_finish(&p->cols[k]) != 0)
            return -1;
    return 0;
}

/* One round trip: which of the plan's keys the table holds (an index
 * probe each, by the key columns' own equality: the values' text cast
 * to the mapping's types, compared under the columns' collations), marked
 * in p->stored. */
static tm_status up_probe(pg_sink *s, up_plan *p, size_t *nstored,
                          size_t *unforeseen, tm_error *err) {
    const tm_sink_config *c = s->config;
    pg_buf q = {0};
    char num[64];
    pg_buf_add(&q, "SELECT k.i FROM unnest(");
    size_t n = 0;
    for (size_t k = 0; k < c->ncolumns; k++) {
        const tm_column *col = TM_CELEM(tm_column, c->columns, k);
        if (!col->key)
            continue;
        snprintf(num, sizeof num, "%s$%zu::text[]::", n ? ", " : "", n + 1);
        pg_buf_add(&q, num);
        pg_buf_add(&q, pg_type_sql(col->type));
        pg_buf_add(&q, "[]");
        n++;
    }
    pg_buf_add(&q, ") WITH ORDINALITY AS k(");
    for (size_t i = 0; i < n; i++) {
        snprintf(num, sizeof num, "k%zu, ", i + 1);
        pg_buf_add(&q, num);
    }
    /* LATERAL ... LIMIT 1: an index probe a key, never a hash of the
     * whole table (the plan EXISTS takes once the batch is large) */
    pg_buf_add(&q, "i), LATERAL (SELECT 1 FROM ");
    pg_buf_add(&q, s->q_table);
    pg_buf_add(&q, " AS t WHERE ");
    n = 0;
    for (size_t k = 0; k < c->ncolumns; k++) {
        const tm_column *col = TM_CELEM(tm_column, c->columns, k);
        if (!col->key)
            continue;
        pg_buf_add(&q, n ? " AND t." : "t.");
        pg_buf_ident(s, &q, col->name);
        snprintf(num, sizeof num, " = k.k%zu", ++n);
        pg_buf_add(&q, num);
    }
    pg_buf_add(&q, " LIMIT 1) AS stored");
    const char **v = calloc(p->ncols + 1, sizeof *v);
    int *lens = calloc(p->ncols + 1, sizeof *lens),
        *fmts = calloc(p->ncols + 1, sizeof *fmts);
    for (size_t i = 0; v && lens && fmts && i < p->ncols; i++) {
        v[i] = p->cols[i].b.p;
        lens[i] = (int)p->cols[i].b.len;
        fmts[i] = 1;
    }
    tm_status r = TM_RETRY;
    PGresult *res = NULL;
    if (q.oom || !v || !lens || !fmts)
        s->host->set_error(err, "out of memory");
    else
        res = pg_query(s, q.p, (int)p->ncols, v, lens, fmts, 1,
                       "probing the batch's keys", &r, err);
    pg_buf_free(&q);
    free(v);
    free(lens);
    free(fmts);
    if (!res)
        return r;
    *nstored = *unforeseen = 0;
    for (size_t i = 0; i < p->nkeys; i++)
        p->stored[p->keys[i].j] = 0;
    for (int i = 0; i < PQntuples(res); i++) {
        long long at = strtoll(PQgetvalue(res, i, 0), NULL, 10);
        if (at < 1 || (size_t)at > p->nkeys || p->stored[p->keys[at - 1].j])
            continue;
        p->stored[p->keys[at - 1].j] = 1;
        (*nstored)++;
        *unforeseen += !p->keys[at - 1].hinted;
    }
    PQclear(res);
    return TM_OK;
}

/* The stored keys' records (STORED 1) or the new ones (0) of the plan. */
static void up_mask(const up_plan *p, int stored, unsigned char *mask,
                    size_t n) {
    memset(mask, 0, n);
    for (size_t i = 0; i < p->nkeys; i++)
        if (!p->stored[p->keys[i].j] == !stored)
            mask[p->keys[i].j] = 1;
}

/* The whole write staged again after the direct write failed for a row
 * (the savepoint tm_upsert rolled back to first). */
static tm_status up_staged(pg_sink *s, const pg_rows *x, const char *why,
                           tm_error *err) {
    s->host->log(s->config->host_ctx, TM_LOG_DEBUG,
                 "batch %s: the direct write of its keys refused (%s); staged",
                 x->b->batch_id, why);
    tm_status r = pg_exec(s, "ROLLBACK TO SAVEPOINT tm_upsert",
                          "upsert: ROLLBACK TO", err);
    return r == TM_OK ? stage_upsert(s, x, NULL, err) : r;
}

/* A failed direct write that can be staged instead: the connection is
 * up (the transaction rolls back to tm_upsert), the call goes on, and the
 * failure is not a wait given up (a lock wait cancelled by
 * statement_timeout, lock_timeout, a deadlock, a serialization failure:
 * TM_RETRY in any statement, and the staged write would wait for the same
 * lock again, past the batch's deadline by another timeout). */
static int up_can_stage(pg_sink *s) {
    static const char *const WAITS[] = {"57014", "55P03", "40P01", "40001"};
    for (size_t i = 0; i < sizeof WAITS / sizeof WAITS[0]; i++)
        if (strcmp(s->last_state, WAITS[i]) == 0)
            return 0;
    return s->conn && PQstatus(s->conn) == CONNECTION_OK && !pg_should_stop(s);
}

/* A failed direct write that was not staged (the call is past its
 * deadline, interrupted, or the connection is gone): its error is no
 * verdict on a record (a COPY meets the unique index for a key another
 * writer stored; a pair of keys equal for the database only updates one
 * row twice, 21000), so it must neither reach the caller's halving as a
 * refused row (commit.c makes a single record a dead letter "rejected")
 * nor stop the connector (TM_FATAL): TM_RETRY, and the staged write
 * decides at the next attempt. */
static tm_status up_unstaged(pg_sink *s) {
    s->last_state[0] = '\0';
    return TM_RETRY;
}

/* The records of X (one a stored key) in one INSERT ... SELECT FROM
 * unnest(...) ON CONFLICT (keys) DO UPDATE, a binary text array a column
 * cast to the mapping's types (to the table's by assignment): for a few
 * keys, no staging table (its COPY, its DELETE, its truncation at every
 * commit). Any failure is staged again by the caller. */
static tm_status up_update_stored(pg_sink *s, const pg_rows *x, tm_error *err) {
    static const char *const HIDDEN_TYPES[4] = {"text", "integer", "bigint",
                                                "text"};
    const tm_sink_config *c = s->config;
    size_t nc = c->ncolumns, n = nc + 4;
    pg_binarray *a = calloc(n, sizeof *a);
    const char **v = calloc(n, sizeof *v);
    int *lens = calloc(n, sizeof *lens), *fmts = calloc(n, sizeof *fmts);
    pg_buf one = {0}, q = {0}, keys = {0};
    int bad = !a || !v || !lens || !fmts;
    for (size_t k = 0; !bad && k < n; k++)
        pg_binarray_start(&a[k], PG_OID_TEXT);
    for (size_t j = x->from; !bad && j < x->to; j++) {
        if (!x->write[j])
            continue;
        const tm_record *r = TM_CELEM(tm_record, x->b->records, j);
        const tm_range *g = TM_CELEM(tm_range, x->b->ranges, r->range);
        char num[64];
        for (size_t k = 0; k < nc; k++) {
            const tm_value *val = TM_CELEM(tm_value, r->values, k);
            if (val->is_null) {
                pg_binarray_text(&a[k], NULL);
                continue;
            }
            one.len = 0;
            copy_value(&one, TM_CELEM(tm_column, c->columns, k), val, 0);
            pg_binarray_textn(&a[k], one.p ? one.p : "", one.len);
        }
        pg_binarray_text(&a[nc], g->topic);
        snprintf(num, sizeof num, "%d", (int)g->partition);
        pg_binarray_text(&a[nc + 1], num);
        snprintf(num, sizeof num, "%lld", (long long)r->offset);
        pg_binarray_text(&a[nc + 2], num);
        pg_binarray_text(&a[nc + 3], r->identity);
        bad = one.oom;
    }
    pg_buf_add(&q, "INSERT INTO ");
    pg_buf_add(&q, s->q_table);
    pg_buf_add(&q, " AS t (");
    column_list(s, &q, 0);
    pg_buf_add(&q, ") SELECT * FROM unnest(");
    for (size_t k = 0; !bad && k < n; k++) {
        char num[64];
        snprintf(num, sizeof num, "%s$%zu::text[]::", k ? ", " : "", k + 1);
        pg_buf_add(&q, num);
        pg_buf_add(
            &q, k < nc ? pg_type_sql(TM_CELEM(tm_column, c->columns, k)->type)
                       : HIDDEN_TYPES[k - nc]);
        pg_buf_add(&q, "[]");
        bad = pg_binarray_finish(&a[k]) != 0;
        v[k] = a[k].b.p;
        lens[k] = (int)a[k].b.len;
        fmts[k] = 1;
    }
    pg_buf_add(&q, ") AS v");
    key_list(s, &keys);
    on_conflict_update(s, &q, keys.p ? keys.p : "", 0);
    tm_status r = TM_FATAL;
    PGresult *res = NULL;
    if (bad || q.oom || keys.oom)
        s->host->set_error(err,
                           "batch %s: the stored keys' rows: out of "
                           "memory (or a timestamp out of range)",
                           x->b->batch_id);
    else
        res = pg_query(s, q.p, (int)n, v, lens, fmts, 0,
                       "upserting the stored keys' rows", &r, err);
    if (res) {
        PQclear(res);
        r = TM_OK;
    }
    for (size_t k = 0; a && k < n; k++)
        pg_binarray_free(&a[k]);
    free(a);
    free(v);
    free(lens);
    free(fmts);
    pg_buf_free(&one);
    pg_buf_free(&q);
    pg_buf_free(&keys);
    return r;
}

/* The keys marked stored first (up_update_stored), then the others COPYed
 * straight into the table; LEAD goes first. Stored first: a key written
 * by the COPY that the update would meet (a key equal to another for the
 * database only) makes the COPY fail, never a row updated out of order. */
static tm_status up_write(pg_sink *s, const up_plan *p, pg_rows *part,
                          unsigned char *mask, const char *lead,
                          tm_error *err) {
    size_t nstored = 0;
    for (size_t i = 0; i < p->nkeys; i++)
        nstored += p->stored[p->keys[i].j] != 0;
    tm_status r = TM_OK;
    if (nstored > 0) {
        if (lead)
            r = pg_exec(s, lead, "upsert: savepoint", err);
        lead = NULL;
        up_mask(p, 1, mask, part->to);
        if (r == TM_OK)
            r = up_update_stored(s, part, err);
    }
    if (r == TM_OK && nstored < p->nkeys) {
        up_mask(p, 0, mask, part->to);
        r = copy_rows(s, part, s->q_table, 0, lead, err);
    }
    return r;
}

/* Whether the table may take the direct write (*ok): an ordinary table
 * with the key's unique index, valid and not DEFERRABLE, and no other
 * unique or exclusion index, trigger or rule of its own. Without that
 * index (dropped while the sink is open, or being built again
 * CONCURRENTLY) the COPY meets nothing, and a key another writer stored
 * would get a second row, where ON CONFLICT refuses the write (42P10). A
 * DEFERRABLE key index ON CONFLICT refuses as an arbiter (55000), so the staged
 * write refuses every record, and the COPY, without ON CONFLICT, must not take
 * the new keys' records instead. Such an index, constraint, trigger or rule
 * sees the rows in the order they are written, and the direct write's order
 * (the stored keys' updates, then the new keys' COPY) is not the staged
 * write's: a record the staged write refuses could be accepted (a new key
 * taking a value of another UNIQUE column that a later record of a
 * stored key gives up). */
static tm_status up_direct_allowed(pg_sink *s, int *ok, tm_error *err) {
    tm_status r = TM_OK;
    /* prepared once a session: planning it took longer than running it
     * (0.4 against 0.06 ms), a tenth of a write of 1000 records */
    if (!s->upsert_prepared)
        r = pg_prepare(
            s, PG_STMT_UPSERT_DIRECT,
            "SELECT (SELECT relkind FROM pg_class WHERE oid = to_regclass($1)) "
            "= 'r' AND EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = "
            "to_regclass($1) AND i.indimmediate AND i.indisvalid "
            "AND " PG_KEY_INDEX_SQL
            ") AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = "
            "to_regclass($1) AND (i.indisunique OR i.indisexclusion) AND "
            "NOT (i.indimmediate AND " PG_KEY_INDEX_SQL ")"
            ") AND NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE "
            "t.tgrelid = to_regclass($1) AND NOT t.tgisinternal) AND NOT "
            "EXISTS (SELECT 1 FROM pg_rewrite w WHERE w.ev_class = "
            "to_regclass($1))",
            3, "upsert: preparing the read of the table's constraints", err);
    if (r != TM_OK)
        return r;
    s->upsert_prepared = 1;
    pg_buf names = {0};
    char n[16];
    pg_key_names(s, &names, n);
    const char *v[3] = {s->q_table, names.oom ? "" : names.p, n};
    PGresult *res =
        pg_query_prepared(s, PG_STMT_UPSERT_DIRECT, 3, v, NULL, NULL, 1,
                          "upsert: reading the table's constraints", &r, err);
    pg_buf_free(&names);
    if (!res)
        return r;
    *ok = PQntuples(res) == 1 && *PQgetvalue(res, 0, 0) == 't';
    PQclear(res);
    return TM_OK;
}

/* Upsert without a second write of the new keys' rows (docs/sinks/
 * postgres.md step 4). The sink resolves the write's repeats of a key (by
 * its bytes) last-wins in offset order, then writes the keys it takes for
 * stored through the staging table (stage_upsert, the same INSERT ... ON
 * CONFLICT as before) and COPYs the others straight into the table, a
 * bulk insert. Which keys it takes for stored: those it wrote itself
 * before (the digests of upsert_seen); after a COPY met a stored key it
 * had not written, those the table holds, asked in one round trip
 * (up_probe), until a probe finds no stored key but the ones it wrote.
 * All under the savepoint tm_upsert: a key taken for new that the table
 * holds (another writer's; a key equal to another for the database only,
 * under a case-insensitive collation, say) makes the COPY meet the unique
 * index: the write is rolled back to the savepoint and probed, and if the
 * COPY after the probe meets one too (a row committed since), the whole
 * write is staged as before, which gives the same rows; so is a write the
 * table refuses for a row's content, refused there as before (the caller
 * halves it). A key taken for stored that is not is inserted by ON
 * CONFLICT. Which path a key takes never decides its row. Change events
 * keep the staged write (the order of deletes and inserts), and so does a
 * table whose other unique or exclusion indexes, triggers or rules could
 * tell the direct write's order from the staged one's
 * (up_direct_allowed). */
tm_status pg_upsert_rows(pg_sink *s, const pg_rows *x, const char *lead,
                         tm_error *err) {
    if (s->config->flags & TM_CONFIG_CDC)
        return stage_upsert(s, x, lead, err);
    up_plan p = {0};
    unsigned char *mask = NULL;
    if (up_plan_make(s, x, &p) != 0 || !(mask = malloc(x->to ? x->to : 1))) {
        up_plan_free(&p);
        free(mask);
        s->host->set_error(err, "out of memory (batch %s)", x->b->batch_id);
        return TM_RETRY;
    }
    pg_buf b = {0};
    if (lead) {
        pg_buf_add(&b, lead);
        pg_buf_add(&b, "; ");
    }
    pg_buf_add(&b, "SAVEPOINT tm_upsert");
    tm_status r = TM_RETRY;
    pg_rows part = *x;
    part.write = mask;
    /* staged: r is the answer as it is (the staged write's, or the
     * catalogs' read, classified as any statement's) */
    int probe = s->upsert_probe, staged = 0;
    if (b.oom) {
        s->host->set_error(err, "out of memory");
    } else if (s->upsert_staged_only) {
        r = pg_exec(s, b.p, "upsert: savepoint", err);
        if (r == TM_OK)
            r = stage_upsert(s, x, NULL, err);
        staged = 1;
    } else if (!probe) {
        /* added now, one look-up a key: a key of a write that fails is
         * a wrong hint, which costs a path, never a row */
        for (size_t i = 0; i < p.nkeys; i++)
            p.stored[p.keys[i].j] =
                (unsigned char)(p.keys[i].hinted =
                                    up_seen_add(s, p.keys[i].digest));
        r = up_write(s, &p, &part, mask, b.p, err);
        if (r != TM_OK && up_can_stage(s) &&
            strcmp(s->last_state, "23505") == 0) {
            /* a key stored that this sink did not write: probe */
            probe = s->upsert_probe = 1;
            r = pg_exec(s, "ROLLBACK TO SAVEPOINT tm_upsert",
                        "upsert: ROLLBACK TO", err);
        } else if (r != TM_OK && up_can_stage(s)) {
            r = up_staged(s, x, err->message, err);
            staged = 1;
        }
    } else {
        for (size_t i = 0; i < p.nkeys; i++)
            p.keys[i].hinted = up_seen_has(s, p.keys[i].digest);
        r = pg_exec(s, b.p, "upsert: savepoint", err);
    }
    pg_buf_free(&b);
    if (probe && !staged && r == TM_OK) {
        size_t nstored = 0, unforeseen = 0;
        if ((r = up_probe(s, &p, &nstored, &unforeseen, err)) == TM_OK)
            s->upsert_probe = unforeseen > 0;
        if (r == TM_OK)
            r = up_write(s, &p, &part, mask, NULL, err);
        if (r != TM_OK && up_can_stage(s)) {
            r = up_staged(s, x, err->message, err);
            staged = 1;
        }
    }
    if (r == TM_OK && !staged && p.nkeys > 0) {
        /* Read after the direct write: its statements hold the table's
         * ROW EXCLUSIVE lock, so the DDL that adds an index, constraint,
         * trigger or rule either committed before them (and is read
         * here) or waits for this commit. */
        int direct = 0;
        if ((r = up_direct_allowed(s, &direct, err)) != TM_OK) {
            staged = 1;
        } else if (!direct) {
            s->upsert_staged_only = 1;
            r = up_staged(s, x,
                          "the table has other unique indexes, "
                          "triggers or rules",
                          err);
            staged = 1;
        }
    }
    if (r != TM_OK && !staged)
        r = up_unstaged(s);
    if (r == TM_OK && probe && !staged)
        for (size_t i = 0; i < p.nkeys; i++)
            up_seen_add(s, p.keys[i].digest);
    up_plan_free(&p);
    free(mask);
    return r;
}

tm_status pg_copy_rows(pg_sink *s, const pg_rows *x, const char *lead,
                       tm_error *err) {
    return copy_rows(s, x, s->q_table, 0, lead, err);
}
