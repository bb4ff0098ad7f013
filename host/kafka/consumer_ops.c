/* The group consumer's operations in the host's own types
 * (kafka/consumer_ops.h). */
#include "kafka/consumer_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/message_view.h"
#include "kafka/partitions.h"

_Static_assert(TM_KAFKA_OFFSET_END == RD_KAFKA_OFFSET_END,
               "TM_KAFKA_OFFSET_END is librdkafka's log end");

tm_kafka_tp *tm_kafka_tps_of_list(const rd_kafka_topic_partition_list_t *l,
                                  size_t *n) {
    *n = (size_t)(l->cnt > 0 ? l->cnt : 0);
    if (*n == 0)
        return NULL;
    tm_kafka_tp *v = calloc(*n, sizeof *v);
    if (!v) {
        *n = 0;
        return NULL;
    }
    for (size_t i = 0; i < *n; i++) {
        v[i].topic = l->elems[i].topic;
        v[i].partition = l->elems[i].partition;
        v[i].offset = l->elems[i].offset;
    }
    return v;
}

void tm_kafka_tps_free(tm_kafka_tp *tps, size_t n) {
    for (size_t i = 0; tps && i < n; i++)
        free((char *)tps[i].topic);
    free(tps);
}

/* An array of l's partitions with their own topics; NULL with errstr. */
static tm_kafka_tp *owned_tps(const rd_kafka_topic_partition_list_t *l,
                              size_t *n, char *errstr, size_t errsize) {
    size_t cnt = (size_t)(l->cnt > 0 ? l->cnt : 0);
    tm_kafka_tp *v = calloc(cnt ? cnt : 1, sizeof *v);
    for (size_t i = 0; v && i < cnt; i++) {
        v[i].partition = l->elems[i].partition;
        v[i].offset = l->elems[i].offset;
        v[i].topic = strdup(l->elems[i].topic);
        if (!v[i].topic) {
            tm_kafka_tps_free(v, i);
            v = NULL;
        }
    }
    if (!v) {
        snprintf(errstr, errsize, "out of memory");
        return NULL;
    }
    *n = cnt;
    return v;
}

int tm_kafka_assignment(rd_kafka_t *rk, tm_kafka_tp **out, size_t *n,
                        char *errstr, size_t errsize) {
    *out = NULL;
    *n = 0;
    rd_kafka_topic_partition_list_t *l = NULL;
    rd_kafka_resp_err_t err = rd_kafka_assignment(rk, &l);
    if (err || !l) {
        snprintf(errstr, errsize, "%s",
                 err ? rd_kafka_err2str(err) : "no assignment list");
        if (l)
            rd_kafka_topic_partition_list_destroy(l);
        return -1;
    }
    *out = owned_tps(l, n, errstr, errsize);
    rd_kafka_topic_partition_list_destroy(l);
    return *out ? 0 : -1;
}

int tm_kafka_cached_high(rd_kafka_t *rk, const char *topic, int32_t partition,
                         int64_t *high) {
    int64_t lo = -1, hi = -1;
    if (rd_kafka_get_watermark_offsets(rk, topic, partition, &lo, &hi) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        hi < 0)
        return -1;
    *high = hi;
    return 0;
}

int tm_kafka_partition_tps(rd_kafka_t *rk, const tm_connector_config *cfg,
                           int timeout_ms, tm_kafka_tp **out, size_t *n,
                           char *errstr, size_t errsize) {
    *out = NULL;
    *n = 0;
    rd_kafka_topic_partition_list_t *all = NULL;
    if (tm_kafka_list_partitions(rk, cfg, timeout_ms, &all, errstr, errsize) !=
        0)
        return -1;
    *out = owned_tps(all, n, errstr, errsize);
    rd_kafka_topic_partition_list_destroy(all);
    return *out ? 0 : -1;
}

/* A librdkafka list of tps (with their offsets); NULL with errstr when out
 * of memory. */
