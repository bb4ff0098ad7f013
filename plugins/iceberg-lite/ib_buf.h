/* A growable byte buffer shared by the encoders (Avro, Thrift, Parquet,
 * JSON lines). An allocation failure sets oom and turns every later append
 * into a no-op, so encoders check once at the end instead of at every
 * byte; ib_buf_ok() is that check. */
#ifndef TM_ICE_IB_BUF_H
#define TM_ICE_IB_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct ib_buf {
    uint8_t *p;
    size_t len, cap;
    int oom;
} ib_buf;

void ib_buf_add(ib_buf *b, const void *data, size_t n);
void ib_buf_byte(ib_buf *b, uint8_t c);
void ib_buf_str(ib_buf *b, const char *s);
void ib_buf_u32le(ib_buf *b, uint32_t v);
void ib_buf_u64le(ib_buf *b, uint64_t v);
/* Unsigned LEB128 varint (Avro, Thrift compact and Parquet's RLE headers). */
void ib_buf_uvarint(ib_buf *b, uint64_t v);
/* Zig-zag then varint: Avro int/long, Thrift compact i16/i32/i64. */
void ib_buf_zigzag(ib_buf *b, int64_t v);
/* Makes room for n more bytes; 0, or -1 (oom set). */
int ib_buf_reserve(ib_buf *b, size_t n);
void ib_buf_reset(ib_buf *b);
void ib_buf_free(ib_buf *b);
static inline int ib_buf_ok(const ib_buf *b) {
    return !b->oom;
}

#endif
