/* Whether the connector reaches Kafka at all (docs/operations.md, Health):
 * librdkafka retries a broker that is down by itself and only reports it
 * through its error callback, which says when brokers go down but never
 * when they are back. Its statistics (every second, served by the
 * consumer's poll on the connector's thread) list each broker's connection
 * state: no broker UP for TM_KAFKA_DOWN_DEGRADED_MS makes the connector
 * DEGRADED, and the first statistics with one UP again end it, also when
 * the topics are idle and no record comes to prove it. */
#ifndef TM_KAFKA_BROKER_WATCH_H
#define TM_KAFKA_BROKER_WATCH_H

#include <stddef.h>

#include "runtime/connector_state.h"

/* Below this, a broker going away is a blip librdkafka reconnects past
 * (a leader moving, an idle connection closed): not worth a state. */
#define TM_KAFKA_DOWN_DEGRADED_MS 10000

/* How often librdkafka emits its statistics when the config does not say
 * (kafka/consumer.c): the bound on how late a recovery is seen. */
#define TM_KAFKA_STATS_INTERVAL "1000"

/* The number of brokers the statistics document json (len bytes) shows
 * with their connection UP, librdkafka's internal pseudo-broker not
 * counted; -1 when it has no readable "brokers". Pure. */
int tm_broker_stats_up(const char *json, size_t len);

/* A transient error of the error callback: kept as the reason shown once
 * the brokers stay down. */
void tm_broker_watch_error(tm_connector *c, const char *name,
                           const char *reason);

/* A statistics document: DEGRADED when no broker has been UP for
 * TM_KAFKA_DOWN_DEGRADED_MS, recovered when one is UP again. */
void tm_broker_watch_stats(tm_connector *c, const char *json, size_t len);

#endif
