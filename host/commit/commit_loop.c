#include "commit/commit_loop.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit/claim.h"
#include "commit/commit_internal.h"
#include "commit/part_stop.h"
#include "kafka/consumer.h"
#include "kafka/consumer_ops.h"
#include "kafka/partitions.h"
#include "metrics/metrics_registry.h"
#include "runtime/connector.h"
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

static void on_record(tm_connector *c, tm_part *p, const tm_polled *m) {
    tm_header_view hv[TM_MAX_HEADERS];
    tm_msg_view v;
    int truncated;
    tm_kafka_polled_view(m, hv, &v, &truncated);
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

static void on_error(tm_connector *c, const tm_polled *m) {
    const char *topic = m->topic;
    switch (m->error) {
    case TM_POLL_ERR_OFFSET_GONE:
        /* auto.offset.reset=error: the log moved under us (retention
         * deleted records we had not applied yet). Never a silent jump. */
        tm_conn_error(c, 1,
                      "%s [%" PRId32 "]: offset %" PRId64
                      " is no longer in the log (%s): records were deleted "
                      "before they were applied; reset with `tidemark "
                      "offsets --reset-to` once you have decided",
                      topic, m->partition, m->offset, m->errstr);
        return;
    case TM_POLL_ERR_FATAL: tm_consumer_fatal(c); return;
    case TM_POLL_ERR_NO_TOPIC:
        /* A topic of `topics` not created yet: librdkafka keeps the
         * subscription and the group assigns it once it exists. */
        tm_conn_error(c, 0, "waiting for topic %s: %s", topic, m->errstr);
        return;
    case TM_POLL_ERR_AUTH:
        tm_conn_error(c, 1, "%s: %s", topic, m->errstr);
        return;
    case TM_POLL_ERR_OTHER:
        tm_log(TM_LOG_WARN, c->cfg->name, "consumer: %s: %s", m->errname,
               m->errstr);
    }
}

static void on_message(tm_connector *c, const tm_polled *m) {
    if (m->kind == TM_POLLED_ERROR) {
        on_error(c, m);
        return;
    }
    if (m->kind == TM_POLLED_NOTHING)
        return;
    tm_part *p = tm_conn_part(c, m->topic, m->partition);
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
    if (m->kind == TM_POLLED_END) {
        on_partition_end(c, p, m->offset);
        return;
    }
    if (m->offset < p->next_expected)
        return;
    if (!c->degraded_by_sink)
        tm_conn_recovered(c, "records flow");
    on_record(c, p, m);
}

/* The partitions of c->parts that want (wanted(p) non-zero) an
 * operation, each at its next_expected; NULL when none (or out of
 * memory: tried again at the next turn of the loop). */
static tm_kafka_tp *parts_where(tm_connector *c,
                                int (*wanted)(tm_connector *, tm_part *),
                                size_t *n) {
    tm_kafka_tp *v = NULL;
    *n = 0;
    for (size_t i = 0; i < c->nparts; i++) {
        tm_part *p = &c->parts[i];
        if (!wanted(c, p))
            continue;
        if (!v && !(v = calloc(c->nparts, sizeof *v)))
            return NULL;
        v[*n].topic = p->topic;
        v[*n].partition = p->partition;
        v[*n].offset = p->next_expected;
        ++*n;
    }
    return v;
}

static int wants_resume(tm_connector *c, tm_part *p) {
    (void)c;
    return p->needs_resume;
}

static void apply_resumes(tm_connector *c) {
    size_t n;
    tm_kafka_tp *v = parts_where(c, wants_resume, &n);
    if (!v)
        return;
    for (size_t i = 0; i < c->nparts; i++)
        c->parts[i].needs_resume = 0;
    char why[256];
    if (tm_kafka_set_paused(c->rk, v, n, 0, why, sizeof why) != 0)
        tm_log(TM_LOG_WARN, c->cfg->name, "resume after claim: %s", why);
    free(v);
}

static int wants_seek(tm_connector *c, tm_part *p) {
    return p->needs_seek && !p->fenced && !p->paused && !p->unclaimed &&
           tm_part_stop_may_seek(c, p);
}

/* Re-reads what was dropped: seek each marked partition back to where the
 * next batch must start. The seek is waited for, and what was fetched
 * before it is discarded. */
static void apply_seeks(tm_connector *c) {
    size_t n;
    tm_kafka_tp *v = parts_where(c, wants_seek, &n);
    if (!v)
        return;
    char why[512];
    if (tm_kafka_seek(c->rk, v, n, 10000, why, sizeof why) != 0) {
        tm_log(TM_LOG_WARN, c->cfg->name, "seek: %s; trying again", why);
    } else {
        for (size_t i = 0; i < n; i++) {
            tm_part *p = tm_conn_part(c, v[i].topic, v[i].partition);
            if (!p)
                continue;
            if (v[i].err)
                tm_log(TM_LOG_WARN, c->cfg->name,
                       "seek %s [%" PRId32 "] to %" PRId64 ": %s", p->topic,
                       p->partition, p->next_expected, v[i].err);
            else
                p->needs_seek = 0;
        }
    }
    free(v);
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
    int stopping = atomic_load(c->stop);
    for (;;) {
        int64_t left = tm_stop_bound_ms(c, until) - tm_now_ms();
        if (left <= 0 || c->batch_abandoned ||
            (!stopping && atomic_load(c->stop)))
            return;
        tm_polled m;
        tm_kafka_poll(c->rk, (int)(left < POLL_MS ? left : POLL_MS), &m);
        c->polled_ms = tm_now_ms();
        if (m.kind == TM_POLLED_RECORD) {
            tm_part *p = tm_conn_part(c, m.topic, m.partition);
            if (p)
                p->needs_seek = 1;
        } else if (m.kind == TM_POLLED_ERROR) {
            on_error(c, &m);
        }
        tm_kafka_polled_release(&m);
        tm_conn_status_tick(c, 0);
    }
}

int64_t tm_stop_deadline_ms(tm_connector *c) {
    if (!atomic_load(c->stop))
        return 0;
    /* Set once, by whoever sees the stop first: the stop watch or this
     * thread (a pause is seen only here). */
    int64_t seen = 0, now = tm_now_ms();
    if (atomic_compare_exchange_strong(&c->stop_seen_ms, &seen, now))
        seen = now;
    return seen + TM_STOP_GRACE_MS;
}

int tm_stop_grace_over(tm_connector *c) {
    int64_t stop = tm_stop_deadline_ms(c);
    return stop && tm_now_ms() >= stop;
}

int64_t tm_stop_bound_ms(tm_connector *c, int64_t until) {
    int64_t stop = tm_stop_deadline_ms(c);
    return stop && stop < until ? stop : until;
}

const char *tm_stop_kind(const tm_connector *c) {
    if (!c->ctl || atomic_load(&c->ctl->stop))
        return "stopping";
    /* Not a stop: a pause, or one taken back since it stopped the loop
     * (the batch it settles is given up all the same). */
    return atomic_load(&c->ctl->pause) ? "pausing"
                                       : "pausing, taken back since";
}

void tm_stop_deadline_reset(tm_connector *c) {
    /* A real stop that came meanwhile may lose the time it was seen at
     * and get it again at its next reading: later by this instant. */
    if (!c->ctl || !atomic_load(&c->ctl->stop))
        atomic_store(&c->stop_seen_ms, 0);
}

int64_t tm_fenced_bound_ms(tm_connector *c) {
    /* A partition that really moved is revoked within a rebalance, and a
     * member that misses its heartbeats is out after one session timeout:
     * twice that without a revoke means nobody else has it. Asked of the
     * consumer once: its configuration does not change. */
    if (c->fenced_bound_ms)
        return c->fenced_bound_ms;
    c->fenced_bound_ms = 2 * tm_kafka_consumer_session_ms(c->rk);
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
        tm_polled m;
        tm_kafka_poll(c->rk, timeout, &m);
        c->polled_ms = tm_now_ms();
        on_message(c, &m);
        tm_kafka_polled_release(&m);
        if (c->state == TM_CONN_FAILED)
            break;
        if (c->batch_open && c->batch_abandoned)
            tm_commit_drop_batch(c, "partitions revoked");
        if (batch_due(c))
            tm_commit_batch(c);
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
        tm_commit_batch(c);
    if (c->batch_open)
        tm_commit_drop_batch(c, c->consumer_fatal ? "the consumer failed"
                                                  : tm_stop_kind(c));
}

void tm_commit_on_revoke(tm_connector *c, const tm_kafka_tp *revoked,
                         size_t nrevoked, int lost) {
    /* The counts of the last commits, before the partitions are gone. */
    if (!lost)
        tm_conn_refresh_markers(c);
    int hit = lost;
    if (c->batch_open && !hit) {
        const tm_batch *b = tm_bb_batch(c->bb);
        for (size_t i = 0; b && i < b->nranges && !hit; i++) {
            const tm_range *r = TM_CELEM(tm_range, b->ranges, i);
            for (size_t j = 0; j < nrevoked && !hit; j++)
                hit = revoked[j].partition == r->partition &&
                      strcmp(revoked[j].topic, r->topic) == 0;
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
    for (size_t j = 0; j < nrevoked && c->foreign_held > 0; j++)
        if (!tm_kafka_topic_wanted(c->cfg, revoked[j].topic))
            c->foreign_held--;
    for (size_t j = 0; j < nrevoked; j++) {
        tm_part *p = tm_conn_part(c, revoked[j].topic, revoked[j].partition);
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
