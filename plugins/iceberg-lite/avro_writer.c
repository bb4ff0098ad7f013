/* Avro object container writer: header, blocks, sync markers. */
#include <string.h>

#include "avro_writer.h"

void av_put_long(ib_buf *b, int64_t v) {
    ib_buf_zigzag(b, v);
}

void av_put_bool(ib_buf *b, int v) {
    ib_buf_byte(b, v ? 1 : 0);
}

void av_put_double(ib_buf *b, double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u); /* IEEE 754, little-endian on the wire */
    ib_buf_u64le(b, u);
}

void av_put_bytes(ib_buf *b, const void *p, size_t n) {
    av_put_long(b, (int64_t)n);
    ib_buf_add(b, p, n);
}

void av_put_string(ib_buf *b, const char *s) {
    av_put_bytes(b, s, strlen(s));
}

void av_put_branch(ib_buf *b, int index) {
    av_put_long(b, index);
}

void av_begin(av_writer *w, const char *schema_json, const char *const *meta,
              size_t npairs, const uint8_t sync[AV_SYNC_SIZE]) {
    memset(w, 0, sizeof *w);
    memcpy(w->sync, sync, AV_SYNC_SIZE);
    ib_buf_add(&w->file, "Obj\x01", 4);
    /* The metadata is a map<bytes>: one block with every pair, then the
     * empty block that ends the map. */
    av_put_long(&w->file, (int64_t)npairs + 2);
    av_put_string(&w->file, "avro.schema");
    av_put_string(&w->file, schema_json);
    av_put_string(&w->file, "avro.codec");
    av_put_string(&w->file, "null");
    for (size_t i = 0; i < npairs; i++) {
        av_put_string(&w->file, meta[2 * i]);
        av_put_string(&w->file, meta[2 * i + 1]);
    }
    av_put_long(&w->file, 0);
    ib_buf_add(&w->file, w->sync, AV_SYNC_SIZE);
}

/* Writes the open block (count, size, records, sync) if it has records. */
static void flush_block(av_writer *w) {
    if (w->count == 0)
        return;
    av_put_long(&w->file, w->count);
    av_put_long(&w->file, (int64_t)w->block.len);
    ib_buf_add(&w->file, w->block.p, w->block.len);
    ib_buf_add(&w->file, w->sync, AV_SYNC_SIZE);
    if (w->block.oom)
        w->file.oom = 1;
    ib_buf_reset(&w->block);
    w->count = 0;
}

ib_buf *av_record(av_writer *w) {
    if (w->block.len >= AV_BLOCK_TARGET)
        flush_block(w);
    w->count++;
    return &w->block;
}

int av_finish(av_writer *w) {
    flush_block(w);
    return ib_buf_ok(&w->file) && ib_buf_ok(&w->block) ? 0 : -1;
}

void av_free(av_writer *w) {
    ib_buf_free(&w->file);
    ib_buf_free(&w->block);
}
