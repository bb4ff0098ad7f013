/* The connector core's state machine (commit/machine.h): the machine
 * itself, its actions, the group's events and the step. Batches:
 * machine_batch.c; partitions: machine_part.c. Pure: no librdkafka, no
 * sink, no clock, no log; every consequence is an action. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit/machine_internal.h"

/* MACHINE_MUTANT (tests only): machine_batch.c lists them; 7 here. */
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

tm_machine_action *tm_m_push(tm_machine *m, tm_machine_action_kind kind) {
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
    tm_machine_action *a = tm_m_push(m, kind);
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

void tm_m_fail(tm_machine *m, const mpart *p, const char *why) {
    if (m->failed)
        return;
    m->failed = 1;
    tm_m_emit(m, TM_ACT_FAIL, p, 0, why);
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
    /* Marked first, forgotten after the drops: a batch's ranges point at
     * their partition's topic string. */
    for (size_t i = 0; i < ev->nparts; i++) {
        mpart *p = tm_m_part(m, ev->parts[i].topic, ev->parts[i].partition);
        if (p)
            p->state = lost ? TM_PART_LOST : TM_PART_REVOKING;
    }
    if (hit_building)
        tm_m_drop(m, &m->building,
                  lost ? "partitions lost" : "partitions revoked");
    if (out) {
        b->abandoned = 1;
    } else if (hit_out) {
        tm_m_drop(m, b, "partitions revoked during retries");
        tm_m_settle(m, 0);
    }
    for (size_t i = 0; i < ev->nparts; i++) {
        mpart *p = tm_m_part(m, ev->parts[i].topic, ev->parts[i].partition);
        if (p && !(out && batch_has(b, &ev->parts[i])))
            tm_m_part_remove(m, p);
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
    tm_m_batch_timer(m);
    tm_m_parts_timer(m);
}

static void on_stop(tm_machine *m, const tm_machine_event *ev) {
    if (!m->stopping) {
        m->stopping = 1;
        m->give_up_ms = m->now_ms + m->cfg.stop_grace_ms;
        /* Seen before now (a sink's call it waited for): its grace counts
         * from then. */
        if (ev->offset > 0 && ev->offset < m->give_up_ms)
            m->give_up_ms = ev->offset;
    }
    snprintf(m->stop_why, sizeof m->stop_why, "%s",
             ev->why ? ev->why : "stopping");
    /* A batch waiting out RETRY's backoff is tried once more at once,
     * within the grace; then it goes. */
    if (m->at_sink.phase == TM_BATCH_RETRY_WAIT)
        m->at_sink.retry_at = m->now_ms;
    tm_m_batch_timer(m);
    tm_m_cut(m, 1);
}

/* A pause is over: what was fetched while stopping was not taken, so
 * every running partition is read again from next_expected. */
static void on_go_on(tm_machine *m) {
    m->stopping = 0;
    m->give_up_ms = 0;
    for (size_t i = 0; i < m->nparts && MACHINE_MUTANT != 7; i++)
        if (m->parts[i].state == TM_PART_RUNNING)
            m->parts[i].needs_seek = 1;
}

/* ---- The step -------------------------------------------------------- */

static const char *malformed(const tm_machine *m, const tm_machine_event *ev) {
    if (ev->now_ms < m->now_ms)
        return "now_ms went back";
    if (m->take_out && ev->kind != TM_EV_TAKEN && ev->kind != TM_EV_RECORD_STOP)
        return "a TAKE is not answered yet (TAKEN or RECORD_STOP)";
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
    case TM_EV_TAKEN:
    case TM_EV_RECORD_STOP:
        if (!ev->topic)
            return "no topic";
        if (!m->take_out || ev->batch != m->building.id ||
            ev->partition != m->take_partition ||
            ev->offset != m->take_offset ||
            strcmp(ev->topic, m->take_topic) != 0)
            return "answers no TAKE out";
        return NULL;
    case TM_EV_ASSIGNED:
    case TM_EV_REVOKED:
    case TM_EV_LOST:
    case TM_EV_MARKERS_READ:
    case TM_EV_BATCH_DUE:
    case TM_EV_TIMER:
    case TM_EV_STOP:
    case TM_EV_GO_ON:
    case TM_EV_HOLD_READS: return NULL;
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
        /* A TAKE out when the host FAILED the connector is answered all
         * the same: leaving the group must not find it out. */
        if (ev->kind == TM_EV_TAKEN || ev->kind == TM_EV_RECORD_STOP)
            m->take_out = 0;
        /* ... and the batch the sink applied is applied, quietly. */
        if (ev->kind == TM_EV_SINK_ANSWER)
            tm_m_applied_failed(m, ev);
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
    case TM_EV_RECORD: tm_m_record(m, ev); break;
    case TM_EV_PARTITION_END: tm_m_partition_end(m, ev); break;
    case TM_EV_BATCH_DUE: tm_m_cut(m, 1); break;
    case TM_EV_TAKEN: tm_m_taken(m, ev); break;
    case TM_EV_RECORD_STOP: tm_m_record_stop(m, ev); break;
    case TM_EV_DLQ_SENT: tm_m_dlq_sent(m, ev); break;
    case TM_EV_SINK_ANSWER: tm_m_answer(m, ev); break;
    case TM_EV_SEEK_FAILED: {
        mpart *p = tm_m_part(m, ev->topic, ev->partition);
        if (p)
            p->needs_seek = 1;
        break;
    }
    case TM_EV_TIMER: on_timer(m); break;
    case TM_EV_STOP: on_stop(m, ev); break;
    case TM_EV_GO_ON: on_go_on(m); break;
    case TM_EV_HOLD_READS: tm_m_hold_reads(m); break;
    }
    /* A batch is cut once its last TAKE is answered (converted). */
    if (!m->failed && !m->take_out && ev->kind != TM_EV_TIMER &&
        ev->kind != TM_EV_STOP)
        tm_m_cut(m, 0);
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
    out->stopped = p->stopped;
    out->stop_at = p->stop_at;
    out->held = p->held;
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
    out->due = !which && tm_m_due(m);
    out->reads_paused = which && b->paused_parts;
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

void tm_machine_host_failed(tm_machine *m) {
    m->failed = 1;
}

int64_t tm_machine_due_ms(const tm_machine *m) {
    int64_t due = INT64_MAX;
    if (m->failed)
        return due;
    /* The batch being built is cut by age only once the sink is free. */
    if (m->building.phase == TM_BATCH_BUILDING &&
        m->at_sink.phase == TM_BATCH_NONE)
        due = m->building.opened_ms + m->cfg.max_wait_ms;
    if (m->at_sink.phase == TM_BATCH_RETRY_WAIT && m->at_sink.retry_at < due)
        due = m->at_sink.retry_at;
    return due;
}

const char *tm_machine_event_name(tm_machine_event_kind k) {
    static const char *const names[] = {
        "ASSIGNED", "REVOKED",       "LOST",        "CLAIMED", "MARKERS_READ",
        "RECORD",   "PARTITION_END", "BATCH_DUE",   "TAKEN",   "RECORD_STOP",
        "DLQ_SENT", "SINK_ANSWER",   "SEEK_FAILED", "TIMER",   "STOP",
        "GO_ON",    "HOLD_READS"};
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
