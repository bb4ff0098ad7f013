/* The commit loop: the consumer's thread polls, feeds what it gets to the
 * connector core (commit/machine.h) as events, and executes the actions
 * the core answers, each through a thin executor: the consumer's through
 * kafka/consumer_ops.h, the builders' here, the claim's in claim.c, the
 * dead letters' and the sink commit's in commit_batch.c. An executor that
 * answers (TAKE, CLAIM, READ_MARKERS, DLQ_SEND, SINK_COMMIT, a SEEK that
 * failed) feeds its answer once every action of the step is done. */
#include "commit/commit_loop.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit/commit_internal.h"
#include "commit/machine.h"
#include "commit/part_stop.h"
#include "commit/poll_budget.h"
#include "kafka/fetch_wake.h"
#include "kafka/consumer.h"
#include "kafka/consumer_ops.h"
#include "kafka/partitions.h"
#include "metrics/metrics_registry.h"
#include "runtime/connector.h"
#include "runtime/sink_calls.h"
#include "services/log.h"

#define POLL_MS 100

/* A pause or resume asked while the rebalance callback runs: done once
 * the assignment is in place (the topic owned). */
typedef struct held_op {
    char *topic;
    int32_t partition;
    int pause;
} held_op;

struct tm_commit_now {
    /* The record being fed: the TAKE's executor converts it. */
    const tm_polled *msg;
    const tm_msg_view *view;
    int truncated;
    /* Inside the rebalance callback: the assignment the START actions
     * set, and the pauses and resumes that wait for it. */
    int in_rebalance;
    tm_kafka_tp *assigning;
    size_t nassigning;
    held_op *held;
    size_t nheld, capheld;
};

/* ---- Answers ---------------------------------------------------------- */

void tm_answer_init(tm_answer *a, tm_machine_event_kind kind) {
    memset(&a->ev, 0, sizeof a->ev);
    a->ev.kind = kind;
    a->tps = NULL;
    a->markers = NULL;
    a->low = a->high = NULL;
    a->strs = NULL;
    a->nstrs = 0;
    a->why[0] = '\0';
    a->hook = NULL;
    a->was_epoch = NULL;
    a->quiet = 0;
}

const char *tm_answer_keep(tm_answer *a, const char *s) {
    char **ns = realloc(a->strs, (a->nstrs + 1) * sizeof *ns);
    if (!ns)
        return NULL;
    a->strs = ns;
    char *d = strdup(s);
    if (d)
        a->strs[a->nstrs++] = d;
    return d;
}

int tm_answer_markers(tm_answer *a, size_t n, int bounds) {
    a->markers = calloc(n ? n : 1, sizeof *a->markers);
    if (bounds) {
        a->low = calloc(n ? n : 1, sizeof *a->low);
        a->high = calloc(n ? n : 1, sizeof *a->high);
    }
    if (!a->markers || (bounds && (!a->low || !a->high)))
        return -1;
    for (size_t i = 0; i < n; i++)
        a->markers[i].struct_size = sizeof a->markers[i];
    a->ev.markers = a->markers;
    a->ev.nmarkers = n;
    a->ev.low = a->low;
    a->ev.high = a->high;
    return 0;
}

void tm_answer_free(tm_answer *a) {
    for (size_t i = 0; i < a->nstrs; i++)
        free(a->strs[i]);
    free(a->strs);
    free(a->tps);
    free(a->markers);
    free(a->low);
    free(a->high);
    free(a->was_epoch);
    a->strs = NULL;
    a->nstrs = 0;
}

/* ---- Partitions and builders ----------------------------------------- */

tm_part *tm_commit_part_add(tm_connector *c, const char *topic,
                            int32_t partition) {
    tm_part *p = tm_conn_part(c, topic, partition);
    if (p)
        return p; /* assigned again (eager), or while its batch is out */
    if (c->nparts + 1 > c->cap) {
        tm_part *np = realloc(c->parts, 2 * (c->nparts + 8) * sizeof *np);
        if (!np)
            return NULL;
        c->parts = np;
        c->cap = 2 * (c->nparts + 8);
    }
    p = &c->parts[c->nparts];
    memset(p, 0, sizeof *p);
    p->topic = strdup(topic);
    if (!p->topic)
        return NULL;
    p->partition = partition;
    p->epoch = TM_NO_EPOCH;
    p->committed = TM_NO_OFFSET;
    p->high_watermark = -1;
    p->unclaimed = 1;
    c->nparts++;
    return p;
}

