#include "commit/backoff.h"

void tm_backoff_init(tm_backoff *b, int64_t base_ms, int64_t max_ms,
                     uint64_t seed) {
    b->base_ms = base_ms > 0 ? base_ms : 1;
    b->max_ms = max_ms > b->base_ms ? max_ms : b->base_ms;
    b->attempt = 0;
    b->rng = seed ? seed : 0x9E3779B97F4A7C15ull;
}

void tm_backoff_reset(tm_backoff *b) {
    b->attempt = 0;
}

static uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

int64_t tm_backoff_next(tm_backoff *b) {
    int64_t ceiling = b->base_ms;
    for (unsigned i = 0; i < b->attempt && ceiling < b->max_ms; i++)
        ceiling *= 2;
    if (ceiling > b->max_ms)
        ceiling = b->max_ms;
    if (b->attempt < 64)
        b->attempt++;
    int64_t half = ceiling / 2;
    return half + (int64_t)(xorshift(&b->rng) % (uint64_t)(ceiling - half + 1));
}
