/* Step 4's call and step 6's outcomes: the one place that decides what a
 * sink's answer to commit() means for the partitions of the batch. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit/claim.h"
#include "commit/commit_internal.h"
#include "commit/commit_loop.h"
#include "commit/lineage.h"
#include "commit/poll_budget.h"
#include "kafka/consumer_ops.h"
#include "kafka/dead_letter_producer.h"
#include "metrics/metrics_registry.h"
#include "runtime/restarts.h"
#include "services/error.h"
#include "services/log.h"

/* CONFLICT after CONFLICT means the rebuild does not converge (something
 * else writes the markers): stop rather than spin. */
#define MAX_CONFLICTS_IN_ROW 5

void tm_commit_pause_all(tm_connector *c, int pause) {
    tm_kafka_tp *v = calloc(c->nparts ? c->nparts : 1, sizeof *v);
    if (!v)
        return;
    size_t n = 0;
    for (size_t i = 0; i < c->nparts; i++) {
        tm_part *p = &c->parts[i];
        if (p->fenced || p->stop_held || p->paused == pause)
            continue;
        v[n].topic = p->topic;
        v[n++].partition = p->partition;
        p->paused = pause;
        if (!pause)
            p->needs_seek = 1; /* whatever was fetched before the pause */
    }
    char why[256];
    if (tm_kafka_set_paused(c->rk, v, n, pause, why, sizeof why) != 0)
        tm_log(TM_LOG_WARN, c->cfg->name, "%s: %s", pause ? "pause" : "resume",
               why);
    free(v);
}

void tm_commit_drop_batch(tm_connector *c, const char *why) {
    if (!c->batch_open)
        return;
    const tm_batch *b = tm_bb_batch(c->bb);
    for (size_t i = 0; b && i < b->nranges; i++) {
        const tm_range *r = TM_CELEM(tm_range, b->ranges, i);
        tm_part *p = tm_conn_part(c, r->topic, r->partition);
        if (!p)
            continue;
        p->next_expected = p->committed;
        p->needs_seek = 1;
    }
    /* A builder that failed (a record it refused: commit/part_stop.c)
     * gives no ranges; a partition read past its commit had one. */
    for (size_t i = 0; !b && i < c->nparts; i++) {
        tm_part *p = &c->parts[i];
        if (p->next_expected == p->committed)
            continue;
        p->next_expected = p->committed;
        p->needs_seek = 1;
    }
    tm_conn_log(c, TM_LOG_INFO, NULL, -1, c->batch_id, "batch dropped (%s)",
                why);
    c->batch_open = 0;
    c->batch_abandoned = 0;
}

/* After FENCED or CONFLICT: the sink's markers, read without claiming,
 * say which partitions are still ours and where each must go on. */
static void reread_markers(tm_connector *c, const tm_batch *b) {
    tm_marker *m = calloc(b->nranges ? b->nranges : 1, sizeof *m);
    if (!m) {
        tm_conn_error(c, 1, "out of memory re-reading markers");
        return;
    }
    for (size_t i = 0; i < b->nranges; i++) {
        const tm_range *r = TM_CELEM(tm_range, b->ranges, i);
        m[i].struct_size = sizeof m[i];
        m[i].topic = r->topic;
        m[i].partition = r->partition;
    }
    tm_error err = tm_error_init();
    tm_status st = c->sink.api->read_markers(c->sink.sink, m, b->nranges, &err);
    if (st != TM_OK) {
        /* Not knowing where to go on: start over from the last known
         * commit; the next batch's check will say again. */
        tm_log(TM_LOG_WARN, c->cfg->name, "read_markers: %s: %s",
               tm_status_name(st), err.message);
        free(m);
        return;
    }
    for (size_t i = 0; i < b->nranges; i++) {
        tm_part *p = tm_conn_part(c, m[i].topic, m[i].partition);
        if (!p)
            continue;
        if (m[i].epoch == TM_NO_EPOCH) {
            tm_claim_marker_lost(c, p->topic, p->partition);
            break;
        }
        if (m[i].epoch != p->epoch) {
            /* Another host claimed it: ours no more. Pause it and wait for
             * the group to revoke it; claiming back here would start a
             * fencing war. */
            if (!p->fenced) {
                tm_kafka_tp tp = {p->topic, p->partition, 0, NULL};
                char why[256];
                (void)tm_kafka_set_paused(c->rk, &tp, 1, 1, why, sizeof why);
                tm_conn_log(c, TM_LOG_WARN, p->topic, p->partition, c->batch_id,
                            "fenced: epoch %" PRId64 " is now %" PRId64
                            " (another host claimed it); paused until "
                            "revoked, or claimed again if no revoke "
                            "comes within %" PRId64 " ms",
                            p->epoch, m[i].epoch, tm_fenced_bound_ms(c));
                p->fenced_ms = tm_now_ms();
                p->fenced_marker = m[i];
                p->fenced_marker.topic = p->topic;
                c->any_fenced = 1;
            }
            p->fenced = 1;
            continue;
        }
        p->committed = p->next_expected = m[i].next_offset;
        p->needs_seek = 1;
        p->marker = m[i];
        p->marker.topic = p->topic;
    }
    free(m);
}