void tm_commit_sync_parts(tm_connector *c) {
    if (!c->m)
        return;
    int unclaimed = 0;
    for (size_t i = 0; i < c->nparts;) {
        tm_part *p = &c->parts[i];
        tm_machine_part_view v;
        tm_machine_part(c->m, p->topic, p->partition, &v);
        if (v.state == TM_PART_ABSENT || v.state == TM_PART_REVOKING ||
            v.state == TM_PART_LOST) {
            free(p->topic);
            *p = c->parts[--c->nparts];
            continue;
        }
        p->epoch = v.epoch;
        p->committed = v.committed;
        if (v.high_watermark > p->high_watermark)
            p->high_watermark = v.high_watermark;
        p->paused = v.paused;
        p->fenced = v.state == TM_PART_FENCED;
        p->unclaimed = v.state == TM_PART_CLAIMING;
        p->stopped = v.stopped;
        p->stop_at = v.stop_at;
        p->stop_held = v.held;
        if (!p->stopped) {
            p->stop_wall_ms = 0;
            p->stop_why[0] = '\0';
        }
        unclaimed |= p->unclaimed;
        i++;
    }
    c->any_unclaimed = unclaimed;
}

static int batch_in_use(const tm_connector *c, uint64_t id) {
    for (int w = 0; w < 2; w++) {
        tm_machine_batch_view v;
        tm_machine_batch(c->m, w, &v);
        if (v.phase != TM_BATCH_NONE && v.id == id)
            return 1;
    }
    return 0;
}

tm_batch_builder *tm_commit_builder(tm_connector *c, uint64_t id, int open) {
    for (int i = 0; i < 2; i++)
        if (c->bb_batch[i] == id && c->bb[i])
            return c->bb[i];
    if (!open)
        return NULL;
    for (int i = 0; i < 2; i++) {
        if (c->bb_batch[i] && batch_in_use(c, c->bb_batch[i]))
            continue;
        /* The second builder only once a batch is built behind another,
         * converting with the first's converter: one set of columns
         * learnt from the events (batch_builder.h). */
        if (!c->bb[i] && !(c->bb[i] = c->bb[!i] ? tm_bb_new_beside(c->bb[!i])
                                                : tm_bb_new(c->cfg)))
            return NULL;
        c->bb_batch[i] = id;
        /* A new id, unique across hosts (the random instance id) and
         * within this one (the machine's sequence). */
        snprintf(c->bb_id[i], sizeof c->bb_id[i], "%s-%" PRIu64, c->instance_id,
                 id);
        tm_bb_reset(c->bb[i], c->bb_id[i], 0);
        return c->bb[i];
    }
    return NULL;
}

const char *tm_commit_batch_name(tm_connector *c, uint64_t id) {
    for (int i = 0; i < 2; i++)
        if (c->bb_batch[i] == id)
            return c->bb_id[i];
    return "";
}

/* ---- Executors -------------------------------------------------------- */

/* The answers of one step, fed once its actions are done: a TAKE's first
 * (nothing else may come before it). */
typedef struct answers {
    tm_answer *v;
    size_t n, cap;
    int heap; /* v on the heap (else the caller's) */
} answers;

static tm_answer *answer_add(tm_connector *c, answers *as,
                             tm_machine_event_kind kind) {
    if (as->n == as->cap) {
        size_t cap = as->cap * 2;
        tm_answer *nv = malloc(cap * sizeof *nv);
        if (!nv) {
            tm_conn_error(c, 1, "connector core: out of memory");
            return NULL;
        }
        memcpy(nv, as->v, as->n * sizeof *nv);
        /* A reason kept in the answer's own buffer moves with it. */
        for (size_t i = 0; i < as->n; i++)
            if (as->v[i].ev.why == as->v[i].why)
                nv[i].ev.why = nv[i].why;
        if (as->heap)
            free(as->v);
        as->heap = 1;
        as->v = nv;
        as->cap = cap;
    }
    tm_answer *a = &as->v[as->n++];
    tm_answer_init(a, kind);
    return a;
}

