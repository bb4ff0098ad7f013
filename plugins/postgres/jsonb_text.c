/* JSON text that jsonb can hold. jsonb refuses the escape \u0000 in a
 * string (SQLSTATE 22P05), yet a NUL byte is valid UTF-8, so the host
 * writes a Kafka header holding one as "...\u0000..." (raw mode's headers
 * column). Such a string is stored as {"base64": "..."} of its bytes: the
 * form the host already gives a header that is not UTF-8
 * (docs/configuration.md, Headers), so nothing is lost and a reader needs
 * one rule. An object key holding \u0000 cannot become an object: it is
 * left as it is (the row is then refused, a dead letter). The base64 is
 * the plugin's own: it links only libpq and the SDK header. */
#include <string.h>

#include "pg_sink.h"

static void add_base64(pg_buf *b, const unsigned char *p, size_t n) {
    static const char B64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        char q[4] = {B64[v >> 18], B64[(v >> 12) & 63],
                     i + 1 < n ? B64[(v >> 6) & 63] : '=',
                     i + 2 < n ? B64[v & 63] : '='};
        pg_buf_addn(b, q, 4);
    }
}

static int hex4(const char *p, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return 0;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return 1;
}

static void add_utf8(pg_buf *b, uint32_t cp) {
    unsigned char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (unsigned char)(0xC0 | cp >> 6);
        u[1] = (unsigned char)(0x80 | (cp & 63));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | cp >> 12);
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 63));
        u[2] = (unsigned char)(0x80 | (cp & 63));
        n = 3;
    } else {
        u[0] = (unsigned char)(0xF0 | cp >> 18);
        u[1] = (unsigned char)(0x80 | ((cp >> 12) & 63));
        u[2] = (unsigned char)(0x80 | ((cp >> 6) & 63));
        u[3] = (unsigned char)(0x80 | (cp & 63));
        n = 4;
    }
    pg_buf_addn(b, (const char *)u, n);
}

/* The bytes of the JSON string body p[0..n) (between the quotes) into
 * out; 0 when it is not well formed (then left to the server). */
static int decode_string(const char *p, size_t n, pg_buf *out) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '\\') {
            pg_buf_addn(out, p + i, 1);
            continue;
        }
        if (++i >= n)
            return 0;
        const char *simple = strchr("\"\\/bfnrt", p[i]);
        if (simple && p[i]) {
            static const char TO[] = "\"\\/\b\f\n\r\t";
            pg_buf_addn(out, &TO[simple - "\"\\/bfnrt"], 1);
            continue;
        }
        uint32_t cp, lo;
        if (p[i] != 'u' || i + 4 >= n || !hex4(p + i + 1, &cp))
            return 0;
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < n && p[i + 1] == '\\' &&
            p[i + 2] == 'u' && hex4(p + i + 3, &lo) && lo >= 0xDC00 &&
            lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
        } else if (cp >= 0xD800 && cp < 0xE000) {
            return 0;
        }
        add_utf8(out, cp);
    }
    return 1;
}

/* Whether the string body p[0..n) has the escape \u0000. */
static int has_nul_escape(const char *p, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) {
        if (p[i] != '\\')
            continue;
        if (p[i + 1] == 'u' && i + 5 < n && memcmp(p + i + 2, "0000", 4) == 0)
            return 1;
        i++; /* the escaped character: "\\\\u0000" is no NUL */
    }
    return 0;
}

int pg_jsonb_text(const char *p, size_t n, pg_buf *out) {
    /* Outside strings valid JSON has no backslash: one pass tells. */
    if (!has_nul_escape(p, n))
        return 0;
    size_t from = 0, changed = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '"')
            continue;
        size_t start = i + 1, end = start;
        while (end < n && p[end] != '"')
            end += p[end] == '\\' ? 2 : 1;
        if (end >= n)
            break; /* not well formed: the server says so */
        size_t next = end + 1;
        while (next < n && strchr(" \t\r\n", p[next]))
            next++;
        int key = next < n && p[next] == ':';
        if (!key && has_nul_escape(p + start, end - start)) {
            pg_buf bytes = {0};
            if (decode_string(p + start, end - start, &bytes) && !bytes.oom) {
                pg_buf_addn(out, p + from, i - from);
                pg_buf_add(out, "{\"base64\":\"");
                add_base64(out, (const unsigned char *)bytes.p, bytes.len);
                pg_buf_add(out, "\"}");
                from = end + 1;
                changed++;
            } else if (bytes.oom) {
                out->oom = 1;
            }
            pg_buf_free(&bytes);
        }
        i = end;
    }
    if (!changed)
        return 0;
    pg_buf_addn(out, p + from, n - from);
    return 1;
}
