/* Parquet writer (see parquet_writer.h). Thrift field ids below are those
 * of parquet-format's parquet.thrift. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parquet_writer.h"
#include "pq_codec.h"
#include "thrift_compact.h"

/* parquet.thrift enums. */
enum { T_BOOLEAN = 0, T_INT64 = 2, T_DOUBLE = 5, T_BYTE_ARRAY = 6 };
enum { REP_REQUIRED = 0, REP_OPTIONAL = 1 };
enum { CT_UTF8 = 0, CT_TIMESTAMP_MICROS = 10 };
enum { ENC_PLAIN = 0, ENC_RLE = 3 };
enum { PAGE_DATA = 0 };

typedef struct pq_chunk_meta {
    int64_t data_page_offset; /* in the file */
    int64_t size;             /* page headers + pages, as stored */
    int64_t usize;            /* the same with every page uncompressed */
    int64_t num_values;
} pq_chunk_meta;

typedef struct pq_col {
    char *name;
    pq_kind kind;
    int required;
    int32_t field_id;
    /* the open page */
    ib_buf values;  /* PLAIN values */
    ib_buf defs;    /* one byte per value: 1 present, 0 null */
    int64_t nvals;  /* values in the page, nulls included */
    int64_t nbools; /* BOOLEAN: bits used in values */
    int has_value;  /* this row's value was given */
    /* the open row group's column chunk */
    ib_buf chunk;
    int64_t chunk_values;
    int64_t chunk_usize; /* chunk.len with the pages uncompressed */
} pq_col;

typedef struct pq_group {
    int64_t num_rows, file_offset, size, usize;
    pq_chunk_meta *chunks; /* ncols */
} pq_group;

struct pq_writer {
    pq_col *cols;
    size_t ncols;
    size_t page_target, group_target;
    ib_buf file;    /* "PAR1" and finished row groups */
    size_t pending; /* bytes of the open row group (pages + open pages) */
    int64_t rows, group_rows;
    pq_group *groups;
    size_t ngroups;
    ib_buf scratch; /* a page's body, uncompressed */
    ib_buf packed;  /* the same compressed */
    pq_codec codec;
    void *zctx; /* the codec's context, kept across pages */
    char error[160];
};

static void set_error(pq_writer *w, const char *fmt, const char *arg) {
    if (!w->error[0])
        snprintf(w->error, sizeof w->error, fmt, arg);
}

pq_writer *pq_writer_new(const pq_column_def *cols, size_t ncols,
                         size_t page_target, size_t row_group_target) {
    if (ncols == 0)
        return NULL;
    pq_writer *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->cols = calloc(ncols, sizeof *w->cols);
    if (!w->cols) {
        free(w);
        return NULL;
    }
    w->ncols = ncols;
    w->page_target = page_target ? page_target : PQ_PAGE_TARGET;
    w->group_target = row_group_target ? row_group_target : PQ_ROW_GROUP_TARGET;
    for (size_t i = 0; i < ncols; i++) {
        pq_col *c = &w->cols[i];
        if (!cols[i].name || cols[i].kind < PQ_BOOLEAN ||
            cols[i].kind > PQ_TIMESTAMP || !(c->name = strdup(cols[i].name))) {
            pq_writer_free(w);
            return NULL;
        }
        c->kind = cols[i].kind;
        c->required = cols[i].required;
        c->field_id = cols[i].field_id;
    }
    ib_buf_add(&w->file, "PAR1", 4);
    return w;
}

void pq_writer_free(pq_writer *w) {
    if (!w)
        return;
    for (size_t i = 0; i < w->ncols; i++) {
        free(w->cols[i].name);
        ib_buf_free(&w->cols[i].values);
        ib_buf_free(&w->cols[i].defs);
        ib_buf_free(&w->cols[i].chunk);
    }
    for (size_t g = 0; g < w->ngroups; g++)
        free(w->groups[g].chunks);
    free(w->groups);
    free(w->cols);
    ib_buf_free(&w->file);
    ib_buf_free(&w->scratch);
    ib_buf_free(&w->packed);
    pq_codec_ctx_free(w->zctx);
    free(w);
}

static int physical(pq_kind k) {
    switch (k) {
    case PQ_BOOLEAN: return T_BOOLEAN;
    case PQ_INT64:
    case PQ_TIMESTAMP: return T_INT64;
    case PQ_DOUBLE: return T_DOUBLE;
    case PQ_STRING:
    case PQ_BINARY: return T_BYTE_ARRAY;
    }
    return T_BYTE_ARRAY;
}

