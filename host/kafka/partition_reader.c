#include "kafka/partition_reader.h"

#include <inttypes.h>
#include <stdio.h>

#include "kafka/kafka_conf.h"

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
