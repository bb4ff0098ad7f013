/* Step 4's calls, the executors of DLQ_SEND and SINK_COMMIT: the dead
 * letters delivered to their topic, the sink's commit, and the report of
 * what the sink answered (its message, the totals, the metrics). What an
 * answer means for the partitions is the connector core's to say
 * (commit/machine.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit/commit_internal.h"
#include "commit/commit_loop.h"
#include "commit/lineage.h"
#include "commit/poll_budget.h"
#include "kafka/dead_letter_producer.h"
#include "metrics/metrics_registry.h"
#include "runtime/restarts.h"
#include "runtime/sink_calls.h"
#include "services/error.h"
#include "services/log.h"

/* tm_dlq_send's context: its wait ends $.dead_letters.delivery_timeout_ms
 * after the send began, or earlier when the commit after it would end too
 * late for the consumer's next poll (commit/poll_budget.h), or at the
 * stop's deadline, asked again at every slice of the wait (a stop asked
 * during it counts). */
typedef struct dlq_ctx {
    tm_connector *c;
    int64_t until;
} dlq_ctx;

static int64_t dlq_left_ms(void *ctx) {
    const dlq_ctx *d = ctx;
    return tm_stop_bound_ms(d->c, d->until) - tm_now_ms();
}

/* The dead letters of a batch dropped after they reached the dead-letter
 * topic (a cut, FENCED, CONFLICT) come again with the rebuilt batch: sent
 * once is enough (the topic is at least once, not once per attempt). */
static int dlq_already_sent(void *ctx, const tm_range *r, int64_t offset) {
    tm_part *p = tm_conn_part(((dlq_ctx *)ctx)->c, r->topic, r->partition);
    return p && offset < p->dlq_sent_to;
}

static void dlq_mark_sent(tm_connector *c, const tm_batch *b) {
    for (size_t i = 0; i < b->nranges; i++) {
        const tm_range *r = TM_CELEM(tm_range, b->ranges, i);
        tm_part *p = tm_conn_part(c, r->topic, r->partition);
        if (p && r->end_offset > p->dlq_sent_to)
            p->dlq_sent_to = r->end_offset;
    }
}

/* After a fatal error of the dead-letter producer (FATAL, its reason):
 * every later produce would fail, the batch answer RETRY for ever. So it
 * is made again, as the consumer is after its own (runtime/connector.c),
 * and the batch retried; the fourth in a row, each within a minute of the
 * last, ends in FAILED. 0, or -1 when FAILED. */
static int dlq_renew(tm_connector *c, const char *fatal) {
    int in_row = tm_restarts_admit(c, &c->dlq_restarts,
                                   "the dead-letter producer", fatal);
    if (in_row < 0)
        return -1;
    char why[512];
    if (tm_dlq_renew(c->dlq, why, sizeof why) != 0) {
        tm_conn_error(c, 1,
                      "$.dead_letters.topic: %s (making the producer again "
                      "after its fatal error: %s)",
                      why, fatal);
        return -1;
    }
    tm_conn_log(c, TM_LOG_WARN, NULL, -1, c->batch_id,
                "dead-letter producer made again after a fatal error (%d in "
                "a row): %s",
                in_row, fatal);
    return 0;
}

/* Delivers the batch's dead letters to the topic, confirmed: 0, or -1
 * with err set (and the connector FAILED when its producer cannot be made
 * again). */
static int dlq_deliver(tm_connector *c, const tm_batch *built, tm_error *err) {
    char why[512];
    dlq_ctx ctx = {c, tm_poll_budget_dlq_until(c, tm_now_ms())};
    tm_conn_waiting(c, ctx.until,
                    "the dead-letter topic %s to confirm the %zu dead "
                    "letter(s) of batch %s",
                    c->cfg->dead_letters.topic, built->ndead_letters,
                    c->batch_id);
    int rc = tm_dlq_send(c->dlq, built, dlq_already_sent, dlq_left_ms, &ctx,
                         why, sizeof why);
    tm_conn_waiting(c, 0, NULL);
    if (rc == 0) {
        dlq_mark_sent(c, built);
        return 0;
    }
    char fatal[512];
    int is_fatal = tm_dlq_fatal(c->dlq, fatal, sizeof fatal);
    int over = tm_stop_grace_over(c);
    tm_error_set(err, "dead-letter topic: %s%s%s%s%s%s%s", why,
                 is_fatal ? " (the producer's fatal error: " : "",
                 is_fatal ? fatal : "", is_fatal ? ")" : "",
                 over ? " (the grace is over: " : "",
                 over ? tm_stop_kind(c) : "", over ? ")" : "");
    if (is_fatal)
        (void)dlq_renew(c, fatal);
    return -1;
}