static void commit_group_offsets(tm_connector *c, const tm_batch *b) {
    tm_kafka_tp *v = calloc(b->nranges ? b->nranges : 1, sizeof *v);
    if (!v)
        return;
    size_t n = 0;
    for (size_t i = 0; i < b->nranges; i++) {
        const tm_range *r = TM_CELEM(tm_range, b->ranges, i);
        if (tm_conn_part(c, r->topic, r->partition))
            v[n++] = (tm_kafka_tp){r->topic, r->partition, r->end_offset, NULL};
    }
    /* Asynchronous and best effort: only lag tools read these. */
    char why[256];
    if (tm_kafka_commit_offsets(c->rk, v, n, why, sizeof why) != 0)
        tm_log(TM_LOG_DEBUG, c->cfg->name, "group offset commit: %s", why);
    free(v);
}

static void on_applied(tm_connector *c, const tm_batch *b, tm_status st) {
    tm_bb_counts n;
    tm_bb_counts(c->bb, &n);
    uint64_t records = 0;
    for (size_t i = 0; i < b->nranges; i++) {
        const tm_range *r = TM_CELEM(tm_range, b->ranges, i);
        tm_part *p = tm_conn_part(c, r->topic, r->partition);
        if (p && r->end_offset > p->committed)
            p->committed = r->end_offset;
    }
    records = n.rows + n.dead_letters + n.filtered + n.duplicates;
    if (st == TM_ALREADY) {
        tm_conn_log(c, TM_LOG_INFO, NULL, -1, c->batch_id,
                    "batch %s was already applied (an earlier attempt's "
                    "commit went through)",
                    c->batch_id);
    }
    c->totals.batches++;
    snprintf(c->last_batch_id, sizeof c->last_batch_id, "%s", c->batch_id);
    c->last_batch_ms = tm_wall_ms();
    c->last_batch_records = records;
    c->conflicts_in_row = 0;
    c->markers_dirty = 1;

    /* The host's own counts: what the sink made of the records it was
     * handed (rows, dead letters, duplicates) is in its markers. */
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
    commit_group_offsets(c, b);
}

/* A commit that used up its whole deadline may need more time than any
 * deadline gives (a table that refuses many rows one at a time, a slow
 * trigger): sent again whole, it would run out again, for ever. So the
 * batch is dropped and rebuilt from the markers with half its records, down
 * to one; each committed batch doubles the cap back towards max_records.
 * A store that is merely locked costs smaller batches for a while, no more.
 * 1 when the batch was dropped. */
static int cut_in_half(tm_connector *c, const tm_batch *b, int called) {
    size_t records = tm_bb_messages(c->bb);
    if (!called || tm_now_ms() < b->deadline_ms || records < 2)
        return 0;
    c->batch_cap = (int64_t)(records / 2);
    char why[160];
    snprintf(why, sizeof why,
             "past its deadline with %zu records: rebuilt with at most "
             "%" PRId64,
             records, c->batch_cap);
    tm_commit_drop_batch(c, why);
    return 1;
}

/* After a cut, the cap doubles back towards max_records with each batch
 * that committed in under a third of the deadline (twice the records
 * would still fit); a slower one keeps it, so a cap near what fits does
 * not swing between passing and missing the deadline. */
static void grow_back(tm_connector *c, uint64_t took_ns) {
    if (!c->batch_cap ||
        took_ns / 1000000 * 3 >= (uint64_t)c->cfg->batch.commit_timeout_ms)
        return;
    c->batch_cap *= 2;
    if (c->batch_cap >= c->cfg->batch.max_records)
        c->batch_cap = 0;
}

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

