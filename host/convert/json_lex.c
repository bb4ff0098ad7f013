/* Each rule here mirrors one of jansson 2.14's load.c, and is named after
 * what jansson refuses, so that a difference found by the differential
 * tests points at one line. */
#include "convert/json_lex.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "convert/bytes_json.h"

#define EXPONENT_CAP 1000000 /* past any double: saturate, never overflow */

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The code unit of the 4 hex digits at p, or -1. */
static long hex4(const char *p, const char *end) {
    if (end - p < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(p[i]);
        if (d < 0)
            return -1;
        v = v << 4 | d;
    }
    return v;
}

static int is_high_surrogate(long u) {
    return u >= 0xD800 && u <= 0xDBFF;
}

static int is_low_surrogate(long u) {
    return u >= 0xDC00 && u <= 0xDFFF;
}

/* The escape at p (a backslash): the byte after it, or NULL. jansson
 * refuses an unknown escape, a \u without 4 hex digits, a surrogate not in
 * a pair, and \u0000 (a NUL in a key or, without JSON_ALLOW_NUL, in a
 * value; a raw 0x00 byte is already a refused control character). */
static const char *scan_escape(const char *p, const char *end) {
    if (end - p < 2)
        return NULL;
    char e = p[1];
    if (e != 'u')
        return e && strchr("\"\\/bfnrt", e) ? p + 2 : NULL;
    long u = hex4(p + 2, end);
    p += 6;
    if (u <= 0 || is_low_surrogate(u))
        return NULL;
    if (!is_high_surrogate(u))
        return p;
    if (end - p < 2 || p[0] != '\\' || p[1] != 'u' ||
        !is_low_surrogate(hex4(p + 2, end)))
        return NULL;
    return p + 6;
}

/* How many of the 8 bytes at p come before the first one the byte loop
 * must look at (a quote, a backslash, a control character, a non-ASCII
 * byte): 8 when none is. The usual bit tricks: a byte below 0x20 borrows
 * through its high bit when 0x20 is taken from it, an equal byte turns to
 * zero. A borrow can flag a byte after a real hit, never one before, so
 * the lowest flag is exact. */
static unsigned plain_run(const char *p) {
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    uint64_t w;
    memcpy(&w, p, sizeof w);
    uint64_t quote = w ^ (ones * '"'), bslash = w ^ (ones * '\\');
    uint64_t below = (w - ones * 0x20) & ~w;
    uint64_t zero_q = (quote - ones) & ~quote;
    uint64_t zero_b = (bslash - ones) & ~bslash;
    uint64_t flags = (below | zero_q | zero_b | w) & highs;
    if (!flags)
        return 8;
#if defined(__GNUC__) && defined(__BYTE_ORDER__) &&                            \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return (unsigned)__builtin_ctzll(flags) / 8;
#else
    return 0; /* the byte loop finds it */
#endif
}

const char *tm_json_scan_string(const char *p, const char *end, int *escaped) {
    *escaped = 0;
    while (p < end) {
        /* Plain ASCII, most of most strings, 8 bytes at a time. */
        unsigned run = 8;
        while (end - p >= 8 && (run = plain_run(p)) == 8)
            p += 8;
        if (run < 8)
            p += run;
        if (p == end)
            break;
        unsigned char c = (unsigned char)*p;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            p++;
        } else if (c == '"') {
            return p + 1;
        } else if (c == '\\') {
            *escaped = 1;
            if (!(p = scan_escape(p, end)))
                return NULL;
        } else if (c < 0x20) {
            return NULL; /* control characters must be escaped */
        } else {
            size_t len = tm_utf8_char_len(p, (size_t)(end - p));
            if (!len)
                return NULL;
            p += len;
        }
    }
    return NULL; /* no closing quote */
}

/* Code point cp as UTF-8 into out; its length. */
static size_t utf8_encode(unsigned long cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* One accepted escape at p into out (up to 4 bytes): how many bytes of
 * text it took; *len the bytes written. */
static size_t decode_escape(const char *p, char out[4], size_t *len) {
    static const char FROM[] = "\"\\/bfnrt", TO[] = "\"\\/\b\f\n\r\t";
    if (p[1] != 'u') {
        out[0] = TO[strchr(FROM, p[1]) - FROM];
        *len = 1;
        return 2;
    }
    unsigned long u = (unsigned long)hex4(p + 2, p + 6);
    if (!is_high_surrogate((long)u)) {
        *len = utf8_encode(u, out);
        return 6;
    }
    unsigned long lo = (unsigned long)hex4(p + 8, p + 12);
    *len = utf8_encode(0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00), out);
    return 12;
}

size_t tm_json_decode_string(const char *raw, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        const char *bs = memchr(raw + i, '\\', n - i);
        size_t plain = bs ? (size_t)(bs - (raw + i)) : n - i;
        memcpy(out + o, raw + i, plain);
        o += plain;
        i += plain;
        if (i < n) {
            size_t len;
            i += decode_escape(raw + i, out + o, &len);
            o += len;
        }
    }
    return o;
}

int tm_json_string_equals(const char *raw, size_t n, int escaped, const char *s,
                          size_t sn) {
    if (!escaped)
        return n == sn && memcmp(raw, s, n) == 0;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        char one[4];
        const char *piece = raw + i;
        size_t len = 1;
        if (raw[i] == '\\') {
            i += decode_escape(raw + i, one, &len);
            piece = one;
        } else {
            i++;
        }
        if (sn - k < len || memcmp(s + k, piece, len) != 0)
            return 0;
        k += len;
    }
    return k == sn;
}