static rd_kafka_topic_partition_list_t *
list_of(const tm_kafka_tp *tps, size_t n, char *errstr, size_t errsize) {
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new((int)(n ? n : 1));
    if (!l) {
        snprintf(errstr, errsize, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(l, tps[i].topic, tps[i].partition)
            ->offset = tps[i].offset;
    return l;
}

int tm_kafka_set_paused(rd_kafka_t *rk, const tm_kafka_tp *tps, size_t n,
                        int pause, char *errstr, size_t errsize) {
    if (n == 0)
        return 0;
    rd_kafka_topic_partition_list_t *l = list_of(tps, n, errstr, errsize);
    if (!l)
        return -1;
    rd_kafka_resp_err_t err = pause ? rd_kafka_pause_partitions(rk, l)
                                    : rd_kafka_resume_partitions(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (err) {
        snprintf(errstr, errsize, "%s", rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}

int tm_kafka_seek(rd_kafka_t *rk, tm_kafka_tp *tps, size_t n, int timeout_ms,
                  char *errstr, size_t errsize) {
    if (n == 0)
        return 0;
    rd_kafka_topic_partition_list_t *l = list_of(tps, n, errstr, errsize);
    if (!l)
        return -1;
    rd_kafka_error_t *err = rd_kafka_seek_partitions(rk, l, timeout_ms);
    int rc = 0;
    if (err) {
        snprintf(errstr, errsize, "%s", rd_kafka_error_string(err));
        rd_kafka_error_destroy(err);
        rc = -1;
    } else {
        for (size_t i = 0; i < n; i++)
            tps[i].err =
                l->elems[i].err ? rd_kafka_err2str(l->elems[i].err) : NULL;
    }
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

int tm_kafka_commit_offsets(rd_kafka_t *rk, const tm_kafka_tp *tps, size_t n,
                            char *errstr, size_t errsize) {
    if (n == 0)
        return 0;
    rd_kafka_topic_partition_list_t *l = list_of(tps, n, errstr, errsize);
    if (!l)
        return -1;
    rd_kafka_resp_err_t err = rd_kafka_commit(rk, l, 1);
    rd_kafka_topic_partition_list_destroy(l);
    if (err) {
        snprintf(errstr, errsize, "%s", rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}

/* The consumer's setting NAME in ms as librdkafka took it (the user's
 * $.kafka.properties, else its default), DEF when it cannot be read. */
static int64_t conf_ms(rd_kafka_t *rk, const char *name, int64_t def) {
    char v[32];
    size_t size = sizeof v;
    int64_t ms = 0;
    if (rk && rd_kafka_conf_get(rd_kafka_conf(rk), name, v, &size) ==
                  RD_KAFKA_CONF_OK)
        ms = strtoll(v, NULL, 10);
    return ms > 0 ? ms : def;
}

int64_t tm_kafka_consumer_session_ms(rd_kafka_t *rk) {
    return conf_ms(rk, "session.timeout.ms", 45000); /* librdkafka's default */
}

int64_t tm_kafka_consumer_max_poll_ms(rd_kafka_t *rk) {
    return conf_ms(rk, "max.poll.interval.ms", 300000); /* its default */
}

static tm_poll_error error_of(rd_kafka_resp_err_t err) {
    switch (err) {
    case RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET:
    case RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE: return TM_POLL_ERR_OFFSET_GONE;
    case RD_KAFKA_RESP_ERR__FATAL: return TM_POLL_ERR_FATAL;
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION: return TM_POLL_ERR_NO_TOPIC;
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED: return TM_POLL_ERR_AUTH;
    default: return TM_POLL_ERR_OTHER;
    }
}

tm_polled_kind tm_kafka_poll(rd_kafka_t *rk, int timeout_ms, tm_polled *out) {
    memset(out, 0, sizeof *out);
    rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, timeout_ms);
    if (!m)
        return out->kind = TM_POLLED_NOTHING;
    out->msg = m;
    out->topic = m->rkt ? rd_kafka_topic_name(m->rkt) : NULL;
    out->partition = m->partition;
    out->offset = m->offset;
    if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        out->error = error_of(m->err);
        out->errname = rd_kafka_err2name(m->err);
        out->errstr = rd_kafka_message_errstr(m);
        if (!out->topic)
            out->topic = "?";
        return out->kind = TM_POLLED_ERROR;
    }
    if (!out->topic)
        return out->kind = TM_POLLED_NOTHING;
    return out->kind = m->err ? TM_POLLED_END : TM_POLLED_RECORD;
}

void tm_kafka_polled_view(const tm_polled *p, tm_header_view *hv,
                          tm_msg_view *out, int *truncated) {
    tm_kafka_message_view(p->msg, p->topic, p->partition, hv, out, truncated);
}

void tm_kafka_polled_release(tm_polled *p) {
    if (p->msg)
        rd_kafka_message_destroy(p->msg);
    memset(p, 0, sizeof *p);
}

void tm_kafka_wake(rd_kafka_t *rk) {
    if (rk)
        rd_kafka_yield(rk);
}