static void exec_take(tm_connector *c, const tm_machine_action *a,
                      answers *as) {
    tm_answer *ans = answer_add(c, as, TM_EV_TAKEN);
    if (!ans)
        return;
    struct tm_commit_now *now = c->now;
    ans->ev.batch = a->batch;
    ans->ev.topic = a->topic;
    ans->ev.partition = a->partition;
    ans->ev.offset = a->offset;
    ans->ev.status = TM_FATAL;
    ans->ev.why = ans->why;
    if (!now->msg || now->msg->offset != a->offset ||
        now->msg->partition != a->partition) {
        snprintf(ans->why, sizeof ans->why,
                 "connector core: a TAKE of %s [%" PRId32 "] offset %" PRId64
                 " without its record",
                 a->topic, a->partition, a->offset);
        return;
    }
    tm_batch_builder *bb = tm_commit_builder(c, a->batch, 0);
    const char *name = tm_commit_batch_name(c, a->batch);
    if (a->flows)
        tm_conn_recovered(c, "records flow");
    if (now->truncated)
        tm_conn_log(c, TM_LOG_WARN, a->topic, a->partition, name,
                    "offset %" PRId64 ": more than %d headers, the rest are "
                    "not kept",
                    a->offset, TM_MAX_HEADERS);
    uint64_t t0 = tm_metrics_now_ns();
    int added = bb ? tm_bb_add(bb, a->range, now->view) : -1;
    tm_metrics_convert_observe(c->metrics, tm_metrics_now_ns() - t0);
    if (added == -2) {
        /* The converter's STOP: the partition stops there. Its words,
         * for the status, cut inside their buffer maybe inside a
         * character: the status is JSON. */
        tm_part *p = tm_conn_part(c, a->topic, a->partition);
        char *why = p ? p->stop_why : ans->why;
        size_t size = p ? sizeof p->stop_why : sizeof ans->why;
        tm_part_stop_words(why, size, tm_bb_stopped(bb));
        if (p) {
            p->stop_wall_ms = tm_wall_ms();
            snprintf(ans->why, sizeof ans->why, "%s", p->stop_why);
        }
        ans->ev.kind = TM_EV_RECORD_STOP;
        return;
    }
    if (added != 0) {
        snprintf(ans->why, sizeof ans->why,
                 "batch: out of memory converting %s [%" PRId32
                 "] offset %" PRId64,
                 a->topic, a->partition, a->offset);
        return;
    }
    ans->ev.status = TM_OK;
    ans->ev.why = NULL;
}

static void exec_range(tm_connector *c, const tm_machine_action *a) {
    tm_batch_builder *bb = tm_commit_builder(c, a->batch, 1);
    int r =
        bb ? tm_bb_range(bb, a->topic, a->partition, a->offset, a->epoch) : -1;
    if (r < 0)
        tm_conn_error(c, 1, "batch: out of memory");
    else if ((uint32_t)r != a->range)
        tm_conn_error(c, 1,
                      "batch: range %d of %s [%" PRId32
                      "] where the connector core has %" PRIu32,
                      r, a->topic, a->partition, a->range);
}

static void exec_drop(tm_connector *c, const tm_machine_action *a) {
    tm_conn_log(c, TM_LOG_INFO, NULL, -1, tm_commit_batch_name(c, a->batch),
                "batch dropped (%s)", a->why ? a->why : "?");
    for (int i = 0; i < 2; i++)
        if (c->bb_batch[i] == a->batch) {
            /* Its events are read again: what they taught goes. */
            if (c->bb[i])
                tm_bb_unlearn(c->bb[i]);
            c->bb_batch[i] = 0; /* reset when it is opened again */
        }
}

static void exec_start(tm_connector *c, const tm_machine_action *a) {
    struct tm_commit_now *now = c->now;
    for (size_t i = 0; i < now->nassigning; i++) {
        tm_kafka_tp *tp = &now->assigning[i];
        if (tp->partition == a->partition && strcmp(tp->topic, a->topic) == 0)
            tp->offset = a->offset == TM_MACHINE_LOG_END ? TM_KAFKA_OFFSET_END
                                                         : a->offset;
    }
}

