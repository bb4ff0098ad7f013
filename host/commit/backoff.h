/* Capped exponential backoff with full jitter, for RETRY. Pure. */
#ifndef TM_BACKOFF_H
#define TM_BACKOFF_H

#include <stdint.h>

typedef struct tm_backoff {
    int64_t base_ms; /* first ceiling */
    int64_t max_ms;  /* the cap of the ceiling */
    unsigned attempt;
    uint64_t rng; /* xorshift state, never 0 */
} tm_backoff;

void tm_backoff_init(tm_backoff *b, int64_t base_ms, int64_t max_ms,
                     uint64_t seed);
/* The wait before the next attempt: uniform in [ceiling/2, ceiling], the
 * ceiling doubling from base_ms up to max_ms. Half jitter rather than full:
 * never zero, so a tight failure loop is impossible, yet hosts retrying
 * the same store still spread out. */
int64_t tm_backoff_next(tm_backoff *b);
void tm_backoff_reset(tm_backoff *b);

#endif
