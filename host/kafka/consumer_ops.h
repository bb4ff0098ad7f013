/* What the commit loop and the claim ask of the group consumer, in the
 * host's own types: poll one message, pause, resume, seek, commit group
 * offsets, the assignment's partitions. kafka/ is the only room that calls
 * librdkafka (docs/architecture.md); commit/ goes through here. */
#ifndef TM_KAFKA_CONSUMER_OPS_H
#define TM_KAFKA_CONSUMER_OPS_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "config/connector_config.h"
#include "convert/batch_builder.h"
#include "kafka/message_view.h"

/* An offset meaning the log's end (librdkafka's RD_KAFKA_OFFSET_END). */
#define TM_KAFKA_OFFSET_END (-1)

/* One partition, with an offset where one is meant, and the outcome of an
 * operation on it (seek) where one is given. */
typedef struct tm_kafka_tp {
    const char *topic; /* not owned, but by tm_kafka_tps_free's arrays */
    int32_t partition;
    int64_t offset;
    const char *err; /* NULL, or librdkafka's words (static) */
} tm_kafka_tp;

/* The partitions of a librdkafka list as an array (topics pointing into
 * the list, valid while it is), offsets kept. NULL when out of memory (or
 * the list is empty: *n 0). */
tm_kafka_tp *tm_kafka_tps_of_list(const rd_kafka_topic_partition_list_t *l,
                                  size_t *n);

/* Every partition of the connector's topics (tm_kafka_list_partitions) as
 * an array with its own topics: freed with tm_kafka_tps_free. 0, or -1
 * with errstr. */
int tm_kafka_partition_tps(rd_kafka_t *rk, const tm_connector_config *cfg,
                           int timeout_ms, tm_kafka_tp **out, size_t *n,
                           char *errstr, size_t errsize);
void tm_kafka_tps_free(tm_kafka_tp *tps, size_t n);

/* The consumer's current assignment as an array with its own topics
 * (offsets as librdkafka holds them): freed with tm_kafka_tps_free. 0, or
 * -1 with errstr. */
int tm_kafka_assignment(rd_kafka_t *rk, tm_kafka_tp **out, size_t *n,
                        char *errstr, size_t errsize);

/* The high watermark librdkafka last saw for the partition (no round
 * trip): 0 with *high, or -1 when it has none. */
int tm_kafka_cached_high(rd_kafka_t *rk, const char *topic, int32_t partition,
                         int64_t *high);

/* Pauses (pause 1) or resumes (0) the partitions' fetching. 0, or -1 with
 * errstr (librdkafka's reason, or out of memory). */
int tm_kafka_set_paused(rd_kafka_t *rk, const tm_kafka_tp *tps, size_t n,
                        int pause, char *errstr, size_t errsize);

/* Seeks each partition to its offset, waiting for it at most timeout_ms
 * (what was fetched before is discarded). -1 with errstr when the call
 * failed as a whole; else 0, each tps[i].err NULL or why that one failed. */
int tm_kafka_seek(rd_kafka_t *rk, tm_kafka_tp *tps, size_t n, int timeout_ms,
                  char *errstr, size_t errsize);

/* Commits the partitions' offsets to the group, asynchronously (only lag
 * tools read them). 0, or -1 with errstr. */
int tm_kafka_commit_offsets(rd_kafka_t *rk, const tm_kafka_tp *tps, size_t n,
                            char *errstr, size_t errsize);

/* The consumer's session.timeout.ms, or librdkafka's default (45 s) when
 * it cannot be read. */
int64_t tm_kafka_consumer_session_ms(rd_kafka_t *rk);

/* The consumer's max.poll.interval.ms in effect: the user's
 * $.kafka.properties, else librdkafka's default (300000). Past it without
 * a poll, librdkafka takes the member out of its group. */
int64_t tm_kafka_consumer_max_poll_ms(rd_kafka_t *rk);

typedef enum tm_polled_kind {
    TM_POLLED_NOTHING, /* no message within the timeout (or one without a
                          partition and without an error) */
    TM_POLLED_RECORD,  /* topic, partition, offset: a record */
    TM_POLLED_END,     /* topic, partition, offset: the position at the
                          partition's end */
    TM_POLLED_ERROR    /* error, errname, errstr; topic ("?" when none),
                          partition, offset as the message says */
} tm_polled_kind;

/* What a consumer error means for the connector (commit/commit_loop.c). */
typedef enum tm_poll_error {
    TM_POLL_ERR_OFFSET_GONE, /* the position is no longer in the log */
    TM_POLL_ERR_FATAL,       /* librdkafka's fatal error: the handle is done */
    TM_POLL_ERR_NO_TOPIC,    /* a topic (or partition) not there yet */
    TM_POLL_ERR_AUTH,        /* not authorized for the topic or the group */
    TM_POLL_ERR_OTHER
} tm_poll_error;

typedef struct tm_polled {
    tm_polled_kind kind;
    const char *topic; /* valid until tm_kafka_polled_release */
    int32_t partition;
    int64_t offset;
    tm_poll_error error;
    const char *errname, *errstr;
    rd_kafka_message_t *msg; /* owned, NULL for NOTHING */
} tm_polled;

/* Polls the consumer for at most timeout_ms (the rebalance callback runs
 * inside). Returns out->kind; out is released with tm_kafka_polled_release
 * whatever its kind. */
tm_polled_kind tm_kafka_poll(rd_kafka_t *rk, int timeout_ms, tm_polled *out);

/* The record of a TM_POLLED_RECORD as the converter sees it
 * (kafka/message_view.h): pointers into the message and hv, valid until
 * the release. */
void tm_kafka_polled_view(const tm_polled *p, tm_header_view *hv,
                          tm_msg_view *out, int *truncated);

void tm_kafka_polled_release(tm_polled *p);

/* Wakes a tm_kafka_poll waiting on rk (it returns nothing at once); from
 * any thread. rk NULL: nothing. */
void tm_kafka_wake(rd_kafka_t *rk);

#endif
