/* PostgreSQL's binary array format (binarray.h): int32 dimensions (1),
 * int32 flags (1 if any element is NULL), the element type's OID, then per
 * dimension its length and lower bound (1); then per element its length
 * in bytes (-1: NULL) and its bytes in the element type's binary format.
 * Every integer big-endian. The element count is known only at the end:
 * the header is patched then. */
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

static void add32(pg_binarray *a, uint32_t v) {
    unsigned char t[4];
    put32(t, v);
    pg_buf_addn(&a->b, (const char *)t, sizeof t);
}

void pg_binarray_start(pg_binarray *a, uint32_t elem_oid) {
    memset(a, 0, sizeof *a);
    add32(a, 1);        /* dimensions */
    add32(a, 0);        /* flags: patched */
    add32(a, elem_oid); /* element type */
    add32(a, 0);        /* length of the dimension: patched */
    add32(a, 1);        /* lower bound */
}

/* Starts element N + 1 of LEN bytes (-1: NULL). */
static int element(pg_binarray *a, int64_t len) {
    if (a->n == INT32_MAX || len > INT32_MAX) {
        a->toobig = 1;
        return -1;
    }
    a->n++;
    add32(a, (uint32_t)(int32_t)len);
    return 0;
}

void pg_binarray_text(pg_binarray *a, const char *v) {
    if (!v) {
        a->hasnull = 1;
        element(a, -1);
        return;
    }
    size_t n = strlen(v);
    if (element(a, (int64_t)(n > INT32_MAX ? (size_t)INT32_MAX + 1 : n)) == 0)
        pg_buf_addn(&a->b, v, n);
}

void pg_binarray_int4(pg_binarray *a, int32_t v) {
    if (element(a, 4) == 0)
        add32(a, (uint32_t)v);
}

void pg_binarray_int8(pg_binarray *a, int64_t v) {
    if (element(a, 8) == 0) {
        add32(a, (uint32_t)((uint64_t)v >> 32));
        add32(a, (uint32_t)(uint64_t)v);
    }
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
