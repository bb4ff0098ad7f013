/* See scan_values.h. A file is read a column at a time (as file_rows.c
 * does for the table tool), the cells gathered per row. */
#include "scan_values.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "table_meta.h"

typedef struct gather {
    ice_vals *v;
    size_t col;
    int overrun; /* more values than the file's rows */
} gather;

static int on_cell(void *ctx, int64_t row, const pq_cell *cell) {
    gather *g = ctx;
    if (row < 0 || row >= g->v->nrows) {
        g->overrun = 1;
        return -1;
    }
    g->v->cells[(size_t)row * g->v->ncols + g->col] = *cell;
    return 0;
}

static atomic_size_t loads; /* ice_vals_load calls, for the tests */

size_t ice_vals_load_count(void) {
    return atomic_load(&loads);
}

void ice_vals_free(ice_vals *v) {
    pq_reader_free(v->r);
    free(v->data);
    free(v->cells);
    free(v->phys);
    memset(v, 0, sizeof *v);
}

/* The physical type datafile.c writes for a mapped type. */
static pq_phys phys_of(tm_type t) {
    switch (t) {
    case TM_TYPE_INT:
    case TM_TYPE_TIMESTAMP: return PQ_PHYS_INT64;
    case TM_TYPE_BOOL: return PQ_PHYS_BOOLEAN;
    case TM_TYPE_FLOAT: return PQ_PHYS_DOUBLE;
    case TM_TYPE_TEXT:
    case TM_TYPE_JSON:
    case TM_TYPE_BYTES: return PQ_PHYS_BYTE_ARRAY;
    }
    return PQ_PHYS_OTHER;
}

int ice_vals_load(ice_vals *v, const char *uri, const tm_sink_config *config,
                  char *why, size_t why_size) {
    const char *path = ice_uri_path(uri);
    size_t len;
    memset(v, 0, sizeof *v);
    atomic_fetch_add(&loads, 1);
    if (!path) {
        snprintf(why, why_size, "%s: not a local file", uri);
        return ICE_VALS_UNDECODABLE; /* another engine's: not this reader's */
    }
    int rc = fs_read_all(path, &v->data, &len, why, why_size);
    if (rc == 1)
        snprintf(why, why_size, "data file %s is missing", path);
    if (rc != 0)
        return ICE_VALS_FAILED; /* gone, unreadable, or no memory for it */
    char inner[400] = "";
    errno = 0; /* malloc sets ENOMEM; a malformed footer leaves it */
    v->r = pq_reader_open(v->data, len, inner, sizeof inner);
    v->nrows = v->r ? pq_reader_rows(v->r) : 0;
    v->ncols = config->ncolumns;
    if (!v->r) {
        int oom = errno == ENOMEM;
        snprintf(why, why_size, "%s: %s", path, inner);
        ice_vals_free(v);
        return oom ? ICE_VALS_FAILED : ICE_VALS_UNDECODABLE;
    }
    /* The footer's row count is the file's word: the cells must not wrap
     * around. */
    size_t per_row = (v->ncols ? v->ncols : 1) * sizeof *v->cells;
    if (v->nrows < 0 || (uint64_t)v->nrows > SIZE_MAX / per_row) {
        snprintf(why, why_size, "%s: %lld rows: more than memory can hold",
                 path, (long long)v->nrows);
        ice_vals_free(v);
        return ICE_VALS_UNDECODABLE; /* the footer's count is not real */
    }
    v->cells = calloc(v->nrows ? (size_t)v->nrows : 1, per_row);
    v->phys = calloc(v->ncols ? v->ncols : 1, sizeof *v->phys);
    if (!v->cells || !v->phys) {
        snprintf(why, why_size, "%s: out of memory for %lld rows", path,
                 (long long)v->nrows);
        ice_vals_free(v);
        return ICE_VALS_FAILED;
    }
    gather g = {.v = v};
    for (g.col = 0; g.col < v->ncols; g.col++) {
        const tm_column *c = TM_CELEM(tm_column, config->columns, g.col);
        int k = pq_reader_find(v->r, c->name);
        if (k < 0) { /* not in this file: null in every row */
            for (int64_t i = 0; i < v->nrows; i++)
                v->cells[(size_t)i * v->ncols + g.col].is_null = 1;
            continue;
        }
        v->phys[g.col] = pq_reader_phys(v->r, (size_t)k);
        /* A physical type the mapping's is not (INT32 written by another
         * engine) is not read at all: ice_vals_row gives the rows without
         * values, and the rest of the file is still read. */
        if (v->phys[g.col] != phys_of(c->type))
            continue;
        errno = 0;
        if (pq_reader_column(v->r, (size_t)k, on_cell, &g, inner,
                             sizeof inner) != 0) {
            int oom = !g.overrun && errno == ENOMEM;
            snprintf(why, why_size, "%s: column %s: %s", path, c->name,
                     g.overrun ? "more values than the file's rows" : inner);
            ice_vals_free(v);
            return oom ? ICE_VALS_FAILED : ICE_VALS_UNDECODABLE;
        }
    }
    return 0;
}

int ice_vals_row(const ice_vals *v, const tm_sink_config *config, int64_t row,
                 tm_value *out) {
    if (row < 0 || row >= v->nrows)
        return -1;
    for (size_t k = 0; k < v->ncols; k++) {
        const tm_column *c = TM_CELEM(tm_column, config->columns, k);
        const pq_cell *cell = &v->cells[(size_t)row * v->ncols + k];
        tm_value *o = &out[k];
        memset(o, 0, sizeof *o);
        o->struct_size = sizeof *o;
        if (cell->is_null) {
            o->is_null = 1;
            continue;
        }
        pq_phys want = phys_of(c->type);
        if (v->phys[k] != want)
            return -1;
        if (want == PQ_PHYS_DOUBLE) {
            o->v.f = cell->f;
        } else if (want == PQ_PHYS_BYTE_ARRAY) {
            o->v.s.ptr = cell->p ? (const char *)cell->p : "";
            o->v.s.len = cell->n;
        } else {
            o->v.i = cell->i;
        }
    }
    return 0;
}
