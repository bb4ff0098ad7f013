/* Reads what Kafka holds in one partition between two offsets, as a
 * read_committed consumer sees it (aborted records and transaction markers
 * never show; compaction leaves holes). For `tidemark verify`: Kafka itself
 * is the source of truth the sink is compared with. */
#ifndef TM_PARTITION_READER_H
#define TM_PARTITION_READER_H

#include <librdkafka/rdkafka.h>
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

#endif
