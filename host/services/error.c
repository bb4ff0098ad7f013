#include "services/error.h"

#include <string.h>

tm_error tm_error_init(void) {
    tm_error e;
    memset(&e, 0, sizeof e);
    e.struct_size = (uint32_t)sizeof e;
    return e;
}

void tm_error_vset(tm_error *err, const char *fmt, va_list ap) {
    if (!err)
        return;
    if (vsnprintf(err->message, sizeof err->message, fmt, ap) < 0)
        snprintf(err->message, sizeof err->message, "(unformattable error)");
}

void tm_error_set(tm_error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tm_error_vset(err, fmt, ap);
    va_end(ap);
}

void tm_error_prefix(tm_error *err, const char *fmt, ...) {
    if (!err)
        return;
    char prefix[TM_ERROR_MAX], old[TM_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    memcpy(old, err->message, sizeof old);
    old[sizeof old - 1] = '\0';
    if (snprintf(err->message, sizeof err->message, "%s: %s", prefix, old) >=
        (int)sizeof err->message) {
        /* truncated: the context comes first, so it survives */
    }
}
