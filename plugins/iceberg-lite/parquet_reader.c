/* Parquet reader for the plugin's own files (see parquet_reader.h). Field
 * ids are parquet.thrift's, as in parquet_writer.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parquet_reader.h"
#include "pq_codec.h"
#include "thrift_reader.h"

enum { T_BOOLEAN = 0, T_INT64 = 2, T_DOUBLE = 5, T_BYTE_ARRAY = 6 };

typedef struct pq_rchunk {
    int64_t offset, size, num_values;
    int codec; /* pq_codec */
} pq_rchunk;

typedef struct pq_rcol {
    char name[256];
    int type;
    int optional;
    int32_t field_id;
} pq_rcol;

struct pq_reader {
    const uint8_t *data;
    size_t len;
    pq_rcol *cols;
    size_t ncols;
    int64_t rows;
    pq_rchunk *chunks; /* ngroups * ncols */
    size_t ngroups;
    size_t pages;
    /* Decompressed pages: cells point into them, and callers keep cells
     * until the reader is freed (file_rows gathers a whole file). */
    uint8_t **pagebufs;
    size_t npagebufs;
};

static int bad(char *why, size_t size, const char *what) {
    snprintf(why, size, "not a Parquet file of this sink: %s", what);
    return -1;
}

static int read_schema_element(tr_reader *t, pq_rcol *c, int *children) {
    int16_t id;
    int type;
    const uint8_t *p;
    size_t n;
    *children = -1;
    c->type = -1;
    c->field_id = -1;
    tr_struct_begin(t);
    while (tr_field(t, &id, &type) == 1) {
        if (id == 1 && type == TC_I32)
            c->type = (int)tr_int(t);
        else if (id == 3 && type == TC_I32)
            c->optional = tr_int(t) == 1;
        else if (id == 4 && type == TC_BINARY) {
            tr_binary(t, &p, &n);
            if (n >= sizeof c->name) /* and so never a negative %.*s */
                n = sizeof c->name - 1;
            memcpy(c->name, p, n);
            c->name[n] = '\0';
        } else if (id == 5 && type == TC_I32)
            *children = (int)tr_int(t);
        else if (id == 9 && type == TC_I32)
            c->field_id = (int32_t)tr_int(t);
        else
            tr_skip(t, type);
    }
    return t->err ? -1 : 0;
}

static int read_schema(pq_reader *r, tr_reader *t, char *why, size_t size) {
    int elem, children;
    size_t n;
    tr_list(t, &elem, &n);
    if (t->err || elem != TC_STRUCT || n < 2)
        return bad(why, size, "schema");
    pq_rcol root;
    if (read_schema_element(t, &root, &children) != 0 ||
        children != (int)(n - 1))
        return bad(why, size, "not a flat schema");
    r->ncols = n - 1;
    r->cols = calloc(r->ncols, sizeof *r->cols);
    if (!r->cols)
        return bad(why, size, "out of memory");
    for (size_t i = 0; i < r->ncols; i++)
        if (read_schema_element(t, &r->cols[i], &children) != 0 ||
            children >= 0 || r->cols[i].type < 0)
            return bad(why, size, "not a flat schema");
    return 0;
}

static int read_column_chunk(tr_reader *t, pq_rchunk *ch, int *codec,
                             int *dict) {
    int16_t id, mid;
    int type, mtype;
    tr_struct_begin(t);
    while (tr_field(t, &id, &type) == 1) {
        if (id != 3 || type != TC_STRUCT) {
            tr_skip(t, type);
            continue;
        }
        tr_struct_begin(t); /* ColumnMetaData */
        while (tr_field(t, &mid, &mtype) == 1) {
            if (mid == 4 && mtype == TC_I32)
                *codec = (int)tr_int(t);
            else if (mid == 5 && mtype == TC_I64)
                ch->num_values = tr_int(t);
            else if (mid == 7 && mtype == TC_I64)
                ch->size = tr_int(t);
            else if (mid == 9 && mtype == TC_I64)
                ch->offset = tr_int(t);
            else if (mid == 11)
                *dict = 1, tr_skip(t, mtype);
            else
                tr_skip(t, mtype);
        }
    }
    return t->err ? -1 : 0;
}

