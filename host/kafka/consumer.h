/* The connector's group consumer: created with the protocol's settings,
 * its rebalance callback wired to the claim (assign) and to abandoning
 * batches (revoke), and closed under a watchdog. */
#ifndef TM_KAFKA_CONSUMER_H
#define TM_KAFKA_CONSUMER_H

#include "runtime/connector_state.h"

/* Creates c->rk and subscribes to the connector's topics (or pattern).
 * 0, or -1 with errstr. */
int tm_consumer_start(tm_connector *c, char *errstr, size_t errsize);

/* Leaves the group (rd_kafka_consumer_close) and destroys c->rk. librdkafka
 * 2.0.x can hang in close after lost partitions: past timeout_ms the handle
 * is abandoned instead (the process is about to exit; nothing of the
 * commit protocol depends on a clean close). */
void tm_consumer_stop(tm_connector *c, int timeout_ms);

/* librdkafka reported a fatal error on c->rk (error callback or a consumer
 * event): the handle is finished. Flags it once, with librdkafka's reason
 * in the status;
 * the connector's thread makes a new consumer (runtime/connector.c). */
void tm_consumer_fatal(tm_connector *c);

/* The group assigned partitions outside the subscription (a static member
 * handed its old assignment back; commit/claim.c claims none of them):
 * the stored member id is replaced (kafka/member_id.h) and the consumer
 * is flagged like a fatal error, so the connector's thread makes a new one
 * that joins as a new member and makes the group rebalance. */
void tm_consumer_rejoin_as_new(tm_connector *c);

#endif
