/* Thrift compact protocol reader (see thrift_reader.h). */
#include <string.h>

#include "thrift_reader.h"

void tr_init(tr_reader *r, const uint8_t *p, size_t n) {
    memset(r, 0, sizeof *r);
    r->p = p;
    r->end = p + n;
}

uint64_t tr_uvarint(tr_reader *r) {
    uint64_t u = 0;
    for (int shift = 0; !r->err; shift += 7) {
        if (r->p >= r->end || shift > 63) {
            r->err = 1;
            break;
        }
        uint8_t c = *r->p++;
        u |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return u;
    }
    return 0;
}

int64_t tr_int(tr_reader *r) {
    uint64_t u = tr_uvarint(r);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static uint8_t byte(tr_reader *r) {
    if (r->err || r->p >= r->end) {
        r->err = 1;
        return 0;
    }
    return *r->p++;
}

void tr_struct_begin(tr_reader *r) {
    if (r->depth >= TC_MAX_DEPTH) {
        r->err = 1;
        return;
    }
    r->last[r->depth++] = 0;
}

int tr_field(tr_reader *r, int16_t *id, int *type) {
    if (r->err || r->depth <= 0) {
        r->err = 1;
        return -1;
    }
    uint8_t h = byte(r);
    if (r->err)
        return -1;
    if (h == TC_STOP) {
        r->depth--;
        return 0;
    }
    *type = h & 0x0f;
    int16_t *last = &r->last[r->depth - 1];
    if (h >> 4)
        *id = (int16_t)(*last + (h >> 4));
    else
        *id = (int16_t)tr_int(r);
    *last = *id;
    if (*type == TC_TRUE || *type == TC_FALSE)
        r->bool_value = *type == TC_TRUE;
    return r->err ? -1 : 1;
}

int tr_bool(tr_reader *r) {
    return r->bool_value;
}

void tr_binary(tr_reader *r, const uint8_t **p, size_t *n) {
    uint64_t len = tr_uvarint(r);
    *p = r->p;
    *n = 0;
    if (r->err || len > (uint64_t)(r->end - r->p)) {
        r->err = 1;
        return;
    }
    *n = (size_t)len;
    r->p += len;
}

void tr_list(tr_reader *r, int *elem, size_t *n) {
    uint8_t h = byte(r);
    *elem = h & 0x0f;
    *n = h >> 4;
    if (*n == 15)
        *n = (size_t)tr_uvarint(r);
    if ((size_t)(r->end - r->p) < *n) /* every element takes a byte */
        r->err = 1;
}

/* Lists nest without tr_struct_begin's depth count, so skipping counts
 * every level itself: a crafted footer of nested lists must end in an
 * error, not in a stack overflow. */
#define TR_MAX_NEST 64

static void skip(tr_reader *r, int type, int nest) {
    const uint8_t *p;
    size_t n;
    int16_t id;
    int t, elem;
    if (nest >= TR_MAX_NEST) {
        r->err = 1;
        return;
    }
    switch (type) {
    case TC_TRUE:
    case TC_FALSE: break; /* in a field header: no payload */
    case TC_BYTE: (void)byte(r); break;
    case TC_I16:
    case TC_I32:
    case TC_I64: (void)tr_int(r); break;
    case TC_DOUBLE:
        if (r->end - r->p < 8)
            r->err = 1;
        else
            r->p += 8;
        break;
    case TC_BINARY: tr_binary(r, &p, &n); break;
    case TC_LIST:
    case TC_SET:
        tr_list(r, &elem, &n);
        for (size_t i = 0; i < n && !r->err; i++) {
            if (elem == TC_TRUE || elem == TC_FALSE)
                (void)byte(r); /* a bool element is one byte */
            else
                skip(r, elem, nest + 1);
        }
        break;
    case TC_STRUCT:
        tr_struct_begin(r);
        while (!r->err && tr_field(r, &id, &t) == 1)
            skip(r, t, nest + 1);
        break;
    default: r->err = 1; /* maps are not in what we read */
    }
}

void tr_skip(tr_reader *r, int type) {
    skip(r, type, 0);
}
