/* The connector core's state machine (host/commit/machine.h) against a
 * small reference model of Kafka (logs with holes, a group that revokes,
 * loses and gives back partitions, a consumer that prefetches) and of a sink
 * (markers, epochs, the marker check of host/commit/marker_check.c, answers
 * RETRY before or after applying, FATAL, INVALID; another host that claims
 * partitions and applies records). Thousands of random event sequences from
 * a printed seed, the invariants checked after every step:
 *
 *   two_at_sink        at most one batch at the sink
 *   dlq_order          with a dead-letter topic, a batch's dead letters are
 *                      delivered before its sink commit
 *   handed_twice       no offset handed to the sink again (in a new batch)
 *                      once the sink answered OK or ALREADY for it
 *   marker_backwards   the sink's marker, and the machine's committed offset
 *                      of a partition it keeps, never move back
 *   offsets_not_owned  group offsets only for partitions the group gives us
 *   offsets_ahead      group offsets never ahead of the sink's marker
 *   applied_twice      no offset applied twice (by this host or another)
 *   missed             at the end (all partitions back, no fault), every
 *                      offset of every log applied exactly once
 *   no_progress        ... and the end is reached
 *   unexpected_fail    FAILED only after an injected FATAL or INVALID
 *   past_stop          no batch handed to the sink covers a record the
 *                      converter refused with STOP (a stopped partition's
 *                      marker ends at the stop at most)
 *
 * TIDEMARK_MACHINE_SEED replays a run (each sequence prints nothing unless it
 * fails, then its own seed: replay it with TIDEMARK_MACHINE_SEQUENCES=1).
 * `--expect NAME` (the mutant builds, MACHINE_MUTANT in machine.c): passes
 * only when some sequence violates NAME. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit/machine.h"
#include "commit/marker_check.h"

#define MAXP   4
#define MAXLOG 512
#define MAXREC 1024
#define SLOTS  4
#define TOPIC  "m"

typedef struct mrange {
    int p;
    int64_t start, end, epoch;
} mrange;

typedef struct mbatch {
    uint64_t id; /* 0: free */
    int nr;
    mrange r[MAXP];
    int nrec;
    int rp[MAXREC];
    int64_t ro[MAXREC];
} mbatch;

#define TRACE 48
typedef struct tnote {
    int action, kind, has_part, status;
    int32_t partition;
    int64_t offset;
    uint64_t batch;
} tnote;

typedef struct world {
    uint64_t rng;
    int np, dlq, quiet;
    int64_t now;
    /* Kafka */
    int len[MAXP];
    unsigned char present[MAXP][MAXLOG];
    int ours[MAXP]; /* the group gives it to this host */
    int64_t pos[MAXP];
    int paused[MAXP];
    int64_t eof_at[MAXP];
    /* the sink */
    tm_marker mk[MAXP]; /* epoch TM_NO_EPOCH: none */
    unsigned char applied[MAXP][MAXLOG];
    int64_t epochs[MAXP];
    uint64_t writes; /* another host's batch ids */
    /* the executor's view */
    mbatch b[SLOTS];
    uint64_t at_sink; /* id, 0 none */
    uint64_t dlq_out, dlq_ok;
    uint64_t handed_max; /* the highest batch id handed to the sink */
    int64_t acked_end[MAXP];
    int64_t last_committed[MAXP]; /* -2: not kept by the machine */
    tm_machine_part_state was[MAXP];
    int was_held[MAXP];
    int64_t taken; /* the record of this step, -1 none */
    int claims[MAXP], nclaims;
    int64_t claim_from[MAXP];
    int reads[MAXP], nreads;
    int seekfail[MAXP], nseekfail;
    int fail_ok; /* a FATAL or INVALID was injected */
    int pausing; /* an operator's pause: STOP sent, GO_ON not yet */
    /* the converter: the record it answers STOP for (-1 none), until the
     * operator changes the table (settle_down); the TAKE it refused */
    int64_t poison[MAXP];
    int took, stop_p;
    int64_t stop_off;
    uint64_t stop_batch;
    tm_machine *m;
    char violation[64];
    char detail[512];
    tnote trace[TRACE];
    int ntrace;
} world;

/* What the sequences went through, so that a model that stopped exercising
 * something fails instead of passing vacuously. */
static struct {
    long answers[TM_INVALID + 1];
    long caught_up, failed, revoked_out, fenced, reclaimed, pipelined, deferred,
        holes_ended, stopped, held, split, paused, reads_held;
} seen;

static uint64_t rnd(world *w) {
    uint64_t x = w->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return w->rng = x;
}

static int pct(world *w, int p) {
    return (int)(rnd(w) % 100) < p;
}

