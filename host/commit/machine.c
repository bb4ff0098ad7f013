/* The connector core's state machine (commit/machine.h): the events, the
 * batches (one being built, at most one at the sink) and what each answer
 * of the sink means. Partitions: machine_part.c. Pure: no librdkafka, no
 * sink, no clock, no log; every consequence is an action.
 *
 * MACHINE_MUTANT (tests only, tests/unit/CMakeLists.txt) breaks one rule on
 * purpose so that the model test shows its invariants catch it:
 *   1 an applied batch does not advance the partitions' committed offsets
 *   2 group offsets are committed for partitions no longer owned
 *   3 a batch goes to the sink while another is there
 *   4 the sink commit is asked before the dead letters are on the topic
 *   5 a partition end carries the marker one offset past the position */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit/machine_internal.h"

#ifndef MACHINE_MUTANT
#define MACHINE_MUTANT 0
#endif

/* The values of today's host: $.batch's defaults (config/connector_config.c),
 * commit_batch.c's, connector.c's and commit_loop.c's (twice librdkafka's
 * default session timeout). */
void tm_machine_config_defaults(tm_machine_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->max_records = 10000;
    cfg->max_bytes = 16 * 1024 * 1024;
    cfg->max_wait_ms = 500;
    cfg->commit_deadline_ms = 60000;
    cfg->stop_grace_ms = 5000;
    cfg->fenced_bound_ms = 90000;
    cfg->max_conflicts_in_row = 5;
    cfg->retry_base_ms = 100;
    cfg->retry_max_ms = 30000;
    cfg->claim_base_ms = 500;
    cfg->claim_max_ms = 10000;
    cfg->seed = 1;
}

tm_machine *tm_machine_new(const tm_machine_config *cfg, char *errstr,
                           size_t errsize) {
    if (!cfg || cfg->max_records < 1 || cfg->max_bytes < 1 ||
        cfg->max_wait_ms < 0 || cfg->commit_deadline_ms < 1 ||
        cfg->stop_grace_ms < 0 || cfg->fenced_bound_ms < 0 ||
        cfg->max_conflicts_in_row < 1 || cfg->retry_base_ms < 1 ||
        cfg->claim_base_ms < 1) {
        snprintf(errstr, errsize,
                 "machine config: every limit must be positive (max_records, "
                 "max_bytes, commit_deadline_ms, max_conflicts_in_row, the "
                 "backoffs' bases) or not negative (the others)");
        return NULL;
    }
    tm_machine *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(errstr, errsize, "out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    tm_backoff_init(&m->retry_backoff, cfg->retry_base_ms, cfg->retry_max_ms,
                    cfg->seed);
    tm_backoff_init(&m->claim_backoff, cfg->claim_base_ms, cfg->claim_max_ms,
                    cfg->seed ^ 0x5bd1e995u);
    m->oom_fail.kind = TM_ACT_FAIL;
    m->oom_fail.why = "out of memory";
    return m;
}

static void clear_step(tm_machine *m) {
    for (size_t i = 0; i < m->nstrs; i++)
        free(m->strs[i]);
    m->nstrs = 0;
    m->nacts = 0;
}

void tm_machine_free(tm_machine *m) {
    if (!m)
        return;
    clear_step(m);
    free(m->strs);
    free(m->acts);
    free(m->building.ranges);
    free(m->at_sink.ranges);
    tm_m_parts_free(m);
    free(m);
}

char *tm_m_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

const char *tm_m_keep(tm_machine *m, const char *why) {
    if (!why)
        return NULL;
    if (m->nstrs == m->scap) {
        size_t cap = m->scap ? m->scap * 2 : 8;
        char **ns = realloc(m->strs, cap * sizeof *ns);
        if (!ns) {
            m->oom = 1;
            return NULL;
        }
        m->strs = ns;
        m->scap = cap;
    }
    char *s = tm_m_strdup(why);
    if (!s) {
        m->oom = 1;
        return NULL;
    }
    m->strs[m->nstrs++] = s;
    return s;
}

