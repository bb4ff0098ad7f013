/* Read-back for the kit and `tidemark verify`: a partition's rows (offset
 * from the hidden _tm_offset column, and the mapped columns' values) and
 * dead letters, in offset order, in one SELECT (one snapshot). Read-only. */
#include <stdlib.h>
#include <string.h>

#include "sqlite_sink.h"

/* The SELECT's fixed columns (schema.c, scan_sql); the mapped columns
 * follow from SQ_SCAN_VALUES on. */
enum {
    SQ_SCAN_OFFSET,
    SQ_SCAN_KIND,
    SQ_SCAN_IDENTITY_OR_REASON,
    SQ_SCAN_DETAIL,
    SQ_SCAN_VALUES
};

/* Whether a stored value of storage class CLS reads back as type T
 * without a conversion that would change it (SQLite's dynamic typing lets
 * another writer put anything in a column). */
static int class_fits(int cls, tm_type t) {
    switch (t) {
    case TM_TYPE_INT:
    case TM_TYPE_BOOL:
    case TM_TYPE_TIMESTAMP: return cls == SQLITE_INTEGER;
    case TM_TYPE_FLOAT: return cls == SQLITE_FLOAT || cls == SQLITE_INTEGER;
    case TM_TYPE_TEXT:
    case TM_TYPE_JSON: return cls == SQLITE_TEXT;
    case TM_TYPE_BYTES: return cls == SQLITE_BLOB;
    }
    return 0;
}

/* The current row's mapped values into vals (pointing into the statement's
 * row, valid until the next step). 0, or -1 when a value does not read
 * back as its column's type: the row is then given without values rather
 * than with values it does not hold. */
static int row_values(const sq_sink *s, sqlite3_stmt *st, tm_value *vals) {
    for (size_t k = 0; k < s->config->ncolumns; k++) {
        const tm_column *c = TM_CELEM(tm_column, s->config->columns, k);
        int i = SQ_SCAN_VALUES + (int)k, cls = sqlite3_column_type(st, i);
        tm_value *v = &vals[k];
        memset(v, 0, sizeof *v);
        v->struct_size = sizeof *v;
        if (cls == SQLITE_NULL) {
            v->is_null = 1;
            continue;
        }
        if (!class_fits(cls, c->type))
            return -1;
        if (c->type == TM_TYPE_FLOAT) {
            v->v.f = sqlite3_column_double(st, i);
        } else if (cls == SQLITE_INTEGER) {
            v->v.i = sqlite3_column_int64(st, i);
        } else {
            /* The pointer first, then the size (sqlite3_column_blob's
             * documented order); a zero-length blob comes back NULL. */
            const void *p = sqlite3_column_blob(st, i);
            v->v.s.len = (size_t)sqlite3_column_bytes(st, i);
            v->v.s.ptr = p ? (const char *)p : "";
            if (!p && v->v.s.len)
                return -1; /* out of memory in SQLite */
        }
    }
    return 0;
}

tm_status sq_scan(void *sink, const char *topic, int32_t partition,
                  void *emit_ctx, tm_error *err) {
    sq_sink *s = sink;
    tm_status r = sq_db_ready(s, err);
    if (r != TM_OK)
        return r;
    sq_call_begin(s, 0);
    if ((r = sq_owner_scan_check(s, topic, partition, err)) != TM_OK)
        return r;
    /* A reader that wants no values (verify) gets none: not converted. */
    int wants = TM_HOST_SCAN_WANTS_VALUES(s->host, emit_ctx);
    size_t ncols = s->config->ncolumns;
    tm_value *vals = calloc(ncols ? ncols : 1, sizeof *vals);
    if (!vals) {
        s->host->set_error(err, "scan: out of memory");
        return TM_RETRY;
    }
    /* Columns from the events' schemas, none known before this process
     * committed a batch: the rows without their values, by a statement
     * made for this scan only (the table may be made meanwhile). */
    int bare = !s->stmt[SQ_SCAN];
    if (bare && (r = sq_prepare_bare_scan(s, err)) != TM_OK) {
        free(vals);
        return r;
    }
    sqlite3_stmt *st = s->stmt[SQ_SCAN];
    int rc = sqlite3_bind_text(st, 1, s->config->connector, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, topic, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(st, 3, partition);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int dl = sqlite3_column_int(st, SQ_SCAN_KIND) == 2;
        int with = !dl && wants && row_values(s, st, vals) == 0;
        const char *text =
            (const char *)sqlite3_column_text(st, SQ_SCAN_IDENTITY_OR_REASON);
        tm_scan_item it = {
            .struct_size = sizeof it,
            .kind = dl ? TM_ITEM_DEAD_LETTER : TM_ITEM_ROW,
            .topic = topic,
            .partition = partition,
            .offset = sqlite3_column_int64(st, SQ_SCAN_OFFSET),
            .identity = dl ? NULL : text,
            .reason = dl ? tm_dl_reason_from_name(text) : (tm_dl_reason)0,
            .detail = dl ? (const char *)sqlite3_column_text(st, SQ_SCAN_DETAIL)
                         : NULL,
            .values = with ? vals : NULL,
            .nvalues = with ? ncols : 0,
        };
        rc = SQLITE_OK;
        if (s->host->emit(emit_ctx, &it) != 0)
            break; /* the reader has seen enough */
    }
    sq_reuse(st);
    if (bare) {
        sqlite3_finalize(st);
        s->stmt[SQ_SCAN] = NULL;
    }
    free(vals);
    if (rc != SQLITE_OK && rc != SQLITE_DONE)
        return sq_fail(s, rc, "scan", err);
    return TM_OK;
}
