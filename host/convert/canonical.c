/* Arrays are built by joining the values' texts with ',' inside '[' and
 * ']', which is exactly what a compact dump of the array would write, so
 * json column texts are reused instead of being parsed again. */
#include "convert/canonical.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/bytes_json.h"
#include "services/buf.h"

size_t tm_canonical_integer(int64_t i, char out[TM_CANONICAL_NUMBER_MAX]) {
    char digits[TM_CANONICAL_NUMBER_MAX];
    size_t k = 0, n = 0;
    /* The magnitude as unsigned, which INT64_MIN's has room in. */
    uint64_t u = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
    do {
        digits[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (i < 0)
        out[n++] = '-';
    while (k)
        out[n++] = digits[--k];
    out[n] = '\0';
    return n;
}

/* jansson's jsonp_dtostr with precision 17, step by step. */
size_t tm_canonical_real(double d, char out[TM_CANONICAL_NUMBER_MAX]) {
    if (!isfinite(d))
        return 0;
    int k = snprintf(out, TM_CANONICAL_NUMBER_MAX, "%.17g", d);
    if (k <= 0 || k >= TM_CANONICAL_NUMBER_MAX - 2)
        return 0;
    size_t n = (size_t)k;
    /* A dot or an exponent, or a reader would take it for an integer. */
    if (!memchr(out, '.', n) && !memchr(out, 'e', n)) {
        memcpy(out + n, ".0", 3);
        n += 2;
    }
    /* No '+' and no leading zeros in the exponent. */
    char *e = memchr(out, 'e', n);
    if (e) {
        char *start = e + 1, *digit = e + 2;
        if (*start == '-')
            start++;
        while (*digit == '0')
            digit++;
        memmove(start, digit, (size_t)(out + n - digit) + 1);
        n -= (size_t)(digit - start);
    }
    return n;
}

char *tm_canonical_json(const json_t *v) {
    return json_dumps(v, TM_CANONICAL_FLAGS);
}

/* Dumps a new reference (consumed) into b. */
static int put_json(tm_buf *b, json_t *v) {
    if (!v)
        return -1;
    char *s = tm_canonical_json(v);
    json_decref(v);
    if (!s)
        return -1;
    int rc = tm_buf_add(b, s, strlen(s));
    free(s);
    return rc;
}

static int put_value(tm_buf *b, tm_type type, const tm_value *v) {
    char num[TM_CANONICAL_NUMBER_MAX];
    if (v->is_null)
        return tm_buf_add(b, "null", 4);
    switch (type) {
    case TM_TYPE_TEXT: /* UTF-8 always, unless raw mode's topic is not */
    case TM_TYPE_BYTES:
        return put_json(b, tm_bytes_json(v->v.s.ptr, v->v.s.len));
    case TM_TYPE_INT:
    case TM_TYPE_TIMESTAMP:
        return tm_buf_add(b, num, tm_canonical_integer(v->v.i, num));
    case TM_TYPE_BOOL:
        return v->v.i ? tm_buf_add(b, "true", 4) : tm_buf_add(b, "false", 5);
    case TM_TYPE_FLOAT: {
        size_t n = tm_canonical_real(v->v.f, num);
        return n ? tm_buf_add(b, num, n) : -1; /* jansson has no NaN either */
    }
    case TM_TYPE_JSON: return tm_buf_add(b, v->v.s.ptr, v->v.s.len);
    }
    return -1;
}

char *tm_canonical_array(const tm_column *columns, const tm_value *values,
                         const size_t *idx, size_t n) {
    tm_buf b = {0};
    int rc = tm_buf_add(&b, "[", 1);
    for (size_t k = 0; rc == 0 && k < n; k++) {
        size_t i = idx ? idx[k] : k;
        if (k)
            rc = tm_buf_add(&b, ",", 1);
        if (rc == 0)
            rc = put_value(&b, columns[i].type, &values[i]);
    }
    if (rc == 0)
        rc = tm_buf_add(&b, "]", 1);
    if (rc != 0) {
        tm_buf_free(&b);
        return NULL;
    }
    return b.p;
}