static tm_machine_action *push(tm_machine *m, tm_machine_action_kind kind) {
    if (m->nacts == m->acap) {
        size_t cap = m->acap ? m->acap * 2 : 32;
        tm_machine_action *na = realloc(m->acts, cap * sizeof *na);
        if (!na) {
            m->oom = 1;
            return NULL;
        }
        m->acts = na;
        m->acap = cap;
    }
    tm_machine_action *a = &m->acts[m->nacts++];
    memset(a, 0, sizeof *a);
    a->kind = kind;
    return a;
}

void tm_m_emit(tm_machine *m, tm_machine_action_kind kind, const mpart *p,
               int64_t offset, const char *why) {
    tm_machine_action *a = push(m, kind);
    if (!a)
        return;
    if (p) {
        a->topic = p->topic;
        a->partition = p->partition;
        a->epoch = p->epoch;
    }
    a->offset = offset;
    a->why = tm_m_keep(m, why);
}

/* A batch's action: its id, and its range when one is named. */
static void emit_batch(tm_machine *m, tm_machine_action_kind kind,
                       const mbatch *b, uint32_t range, int64_t offset,
                       const char *why) {
    tm_machine_action *a = push(m, kind);
    if (!a)
        return;
    a->batch = b->id;
    a->offset = offset;
    if (range < b->nranges) {
        const mrange *r = &b->ranges[range];
        a->topic = r->topic;
        a->partition = r->partition;
        a->epoch = r->epoch;
        a->range = range;
    }
    a->why = tm_m_keep(m, why);
}

void tm_m_fail(tm_machine *m, const mpart *p, const char *why) {
    if (m->failed)
        return;
    m->failed = 1;
    tm_m_emit(m, TM_ACT_FAIL, p, 0, why);
}

/* ---- Batches --------------------------------------------------------- */

static const mrange *range_of_part(const mbatch *b, const mpart *p) {
    for (size_t i = 0; i < b->nranges; i++)
        if (b->ranges[i].partition == p->partition &&
            strcmp(b->ranges[i].topic, p->topic) == 0)
            return &b->ranges[i];
    return NULL;
}

/* The range of p in the batch being built, opened (with the batch) when
 * none is: from where the partition's next batch starts. -1 when memory
 * ran out. */
static int range_for(tm_machine *m, mpart *p) {
    mbatch *b = &m->building;
    if (b->phase == TM_BATCH_NONE) {
        b->phase = TM_BATCH_BUILDING;
        b->id = ++m->seq;
        b->nranges = 0;
        b->messages = b->bytes = 0;
        b->opened_ms = m->now_ms;
        b->abandoned = b->dlq_sent = b->paused_parts = b->due_asked = 0;
    }
    const mrange *have = range_of_part(b, p);
    if (have)
        return (int)(have - b->ranges);
    if (b->nranges == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 8;
        mrange *nr = realloc(b->ranges, cap * sizeof *nr);
        if (!nr) {
            m->oom = 1;
            return -1;
        }
        b->ranges = nr;
        b->cap = cap;
    }
    mrange *r = &b->ranges[b->nranges++];
    r->topic = p->topic;
    r->partition = p->partition;
    r->start = r->end = p->next_expected;
    r->epoch = p->epoch;
    emit_batch(m, TM_ACT_RANGE, b, (uint32_t)(b->nranges - 1), r->start, NULL);
    return (int)(b->nranges - 1);
}

/* Closes a batch without committing it: its partitions are read again
 * from where it began: the committed offset for the batch at the sink, the
 * end of the one at the sink for the batch built behind it (its ranges
 * start there). */
