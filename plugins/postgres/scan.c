/* Read-back for the kit and `tidemark verify`: a partition's rows (offset
 * from the hidden _tm_offset column, and the mapped columns' values) and
 * dead letters, in offset order, in one SELECT (one snapshot). Read-only.
 * The SELECT runs as a cursor in a read-only transaction, fetched
 * SCAN_FETCH rows at a time: memory holds one fetch, never a whole
 * partition in one PGresult. The values are selected only when the reader
 * wants them (verify does not: NULLs go over the wire instead).
 *
 * Each value comes back in a text form that gives it exactly, whatever
 * the session's settings: a double and a timestamptz as the bytes of
 * their binary send form (in hex), bytea in hex, jsonb as its text made
 * canonical again (json_canon.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_canon.h"
#include "pg_sink.h"

/* The SELECT's fixed columns; the mapped columns follow. */
enum { SC_OFFSET, SC_KIND, SC_IDENTITY, SC_REASON, SC_DETAIL, SC_VALUES };

/* Microseconds from 1970-01-01 to PostgreSQL's epoch 2000-01-01. */
#define PG_EPOCH_US 946684800000000LL

/* The column as the SELECT reads it. */
static void column_expr(pg_sink *s, pg_buf *b, const tm_column *c) {
    const char *before = "", *after = "";
    switch (c->type) {
    case TM_TYPE_FLOAT:
        before = "encode(float8send(";
        after = "), 'hex')";
        break;
    case TM_TYPE_TIMESTAMP:
        before = "encode(timestamptz_send(";
        after = "), 'hex')";
        break;
    case TM_TYPE_BYTES:
        before = "encode(";
        after = ", 'hex')";
        break;
    default: break;
    }
    pg_buf_add(b, before);
    pg_buf_ident(s, b, c->name);
    pg_buf_add(b, after);
}

/* Rows fetched from the cursor at a time. */
#define SCAN_FETCH 1024

static void scan_sql(pg_sink *s, pg_buf *b, int wants) {
    const tm_sink_config *c = s->config;
    pg_buf_add(b, "DECLARE tm_scan NO SCROLL CURSOR FOR "
                  "SELECT _tm_offset, 1, _tm_identity, NULL, NULL");
    for (size_t i = 0; i < c->ncolumns; i++) {
        pg_buf_add(b, ", ");
        if (wants)
            column_expr(s, b, TM_CELEM(tm_column, c->columns, i));
        else
            pg_buf_add(b, "NULL");
    }
    pg_buf_add(b, " FROM ");
    pg_buf_add(b, s->q_table);
    pg_buf_add(b, " WHERE _tm_topic = $2 AND _tm_partition = $3::int UNION "
                  "ALL SELECT \"offset\", 2, NULL, reason, detail");
    for (size_t i = 0; i < c->ncolumns; i++)
        pg_buf_add(b, ", NULL");
    pg_buf_add(b, " FROM ");
    pg_buf_add(b, s->q_dls);
    pg_buf_add(b, " WHERE connector = $1 AND topic = $2 AND \"partition\" = "
                  "$3::int ORDER BY 1, 2");
}

/* Hex text to bytes into out. 0, or -1 when not hex. */
static int unhex(const char *p, size_t n, pg_buf *out) {
    if (n % 2)
        return -1;
    for (size_t i = 0; i < n; i += 2) {
        int hi = -1, lo = -1;
        for (int k = 0; k < 2; k++) {
            char c = p[i + (size_t)k];
            int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                           : -1;
            *(k ? &lo : &hi) = d;
        }
        if (hi < 0 || lo < 0)
            return -1;
        char byte = (char)(hi << 4 | lo);
        pg_buf_addn(out, &byte, 1);
    }
    return 0;
}

