/* Wakes librdkafka's fetcher when the consumer has drained its queue.
 *
 * librdkafka 2.0.2 stops fetching a partition once the consumer's queue
 * holds queued.min.messages (or queued.max.messages.kbytes), and decides
 * again only when the broker thread next wakes: nothing in draining the
 * queue wakes it, so with no fetch in flight it sleeps up to a second. A
 * consumer slower than the fetcher (every connector: conversion and the
 * sink cost microseconds a record, the fetcher a fraction of one) drains
 * its queue, then waits: a bare librdkafka loop spending 1 us a message
 * read 148 000 records/s instead of ~600 000 (docs/benchmarks.md, "The
 * fetcher's stall"). Later librdkafka versions re-decide after
 * fetch.queue.backoff.ms; 2.0.2 refuses that setting.
 *
 * So once the queue was at least half of queued.min.messages and has
 * drained to a quarter, a thread of ours asks the partition's leader for
 * its watermarks (rd_kafka_query_watermark_offsets: read-only, one small
 * request): the request wakes the broker thread, which decides again and
 * fetches. The consumer's thread only counts and signals; the request and
 * its round trip are on the waker's thread. It wakes the broker of the
 * partition last read; with several brokers the others still wake on their
 * own within a second. A queue bound by kbytes (large records) before it
 * reaches half of the count is never armed: nothing changes there. */
#ifndef TM_FETCH_WAKE_H
#define TM_FETCH_WAKE_H

#include <librdkafka/rdkafka.h>
#include <stdint.h>

typedef struct tm_fetch_wake tm_fetch_wake;

/* The decision, pure (unit-tested): with the queue LEN messages long and
 * LIMIT queued.min.messages, *armed kept between calls: 1 when the waker
 * is to wake the fetcher now. Arms at LIMIT/2, fires (and disarms) at
 * LIMIT/4. */
int tm_fetch_wake_due(int *armed, int64_t len, int64_t limit);

/* A waker for consumer RK, its thread started; NULL when it cannot be made
 * (out of memory, no thread, queued.min.messages unreadable): the consumer
 * runs without it, as before. Freed before rd_kafka_destroy(RK). */
tm_fetch_wake *tm_fetch_wake_new(rd_kafka_t *rk);

/* After each record polled from TOPIC/PARTITION, on the consumer's thread:
 * looks at the queue every few hundred records and, when due, hands the
 * partition to the waker's thread. W may be NULL. */
void tm_fetch_wake_seen(tm_fetch_wake *w, const char *topic, int32_t partition);

/* How many wake-ups were asked (for the log at the consumer's stop). */
int64_t tm_fetch_wake_count(const tm_fetch_wake *w);

/* Stops and joins the waker's thread and frees it. W may be NULL. A request
 * in flight is waited for: librdkafka 2.0.2 bounds only the leader's lookup
 * by the 1 s given, the request itself by socket.timeout.ms (a silent
 * broker: up to a minute), so the consumer's stop frees it on the close
 * watchdog's thread (kafka/consumer.c). */
void tm_fetch_wake_free(tm_fetch_wake *w);

#endif