/* The batch the action names, as built, its answer started (HOOK says
 * what the machine made of it); NULL (the answer FATAL) when its builder
 * has none. */
static const tm_batch *built_of(tm_connector *c, const tm_machine_action *act,
                                tm_answer *out, tm_answer_hook hook) {
    out->ev.batch = act->batch;
    out->hook = hook;
    tm_batch_builder *bb = tm_commit_builder(c, act->batch, 0);
    const tm_batch *built = bb ? tm_bb_batch(bb) : NULL;
    snprintf(c->batch_id, sizeof c->batch_id, "%s",
             tm_commit_batch_name(c, act->batch));
    if (!built || built->nranges == 0) {
        out->ev.status = TM_FATAL;
        snprintf(out->why, sizeof out->why,
                 "batch %s: its builder holds no batch", c->batch_id);
        out->ev.why = out->why;
        return NULL;
    }
    return built;
}

/* A batch settled (applied, or given up): what its dead letters left on
 * their way goes. */
static void settled_hook(tm_connector *c, const tm_answer *a,
                         const tm_machine_action *acts, size_t n) {
    (void)acts;
    (void)n;
    tm_machine_batch_view out;
    tm_machine_batch(c->m, 1, &out);
    if (c->dlq && (out.phase == TM_BATCH_NONE || out.id != a->ev.batch))
        tm_dlq_forget(c->dlq);
}

/* RETRY, and dead letters not delivered: the batch is tried again. */
static void report_retry(tm_connector *c, const char *message) {
    c->totals.retries++;
    tm_conn_error(c, 0, "batch %s: RETRY: %s", c->batch_id, message);
}

void tm_dlq_send_exec(tm_connector *c, const tm_machine_action *act,
                      tm_answer *out) {
    const tm_batch *built = built_of(c, act, out, settled_hook);
    if (!built)
        return;
    out->ev.status = TM_OK;
    /* Before the sink commit, confirmed: at-least-once into the topic,
     * never lost when the sink commit then succeeds. */
    if (!c->dlq || built->ndead_letters == 0)
        return;
    tm_poll_budget_warn(c);
    tm_error err = tm_error_init();
    if (dlq_deliver(c, built, &err) == 0)
        return;
    if (c->state == TM_CONN_FAILED) {
        /* Its producer could not be made again: the reason stays. */
        out->ev.status = TM_FATAL;
        snprintf(out->why, sizeof out->why, "%s", c->last_error);
        out->ev.why = out->why;
        return;
    }
    report_retry(c, err.message);
    out->ev.status = TM_RETRY;
    snprintf(out->why, sizeof out->why, "%s", err.message);
    out->ev.why = out->why;
}

/* One commit at the sink: the batch handed over (a shallow copy with its
 * own ranges), and what came back. Run on the sink's thread (the
 * pipeline); the connector's thread reports it once it is done. */
typedef struct commit_job {
    tm_connector *c;
    uint64_t batch;
    tm_batch b;
    void *ranges;
    tm_status st;
    tm_error err;
    uint64_t took_ns;
    /* After FENCED or CONFLICT: the sink's markers, read without
     * claiming, one per range. */
    tm_marker *markers;
    tm_status read_st;
    tm_error read_err;
} commit_job;

static void run_commit(void *arg) {
    commit_job *j = arg;
    const tm_sink_api *api = j->c->sink.api;
    void *sink = j->c->sink.sink;
    uint64_t t0 = tm_metrics_now_ns();
    j->st = api->commit(sink, &j->b, &j->err);
    j->took_ns = tm_metrics_now_ns() - t0;
    if (j->st != TM_FENCED && j->st != TM_CONFLICT)
        return;
    size_t n = j->b.nranges;
    j->markers = calloc(n ? n : 1, sizeof *j->markers);
    if (!j->markers) {
        j->read_st = TM_FATAL;
        snprintf(j->read_err.message, sizeof j->read_err.message,
                 "out of memory re-reading markers");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const tm_range *r = TM_CELEM(tm_range, j->b.ranges, i);
        j->markers[i].struct_size = sizeof j->markers[i];
        j->markers[i].topic = r->topic;
        j->markers[i].partition = r->partition;
    }
    j->read_st = api->read_markers(sink, j->markers, n, &j->read_err);
}