/* Takes the column's slot of the current row; NULL when it is misused. */
static pq_col *slot(pq_writer *w, size_t col) {
    if (col >= w->ncols) {
        set_error(w, "%s", "column index out of range");
        return NULL;
    }
    pq_col *c = &w->cols[col];
    if (c->has_value) {
        set_error(w, "column %s: two values in one row", c->name);
        return NULL;
    }
    c->has_value = 1;
    c->nvals++;
    return c;
}

void pq_put_null(pq_writer *w, size_t col) {
    pq_col *c = slot(w, col);
    if (!c)
        return;
    if (c->required)
        set_error(w, "column %s: null in a required column", c->name);
    ib_buf_byte(&c->defs, 0);
}

/* A present value of an optional column: definition level 1. */
static void present(pq_col *c) {
    if (!c->required)
        ib_buf_byte(&c->defs, 1);
}

void pq_put_i64(pq_writer *w, size_t col, int64_t v) {
    pq_col *c = slot(w, col);
    if (!c)
        return;
    present(c);
    if (c->kind == PQ_BOOLEAN) {
        /* PLAIN booleans: bit-packed, least significant bit first. */
        if (c->nbools % 8 == 0)
            ib_buf_byte(&c->values, 0);
        if (v && ib_buf_ok(&c->values))
            c->values.p[c->values.len - 1] |= (uint8_t)(1u << (c->nbools % 8));
        c->nbools++;
    } else if (c->kind == PQ_INT64 || c->kind == PQ_TIMESTAMP) {
        ib_buf_u64le(&c->values, (uint64_t)v);
    } else {
        set_error(w, "column %s: an integer for a non-integer column", c->name);
    }
}

void pq_put_double(pq_writer *w, size_t col, double v) {
    pq_col *c = slot(w, col);
    if (!c)
        return;
    present(c);
    if (c->kind != PQ_DOUBLE) {
        set_error(w, "column %s: a double for a non-double column", c->name);
        return;
    }
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    ib_buf_u64le(&c->values, u);
}

void pq_put_bytes(pq_writer *w, size_t col, const void *p, size_t n) {
    pq_col *c = slot(w, col);
    if (!c)
        return;
    present(c);
    if (c->kind != PQ_STRING && c->kind != PQ_BINARY) {
        set_error(w, "column %s: bytes for a non-byte-array column", c->name);
        return;
    }
    if (n > UINT32_MAX) {
        set_error(w, "column %s: a value over 4 GiB", c->name);
        return;
    }
    ib_buf_u32le(&c->values, (uint32_t)n);
    ib_buf_add(&c->values, p, n);
}

/* RLE runs of the page's definition levels (bit width 1: one byte per
 * run value), behind their 4-byte length, into out. */
static void encode_defs(const ib_buf *defs, ib_buf *out) {
    size_t at = out->len;
    ib_buf_u32le(out, 0); /* length, patched below */
    for (size_t i = 0; i < defs->len && ib_buf_ok(defs);) {
        size_t j = i;
        while (j < defs->len && defs->p[j] == defs->p[i])
            j++;
        ib_buf_uvarint(out, (uint64_t)(j - i) << 1); /* LSB 0: an RLE run */
        ib_buf_byte(out, defs->p[i]);
        i = j;
    }
    if (ib_buf_ok(out)) {
        uint32_t n = (uint32_t)(out->len - at - 4);
        for (int k = 0; k < 4; k++)
            out->p[at + (size_t)k] = (uint8_t)(n >> (8 * k));
    }
}

/* Closes the column's open page into its chunk: header, levels, values. */
static void flush_page(pq_writer *w, pq_col *c) {
    if (c->nvals == 0)
        return;
    ib_buf *body = &w->scratch;
    ib_buf_reset(body);
    if (!c->required)
        encode_defs(&c->defs, body);
    ib_buf_add(body, c->values.p, c->values.len);
    if (c->defs.oom || c->values.oom)
        body->oom = 1;
    if (body->len > PQ_MAX_PAGE_BYTES) {
        set_error(w, "column %s: a page over 1 GiB", c->name);
        return;
    }
    ib_buf *packed = &w->packed;
    ib_buf_reset(packed);
    if (w->codec != PQ_CODEC_NONE && ib_buf_ok(body) &&
        pq_compress(w->codec, &w->zctx, body->p, body->len, packed) != 0) {
        set_error(w, "column %s: compressing a page failed", c->name);
        return;
    }
    if (w->codec == PQ_CODEC_NONE)
        packed = body;
    size_t header_at = c->chunk.len;
    tc_writer t;
    tc_init(&t, &c->chunk);
    tc_struct_begin(&t); /* PageHeader */
    tc_field_i32(&t, 1, PAGE_DATA);
    tc_field_i32(&t, 2, (int32_t)body->len);   /* uncompressed_page_size */
    tc_field_i32(&t, 3, (int32_t)packed->len); /* compressed_page_size */
    tc_field_struct(&t, 5);                    /* data_page_header */
    tc_field_i32(&t, 1, (int32_t)c->nvals);    /* num_values, nulls too */
    tc_field_i32(&t, 2, ENC_PLAIN);
    tc_field_i32(&t, 3, ENC_RLE); /* definition levels */
    tc_field_i32(&t, 4, ENC_RLE); /* repetition levels (none written) */
    tc_struct_end(&t);
    tc_struct_end(&t);
    c->chunk_usize += (int64_t)(c->chunk.len - header_at + body->len);
    ib_buf_add(&c->chunk, packed->p, packed->len);
    if (body->oom || packed->oom)
        c->chunk.oom = 1;
    c->chunk_values += c->nvals;
    c->nvals = c->nbools = 0;
    ib_buf_reset(&c->values);
    ib_buf_reset(&c->defs);
}

