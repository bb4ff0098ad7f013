/* What the status file does not say about a connector: how long the
 * sink's commit() calls take, how long records take to convert, how many
 * errors were recorded, the consumer's fetch queue. Counters are atomics,
 * so the connector threads record without a lock; the host saves them
 * next to its status file (metrics_persist.h) for `tidemark status
 * --format prometheus` and the metrics textfile to read. */
#ifndef TM_METRICS_REGISTRY_H
#define TM_METRICS_REGISTRY_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

/* Upper bounds (seconds) of the commit duration histogram's buckets; the
 * last bucket, +Inf, is implicit. */
#define TM_METRICS_COMMIT_BUCKETS 12
extern const double tm_metrics_commit_bounds[TM_METRICS_COMMIT_BUCKETS];

typedef struct tm_metrics_conn {
    char name[256];
    _Atomic uint64_t commit_buckets[TM_METRICS_COMMIT_BUCKETS + 1];
    _Atomic uint64_t commit_count;
    _Atomic uint64_t commit_ns; /* sum of the durations */
    _Atomic uint64_t convert_count;
    _Atomic uint64_t convert_ns;
    _Atomic uint64_t errors;
    /* The consumer's fetch queue at its last statistics (metrics_kafka.h);
     * -1 before the first. */
    _Atomic int64_t fetchq_bytes, fetchq_messages;
    struct tm_metrics_conn *next;
} tm_metrics_conn;

/* The connector's entry, made on first use and kept for the process's
 * life (a connector made again after a fatal consumer error keeps
 * counting). NULL when memory ran out: every recorder ignores NULL. */
tm_metrics_conn *tm_metrics_conn_get(const char *connector);

/* One sink commit() call that took NS nanoseconds. */
void tm_metrics_commit_observe(tm_metrics_conn *m, uint64_t ns);

/* One record converted in NS nanoseconds. */
void tm_metrics_convert_observe(tm_metrics_conn *m, uint64_t ns);

/* One error recorded (tm_conn_error: transient or not). */
void tm_metrics_error(tm_metrics_conn *m);

/* Monotonic nanoseconds (the host clock, services/clock.h), for the
 * durations above. */
uint64_t tm_metrics_now_ns(void);

/* One connector's figures as plain values (a snapshot, or read back from
 * its saved file). */
typedef struct tm_metrics_values {
    uint64_t commit_buckets[TM_METRICS_COMMIT_BUCKETS + 1]; /* not cumulative */
    uint64_t commit_count, commit_ns, convert_count, convert_ns, errors;
    int64_t fetchq_bytes, fetchq_messages; /* -1 unknown */
} tm_metrics_values;

void tm_metrics_snapshot(const tm_metrics_conn *m, tm_metrics_values *out);

/* The families of N connectors (NAMES[i] with VALUES[i]) in the text
 * format; a NULL VALUES[i] is a connector without figures (no sample). */
void tm_metrics_values_write(FILE *out, const char *const *names,
                             const tm_metrics_values *const *values, size_t n);

/* Frees every entry (at exit, and between unit tests). */
void tm_metrics_registry_reset(void);

#endif
