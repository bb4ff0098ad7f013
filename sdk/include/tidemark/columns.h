/*
 * tidemark/columns.h - source-level helpers for a sink that takes its
 * columns from each batch (TM_CAP_SCHEMA_COLUMNS, tm_batch.columns).
 *
 * Not part of the ABI: static inline functions a plugin compiles into
 * itself (a plugin links no code of the host or of another plugin). A sink
 * embeds a tm_columns, keeps in it a copy of the columns its table was
 * last made to fit (a batch is the host's for one call only), compares the
 * next batch's columns with the copy (tm_columns_same: nothing to do when
 * they are the same). docs/writing-a-sink.md says how the built-in sinks
 * use them.
 */
#ifndef TIDEMARK_COLUMNS_H
#define TIDEMARK_COLUMNS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tidemark/sink.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A plugin-owned copy of a column list: tm_column elements of this SDK's
 * size, names malloc'd. Zero-initialised: no columns. */
typedef struct tm_columns {
    tm_column *cols;
    size_t n;
} tm_columns;

static inline void tm_columns_free(tm_columns *own) {
    for (size_t i = 0; own->cols && i < own->n; i++)
        free((char *)(uintptr_t)own->cols[i].name);
    free(own->cols);
    own->cols = NULL;
    own->n = 0;
}

/* 1 when COLS (N of them, walked with TM_CELEM: the host's stride) are
 * those of OWN: same names in the same order, same type, key and required
 * flags. */
static inline int tm_columns_same(const tm_columns *own, const tm_column *cols,
                                  size_t n) {
    if (n != own->n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const tm_column *a = TM_CELEM(tm_column, cols, i);
        const tm_column *o = &own->cols[i];
        if (strcmp(a->name, o->name) != 0 || a->type != o->type ||
            a->key != o->key || a->required != o->required)
            return 0;
    }
    return 1;
}

/* Replaces OWN with a copy of COLS (N, walked with TM_CELEM). 0, or -1
 * when out of memory, OWN then unchanged. */
static inline int tm_columns_copy(tm_columns *own, const tm_column *cols,
                                  size_t n) {
    tm_column *c = calloc(n ? n : 1, sizeof *c);
    size_t i = 0;
    for (; c && i < n; i++) {
        const tm_column *a = TM_CELEM(tm_column, cols, i);
        char *name = malloc(strlen(a->name) + 1);
        if (!name)
            break;
        memcpy(name, a->name, strlen(a->name) + 1);
        c[i] = (tm_column){.struct_size = (uint32_t)sizeof *c,
                           .name = name,
                           .type = a->type,
                           .required = a->required,
                           .key = a->key};
    }
    if (!c || i < n) {
        tm_columns part = {c, i};
        tm_columns_free(&part);
        return -1;
    }
    tm_columns_free(own);
    own->cols = c;
    own->n = n;
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif /* TIDEMARK_COLUMNS_H */