static void drop(tm_machine *m, mbatch *b, const char *why) {
    if (b->phase == TM_BATCH_NONE)
        return;
    /* The batch built behind it continues it: never sent without it. */
    if (b == &m->at_sink)
        drop(m, &m->building, "the batch before it was not applied");
    for (size_t i = 0; i < b->nranges; i++) {
        mpart *p = tm_m_part_of(m, &b->ranges[i]);
        if (!p || p->state == TM_PART_REVOKING || p->state == TM_PART_LOST ||
            p->state == TM_PART_CLAIMING)
            continue;
        p->next_expected =
            b == &m->building ? b->ranges[i].start : p->committed;
        p->needs_seek = 1;
    }
    emit_batch(m, TM_ACT_DROP_BATCH, b, UINT32_MAX, 0, why);
    b->phase = TM_BATCH_NONE;
    b->nranges = 0;
}

static int64_t commit_deadline(const tm_machine *m) {
    int64_t at = m->now_ms + m->cfg.commit_deadline_ms;
    if (m->stopping && m->give_up_ms < at)
        at = m->give_up_ms;
    return at;
}

/* The next attempt of the batch at the sink: its dead letters first. */
static void attempt(tm_machine *m) {
    mbatch *b = &m->at_sink;
    if (m->cfg.dead_letter_topic && !b->dlq_sent && MACHINE_MUTANT != 4) {
        b->phase = TM_BATCH_DLQ;
        emit_batch(m, TM_ACT_DLQ_SEND, b, UINT32_MAX, 0, NULL);
        return;
    }
    b->phase = TM_BATCH_AT_SINK;
    emit_batch(m, TM_ACT_SINK_COMMIT, b, UINT32_MAX, commit_deadline(m), NULL);
}

static int due(const tm_machine *m) {
    const mbatch *b = &m->building;
    return b->phase == TM_BATCH_BUILDING &&
           (b->messages >= m->cfg.max_records || b->bytes >= m->cfg.max_bytes ||
            m->now_ms - b->opened_ms >= m->cfg.max_wait_ms || m->stopping ||
            b->due_asked);
}

/* Hands the batch being built to the sink when it is due and the sink is
 * free: one batch at the sink at a time. */
static void cut(tm_machine *m, int forced) {
    if (m->building.phase != TM_BATCH_BUILDING)
        return;
    if (forced)
        m->building.due_asked = 1; /* kept while the sink is busy */
    if (!due(m))
        return;
    if (m->at_sink.phase != TM_BATCH_NONE) {
        if (MACHINE_MUTANT != 3)
            return; /* waits for the answer */
        m->at_sink.phase = TM_BATCH_NONE;
    }
    mbatch t = m->at_sink;
    m->at_sink = m->building;
    m->building = t;
    m->building.phase = TM_BATCH_NONE;
    m->building.nranges = 0;
    tm_backoff_reset(&m->retry_backoff);
    attempt(m);
}

/* The batch at the sink is settled, whatever happened to it. */
static void settle(tm_machine *m, int applied) {
    int paused = m->at_sink.paused_parts;
    m->at_sink.phase = TM_BATCH_NONE;
    m->at_sink.nranges = 0;
    tm_m_parts_release(m);
    if (paused && !m->failed)
        tm_m_parts_pause_all(m, 0);
    /* An applied batch reaches the status with the next periodic write;
     * anything else at once (commit_batch.c). */
    if (!applied)
        tm_m_emit(m, TM_ACT_WRITE_STATUS, NULL, 0, NULL);
    if (!m->failed)
        cut(m, 0);
}

static void applied(tm_machine *m) {
    mbatch *b = &m->at_sink;
    for (size_t i = 0; i < b->nranges; i++) {
        const mrange *r = &b->ranges[i];
        mpart *p = tm_m_part_of(m, r);
        if (!tm_m_part_owned(p)) {
            if (MACHINE_MUTANT == 2 &&
                (p = tm_m_part(m, r->topic, r->partition)) != NULL)
                tm_m_emit(m, TM_ACT_COMMIT_OFFSETS, p, r->end, NULL);
            continue; /* revoked or lost while at the sink */
        }
        if (r->end > p->committed && MACHINE_MUTANT != 1)
            p->committed = r->end;
        /* After the sink, for lag tools only. */
        tm_m_emit(m, TM_ACT_COMMIT_OFFSETS, p, r->end, NULL);
    }
    m->conflicts_in_row = 0;
    settle(m, 1);
}

