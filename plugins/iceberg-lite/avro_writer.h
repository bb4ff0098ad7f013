/* Avro object container files (Avro 1.x spec, "Object Container Files"),
 * codec null, written whole in memory: Iceberg's manifests and manifest
 * lists are small. The schema is the caller's JSON text, so Iceberg's
 * "field-id" attributes survive (Debian's avro-c drops them). Records are
 * encoded by the caller with the av_put_* functions into av_record()'s
 * buffer, in the schema's field order. */
#ifndef TM_ICE_AVRO_WRITER_H
#define TM_ICE_AVRO_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "ib_buf.h"

#define AV_SYNC_SIZE 16
/* A block is closed past this size, as writers usually do (64 KiB - 1 MiB). */
#define AV_BLOCK_TARGET (1u << 20)

typedef struct av_writer {
    ib_buf file;  /* header and finished blocks */
    ib_buf block; /* records of the open block */
    int64_t count;
    uint8_t sync[AV_SYNC_SIZE];
} av_writer;

/* Starts a file: magic, the metadata map (avro.schema, avro.codec "null",
 * then the npairs key/value pairs of meta: meta[2i] key, meta[2i+1] value)
 * and the sync marker. */
void av_begin(av_writer *w, const char *schema_json, const char *const *meta,
              size_t npairs, const uint8_t sync[AV_SYNC_SIZE]);
/* The buffer to encode the next record into (counts it). */
ib_buf *av_record(av_writer *w);
/* Closes the open block and appends the sync marker; ib_buf_ok(&w->file)
 * says whether everything fit in memory. The file is w->file.p/len. */
int av_finish(av_writer *w);
void av_free(av_writer *w);

/* Binary encoding of values (Avro spec, "Binary Encoding"). */
void av_put_long(ib_buf *b, int64_t v); /* int and long alike */
void av_put_bool(ib_buf *b, int v);
void av_put_double(ib_buf *b, double v);
void av_put_bytes(ib_buf *b, const void *p, size_t n); /* bytes and string */
void av_put_string(ib_buf *b, const char *s);
/* A union's branch index; the branch's value follows (none for null). */
void av_put_branch(ib_buf *b, int index);

#endif