/* An 8-byte big-endian send form (hex) as its 64 bits. */
static int send8(const char *p, size_t n, uint64_t *out) {
    pg_buf b = {0};
    int rc = unhex(p, n, &b) == 0 && !b.oom && b.len == 8 ? 0 : -1;
    uint64_t v = 0;
    for (size_t i = 0; rc == 0 && i < 8; i++)
        v = v << 8 | (unsigned char)b.p[i];
    pg_buf_free(&b);
    *out = v;
    return rc;
}

/* One value of row I, column K, into v (strings into res or bufs[k]). 0,
 * or -1 when it does not read back as the column's type. */
static int cell(PGresult *res, int i, size_t k, const tm_column *c, tm_value *v,
                pg_buf *buf) {
    int f = SC_VALUES + (int)k;
    memset(v, 0, sizeof *v);
    v->struct_size = sizeof *v;
    if (PQgetisnull(res, i, f)) {
        v->is_null = 1;
        return 0;
    }
    const char *p = PQgetvalue(res, i, f);
    size_t n = (size_t)PQgetlength(res, i, f);
    uint64_t bits;
    char *end;
    buf->len = 0;
    switch (c->type) {
    case TM_TYPE_INT:
        v->v.i = strtoll(p, &end, 10);
        return *end == '\0' && end != p ? 0 : -1;
    case TM_TYPE_BOOL:
        v->v.i = p[0] == 't';
        return n == 1 && (p[0] == 't' || p[0] == 'f') ? 0 : -1;
    case TM_TYPE_FLOAT:
        if (send8(p, n, &bits) != 0)
            return -1;
        memcpy(&v->v.f, &bits, sizeof v->v.f);
        return 0;
    case TM_TYPE_TIMESTAMP:
        if (send8(p, n, &bits) != 0)
            return -1;
        /* 'infinity' and '-infinity' (INT64_MAX and INT64_MIN in the send
         * form), and a time within 30 years of PostgreSQL's last one, have
         * no Unix-epoch microseconds in 64 bits: the row goes without
         * values rather than overflow. */
        if ((int64_t)bits == INT64_MAX || (int64_t)bits == INT64_MIN ||
            (int64_t)bits > INT64_MAX - PG_EPOCH_US)
            return -1;
        v->v.i = (int64_t)bits + PG_EPOCH_US;
        return 0;
    case TM_TYPE_TEXT:
        v->v.s.ptr = p;
        v->v.s.len = n;
        return 0;
    case TM_TYPE_JSON:
        if (pg_json_canonical(p, n, buf) != 0)
            return -1;
        break;
    case TM_TYPE_BYTES:
        if (unhex(p, n, buf) != 0)
            return -1;
        break;
    }
    v->v.s.ptr = buf->p ? buf->p : "";
    v->v.s.len = buf->len;
    return buf->oom ? -1 : 0;
}

/* The rows of one fetch to the reader. TM_OK, or TM_FATAL (out of
 * memory); *stop when the reader has seen enough. */
static tm_status emit_rows(pg_sink *s, PGresult *res, int wants,
                           const char *topic, int32_t partition, tm_value *vals,
                           pg_buf *bufs, void *emit_ctx, int *stop,
                           tm_error *err) {
    size_t ncols = s->config->ncolumns;
    for (int i = 0; i < PQntuples(res); i++) {
        int dl = strcmp(PQgetvalue(res, i, SC_KIND), "2") == 0;
        int with = !dl && wants;
        for (size_t k = 0; with && k < ncols; k++)
            if (cell(res, i, k, TM_CELEM(tm_column, s->config->columns, k),
                     &vals[k], &bufs[k]) != 0)
                with = 0; /* given without values, not with wrong ones */
        for (size_t k = 0; k < ncols; k++)
            if (bufs[k].oom) {
                s->host->set_error(err, "scan: out of memory");
                return TM_FATAL;
            }
        tm_scan_item it = {
            .struct_size = sizeof it,
            .kind = dl ? TM_ITEM_DEAD_LETTER : TM_ITEM_ROW,
            .topic = topic,
            .partition = partition,
            .offset = strtoll(PQgetvalue(res, i, SC_OFFSET), NULL, 10),
            .identity = PQgetisnull(res, i, SC_IDENTITY)
                            ? NULL
                            : PQgetvalue(res, i, SC_IDENTITY),
            .reason = dl ? tm_dl_reason_from_name(PQgetvalue(res, i, SC_REASON))
                         : (tm_dl_reason)0,
            .detail = dl && !PQgetisnull(res, i, SC_DETAIL)
                          ? PQgetvalue(res, i, SC_DETAIL)
                          : NULL,
            .values = with ? vals : NULL,
            .nvalues = with ? ncols : 0,
        };
        if (s->host->emit(emit_ctx, &it) != 0) {
            *stop = 1;
            break;
        }
    }
    return TM_OK;
}