/* RETRY (or dead letters not delivered): the same batch again after a
 * backoff, unless it was abandoned or the stop's grace is spent. The
 * executor reports the sink's own message. */
static void on_retry(tm_machine *m) {
    mbatch *b = &m->at_sink;
    /* Whatever was built behind it is read again after the answer. */
    drop(m, &m->building, "the batch before it was not applied");
    if (m->stopping && m->now_ms >= m->give_up_ms) {
        drop(m, b, "giving up retries while stopping");
        settle(m, 0);
        return;
    }
    if (b->abandoned) {
        drop(m, b, "partitions revoked during retries");
        settle(m, 0);
        return;
    }
    if (!b->paused_parts) {
        /* Backpressure: nothing more is taken while it waits; the
         * consumer is still served so the group keeps this member. */
        tm_m_parts_pause_all(m, 1);
        b->paused_parts = 1;
    }
    b->phase = TM_BATCH_RETRY_WAIT;
    b->retry_at = m->now_ms + tm_backoff_next(&m->retry_backoff);
}

static void on_answer(tm_machine *m, const tm_machine_event *ev) {
    mbatch *b = &m->at_sink;
    switch (ev->status) {
    case TM_OK:
    case TM_ALREADY: applied(m); return;
    case TM_RETRY: on_retry(m); return;
    case TM_FENCED:
    case TM_CONFLICT:
        if (ev->status == TM_CONFLICT &&
            ++m->conflicts_in_row >= m->cfg.max_conflicts_in_row) {
            char why[256];
            snprintf(why, sizeof why,
                     "CONFLICT %d times in a row: the rebuild does not "
                     "converge (something else writes the markers)",
                     m->conflicts_in_row);
            tm_m_fail(m, NULL, why);
        }
        drop(m, &m->building, "the batch before it was not applied");
        if (ev->markers_read)
            tm_m_parts_reread(m, b, ev->markers, ev->nmarkers);
        drop(m, b,
             ev->status == TM_FENCED ? "fenced"
                                     : "conflict: rebuilding from the markers");
        settle(m, 0);
        return;
    default:
        tm_m_fail(m, NULL, ev->why ? ev->why : tm_status_name(ev->status));
        drop(m, &m->building, "failed");
        drop(m, b, "failed");
        settle(m, 0);
        return;
    }
}

/* ---- Records --------------------------------------------------------- */

/* The partition whose record or end this is, when it is taken: running,
 * positioned (no seek due) and not paused (a paused one is read again
 * from next_expected once resumed). */
static mpart *taking(tm_machine *m, const tm_machine_event *ev) {
    mpart *p = tm_m_part(m, ev->topic, ev->partition);
    if (!p || p->state != TM_PART_RUNNING || p->needs_seek || m->stopping)
        return NULL;
    if (p->paused) {
        p->needs_seek = 1;
        return NULL;
    }
    return p;
}

static void on_record(tm_machine *m, const tm_machine_event *ev) {
    mpart *p = taking(m, ev);
    if (!p || ev->offset < p->next_expected)
        return; /* delivered again after a seek */
    int r = range_for(m, p);
    if (r < 0)
        return;
    emit_batch(m, TM_ACT_TAKE, &m->building, (uint32_t)r, ev->offset, NULL);
    m->building.ranges[r].end = ev->offset + 1;
    m->building.messages++;
    m->building.bytes += ev->bytes > 0 ? ev->bytes : 0;
    p->next_expected = ev->offset + 1;
}

/* The position may be past the last record (transaction markers, aborted
 * records): an empty range carries the marker there. */