/* After FENCED or CONFLICT: the markers read again into the answer, for
 * the machine to say which partitions are still ours and where each goes
 * on. */
static void reread_markers(tm_connector *c, const commit_job *j,
                           tm_answer *out) {
    if (j->read_st != TM_OK) {
        /* Not knowing where to go on: start over from the last known
         * commit; the next batch's check will say again. */
        tm_log(TM_LOG_WARN, c->cfg->name, "read_markers: %s: %s",
               tm_status_name(j->read_st), j->read_err.message);
        return;
    }
    size_t n = j->b.nranges;
    if (tm_answer_markers(out, n, 0) != 0) {
        tm_log(TM_LOG_WARN, c->cfg->name,
               "read_markers: out of memory re-reading markers");
        return;
    }
    out->was_epoch = calloc(n ? n : 1, sizeof *out->was_epoch);
    for (size_t i = 0; i < n; i++) {
        out->markers[i] = j->markers[i];
        out->markers[i].topic = tm_answer_keep(out, j->markers[i].topic);
        if (!out->markers[i].topic) {
            out->ev.nmarkers = 0;
            return;
        }
        if (out->was_epoch) {
            const tm_part *p =
                tm_conn_part(c, j->markers[i].topic, j->markers[i].partition);
            out->was_epoch[i] = p ? p->epoch : TM_NO_EPOCH;
        }
    }
    out->ev.markers_read = 1;
}

/* The markers read again after FENCED or CONFLICT: each partition the
 * machine fenced now is said, as is what the applied batch counted. */
static void answer_hook(tm_connector *c, const tm_answer *a,
                        const tm_machine_action *acts, size_t n) {
    settled_hook(c, a, acts, n);
    for (size_t i = 0; a->ev.markers_read && i < a->ev.nmarkers; i++) {
        const tm_marker *mk = &a->ev.markers[i];
        tm_part *p = tm_conn_part(c, mk->topic, mk->partition);
        tm_machine_part_view v;
        tm_machine_part(c->m, mk->topic, mk->partition, &v);
        if (!p || v.state != TM_PART_FENCED || p->fenced)
            continue;
        /* Another host claimed it: ours no more. Paused, waiting for the
         * group to revoke it; claiming back here would start a fencing
         * war. */
        tm_conn_log(c, TM_LOG_WARN, p->topic, p->partition, c->batch_id,
                    "fenced: epoch %" PRId64 " is now %" PRId64
                    " (another host claimed it); paused until revoked, or "
                    "claimed again if no revoke comes within %" PRId64 " ms",
                    a->was_epoch ? a->was_epoch[i] : p->epoch, mk->epoch,
                    tm_fenced_bound_ms(c));
        p->fenced = 1;
    }
    for (size_t i = 0; a->ev.markers_read && i < a->ev.nmarkers; i++) {
        tm_part *p =
            tm_conn_part(c, a->ev.markers[i].topic, a->ev.markers[i].partition);
        if (p && !p->fenced) {
            p->marker = a->ev.markers[i];
            p->marker.topic = p->topic;
        }
    }
}

/* The host's counts of an applied batch: what the sink made of the
 * records it was handed (rows, dead letters, duplicates) is in its
 * markers. */
static void on_applied(tm_connector *c, tm_batch_builder *bb, const tm_batch *b,
                       tm_status st) {
    tm_bb_counts n;
    tm_bb_counts(bb, &n);
    if (st == TM_ALREADY)
        tm_conn_log(c, TM_LOG_INFO, NULL, -1, c->batch_id,
                    "batch %s was already applied (an earlier attempt's "
                    "commit went through)",
                    c->batch_id);
    c->totals.batches++;
    snprintf(c->last_batch_id, sizeof c->last_batch_id, "%s", c->batch_id);
    c->last_batch_ms = tm_wall_ms();
    c->last_batch_records = n.rows + n.dead_letters + n.filtered + n.duplicates;
    c->markers_dirty = 1;
    /* The sign of recovery after RETRY (the status's health says it at
     * its next write too): from now on records taken are one again (the
     * machine's TAKE flows), which must not say it first. */
    tm_conn_recovered(c, "a batch committed");
    uint64_t deletes = 0;
    for (size_t j = 0; j < b->nrecords; j++)
        deletes +=
            TM_RECORD_OP(TM_CELEM(tm_record, b->records, j)) == TM_OP_DELETE;
    tm_conn_log(c, TM_LOG_DEBUG, NULL, -1, c->batch_id,
                "committed: %zu range(s); handed to the sink %" PRIu64
                " records (%" PRIu64 " deletes); by the host %" PRIu64
                " dead letters, %" PRIu64 " filtered, %" PRIu64 " duplicates",
                b->nranges, n.rows, deletes, n.dead_letters, n.filtered,
                n.duplicates);
}