static void set_paused(tm_connector *c, const char *topic, int32_t partition,
                       int pause) {
    tm_kafka_tp tp = {topic, partition, 0, NULL};
    char why[256];
    if (tm_kafka_set_paused(c->rk, &tp, 1, pause, why, sizeof why) != 0)
        tm_log(TM_LOG_WARN, c->cfg->name, "%s %s [%" PRId32 "]: %s",
               pause ? "pause" : "resume", topic, partition, why);
}

/* librdkafka keeps a pause across unassign and assign; inside the
 * rebalance callback the partitions are not assigned yet: done after. */
static void exec_pause(tm_connector *c, const tm_machine_action *a) {
    struct tm_commit_now *now = c->now;
    int pause = a->kind == TM_ACT_PAUSE;
    if (!now->in_rebalance) {
        set_paused(c, a->topic, a->partition, pause);
        return;
    }
    if (now->nheld == now->capheld) {
        size_t cap = now->capheld ? now->capheld * 2 : 16;
        held_op *nh = realloc(now->held, cap * sizeof *nh);
        if (!nh)
            return;
        now->held = nh;
        now->capheld = cap;
    }
    char *t = strdup(a->topic);
    if (!t)
        return;
    now->held[now->nheld++] = (held_op){t, a->partition, pause};
}

static void apply_held(tm_connector *c) {
    struct tm_commit_now *now = c->now;
    for (size_t i = 0; i < now->nheld; i++) {
        set_paused(c, now->held[i].topic, now->held[i].partition,
                   now->held[i].pause);
        free(now->held[i].topic);
    }
    now->nheld = 0;
}

typedef struct tps {
    tm_kafka_tp *v;
    size_t n, cap;
} tps;

static void tps_add(tps *l, const tm_machine_action *a) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        tm_kafka_tp *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv)
            return; /* a seek asked again, an offset for lag tools */
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = (tm_kafka_tp){a->topic, a->partition, a->offset, NULL};
}

static void seek_failed(tm_connector *c, answers *as, const tm_kafka_tp *tp) {
    tm_answer *ans = answer_add(c, as, TM_EV_SEEK_FAILED);
    if (!ans)
        return;
    ans->ev.topic = tm_answer_keep(ans, tp->topic);
    ans->ev.partition = tp->partition;
    ans->ev.offset = tp->offset;
    if (!ans->ev.topic)
        as->n--; /* out of memory: the seek is not asked again */
}

/* Re-reads what was dropped: each partition back to where its next batch
 * starts, waited for, what was fetched before discarded. */
static void exec_seeks(tm_connector *c, tps *l, answers *as) {
    if (!l->n)
        return;
    char why[512];
    if (c->now->in_rebalance) {
        /* Not assigned yet: asked again by the next step. */
        for (size_t i = 0; i < l->n; i++)
            seek_failed(c, as, &l->v[i]);
        return;
    }
    if (tm_kafka_seek(c->rk, l->v, l->n, 10000, why, sizeof why) != 0) {
        tm_log(TM_LOG_WARN, c->cfg->name, "seek: %s; trying again", why);
        for (size_t i = 0; i < l->n; i++)
            seek_failed(c, as, &l->v[i]);
        return;
    }
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].err) {
            tm_log(TM_LOG_WARN, c->cfg->name,
                   "seek %s [%" PRId32 "] to %" PRId64 ": %s", l->v[i].topic,
                   l->v[i].partition, l->v[i].offset, l->v[i].err);
            seek_failed(c, as, &l->v[i]);
        }
}

static void exec_group_offsets(tm_connector *c, const tps *l) {
    if (!l->n)
        return;
    /* Asynchronous and best effort: only lag tools read these. */
    char why[256];
    if (tm_kafka_commit_offsets(c->rk, l->v, l->n, why, sizeof why) != 0)
        tm_log(TM_LOG_DEBUG, c->cfg->name, "group offset commit: %s", why);
}

/* The actions of one step, in order; what waits on the others (seeks and
 * group offsets together, the claim, the sink) after them. */
