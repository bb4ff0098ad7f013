/* Whether the connector reaches Kafka at all (docs/operations.md, Health):
 * librdkafka retries a broker that is down by itself and only reports it
 * through its error callback, which says when brokers go down but never
 * when they are back, and says nothing for up to socket.timeout.ms when a
 * broker stops answering on a connection that stays open. Its statistics
 * (every second, served by the consumer's poll on the connector's thread)
 * tell both: each broker's connection state, its requests waiting for an
 * answer and how long ago it last received anything, each assigned
 * partition's leader, the group coordinator's state. Kafka unreachable
 * for TM_KAFKA_DOWN_DEGRADED_MS makes the connector DEGRADED, since the
 * outage began, and the first statistics with it reachable again end it,
 * also when the topics are idle and no record comes to prove it. */
#ifndef TM_KAFKA_BROKER_WATCH_H
#define TM_KAFKA_BROKER_WATCH_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "config/connector_config.h"
#include "runtime/connector_state.h"

/* Below this, a broker going away is a blip librdkafka reconnects past
 * (a leader moving, an idle connection closed): not worth a state. */
#define TM_KAFKA_DOWN_DEGRADED_MS 10000

/* A broker whose connection is UP with requests waiting and nothing
 * received for this long has stopped answering (a dead route, a stopped
 * process): far above a fetch's long poll (fetch.wait.max.ms, 500 ms)
 * and any answer of a live broker. */
#define TM_KAFKA_STALL_MS 5000

/* How often librdkafka emits its statistics when the config does not say
 * (kafka/consumer.c): the bound on how late a recovery is seen. */
#define TM_KAFKA_STATS_INTERVAL "1000"

/* A warning for `validate` (1, the sentence in out; 0 none) about cfg's
 * $.kafka.properties: a statistics.interval.ms above
 * TM_KAFKA_DOWN_DEGRADED_MS delays DEGRADED, and its end, by up to that
 * interval; a fetch.wait.max.ms of TM_KAFKA_STALL_MS or more makes an
 * idle topic's fetch look like a stalled broker. Pure. */
int tm_broker_watch_config_note(const tm_connector_config *cfg, char *out,
                                size_t size);

/* Each warning of tm_broker_watch_config_note, one line each to f, after
 * "FILE: warning: "; the number written. */
int tm_broker_watch_config_warn(const tm_connector_config *cfg,
                                const char *file, FILE *f);

/* What a statistics document (json, len bytes) says of Kafka: -1 when it
 * has no readable "brokers"; 0 reachable; 1 unreachable, with *for_ms how
 * long it has been so as far as the document tells (0 when it does not)
 * and why a sentence naming what is unreachable. Unreachable: no broker
 * learned from the cluster (nodeid >= 0; the bootstrap entries and the
 * logical coordinator never count) is live (its connection UP, not
 * stalled, see TM_KAFKA_STALL_MS); or an assigned partition's leader is
 * not live; or the group coordinator is not "up". Pure. */
int tm_broker_stats_down(const char *json, size_t len, int64_t *for_ms,
                         char *why, size_t why_size);

/* A transient error of the error callback: kept as the reason shown once
 * the brokers stay down. */
void tm_broker_watch_error(tm_connector *c, const char *name,
                           const char *reason);

/* A statistics document: DEGRADED when Kafka has been unreachable for
 * TM_KAFKA_DOWN_DEGRADED_MS, recovered when it is reachable again. */
void tm_broker_watch_stats(tm_connector *c, const char *json, size_t len);

#endif