static int read_row_groups(pq_reader *r, tr_reader *t, char *why, size_t size) {
    int elem;
    size_t n;
    tr_list(t, &elem, &n);
    if (t->err || (n && elem != TC_STRUCT))
        return bad(why, size, "row groups");
    r->ngroups = n;
    r->chunks = calloc(n ? n * r->ncols : 1, sizeof *r->chunks);
    if (!r->chunks)
        return bad(why, size, "out of memory");
    for (size_t g = 0; g < n; g++) {
        int16_t id;
        int type;
        tr_struct_begin(t);
        while (tr_field(t, &id, &type) == 1) {
            if (id != 1 || type != TC_LIST) {
                tr_skip(t, type);
                continue;
            }
            size_t nc;
            tr_list(t, &elem, &nc);
            if (nc != r->ncols || elem != TC_STRUCT)
                return bad(why, size, "column chunks");
            for (size_t c = 0; c < nc; c++) {
                int codec = 0, dict = 0;
                pq_rchunk *ch = &r->chunks[g * r->ncols + c];
                if (read_column_chunk(t, ch, &codec, &dict) != 0)
                    return bad(why, size, "column chunk");
                if (!pq_codec_known(codec))
                    return bad(why, size,
                               "a compression codec other than zstd, "
                               "snappy or none");
                if (dict)
                    return bad(why, size, "dictionary pages");
                ch->codec = codec;
                if (ch->offset < 4 || ch->size < 0 ||
                    (uint64_t)ch->offset + (uint64_t)ch->size > r->len)
                    return bad(why, size, "chunk outside the file");
            }
        }
    }
    return t->err ? bad(why, size, "row groups") : 0;
}

/* Every column's chunks hold exactly the footer's row count, so a reader
 * sizing by rows gets no more values than that (read_page holds each page
 * to its chunk). */
static int check_rows(const pq_reader *r, char *why, size_t size) {
    if (r->rows < 0)
        return bad(why, size, "a negative number of rows");
    for (size_t c = 0; c < r->ncols; c++) {
        int64_t sum = 0;
        for (size_t g = 0; g < r->ngroups; g++) {
            int64_t v = r->chunks[g * r->ncols + c].num_values;
            if (v < 0 || v > r->rows - sum)
                return bad(why, size,
                           "column chunks with more values than "
                           "the file's rows");
            sum += v;
        }
        if (sum != r->rows)
            return bad(why, size,
                       "column chunks with fewer values than "
                       "the file's rows");
    }
    return 0;
}

pq_reader *pq_reader_open(const uint8_t *data, size_t len, char *why,
                          size_t why_size) {
    if (len < 12 || memcmp(data, "PAR1", 4) != 0 ||
        memcmp(data + len - 4, "PAR1", 4) != 0) {
        bad(why, why_size, "no PAR1 magic");
        return NULL;
    }
    const uint8_t *f = data + len - 8;
    uint32_t flen = (uint32_t)f[0] | (uint32_t)f[1] << 8 |
                    (uint32_t)f[2] << 16 | (uint32_t)f[3] << 24;
    if (flen > len - 12) {
        bad(why, why_size, "footer length");
        return NULL;
    }
    pq_reader *r = calloc(1, sizeof *r);
    if (!r) {
        bad(why, why_size, "out of memory");
        return NULL;
    }
    r->data = data;
    r->len = len;
    tr_reader t;
    tr_init(&t, f - flen, flen);
    tr_struct_begin(&t);
    int16_t id;
    int type, rc = 0, have_schema = 0, have_groups = 0;
    while (rc == 0 && tr_field(&t, &id, &type) == 1) {
        /* Each of schema and row_groups once, in that order: chunks[] is
         * sized by the schema's column count. */
        if (id == 2 && type == TC_LIST) {
            rc = have_schema ? bad(why, why_size, "a second schema")
                             : read_schema(r, &t, why, why_size);
            have_schema = 1;
        } else if (id == 3 && type == TC_I64) {
            r->rows = tr_int(&t);
        } else if (id == 4 && type == TC_LIST) {
            rc = !have_schema  ? bad(why, why_size, "row groups before schema")
                 : have_groups ? bad(why, why_size, "row groups twice")
                               : read_row_groups(r, &t, why, why_size);
            have_groups = 1;
        } else {
            tr_skip(&t, type);
        }
    }
    if (rc == 0 && (t.err || !have_schema))
        rc = bad(why, why_size, "footer");
    if (rc == 0)
        rc = check_rows(r, why, why_size);
    if (rc != 0) {
        pq_reader_free(r);
        return NULL;
    }
    return r;
}

