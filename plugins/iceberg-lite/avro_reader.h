/* A reader of the Avro container files this plugin writes (codec null):
 * the table's own manifests and manifest lists, read back for scan and to
 * carry earlier manifests into the next manifest list. It decodes values
 * in the order the caller asks for them (the caller knows the schema it
 * wrote); any malformed input sets err, which every later call keeps. */
#ifndef TM_ICE_AVRO_READER_H
#define TM_ICE_AVRO_READER_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "avro_writer.h"

typedef struct av_reader {
    const uint8_t *p, *end;
    const uint8_t *meta, *meta_end; /* the header's metadata map */
    uint8_t sync[AV_SYNC_SIZE];
    int64_t left;             /* records left in the current block */
    const uint8_t *block_end; /* where the current block's sync starts */
    int err;
} av_reader;

/* Parses the header. 0, or -1 (not an Avro file, or not codec null). */
int av_read_open(av_reader *r, const uint8_t *data, size_t n);
/* The value of header key KEY (not NUL-terminated). 0, or -1 when absent. */
int av_read_meta(const av_reader *r, const char *key, const uint8_t **val,
                 size_t *len);
/* Moves to the next record: 1 there is one, 0 end of file, -1 malformed. */
int av_read_next(av_reader *r);

int64_t av_get_long(av_reader *r);
int av_get_bool(av_reader *r);
double av_get_double(av_reader *r);
/* bytes or string: points into the file's data. */
void av_get_bytes(av_reader *r, const uint8_t **p, size_t *n);

/* Skips one value of Avro type TYPE (the schema's JSON: a primitive name,
 * a union array, a record, array, map, fixed or enum object; named type
 * references are refused), e.g. fields of a manifest a reader does not
 * decode. Malformed input, or a schema nested deeper than
 * AV_SKIP_DEPTH_MAX, sets err. depth: 0 at the top. */
#define AV_SKIP_DEPTH_MAX 32
void av_skip(av_reader *r, json_t *type, int depth);

#endif