static void on_partition_end(tm_machine *m, const tm_machine_event *ev) {
    mpart *p = taking(m, ev);
    if (!p)
        return;
    if (ev->offset > p->high_watermark)
        p->high_watermark = ev->offset;
    if (ev->offset <= p->next_expected)
        return;
    int r = range_for(m, p);
    if (r < 0)
        return;
    int64_t end = ev->offset + (MACHINE_MUTANT == 5);
    emit_batch(m, TM_ACT_EXTEND, &m->building, (uint32_t)r, end, NULL);
    m->building.ranges[r].end = end;
    p->next_expected = end;
}

/* ---- The group ------------------------------------------------------- */

static int batch_has(const mbatch *b, const tm_machine_tp *tp) {
    for (size_t i = 0; i < b->nranges; i++)
        if (b->ranges[i].partition == tp->partition &&
            strcmp(b->ranges[i].topic, tp->topic) == 0)
            return 1;
    return 0;
}

static int hits(const mbatch *b, const tm_machine_event *ev) {
    if (b->phase == TM_BATCH_NONE)
        return 0;
    if (ev->kind == TM_EV_LOST)
        return 1;
    for (size_t i = 0; i < ev->nparts; i++)
        if (batch_has(b, &ev->parts[i]))
            return 1;
    return 0;
}

/* A batch never outlives the assignment of its partitions. The revoked
 * partitions go first, so that nothing is resumed or sought for them. */
static void on_revoked(tm_machine *m, const tm_machine_event *ev) {
    int lost = ev->kind == TM_EV_LOST;
    int hit_building = hits(&m->building, ev);
    mbatch *b = &m->at_sink;
    int hit_out = hits(b, ev);
    /* At the sink (or its dead letters out): its answer is still to come,
     * and its revoked partitions wait for it. */
    int out = hit_out && b->phase != TM_BATCH_RETRY_WAIT;
    for (size_t i = 0; i < ev->nparts; i++) {
        mpart *p = tm_m_part(m, ev->parts[i].topic, ev->parts[i].partition);
        if (!p)
            continue;
        if (out && batch_has(b, &ev->parts[i]))
            p->state = lost ? TM_PART_LOST : TM_PART_REVOKING;
        else
            tm_m_part_remove(m, p);
    }
    if (hit_building)
        drop(m, &m->building, lost ? "partitions lost" : "partitions revoked");
    if (out) {
        b->abandoned = 1;
    } else if (hit_out) {
        drop(m, b, "partitions revoked during retries");
        settle(m, 0);
    }
}

static void on_assigned(tm_machine *m, const tm_machine_event *ev) {
    for (size_t i = 0; i < ev->nparts; i++) {
        mpart *p = tm_m_part_add(m, ev->parts[i].topic, ev->parts[i].partition);
        if (!p) {
            m->oom = 1;
            return;
        }
        p->state = TM_PART_CLAIMING;
        p->claiming = p->from_assignment = 1;
        p->reclaiming = p->reading = 0;
        tm_m_emit(m, TM_ACT_CLAIM, p, TM_NO_OFFSET, NULL);
    }
}

static void on_claimed(tm_machine *m, const tm_machine_event *ev) {
    if (ev->status == TM_OK) {
        tm_m_parts_claimed(m, ev);
        return;
    }
    if (ev->status == TM_RETRY) {
        tm_m_parts_deferred(m, ev);
        return;
    }
    tm_m_fail(m, NULL, ev->why ? ev->why : tm_status_name(ev->status));
}

static void on_timer(tm_machine *m) {
    mbatch *b = &m->at_sink;
    if (b->phase == TM_BATCH_RETRY_WAIT && m->now_ms >= b->retry_at) {
        if (b->abandoned) {
            drop(m, b, "partitions revoked during retries");
            settle(m, 0);
        } else {
            attempt(m);
        }
    }
    tm_m_parts_timer(m);
    cut(m, 0);
}

static void on_stop(tm_machine *m) {
    if (!m->stopping) {
        m->stopping = 1;
        m->give_up_ms = m->now_ms + m->cfg.stop_grace_ms;
    }
    cut(m, 1);
}

