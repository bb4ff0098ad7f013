/* Small helpers of the kit: verdicts and the seeded PRNG. */
#include <stdarg.h>
#include <stdio.h>

#include "kit.h"

static void set_reason(kit_result *res, kit_verdict v, const char *fmt,
                       va_list ap) {
    if (res->verdict == KIT_FAIL)
        return; /* the first failure is the cause; keep it */
    res->verdict = v;
    vsnprintf(res->reason, sizeof res->reason, fmt, ap);
}

void kit_fail(kit_result *res, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_reason(res, KIT_FAIL, fmt, ap);
    va_end(ap);
}

void kit_skip(kit_result *res, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_reason(res, KIT_SKIP, fmt, ap);
    va_end(ap);
}

/* splitmix64: tiny, seedable, good enough to spread kill moments. */
uint64_t kit_rand(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
