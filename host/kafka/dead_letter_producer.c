#include "kafka/dead_letter_producer.h"

#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/kafka_conf.h"
#include "services/fault.h"
#include "services/redact.h"

/* Where each dead letter of the batch being delivered is: its progress
 * across the batch's attempts. */
enum { DL_TO_SEND, DL_ON_WAY, DL_CONFIRMED };

struct tm_dead_letter_producer {
    const tm_connector_config *cfg;
    rd_kafka_t *rk;
    /* The batch being delivered (batch_id, NULL before the first) and the
     * state of each of its dead letters, written by the delivery report
     * callback (on this thread, inside rd_kafka_flush/poll). A message's
     * opaque is base + 1 + its dead letter's index: base grows past every
     * batch forgotten, so a late report of one is never taken for the
     * next batch's. */
    char *batch_id;
    unsigned char *state;
    size_t nstate;
    uintptr_t base;
    /* Failed deliveries of the current attempt. */
    size_t failed;
    char first_error[512];
    int discarding; /* inside discard(): its purges are no failure */
};

static void delivery_cb(rd_kafka_t *rk, const rd_kafka_message_t *m,
                        void *opaque) {
    (void)rk;
    tm_dead_letter_producer *q = opaque;
    uintptr_t i = (uintptr_t)m->_private - q->base - 1;
    if (i >= q->nstate || q->state[i] != DL_ON_WAY)
        return; /* not of the batch being delivered */
    if (!m->err) {
        q->state[i] = DL_CONFIRMED;
        return;
    }
    q->state[i] = DL_TO_SEND; /* produced again by the next attempt */
    if (q->discarding && (m->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE ||
                          m->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT))
        return; /* discarded by us: no send waits for them */
    /* librdkafka purges by itself too: on a fatal error of the producer,
     * what was queued is reported purged */
    if (q->failed++ == 0)
        snprintf(q->first_error, sizeof q->first_error,
                 "delivery to %s failed: %s", q->cfg->dead_letters.topic,
                 rd_kafka_err2str(m->err));
}

/* A new librdkafka producer for q: 0, or -1 with errstr. */
static int make_producer(tm_dead_letter_producer *q, char *errstr,
                         size_t errsize) {
    rd_kafka_conf_t *conf =
        tm_kafka_conf_new(q->cfg, TM_KAFKA_PRODUCER, errstr, errsize);
    if (!conf)
        return -1;
    rd_kafka_conf_set_opaque(conf, q);
    rd_kafka_conf_set_dr_msg_cb(conf, delivery_cb);
    char why[512];
    q->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof why);
    if (!q->rk) {
        rd_kafka_conf_destroy(conf);
        snprintf(errstr, errsize, "cannot create the dead-letter producer: %s",
                 why);
        return -1;
    }
    return 0;
}

tm_dead_letter_producer *tm_dlq_new(const tm_connector_config *cfg,
                                    char *errstr, size_t errsize) {
    tm_dead_letter_producer *q = calloc(1, sizeof *q);
    if (!q) {
        snprintf(errstr, errsize, "out of memory");
        return NULL;
    }
    q->cfg = cfg;
    if (make_producer(q, errstr, errsize) != 0) {
        free(q);
        return NULL;
    }
    return q;
}

int tm_dlq_fatal(tm_dead_letter_producer *q, char *errstr, size_t errsize) {
    if (!q->rk)
        return 0; /* none to fail: tm_dlq_send says so */
    char why[512];
    rd_kafka_resp_err_t err = rd_kafka_fatal_error(q->rk, why, sizeof why);
    if (!err)
        return 0;
    snprintf(errstr, errsize, "%s: %s", rd_kafka_err2name(err), why);
    return 1;
}

/* Every value redacted (services/redact.h): a header leaves the process,
 * and a sink's detail may quote a secret (a column or table name given as
 * ${env:...}, in a database's error). */
static int add_header(rd_kafka_headers_t *h, const char *name,
                      const char *value) {
    char *clean = tm_redact_dup(value, TM_REDACT_MAYBE_CUT);
    if (!clean)
        return -1;
    int rc = rd_kafka_header_add(h, name, -1, clean, -1) ==
                     RD_KAFKA_RESP_ERR_NO_ERROR
                 ? 0
                 : -1;
    free(clean);
    return rc;
}

/* Kafka Connect's header names, so that tools built for its dead-letter
 * queues read ours; the reason's name in a header of our own. */
