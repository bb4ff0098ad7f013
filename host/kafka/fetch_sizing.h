/* How much the consumer's librdkafka fetches ahead of the batches, from the
 * batch settings: the one place that sizes fetch.max.bytes,
 * max.partition.fetch.bytes, queued.min.messages and
 * queued.max.messages.kbytes (docs/operations.md, "Backpressure"). Pure:
 * kafka_conf.c sets the result before $.kafka.properties, which win. */
#ifndef TM_KAFKA_FETCH_SIZING_H
#define TM_KAFKA_FETCH_SIZING_H

#include <stdint.h>

typedef struct tm_fetch_sizing {
    int64_t fetch_max_bytes;           /* one Fetch response, all partitions */
    int64_t max_partition_fetch_bytes; /* one partition in a response */
    int64_t queued_min_messages;       /* stop fetching at this many queued */
    int64_t queued_max_kbytes;         /* ... or this many KiB queued */
} tm_fetch_sizing;

/* The sizing for batches of at most MAX_RECORDS records and MAX_BYTES
 * bytes, the client's message.max.bytes being MESSAGE_MAX_BYTES (librdkafka
 * refuses a fetch.max.bytes below it). Every value within librdkafka's
 * range, whatever the inputs (non-positive ones count as 1). */
tm_fetch_sizing tm_fetch_sizing_of(int64_t max_records, int64_t max_bytes,
                                   int64_t message_max_bytes);

#endif