static void execute(tm_connector *c, const tm_machine_action *acts, size_t n,
                    answers *as) {
    tps seeks = {0}, offsets = {0};
    const tm_machine_action **claims = NULL, **reads = NULL;
    size_t nclaims = 0, nreads = 0;
    const tm_machine_action *out = NULL; /* DLQ_SEND or SINK_COMMIT */
    for (size_t i = 0; i < n; i++) {
        const tm_machine_action *a = &acts[i];
        switch (a->kind) {
        case TM_ACT_CLAIM:
        case TM_ACT_READ_MARKERS: {
            const tm_machine_action ***l =
                a->kind == TM_ACT_CLAIM ? &claims : &reads;
            size_t *k = a->kind == TM_ACT_CLAIM ? &nclaims : &nreads;
            if (!*l && !(*l = calloc(n, sizeof **l))) {
                tm_conn_error(c, 1, "claim: out of memory");
                break;
            }
            (*l)[(*k)++] = a;
            break;
        }
        case TM_ACT_START: exec_start(c, a); break;
        case TM_ACT_PAUSE:
        case TM_ACT_RESUME: exec_pause(c, a); break;
        case TM_ACT_SEEK: tps_add(&seeks, a); break;
        case TM_ACT_RANGE: exec_range(c, a); break;
        case TM_ACT_TAKE: exec_take(c, a, as); break;
        case TM_ACT_EXTEND: {
            tm_batch_builder *bb = tm_commit_builder(c, a->batch, 0);
            if (bb)
                tm_bb_extend(bb, a->range, a->offset);
            break;
        }
        case TM_ACT_DLQ_SEND:
        case TM_ACT_SINK_COMMIT: out = a; break;
        case TM_ACT_COMMIT_OFFSETS: tps_add(&offsets, a); break;
        case TM_ACT_DROP_BATCH: exec_drop(c, a); break;
        case TM_ACT_WRITE_STATUS: tm_conn_status_tick(c, 1); break;
        case TM_ACT_DEGRADE:
            tm_conn_error(c, 0, "%s", a->why ? a->why : "?");
            break;
        case TM_ACT_FAIL:
            /* A reason the host reported itself stays the reason. */
            if (c->state != TM_CONN_FAILED)
                tm_conn_error(c, 1, "%s", a->why ? a->why : "failed");
            break;
        }
    }
    exec_seeks(c, &seeks, as);
    exec_group_offsets(c, &offsets);
    free(seeks.v);
    free(offsets.v);
    tm_answer *ans;
    if (nclaims && (ans = answer_add(c, as, TM_EV_CLAIMED)))
        tm_claim_exec(c, claims, nclaims, ans);
    if (nreads && (ans = answer_add(c, as, TM_EV_MARKERS_READ)))
        tm_read_markers_exec(c, reads, nreads, ans);
    free(claims);
    free(reads);
    if (out &&
        (ans = answer_add(c, as,
                          out->kind == TM_ACT_DLQ_SEND ? TM_EV_DLQ_SENT
                                                       : TM_EV_SINK_ANSWER))) {
        if (out->kind == TM_ACT_DLQ_SEND)
            tm_dlq_send_exec(c, out, ans);
        else if (!tm_sink_commit_exec(c, out, ans))
            as->n--; /* at the sink: answered once done */
    }
}

/* SIGTERM or a pause, seen by the machine before the next event: the
 * batch in flight is finished if it can be within the grace (counted from
 * when the stop was first seen), else abandoned (safe: the markers did not
 * move). Not between a TAKE and its answer. 1 when it fed the STOP. */
static int see_stop(tm_connector *c, const tm_machine_event *ev) {
    if (c->machine_stopped || !atomic_load(c->stop) ||
        ev->kind == TM_EV_TAKEN || ev->kind == TM_EV_RECORD_STOP)
        return 0;
    c->machine_stopped = 1;
    tm_machine_event stop = {0};
    stop.kind = TM_EV_STOP;
    stop.why = tm_stop_kind(c);
    stop.offset = tm_stop_deadline_ms(c);
    tm_commit_feed(c, &stop, NULL, NULL);
    return 1;
}