rd_kafka_headers_t *tm_dlq_headers(const char *connector, const tm_batch *b,
                                   const tm_dead_letter *d) {
    const tm_range *r = TM_CELEM(tm_range, b->ranges, d->range);
    char part[16], off[32];
    snprintf(part, sizeof part, "%" PRId32, r->partition);
    snprintf(off, sizeof off, "%" PRId64, d->offset);
    rd_kafka_headers_t *h = rd_kafka_headers_new(8);
    if (!h)
        return NULL;
    if (add_header(h, "__connect.errors.topic", r->topic) ||
        add_header(h, "__connect.errors.partition", part) ||
        add_header(h, "__connect.errors.offset", off) ||
        add_header(h, "__connect.errors.connector.name", connector) ||
        add_header(h, "__connect.errors.stage", "VALUE_CONVERTER") ||
        add_header(h, "__connect.errors.exception.message",
                   d->detail ? d->detail : "") ||
        add_header(h, "tidemark.reason", tm_dl_reason_name(d->reason)) ||
        add_header(h, "tidemark.batch_id", b->batch_id)) {
        rd_kafka_headers_destroy(h);
        return NULL;
    }
    return h;
}

/* Each wait of tm_dlq_send at most: a stop asked meanwhile is seen within
 * it (left_ms is asked again). */
#define SLICE_MS 100

static int slice_of(int64_t left) {
    return left <= 0 ? 0 : left < SLICE_MS ? (int)left : SLICE_MS;
}

/* Produces dead letter I of B, waiting for room in the producer's queue while
 * left_ms(ctx) leaves time. 0, or -1 with errstr. */
static int produce_one(tm_dead_letter_producer *q, const tm_batch *b, size_t i,
                       int64_t (*left_ms)(void *ctx), void *ctx, char *errstr,
                       size_t errsize) {
    const tm_dead_letter *d = TM_CELEM(tm_dead_letter, b->dead_letters, i);
    rd_kafka_headers_t *h = tm_dlq_headers(q->cfg->name, b, d);
    if (h &&
        add_header(h, TM_DLQ_GROUP_HEADER,
                   q->cfg->kafka.group_id ? q->cfg->kafka.group_id : "") != 0) {
        rd_kafka_headers_destroy(h);
        h = NULL;
    }
    if (!h) {
        snprintf(errstr, errsize, "out of memory");
        return -1;
    }
    for (;;) {
        rd_kafka_resp_err_t err = rd_kafka_producev(
            q->rk, RD_KAFKA_V_TOPIC(q->cfg->dead_letters.topic),
            RD_KAFKA_V_KEY((void *)d->key, d->key_len),
            RD_KAFKA_V_VALUE((void *)d->value, d->value_len),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(h),
            RD_KAFKA_V_OPAQUE((void *)(q->base + 1 + i)), RD_KAFKA_V_END);
        if (!err)
            return 0;
        int64_t left = err == RD_KAFKA_RESP_ERR__QUEUE_FULL ? left_ms(ctx) : 0;
        if (left <= 0) {
            rd_kafka_headers_destroy(h); /* owned by us on failure */
            snprintf(errstr, errsize, "cannot produce to %s: %s%s",
                     q->cfg->dead_letters.topic, rd_kafka_err2str(err),
                     err == RD_KAFKA_RESP_ERR__QUEUE_FULL
                         ? " (no room before the wait ended)"
                         : "");
            return -1;
        }
        rd_kafka_poll(q->rk, slice_of(left)); /* make room: serve reports */
    }
}

/* What is still queued or in flight goes, without waiting: its batch is
 * given up (not committed: it is only once all its dead letters are
 * confirmed), and whoever reads it again from the markers produces them
 * again. Left queued, they would go on to the topic behind that next
 * batch's own. */
