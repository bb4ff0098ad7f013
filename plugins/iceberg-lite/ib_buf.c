/* The encoders' growable byte buffer (see ib_buf.h for the oom rule). */
#include <stdlib.h>
#include <string.h>

#include "ib_buf.h"

int ib_buf_reserve(ib_buf *b, size_t n) {
    if (b->oom)
        return -1;
    if (n <= b->cap - b->len)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n) {
        if (cap > SIZE_MAX / 2) {
            b->oom = 1;
            return -1;
        }
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void ib_buf_add(ib_buf *b, const void *data, size_t n) {
    if (n == 0 || ib_buf_reserve(b, n) != 0)
        return;
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

void ib_buf_byte(ib_buf *b, uint8_t c) {
    ib_buf_add(b, &c, 1);
}

void ib_buf_str(ib_buf *b, const char *s) {
    ib_buf_add(b, s, strlen(s));
}

void ib_buf_u32le(ib_buf *b, uint32_t v) {
    uint8_t x[4];
    for (int i = 0; i < 4; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    ib_buf_add(b, x, 4);
}

void ib_buf_u64le(ib_buf *b, uint64_t v) {
    uint8_t x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    ib_buf_add(b, x, 8);
}

void ib_buf_uvarint(ib_buf *b, uint64_t v) {
    uint8_t x[10];
    size_t n = 0;
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        x[n++] = (uint8_t)(c | (v ? 0x80 : 0));
    } while (v);
    ib_buf_add(b, x, n);
}

void ib_buf_zigzag(ib_buf *b, int64_t v) {
    /* (v << 1) ^ (v >> 63), computed on unsigned to stay defined. */
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v < 0 ? -1 : 0);
    ib_buf_uvarint(b, u);
}

void ib_buf_reset(ib_buf *b) {
    b->len = 0;
}

void ib_buf_free(ib_buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}
