/* Thrift's compact protocol (thrift/doc/specs/thrift-compact-protocol.md),
 * the subset Parquet's footer and page headers need: structs, i16/i32/i64,
 * bool, binary and lists. The writer keeps the last field id of every open
 * struct, because field headers carry the id as a delta from it. */
#ifndef TM_ICE_THRIFT_COMPACT_H
#define TM_ICE_THRIFT_COMPACT_H

#include <stddef.h>
#include <stdint.h>

#include "ib_buf.h"

/* Compact type codes. */
enum {
    TC_STOP = 0,
    TC_TRUE = 1,
    TC_FALSE = 2,
    TC_BYTE = 3,
    TC_I16 = 4,
    TC_I32 = 5,
    TC_I64 = 6,
    TC_DOUBLE = 7,
    TC_BINARY = 8,
    TC_LIST = 9,
    TC_SET = 10,
    TC_MAP = 11,
    TC_STRUCT = 12
};

#define TC_MAX_DEPTH 16

typedef struct tc_writer {
    ib_buf *out;
    int16_t last[TC_MAX_DEPTH]; /* last field id per open struct */
    int depth;
    int err; /* nesting too deep or unbalanced */
} tc_writer;

void tc_init(tc_writer *w, ib_buf *out);
/* A struct value (top level or list element): open, fields, close. */
void tc_struct_begin(tc_writer *w);
void tc_struct_end(tc_writer *w); /* writes the stop byte */

/* Fields of the open struct. */
void tc_field_i32(tc_writer *w, int16_t id, int32_t v);
void tc_field_i64(tc_writer *w, int16_t id, int64_t v);
void tc_field_bool(tc_writer *w, int16_t id, int v);
void tc_field_binary(tc_writer *w, int16_t id, const void *p, size_t n);
void tc_field_string(tc_writer *w, int16_t id, const char *s);
/* A struct-valued field: follow with fields and tc_struct_end. */
void tc_field_struct(tc_writer *w, int16_t id);
/* A list-valued field of n elements of type elem: follow with n elements
 * (tc_i32, tc_string, or tc_struct_begin ... tc_struct_end each). */
void tc_field_list(tc_writer *w, int16_t id, int elem, size_t n);

/* List elements. */
void tc_i32(tc_writer *w, int32_t v);
void tc_string(tc_writer *w, const char *s);

#endif
