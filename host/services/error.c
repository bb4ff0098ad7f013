#include "services/error.h"

#include <stdlib.h>
#include <string.h>

#include "services/redact.h"

tm_error tm_error_init(void) {
    tm_error e;
    memset(&e, 0, sizeof e);
    e.struct_size = (uint32_t)sizeof e;
    return e;
}

/* Stores TEXT (all of it, however long) in err->message: redacted of the
 * process's secrets first, then cut. A plugin's set_error and the host's
 * errors are filled here; cutting first would leave a secret's start, and
 * whoever appends to the message later ("...; retrying") would move it
 * away from the end where a cut is looked for. CUT: TEXT itself is known
 * to be cut already (memory ran out formatting it). */
static void store(tm_error *err, const char *text, int cut) {
    tm_redact(text, cut ? TM_REDACT_CUT : TM_REDACT_MAYBE_CUT, err->message,
              sizeof err->message);
}

/* vsnprintf into a heap string of the exact size; NULL on error or out of
 * memory (then *n < 0, or the length it would have had). */
static char *format_all(int *n, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    *n = vsnprintf(NULL, 0, fmt, ap);
    char *s = *n >= 0 ? malloc((size_t)*n + 1) : NULL;
    if (s && vsnprintf(s, (size_t)*n + 1, fmt, again) != *n) {
        free(s);
        s = NULL;
    }
    va_end(again);
    return s;
}

void tm_error_vset(tm_error *err, const char *fmt, va_list ap) {
    if (!err)
        return;
    va_list again;
    va_copy(again, ap);
    int n;
    char *full = format_all(&n, fmt, ap);
    if (full) {
        store(err, full, 0);
        free(full);
    } else if (n < 0 ||
               vsnprintf(err->message, sizeof err->message, fmt, again) < 0) {
        snprintf(err->message, sizeof err->message, "(unformattable error)");
    } else {
        /* Out of memory: the cut text, its end redacted as cut. */
        char cut[sizeof err->message];
        memcpy(cut, err->message, sizeof cut);
        store(err, cut, (size_t)n >= sizeof cut);
    }
    va_end(again);
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
    /* Context first, then as much of the old message (already redacted)
     * as fits: the context is what the reader needs to find the failing
     * piece. The context is redacted too. */
    size_t used = strlen(out);
    const char *sep = ": ";
    for (const char *p = sep; *p && used < sizeof out - 1; p++)
        out[used++] = *p;
    size_t old = strnlen(err->message, sizeof err->message);
    size_t room = sizeof out - 1 - used;
    size_t take = old < room ? old : room;
    memcpy(out + used, err->message, take);
    out[used + take] = '\0';
    store(err, out, (size_t)n >= sizeof out);
}
