#include "kafka/partition_reader.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/kafka_conf.h"
#include "services/clock.h"

/* How long a read may go without any progress before it gives up. */
#define STALL_MS 15000

int tm_kafka_read_range(const tm_connector_config *cfg, const char *topic,
                        int32_t partition, int64_t from, int64_t to,
                        tm_record_fn fn, void *user, char *errstr,
                        size_t errsize) {
    if (from >= to)
        return 0;
    rd_kafka_conf_t *conf =
        tm_kafka_conf_new(cfg, TM_KAFKA_CONSUMER, errstr, errsize);
    if (!conf)
        return -1;
    char why[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof why);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        snprintf(errstr, errsize, "cannot create a consumer: %s", why);
        return -1;
    }
    rd_kafka_poll_set_consumer(rk);
    int rc = -1;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    if (!l) {
        snprintf(errstr, errsize, "out of memory");
        goto out;
    }
    rd_kafka_topic_partition_list_add(l, topic, partition)->offset = from;
    rd_kafka_resp_err_t err = rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (err) {
        snprintf(errstr, errsize, "%s [%" PRId32 "]: assign: %s", topic,
                 partition, rd_kafka_err2str(err));
        goto out;
    }
    int idle = 0;
    for (;;) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 500);
        if (!m) {
            if ((idle += 500) >= STALL_MS) {
                snprintf(errstr, errsize,
                         "%s [%" PRId32 "]: no progress for %d ms reading "
                         "[%" PRId64 ", %" PRId64 ")",
                         topic, partition, STALL_MS, from, to);
                goto out;
            }
            continue;
        }
        idle = 0;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            int64_t pos = m->offset;
            rd_kafka_message_destroy(m);
            if (pos >= to) {
                rc = 0;
                goto out;
            }
            continue;
        }
        if (m->err) {
            snprintf(errstr, errsize, "%s [%" PRId32 "]: %s", topic, partition,
                     rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            goto out;
        }
        if (m->offset >= to) {
            rd_kafka_message_destroy(m);
            rc = 0;
            goto out;
        }
        int r = m->offset >= from ? fn(user, m) : 0;
        rd_kafka_message_destroy(m);
        if (r != 0) {
            rc = r;
            goto out;
        }
    }
out:
    rd_kafka_destroy(rk);
    return rc;
}

/* A consumer of cfg's cluster assigned to want[i] at their offsets. */
static rd_kafka_t *assigned_consumer(const tm_connector_config *cfg,
                                     const tm_read_at *want, size_t n,
                                     char *errstr, size_t errsize) {
    rd_kafka_conf_t *conf =
        tm_kafka_conf_new(cfg, TM_KAFKA_CONSUMER, errstr, errsize);
    if (!conf)
        return NULL;
    char why[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof why);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        snprintf(errstr, errsize, "cannot create a consumer: %s", why);
        return NULL;
    }
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new((int)n);
    if (!l) {
        snprintf(errstr, errsize, "out of memory");
        rd_kafka_destroy(rk);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(l, want[i].topic, want[i].partition)
            ->offset = want[i].offset;
    rd_kafka_resp_err_t err = rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (err) {
        snprintf(errstr, errsize, "assign: %s", rd_kafka_err2str(err));
        rd_kafka_destroy(rk);
        return NULL;
    }
    return rk;
}

/* Best effort: a partition left fetching only costs messages skipped. */
static void pause_one(rd_kafka_t *rk, const tm_read_at *w) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    if (!l)
        return;
    rd_kafka_topic_partition_list_add(l, w->topic, w->partition);
    rd_kafka_pause_partitions(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
}

static size_t want_index(const tm_read_at *want, size_t n, const char *topic,
                         int32_t partition) {
    for (size_t i = 0; i < n; i++)
        if (want[i].partition == partition && strcmp(want[i].topic, topic) == 0)
            return i;
    return n;
}

int tm_kafka_read_each(const tm_connector_config *cfg, const tm_read_at *want,
                       size_t n, int64_t timeout_ms, const atomic_int *stop,
                       tm_read_each_fn fn, void *user, char *errstr,
                       size_t errsize) {
    if (n == 0)
        return 0;
    unsigned char *done = calloc(n, 1);
    if (!done) {
        snprintf(errstr, errsize, "out of memory");
        return -1;
    }
    rd_kafka_t *rk = assigned_consumer(cfg, want, n, errstr, errsize);
    if (!rk) {
        free(done);
        return -1;
    }
    size_t left = n;
    int rc = -1;
    errstr[0] = '\0';
    int64_t t0 = tm_clock_mono_ms();
    while (left > 0) {
        int64_t waited = tm_clock_mono_ms() - t0;
        if (stop && atomic_load(stop)) {
            rc = -2;
            snprintf(errstr, errsize, "stopping");
            goto out;
        }
        if (waited >= timeout_ms) {
            size_t i = 0;
            while (done[i])
                i++;
            /* keeps the last broker error when there was one */
            if (!errstr[0])
                snprintf(errstr, errsize,
                         "%s [%" PRId32 "]: no record read at offset %" PRId64
                         " in %" PRId64 " ms (%zu of %zu partition(s) "
                         "unanswered)",
                         want[i].topic, want[i].partition, want[i].offset,
                         timeout_ms, left, n);
            goto out;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        if (!m)
            continue;
        const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "";
        size_t i = want_index(want, n, topic, m->partition);
        if (i == n || done[i]) {
            rd_kafka_message_destroy(m);
            continue;
        }
        int missing = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF ||
                      m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET ||
                      m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE;
        if (m->err && !missing) {
            snprintf(errstr, errsize, "%s [%" PRId32 "]: %s", topic,
                     m->partition, rd_kafka_message_errstr(m));
        } else {
            tm_read_record r;
            if (!missing) {
                rd_kafka_timestamp_type_t tt;
                r.offset = m->offset;
                r.timestamp_ms = rd_kafka_message_timestamp(m, &tt);
                r.key = m->key;
                r.key_len = m->key_len;
                r.value = m->payload;
                r.value_len = m->len;
            }
            fn(user, i, missing ? NULL : &r);
            done[i] = 1;
            left--;
            pause_one(rk, &want[i]); /* the rest of it is not wanted */
        }
        rd_kafka_message_destroy(m);
    }
    rc = 0;
out:
    rd_kafka_destroy(rk);
    free(done);
    return rc;
}
