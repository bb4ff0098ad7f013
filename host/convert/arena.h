/* A bump allocator for everything one batch keeps (message copies,
 * converted values, strings), released at once when the batch is reset:
 * no per-record free, and the pointers handed to the sink stay put while
 * the batch lives. */
#ifndef TM_ARENA_H
#define TM_ARENA_H

#include <stddef.h>
#include <tidemark/sink.h> /* TM_PRINTF */

typedef struct tm_arena_chunk tm_arena_chunk;

typedef struct tm_arena {
    tm_arena_chunk *head; /* the chunk small allocations come from */
    void *scratch;        /* tm_arena_scratch's buffer, kept across resets */
    size_t scratch_size;
    size_t bytes; /* the chunks' sizes: what the batch holds */
} tm_arena;

void tm_arena_init(tm_arena *a);
/* Frees every chunk but one ordinary one, kept for the next batch. */
void tm_arena_reset(tm_arena *a);
void tm_arena_free(tm_arena *a);

/* The bytes of the arena's chunks (the scratch buffer apart): what the
 * batch's storage holds, for tests of how it grows. */
size_t tm_arena_bytes(const tm_arena *a);
/* n bytes aligned for any type; never NULL for n == 0 (a zero-length key
 * still needs a non-NULL pointer). NULL on OOM. */
void *tm_arena_alloc(tm_arena *a, size_t n);
/* A buffer of n bytes for work done before the next call (a record's
 * working space, not part of the batch): the same buffer each time,
 * grown when n is larger than ever before and kept across resets, so a
 * need met once costs no more mallocs. NULL on OOM. */
void *tm_arena_scratch(tm_arena *a, size_t n);
/* A copy of n bytes (NULL on OOM). */
void *tm_arena_dup(tm_arena *a, const void *p, size_t n);
/* A NUL-terminated copy of n bytes (NULL on OOM). */
char *tm_arena_strndup(tm_arena *a, const char *s, size_t n);
char *tm_arena_strdup(tm_arena *a, const char *s);
/* printf into the arena (NULL on OOM). */
char *tm_arena_printf(tm_arena *a, const char *fmt, ...) TM_PRINTF(2, 3);

#endif