static int64_t upto(world *w, int64_t n) {
    return n > 0 ? (int64_t)(rnd(w) % (uint64_t)n) : 0;
}

static void violate(world *w, const char *name, const char *fmt, ...) {
    if (w->violation[0])
        return;
    snprintf(w->violation, sizeof w->violation, "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->detail, sizeof w->detail, fmt, ap);
    va_end(ap);
}

/* The trace of the last steps, formatted only when a sequence fails. */
static void note(world *w, int action, int kind, const char *topic,
                 int32_t partition, int64_t offset, uint64_t batch, int st) {
    tnote *t = &w->trace[w->ntrace++ % TRACE];
    t->action = action;
    t->kind = kind;
    t->has_part = topic != NULL;
    t->partition = partition;
    t->offset = offset;
    t->batch = batch;
    t->status = st;
}

static void print_trace(const world *w) {
    int from = w->ntrace > TRACE ? w->ntrace - TRACE : 0;
    for (int i = from; i < w->ntrace; i++) {
        const tnote *t = &w->trace[i % TRACE];
        char part[32] = "";
        if (t->has_part)
            snprintf(part, sizeof part, " %s:%d", TOPIC, (int)t->partition);
        if (t->kind < 0)
            fprintf(stderr,
                    "    another host claims %d: epoch %" PRId64
                    " next %" PRIu64 "\n",
                    (int)t->partition, t->offset, t->batch);
        else if (t->action)
            fprintf(stderr, "      -> %s%s #%" PRIu64 " @%" PRId64 "\n",
                    tm_machine_action_name((tm_machine_action_kind)t->kind),
                    part, t->batch, t->offset);
        else
            fprintf(stderr, "    %s%s #%" PRIu64 " @%" PRId64 " %s\n",
                    tm_machine_event_name((tm_machine_event_kind)t->kind), part,
                    t->batch, t->offset, tm_status_name((tm_status)t->status));
    }
}

static int part_no(const char *topic, int32_t partition) {
    (void)topic;
    return (int)partition;
}

static mbatch *slot(world *w, uint64_t id, int make) {
    for (int i = 0; i < SLOTS; i++)
        if (w->b[i].id == id)
            return &w->b[i];
    if (!make)
        return NULL;
    for (int i = 0; i < SLOTS; i++)
        if (!w->b[i].id) {
            memset(&w->b[i], 0, sizeof w->b[i]);
            w->b[i].id = id;
            return &w->b[i];
        }
    violate(w, "two_at_sink", "more than two batches alive (batch %" PRIu64 ")",
            id);
    return NULL;
}

static void free_slot(world *w, uint64_t id) {
    mbatch *b = slot(w, id, 0);
    if (b)
        b->id = 0;
}

/* ---- the sink -------------------------------------------------------- */

static void apply_offsets(world *w, int p, int64_t from, int64_t to,
                          const char *who) {
    for (int64_t o = from; o < to && o < w->len[p]; o++) {
        if (!w->present[p][o])
            continue;
        if (w->applied[p][o]++)
            violate(w, "applied_twice", "%s applied %d@%" PRId64 " again", who,
                    p, o);
    }
}

static void move_marker(world *w, int p, int64_t next, const char *batch) {
    if (next < w->mk[p].next_offset)
        violate(w, "marker_backwards",
                "the sink's marker of %d from %" PRId64 " to %" PRId64, p,
                w->mk[p].next_offset, next);
    w->mk[p].next_offset = next;
    snprintf(w->mk[p].last_batch_id, sizeof w->mk[p].last_batch_id, "%s",
             batch);
}

/* Another host claims p (and maybe applies up to some point). */
static void other_host(world *w, int p) {
    if (w->mk[p].epoch == TM_NO_EPOCH)
        w->mk[p].next_offset = 0;
    w->mk[p].epoch = ++w->epochs[p];
    if (pct(w, 60)) {
        int64_t to = w->mk[p].next_offset +
                     upto(w, w->len[p] - w->mk[p].next_offset + 1);
        char id[32];
        snprintf(id, sizeof id, "other-%" PRIu64, ++w->writes);
        apply_offsets(w, p, w->mk[p].next_offset, to, "another host");
        move_marker(w, p, to, id);
    }
    note(w, 0, -1, NULL, p, w->mk[p].epoch, (uint64_t)w->mk[p].next_offset, 0);
}

static int sink_claim(world *w, int p, int64_t from) {
    if (w->mk[p].epoch == TM_NO_EPOCH)
        w->mk[p].next_offset = from >= 0 ? from : 0; /* earliest */
    w->mk[p].epoch = ++w->epochs[p];
    return 0;
}

/* The answer to the batch at the sink, decided when it is delivered. */
static tm_status sink_commit(world *w, const mbatch *b, tm_marker *reread,
                             int *markers_read) {
    tm_range ranges[MAXP];
    tm_marker stored[MAXP];
    for (int i = 0; i < b->nr; i++) {
        memset(&ranges[i], 0, sizeof ranges[i]);
        ranges[i].struct_size = sizeof ranges[i];
        ranges[i].topic = TOPIC;
        ranges[i].partition = b->r[i].p;
        ranges[i].start_offset = b->r[i].start;
        ranges[i].end_offset = b->r[i].end;
        ranges[i].epoch = b->r[i].epoch;
        stored[i] = w->mk[b->r[i].p];
    }
    char id[32];
    snprintf(id, sizeof id, "b-%" PRIu64, b->id);
    tm_batch batch;
    memset(&batch, 0, sizeof batch);
    batch.struct_size = sizeof batch;
    batch.batch_id = id;
    batch.ranges = ranges;
    batch.nranges = (size_t)b->nr;
    tm_error err = {sizeof err, ""};
    tm_status st = tm_marker_check(&batch, stored, &err);
    if (st == TM_INVALID)
        violate(w, "malformed", "batch %" PRIu64 ": %s", b->id, err.message);
    int roll = (int)(rnd(w) % 1000);
    if (!w->quiet && roll < 80)
        return TM_RETRY; /* before anything was applied */
    if (st == TM_OK) {
        for (int i = 0; i < b->nr; i++) {
            int p = b->r[i].p;
            for (int k = 0; k < b->nrec; k++)
                if (b->rp[k] == p) {
                    if (b->ro[k] < b->r[i].start || b->ro[k] >= b->r[i].end)
                        violate(w, "malformed",
                                "record %d@%" PRId64 " outside its range", p,
                                b->ro[k]);
                    if (w->applied[p][b->ro[k]]++)
                        violate(w, "applied_twice",
                                "batch %" PRIu64 " applied %d@%" PRId64
                                " again",
                                b->id, p, b->ro[k]);
                }
            move_marker(w, p, b->r[i].end, id);
        }
    }
    if (!w->quiet && roll < 120)
        return TM_RETRY; /* the outcome unknown: maybe applied */
    if (!w->quiet && roll < 123) {
        w->fail_ok = 1;
        return roll == 120 ? TM_INVALID : TM_FATAL;
    }
    *markers_read = !pct(w, 10);
    for (int i = 0; i < b->nr; i++)
        reread[i] = w->mk[b->r[i].p];
    return st;
}

/* ---- executing the actions ------------------------------------------- */

static void check_first_handoff(world *w, const mbatch *b) {
    if (b->id <= w->handed_max)
        return; /* the same batch again after RETRY */
    w->handed_max = b->id;
    for (int i = 0; i < b->nr; i++)
        if (b->r[i].start < w->acked_end[b->r[i].p])
            violate(w, "handed_twice",
                    "batch %" PRIu64 " hands %d from %" PRId64
                    ", the sink answered OK up to %" PRId64 " before",
                    b->id, b->r[i].p, b->r[i].start, w->acked_end[b->r[i].p]);
}

static void execute(world *w, const tm_machine_action *a) {
    int p = a->topic ? part_no(a->topic, a->partition) : -1;
    mbatch *b;
    switch (a->kind) {
    case TM_ACT_CLAIM:
        w->claims[w->nclaims] = p;
        w->claim_from[w->nclaims++] = a->offset;
        break;
    case TM_ACT_READ_MARKERS:
        w->reads[w->nreads++] = p;
        seen.reclaimed++;
        break;
    case TM_ACT_START:
        w->pos[p] = a->offset == TM_MACHINE_LOG_END ? w->len[p] : a->offset;
        w->eof_at[p] = -1;
        break;
    case TM_ACT_PAUSE: w->paused[p] = 1; break;
    case TM_ACT_RESUME: w->paused[p] = 0; break;
    case TM_ACT_SEEK:
        if (!w->quiet && pct(w, 5)) {
            w->seekfail[w->nseekfail++] = p;
            break;
        }
        w->pos[p] = a->offset;
        w->eof_at[p] = -1;
        break;
    case TM_ACT_RANGE:
        if (!(b = slot(w, a->batch, 1)))
            break;
        b->r[b->nr].p = p;
        b->r[b->nr].start = b->r[b->nr].end = a->offset;
        b->r[b->nr].epoch = a->epoch;
        if (a->range != (uint32_t)b->nr)
            violate(w, "malformed", "range index %u, want %d", a->range, b->nr);
        b->nr++;
        break;
    case TM_ACT_TAKE:
        if (!(b = slot(w, a->batch, 0)) || a->range >= (uint32_t)b->nr) {
            violate(w, "malformed", "TAKE into a range never opened");
            break;
        }
        if (a->offset != w->taken)
            violate(w, "malformed", "TAKE %" PRId64 ", delivered %" PRId64,
                    a->offset, w->taken);
        /* Answered after this step's actions (deliver_record): STOP at
         * the poisoned record, else converted. */
        w->took = 1;
        w->stop_p = a->offset == w->poison[p] ? p : -1;
        w->stop_off = a->offset;
        w->stop_batch = a->batch;
        b->r[a->range].end = a->offset + 1;
        if (b->nrec < MAXREC) {
            b->rp[b->nrec] = p;
            b->ro[b->nrec++] = a->offset;
        }
        break;
    case TM_ACT_EXTEND:
        if (!(b = slot(w, a->batch, 0)) || a->range >= (uint32_t)b->nr) {
            violate(w, "malformed", "EXTEND of a range never opened");
            break;
        }
        b->r[a->range].end = a->offset;
        break;
    case TM_ACT_DLQ_SEND: w->dlq_out = a->batch; break;
    case TM_ACT_SINK_COMMIT:
        if (w->at_sink)
            violate(w, "two_at_sink",
                    "batch %" PRIu64 " to the sink while %" PRIu64 " is there",
                    a->batch, w->at_sink);
        if (w->dlq && w->dlq_ok != a->batch)
            violate(w, "dlq_order",
                    "batch %" PRIu64 " to the sink before its dead letters",
                    a->batch);
        w->at_sink = a->batch;
        if ((b = slot(w, a->batch, 0))) {
            check_first_handoff(w, b);
            for (int i = 0; i < b->nr; i++) {
                int64_t o = w->poison[b->r[i].p];
                if (o >= b->r[i].start && o < b->r[i].end)
                    violate(w, "past_stop",
                            "batch %" PRIu64 " hands %d [%" PRId64 ", %" PRId64
                            "), the converter stopped at %" PRId64,
                            b->id, b->r[i].p, b->r[i].start, b->r[i].end, o);
            }
        }
        break;
    case TM_ACT_COMMIT_OFFSETS:
        if (!w->ours[p])
            violate(w, "offsets_not_owned",
                    "group offset %" PRId64 " for %d, not ours", a->offset, p);
        if (a->offset > w->mk[p].next_offset)
            violate(w, "offsets_ahead",
                    "group offset %" PRId64 " for %d, the marker at %" PRId64,
                    a->offset, p, w->mk[p].next_offset);
        break;
    case TM_ACT_DROP_BATCH:
        seen.split += a->why && strncmp(a->why, "past its deadline", 17) == 0;
        free_slot(w, a->batch);
        if (w->at_sink == a->batch)
            w->at_sink = 0;
        break;
    case TM_ACT_FAIL:
        if (!w->fail_ok)
            violate(w, "unexpected_fail", "FAILED: %s", a->why ? a->why : "?");
        break;
    case TM_ACT_WRITE_STATUS:
    case TM_ACT_DEGRADE: break;
    }
}

/* One event into the machine, its actions executed, the invariants on the
 * machine's own state checked. */
static void step(world *w, tm_machine_event *ev) {
    ev->now_ms = w->now;
    const tm_machine_action *a;
    size_t n;
    char err[256];
    note(w, 0, (int)ev->kind, ev->topic, ev->partition, ev->offset, ev->batch,
         (int)ev->status);
    if (tm_machine_step(w->m, ev, &a, &n, err, sizeof err) != 0) {
        violate(w, "malformed", "step refused: %s", err);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        note(w, 1, (int)a[i].kind, a[i].topic, a[i].partition, a[i].offset,
             a[i].batch, 0);
        execute(w, &a[i]);
    }
    if (ev->kind == TM_EV_SINK_ANSWER)
        seen.answers[ev->status]++;
    if (ev->kind == TM_EV_CLAIMED && ev->status == TM_RETRY)
        seen.deferred++;
    tm_machine_batch_view built, out;
    tm_machine_batch(w->m, 0, &built);
    tm_machine_batch(w->m, 1, &out);
    seen.stopped += ev->kind == TM_EV_RECORD_STOP;
    seen.pipelined +=
        built.phase != TM_BATCH_NONE && out.phase != TM_BATCH_NONE;
    seen.revoked_out +=
        (ev->kind == TM_EV_REVOKED || ev->kind == TM_EV_LOST) && out.abandoned;
    for (int p = 0; p < w->np; p++) {
        tm_machine_part_view v;
        tm_machine_part(w->m, TOPIC, p, &v);
        seen.fenced += v.state == TM_PART_FENCED && w->was[p] != TM_PART_FENCED;
        seen.held += v.held && !w->was_held[p];
        w->was_held[p] = v.held;
        w->was[p] = v.state;
        if (v.state != TM_PART_RUNNING) {
            if (v.state == TM_PART_ABSENT || v.state == TM_PART_CLAIMING)
                w->last_committed[p] = -2;
            continue;
        }
        if (w->last_committed[p] != -2 && v.committed < w->last_committed[p])
            violate(w, "marker_backwards",
                    "the machine's committed offset of %d from %" PRId64
                    " to %" PRId64,
                    p, w->last_committed[p], v.committed);
        w->last_committed[p] = v.committed;
    }
}

/* The claims and reads of the last step, answered at once: today they run
 * synchronously inside the rebalance callback or between polls. */
static void answer_claims(world *w) {
    while (w->nclaims || w->nreads || w->nseekfail) {
        tm_machine_event ev;
        tm_marker mk[MAXP];
        int64_t low[MAXP], high[MAXP];
        if (w->nclaims) {
            int n = w->nclaims;
            w->nclaims = 0;
            memset(&ev, 0, sizeof ev);
            ev.kind = TM_EV_CLAIMED;
            int roll = (int)upto(w, 100);
            ev.status = !w->quiet && roll < 10 ? TM_RETRY : TM_OK;
            if (!w->quiet && roll == 10) {
                ev.status = TM_FATAL;
                w->fail_ok = 1;
            }
            for (int i = 0; i < n; i++) {
                int p = w->claims[i];
                if (ev.status == TM_OK)
                    sink_claim(w, p, w->claim_from[i]);
                mk[i] = ev.status == TM_OK ? w->mk[p] : (tm_marker){0};
                mk[i].struct_size = sizeof mk[i];
                mk[i].topic = TOPIC;
                mk[i].partition = p;
                low[i] = 0;
                high[i] = w->len[p];
            }
            ev.markers = mk;
            ev.nmarkers = (size_t)n;
            ev.low = low;
            ev.high = high;
            ev.why = "claim failed";
            step(w, &ev);
            continue;
        }
        if (w->nreads) {
            int n = w->nreads;
            w->nreads = 0;
            memset(&ev, 0, sizeof ev);
            ev.kind = TM_EV_MARKERS_READ;
            ev.status = !w->quiet && pct(w, 10) ? TM_RETRY : TM_OK;
            for (int i = 0; i < n; i++) {
                mk[i] = w->mk[w->reads[i]];
                mk[i].topic = TOPIC;
                mk[i].partition = w->reads[i];
            }
            ev.markers = mk;
            ev.nmarkers = (size_t)n;
            step(w, &ev);
            continue;
        }
        int p = w->seekfail[--w->nseekfail];
        memset(&ev, 0, sizeof ev);
        ev.kind = TM_EV_SEEK_FAILED;
        ev.topic = TOPIC;
        ev.partition = p;
        step(w, &ev);
    }
}

/* ---- the world's moves ----------------------------------------------- */

static void deliver_answer(world *w) {
    mbatch *b = slot(w, w->at_sink, 0);
    tm_machine_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = TM_EV_SINK_ANSWER;
    ev.batch = w->at_sink;
    tm_marker reread[MAXP];
    int markers_read = 0;
    ev.status = b ? sink_commit(w, b, reread, &markers_read) : TM_RETRY;
    if (ev.status == TM_OK || ev.status == TM_ALREADY)
        for (int i = 0; b && i < b->nr; i++)
            if (b->r[i].end > w->acked_end[b->r[i].p])
                w->acked_end[b->r[i].p] = b->r[i].end;
    if (ev.status == TM_FENCED || ev.status == TM_CONFLICT) {
        ev.markers = reread;
        ev.nmarkers = b ? (size_t)b->nr : 0;
        ev.markers_read = markers_read;
        for (size_t i = 0; i < ev.nmarkers; i++) {
            reread[i].topic = TOPIC;
            reread[i].partition = b->r[i].p;
        }
    }
    ev.why = "the sink said so";
    uint64_t id = w->at_sink;
    w->at_sink = 0;
    if (ev.status != TM_RETRY)
        free_slot(w, id);
    step(w, &ev);
}

static void deliver_dlq(world *w) {
    tm_machine_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = TM_EV_DLQ_SENT;
    ev.batch = w->dlq_out;
    ev.status = !w->quiet && pct(w, 15) ? TM_RETRY : TM_OK;
    if (ev.status == TM_OK)
        w->dlq_ok = w->dlq_out;
    w->dlq_out = 0;
    step(w, &ev);
}

/* The consumer: the next record of p at or past its position, or its end
 * once (holes skipped: compaction, transaction markers). */
static int deliver_record(world *w, int p) {
    if (!w->ours[p])
        return 0;
    tm_machine_event ev;
    memset(&ev, 0, sizeof ev);
    ev.topic = TOPIC;
    ev.partition = p;
    int64_t o = w->pos[p];
    while (o < w->len[p] && !w->present[p][o])
        o++;
    if (o >= w->len[p]) {
        if (w->eof_at[p] == w->len[p])
            return 0;
        w->eof_at[p] = w->pos[p] = w->len[p];
        ev.kind = TM_EV_PARTITION_END;
        ev.offset = w->len[p];
    } else {
        ev.kind = TM_EV_RECORD;
        ev.offset = o;
        ev.bytes = 100 + upto(w, 400);
        w->pos[p] = o + 1;
        w->taken = o;
    }
    w->took = 0;
    step(w, &ev);
    w->taken = -1;
    if (w->took) {
        /* The TAKE answered: converted, or refused with STOP. */
        int32_t partition = ev.partition;
        memset(&ev, 0, sizeof ev);
        ev.kind = w->stop_p >= 0 ? TM_EV_RECORD_STOP : TM_EV_TAKEN;
        ev.status = TM_OK;
        ev.batch = w->stop_batch;
        ev.topic = TOPIC;
        ev.partition = partition;
        ev.offset = w->stop_off;
        ev.why = "a column narrowed";
        w->took = 0;
        w->stop_p = -1;
        step(w, &ev);
    }
    return 1;
}

static void produce(world *w, int p) {
    int n = 1 + (int)upto(w, 20);
    for (int i = 0; i < n && w->len[p] < MAXLOG; i++) {
        int64_t o = w->len[p]++;
        w->present[p][o] = (unsigned char)!pct(w, 15);
        /* Now and then an event the converter cannot apply safely. */
        if (!w->quiet && w->poison[p] < 0 && w->present[p][o] && pct(w, 2))
            w->poison[p] = o;
    }
}

static void group_event(world *w, tm_machine_event_kind kind, int only) {
    tm_machine_tp tps[MAXP];
    tm_machine_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = kind;
    for (int p = 0; p < w->np; p++) {
        int want = kind == TM_EV_ASSIGNED ? !w->ours[p] : w->ours[p];
        if (!want || (only >= 0 && p != only))
            continue;
        tps[ev.nparts].topic = TOPIC;
        tps[ev.nparts++].partition = p;
        w->ours[p] = kind == TM_EV_ASSIGNED;
        w->paused[p] = 0;
    }
    if (!ev.nparts)
        return;
    ev.parts = tps;
    step(w, &ev);
    /* The new owner claims now, or not yet: a batch of ours still at the
     * sink may then be applied (the marker check allows it). */
    if (kind != TM_EV_ASSIGNED)
        for (size_t i = 0; i < ev.nparts; i++)
            if (pct(w, 60))
                other_host(w, tps[i].partition);
}

static void timer(world *w, int64_t ms) {
    tm_machine_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = TM_EV_TIMER;
    w->now += ms;
    step(w, &ev);
}

/* An operator's pause: the batch out settles within the grace, nothing
 * is taken; then it goes on, every running partition read again. */
static void pause_or_go_on(world *w) {
    tm_machine_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = w->pausing ? TM_EV_GO_ON : TM_EV_STOP;
    ev.why = "pausing";
    w->pausing = !w->pausing;
    seen.paused += w->pausing;
    step(w, &ev);
}

static void random_move(world *w) {
    int roll = (int)upto(w, 100);
    int p = (int)upto(w, w->np);
    if (roll < 40) {
        if (!w->paused[p] || pct(w, 5)) /* prefetched while paused */
            deliver_record(w, p);
    } else if (roll < 55) {
        if (w->at_sink)
            deliver_answer(w);
    } else if (roll < 62) {
        if (w->dlq_out)
            deliver_dlq(w);
    } else if (roll < 75) {
        timer(w, 1 + upto(w, 400));
    } else if (roll < 83) {
        produce(w, p);
    } else if (roll < 87) {
        group_event(w, TM_EV_REVOKED, p);
    } else if (roll < 88) {
        group_event(w, TM_EV_LOST, -1);
    } else if (roll < 94) {
        group_event(w, TM_EV_ASSIGNED, p);
    } else if (roll < 95) {
        if (w->ours[p])
            other_host(w, p); /* a zombie's partition claimed elsewhere */
    } else if (roll < 97) {
        tm_machine_event ev;
        memset(&ev, 0, sizeof ev);
        ev.kind = TM_EV_BATCH_DUE;
        step(w, &ev);
    } else if (roll < 99) {
        /* The executor's poll rule: the next batch waits too long. */
        tm_machine_event ev;
        memset(&ev, 0, sizeof ev);
        ev.kind = TM_EV_HOLD_READS;
        seen.reads_held += w->at_sink != 0;
        step(w, &ev);
    } else {
        pause_or_go_on(w);
    }
    answer_claims(w);
}

/* All partitions given back, no more faults: the machine must apply every
 * record of every log exactly once. */
static int caught_up(world *w) {
    if (w->at_sink || w->dlq_out)
        return 0;
    tm_machine_batch_view bv;
    tm_machine_batch(w->m, 0, &bv);
    if (bv.phase != TM_BATCH_NONE)
        return 0;
    for (int p = 0; p < w->np; p++) {
        tm_machine_part_view v;
        tm_machine_part(w->m, TOPIC, p, &v);
        if (v.state != TM_PART_RUNNING || w->mk[p].next_offset != w->len[p] ||
            v.committed != w->len[p])
            return 0;
    }
    return 1;
}

static void settle_down(world *w) {
    w->quiet = 1;
    if (w->pausing)
        pause_or_go_on(w);
    /* The operator changes the target table and restarts: the stopped
     * partitions are claimed again and convert. */
    for (int p = 0; p < w->np; p++) {
        tm_machine_part_view v;
        tm_machine_part(w->m, TOPIC, p, &v);
        w->poison[p] = -1;
        if (v.stopped)
            group_event(w, TM_EV_REVOKED, p);
    }
    group_event(w, TM_EV_ASSIGNED, -1);
    answer_claims(w);
    for (int i = 0; i < 20000 && !w->violation[0]; i++) {
        if (tm_machine_failed(w->m)) {
            seen.failed++;
            return;
        }
        if (caught_up(w))
            break;
        int moved = 0;
        if (w->at_sink) {
            deliver_answer(w);
            moved = 1;
        } else if (w->dlq_out) {
            deliver_dlq(w);
            moved = 1;
        } else {
            for (int p = 0; p < w->np && !moved; p++)
                if (!w->paused[p])
                    moved = deliver_record(w, p);
        }
        if (!moved)
            timer(w, 200);
        answer_claims(w);
    }
    if (caught_up(w)) {
        seen.caught_up++;
        for (int p = 0; p < w->np; p++)
            seen.holes_ended += w->len[p] > 0 && !w->present[p][w->len[p] - 1];
    } else {
        violate(w, "no_progress",
                "not caught up after all partitions came "
                "back and faults stopped");
        return;
    }
    for (int p = 0; p < w->np; p++)
        for (int64_t o = 0; o < w->len[p]; o++)
            if (w->present[p][o] && w->applied[p][o] != 1)
                violate(w, "missed", "%d@%" PRId64 " applied %d times", p, o,
                        w->applied[p][o]);
}

/* One sequence from its own seed: 0 when every invariant held. */
static int sequence(uint64_t seed, const char *expect, int verbose) {
    world *w = calloc(1, sizeof *w);
    if (!w) {
        fprintf(stderr, "out of memory\n");
        return -1;
    }
    w->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    w->np = 1 + (int)upto(w, MAXP);
    w->dlq = pct(w, 50);
    w->taken = -1;
    w->stop_p = -1;
    for (int p = 0; p < w->np; p++)
        w->poison[p] = -1;
    for (int p = 0; p < w->np; p++) {
        produce(w, p);
        w->last_committed[p] = -2;
        w->eof_at[p] = -1;
        w->mk[p].struct_size = sizeof w->mk[p];
        w->mk[p].topic = TOPIC;
        w->mk[p].partition = p;
    }
    tm_machine_config cfg;
    tm_machine_config_defaults(&cfg);
    cfg.max_records = 1 + (int64_t)upto(w, 6);
    cfg.max_bytes = 400 + (int64_t)upto(w, 2000);
    cfg.max_wait_ms = 50 + (int64_t)upto(w, 500);
    cfg.fenced_bound_ms = 300 + (int64_t)upto(w, 1000);
    /* Short enough that a RETRY comes at it now and then: cut in half. */
    cfg.commit_deadline_ms = 100 + (int64_t)upto(w, 2000);
    cfg.retry_base_ms = 5;
    cfg.retry_max_ms = 200;
    cfg.claim_base_ms = 5;
    cfg.claim_max_ms = 200;
    cfg.dead_letter_topic = w->dlq;
    cfg.seed = seed;
    char err[256];
    w->m = tm_machine_new(&cfg, err, sizeof err);
    if (!w->m) {
        fprintf(stderr, "tm_machine_new: %s\n", err);
        free(w);
        return -1;
    }
    group_event(w, TM_EV_ASSIGNED, -1);
    answer_claims(w);
    int moves = 50 + (int)upto(w, 400);
    for (int i = 0; i < moves && !w->violation[0]; i++)
        random_move(w);
    if (!w->violation[0])
        settle_down(w);
    int bad = w->violation[0] != 0;
    int shown = bad && (!expect || strcmp(expect, w->violation) == 0);
    if (shown || verbose) {
        fprintf(stderr, "sequence seed %" PRIu64 ": %s: %s\n", seed,
                bad ? w->violation : "ok", bad ? w->detail : "");
        if (shown)
            print_trace(w);
    }
    int rc = bad ? (expect && strcmp(expect, w->violation) == 0 ? 1 : 2) : 0;
    tm_machine_free(w->m);
    free(w);
    return rc;
}

int main(int argc, char **argv) {
    const char *expect = NULL;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--expect") == 0 && i + 1 < argc)
            expect = argv[++i];
    const char *s = getenv("TIDEMARK_MACHINE_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 10)
                      : ((uint64_t)time(NULL) * 1000003u) ^ (uint64_t)clock();
    const char *n = getenv("TIDEMARK_MACHINE_SEQUENCES");
    long count = n ? strtol(n, NULL, 10) : 10000;
    fprintf(stderr, "machine model: seed %" PRIu64 ", %ld sequences%s%s\n",
            seed, count, expect ? ", expecting " : "", expect ? expect : "");
    long failures = 0, other = 0;
    for (long i = 0; i < count; i++) {
        int rc = sequence(seed + (uint64_t)i, expect, count == 1);
        if (rc < 0)
            return 2;
        if (expect && rc == 1) {
            fprintf(stderr, "caught: %s, as expected (sequence %ld)\n", expect,
                    i);
            return 0;
        }
        if (rc == 2 && expect)
            other++;
        if (rc != 0 && !expect && ++failures >= 3)
            break;
    }
    if (expect) {
        fprintf(stderr,
                "NOT caught: no sequence violated %s (%ld violated another "
                "invariant)\n",
                expect, other);
        return 1;
    }
    if (failures) {
        fprintf(stderr,
                "FAILED: %ld sequence(s) broke an invariant; replay "
                "one with TIDEMARK_MACHINE_SEED=<its seed> "
                "TIDEMARK_MACHINE_SEQUENCES=1\n",
                failures);
        return 1;
    }
    fprintf(stderr,
            "every invariant held in %ld sequences: %ld caught up at the "
            "end (%ld logs ending in a hole), %ld FAILED by an injected "
            "fault; answers OK %ld ALREADY %ld RETRY %ld FENCED %ld CONFLICT "
            "%ld FATAL %ld INVALID %ld; %ld revokes or losses while a batch "
            "was out, %ld pauses after FENCED, %ld fenced markers read again, "
            "%ld claims deferred, %ld steps with two batches, %ld "
            "partitions stopped, %ld held at their stop, %ld "
            "batches cut in half at their deadline, %ld pauses, %ld reads held "
            "while a batch was out\n",
            count, seen.caught_up, seen.holes_ended, seen.failed,
            seen.answers[TM_OK], seen.answers[TM_ALREADY],
            seen.answers[TM_RETRY], seen.answers[TM_FENCED],
            seen.answers[TM_CONFLICT], seen.answers[TM_FATAL],
            seen.answers[TM_INVALID], seen.revoked_out, seen.fenced,
            seen.reclaimed, seen.deferred, seen.pipelined, seen.stopped,
            seen.held, seen.split, seen.paused, seen.reads_held);
    /* Not vacuous: with a few hundred sequences or more, every answer and
     * every situation the invariants are about must have happened. */
    if (count >= 500) {
        long need[] = {seen.caught_up >= count / 2,
                       seen.answers[TM_OK],
                       seen.answers[TM_ALREADY],
                       seen.answers[TM_RETRY],
                       seen.answers[TM_FENCED],
                       seen.answers[TM_CONFLICT],
                       seen.answers[TM_FATAL],
                       seen.answers[TM_INVALID],
                       seen.revoked_out,
                       seen.fenced,
                       seen.reclaimed,
                       seen.deferred,
                       seen.pipelined,
                       seen.holes_ended,
                       seen.stopped,
                       seen.held,
                       seen.split,
                       seen.paused,
                       seen.reads_held};
        for (size_t i = 0; i < sizeof need / sizeof *need; i++)
            if (!need[i]) {
                fprintf(stderr,
                        "FAILED: the model no longer exercises "
                        "case %zu of the coverage list\n",
                        i);
                return 1;
            }
    }
    return 0;
}