static void job_free(commit_job *j) {
    free(j->ranges);
    free(j->markers);
    free(j);
}

void tm_sink_commit_answer(tm_connector *c, void *job, tm_answer *out) {
    commit_job *j = job;
    out->ev.batch = j->batch;
    out->hook = answer_hook;
    snprintf(c->batch_id, sizeof c->batch_id, "%s",
             tm_commit_batch_name(c, j->batch));
    tm_conn_waiting(c, 0, NULL);
    tm_metrics_commit_observe(c->metrics, j->took_ns);
    tm_status st = j->st;
    out->ev.status = st;
    /* A connector FAILED meanwhile says nothing more of it. */
    if (c->state == TM_CONN_FAILED) {
        job_free(j);
        return;
    }
    switch (st) {
    case TM_OK:
    case TM_ALREADY:
        on_applied(c, tm_commit_builder(c, j->batch, 0), &j->b, st);
        break;
    case TM_RETRY: report_retry(c, j->err.message); break;
    case TM_FENCED:
        c->totals.fenced++;
        tm_conn_error(c, 0, "batch %s: FENCED: %s", c->batch_id,
                      j->err.message);
        reread_markers(c, j, out);
        break;
    case TM_CONFLICT:
        c->totals.conflicts++;
        tm_conn_error(c, 0, "batch %s: CONFLICT: %s", c->batch_id,
                      j->err.message);
        reread_markers(c, j, out);
        break;
    default:
        /* The machine FAILS the connector with this reason. */
        snprintf(out->why, sizeof out->why, "batch %s: %s: %s", c->batch_id,
                 tm_status_name(st),
                 j->err.message[0] ? j->err.message : "(no message)");
        out->ev.why = out->why;
        break;
    }
    job_free(j);
}

int tm_sink_commit_exec(tm_connector *c, const tm_machine_action *act,
                        tm_answer *out) {
    const tm_batch *built = built_of(c, act, out, answer_hook);
    if (!built)
        return 1;
    /* A shallow copy: the attempt's own deadline, and dead letters stay
     * out of the sink when $.dead_letters.sink is false. The ranges with
     * the lineage each marker keeps: the last record the batch carries for
     * the partition, even when dead letters stay out of the sink (they
     * were delivered all the same). */
    commit_job *j = calloc(1, sizeof *j);
    size_t rsize = built->ranges->struct_size;
    void *ranges = j ? malloc(built->nranges * rsize) : NULL;
    if (!ranges) {
        free(j);
        out->ev.status = TM_FATAL;
        snprintf(out->why, sizeof out->why, "batch %s: out of memory",
                 c->batch_id);
        out->ev.why = out->why;
        return 1;
    }
    j->c = c;
    j->batch = act->batch;
    j->b = *built;
    j->err = tm_error_init();
    j->read_err = tm_error_init();
    memcpy(ranges, built->ranges, built->nranges * rsize);
    tm_lineage_fill_ranges(ranges, built);
    j->ranges = ranges;
    j->b.ranges = ranges;
    if (!c->cfg->dead_letters.sink) {
        j->b.dead_letters = NULL;
        j->b.ndead_letters = 0;
    }
    tm_poll_budget_warn(c);
    /* The machine's deadline: the commit's, cut to the stop's grace once
     * stopping (the sink gives up by itself instead of waiting out a
     * lock); never past the consumer's next poll (commit/poll_budget.h). */
    int64_t until = tm_poll_budget_commit_until(c, tm_now_ms());
    j->b.deadline_ms =
        tm_stop_bound_ms(c, act->offset < until ? act->offset : until);
    tm_conn_waiting(c, j->b.deadline_ms,
                    "the sink's commit of batch %s (%zu records, %" PRId64
                    " ms at most)",
                    c->batch_id, j->b.nrecords, j->b.deadline_ms - tm_now_ms());
    /* On the sink's thread while this one polls and converts the next
     * batch; its answer is fed when it is done (commit_loop.c). */
    if (tm_sink_commit_start(c, run_commit, j) == 0)
        return 0;
    run_commit(j);
    tm_sink_commit_answer(c, j, out);
    return 1;
}
