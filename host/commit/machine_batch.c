/* The machine's batches (commit/machine.h): one being built, at most one
 * at the sink; records and partition ends into the first, the dead letters
 * and the sink commit of the second, and what each answer of the sink
 * means. Pure: every consequence is an action.
 *
 * MACHINE_MUTANT (tests only, tests/unit/CMakeLists.txt) breaks one rule on
 * purpose so that the model test shows its invariants catch it:
 *   1 an applied batch does not advance the partitions' committed offsets
 *   2 group offsets are committed for partitions no longer owned
 *   3 a batch goes to the sink while another is there
 *   4 the sink commit is asked before the dead letters are on the topic
 *   5 a partition end carries the marker one offset past the position
 *   6 a stopped partition's range is carried one past its stop
 *   7 (machine.c) going on after a pause reads nothing again */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit/machine_internal.h"

#ifndef MACHINE_MUTANT
#define MACHINE_MUTANT 0
#endif

/* A batch's action: its id, and its range when one is named. NULL when
 * memory ran out. */
static tm_machine_action *emit_batch(tm_machine *m, tm_machine_action_kind kind,
                                     const mbatch *b, uint32_t range,
                                     int64_t offset, const char *why) {
    tm_machine_action *a = tm_m_push(m, kind);
    if (!a)
        return NULL;
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
    return a;
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
void tm_m_drop(tm_machine *m, mbatch *b, const char *why) {
    if (b->phase == TM_BATCH_NONE)
        return;
    /* The batch built behind it continues it: never sent without it. */
    if (b == &m->at_sink)
        tm_m_drop(m, &m->building, "the batch before it was not applied");
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
    b->sent_ms = m->now_ms;
    b->deadline_ms = commit_deadline(m);
    emit_batch(m, TM_ACT_SINK_COMMIT, b, UINT32_MAX, b->deadline_ms, NULL);
}

int tm_m_due(const tm_machine *m) {
    const mbatch *b = &m->building;
    int64_t max_records = m->batch_cap ? m->batch_cap : m->cfg.max_records;
    return b->phase == TM_BATCH_BUILDING &&
           (b->messages >= max_records || b->bytes >= m->cfg.max_bytes ||
            m->now_ms - b->opened_ms >= m->cfg.max_wait_ms || m->stopping ||
            b->due_asked);
}

/* Hands the batch being built to the sink when it is due and the sink is
 * free: one batch at the sink at a time. */
void tm_m_cut(tm_machine *m, int forced) {
    if (m->building.phase != TM_BATCH_BUILDING)
        return;
    if (forced)
        m->building.due_asked = 1; /* kept while the sink is busy */
    if (!tm_m_due(m))
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
void tm_m_settle(tm_machine *m, int applied) {
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
        tm_m_cut(m, 0);
}

/* HOLD_READS: nothing more is taken while the batch at the sink commits,
 * so that the consumer can be polled meanwhile; tm_m_settle resumes (as
 * after RETRY's backpressure, whose flag this is). */
void tm_m_hold_reads(tm_machine *m) {
    mbatch *b = &m->at_sink;
    if (b->phase == TM_BATCH_NONE || b->paused_parts || m->failed)
        return;
    tm_m_parts_pause_all(m, 1);
    b->paused_parts = MACHINE_MUTANT != 8;
}

/* After a cut, the cap doubles back towards max_records with each batch
 * that committed in under a third of the deadline (twice the records
 * would still fit); a slower one keeps it, so a cap near what fits does
 * not swing between passing and missing the deadline. */
static void grow_back(tm_machine *m, const mbatch *b) {
    if (!m->batch_cap ||
        (m->now_ms - b->sent_ms) * 3 >= m->cfg.commit_deadline_ms)
        return;
    m->batch_cap *= 2;
    if (m->batch_cap >= m->cfg.max_records)
        m->batch_cap = 0;
}

/* The partitions of the batch applied at the sink (still ours) committed
 * to its ends; with EMIT, their group offsets asked. */
static void advance(tm_machine *m, const mbatch *b, int emit) {
    for (size_t i = 0; i < b->nranges; i++) {
        const mrange *r = &b->ranges[i];
        mpart *p = tm_m_part_of(m, r);
        if (!tm_m_part_owned(p)) {
            if (emit && MACHINE_MUTANT == 2 &&
                (p = tm_m_part(m, r->topic, r->partition)) != NULL)
                tm_m_emit(m, TM_ACT_COMMIT_OFFSETS, p, r->end, NULL);
            continue; /* revoked or lost while at the sink */
        }
        if (r->end > p->committed && MACHINE_MUTANT != 1)
            p->committed = r->end;
        /* After the sink, for lag tools only. */
        if (emit)
            tm_m_emit(m, TM_ACT_COMMIT_OFFSETS, p, r->end, NULL);
    }
}

void tm_m_applied_failed(tm_machine *m, const tm_machine_event *ev) {
    if (m->at_sink.phase == TM_BATCH_AT_SINK && ev->batch == m->at_sink.id &&
        (ev->status == TM_OK || ev->status == TM_ALREADY))
        advance(m, &m->at_sink, 0);
}

static void applied(tm_machine *m) {
    mbatch *b = &m->at_sink;
    grow_back(m, b);
    m->sink_degraded = 0; /* a committed batch is a sign of recovery */
    advance(m, b, 1);
    m->conflicts_in_row = 0;
    tm_m_settle(m, 1);
}

/* A commit that used up its whole deadline may need more time than any
 * deadline gives (a table that refuses many rows one at a time, a slow
 * trigger): sent again whole, it would run out again, for ever. So the
 * batch is dropped and rebuilt from the markers with half its records, down
 * to one; grow_back doubles the cap again. A store that is merely locked
 * costs smaller batches for a while, no more. 1 when the batch was
 * dropped. */
static int cut_in_half(tm_machine *m, mbatch *b) {
    if (m->now_ms < b->deadline_ms || b->messages < 2)
        return 0;
    m->batch_cap = b->messages / 2;
    char why[160];
    snprintf(why, sizeof why,
             "past its deadline with %" PRId64 " records: rebuilt with at "
             "most %" PRId64,
             b->messages, m->batch_cap);
    tm_m_drop(m, b, why);
    tm_m_settle(m, 0);
    return 1;
}

/* RETRY (or dead letters not delivered: called 0): the same batch again
 * after a backoff, unless the stop's grace is spent, the sink's call ran
 * out of its deadline, or the batch was abandoned. The executor reports
 * the sink's own message. */
static void on_retry(tm_machine *m, int called) {
    mbatch *b = &m->at_sink;
    m->sink_degraded = 1;
    /* Whatever was built behind it is read again after the answer. */
    tm_m_drop(m, &m->building, "the batch before it was not applied");
    if (m->stopping && m->now_ms >= m->give_up_ms) {
        char why[64];
        snprintf(why, sizeof why, "giving up retries while %s", m->stop_why);
        tm_m_drop(m, b, why);
        tm_m_settle(m, 0);
        return;
    }
    if (called && cut_in_half(m, b))
        return;
    if (b->abandoned) {
        tm_m_drop(m, b, "partitions revoked during retries");
        tm_m_settle(m, 0);
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
    /* Stopping: the wait ends with the grace, the last attempt there. */
    if (m->stopping && b->retry_at > m->give_up_ms)
        b->retry_at = m->give_up_ms;
}

void tm_m_answer(tm_machine *m, const tm_machine_event *ev) {
    mbatch *b = &m->at_sink;
    switch (ev->status) {
    case TM_OK:
    case TM_ALREADY: applied(m); return;
    case TM_RETRY: on_retry(m, 1); return;
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
        tm_m_drop(m, &m->building, "the batch before it was not applied");
        if (ev->markers_read)
            tm_m_parts_reread(m, b, ev->markers, ev->nmarkers);
        tm_m_drop(m, b,
                  ev->status == TM_FENCED
                      ? "fenced"
                      : "conflict: rebuilding from the markers");
        tm_m_settle(m, 0);
        return;
    default:
        tm_m_fail(m, NULL, ev->why ? ev->why : tm_status_name(ev->status));
        tm_m_drop(m, &m->building, "failed");
        tm_m_drop(m, b, "failed");
        tm_m_settle(m, 0);
        return;
    }
}

/* ---- Records --------------------------------------------------------- */

/* Carries P's range of the batch being built (opened if need be) to END
 * without a record: offsets without one (transaction markers, aborted
 * records), or everything before a stop. Never backwards. */
static void extend_to(tm_machine *m, mpart *p, int64_t end) {
    if (end <= p->next_expected)
        return;
    int r = range_for(m, p);
    if (r < 0)
        return;
    emit_batch(m, TM_ACT_EXTEND, &m->building, (uint32_t)r, end, NULL);
    m->building.ranges[r].end = end;
    p->next_expected = end;
}

/* Whether the record (or end) at OFFSET of a stopped P is refused: at or
 * past its stop. The first one also carries P's range up to the stop
 * (delivered in order from next_expected, every offset below it was read)
 * and pauses P there, so that its marker ends at the stop exactly. */
static int stop_refuses(tm_machine *m, mpart *p, int64_t offset) {
    if (!p->stopped || offset < p->stop_at)
        return 0;
    if (!p->held) {
        extend_to(m, p, p->stop_at + (MACHINE_MUTANT == 6));
        tm_m_emit(m, TM_ACT_PAUSE, p, 0, NULL);
        p->held = 1;
        /* Resumed only after a seek back to next_expected: what was
         * fetched before the pause is not to be taken. */
        p->needs_seek = 1;
    }
    return 1;
}

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

void tm_m_record(tm_machine *m, const tm_machine_event *ev) {
    mpart *p = taking(m, ev);
    if (!p || stop_refuses(m, p, ev->offset) || ev->offset < p->next_expected)
        return; /* delivered again after a seek */
    int r = range_for(m, p);
    if (r < 0)
        return;
    tm_machine_action *take =
        emit_batch(m, TM_ACT_TAKE, &m->building, (uint32_t)r, ev->offset, NULL);
    if (take)
        take->flows = !m->sink_degraded;
    /* Answered (TAKEN or RECORD_STOP) before anything else happens. */
    m->take_out = 1;
    m->take_topic = p->topic;
    m->take_partition = p->partition;
    m->take_offset = ev->offset;
    m->building.ranges[r].end = ev->offset + 1;
    m->building.messages++;
    m->building.bytes += ev->bytes > 0 ? ev->bytes : 0;
    p->next_expected = ev->offset + 1;
}

/* The position may be past the last record (transaction markers, aborted
 * records): an empty range carries the marker there. */
void tm_m_partition_end(tm_machine *m, const tm_machine_event *ev) {
    mpart *p = taking(m, ev);
    if (!p || stop_refuses(m, p, ev->offset))
        return;
    if (ev->offset > p->high_watermark)
        p->high_watermark = ev->offset;
    if (ev->offset <= p->next_expected)
        return;
    extend_to(m, p, ev->offset + (MACHINE_MUTANT == 5));
}

/* The builder converted the record, or failed (out of memory): FAILED. */
void tm_m_taken(tm_machine *m, const tm_machine_event *ev) {
    m->take_out = 0;
    if (ev->status == TM_OK)
        return;
    tm_m_fail(m, NULL, ev->why ? ev->why : tm_status_name(ev->status));
    tm_m_drop(m, &m->building, "failed");
}

/* The converter refused the record at offset with STOP (a change it cannot
 * apply safely: docs/operations.md, "A stopped partition"). Not FAILED:
 * the other partitions go on, and the status stays DEGRADED for as long as
 * the stop lasts. The batch holds P's records before it and the other
 * partitions' records, but the builder refused it: the batch is read again,
 * this time bounded by the stop. */
void tm_m_record_stop(tm_machine *m, const tm_machine_event *ev) {
    m->take_out = 0;
    mpart *p = tm_m_part(m, ev->topic, ev->partition);
    if (p) {
        p->stopped = 1;
        p->held = 0;
        p->stop_at = ev->offset;
        char why[1024];
        snprintf(why, sizeof why,
                 "%s [%" PRId32 "] stopped at offset %" PRId64
                 ": %s; nothing at or past it is committed, the other "
                 "partitions go on: change the target table (or list the "
                 "columns in $.mapping) and restart",
                 p->topic, p->partition, ev->offset, ev->why ? ev->why : "?");
        tm_m_emit(m, TM_ACT_DEGRADE, p, 0, why);
    }
    tm_m_drop(m, &m->building, "a partition stopped");
}

/* TIMER: the next attempt after RETRY's backoff, a batch due by age. */
void tm_m_batch_timer(tm_machine *m) {
    mbatch *b = &m->at_sink;
    if (b->phase == TM_BATCH_RETRY_WAIT && m->now_ms >= b->retry_at) {
        if (b->abandoned) {
            tm_m_drop(m, b, "partitions revoked during retries");
            tm_m_settle(m, 0);
        } else {
            attempt(m);
        }
    }
    tm_m_cut(m, 0);
}

void tm_m_dlq_sent(tm_machine *m, const tm_machine_event *ev) {
    if (m->at_sink.abandoned) {
        /* A batch never outlives the assignment of its partitions. */
        tm_m_drop(m, &m->at_sink, "partitions revoked");
        tm_m_settle(m, 0);
    } else if (ev->status == TM_OK) {
        m->at_sink.dlq_sent = 1;
        attempt(m);
    } else {
        on_retry(m, 0);
    }
}
