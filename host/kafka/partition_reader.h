/* Reads what Kafka holds in one partition between two offsets, as a
 * read_committed consumer sees it (aborted records and transaction markers
 * never show; compaction leaves holes). For `tidemark verify`: Kafka itself
 * is the source of truth the sink is compared with; and, one record per
 * partition, for the marker's lineage check at claim. */
#ifndef TM_PARTITION_READER_H
#define TM_PARTITION_READER_H

#include <librdkafka/rdkafka.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "config/connector_config.h"

/* Called once per record with from <= offset < to, in offset order.
 * Non-zero stops the read (tm_kafka_read_range returns that value). */
typedef int (*tm_record_fn)(void *user, const rd_kafka_message_t *m);

/* Reads [from, to) of topic/partition with a consumer of cfg's cluster
 * (assigned, never subscribed: it does not join the group). Returns 0 when
 * the read reached `to`, the callback's non-zero value, or -1 with errstr
 * (records below the log start, a timeout with no progress). */
int tm_kafka_read_range(const tm_connector_config *cfg, const char *topic,
                        int32_t partition, int64_t from, int64_t to,
                        tm_record_fn fn, void *user, char *errstr,
                        size_t errsize);

/* One record to read back per partition: the first record at or after
 * `offset` (tm_kafka_read_each). */
typedef struct tm_read_at {
    const char *topic;
    int32_t partition;
    int64_t offset;
} tm_read_at;

/* A record read back, as the lineage check compares it (pointers into the
 * message, valid during the call). */
typedef struct tm_read_record {
    int64_t offset;
    int64_t timestamp_ms; /* -1 when it has none */
    const void *key, *value;
    size_t key_len, value_len;
} tm_read_record;

/* Called once per wanted partition i: with the first record at or past
 * want[i].offset, or with r NULL when the log holds none there (its end
 * reached, or the offset below its start). */
typedef void (*tm_read_each_fn)(void *user, size_t i, const tm_read_record *r);

/* Reads one record of each of want[0..n) with ONE consumer of cfg's cluster
 * (assigned, never subscribed), for at most timeout_ms, giving up within
 * half a second once *stop is set. 0 when every partition was answered;
 * -1 with errstr when some were not (a timeout or a broker error: a
 * transient state, the caller may try again); -2 when stopped. */
int tm_kafka_read_each(const tm_connector_config *cfg, const tm_read_at *want,
                       size_t n, int64_t timeout_ms, const atomic_int *stop,
                       tm_read_each_fn fn, void *user, char *errstr,
                       size_t errsize);

#endif
