#include "convert/bytes_json.h"

#include <stdint.h>
#include <stdlib.h>

char *tm_base64(const void *p, size_t n) {
    static const char B64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = p;
    if (n > (SIZE_MAX - 1) / 4 * 3 - 2)
        return NULL;
    char *out = malloc((n + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    char *o = out;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = B64[(v >> 6) & 63];
        *o++ = B64[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = '=';
        *o++ = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        *o++ = B64[v >> 18];
        *o++ = B64[(v >> 12) & 63];
        *o++ = B64[(v >> 6) & 63];
        *o++ = '=';
    }
    *o = '\0';
    return out;
}

json_t *tm_bytes_json(const void *p, size_t n) {
    /* jansson refuses invalid UTF-8 (overlong forms and surrogates
     * included) and accepts NUL bytes, which it writes as \u0000: its
     * check is the definition of "text" here. A NULL from it is either
     * invalid UTF-8 or OOM; the base64 path settles which. */
    json_t *s = json_stringn(p ? (const char *)p : "", n);
    if (s)
        return s;
    char *b = tm_base64(p, n);
    if (!b)
        return NULL;
    json_t *obj = json_object();
    json_t *v = json_string(b);
    free(b);
    if (!obj || !v || json_object_set_new(obj, "base64", v) != 0) {
        if (!obj)
            json_decref(v);
        json_decref(obj);
        return NULL;
    }
    return obj;
}