/* Declares the cursor and fetches it to the end (or until the reader
 * stops), inside the caller's transaction. */
static tm_status scan_cursor(pg_sink *s, const char *topic, int32_t partition,
                             int wants, void *emit_ctx, tm_error *err) {
    pg_buf b = {0};
    scan_sql(s, &b, wants);
    char part[16];
    snprintf(part, sizeof part, "%d", (int)partition);
    const char *v[3] = {s->config->connector, topic, part};
    tm_status r = TM_FATAL;
    PGresult *res =
        b.oom ? NULL : pg_query(s, b.p, 3, v, NULL, NULL, 0, "scan", &r, err);
    int oom = b.oom;
    pg_buf_free(&b);
    if (!res) {
        if (oom)
            s->host->set_error(err, "scan: out of memory");
        return oom ? TM_FATAL : r;
    }
    PQclear(res);
    size_t ncols = s->config->ncolumns;
    tm_value *vals = calloc(ncols ? ncols : 1, sizeof *vals);
    pg_buf *bufs = calloc(ncols ? ncols : 1, sizeof *bufs);
    r = TM_OK;
    if (!vals || !bufs) {
        s->host->set_error(err, "scan: out of memory");
        r = TM_FATAL;
    }
    char fetch[64];
    snprintf(fetch, sizeof fetch, "FETCH %d FROM tm_scan", SCAN_FETCH);
    for (int stop = 0; r == TM_OK && !stop;) {
        res = pg_query(s, fetch, 0, NULL, NULL, NULL, 1, "scan", &r, err);
        if (!res)
            break;
        if (PQntuples(res) == 0)
            stop = 1;
        else
            r = emit_rows(s, res, wants, topic, partition, vals, bufs, emit_ctx,
                          &stop, err);
        PQclear(res);
    }
    for (size_t k = 0; bufs && k < ncols; k++)
        pg_buf_free(&bufs[k]);
    free(bufs);
    free(vals);
    return r;
}

tm_status pg_scan(void *sink, const char *topic, int32_t partition,
                  void *emit_ctx, tm_error *err) {
    pg_sink *s = sink;
    tm_status r = pg_ready(s, err);
    if (r != TM_OK)
        return r;
    pg_call_begin(s, 0);
    int wants = TM_HOST_SCAN_WANTS_VALUES(s->host, emit_ctx);
    /* One transaction, so one snapshot for the whole cursor; read-only,
     * and ended (committed: it wrote nothing) whatever happened. */
    /* the reader paces the FETCHes: no idle_in_transaction_session_timeout
     * (conn.c); a read-only snapshot holds no lock a writer waits for */
    if ((r = pg_exec(s,
                     "BEGIN READ ONLY; SET LOCAL "
                     "idle_in_transaction_session_timeout = 0",
                     "scan", err)) != TM_OK) {
        pg_rollback(s);
        return r == TM_RETRY ? r : TM_FATAL;
    }
    r = scan_cursor(s, topic, partition, wants, emit_ctx, err);
    if (r == TM_OK)
        r = pg_exec(s, "COMMIT", "scan", err);
    if (r != TM_OK)
        pg_rollback(s);
    return r == TM_OK || r == TM_RETRY ? r : TM_FATAL;
}
