/* Chunks of CHUNK_SIZE serve small allocations; anything larger than a
 * quarter chunk (a 10 MB message value) gets a chunk of its own, so big
 * messages waste no space and small ones no mallocs. */
#include "convert/arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE ((size_t)64 * 1024)
#define ALIGN      ((size_t)16)

struct tm_arena_chunk {
    tm_arena_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void tm_arena_init(tm_arena *a) {
    a->head = NULL;
    a->scratch = NULL;
    a->scratch_size = 0;
    a->bytes = 0;
}

static void free_chain(tm_arena_chunk *c) {
    while (c) {
        tm_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
}

void tm_arena_reset(tm_arena *a) {
    tm_arena_chunk *keep = NULL, *c = a->head;
    while (c) {
        tm_arena_chunk *next = c->next;
        if (!keep && c->size == CHUNK_SIZE) {
            keep = c;
            keep->used = 0;
            keep->next = NULL;
        } else {
            free(c);
        }
        c = next;
    }
    a->head = keep;
    a->bytes = keep ? keep->size : 0;
}

size_t tm_arena_bytes(const tm_arena *a) {
    return a->bytes;
}

void tm_arena_free(tm_arena *a) {
    free_chain(a->head);
    free(a->scratch);
    tm_arena_init(a);
}

static tm_arena_chunk *new_chunk(tm_arena *a, size_t size) {
    if (size > SIZE_MAX - sizeof(tm_arena_chunk))
        return NULL;
    tm_arena_chunk *c = malloc(sizeof(tm_arena_chunk) + size);
    if (!c)
        return NULL;
    c->next = NULL;
    c->size = size;
    c->used = 0;
    a->bytes += size;
    return c;
}

void *tm_arena_alloc(tm_arena *a, size_t n) {
    if (n == 0)
        n = 1;
    if (n > SIZE_MAX - ALIGN)
        return NULL;
    size_t need = (n + ALIGN - 1) & ~(ALIGN - 1);
    tm_arena_chunk *c = a->head;
    if (need > CHUNK_SIZE / 4) {
        /* Its own chunk, linked behind the head so the head keeps
         * serving small allocations. */
        tm_arena_chunk *big = new_chunk(a, need);
        if (!big)
            return NULL;
        big->used = need;
        if (c) {
            big->next = c->next;
            c->next = big;
        } else {
            a->head = big;
        }
        return big->data;
    }
    if (!c || c->size != CHUNK_SIZE || c->size - c->used < need) {
        tm_arena_chunk *fresh = new_chunk(a, CHUNK_SIZE);
        if (!fresh)
            return NULL;
        fresh->next = c;
        a->head = c = fresh;
    }
    void *p = c->data + c->used;
    c->used += need;
    return p;
}

void *tm_arena_scratch(tm_arena *a, size_t n) {
    if (n <= a->scratch_size)
        return a->scratch;
    void *fresh = malloc(n);
    if (!fresh)
        return NULL; /* the old buffer stays, for a smaller need */
    free(a->scratch);
    a->scratch = fresh;
    a->scratch_size = n;
    return fresh;
}

void *tm_arena_dup(tm_arena *a, const void *p, size_t n) {
    void *q = tm_arena_alloc(a, n);
    if (q && n)
        memcpy(q, p, n);
    return q;
}

char *tm_arena_strndup(tm_arena *a, const char *s, size_t n) {
    if (n == SIZE_MAX)
        return NULL;
    char *q = tm_arena_alloc(a, n + 1);
    if (!q)
        return NULL;
    if (n)
        memcpy(q, s, n);
    q[n] = '\0';
    return q;
}

char *tm_arena_strdup(tm_arena *a, const char *s) {
    return tm_arena_strndup(a, s, strlen(s));
}

char *tm_arena_printf(tm_arena *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *q = tm_arena_alloc(a, (size_t)n + 1);
    if (!q)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(q, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return q;
}