/* Closes the open row group: every column's chunk goes into the file. */
static void flush_group(pq_writer *w) {
    if (w->group_rows == 0)
        return;
    pq_group *gs = realloc(w->groups, (w->ngroups + 1) * sizeof *gs);
    if (!gs) {
        w->file.oom = 1;
        return;
    }
    w->groups = gs;
    pq_group *g = &gs[w->ngroups];
    g->chunks = calloc(w->ncols, sizeof *g->chunks);
    if (!g->chunks) {
        w->file.oom = 1;
        return;
    }
    w->ngroups++;
    g->num_rows = w->group_rows;
    g->usize = 0;
    g->file_offset = (int64_t)w->file.len;
    for (size_t i = 0; i < w->ncols; i++) {
        pq_col *c = &w->cols[i];
        flush_page(w, c);
        g->chunks[i].data_page_offset = (int64_t)w->file.len;
        g->chunks[i].size = (int64_t)c->chunk.len;
        g->chunks[i].usize = c->chunk_usize;
        g->chunks[i].num_values = c->chunk_values;
        ib_buf_add(&w->file, c->chunk.p, c->chunk.len);
        if (c->chunk.oom)
            w->file.oom = 1;
        g->usize += c->chunk_usize;
        ib_buf_reset(&c->chunk);
        c->chunk_values = c->chunk_usize = 0;
    }
    g->size = (int64_t)w->file.len - g->file_offset;
    w->group_rows = 0;
    w->pending = 0;
}

void pq_end_row(pq_writer *w) {
    size_t pending = 0;
    for (size_t i = 0; i < w->ncols; i++) {
        pq_col *c = &w->cols[i];
        if (!c->has_value)
            set_error(w, "column %s: no value in a row", c->name);
        c->has_value = 0;
        if (c->values.len + c->defs.len / 8 >= w->page_target)
            flush_page(w, c);
        pending += c->chunk.len + c->values.len + c->defs.len / 8;
    }
    w->rows++;
    w->group_rows++;
    w->pending = pending;
    if (pending >= w->group_target)
        flush_group(w);
}

void pq_writer_set_codec(pq_writer *w, pq_codec codec) {
    if (w->rows > 0)
        set_error(w, "%s", "the codec is set before the first row");
    else if (!pq_codec_known(codec))
        set_error(w, "%s", "unknown compression codec");
    else
        w->codec = codec;
}

int64_t pq_rows(const pq_writer *w) {
    return w->rows;
}

size_t pq_size(const pq_writer *w) {
    return w->file.len + w->pending;
}

const char *pq_error(const pq_writer *w) {
    return w->error;
}

/* One SchemaElement of a leaf column. */
static void schema_leaf(tc_writer *t, const pq_col *c) {
    tc_struct_begin(t);
    tc_field_i32(t, 1, physical(c->kind));
    tc_field_i32(t, 3, c->required ? REP_REQUIRED : REP_OPTIONAL);
    tc_field_string(t, 4, c->name);
    if (c->kind == PQ_STRING)
        tc_field_i32(t, 6, CT_UTF8);
    else if (c->kind == PQ_TIMESTAMP)
        tc_field_i32(t, 6, CT_TIMESTAMP_MICROS);
    tc_field_i32(t, 9, c->field_id);
    if (c->kind == PQ_STRING) {
        tc_field_struct(t, 10); /* LogicalType union */
        tc_field_struct(t, 1);  /* STRING: StringType {} */
        tc_struct_end(t);
        tc_struct_end(t);
    } else if (c->kind == PQ_TIMESTAMP) {
        tc_field_struct(t, 10); /* LogicalType union */
        tc_field_struct(t, 8);  /* TIMESTAMP: TimestampType */
        tc_field_bool(t, 1, 1); /* isAdjustedToUTC */
        tc_field_struct(t, 2);  /* unit: TimeUnit union */
        tc_field_struct(t, 2);  /* MICROS: MicroSeconds {} */
        tc_struct_end(t);
        tc_struct_end(t);
        tc_struct_end(t);
        tc_struct_end(t);
    }
    tc_struct_end(t);
}

