/* One-dimensional arrays in PostgreSQL's binary format (what array_send
 * writes and array_recv reads), for parameters sent with format 1: the
 * server copies each element as it is, where a text literal ('{"a","b"}')
 * goes through array_in's parser, quoting and escapes (about a sixth of
 * the business keys' statement, docs/benchmarks.md). */
#ifndef TM_PG_BINARRAY_H
#define TM_PG_BINARRAY_H

#include <stdint.h>

#include "pg_sink.h"

/* Element types: the built-in type OIDs (pg_type.h), fixed in every
 * PostgreSQL release. */
#define PG_OID_INT4 23u
#define PG_OID_INT8 20u
#define PG_OID_TEXT 25u

typedef struct pg_binarray {
    pg_buf b;
    int32_t n;   /* elements so far */
    int hasnull; /* an element is NULL */
    int toobig;  /* an element or the array is past the format's int32 */
} pg_binarray;

/* An empty array of ELEM_OID (a PG_OID_*). */
void pg_binarray_start(pg_binarray *a, uint32_t elem_oid);
/* Appends one element; V NULL: SQL null. */
void pg_binarray_text(pg_binarray *a, const char *v);
void pg_binarray_int4(pg_binarray *a, int32_t v);
void pg_binarray_int8(pg_binarray *a, int64_t v);
/* Completes the header; 0, or -1 when out of memory or too big (the
 * array is then unusable: free it). */
int pg_binarray_finish(pg_binarray *a);
void pg_binarray_free(pg_binarray *a);

#endif
