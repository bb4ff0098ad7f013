#include "services/buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_CAP 64

int tm_buf_grow(tm_buf *b, size_t more) {
    if (b->oom)
        return -1;
    if (b->cap - b->n >= more)
        return 0;
    size_t cap = b->cap ? b->cap : FIRST_CAP;
    while (cap - b->n < more) {
        if (cap > SIZE_MAX / 2) {
            b->oom = 1;
            return -1;
        }
        cap *= 2;
    }
    char *p = b->heap ? realloc(b->p, cap) : malloc(cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    if (!b->heap && b->n)
        memcpy(p, b->p, b->n);
    b->p = p;
    b->cap = cap;
    b->heap = 1;
    return 0;
}

int tm_buf_add(tm_buf *b, const char *s, size_t n) {
    if (n == SIZE_MAX || tm_buf_reserve(b, n + 1) != 0) {
        b->oom = 1;
        return -1;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

void tm_buf_free(tm_buf *b) {
    if (b->heap)
        free(b->p);
    *b = (tm_buf){0};
}

void *tm_grow_array(void *arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap)
        return arr;
    size_t c = *cap ? *cap : 16;
    while (c <= n) {
        if (c > SIZE_MAX / 2)
            return NULL;
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem)
        return NULL;
    void *p = realloc(arr, c * elem);
    if (p)
        *cap = c;
    return p;
}