/* ---- The step -------------------------------------------------------- */

static const char *malformed(const tm_machine *m, const tm_machine_event *ev) {
    if (ev->now_ms < m->now_ms)
        return "now_ms went back";
    if (ev->nparts && !ev->parts)
        return "parts is NULL";
    for (size_t i = 0; i < ev->nparts; i++)
        if (!ev->parts[i].topic)
            return "a part without a topic";
    if (ev->nmarkers && !ev->markers)
        return "markers is NULL";
    for (size_t i = 0; i < ev->nmarkers; i++)
        if (!ev->markers[i].topic)
            return "a marker without a topic";
    switch (ev->kind) {
    case TM_EV_RECORD:
    case TM_EV_PARTITION_END:
    case TM_EV_SEEK_FAILED:
        if (!ev->topic)
            return "no topic";
        if (ev->offset < 0)
            return "a negative offset";
        return NULL;
    case TM_EV_CLAIMED:
        if (ev->status == TM_OK && ev->nmarkers && (!ev->low || !ev->high))
            return "a claim without the log's bounds";
        for (size_t i = 0; ev->status == TM_OK && i < ev->nmarkers; i++)
            if (ev->markers[i].epoch == TM_NO_EPOCH)
                return "a claimed marker without an epoch";
        return NULL;
    case TM_EV_DLQ_SENT:
        if (m->at_sink.phase != TM_BATCH_DLQ || ev->batch != m->at_sink.id)
            return "DLQ_SENT for a batch whose dead letters are not out";
        return NULL;
    case TM_EV_SINK_ANSWER:
        if (m->at_sink.phase != TM_BATCH_AT_SINK || ev->batch != m->at_sink.id)
            return "SINK_ANSWER for a batch not at the sink";
        return NULL;
    case TM_EV_ASSIGNED:
    case TM_EV_REVOKED:
    case TM_EV_LOST:
    case TM_EV_MARKERS_READ:
    case TM_EV_BATCH_DUE:
    case TM_EV_TIMER:
    case TM_EV_STOP: return NULL;
    }
    return "unknown event kind";
}

int tm_machine_step(tm_machine *m, const tm_machine_event *ev,
                    const tm_machine_action **actions, size_t *nactions,
                    char *errstr, size_t errsize) {
    clear_step(m);
    *actions = m->acts;
    *nactions = 0;
    if (m->failed && ev->now_ms >= m->now_ms && ev->kind != TM_EV_REVOKED &&
        ev->kind != TM_EV_LOST) {
        m->now_ms = ev->now_ms;
        return 0; /* FAILED: nothing more happens but leaving the group */
    }
    const char *bad = malformed(m, ev);
    if (bad) {
        snprintf(errstr, errsize, "event %s: %s",
                 tm_machine_event_name(ev->kind), bad);
        return -1;
    }
    m->now_ms = ev->now_ms;
    switch (ev->kind) {
    case TM_EV_ASSIGNED: on_assigned(m, ev); break;
    case TM_EV_REVOKED:
    case TM_EV_LOST: on_revoked(m, ev); break;
    case TM_EV_CLAIMED: on_claimed(m, ev); break;
    case TM_EV_MARKERS_READ: tm_m_parts_fenced_read(m, ev); break;
    case TM_EV_RECORD: on_record(m, ev); break;
    case TM_EV_PARTITION_END: on_partition_end(m, ev); break;
    case TM_EV_BATCH_DUE: cut(m, 1); break;
    case TM_EV_DLQ_SENT:
        if (m->at_sink.abandoned) {
            /* A batch never outlives the assignment of its partitions. */
            drop(m, &m->at_sink, "partitions revoked");
            settle(m, 0);
        } else if (ev->status == TM_OK) {
            m->at_sink.dlq_sent = 1;
            attempt(m);
        } else {
            on_retry(m);
        }
        break;
    case TM_EV_SINK_ANSWER: on_answer(m, ev); break;
    case TM_EV_SEEK_FAILED: {
        mpart *p = tm_m_part(m, ev->topic, ev->partition);
        if (p)
            p->needs_seek = 1;
        break;
    }
    case TM_EV_TIMER: on_timer(m); break;
    case TM_EV_STOP: on_stop(m); break;
    }
    if (!m->failed && ev->kind != TM_EV_TIMER && ev->kind != TM_EV_STOP)
        cut(m, 0);
    /* A failed seek is asked again at the next step, not at once. */
    if (!m->failed && ev->kind != TM_EV_SEEK_FAILED)
        tm_m_parts_flush_seeks(m);
    if (m->oom) {
        m->oom = 0;
        m->failed = 1;
        *actions = &m->oom_fail;
        *nactions = 1;
        snprintf(errstr, errsize, "out of memory");
        return -1;
    }
    *actions = m->acts; /* grown during the step */
    *nactions = m->nacts;
    return 0;
}

