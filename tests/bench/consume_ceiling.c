/* The consume ceiling: a bare librdkafka consumer loop on the benchmark's
 * topic, doing nothing with the records but counting them, with the fetch
 * settings tidemark uses (read_committed, rd_kafka_consumer_poll, the same
 * queue sizes for a 10 000-record batch). tidemark's end-to-end rate is
 * divided by this one.
 *
 * usage: consume_ceiling BOOTSTRAP TOPIC PARTITIONS TOTAL [--spin-ns N]
 * [--wake] prints: consume_ceiling: records=N seconds=S records_per_s=R
 *
 * --spin-ns N spends N ns of CPU on each record (a consumer as slow as a
 * connector's conversion and sink); --wake runs tidemark's fetcher waker
 * (kafka/fetch_wake.h) beside the loop, as the host does. The two runs of
 * one N, with and without --wake, show what librdkafka's fetcher stall
 * costs a consumer slower than the fetcher (docs/benchmarks.md). */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kafka/fetch_wake.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set(rd_kafka_conf_t *c, const char *k, const char *v) {
    char err[512];
    if (rd_kafka_conf_set(c, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "consume_ceiling: %s=%s: %s\n", k, v, err);
        exit(2);
    }
}

int main(int argc, char **argv) {
    long spin_ns = 0;
    int wake = 0, bad = argc < 5;
    for (int i = 5; i < argc && !bad; i++) {
        if (strcmp(argv[i], "--wake") == 0)
            wake = 1;
        else if (strcmp(argv[i], "--spin-ns") == 0 && i + 1 < argc)
            spin_ns = atol(argv[++i]);
        else
            bad = 1;
    }
    if (bad) {
        fprintf(stderr, "usage: consume_ceiling BOOTSTRAP TOPIC PARTITIONS "
                        "TOTAL [--spin-ns N] [--wake]\n");
        return 2;
    }
    const char *topic = argv[2];
    int parts = atoi(argv[3]);
    long long total = atoll(argv[4]);
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    set(c, "bootstrap.servers", argv[1]);
    set(c, "group.id", "tidemark-bench-ceiling");
    set(c, "enable.auto.commit", "false");
    set(c, "isolation.level", "read_committed");
    set(c, "queued.min.messages", getenv("QMIN") ? getenv("QMIN") : "100000");
    set(c, "queued.max.messages.kbytes", "32768");
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "consume_ceiling: %s\n", err);
        return 2;
    }
    rd_kafka_poll_set_consumer(rk);
    tm_fetch_wake *waker = wake ? tm_fetch_wake_new(rk) : NULL;
    if (wake && !waker) {
        fprintf(stderr, "consume_ceiling: cannot make the waker\n");
        return 2;
    }
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new(parts);
    for (int p = 0; p < parts; p++)
        rd_kafka_topic_partition_list_add(l, topic, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    if (rd_kafka_assign(rk, l)) {
        fprintf(stderr, "consume_ceiling: assign failed\n");
        return 2;
    }
    rd_kafka_topic_partition_list_destroy(l);
    long long n = 0;
    unsigned long long bytes = 0;
    double t0 = 0, idle_since = now_s();
    while (n < total) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) {
            if (now_s() - idle_since > 30) {
                fprintf(stderr, "consume_ceiling: stalled at %lld of %lld\n", n,
                        total);
                return 1;
            }
            continue;
        }
        idle_since = now_s();
        if (!m->err) {
            if (n == 0)
                t0 = now_s(); /* from the first record: no connect time */
            n++;
            bytes += m->len;
            tm_fetch_wake_seen(waker, rd_kafka_topic_name(m->rkt),
                               m->partition);
        }
        rd_kafka_message_destroy(m);
        for (double until = spin_ns ? now_s() + (double)spin_ns / 1e9 : 0;
             spin_ns && now_s() < until;)
            ; /* the record's work */
    }
    double s = now_s() - t0;
    printf("consume_ceiling: records=%lld seconds=%.3f records_per_s=%.0f "
           "mb_per_s=%.1f spin_ns=%ld wake=%d wakeups=%lld\n",
           n, s, (double)n / s, (double)bytes / s / 1e6, spin_ns, wake,
           (long long)tm_fetch_wake_count(waker));
    tm_fetch_wake_free(waker);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return 0;
}
