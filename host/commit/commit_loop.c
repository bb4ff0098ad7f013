#include "commit/commit_loop.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit/claim.h"
#include "commit/commit_internal.h"
#include "commit/part_stop.h"
#include "kafka/consumer.h"
#include "kafka/message_view.h"
#include "kafka/partitions.h"
#include "metrics/metrics_registry.h"
#include "services/log.h"

#define POLL_MS 100

/* Opens a batch when none is: a new id, unique across hosts (the random
 * instance id) and within this one (the sequence). */
static void ensure_batch(tm_connector *c) {
    if (c->batch_open)
        return;
    snprintf(c->batch_id, sizeof c->batch_id, "%s-%" PRIu64, c->instance_id,
             ++c->seq);
    tm_bb_reset(c->bb, c->batch_id, 0);
    c->batch_open = 1;
    c->batch_abandoned = 0;
    c->batch_opened_ms = tm_now_ms();
}

static int range_of(tm_connector *c, tm_part *p) {
    ensure_batch(c);
    int r = tm_bb_range(c->bb, p->topic, p->partition, p->committed, p->epoch);
    if (r < 0)
        tm_conn_error(c, 1, "batch: out of memory");
    return r;
}

void tm_commit_extend(tm_connector *c, tm_part *p, int64_t end) {
    if (end <= p->next_expected)
        return;
    int r = range_of(c, p);
    if (r < 0)
        return;
    tm_bb_extend(c->bb, (uint32_t)r, end);
    p->next_expected = end;
}

/* Partition end: the consumer's position may be past the last record
 * (transaction markers, aborted records); an empty range carries the
 * marker there so that lag reaches 0. */
static void on_partition_end(tm_connector *c, tm_part *p, int64_t position) {
    if (position > p->high_watermark)
        p->high_watermark = position;
    tm_commit_extend(c, p, position);
}

static void on_record(tm_connector *c, tm_part *p, rd_kafka_message_t *m) {
    tm_header_view hv[TM_MAX_HEADERS];
    tm_msg_view v;
    int truncated;
    tm_kafka_message_view(m, p->topic, p->partition, hv, &v, &truncated);
    if (truncated)
        tm_conn_log(c, TM_LOG_WARN, p->topic, p->partition, c->batch_id,
                    "offset %" PRId64 ": more than %d headers, the rest are "
                    "not kept",
                    m->offset, TM_MAX_HEADERS);
    int r = range_of(c, p);
    if (r < 0)
        return;
    uint64_t t0 = tm_metrics_now_ns();
    int added = tm_bb_add(c->bb, (uint32_t)r, &v);
    tm_metrics_convert_observe(c->metrics, tm_metrics_now_ns() - t0);
    if (added == -2) {
        tm_part_stop(c, p, m->offset, tm_bb_stopped(c->bb));
        return;
    }
    if (added != 0) {
        tm_conn_error(c, 1,
                      "batch: out of memory converting %s [%" PRId32
                      "] offset %" PRId64,
                      p->topic, p->partition, m->offset);
        return;
    }
    p->next_expected = m->offset + 1;
}

static void on_error(tm_connector *c, rd_kafka_message_t *m) {
    const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "?";
    switch (m->err) {
    case RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET:
    case RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE:
        /* auto.offset.reset=error: the log moved under us (retention
         * deleted records we had not applied yet). Never a silent jump. */
        tm_conn_error(c, 1,
                      "%s [%" PRId32 "]: offset %" PRId64
                      " is no longer in the log (%s): records were deleted "
                      "before they were applied; reset with `tidemark "
                      "offsets --reset-to` once you have decided",
                      topic, m->partition, m->offset,
                      rd_kafka_message_errstr(m));
        return;
    case RD_KAFKA_RESP_ERR__FATAL: tm_consumer_fatal(c); return;
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
        /* A topic of `topics` not created yet: librdkafka keeps the
         * subscription and the group assigns it once it exists. */
        tm_conn_error(c, 0, "waiting for topic %s: %s", topic,
                      rd_kafka_message_errstr(m));
        return;
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
        tm_conn_error(c, 1, "%s: %s", topic, rd_kafka_message_errstr(m));
        return;
    default:
        tm_log(TM_LOG_WARN, c->cfg->name, "consumer: %s: %s",
               rd_kafka_err2name(m->err), rd_kafka_message_errstr(m));
    }
}

