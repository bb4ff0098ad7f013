/* The host's one growable buffer, and the one growth rule for arrays.
 *
 * A tm_buf starts zeroed (its first growth allocates) or on a room of the
 * caller's (TM_BUF_ON: a stack array, moved to the heap when outgrown, so
 * that ordinary sizes allocate nothing). Its sizes double; once a growth
 * fails, oom sticks and every later call fails, so that a caller may check
 * once at the end. */
#ifndef TM_BUF_H
#define TM_BUF_H

#include <stddef.h>
#include <string.h>

typedef struct tm_buf {
    char *p;
    size_t n, cap;
    int heap; /* p is ours to free (not the caller's room) */
    int oom;
} tm_buf;

/* A buffer whose first cap bytes are the array room (not freed). */
#define TM_BUF_ON(room) ((tm_buf){(char *)(room), 0, sizeof(room), 0, 0})

/* The slow path of tm_buf_reserve: moves to a larger allocation. */
int tm_buf_grow(tm_buf *b, size_t more);

/* Room for more bytes past b->n: 0, or -1 out of memory. Inline, as
 * record conversion writes through it a few bytes at a time. */
static inline int tm_buf_reserve(tm_buf *b, size_t more) {
    return !b->oom && b->cap - b->n >= more ? 0 : tm_buf_grow(b, more);
}

/* Appends s[0..n) as bytes: 0, or -1 out of memory. */
static inline int tm_buf_put(tm_buf *b, const void *s, size_t n) {
    if (tm_buf_reserve(b, n) != 0)
        return -1;
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

/* Appends s[0..n) and keeps b->p NUL-terminated: 0, or -1 out of memory. */
int tm_buf_add(tm_buf *b, const char *s, size_t n);
/* Frees what the buffer allocated; b is zeroed. */
void tm_buf_free(tm_buf *b);

/* arr (of *cap elements of elem bytes) with room for element n: arr
 * itself, or a larger copy with *cap updated (doubling, from 16); NULL out
 * of memory or on overflow, arr then untouched and still the caller's. */
void *tm_grow_array(void *arr, size_t *cap, size_t n, size_t elem);

#endif
