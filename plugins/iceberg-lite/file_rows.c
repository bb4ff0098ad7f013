/* A data file's rows with every column, read with our own Parquet reader
 * (parquet_reader.h reads a column at a time: the cells are gathered per
 * column, then handed out row by row), and the table schema as Parquet
 * columns, for `table scan` and compact. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "maint.h"

static const struct {
    const char *type;
    pq_kind kind;
} KINDS[] = {
    {"string", PQ_STRING},         {"long", PQ_INT64},
    {"double", PQ_DOUBLE},         {"boolean", PQ_BOOLEAN},
    {"timestamptz", PQ_TIMESTAMP}, {"binary", PQ_BINARY},
};

static json_t *current_schema(json_t *meta) {
    int64_t id = ice_json_int(meta, "current-schema-id", 0);
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(meta, "schemas"), i, s) {
        if (ice_json_int(s, "schema-id", -1) == id)
            return s;
    }
    return NULL;
}

json_t *ice_schema_fields(json_t *meta) {
    json_t *f = json_object_get(current_schema(meta), "fields");
    return json_is_array(f) ? f : NULL;
}

int ice_type_kind(const char *type, pq_kind *kind) {
    for (size_t k = 0; type && k < sizeof KINDS / sizeof KINDS[0]; k++)
        if (strcmp(type, KINDS[k].type) == 0) {
            *kind = KINDS[k].kind;
            return 0;
        }
    return -1;
}

char *ice_schema_text(json_t *meta) {
    json_t *s = current_schema(meta);
    return s ? json_dumps(s, JSON_COMPACT) : NULL;
}

int ice_schema_columns(json_t *meta, pq_column_def **cols, size_t *ncols,
                       char *why, size_t why_size) {
    json_t *fields = json_object_get(current_schema(meta), "fields");
    size_t n = json_array_size(fields);
    *cols = NULL;
    *ncols = 0;
    if (n == 0) {
        snprintf(why, why_size, "the table metadata has no current schema");
        return -1;
    }
    pq_column_def *c = calloc(n, sizeof *c);
    if (!c) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *f = json_array_get(fields, i);
        const char *name = json_string_value(json_object_get(f, "name"));
        const char *type = json_string_value(json_object_get(f, "type"));
        pq_kind kind;
        if (!name || ice_type_kind(type, &kind) != 0) {
            snprintf(why, why_size,
                     "schema field %zu: type %s is not one "
                     "this sink writes",
                     i + 1, type ? type : "(none)");
            free(c);
            return -1;
        }
        c[i] = (pq_column_def){name, kind,
                               json_is_true(json_object_get(f, "required")),
                               (int32_t)ice_json_int(f, "id", (int64_t)i + 1)};
    }
    *cols = c;
    *ncols = n;
    return 0;
}

typedef struct gather {
    pq_cell *cells; /* nrows x ncols, row major */
    int64_t nrows;
    size_t ncols, col;
    int overrun; /* a column had more values than the file's rows */
} gather;

static int on_cell(void *ctx, int64_t row, const pq_cell *cell) {
    gather *g = ctx;
    if (row < 0 || row >= g->nrows) {
        g->overrun = 1;
        return -1;
    }
    g->cells[(size_t)row * g->ncols + g->col] = *cell;
    return 0;
}

/* The physical type the reader gives for a column of kind K. */
static pq_phys phys_of(pq_kind k) {
    switch (k) {
    case PQ_BOOLEAN: return PQ_PHYS_BOOLEAN;
    case PQ_INT64:
    case PQ_TIMESTAMP: return PQ_PHYS_INT64;
    case PQ_DOUBLE: return PQ_PHYS_DOUBLE;
    case PQ_STRING:
    case PQ_BINARY: return PQ_PHYS_BYTE_ARRAY;
    }
    return PQ_PHYS_OTHER;
}

/* Which file column fills each of the NCOLS output columns: the one whose
 * field id is cols[k]'s (or, without a field id, its name), -1 (null in
 * every row) when the file has none,
 * written before the column was added to the table. cols NULL: the file's
 * own columns in order. 0, or -1 with why (a column of another physical
 * type: read as the schema's type it would be misread). */