void pq_reader_free(pq_reader *r) {
    if (!r)
        return;
    for (size_t i = 0; i < r->npagebufs; i++)
        free(r->pagebufs[i]);
    free(r->pagebufs);
    free(r->cols);
    free(r->chunks);
    free(r);
}

int64_t pq_reader_rows(const pq_reader *r) {
    return r->rows;
}

size_t pq_reader_ncols(const pq_reader *r) {
    return r->ncols;
}

int pq_reader_find(const pq_reader *r, const char *name) {
    for (size_t i = 0; i < r->ncols; i++)
        if (strcmp(r->cols[i].name, name) == 0)
            return (int)i;
    return -1;
}

int32_t pq_reader_field_id(const pq_reader *r, size_t col) {
    return col < r->ncols ? r->cols[col].field_id : -1;
}

pq_phys pq_reader_phys(const pq_reader *r, size_t col) {
    switch (col < r->ncols ? r->cols[col].type : -1) {
    case T_BOOLEAN: return PQ_PHYS_BOOLEAN;
    case T_INT64: return PQ_PHYS_INT64;
    case T_DOUBLE: return PQ_PHYS_DOUBLE;
    case T_BYTE_ARRAY: return PQ_PHYS_BYTE_ARRAY;
    default: return PQ_PHYS_OTHER;
    }
}

int pq_reader_codec(const pq_reader *r, size_t col) {
    return col < r->ncols && r->ngroups > 0 ? r->chunks[col].codec : -1;
}

size_t pq_reader_pages(const pq_reader *r) {
    return r->pages;
}

/* Definition levels (bit width 1) of nvals values into defs. */
static int read_levels(const uint8_t *p, size_t n, uint8_t *defs,
                       int64_t nvals) {
    tr_reader v; /* only its varint decoding */
    tr_init(&v, p, n);
    int64_t got = 0;
    while (got < nvals && !v.err) {
        uint64_t h = tr_uvarint(&v);
        if (h & 1) { /* bit-packed: (h >> 1) groups of 8 values, a byte each */
            uint64_t groups = h >> 1;
            if ((uint64_t)(v.end - v.p) < groups)
                return -1;
            for (uint64_t i = 0; i < groups * 8 && got < nvals; i++)
                defs[got++] = (v.p[i / 8] >> (i % 8)) & 1;
            v.p += groups;
        } else {
            uint64_t run = h >> 1;
            if (v.p >= v.end)
                return -1;
            uint8_t val = *v.p++ & 1;
            for (uint64_t i = 0; i < run && got < nvals; i++)
                defs[got++] = val;
        }
    }
    return v.err || got < nvals ? -1 : 0;
}

/* The page body p[0..csize) decompressed to its usize bytes, in a buffer
 * the reader keeps: NULL when the sizes lie or the data is corrupt. */
static const uint8_t *inflate_page(pq_reader *r, int codec, const uint8_t *p,
                                   int64_t csize, int64_t usize) {
    if (usize < 0 || (uint64_t)usize > PQ_MAX_PAGE_BYTES ||
        pq_declared_size_is(codec, p, (size_t)csize, (size_t)usize) != 0)
        return NULL;
    uint8_t **bufs = realloc(r->pagebufs, (r->npagebufs + 1) * sizeof *bufs);
    if (!bufs)
        return NULL;
    r->pagebufs = bufs;
    uint8_t *out = malloc(usize ? (size_t)usize : 1);
    if (!out)
        return NULL;
    if (pq_decompress(codec, p, (size_t)csize, out, (size_t)usize) != 0) {
        free(out);
        return NULL;
    }
    r->pagebufs[r->npagebufs++] = out;
    return out;
}