void tm_commit_batch(tm_connector *c) {
    if (!c->batch_open)
        return;
    const tm_batch *built = tm_bb_batch(c->bb);
    if (!built || built->nranges == 0) {
        c->batch_open = 0;
        return;
    }
    /* A shallow copy: each attempt gets its own deadline, and dead letters
     * stay out of the sink when $.dead_letters.sink is false. */
    tm_batch b = *built;
    /* The ranges with the lineage each marker keeps: the last record the
     * batch carries for the partition, even when dead letters stay out of
     * the sink (they were delivered all the same). */
    size_t rsize = built->ranges->struct_size;
    void *ranges = malloc(built->nranges * rsize);
    if (!ranges) {
        tm_conn_error(c, 1, "batch %s: out of memory", c->batch_id);
        tm_commit_drop_batch(c, "out of memory");
        c->batch_open = 0;
        return;
    }
    memcpy(ranges, built->ranges, built->nranges * rsize);
    tm_lineage_fill_ranges(ranges, built);
    b.ranges = ranges;
    if (!c->cfg->dead_letters.sink) {
        b.dead_letters = NULL;
        b.ndead_letters = 0;
    }
    int paused = 0, applied = 0,
        dlq_sent = !c->dlq || built->ndead_letters == 0;
    tm_backoff_reset(&c->backoff);
    tm_poll_budget_warn(c);
    for (;;) {
        tm_status st;
        tm_error err = tm_error_init();
        /* Before the sink commit, confirmed: at-least-once into the
         * topic, never lost when the sink commit then succeeds. */
        if (!dlq_sent)
            dlq_sent = dlq_deliver(c, built, &err) == 0;
        if (c->state == TM_CONN_FAILED) {
            /* its producer could not be made again: the reason stays */
            tm_commit_drop_batch(c, "failed");
            break;
        }
        if (dlq_sent) {
            /* Stopping cuts the deadline to the stop's grace: the sink
             * gives up by itself instead of waiting out a lock. Never
             * past the consumer's next poll (commit/poll_budget.h). */
            b.deadline_ms = tm_stop_bound_ms(
                c, tm_poll_budget_commit_until(c, tm_now_ms()));
            tm_conn_waiting(c, b.deadline_ms,
                            "the sink's commit of batch %s (%zu records, "
                            "%" PRId64 " ms at most)",
                            c->batch_id, b.nrecords,
                            b.deadline_ms - tm_now_ms());
            uint64_t t0 = tm_metrics_now_ns();
            st = c->sink.api->commit(c->sink.sink, &b, &err);
            uint64_t took_ns = tm_metrics_now_ns() - t0;
            tm_conn_waiting(c, 0, NULL);
            tm_metrics_commit_observe(c->metrics, took_ns);
            if (st == TM_OK || st == TM_ALREADY)
                grow_back(c, took_ns);
        } else {
            st = TM_RETRY;
        }
        if (st == TM_OK || st == TM_ALREADY) {
            on_applied(c, &b, st);
            applied = 1;
            break;
        }
        if (st == TM_RETRY) {
            c->totals.retries++;
            tm_conn_error(c, 0, "batch %s: RETRY: %s", c->batch_id,
                          err.message);
            c->degraded_by_sink = 1;
            if (tm_stop_grace_over(c)) {
                char why[64];
                snprintf(why, sizeof why, "giving up retries while %s",
                         tm_stop_kind(c));
                tm_commit_drop_batch(c, why);
                break;
            }
            if (cut_in_half(c, &b, dlq_sent))
                break;
            if (!paused) {
                /* Backpressure: nothing more is fetched while we wait,
                 * but the consumer is served so the group keeps us. */
                tm_commit_pause_all(c, 1);
                paused = 1;
            }
            /* The backoff ends at the stop's deadline, and when a stop is
             * asked during it: the next attempt has the rest of the grace,
             * then the batch goes. */
            tm_commit_serve(c, tm_backoff_next(&c->backoff));
            if (c->batch_abandoned || c->state == TM_CONN_FAILED) {
                tm_commit_drop_batch(c, "partitions revoked during retries");
                break;
            }
            continue;
        }
        if (st == TM_FENCED) {
            c->totals.fenced++;
            tm_conn_error(c, 0, "batch %s: FENCED: %s", c->batch_id,
                          err.message);
            reread_markers(c, &b);
            tm_commit_drop_batch(c, "fenced");
            break;
        }
        if (st == TM_CONFLICT) {
            c->totals.conflicts++;
            c->conflicts_in_row++;
            tm_conn_error(c, c->conflicts_in_row >= MAX_CONFLICTS_IN_ROW,
                          "batch %s: CONFLICT (%d in a row): %s", c->batch_id,
                          c->conflicts_in_row, err.message);
            reread_markers(c, &b);
            tm_commit_drop_batch(c, "conflict: rebuilding from the markers");
            break;
        }
        tm_conn_error(c, 1, "batch %s: %s: %s", c->batch_id, tm_status_name(st),
                      err.message[0] ? err.message : "(no message)");
        tm_commit_drop_batch(c, "failed");
        break;
    }
    free(ranges);
    c->batch_open = 0;
    if (c->dlq)
        tm_dlq_forget(c->dlq); /* what a batch given up left on its way */
    if (paused && c->state != TM_CONN_FAILED)
        tm_commit_pause_all(c, 0);
    /* An applied batch reaches the status file with the next periodic
     * write (at least every second). Forced after every commit, the write
     * re-read every marker from the sink first: ten round trips after a
     * PostgreSQL commit of four, about half the throughput at 100 records
     * a batch (docs/benchmarks.md). Anything else is written at once. */
    tm_conn_status_tick(c, !applied);
}
