/* The consume ceiling: a bare librdkafka consumer loop on the benchmark's
 * topic, doing nothing with the records but counting them, with the fetch
 * settings tidemark uses (read_committed, rd_kafka_consumer_poll, the same
 * queue sizes for a 10 000-record batch). tidemark's end-to-end rate is
 * divided by this one.
 *
 * usage: consume_ceiling BOOTSTRAP TOPIC PARTITIONS TOTAL
 * prints: consume_ceiling: records=N seconds=S records_per_s=R */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    if (argc != 5) {
        fprintf(stderr,
                "usage: consume_ceiling BOOTSTRAP TOPIC PARTITIONS TOTAL\n");
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
        }
        rd_kafka_message_destroy(m);
    }
    double s = now_s() - t0;
    printf("consume_ceiling: records=%lld seconds=%.3f records_per_s=%.0f "
           "mb_per_s=%.1f\n",
           n, s, (double)n / s, (double)bytes / s / 1e6);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return 0;
}