static void discard(tm_dead_letter_producer *q) {
    q->discarding = 1;
    rd_kafka_purge(q->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_poll(q->rk, 0); /* their reports, ignored */
    q->discarding = 0;
}

/* How many dead letters of the batch are confirmed, and on their way. */
static void count(const tm_dead_letter_producer *q, size_t *confirmed,
                  size_t *on_way) {
    *confirmed = *on_way = 0;
    for (size_t i = 0; i < q->nstate; i++) {
        *confirmed += q->state[i] == DL_CONFIRMED;
        *on_way += q->state[i] == DL_ON_WAY;
    }
}

void tm_dlq_forget(tm_dead_letter_producer *q) {
    size_t confirmed, on_way;
    count(q, &confirmed, &on_way);
    /* A purge waits on librdkafka's threads: not for a batch committed */
    if (q->rk && on_way)
        discard(q);
    q->base += q->nstate + 1;
    free(q->state);
    free(q->batch_id);
    q->state = NULL;
    q->batch_id = NULL;
    q->nstate = 0;
}

/* The progress of B's dead letters: kept from the last attempt when it
 * was B's, else started (the last batch forgotten). 0, or -1 when memory
 * ran out. */
static int progress_of(tm_dead_letter_producer *q, const tm_batch *b) {
    if (q->batch_id && strcmp(q->batch_id, b->batch_id) == 0 &&
        q->nstate == b->ndead_letters)
        return 0;
    tm_dlq_forget(q);
    q->state = calloc(b->ndead_letters ? b->ndead_letters : 1, 1);
    q->batch_id = strdup(b->batch_id);
    if (!q->state || !q->batch_id) {
        tm_dlq_forget(q);
        return -1;
    }
    q->nstate = b->ndead_letters;
    return 0;
}

int tm_dlq_send(tm_dead_letter_producer *q, const tm_batch *b,
                int (*sent)(void *ctx, const tm_range *r, int64_t offset),
                int64_t (*left_ms)(void *ctx), void *ctx, char *errstr,
                size_t errsize) {
    q->failed = 0;
    q->first_error[0] = '\0';
    if (!q->rk) {
        snprintf(errstr, errsize,
                 "no dead-letter producer (it could not be "
                 "made again)");
        return -1;
    }
    /* The failure point of a fatal error (tests): as librdkafka raises one
     * by itself, its queue purged and every later produce refused. */
    if (tm_fault_fail("dlq.fatal"))
        rd_kafka_test_fatal_error(
            q->rk, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
            "injected at the failure point dlq.fatal");
    if (progress_of(q, b) != 0) {
        snprintf(errstr, errsize, "out of memory");
        return -1;
    }
    /* Those an earlier attempt left on their way are waited for, not
     * produced again: produced again, a topic slower than one attempt's
     * wait would get them again at each attempt, never all confirmed. */
    size_t produced = 0;
    for (size_t i = 0; i < b->ndead_letters; i++) {
        const tm_dead_letter *d = TM_CELEM(tm_dead_letter, b->dead_letters, i);
        if (sent && d->range < b->nranges &&
            sent(ctx, TM_CELEM(tm_range, b->ranges, d->range), d->offset)) {
            q->state[i] = DL_CONFIRMED;
            continue;
        }
        produced++;
        if (q->state[i] != DL_TO_SEND)
            continue;
        q->state[i] = DL_ON_WAY;
        if (produce_one(q, b, i, left_ms, ctx, errstr, errsize) != 0) {
            q->state[i] = DL_TO_SEND;
            return -1;
        }
    }
    /* At least one flush, even past the deadline: the deliveries may be
     * confirmed already. What is still on its way when the wait ends stays
     * on its way: the next attempt waits for it. */
    size_t confirmed, on_way;
    for (;;) {
        int64_t left = left_ms(ctx);
        rd_kafka_flush(q->rk, slice_of(left));
        count(q, &confirmed, &on_way);
        if (on_way == 0)
            break;
        if (left <= 0) {
            snprintf(errstr, errsize,
                     "%zu dead letter(s) produced to %s, %zu confirmed when "
                     "the wait ended (%zu still on their way)",
                     produced, q->cfg->dead_letters.topic,
                     confirmed - (b->ndead_letters - produced), on_way);
            return -1;
        }
    }
    /* Delivered means confirmed, each of them: a flush that found the
     * queue empty says nothing of how it emptied. */
    if (confirmed != b->ndead_letters) {
        size_t missing = b->ndead_letters - confirmed;
        snprintf(errstr, errsize, "%zu of %zu dead letter(s) not delivered: %s",
                 missing, produced,
                 q->first_error[0] ? q->first_error
                                   : "not confirmed by the topic");
        return -1;
    }
    return 0;
}

/* Anything still queued is of a batch not committed: not waited for (a
 * stop does not wait for a slow topic here). What was on its way is
 * produced again by the next attempt, through the next producer. */
static void destroy_producer(tm_dead_letter_producer *q) {
    discard(q);
    rd_kafka_destroy(q->rk);
    q->rk = NULL;
}

int tm_dlq_renew(tm_dead_letter_producer *q, char *errstr, size_t errsize) {
    destroy_producer(q);
    return make_producer(q, errstr, errsize);
}

void tm_dlq_free(tm_dead_letter_producer *q) {
    if (!q)
        return;
    tm_dlq_forget(q);
    if (q->rk)
        destroy_producer(q);
    free(q);
}