/* One data page: header, levels, values. *pos moves past it. */
static int read_page(pq_reader *r, const pq_rcol *c, int codec,
                     const uint8_t **pos, const uint8_t *end, int64_t left,
                     int64_t *row, pq_cell_fn fn, void *ctx, char *why,
                     size_t size) {
    tr_reader t;
    tr_init(&t, *pos, (size_t)(end - *pos));
    tr_struct_begin(&t);
    int16_t id, did;
    int type, dtype;
    int64_t ptype = -1, usize = -1, csize = -1, nvals = -1, enc = -1;
    while (tr_field(&t, &id, &type) == 1) {
        if (id == 1 && type == TC_I32)
            ptype = tr_int(&t);
        else if (id == 2 && type == TC_I32)
            usize = tr_int(&t);
        else if (id == 3 && type == TC_I32)
            csize = tr_int(&t);
        else if (id == 5 && type == TC_STRUCT) {
            tr_struct_begin(&t);
            while (tr_field(&t, &did, &dtype) == 1) {
                if (did == 1 && dtype == TC_I32)
                    nvals = tr_int(&t);
                else if (did == 2 && dtype == TC_I32)
                    enc = tr_int(&t);
                else
                    tr_skip(&t, dtype);
            }
        } else
            tr_skip(&t, type);
    }
    if (t.err || ptype != 0 || enc != 0 || csize < 0 || nvals < 0 ||
        csize > end - t.p)
        return bad(why, size, "a page that is not PLAIN data page v1");
    if (nvals > left) /* the rows would outgrow the footer's count */
        return bad(why, size, "a page with more values than its chunk");
    r->pages++;
    const uint8_t *p = t.p, *pend = t.p + csize;
    *pos = pend;
    if (codec != PQ_CODEC_NONE) {
        if (!(p = inflate_page(r, codec, p, csize, usize)))
            return bad(why, size,
                       "a compressed page that does not decompress to its "
                       "header's size");
        pend = p + usize;
    }
    uint8_t *defs = NULL;
    if (c->optional) {
        if (pend - p < 4)
            return bad(why, size, "definition levels");
        uint32_t ln = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                      (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        p += 4;
        if (ln > (size_t)(pend - p) ||
            !(defs = malloc(nvals ? (size_t)nvals : 1)) ||
            read_levels(p, ln, defs, nvals) != 0) {
            free(defs);
            return bad(why, size, "definition levels");
        }
        p += ln;
    }
    int rc = 0;
    int64_t bit = 0;
    for (int64_t i = 0; rc == 0 && i < nvals; i++) {
        pq_cell cell = {0};
        if (defs && !defs[i]) {
            cell.is_null = 1;
        } else if (c->type == T_BOOLEAN) {
            if ((pend - p) * 8 <= bit) {
                rc = -1;
                break;
            }
            cell.i = (p[bit / 8] >> (bit % 8)) & 1;
            bit++;
        } else if (c->type == T_INT64 || c->type == T_DOUBLE) {
            if (pend - p < 8) {
                rc = -1;
                break;
            }
            uint64_t u = 0;
            for (int k = 0; k < 8; k++)
                u |= (uint64_t)p[k] << (8 * k);
            p += 8;
            cell.i = (int64_t)u;
            memcpy(&cell.f, &u, sizeof cell.f);
        } else if (c->type == T_BYTE_ARRAY) {
            if (pend - p < 4) {
                rc = -1;
                break;
            }
            uint32_t ln = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                          (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            p += 4;
            if (ln > (size_t)(pend - p)) {
                rc = -1;
                break;
            }
            cell.p = p;
            cell.n = ln;
            p += ln;
        } else {
            rc = -1;
            break;
        }
        if (fn(ctx, (*row)++, &cell) != 0)
            rc = 1;
    }
    free(defs);
    if (rc < 0)
        return bad(why, size, "values past the page");
    return rc;
}

int pq_reader_column(pq_reader *r, size_t col, pq_cell_fn fn, void *ctx,
                     char *why, size_t why_size) {
    if (col >= r->ncols)
        return bad(why, why_size, "no such column");
    const pq_rcol *c = &r->cols[col];
    int64_t row = 0;
    r->pages = 0;
    for (size_t g = 0; g < r->ngroups; g++) {
        const pq_rchunk *ch = &r->chunks[g * r->ncols + col];
        const uint8_t *pos = r->data + ch->offset;
        const uint8_t *end = pos + ch->size;
        int64_t start = row;
        while (row - start < ch->num_values) {
            if (pos >= end)
                return bad(why, why_size, "chunk shorter than its values");
            int rc = read_page(r, c, ch->codec, &pos, end,
                               ch->num_values - (row - start), &row, fn, ctx,
                               why, why_size);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}