void tm_commit_feed(tm_connector *c, tm_machine_event *ev, tm_answer_hook hook,
                    const tm_answer *a) {
    /* FAILED by the host, not by the machine: the machine learns it before
     * its next event, or the answer of the batch at the sink would hand
     * the sink the batch due behind it. */
    if (c->state == TM_CONN_FAILED && !tm_machine_failed(c->m))
        tm_machine_host_failed(c->m);
    /* The time read by the caller just before (a record's poll), unless a
     * STOP (and what it did) came after it: the machine's time never goes
     * back. */
    if (see_stop(c, ev) || ev->now_ms == 0)
        ev->now_ms = tm_now_ms();
    const tm_machine_action *acts;
    size_t n;
    char err[256];
    if (tm_machine_step(c->m, ev, &acts, &n, err, sizeof err) != 0) {
        tm_conn_error(c, 1, "connector core: %s", err);
        if (n == 0)
            return; /* malformed: the machine unchanged */
    }
    if (hook)
        hook(c, a, acts, n);
    tm_answer local[2];
    answers as = {local, 0, 2, 0};
    execute(c, acts, n, &as);
    /* The TAKE's answer first: it must be the next event. */
    for (size_t i = 1; i < as.n; i++)
        if (as.v[i].ev.kind == TM_EV_TAKEN ||
            as.v[i].ev.kind == TM_EV_RECORD_STOP) {
            tm_answer t = as.v[i];
            memmove(&as.v[1], &as.v[0], i * sizeof t);
            as.v[0] = t;
        }
    for (size_t i = 0; i < as.n; i++) {
        /* A conversion's answer comes at the time of its record. */
        if (as.v[i].ev.kind == TM_EV_TAKEN ||
            as.v[i].ev.kind == TM_EV_RECORD_STOP)
            as.v[i].ev.now_ms = ev->now_ms;
        tm_commit_feed(c, &as.v[i].ev, as.v[i].hook, &as.v[i]);
        tm_answer_free(&as.v[i]);
    }
    if (as.heap)
        free(as.v);
}

/* ---- Events from the consumer ----------------------------------------- */

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

/* A record or a partition end: an event. Whether it is taken is the
 * machine's to say (not ours any more, waiting for a seek, delivered
 * again after one, stopped, paused). */
static void on_message(tm_connector *c, const tm_polled *m) {
    if (m->kind == TM_POLLED_ERROR) {
        on_error(c, m);
        return;
    }
    if (m->kind == TM_POLLED_NOTHING || c->state == TM_CONN_FAILED ||
        m->offset < 0)
        return;
    tm_machine_event ev = {0};
    ev.kind = m->kind == TM_POLLED_END ? TM_EV_PARTITION_END : TM_EV_RECORD;
    ev.topic = m->topic;
    ev.partition = m->partition;
    ev.offset = m->offset;
    ev.now_ms = c->polled_ms; /* read as it came */
    tm_header_view hv[TM_MAX_HEADERS];
    tm_msg_view v;
    int truncated = 0;
    if (m->kind == TM_POLLED_RECORD) {
        tm_kafka_polled_view(m, hv, &v, &truncated);
        ev.bytes = (int64_t)tm_bb_message_bytes(&v);
    }
    struct tm_commit_now *now = c->now;
    now->msg = m;
    now->view = &v;
    now->truncated = truncated;
    tm_commit_feed(c, &ev, NULL, NULL);
    now->msg = NULL;
    now->view = NULL;
}

static void feed_simple(tm_connector *c, tm_machine_event_kind kind,
                        const char *why) {
    tm_machine_event ev = {0};
    ev.kind = kind;
    ev.why = why;
    tm_commit_feed(c, &ev, NULL, NULL);
}

/* The commit at the sink, once done (waiting at most ms for it): its
 * answer fed. 1 when there was one. */
static int collect(tm_connector *c, int64_t ms) {
    void *job = tm_sink_commit_done(c, ms);
    if (!job)
        return 0;
    tm_answer a;
    tm_answer_init(&a, TM_EV_SINK_ANSWER);
    tm_sink_commit_answer(c, job, &a);
    tm_commit_feed(c, &a.ev, a.hook, &a);
    tm_answer_free(&a);
    return 1;
}

static int idle(const tm_connector *c) {
    tm_machine_batch_view b, s;
    tm_machine_batch(c->m, 0, &b);
    tm_machine_batch(c->m, 1, &s);
    return b.phase == TM_BATCH_NONE && s.phase == TM_BATCH_NONE;
}