/* Digits at p as a decimal number, saturating at EXPONENT_CAP. */
static long digits_value(const char *p, const char *q) {
    long v = 0;
    for (; p < q; p++)
        if ((v = v * 10 + (*p - '0')) > EXPONENT_CAP)
            return EXPONENT_CAP;
    return v;
}

/* The integer of the digits [p, q) (no leading zero), negated when neg;
 * -1 when it is outside 64 bits, as strtoll's ERANGE is for jansson. */
static int integer_value(const char *p, const char *q, int neg, int64_t *out) {
    if (q - p > 19)
        return -1;
    uint64_t v = 0;
    for (; p < q; p++)
        v = v * 10 + (uint64_t)(*p - '0');
    uint64_t limit = (uint64_t)INT64_MAX + (neg ? 1 : 0);
    if (v > limit)
        return -1;
    if (!neg)
        *out = (int64_t)v;
    else
        *out = v == limit ? INT64_MIN : -(int64_t)v;
    return 0;
}

const char *tm_json_scan_number(const char *p, const char *end,
                                tm_json_number *num) {
    num->is_real = 0;
    num->may_overflow = 0;
    num->integer = 0;
    int neg = p < end && *p == '-';
    p += neg;
    const char *int_start = p;
    if (p < end && *p == '0') {
        if (++p < end && is_digit(*p))
            return NULL; /* a leading zero */
    } else if (p < end && is_digit(*p)) {
        while (p < end && is_digit(*p))
            p++;
    } else {
        return NULL;
    }
    const char *int_end = p;
    if (p == end || (*p != '.' && *p != 'e' && *p != 'E'))
        return integer_value(int_start, int_end, neg, &num->integer) == 0
                   ? p
                   : NULL;
    num->is_real = 1;
    const char *frac_start = p, *frac_end = p;
    if (*p == '.') {
        frac_start = ++p;
        if (p == end || !is_digit(*p))
            return NULL;
        while (p < end && is_digit(*p))
            p++;
        frac_end = p;
    }
    long exp = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int exp_neg = p < end && *p == '-';
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        const char *exp_start = p;
        while (p < end && is_digit(*p))
            p++;
        if (p == exp_start)
            return NULL;
        exp = digits_value(exp_start, p);
        exp = exp_neg ? -exp : exp;
    }
    /* The decimal exponent of the first significant digit: below 300 the
     * value is under 1e300 and cannot overflow, so strtod is not needed
     * to validate it. A zero mantissa never overflows. */
    long lead;
    if (*int_start != '0') {
        lead = int_end - int_start - 1;
        if (lead > EXPONENT_CAP)
            lead = EXPONENT_CAP;
    } else {
        const char *d = frac_start;
        while (d < frac_end && *d == '0')
            d++;
        if (d == frac_end)
            return p; /* zero */
        lead = -(long)(d - frac_start) - 1;
        if (lead < -EXPONENT_CAP)
            lead = -EXPONENT_CAP;
    }
    num->may_overflow = lead + exp >= 300;
    return p;
}

/* The double of the real s[0..n) (a number tm_json_scan_number took)
 * when plain arithmetic gives it exactly as strtod would: a mantissa of
 * at most 2^53 (exact as a double) times or divided by a power of ten of
 * at most 10^22 (exact too) is one correctly rounded operation, the very
 * result strtod must give (Clinger's fast path). That needs doubles
 * evaluated as doubles (FLT_EVAL_METHOD 0, as on x86-64 and arm64) and
 * round-to-nearest, the default the host never changes. 1 done, 0 left
 * to strtod. */
static int real_fast(const char *s, size_t n, double *out) {
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    static const double POW10[] = {
        1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const char *p = s, *end = s + n;
    int neg = *p == '-';
    p += neg;
    uint64_t m = 0;
    int digits = 0; /* significant digits in m (leading zeros are not) */
    long scale = 0; /* the power of ten m is to be multiplied by */
    int frac = 0;
    for (; p < end && (is_digit(*p) || *p == '.'); p++) {
        if (*p == '.') {
            frac = 1;
            continue;
        }
        if (m == 0 && *p == '0') {
            scale -= frac;
            continue;
        }
        if (++digits > 19)
            return 0;
        m = m * 10 + (uint64_t)(*p - '0');
        scale -= frac;
    }
    if (p < end) { /* 'e' or 'E' */
        p++;
        int exp_neg = *p == '-';
        if (*p == '+' || *p == '-')
            p++;
        long e = digits_value(p, end);
        scale += exp_neg ? -e : e;
    }
    double v;
    if (m == 0)
        v = 0.0;
    else if (m > (uint64_t)1 << 53 || scale < -22 || scale > 22)
        return 0;
    else
        v = scale < 0 ? (double)m / POW10[-scale] : (double)m * POW10[scale];
    *out = neg ? -v : v;
    return 1;
#else
    (void)s;
    (void)n;
    (void)out;
    return 0;
#endif
}

int tm_json_real_value(const char *s, size_t n, double *out) {
    if (real_fast(s, n, out))
        return 0;
    char small[64];
    char *text = n < sizeof small ? small : malloc(n + 1);
    if (!text)
        return -1;
    memcpy(text, s, n);
    text[n] = '\0';
    /* jansson swaps '.' for the locale's decimal point first; the host
     * never calls setlocale, so LC_NUMERIC is "C" and strtod reads '.'. */
    errno = 0;
    double v = strtod(text, NULL);
    int overflow = (v == HUGE_VAL || v == -HUGE_VAL) && errno == ERANGE;
    if (text != small)
        free(text);
    if (overflow)
        return 1;
    *out = v;
    return 0;
}
