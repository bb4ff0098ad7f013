/* Arrays are built by joining the values' texts with ',' inside '[' and
 * ']', which is exactly what a compact dump of the array would write, so
 * json column texts are reused instead of being parsed again. */
#include "convert/canonical.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/bytes_json.h"

char *tm_canonical_json(const json_t *v) {
    return json_dumps(v, TM_CANONICAL_FLAGS);
}

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static int put(buf *b, const char *s, size_t n) {
    if (b->cap - b->n <= n) {
        size_t cap = b->cap ? b->cap : 128;
        while (cap - b->n <= n) {
            if (cap > SIZE_MAX / 2)
                return -1;
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

/* Dumps a new reference (consumed) into b. */
static int put_json(buf *b, json_t *v) {
    if (!v)
        return -1;
    char *s = tm_canonical_json(v);
    json_decref(v);
    if (!s)
        return -1;
    int rc = put(b, s, strlen(s));
    free(s);
    return rc;
}

static int put_value(buf *b, tm_type type, const tm_value *v) {
    char num[32];
    if (v->is_null)
        return put(b, "null", 4);
    switch (type) {
    case TM_TYPE_TEXT: /* UTF-8 always, unless raw mode's topic is not */
    case TM_TYPE_BYTES:
        return put_json(b, tm_bytes_json(v->v.s.ptr, v->v.s.len));
    case TM_TYPE_INT:
    case TM_TYPE_TIMESTAMP:
        snprintf(num, sizeof num, "%" PRId64, v->v.i);
        return put(b, num, strlen(num));
    case TM_TYPE_BOOL: return v->v.i ? put(b, "true", 4) : put(b, "false", 5);
    case TM_TYPE_FLOAT: return put_json(b, json_real(v->v.f));
    case TM_TYPE_JSON: return put(b, v->v.s.ptr, v->v.s.len);
    }
    return -1;
}

char *tm_canonical_array(const tm_column *columns, const tm_value *values,
                         const size_t *idx, size_t n) {
    buf b = {0};
    int rc = put(&b, "[", 1);
    for (size_t k = 0; rc == 0 && k < n; k++) {
        size_t i = idx ? idx[k] : k;
        if (k)
            rc = put(&b, ",", 1);
        if (rc == 0)
            rc = put_value(&b, columns[i].type, &values[i]);
    }
    if (rc == 0)
        rc = put(&b, "]", 1);
    if (rc != 0) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