static void column_chunk(tc_writer *t, const pq_col *c, pq_codec codec,
                         const pq_chunk_meta *m) {
    tc_struct_begin(t);                      /* ColumnChunk */
    tc_field_i64(t, 2, m->data_page_offset); /* file_offset */
    tc_field_struct(t, 3);                   /* ColumnMetaData */
    tc_field_i32(t, 1, physical(c->kind));
    tc_field_list(t, 2, TC_I32, c->required ? 1 : 2);
    tc_i32(t, ENC_PLAIN);
    if (!c->required)
        tc_i32(t, ENC_RLE);
    tc_field_list(t, 3, TC_BINARY, 1); /* path_in_schema */
    tc_string(t, c->name);
    tc_field_i32(t, 4, (int32_t)codec);
    tc_field_i64(t, 5, m->num_values);
    tc_field_i64(t, 6, m->usize); /* total_uncompressed_size */
    tc_field_i64(t, 7, m->size);  /* total_compressed_size */
    tc_field_i64(t, 9, m->data_page_offset);
    tc_struct_end(t);
    tc_struct_end(t);
}

int pq_finish(pq_writer *w, const char *const *kv, size_t nkv, ib_buf *out) {
    for (size_t i = 0; i < w->ncols; i++)
        if (w->cols[i].has_value)
            set_error(w, "column %s: a row was not ended", w->cols[i].name);
    flush_group(w);
    ib_buf *f = &w->file;
    size_t footer_at = f->len;
    tc_writer t;
    tc_init(&t, f);
    tc_struct_begin(&t);    /* FileMetaData */
    tc_field_i32(&t, 1, 1); /* version */
    tc_field_list(&t, 2, TC_STRUCT, w->ncols + 1);
    tc_struct_begin(&t); /* the root: a group of every column */
    tc_field_string(&t, 4, "schema");
    tc_field_i32(&t, 5, (int32_t)w->ncols);
    tc_struct_end(&t);
    for (size_t i = 0; i < w->ncols; i++)
        schema_leaf(&t, &w->cols[i]);
    tc_field_i64(&t, 3, w->rows);
    tc_field_list(&t, 4, TC_STRUCT, w->ngroups);
    for (size_t g = 0; g < w->ngroups; g++) {
        const pq_group *gr = &w->groups[g];
        tc_struct_begin(&t); /* RowGroup */
        tc_field_list(&t, 1, TC_STRUCT, w->ncols);
        for (size_t i = 0; i < w->ncols; i++)
            column_chunk(&t, &w->cols[i], w->codec, &gr->chunks[i]);
        tc_field_i64(&t, 2, gr->usize); /* total_byte_size: uncompressed */
        tc_field_i64(&t, 3, gr->num_rows);
        tc_field_i64(&t, 5, gr->file_offset);
        tc_field_i64(&t, 6, gr->size); /* total_compressed_size */
        tc_struct_end(&t);
    }
    if (nkv > 0) {
        tc_field_list(&t, 5, TC_STRUCT, nkv);
        for (size_t i = 0; i < nkv; i++) {
            tc_struct_begin(&t); /* KeyValue */
            tc_field_string(&t, 1, kv[2 * i]);
            tc_field_string(&t, 2, kv[2 * i + 1]);
            tc_struct_end(&t);
        }
    }
    /* Readers parse "<name> version <v>" to work around known writers. */
    tc_field_string(&t, 6, "tidemark-iceberg-lite version 1.0.0");
    tc_struct_end(&t);
    if (t.err || t.depth != 0)
        set_error(w, "%s", "internal error: unbalanced footer");
    ib_buf_u32le(f, (uint32_t)(f->len - footer_at));
    ib_buf_add(f, "PAR1", 4);
    if (!ib_buf_ok(f) || !ib_buf_ok(&w->scratch) || !ib_buf_ok(&w->packed))
        set_error(w, "%s", "out of memory");
    if (w->error[0])
        return -1;
    ib_buf_add(out, f->p, f->len);
    if (!ib_buf_ok(out)) {
        set_error(w, "%s", "out of memory");
        return -1;
    }
    return 0;
}
