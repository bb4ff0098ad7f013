/* PostgreSQL's binary formats (binarray.h). Every integer big-endian.
 * A value: int32 length in bytes (-1: NULL), then the bytes of its type's
 * binary format (text: the characters; int4, int8: the integer).
 * An array: int32 dimensions (1), int32 flags (1 if any element is NULL),
 * the element type's OID, then per dimension its length and lower bound
 * (1); then its elements as values. The element count is known only at
 * the end: the header is patched then.
 * COPY binary: the signature "PGCOPY\n\377\r\n\0", int32 flags (0) and
 * int32 header extension length (0); per row an int16 field count and the
 * fields as values; the trailer is an int16 -1. */
#include <stdint.h>
#include <string.h>

#include "binarray.h"

enum { HDR_FLAGS = 4, HDR_DIM = 12, HDR_LEN = 20 };

static void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static void add32(pg_buf *b, uint32_t v) {
    unsigned char t[4];
    put32(t, v);
    pg_buf_addn(b, (const char *)t, sizeof t);
}

static void add16(pg_buf *b, uint16_t v) {
    unsigned char t[2] = {(unsigned char)(v >> 8), (unsigned char)v};
    pg_buf_addn(b, (const char *)t, sizeof t);
}

void pg_bin_text(pg_buf *b, const char *v, int *toobig) {
    if (!v) {
        add32(b, (uint32_t)-1);
        return;
    }
    pg_bin_textn(b, v, strlen(v), toobig);
}

void pg_bin_textn(pg_buf *b, const char *v, size_t n, int *toobig) {
    if (n > INT32_MAX) {
        *toobig = 1;
        return;
    }
    add32(b, (uint32_t)n);
    pg_buf_addn(b, v, n);
}

void pg_bin_int4(pg_buf *b, int32_t v) {
    add32(b, 4);
    add32(b, (uint32_t)v);
}

void pg_bin_int8(pg_buf *b, int64_t v) {
    add32(b, 8);
    add32(b, (uint32_t)((uint64_t)v >> 32));
    add32(b, (uint32_t)(uint64_t)v);
}

void pg_binarray_start(pg_binarray *a, uint32_t elem_oid) {
    memset(a, 0, sizeof *a);
    add32(&a->b, 1);        /* dimensions */
    add32(&a->b, 0);        /* flags: patched */
    add32(&a->b, elem_oid); /* element type */
    add32(&a->b, 0);        /* length of the dimension: patched */
    add32(&a->b, 1);        /* lower bound */
}

/* One more element: 0, or -1 past the format's count. */
static int element(pg_binarray *a) {
    if (a->n == INT32_MAX) {
        a->toobig = 1;
        return -1;
    }
    a->n++;
    return 0;
}

void pg_binarray_text(pg_binarray *a, const char *v) {
    if (element(a) == 0) {
        a->hasnull |= v == NULL;
        pg_bin_text(&a->b, v, &a->toobig);
    }
}

void pg_binarray_textn(pg_binarray *a, const char *v, size_t n) {
    if (element(a) == 0)
        pg_bin_textn(&a->b, v, n, &a->toobig);
}

void pg_binarray_int4(pg_binarray *a, int32_t v) {
    if (element(a) == 0)
        pg_bin_int4(&a->b, v);
}

void pg_binarray_int8(pg_binarray *a, int64_t v) {
    if (element(a) == 0)
        pg_bin_int8(&a->b, v);
}

int pg_binarray_finish(pg_binarray *a) {
    /* the parameter's length is an int too */
    if (a->b.oom || a->toobig || a->b.len < HDR_LEN || a->b.len > INT32_MAX)
        return -1;
    put32((unsigned char *)a->b.p + HDR_FLAGS, a->hasnull ? 1u : 0u);
    put32((unsigned char *)a->b.p + HDR_DIM, (uint32_t)a->n);
    return 0;
}

void pg_binarray_free(pg_binarray *a) {
    pg_buf_free(&a->b);
    memset(a, 0, sizeof *a);
}

void pg_bincopy_start(pg_buf *b) {
    static const char SIGNATURE[11] = "PGCOPY\n\377\r\n";
    pg_buf_addn(b, SIGNATURE, sizeof SIGNATURE); /* with its '\0' */
    add32(b, 0);                                 /* flags */
    add32(b, 0);                                 /* header extension */
}

void pg_bincopy_row(pg_buf *b, int16_t nfields) {
    add16(b, (uint16_t)nfields);
}

void pg_bincopy_end(pg_buf *b) {
    add16(b, 0xFFFFu);
}