static void on_message(tm_connector *c, rd_kafka_message_t *m) {
    if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        on_error(c, m);
        return;
    }
    if (!m->rkt)
        return;
    tm_part *p = tm_conn_part(c, rd_kafka_topic_name(m->rkt), m->partition);
    /* Not ours (revoked), lost to another owner, waiting for a seek after
     * dropped records, or before what the batch already has (delivered
     * again after a seek): not taken. */
    if (!p || p->fenced || p->unclaimed || p->needs_seek ||
        c->state == TM_CONN_FAILED)
        return;
    if (p->paused) {
        p->needs_seek = 1;
        return;
    }
    /* Stopped by a change it cannot apply: the rest stays in Kafka. */
    if (tm_part_stop_refuses(c, p, m->offset))
        return;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        on_partition_end(c, p, m->offset);
        return;
    }
    if (m->offset < p->next_expected)
        return;
    if (!c->degraded_by_sink)
        tm_conn_recovered(c, "records flow");
    on_record(c, p, m);
}

/* Re-reads what was dropped: seek each marked partition back to where the
 * next batch must start. rd_kafka_seek_partitions() waits for the seek, and
 * librdkafka discards what was fetched before it. */
static void apply_resumes(tm_connector *c) {
    rd_kafka_topic_partition_list_t *l = NULL;
    for (size_t i = 0; i < c->nparts; i++) {
        tm_part *p = &c->parts[i];
        if (!p->needs_resume)
            continue;
        if (!l && !(l = rd_kafka_topic_partition_list_new(4)))
            return;
        rd_kafka_topic_partition_list_add(l, p->topic, p->partition);
        p->needs_resume = 0;
    }
    if (!l)
        return;
    rd_kafka_resp_err_t err = rd_kafka_resume_partitions(c->rk, l);
    if (err)
        tm_log(TM_LOG_WARN, c->cfg->name, "resume after claim: %s",
               rd_kafka_err2str(err));
    rd_kafka_topic_partition_list_destroy(l);
}