/* ---- Looking inside -------------------------------------------------- */

void tm_machine_part(const tm_machine *m, const char *topic, int32_t partition,
                     tm_machine_part_view *out) {
    memset(out, 0, sizeof *out);
    const mpart *p = tm_m_part(m, topic, partition);
    if (!p) {
        out->state = TM_PART_ABSENT;
        return;
    }
    out->state = p->state;
    out->epoch = p->epoch;
    out->committed = p->committed;
    out->next_expected = p->next_expected;
    out->high_watermark = p->high_watermark;
    out->paused = p->paused;
    out->needs_seek = p->needs_seek;
    out->deferred = p->deferred;
}

static const mbatch *which_batch(const tm_machine *m, int which) {
    return which ? &m->at_sink : &m->building;
}

void tm_machine_batch(const tm_machine *m, int which,
                      tm_machine_batch_view *out) {
    const mbatch *b = which_batch(m, which);
    memset(out, 0, sizeof *out);
    out->phase = b->phase;
    if (b->phase == TM_BATCH_NONE)
        return;
    out->id = b->id;
    out->nranges = b->nranges;
    out->messages = b->messages;
    out->abandoned = b->abandoned;
}

int tm_machine_batch_range(const tm_machine *m, int which, size_t i,
                           tm_range *out) {
    const mbatch *b = which_batch(m, which);
    if (b->phase == TM_BATCH_NONE || i >= b->nranges)
        return -1;
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    out->topic = b->ranges[i].topic;
    out->partition = b->ranges[i].partition;
    out->start_offset = b->ranges[i].start;
    out->end_offset = b->ranges[i].end;
    out->epoch = b->ranges[i].epoch;
    out->last_offset = TM_NO_OFFSET;
    out->last_timestamp_ms = -1;
    return 0;
}

int tm_machine_failed(const tm_machine *m) {
    return m->failed;
}

const char *tm_machine_event_name(tm_machine_event_kind k) {
    static const char *const names[] = {
        "ASSIGNED",    "REVOKED",       "LOST",      "CLAIMED",  "MARKERS_READ",
        "RECORD",      "PARTITION_END", "BATCH_DUE", "DLQ_SENT", "SINK_ANSWER",
        "SEEK_FAILED", "TIMER",         "STOP"};
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : "?";
}

const char *tm_machine_action_name(tm_machine_action_kind k) {
    static const char *const names[] = {
        "CLAIM",      "READ_MARKERS", "START",       "PAUSE",
        "RESUME",     "SEEK",         "RANGE",       "TAKE",
        "EXTEND",     "DLQ_SEND",     "SINK_COMMIT", "COMMIT_OFFSETS",
        "DROP_BATCH", "WRITE_STATUS", "DEGRADE",     "FAIL"};
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : "?";
}

const char *tm_machine_part_state_name(tm_machine_part_state s) {
    static const char *const names[] = {"ABSENT", "CLAIMING", "RUNNING",
                                        "FENCED", "REVOKING", "LOST"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "?";
}
