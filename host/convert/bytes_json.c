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

size_t tm_utf8_char_len(const void *p, size_t n) {
    const unsigned char *s = p;
    if (n == 0)
        return 0;
    unsigned c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
        return 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0; /* a continuation byte, C0/C1 (overlong) or F5+ */
    }
    if (n < len)
        return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
        return 0; /* overlong, a surrogate, or past Unicode */
    return len;
}

int tm_utf8_valid(const void *p, size_t n) {
    const unsigned char *s = p;
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t len = tm_utf8_char_len(s + i, n - i);
        if (!len)
            return 0;
        i += len;
    }
    return 1;
}

json_t *tm_bytes_json(const void *p, size_t n) {
    /* Checked here rather than left to json_stringn, whose NULL would not
     * tell invalid UTF-8 from OOM. Its rules are the same (NUL bytes are
     * text, written as \u0000). */
    if (tm_utf8_valid(p, n))
        return json_stringn(n ? (const char *)p : "", n);
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