static void apply_seeks(tm_connector *c) {
    rd_kafka_topic_partition_list_t *l = NULL;
    for (size_t i = 0; i < c->nparts; i++) {
        tm_part *p = &c->parts[i];
        if (!p->needs_seek || p->fenced || p->paused || p->unclaimed ||
            !tm_part_stop_may_seek(c, p))
            continue;
        if (!l && !(l = rd_kafka_topic_partition_list_new(4)))
            return;
        rd_kafka_topic_partition_list_add(l, p->topic, p->partition)->offset =
            p->next_expected;
    }
    if (!l)
        return;
    rd_kafka_error_t *err = rd_kafka_seek_partitions(c->rk, l, 10000);
    if (err) {
        tm_log(TM_LOG_WARN, c->cfg->name, "seek: %s; trying again",
               rd_kafka_error_string(err));
        rd_kafka_error_destroy(err);
    } else {
        for (int i = 0; i < l->cnt; i++) {
            tm_part *p =
                tm_conn_part(c, l->elems[i].topic, l->elems[i].partition);
            if (!p)
                continue;
            if (l->elems[i].err)
                tm_log(TM_LOG_WARN, c->cfg->name,
                       "seek %s [%" PRId32 "] to %" PRId64 ": %s", p->topic,
                       p->partition, p->next_expected,
                       rd_kafka_err2str(l->elems[i].err));
            else
                p->needs_seek = 0;
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
}

static int batch_due(tm_connector *c) {
    if (!c->batch_open)
        return 0;
    const tm_connector_config *cfg = c->cfg;
    int64_t max_records = c->batch_cap ? c->batch_cap : cfg->batch.max_records;
    return (int64_t)tm_bb_messages(c->bb) >= max_records ||
           (int64_t)tm_bb_bytes(c->bb) >= cfg->batch.max_bytes ||
           tm_now_ms() - c->batch_opened_ms >= cfg->batch.max_wait_ms;
}

void tm_commit_serve(tm_connector *c, int64_t ms) {
    int64_t until = tm_now_ms() + ms;
    for (;;) {
        int64_t left = until - tm_now_ms();
        if (left <= 0 || c->batch_abandoned)
            return;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(
            c->rk, (int)(left < POLL_MS ? left : POLL_MS));
        if (m) {
            if (!m->err && m->rkt) {
                tm_part *p =
                    tm_conn_part(c, rd_kafka_topic_name(m->rkt), m->partition);
                if (p)
                    p->needs_seek = 1;
            } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                on_error(c, m);
            }
            rd_kafka_message_destroy(m);
        }
        tm_conn_status_tick(c, 0);
    }
}

int64_t tm_stop_deadline_ms(tm_connector *c) {
    int64_t at = atomic_load(&c->stop_seen_ms);
    return (at ? at : tm_now_ms()) + TM_STOP_GRACE_MS;
}

int64_t tm_fenced_bound_ms(tm_connector *c) {
    /* A partition that really moved is revoked within a rebalance, and a
     * member that misses its heartbeats is out after one session timeout:
     * twice that without a revoke means nobody else has it. Asked of the
     * consumer once: its configuration does not change. */
    if (c->fenced_bound_ms)
        return c->fenced_bound_ms;
    char v[32];
    size_t size = sizeof v;
    int64_t session_ms = 45000; /* librdkafka's default */
    if (c->rk && rd_kafka_conf_get(rd_kafka_conf(c->rk), "session.timeout.ms",
                                   v, &size) == RD_KAFKA_CONF_OK)
        session_ms = strtoll(v, NULL, 10);
    c->fenced_bound_ms = 2 * (session_ms > 0 ? session_ms : 45000);
    return c->fenced_bound_ms;
}

void tm_commit_loop_run(tm_connector *c) {
    while (!atomic_load(c->stop) && c->state != TM_CONN_FAILED &&
           !c->consumer_fatal) {
        int timeout = POLL_MS;
        if (c->batch_open) {
            int64_t left =
                c->batch_opened_ms + c->cfg->batch.max_wait_ms - tm_now_ms();
            timeout = left <= 0 ? 0 : left < POLL_MS ? (int)left : POLL_MS;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, timeout);
        if (m) {
            on_message(c, m);
            rd_kafka_message_destroy(m);
        }
        if (c->state == TM_CONN_FAILED)
            break;
        if (c->batch_open && c->batch_abandoned)
            tm_commit_drop_batch(c, "partitions revoked");
        if (batch_due(c))
            tm_commit_batch(c, 0);
        if (c->any_fenced &&
            tm_claim_fenced_again(c, tm_fenced_bound_ms(c)) != 0)
            break;
        if (tm_claim_pending(c) != 0)
            break;
        apply_resumes(c);
        apply_seeks(c);
        tm_conn_status_tick(c, 0);
    }
    /* SIGTERM: finish the batch in flight if it can be done promptly,
     * else abandon it (safe: the markers did not move). A consumer that
     * failed fatally drops it: the next consumer reads it again. */
    if (c->batch_open && c->state != TM_CONN_FAILED && !c->consumer_fatal)
        tm_commit_batch(c, tm_stop_deadline_ms(c));
    if (c->batch_open)
        tm_commit_drop_batch(c, c->consumer_fatal ? "the consumer failed"
                                                  : "stopping");
}

void tm_commit_on_revoke(tm_connector *c,
                         const rd_kafka_topic_partition_list_t *revoked,
                         int lost) {
    /* The counts of the last commits, before the partitions are gone. */
    if (!lost)
        tm_conn_refresh_markers(c);
    int hit = lost;
    if (c->batch_open && !hit) {
        const tm_batch *b = tm_bb_batch(c->bb);
        for (size_t i = 0; b && i < b->nranges && !hit; i++) {
            const tm_range *r = TM_CELEM(tm_range, b->ranges, i);
            for (int j = 0; j < revoked->cnt && !hit; j++)
                hit = revoked->elems[j].partition == r->partition &&
                      strcmp(revoked->elems[j].topic, r->topic) == 0;
        }
    }
    if (c->batch_open && hit) {
        /* Inside tm_commit_batch's retries the batch is in use: flag it,
         * the retry loop drops it as soon as the callback returns. */
        c->batch_abandoned = 1;
        tm_conn_log(c, TM_LOG_WARN, NULL, -1, c->batch_id,
                    "batch abandoned: partitions %s",
                    lost ? "lost" : "revoked");
    }
    /* Held foreign partitions (commit/claim.c) the group takes away: no
     * longer a reason to stay DEGRADED. */
    for (int j = 0; j < revoked->cnt && c->foreign_held > 0; j++)
        if (!tm_kafka_topic_wanted(c->cfg, revoked->elems[j].topic))
            c->foreign_held--;
    for (int j = 0; j < revoked->cnt; j++) {
        tm_part *p = tm_conn_part(c, revoked->elems[j].topic,
                                  revoked->elems[j].partition);
        if (!p)
            continue;
        tm_conn_log(c, TM_LOG_INFO, p->topic, p->partition, NULL,
                    "%s at next_offset=%" PRId64, lost ? "lost" : "revoked",
                    p->committed);
        free(p->topic);
        *p = c->parts[--c->nparts];
    }
    c->markers_dirty = 1;
}
