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
    char out[TM_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, sizeof out, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    /* Context first, then as much of the old message as fits: the context
     * is what the reader needs to find the failing piece. */
    size_t used = strlen(out);
    const char *sep = ": ";
    for (const char *p = sep; *p && used < sizeof out - 1; p++)
        out[used++] = *p;
    size_t old = strnlen(err->message, sizeof err->message);
    size_t room = sizeof out - 1 - used;
    size_t take = old < room ? old : room;
    memcpy(out + used, err->message, take);
    out[used + take] = '\0';
    memcpy(err->message, out, used + take + 1);
}
