/* jsonb's text back to the host's canonical JSON (docs/configuration.md,
 * Canonical form): jsonb keeps the value, not the text, and writes it its
 * own way (a space after ':' and ',', object keys by length then bytes,
 * \u escapes in lowercase, numbers as numeric writes them), so scan
 * rewrites it the way the host wrote it: compact, keys sorted by bytes,
 * jansson's escapes, integers as integers and reals with 17 significant
 * digits. The plugin links no jansson (only libpq and the SDK header):
 * this is a small parser of its own, for the well-formed text the server
 * gives. What jsonb cannot give back is said in docs/sinks/postgres.md. */
#include "json_canon.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Nesting bound: the host refuses values deeper than 2048. */
#define JC_DEPTH_MAX 4096

typedef struct jc {
    const char *p, *end;
    int depth;
} jc;

static void ws(jc *j) {
    while (j->p < j->end &&
           (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int hexval(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

static int hex4(jc *j, uint32_t *out) {
    uint32_t v = 0;
    if (j->end - j->p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        int d = hexval(j->p[i]);
        if (d < 0)
            return -1;
        v = v << 4 | (uint32_t)d;
    }
    j->p += 4;
    *out = v;
    return 0;
}

static void put_utf8(pg_buf *b, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | cp >> 12);
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | cp >> 18);
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    pg_buf_addn(b, u, n);
}

/* A string token's content, unescaped, into raw (no NUL: jsonb has none). */
static int string_raw(jc *j, pg_buf *raw) {
    if (j->p >= j->end || *j->p != '"')
        return -1;
    j->p++;
    while (j->p < j->end && *j->p != '"') {
        const char *from = j->p;
        while (j->p < j->end && *j->p != '"' && *j->p != '\\')
            j->p++;
        pg_buf_addn(raw, from, (size_t)(j->p - from));
        if (j->p >= j->end || *j->p == '"')
            break;
        if (++j->p >= j->end)
            return -1;
        char c = *j->p++, byte;
        uint32_t cp, lo;
        switch (c) {
        case '"':
        case '\\':
        case '/': byte = c; break;
        case 'b': byte = '\b'; break;
        case 'f': byte = '\f'; break;
        case 'n': byte = '\n'; break;
        case 'r': byte = '\r'; break;
        case 't': byte = '\t'; break;
        case 'u':
            if (hex4(j, &cp) != 0)
                return -1;
            if (cp >= 0xd800 && cp < 0xdc00) { /* a surrogate pair */
                if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u')
                    return -1;
                j->p += 2;
                if (hex4(j, &lo) != 0 || lo < 0xdc00 || lo > 0xdfff)
                    return -1;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if ((cp >= 0xdc00 && cp < 0xe000) || cp == 0) {
                return -1; /* a lone surrogate; \u0000, which jsonb refuses */
            }
            put_utf8(raw, cp);
            continue;
        default: return -1;
        }
        pg_buf_addn(raw, &byte, 1);
    }
    if (j->p >= j->end)
        return -1;
    j->p++;
    return 0;
}

/* Content as a JSON string the way jansson writes it (JSON_COMPACT, no
 * JSON_ENSURE_ASCII): '"' and '\\' and control characters escaped, the
 * usual five by letter, the rest as \u with capital hex. */
static void put_string(pg_buf *b, const char *s, size_t n) {
    pg_buf_add(b, "\"");
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        pg_buf_addn(b, s + from, i - from);
        from = i + 1;
        char esc[8];
        switch (c) {
        case '"': pg_buf_add(b, "\\\""); break;
        case '\\': pg_buf_add(b, "\\\\"); break;
        case '\b': pg_buf_add(b, "\\b"); break;
        case '\f': pg_buf_add(b, "\\f"); break;
        case '\n': pg_buf_add(b, "\\n"); break;
        case '\r': pg_buf_add(b, "\\r"); break;
        case '\t': pg_buf_add(b, "\\t"); break;
        default:
            snprintf(esc, sizeof esc, "\\u%04X", (unsigned)c);
            pg_buf_add(b, esc);
        }
    }
    pg_buf_addn(b, s + from, n - from);
    pg_buf_add(b, "\"");
}

/* A real as jansson writes it with JSON_REAL_PRECISION(17): %.17g, ".0"
 * when that reads as an integer, the exponent without '+' or leading
 * zeros. */
static void put_real(pg_buf *b, double d) {
    char t[40], out[40];
    snprintf(t, sizeof t, "%.17g", d);
    if (!strchr(t, '.') && !strchr(t, 'e'))
        strcat(t, ".0");
    size_t o = 0;
    for (const char *q = t; *q; q++) {
        out[o++] = *q;
        if (*q != 'e')
            continue;
        if (q[1] == '-')
            out[o++] = *++q;
        else if (q[1] == '+')
            q++;
        while (q[1] == '0' && q[2])
            q++;
    }
    out[o] = '\0';
    pg_buf_add(b, out);
}

/* A number token: an integer as an integer when it fits 64 bits (as the
 * host's parser reads it), anything else (a fraction, an exponent, or the
 * digits numeric writes for a large real) as a real. */
static int number(jc *j, pg_buf *b) {
    const char *from = j->p;
    int real = 0;
    while (j->p < j->end && *j->p && strchr("+-0123456789.eE", *j->p)) {
        if (*j->p == '.' || *j->p == 'e' || *j->p == 'E')
            real = 1;
        j->p++;
    }
    size_t n = (size_t)(j->p - from);
    char t[512];
    if (n == 0 || n >= sizeof t)
        return -1; /* numeric writes a real up to 1e308 in 309 digits */
    memcpy(t, from, n);
    t[n] = '\0';
    char *end;
    errno = 0;
    if (!real) {
        long long v = strtoll(t, &end, 10);
        if (*end == '\0' && errno == 0) {
            char num[32];
            snprintf(num, sizeof num, "%lld", v);
            pg_buf_add(b, num);
            return 0;
        }
        errno = 0;
    }
    /* ERANGE also flags a subnormal result, which the host writes too
     * (5e-324); only an overflow is not a double. */
    double d = strtod(t, &end);
    if (*end != '\0' || (errno == ERANGE && isinf(d)))
        return -1;
    put_real(b, d);
    return 0;
}

static int value(jc *j, pg_buf *b);

typedef struct jc_member {
    pg_buf key;   /* raw content */
    pg_buf value; /* canonical text */
} jc_member;

static int by_key(const void *x, const void *y) {
    const pg_buf *a = &((const jc_member *)x)->key;
    const pg_buf *c = &((const jc_member *)y)->key;
    size_t n = a->len < c->len ? a->len : c->len;
    int r = n ? memcmp(a->p, c->p, n) : 0;
    return r ? r : (a->len > c->len) - (a->len < c->len);
}

static int object(jc *j, pg_buf *b) {
    jc_member *m = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    j->p++; /* '{' */
    ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        pg_buf_add(b, "{}");
        return 0;
    }
    while (rc == 0) {
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            jc_member *g = realloc(m, cap * sizeof *g);
            if (!g) {
                b->oom = 1;
                rc = -1;
                break;
            }
            m = g;
        }
        memset(&m[n], 0, sizeof m[n]);
        n++;
        ws(j);
        rc = string_raw(j, &m[n - 1].key);
        ws(j);
        if (rc == 0 && (j->p >= j->end || *j->p++ != ':'))
            rc = -1;
        if (rc == 0)
            rc = value(j, &m[n - 1].value);
        ws(j);
        if (rc == 0 && j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (rc == 0 && (j->p >= j->end || *j->p++ != '}'))
            rc = -1;
        break;
    }
    /* Whether or not parsing went on: a member that ran out of memory
     * failed for that reason, not for bad JSON (scan then reports out of
     * memory instead of giving the row without values). */
    for (size_t i = 0; i < n; i++)
        if (m[i].key.oom || m[i].value.oom)
            b->oom = 1, rc = -1;
    if (rc == 0) {
        /* jsonb keeps one member per key: no two compare equal */
        qsort(m, n, sizeof *m, by_key);
        pg_buf_add(b, "{");
        for (size_t i = 0; i < n; i++) {
            pg_buf_add(b, i ? "," : "");
            put_string(b, m[i].key.p ? m[i].key.p : "", m[i].key.len);
            pg_buf_add(b, ":");
            pg_buf_addn(b, m[i].value.p ? m[i].value.p : "", m[i].value.len);
        }
        pg_buf_add(b, "}");
    }
    for (size_t i = 0; i < n; i++) {
        pg_buf_free(&m[i].key);
        pg_buf_free(&m[i].value);
    }
    free(m);
    return rc;
}

static int array(jc *j, pg_buf *b) {
    j->p++; /* '[' */
    ws(j);
    pg_buf_add(b, "[");
    if (j->p < j->end && *j->p == ']') {
        j->p++;
        pg_buf_add(b, "]");
        return 0;
    }
    for (int first = 1;; first = 0) {
        pg_buf_add(b, first ? "" : ",");
        if (value(j, b) != 0)
            return -1;
        ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p >= j->end || *j->p++ != ']')
            return -1;
        pg_buf_add(b, "]");
        return 0;
    }
}

static int literal(jc *j, pg_buf *b, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
        return -1;
    j->p += n;
    pg_buf_add(b, word);
    return 0;
}

static int value(jc *j, pg_buf *b) {
    ws(j);
    if (j->p >= j->end || ++j->depth > JC_DEPTH_MAX)
        return -1;
    int rc;
    switch (*j->p) {
    case '{': rc = object(j, b); break;
    case '[': rc = array(j, b); break;
    case 't': rc = literal(j, b, "true"); break;
    case 'f': rc = literal(j, b, "false"); break;
    case 'n': rc = literal(j, b, "null"); break;
    case '"': {
        pg_buf raw = {0};
        rc = string_raw(j, &raw);
        if (rc == 0 && raw.oom)
            b->oom = 1, rc = -1;
        if (rc == 0)
            put_string(b, raw.p ? raw.p : "", raw.len);
        pg_buf_free(&raw);
        break;
    }
    default: rc = number(j, b); break;
    }
    j->depth--;
    return rc;
}

int pg_json_canonical(const char *p, size_t n, pg_buf *out) {
    jc j = {p, p + n, 0};
    if (value(&j, out) != 0)
        return -1;
    ws(&j);
    return j.p == j.end && !out->oom ? 0 : -1;
}
