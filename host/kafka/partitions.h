/* Which partitions a connector reads, and where their logs begin and end.
 * Broker round trips with a timeout; used by the assign callback (start
 * offsets of unclaimed partitions) and by the CLI's offline views. */
#ifndef TM_KAFKA_PARTITIONS_H
#define TM_KAFKA_PARTITIONS_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "config/connector_config.h"

/* 1 when TOPIC is one of the connector's inputs ($.kafka.topics, or it
 * matches $.kafka.topic_regex and is not one of Kafka's internal "__"
 * topics), else 0. */
int tm_kafka_topic_wanted(const tm_connector_config *cfg, const char *topic);

/* Every partition of the connector's topics ($.kafka.topics, or every
 * topic matching $.kafka.topic_regex), sorted by topic and partition, from
 * the cluster's metadata. A listed topic that does not exist is an error
 * naming it. Returns 0 with *out (the caller destroys it), -1 with errstr. */
int tm_kafka_list_partitions(rd_kafka_t *rk, const tm_connector_config *cfg,
                             int timeout_ms,
                             rd_kafka_topic_partition_list_t **out,
                             char *errstr, size_t errsize);

/* The same, where a listed topic the cluster does not have is simply
 * absent (no partition of it listed): what the subscription's fingerprint
 * needs, the same on every start while the topic is missing. */
int tm_kafka_list_present_partitions(rd_kafka_t *rk,
                                     const tm_connector_config *cfg,
                                     int timeout_ms,
                                     rd_kafka_topic_partition_list_t **out,
                                     char *errstr, size_t errsize);

/* The log start offset and the high watermark of one partition, asked of
 * the broker (for a read_committed client the high end is the last stable
 * offset). Returns 0, or -1 with errstr naming the partition. */
int tm_kafka_watermarks(rd_kafka_t *rk, const char *topic, int32_t partition,
                        int timeout_ms, int64_t *low, int64_t *high,
                        char *errstr, size_t errsize);

#endif
