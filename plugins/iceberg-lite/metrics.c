/* Column metrics (see metrics.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "avro_writer.h"
#include "metrics.h"

typedef struct colstat {
    int64_t values, nulls;
    int has; /* bounds seen */
    int64_t lo_i, hi_i;
    double lo_f, hi_f;
    ib_buf lo_b, hi_b;
} colstat;

struct ice_metrics {
    const pq_column_def *cols;
    size_t ncols;
    colstat *st;
    int oom;
};

ice_metrics *ice_metrics_new(const pq_column_def *cols, size_t ncols) {
    ice_metrics *m = calloc(1, sizeof *m);
    if (m && !(m->st = calloc(ncols ? ncols : 1, sizeof *m->st))) {
        free(m);
        return NULL;
    }
    if (m) {
        m->cols = cols;
        m->ncols = ncols;
    }
    return m;
}

void ice_metrics_free(ice_metrics *m) {
    for (size_t i = 0; m && i < m->ncols; i++) {
        ib_buf_free(&m->st[i].lo_b);
        ib_buf_free(&m->st[i].hi_b);
    }
    if (m)
        free(m->st);
    free(m);
}

static int bytes_cmp(const uint8_t *a, size_t an, const ib_buf *b) {
    size_t n = an < b->len ? an : b->len;
    int c = n ? memcmp(a, b->p, n) : 0;
    return c ? c : (an > b->len) - (an < b->len);
}

static void set_bytes(ib_buf *b, const uint8_t *p, size_t n) {
    b->len = 0;
    ib_buf_add(b, p, n);
}

static void add(ice_metrics *m, size_t k, const pq_cell *c) {
    colstat *s = &m->st[k];
    s->values++;
    if (c->is_null) {
        s->nulls++;
        return;
    }
    switch (m->cols[k].kind) {
    case PQ_BOOLEAN:
    case PQ_INT64:
    case PQ_TIMESTAMP:
        if (!s->has || c->i < s->lo_i)
            s->lo_i = c->i;
        if (!s->has || c->i > s->hi_i)
            s->hi_i = c->i;
        break;
    case PQ_DOUBLE:
        if (isnan(c->f))
            return; /* not in the bounds (spec) */
        /* -0.0 below 0.0: the lower bound takes -0.0, the upper 0.0. */
        if (!s->has || c->f < s->lo_f || (c->f == s->lo_f && signbit(c->f)))
            s->lo_f = c->f;
        if (!s->has || c->f > s->hi_f || (c->f == s->hi_f && !signbit(c->f)))
            s->hi_f = c->f;
        break;
    case PQ_STRING:
    case PQ_BINARY:
        if (!s->has || bytes_cmp(c->p, c->n, &s->lo_b) < 0)
            set_bytes(&s->lo_b, c->p, c->n);
        if (!s->has || bytes_cmp(c->p, c->n, &s->hi_b) > 0)
            set_bytes(&s->hi_b, c->p, c->n);
        m->oom |= !ib_buf_ok(&s->lo_b) || !ib_buf_ok(&s->hi_b);
        break;
    }
    s->has = 1;
}

void ice_put_row(pq_writer *w, ice_metrics *m, const pq_cell *cells) {
    for (size_t k = 0; k < m->ncols; k++) {
        const pq_cell *c = &cells[k];
        add(m, k, c);
        if (c->is_null) {
            pq_put_null(w, k);
            continue;
        }
        switch (m->cols[k].kind) {
        case PQ_BOOLEAN:
        case PQ_INT64:
        case PQ_TIMESTAMP: pq_put_i64(w, k, c->i); break;
        case PQ_DOUBLE: pq_put_double(w, k, c->f); break;
        case PQ_STRING:
        case PQ_BINARY:
            pq_put_bytes(w, k, c->p ? c->p : (const uint8_t *)"", c->n);
            break;
        }
    }
    pq_end_row(w);
}

/* ---- bounds in single-value binary form ---- */

static void le64(ib_buf *b, uint64_t v) {
    uint8_t x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    av_put_bytes(b, x, sizeof x);
}

/* UTF-8 of code point cp into out (4 bytes): its length. */
static size_t utf8_put(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | cp >> 18);
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes up to max code points of UTF-8 (lenient: a stray byte counts as
 * itself). Returns how many; *used: bytes they take. */
static size_t utf8_decode(const uint8_t *p, size_t n, uint32_t *cps, size_t max,
                          size_t *used) {
    size_t i = 0, k = 0;
    while (i < n && k < max) {
        uint8_t c = p[i];
        size_t len = c < 0x80    ? 1
                     : c >= 0xF0 ? 4
                     : c >= 0xE0 ? 3
                     : c >= 0xC0 ? 2
                                 : 1;
        if (i + len > n)
            len = 1;
        uint32_t cp = len == 1 ? c : (uint32_t)(c & (0x3F >> (len - 1)));
        for (size_t j = 1; j < len; j++)
            cp = cp << 6 | (p[i + j] & 0x3F);
        cps[k++] = cp;
        i += len;
    }
    *used = i;
    return k;
}

