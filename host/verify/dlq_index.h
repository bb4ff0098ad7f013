/* The dead letters a connector produced to its dead-letter topic, read
 * back from the topic itself for `verify`: with "dead_letters": {"sink":
 * false} the sink stores nothing for those offsets, and only the topic
 * can say they were delivered. Each record of the topic whose
 * __connect.errors.connector.name header names the connector gives the
 * source record's topic, partition and offset (its other
 * __connect.errors.* headers; kafka/dead_letter_producer.c). */
#ifndef TM_VERIFY_DLQ_INDEX_H
#define TM_VERIFY_DLQ_INDEX_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "config/connector_config.h"

typedef struct tm_dlq_entry {
    char *topic;
    int32_t partition;
    int64_t offset;
} tm_dlq_entry;

typedef struct tm_dlq_index {
    tm_dlq_entry *v; /* sorted by topic, partition, offset */
    size_t n, cap;
    int oom;
} tm_dlq_index;

/* Reads all of cfg's $.dead_letters.topic (every partition, log start to
 * high watermark; a topic that does not exist holds none). 0, or -1 with
 * errstr (Kafka unreachable, out of memory). */
int tm_dlq_index_load(const tm_connector_config *cfg, rd_kafka_t *rk,
                      int timeout_ms, tm_dlq_index *out, char *errstr,
                      size_t errsize);

/* Whether the topic holds a dead letter of that source record. */
int tm_dlq_index_has(const tm_dlq_index *x, const char *topic,
                     int32_t partition, int64_t offset);

void tm_dlq_index_free(tm_dlq_index *x);

#endif
