/* A fingerprint of what a connector's consumer subscribes to: the config's
 * topics list or regex, and every matching topic with its partition count
 * as the cluster's metadata lists them now. Kept with the static member
 * id (kafka/member_id.h): when it changes, the id does, so that the group
 * rebalances instead of handing the old assignment back. */
#ifndef TM_SUBSCRIPTION_H
#define TM_SUBSCRIPTION_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>

#include "config/connector_config.h"

/* The fingerprint of CFG's subscription with ALL, the partitions the
 * cluster has of it (sorted by topic and partition), into out
 * (TM_SUBSCRIPTION_HEX hex digits and a NUL). The topics list counts as a
 * set: order and repetition do not change it. 0, or -1 (out too small,
 * out of memory). */
int tm_subscription_hash(const tm_connector_config *cfg,
                         const rd_kafka_topic_partition_list_t *all, char *out,
                         size_t size);

/* Asks the cluster (one short-lived client, within timeout_ms) and writes
 * the fingerprint to out (TM_SUBSCRIPTION_HEX hex digits and a NUL).
 * 0, or -1 with why (the metadata could not be read). */
int tm_subscription_fingerprint(const tm_connector_config *cfg, int timeout_ms,
                                char *out, size_t size, char *why,
                                size_t whysize);

/* The same with a client of the caller's (the consumer's own metadata,
 * after its first assignment: kafka/consumer.c). */
int tm_subscription_fingerprint_of(rd_kafka_t *rk,
                                   const tm_connector_config *cfg,
                                   int timeout_ms, char *out, size_t size,
                                   char *why, size_t whysize);

#endif
