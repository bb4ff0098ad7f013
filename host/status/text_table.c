#include "status/text_table.h"

#include <stdlib.h>
#include <string.h>

struct tm_table {
    size_t ncols;
    char **cells; /* (nrows + 1) * ncols, headers first */
    size_t nrows, cap;
};

static char *dup_cell(const char *s) {
    return strdup(s ? s : "-");
}

tm_table *tm_table_new(size_t ncols, const char *const *headers) {
    tm_table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->ncols = ncols;
    t->cap = 8;
    t->cells = calloc(t->cap * ncols, sizeof *t->cells);
    if (!t->cells) {
        free(t);
        return NULL;
    }
    t->nrows = 1; /* before the copies: tm_table_free frees what is done */
    for (size_t c = 0; c < ncols; c++)
        if (!(t->cells[c] = dup_cell(headers[c]))) {
            tm_table_free(t);
            return NULL;
        }
    return t;
}

int tm_table_add(tm_table *t, const char *const *cells) {
    if (t->nrows == t->cap) {
        size_t ncap = t->cap * 2;
        char **nv = realloc(t->cells, ncap * t->ncols * sizeof *nv);
        if (!nv)
            return -1;
        t->cells = nv;
        t->cap = ncap;
    }
    char **row = t->cells + t->nrows * t->ncols;
    for (size_t c = 0; c < t->ncols; c++)
        if (!(row[c] = dup_cell(cells[c]))) {
            while (c-- > 0)
                free(row[c]);
            return -1;
        }
    t->nrows++;
    return 0;
}

void tm_table_print(const tm_table *t, FILE *out, const char *indent) {
    size_t width[64] = {0};
    size_t ncols = t->ncols < 64 ? t->ncols : 64;
    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < ncols; c++) {
            size_t w = strlen(t->cells[r * t->ncols + c]);
            if (w > width[c])
                width[c] = w;
        }
    for (size_t r = 0; r < t->nrows; r++) {
        fputs(indent ? indent : "", out);
        for (size_t c = 0; c < ncols; c++) {
            const char *cell = t->cells[r * t->ncols + c];
            if (c + 1 == ncols)
                fputs(cell, out);
            else
                fprintf(out, "%-*s  ", (int)width[c], cell);
        }
        fputc('\n', out);
    }
}

void tm_table_free(tm_table *t) {
    if (!t)
        return;
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
}
