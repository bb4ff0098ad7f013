/* A reader of Thrift's compact protocol, for the Parquet files this plugin
 * wrote (footer and page headers). Fields come one by one; anything the
 * caller does not want is skipped by type. Malformed input sets err, which
 * every later call keeps. */
#ifndef TM_ICE_THRIFT_READER_H
#define TM_ICE_THRIFT_READER_H

#include <stddef.h>
#include <stdint.h>

#include "thrift_compact.h"

typedef struct tr_reader {
    const uint8_t *p, *end;
    int16_t last[TC_MAX_DEPTH];
    int depth;
    int err;
    int bool_value; /* of the last bool field header */
} tr_reader;

void tr_init(tr_reader *r, const uint8_t *p, size_t n);
void tr_struct_begin(tr_reader *r);
/* The next field of the open struct: 1 with *id and *type, 0 at its stop
 * (the struct is closed then), -1 malformed. */
int tr_field(tr_reader *r, int16_t *id, int *type);
int64_t tr_int(tr_reader *r); /* i16, i32, i64 */
/* A plain ULEB128 varint (also Parquet's RLE run headers). */
uint64_t tr_uvarint(tr_reader *r);
int tr_bool(tr_reader *r); /* the value of a bool field just read */
/* binary: points into the input. */
void tr_binary(tr_reader *r, const uint8_t **p, size_t *n);
/* A list header: element type and count. */
void tr_list(tr_reader *r, int *elem, size_t *n);
/* Skips one value of TYPE (nested structs and lists included). */
void tr_skip(tr_reader *r, int type);

#endif
