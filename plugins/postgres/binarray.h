/* PostgreSQL's binary formats, for what the sink sends in bulk: one-
 * dimensional arrays (what array_send writes and array_recv reads), for
 * parameters sent with format 1, and the rows of COPY ... (FORMAT binary).
 * The server takes each value as it is, where text goes through a parser:
 * array_in's quoting and escapes for a literal ('{"a","b"}'), COPY's text
 * format for rows (docs/benchmarks.md, business keys). */
#ifndef TM_PG_BINARRAY_H
#define TM_PG_BINARRAY_H

#include <stdint.h>

#include "pg_sink.h"

/* Element types: the built-in type OIDs (pg_type.h), fixed in every
 * PostgreSQL release. */
#define PG_OID_INT4 23u
#define PG_OID_INT8 20u
#define PG_OID_TEXT 25u

/* One value in the binary format, as an array element or a COPY field:
 * its length (-1: NULL) and its bytes. toobig is set when a length does
 * not fit the format's int32. */
void pg_bin_text(pg_buf *b, const char *v, int *toobig);
/* N bytes of V (embedded NULs included), never NULL. */
void pg_bin_textn(pg_buf *b, const char *v, size_t n, int *toobig);
void pg_bin_int4(pg_buf *b, int32_t v);
void pg_bin_int8(pg_buf *b, int64_t v);

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
void pg_binarray_textn(pg_binarray *a, const char *v, size_t n);
void pg_binarray_int4(pg_binarray *a, int32_t v);
void pg_binarray_int8(pg_binarray *a, int64_t v);
/* Completes the header; 0, or -1 when out of memory or too big (the
 * array is then unusable: free it). */
int pg_binarray_finish(pg_binarray *a);
void pg_binarray_free(pg_binarray *a);

/* COPY ... FROM STDIN (FORMAT binary): the header, then per row
 * pg_bincopy_row and its NFIELDS values (pg_bin_*), then the trailer. */
void pg_bincopy_start(pg_buf *b);
void pg_bincopy_row(pg_buf *b, int16_t nfields);
void pg_bincopy_end(pg_buf *b);

#endif
