/* Dead letters to a Kafka topic ($.dead_letters.topic), in the manner of
 * Kafka Connect's errors.deadletterqueue: the original key and value, and
 * headers naming the source topic, partition, offset and reason. Sent and
 * confirmed before the sink's commit, so at-least-once: a RETRY sends
 * again those not confirmed, a batch given up and read again all. */
#ifndef TM_DEAD_LETTER_PRODUCER_H
#define TM_DEAD_LETTER_PRODUCER_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <tidemark/sink.h>

#include "config/connector_config.h"

typedef struct tm_dead_letter_producer tm_dead_letter_producer;

/* An idempotent producer (acks=all) for cfg's dead-letter topic. NULL with
 * errstr. */
tm_dead_letter_producer *tm_dlq_new(const tm_connector_config *cfg,
                                    char *errstr, size_t errsize);

/* Delivers the dead letters of batch B, each confirmed by the topic, in
 * attempts that go on from one another: the producer remembers, per dead
 * letter of B, whether a delivery report confirmed it (the message's
 * opaque names it), so an attempt produces only those neither confirmed
 * nor still on their way from an earlier attempt, and waits for both; a
 * failed delivery is produced again. Dead letters sent(ctx, range, offset)
 * says were delivered already (by an earlier batch; sent may be NULL) are
 * not produced. The wait (for room in the producer's queue, then for the
 * deliveries) goes in slices of at most 100 ms and ends when left_ms(ctx),
 * asked before each, is 0 or less: the caller's deadline may come closer
 * during the wait (a stop asked meanwhile). 0 when every dead letter of B
 * is confirmed; -1 with errstr naming the first failure, or how many were
 * confirmed when the wait ended: what is on its way then stays so for the
 * next attempt, until tm_dlq_forget. */
int tm_dlq_send(tm_dead_letter_producer *q, const tm_batch *b,
                int (*sent)(void *ctx, const tm_range *r, int64_t offset),
                int64_t (*left_ms)(void *ctx), void *ctx, char *errstr,
                size_t errsize);

/* The batch is closed (committed, or given up): its progress goes, and
 * what is still queued or on its way is discarded (purged) without
 * waiting. A batch given up comes again with whoever reads it again from
 * the markers, its dead letters produced again. */
void tm_dlq_forget(tm_dead_letter_producer *q);

/* 1 when librdkafka raised a fatal error on the producer (its idempotence
 * broken: every later produce is refused), with errstr naming it (the
 * error's name and librdkafka's reason); 0 while it is usable. */
int tm_dlq_fatal(tm_dead_letter_producer *q, char *errstr, size_t errsize);

/* Makes the producer again (after a fatal error): the old one goes
 * without waiting, a new one takes its place. The batch's progress stays:
 * what was confirmed is not produced again, what was on its way is. 0, or
 * -1 with errstr: then q has no producer, and tm_dlq_send fails saying so
 * (the caller's connector is FAILED). */
int tm_dlq_renew(tm_dead_letter_producer *q, char *errstr, size_t errsize);

/* Frees the producer without waiting for the topic: anything still queued
 * would be of a batch that was not committed. */
void tm_dlq_free(tm_dead_letter_producer *q);

/* The header naming the deployment that produced a dead letter: its
 * consumer group ($.kafka.group_id). Two deployments of one connector
 * name (staging and production) writing one dead-letter topic are told
 * apart by it (verify/dlq_index.c). */
#define TM_DLQ_GROUP_HEADER "tidemark.group_id"

/* The headers of dead letter D of batch B (Kafka Connect's names, plus
 * tidemark.reason and tidemark.batch_id), each value redacted of the
 * process's secrets (services/redact.h). NULL when memory ran out. */
rd_kafka_headers_t *tm_dlq_headers(const char *connector, const tm_batch *b,
                                   const tm_dead_letter *d);

#endif