void tm_commit_serve(tm_connector *c, int64_t ms) {
    int64_t until = tm_now_ms() + ms;
    int stopping = atomic_load(c->stop);
    for (;;) {
        int64_t left = tm_stop_bound_ms(c, until) - tm_now_ms();
        if (left <= 0 || (!stopping && atomic_load(c->stop)))
            return;
        tm_polled m;
        tm_kafka_poll(c->rk, (int)(left < POLL_MS ? left : POLL_MS), &m);
        c->polled_ms = tm_now_ms();
        /* A record is not taken: the machine is stopped, and reads every
         * partition again from where its next batch starts when it goes
         * on (GO_ON). */
        if (m.kind == TM_POLLED_ERROR)
            on_error(c, &m);
        tm_kafka_polled_release(&m);
        apply_held(c);
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
     * twice that without a revoke means nobody else has it. */
    return 2 * tm_kafka_consumer_session_ms(c->rk);
}

int tm_commit_start(tm_connector *c, char *errstr, size_t errsize) {
    const tm_connector_config *cfg = c->cfg;
    tm_machine_config mc;
    tm_machine_config_defaults(&mc);
    mc.max_records = cfg->batch.max_records;
    mc.max_bytes = cfg->batch.max_bytes;
    mc.max_wait_ms = cfg->batch.max_wait_ms;
    mc.dead_letter_topic = c->dlq != NULL;
    mc.commit_deadline_ms = tm_poll_budget_commit_ms(c);
    mc.stop_grace_ms = TM_STOP_GRACE_MS;
    mc.fenced_bound_ms = tm_fenced_bound_ms(c);
    mc.seed = (uint64_t)tm_now_ms() ^ ((uint64_t)getpid() << 16);
    c->now = calloc(1, sizeof *c->now);
    if (!c->now) {
        snprintf(errstr, errsize, "out of memory");
        return -1;
    }
    c->m = tm_machine_new(&mc, errstr, errsize);
    return c->m ? 0 : -1;
}

void tm_commit_end(tm_connector *c) {
    tm_machine_free(c->m);
    c->m = NULL;
    if (c->now) {
        for (size_t i = 0; i < c->now->nheld; i++)
            free(c->now->held[i].topic);
        free(c->now->held);
        free(c->now);
        c->now = NULL;
    }
}

/* One poll of the consumer, its message (or error) fed to the machine. */
static void poll_one(tm_connector *c, int timeout) {
    tm_polled m;
    tm_kafka_poll(c->rk, timeout, &m);
    c->polled_ms = tm_now_ms();
    if (m.kind == TM_POLLED_RECORD)
        tm_fetch_wake_seen(c->fetch_wake, m.topic, m.partition);
    apply_held(c);
    on_message(c, &m);
    tm_kafka_polled_release(&m);
}

void tm_commit_loop_run(tm_connector *c) {
    /* A pause is over: the machine goes on. */
    if (c->machine_stopped && !atomic_load(c->stop)) {
        c->machine_stopped = 0;
        feed_simple(c, TM_EV_GO_ON, NULL);
    }
    int64_t timer_ms = tm_now_ms(), fresh = 0;
    while (c->state != TM_CONN_FAILED && !c->consumer_fatal) {
        /* The time the last turn ended at, when nothing waited since. */
        int64_t carried = fresh;
        fresh = 0;
        if (atomic_load(c->stop) && !c->machine_stopped) {
            feed_simple(c, TM_EV_TIMER, NULL); /* sees the stop */
            continue;
        }
        if (c->machine_stopped && idle(c))
            break;
        if (tm_sink_commit_out(c)) {
            /* The pipeline: batch N at the sink, N+1 built meanwhile. Once
             * N+1 is due, nothing more is read: N's answer is waited for
             * (as long as a commit lasts, within the poll rule). */
            tm_machine_batch_view next, out;
            tm_machine_batch(c->m, 0, &next);
            if (next.due) {
                /* ... and the consumer is still polled once the wait would
                 * eat into the next batch's time (the poll rule): with
                 * reads held, what a poll brings is not taken. */
                tm_machine_batch(c->m, 1, &out);
                if (!out.reads_paused && tm_now_ms() - c->polled_ms >=
                                             tm_poll_budget_hold_after_ms(c)) {
                    feed_simple(c, TM_EV_HOLD_READS, NULL);
                    tm_machine_batch(c->m, 1, &out);
                }
                if (out.reads_paused)
                    poll_one(c, 0);
                collect(c, POLL_MS);
                tm_conn_status_tick(c, 0);
                continue;
            }
        }
        /* The clock read once a record (docs/benchmarks.md): at the
         * poll, and again only after a wait or a write. */
        int64_t now = carried ? carried : tm_now_ms(),
                due = tm_machine_due_ms(c->m);
        int timeout = POLL_MS;
        if (due != INT64_MAX)
            timeout = due <= now            ? 0
                      : due - now < POLL_MS ? (int)(due - now)
                                            : POLL_MS;
        poll_one(c, timeout);
        if (c->state == TM_CONN_FAILED)
            break;
        now = collect(c, 0) ? tm_now_ms() : c->polled_ms;
        /* Batches due by age, retries after their backoff; claims and
         * fenced bounds now and then. */
        if (now >= tm_machine_due_ms(c->m) || now - timer_ms >= POLL_MS) {
            timer_ms = now;
            feed_simple(c, TM_EV_TIMER, NULL);
            now = tm_now_ms();
        }
        if (!tm_conn_status_tick_at(c, 0, now))
            fresh = now;
    }
    /* FAILED, or the consumer failed: the commit at the sink answers
     * first (nothing of the sink or its builder may outlive the loop). */
    while (tm_sink_commit_out(c))
        collect(c, 1000);
}

/* The revoke's step: said when it cost a batch. */
static void revoke_hook(tm_connector *c, const tm_answer *a,
                        const tm_machine_action *acts, size_t n) {
    tm_machine_batch_view out;
    tm_machine_batch(c->m, 1, &out);
    int hit = out.abandoned;
    for (size_t i = 0; i < n; i++)
        hit |= acts[i].kind == TM_ACT_DROP_BATCH;
    if (hit)
        tm_conn_log(c, TM_LOG_WARN, NULL, -1, c->batch_id,
                    "batch abandoned: partitions %s",
                    a->ev.kind == TM_EV_LOST ? "lost" : "revoked");
}

void tm_commit_on_revoke(tm_connector *c, const tm_kafka_tp *revoked,
                         size_t nrevoked, int lost) {
    /* The counts of the last commits, before the partitions are gone. */
    if (!lost)
        tm_conn_refresh_markers(c);
    /* Held foreign partitions (commit/claim.c) the group takes away: no
     * longer a reason to stay DEGRADED. */
    for (size_t j = 0; j < nrevoked && c->foreign_held > 0; j++)
        if (!tm_kafka_topic_wanted(c->cfg, revoked[j].topic))
            c->foreign_held--;
    tm_answer a;
    tm_answer_init(&a, lost ? TM_EV_LOST : TM_EV_REVOKED);
    a.tps = calloc(nrevoked ? nrevoked : 1, sizeof *a.tps);
    if (!a.tps) {
        tm_conn_error(c, 1, "rebalance: out of memory");
        return;
    }
    for (size_t j = 0; j < nrevoked; j++) {
        a.tps[j] = (tm_machine_tp){revoked[j].topic, revoked[j].partition};
        tm_part *p = tm_conn_part(c, revoked[j].topic, revoked[j].partition);
        if (p)
            tm_conn_log(c, TM_LOG_INFO, p->topic, p->partition, NULL,
                        "%s at next_offset=%" PRId64, lost ? "lost" : "revoked",
                        p->committed);
    }
    a.ev.parts = a.tps;
    a.ev.nparts = nrevoked;
    /* Inside the rebalance callback: seeks and resumes wait for it. */
    c->now->in_rebalance = 1;
    tm_commit_feed(c, &a.ev, revoke_hook, &a);
    c->now->in_rebalance = 0;
    tm_answer_free(&a);
    tm_commit_sync_parts(c);
    c->markers_dirty = 1;
}

int tm_commit_in_rebalance(const tm_connector *c) {
    return c->now->in_rebalance;
}

void tm_commit_assigning(tm_connector *c, tm_kafka_tp *assigned, size_t n) {
    c->now->in_rebalance = assigned != NULL;
    c->now->assigning = assigned;
    c->now->nassigning = n;
}
