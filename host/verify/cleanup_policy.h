/* Whether a topic is compacted (its cleanup.policy names "compact"). */
#ifndef TM_VERIFY_CLEANUP_POLICY_H
#define TM_VERIFY_CLEANUP_POLICY_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>

/* 1 compacted, 0 not, -1 with errstr when the broker could not say. */
int tm_verify_topic_compacted(rd_kafka_t *rk, const char *topic, int timeout_ms,
                              char *errstr, size_t errsize);

#endif