static int project(pq_reader *r, const pq_column_def *cols, size_t ncols,
                   long *src, const char *path, char *why, size_t why_size) {
    for (size_t k = 0; k < ncols; k++) {
        src[k] = cols ? -1 : (long)k;
        for (size_t c = 0; cols && c < pq_reader_ncols(r); c++)
            if (pq_reader_field_id(r, c) == cols[k].field_id)
                src[k] = (long)c;
        /* A column without a field id (a writer that sets none) is the
         * schema's column of its name: names are never reused here
         * (renames are refused). */
        int by_name = cols && src[k] < 0 ? pq_reader_find(r, cols[k].name) : -1;
        if (by_name >= 0 && pq_reader_field_id(r, (size_t)by_name) < 0)
            src[k] = by_name;
        if (cols && src[k] >= 0 &&
            pq_reader_phys(r, (size_t)src[k]) != phys_of(cols[k].kind)) {
            snprintf(why, why_size,
                     "%s: column %s (field id %d) is not of the physical "
                     "type this sink reads for the table's type",
                     path, cols[k].name, (int)cols[k].field_id);
            return -1;
        }
    }
    return 0;
}

/* Reads the file's rows into cells of NCOLS columns (see project). */
static int read_rows(const char *uri, const pq_column_def *cols, size_t ncols,
                     ice_row_fn fn, void *ctx, char *why, size_t why_size) {
    const char *path = ice_uri_path(uri);
    uint8_t *data;
    size_t len;
    if (!path) {
        snprintf(why, why_size, "%s: not a local file", uri);
        return -1;
    }
    int rc = fs_read_all(path, &data, &len, why, why_size);
    if (rc == 1)
        snprintf(why, why_size, "data file %s is missing", path);
    if (rc != 0)
        return -1;
    char inner[400] = "";
    pq_reader *r = pq_reader_open(data, len, inner, sizeof inner);
    if (!r) {
        snprintf(why, why_size, "%s: %s", path, inner);
        free(data);
        return -1;
    }
    gather g = {.nrows = pq_reader_rows(r),
                .ncols = cols ? ncols : pq_reader_ncols(r)};
    /* The footer's row count is the file's word: nrows * ncols cells must
     * not wrap around (then every row past the first would land outside
     * the allocation). */
    if (g.nrows < 0 ||
        (g.ncols && (uint64_t)g.nrows > SIZE_MAX / sizeof *g.cells / g.ncols)) {
        snprintf(why, why_size,
                 "%s: %lld rows of %zu columns: more than "
                 "memory can hold",
                 path, (long long)g.nrows, g.ncols);
        pq_reader_free(r);
        free(data);
        return -1;
    }
    size_t cells = (size_t)g.nrows * g.ncols;
    g.cells = calloc(cells ? cells : 1, sizeof *g.cells);
    long *src = calloc(g.ncols ? g.ncols : 1, sizeof *src);
    rc = g.cells && src ? 0 : -1;
    if (rc != 0)
        snprintf(why, why_size, "%s: out of memory for %lld rows", path,
                 (long long)g.nrows);
    if (rc == 0)
        rc = project(r, cols, g.ncols, src, path, why, why_size);
    for (g.col = 0; rc == 0 && g.col < g.ncols; g.col++) {
        if (src[g.col] < 0) {
            for (int64_t i = 0; i < g.nrows; i++)
                g.cells[(size_t)i * g.ncols + g.col].is_null = 1;
            continue;
        }
        if (pq_reader_column(r, (size_t)src[g.col], on_cell, &g, inner,
                             sizeof inner) != 0) {
            snprintf(why, why_size, "%s: column %ld: %s", path, src[g.col] + 1,
                     g.overrun ? "more values than the file's rows" : inner);
            rc = -1;
        }
    }
    for (int64_t i = 0; rc == 0 && i < g.nrows; i++)
        rc = fn(ctx, &g.cells[(size_t)i * g.ncols], g.ncols);
    free(src);
    free(g.cells);
    pq_reader_free(r);
    free(data);
    return rc;
}

int ice_file_rows(const char *uri, ice_row_fn fn, void *ctx, char *why,
                  size_t why_size) {
    return read_rows(uri, NULL, 0, fn, ctx, why, why_size);
}

int ice_file_rows_as(const char *uri, const pq_column_def *cols, size_t ncols,
                     ice_row_fn fn, void *ctx, char *why, size_t why_size) {
    return read_rows(uri, cols, ncols, fn, ctx, why, why_size);
}