/* The upper bound of bytes (or text) p[0..n), cut to ICE_BOUND_PREFIX
 * characters: as is when it fits; else the prefix with its last
 * character incremented. 0 written, 1 there is none. */
static int put_upper(ib_buf *b, const uint8_t *p, size_t n, int text) {
    if (!text) {
        if (n <= ICE_BOUND_PREFIX) {
            av_put_bytes(b, p, n);
            return 0;
        }
        uint8_t x[ICE_BOUND_PREFIX];
        memcpy(x, p, sizeof x);
        for (size_t i = ICE_BOUND_PREFIX; i-- > 0;)
            if (x[i] != 0xFF) {
                x[i]++;
                av_put_bytes(b, x, i + 1);
                return 0;
            }
        return 1;
    }
    uint32_t cps[ICE_BOUND_PREFIX + 1];
    size_t used, k = utf8_decode(p, n, cps, ICE_BOUND_PREFIX + 1, &used);
    if (k <= ICE_BOUND_PREFIX) {
        av_put_bytes(b, p, n);
        return 0;
    }
    for (size_t i = ICE_BOUND_PREFIX; i-- > 0;) {
        uint32_t cp = cps[i] + 1;
        if (cp >= 0xD800 && cp <= 0xDFFF)
            cp = 0xE000; /* not a scalar value: the next one */
        if (cp > 0x10FFFF)
            continue;
        uint8_t out[4 * ICE_BOUND_PREFIX];
        size_t len = 0;
        cps[i] = cp;
        for (size_t j = 0; j <= i; j++)
            len += utf8_put(cps[j], out + len);
        av_put_bytes(b, out, len);
        return 0;
    }
    return 1;
}

/* A lower bound (upper = 0) or upper bound of column k: 0 written, 1 none. */
static int put_bound(const ice_metrics *m, size_t k, int upper, ib_buf *b) {
    const colstat *s = &m->st[k];
    uint64_t bits;
    double f;
    switch (m->cols[k].kind) {
    case PQ_BOOLEAN: {
        uint8_t v = (uint8_t)((upper ? s->hi_i : s->lo_i) != 0);
        av_put_bytes(b, &v, 1);
        return 0;
    }
    case PQ_INT64:
    case PQ_TIMESTAMP: le64(b, (uint64_t)(upper ? s->hi_i : s->lo_i)); return 0;
    case PQ_DOUBLE:
        f = upper ? s->hi_f : s->lo_f;
        memcpy(&bits, &f, sizeof bits);
        le64(b, bits);
        return 0;
    case PQ_STRING:
    case PQ_BINARY: break;
    }
    int text = m->cols[k].kind == PQ_STRING;
    const ib_buf *v = upper ? &s->hi_b : &s->lo_b;
    if (upper)
        return put_upper(b, v->p, v->len, text);
    size_t n = v->len;
    if (text) {
        uint32_t cps[ICE_BOUND_PREFIX];
        utf8_decode(v->p, v->len, cps, ICE_BOUND_PREFIX, &n);
    } else if (n > ICE_BOUND_PREFIX) {
        n = ICE_BOUND_PREFIX;
    }
    av_put_bytes(b, v->p ? v->p : (const uint8_t *)"", n);
    return 0;
}

/* One map field (an Avro array of key/value records): counts (which 0
 * value counts, 1 null counts) or bounds (2 lower, 3 upper). */
static void put_map(const ice_metrics *m, int which, ib_buf *out) {
    ib_buf items = {0}, one = {0};
    int64_t n = 0;
    for (size_t k = 0; k < m->ncols; k++) {
        const colstat *s = &m->st[k];
        if (which >= 2 && !s->has)
            continue;
        one.len = 0;
        av_put_long(&one, m->cols[k].field_id);
        if (which == 0)
            av_put_long(&one, s->values);
        else if (which == 1)
            av_put_long(&one, s->nulls);
        else if (put_bound(m, k, which == 3, &one) != 0)
            continue;
        ib_buf_add(&items, one.p, one.len);
        n++;
    }
    av_put_branch(out, 1);
    if (n > 0) {
        av_put_long(out, n);
        ib_buf_add(out, items.p, items.len);
    }
    av_put_long(out, 0);
    if (!ib_buf_ok(&items) || !ib_buf_ok(&one))
        out->oom = 1;
    ib_buf_free(&items);
    ib_buf_free(&one);
}

int ice_metrics_encode(const ice_metrics *m, ib_buf *out) {
    for (int which = 0; which < 4; which++)
        put_map(m, which, out);
    return m->oom || !ib_buf_ok(out) ? -1 : 0;
}
