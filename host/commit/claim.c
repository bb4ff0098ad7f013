#include "commit/claim.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit/backoff.h"
#include "commit/commit_internal.h"
#include "commit/commit_loop.h"
#include "commit/lineage.h"
#include "commit/marker_check.h"
#include "commit/part_stop.h"
#include "kafka/consumer.h"
#include "kafka/consumer_ops.h"
#include "kafka/member_id.h"
#include "kafka/partitions.h"
#include "runtime/sink_calls.h"
#include "services/error.h"
#include "services/fault.h"
#include "services/log.h"

#define WATERMARK_TIMEOUT_MS 10000
/* A claim in the rebalance callback blocks the rebalance, and the group
 * evicts a member that does not poll within max.poll.interval.ms (5 min by
 * default). So a transient error there (a busy or unreachable store, the
 * broker not answering) is retried for a few seconds only; then the
 * machine keeps the partitions unclaimed (assigned at the log's end, no
 * record of them taken) and claims them again, for ever, between polls,
 * with its own backoff: the member stays in the group, the connector is
 * DEGRADED, and it recovers by itself once the store answers. */
#define CLAIM_PATIENCE_MS 10000

/* start_at_end's result besides 0 and -1 (stopping). */
#define CLAIM_DEFERRED 1

static void sleep_ms(int64_t ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The claim itself, retried while the store says RETRY, within patience_ms
 * (0: one attempt). */
static tm_status claim_with_retries(tm_connector *c, tm_marker *markers,
                                    size_t n, tm_error *err,
                                    int64_t patience_ms) {
    tm_backoff b;
    tm_backoff_init(&b, 200, 5000, (uint64_t)tm_now_ms());
    int64_t give_up = tm_now_ms() + patience_ms;
    for (int attempt = 1;; attempt++) {
        *err = tm_error_init();
        /* A stop interrupts a claim at once (runtime/connector.c): it
         * has committed nothing worth waiting for. Not a commit still at
         * the sink: that one is waited for first. */
        tm_sink_settle(c);
        atomic_store(&c->in_claim, 1);
        /* A test holds the host here (TIDEMARK_FAULT) to change the store
         * or deliver a signal before the sink's claim runs. */
        tm_fault("before_claim");
        tm_status st = tm_sink_claim(c, markers, n, err);
        atomic_store(&c->in_claim, 0);
        if (st == TM_RETRY)
            c->totals.retries++;
        if (st != TM_RETRY || tm_now_ms() >= give_up || atomic_load(c->stop))
            return st;
        tm_conn_error(c, 0, "claim of %zu partition(s): attempt %d: RETRY: %s",
                      n, attempt, err->message);
        tm_conn_status_tick(c, 0);
        sleep_ms(tm_backoff_next(&b));
    }
}

/* Whether the connector has ever claimed anything: any marker in the sink
 * for any partition of its topics as the cluster lists them now. Once it
 * has, `start: latest` is spent: it meant the logs' ends at the
 * connector's first start, and a partition without a marker now (added to
 * a topic, or of a topic created since) holds only records produced after
 * that start, so it starts at its log start and none of them is skipped.
 * 1 yes, 0 no, -1 cannot tell (why filled). */
static int claimed_before(tm_connector *c, char *why, size_t whysize) {
    if (c->claimed_before)
        return 1;
    tm_kafka_tp *all = NULL;
    size_t n = 0;
    if (tm_kafka_partition_tps(c->rk, c->cfg, WATERMARK_TIMEOUT_MS, &all, &n,
                               why, whysize) != 0)
        return -1;
    tm_marker *m = calloc(n ? n : 1, sizeof *m);
    if (!m) {
        tm_kafka_tps_free(all, n);
        snprintf(why, whysize, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        m[i].struct_size = sizeof m[i];
        m[i].topic = all[i].topic;
        m[i].partition = all[i].partition;
    }
    tm_error err = tm_error_init();
    tm_status st = n ? tm_sink_read_markers(c, m, n, &err) : TM_OK;
    int rc = -1;
    if (st != TM_OK) {
        snprintf(why, whysize, "read_markers of %zu partition(s): %s: %s", n,
                 tm_status_name(st), err.message);
    } else {
        rc = 0;
        for (size_t i = 0; i < n && !rc; i++)
            rc = m[i].epoch != TM_NO_EPOCH;
        c->claimed_before = rc;
    }
    free(m);
    tm_kafka_tps_free(all, n);
    return rc;
}

/* Where a partition without a marker starts: `earliest` the log start;
 * `latest` the log's end at the connector's first start only, else the
 * log start (claimed_before). Retried like the watermarks, within
 * patience_ms. 0, CLAIM_DEFERRED (still unknown: transient), or -1
 * (stopping). */
static int start_at_end(tm_connector *c, int *at_end, int64_t patience_ms) {
    *at_end = 0;
    if (c->cfg->kafka.start != TM_START_LATEST)
        return 0;
    tm_backoff b;
    tm_backoff_init(&b, 200, 2000, (uint64_t)tm_now_ms());
    int64_t give_up = tm_now_ms() + patience_ms;
    char why[768];
    int rc;
    while ((rc = claimed_before(c, why, sizeof why)) < 0) {
        tm_conn_error(c, 0,
                      "claim: start \"latest\": is this the connector's "
                      "first start? %s; retrying",
                      why);
        if (atomic_load(c->stop))
            return -1;
        if (tm_now_ms() >= give_up)
            return CLAIM_DEFERRED;
        sleep_ms(tm_backoff_next(&b));
    }
    *at_end = !rc;
    return 0;
}

/* The claim of the CLAIM actions of one step into out (CLAIMED): each
 * marker named; a partition without a marker starts where the start
 * policy says, or, re-claiming a fenced partition whose marker was just
 * read (fallback), at that marker's offset (the action's), so that the
 * claim returns it as it is. Transient errors are retried within
 * patience_ms; past it the answer is RETRY (the machine defers the
 * claim), as it is when a stop gives the claim up (quiet). */
static void claim_list(tm_connector *c, const tm_machine_action *const *acts,
                       size_t n, int64_t patience_ms, tm_answer *out) {
    int64_t started = tm_now_ms();
    tm_marker *markers = out->markers;
    int64_t *low = out->low, *high = out->high;
    int fallback = acts[0]->offset != TM_NO_OFFSET;
    out->ev.status = TM_RETRY;
    int at_end = 0, rc;
    if (!fallback && (rc = start_at_end(c, &at_end, patience_ms)) != 0) {
        out->quiet = rc < 0;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char why[512];
        /* Right after a leader change the broker answers "not leader"
         * for a while: retried like a busy store, not a reason to fail. */
        tm_backoff wb;
        tm_backoff_init(&wb, 200, 2000, (uint64_t)tm_now_ms());
        int64_t give_up = tm_now_ms() + patience_ms;
        while (tm_kafka_watermarks(c->rk, markers[i].topic,
                                   markers[i].partition, WATERMARK_TIMEOUT_MS,
                                   &low[i], &high[i], why, sizeof why) != 0) {
            tm_conn_error(c, 0, "claim: %s; retrying", why);
            if (atomic_load(c->stop)) {
                out->quiet = 1;
                return;
            }
            if (tm_now_ms() >= give_up)
                return;
            sleep_ms(tm_backoff_next(&wb));
        }
        markers[i].next_offset = fallback ? acts[i]->offset
                                 : at_end ? high[i]
                                          : low[i];
    }
    tm_error err = tm_error_init();
    tm_status st = claim_with_retries(c, markers, n, &err, patience_ms);
    int stopping = atomic_load(c->stop);
    if (st == TM_RETRY && stopping) {
        /* Stopping: the stop interrupted it, or the store was busy;
         * nothing was claimed, nothing is wrong. */
        tm_conn_log(c, TM_LOG_INFO, NULL, -1, NULL,
                    "claim of %zu partition(s) given up: stopping (%s: %s)", n,
                    tm_status_name(st), err.message);
        out->quiet = 1;
        return;
    }
    if (st == TM_RETRY) {
        tm_conn_error(c, 0, "claim of %zu partition(s): RETRY: %s", n,
                      err.message);
        return;
    }
    if (st != TM_OK) {
        /* FATAL or INVALID is a verdict on the store or the config, stop
         * or not: FAILED (by the machine), never passed off as a clean
         * stop. */
        out->ev.status = st;
        snprintf(out->why, sizeof out->why,
                 "claim of %zu partition(s): %s: %s%s", n, tm_status_name(st),
                 err.message, stopping ? " (while stopping)" : "");
        out->ev.why = out->why;
        return;
    }
    /* A marker outside the log fails the connector (the machine says so);
     * inside the log's bounds is not enough: is it still the same log?
     * Within what is left of the patience: past it, deferred like a store
     * that does not answer (the claim is made again then; its epoch only
     * rises once more). */
    for (size_t i = 0; i < n; i++)
        if (!tm_marker_in_log(&markers[i], low[i], high[i], NULL, 0)) {
            out->ev.status = TM_OK;
            return;
        }
    int64_t left = started + patience_ms - tm_now_ms();
    if (patience_ms > 0 && left < 1)
        left = 1; /* spent: one short read (0 would mean one full read) */
    int lineage =
        tm_lineage_check_claim(c, markers, n, low, patience_ms > 0 ? left : 0);
    if (lineage == TM_LINEAGE_DEFERRED)
        return; /* the claimed markers kept: the next look's */
    if (lineage != 0) {
        /* FAILED with the reason (the machine keeps it), or stopping. */
        if (c->state == TM_CONN_FAILED) {
            out->ev.status = TM_FATAL;
            snprintf(out->why, sizeof out->why, "%s", c->last_error);
            out->ev.why = out->why;
        } else {
            out->quiet = 1;
        }
        return;
    }
    out->ev.status = TM_OK;
}

/* What the machine made of a claim, said: each partition claimed, or
 * the claim deferred. */
static void claimed_hook(tm_connector *c, const tm_answer *a,
                         const tm_machine_action *acts, size_t nacts) {
    (void)acts;
    (void)nacts;
    int claimed = 0, newly = 0;
    for (size_t i = 0; i < a->ev.nmarkers; i++) {
        const tm_marker *mk = &a->ev.markers[i];
        tm_part *p = tm_conn_part(c, mk->topic, mk->partition);
        tm_machine_part_view v;
        tm_machine_part(c->m, mk->topic, mk->partition, &v);
        if (!p)
            continue;
        if (a->ev.status == TM_OK && v.state == TM_PART_RUNNING &&
            v.epoch == mk->epoch) {
            claimed++;
            p->marker = *mk;
            p->marker.topic = p->topic;
            p->deferral_said = 0;
            tm_part_stop_clear(p); /* read again from the marker */
            tm_conn_log(c, TM_LOG_INFO, p->topic, p->partition, NULL,
                        "claimed: epoch=%" PRId64 " next_offset=%" PRId64
                        " log=[%" PRId64 ",%" PRId64 ")",
                        v.epoch, v.committed, a->ev.low[i], a->ev.high[i]);
        } else if (a->ev.status == TM_RETRY && v.deferred && !a->quiet &&
                   !p->deferral_said) {
            p->deferral_said = 1;
            newly++;
        }
    }
    tm_commit_sync_parts(c);
    if (claimed) {
        c->claimed_before = 1;
        c->markers_dirty = 1;
        tm_conn_recovered(c, "claimed");
    }
    if (newly)
        tm_conn_log(c, TM_LOG_WARN, NULL, -1, NULL,
                    "%d partition(s) assigned but not claimed yet (%s); the "
                    "claim is retried until the sink takes it",
                    newly, c->last_error);
}

void tm_claim_exec(tm_connector *c, const tm_machine_action *const *acts,
                   size_t n, tm_answer *out) {
    out->hook = claimed_hook;
    if (tm_answer_markers(out, n, 1) != 0) {
        out->ev.status = TM_FATAL;
        out->ev.why = "claim: out of memory";
        return;
    }
    for (size_t i = 0; i < n; i++) {
        out->markers[i].topic = tm_answer_keep(out, acts[i]->topic);
        out->markers[i].partition = acts[i]->partition;
        out->markers[i].epoch = TM_NO_EPOCH;
        out->markers[i].next_offset = TM_NO_OFFSET;
        if (!out->markers[i].topic) {
            out->ev.status = TM_FATAL;
            out->ev.why = "claim: out of memory";
            return;
        }
    }
    /* In the rebalance callback the member must poll again soon: a few
     * seconds' patience; the machine's retries get one attempt each. */
    claim_list(c, acts, n, tm_commit_in_rebalance(c) ? CLAIM_PATIENCE_MS : 0,
               out);
}

/* The guard: a partition whose topic is not one of the connector's
 * inputs is never claimed, whatever the group assigns. A static member
 * that rejoins a stable group gets its previous assignment back without a
 * rebalance (kafka/member_id.h): it may hold a topic removed from the
 * config. Its entry's offset is set to the log's end and it is left out
 * of c->parts, so none of its records is taken (commit_loop.c). Returns
 * the number of such partitions; the others are copied to ours
 * (*nours of them). */
static int outside_subscription(tm_connector *c, tm_kafka_tp *assigned,
                                size_t n, tm_kafka_tp *ours, size_t *nours) {
    int foreign = 0;
    *nours = 0;
    for (size_t i = 0; i < n; i++) {
        tm_kafka_tp *tp = &assigned[i];
        if (tm_kafka_topic_wanted(c->cfg, tp->topic)) {
            ours[(*nours)++] = (tm_kafka_tp){tp->topic, tp->partition, 0, NULL};
            continue;
        }
        tp->offset = TM_KAFKA_OFFSET_END;
        if (!foreign++)
            tm_conn_error(c, 0,
                          "%s [%" PRId32 "]: assigned by the group but not "
                          "in this connector's subscription ($.kafka.%s): "
                          "not claimed, none of its records is taken",
                          tp->topic, tp->partition,
                          c->cfg->kafka.topic_regex ? "topic_regex" : "topics");
    }
    return foreign;
}

int tm_claim_assigned(tm_connector *c, tm_kafka_tp *assigned, size_t n) {
    tm_kafka_tp *ours = calloc(n ? n : 1, sizeof *ours);
    tm_answer a;
    tm_answer_init(&a, TM_EV_ASSIGNED);
    a.tps = calloc(n ? n : 1, sizeof *a.tps);
    if (!ours || !a.tps) {
        free(ours);
        tm_answer_free(&a);
        tm_conn_error(c, 1, "claim: out of memory");
        return -1;
    }
    size_t nours;
    int foreign = outside_subscription(c, assigned, n, ours, &nours);
    for (size_t i = 0; i < nours; i++) {
        if (!tm_commit_part_add(c, ours[i].topic, ours[i].partition)) {
            tm_conn_error(c, 1, "claim: out of memory");
            break;
        }
        a.tps[i] = (tm_machine_tp){ours[i].topic, ours[i].partition};
    }
    /* Where each starts: the machine's START (its marker, or the log's
     * end while its claim is deferred); the log's end until it says. */
    for (size_t j = 0; j < n; j++)
        assigned[j].offset = TM_KAFKA_OFFSET_END;
    a.ev.parts = a.tps;
    a.ev.nparts = nours;
    if (nours && c->state != TM_CONN_FAILED) {
        tm_commit_assigning(c, assigned, n);
        tm_commit_feed(c, &a.ev, NULL, NULL);
        tm_commit_assigning(c, NULL, 0);
    }
    tm_answer_free(&a);
    free(ours);
    int rc = c->state == TM_CONN_FAILED ? -1 : 0;
    if (foreign && rc == 0) {
        /* Not healthy while this consumer holds them: the claim's recovery
         * must not hide it. A new member id helps once (an old member's
         * assignment kept by the group); a fresh id handed foreign
         * partitions again would only be handed them again: they are then
         * held, never claimed, rather than rejoined in a loop. */
        /* With the user's own group.instance.id there is no new id to
         * take: they are held at once, and the operator told what to do. */
        int fixed_id = !tm_member_id_wanted(c->cfg);
        int again = c->foreign_rejoined || fixed_id;
        tm_conn_error(c, 0,
                      "%d assigned partition(s) outside the subscription: "
                      "not claimed, none of their records is taken%s",
                      foreign,
                      fixed_id ? "; held as they are: with a group.instance.id "
                                 "of $.kafka.properties the group keeps the "
                                 "old assignment until session.timeout.ms "
                                 "(change the id, or stop every host for "
                                 "longer than that)"
                      : again  ? "; already under a new member id, so held "
                                 "as they are"
                               : "");
        if (!again) {
            c->foreign_rejoined = 1;
            tm_consumer_rejoin_as_new(c);
        } else {
            c->foreign_held += foreign;
        }
    }
    return rc;
}

/* What the machine made of the fenced partitions' markers: the ones it
 * claims again, said. */
static void read_hook(tm_connector *c, const tm_answer *a,
                      const tm_machine_action *acts, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (acts[i].kind != TM_ACT_CLAIM)
            continue;
        for (size_t k = 0; k < a->ev.nmarkers; k++) {
            const tm_marker *mk = &a->ev.markers[k];
            if (mk->partition != acts[i].partition ||
                strcmp(mk->topic, acts[i].topic) != 0)
                continue;
            tm_conn_log(c, TM_LOG_WARN, acts[i].topic, acts[i].partition, NULL,
                        "fenced and not revoked for %" PRId64
                        " ms, its marker unchanged (next_offset %" PRId64
                        ", epoch %" PRId64
                        "): the group still gives it to this host and "
                        "nobody else writes it; claiming it again",
                        tm_fenced_bound_ms(c), mk->next_offset, mk->epoch);
        }
    }
}

void tm_read_markers_exec(tm_connector *c, const tm_machine_action *const *acts,
                          size_t n, tm_answer *out) {
    out->hook = read_hook;
    out->ev.status = TM_FATAL;
    out->ev.why = "claim: out of memory";
    if (tm_answer_markers(out, n, 0) != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        out->markers[i].topic = tm_answer_keep(out, acts[i]->topic);
        out->markers[i].partition = acts[i]->partition;
        if (!out->markers[i].topic)
            return;
    }
    tm_error err = tm_error_init();
    tm_status st = tm_sink_read_markers(c, out->markers, n, &err);
    out->ev.status = st;
    out->ev.why = NULL;
    if (st != TM_OK) {
        tm_conn_error(c, st != TM_RETRY,
                      "fenced partitions: read_markers of %zu: %s: %s", n,
                      tm_status_name(st), err.message);
        snprintf(out->why, sizeof out->why, "%s", c->last_error);
        out->ev.why = out->why;
    }
}
