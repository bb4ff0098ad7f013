#include "commit/claim.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit/commit_loop.h"
#include "commit/lineage.h"
#include "commit/marker_check.h"
#include "commit/part_stop.h"
#include "kafka/consumer.h"
#include "kafka/consumer_ops.h"
#include "kafka/member_id.h"
#include "kafka/partitions.h"
#include "services/error.h"
#include "services/fault.h"
#include "services/log.h"

#define WATERMARK_TIMEOUT_MS 10000
/* A claim in the rebalance callback blocks the rebalance, and the group
 * evicts a member that does not poll within max.poll.interval.ms (5 min by
 * default). So a transient error there (a busy or unreachable store, the
 * broker not answering) is retried for a few seconds only; then the
 * partitions are assigned unclaimed (no record of them is taken) and the
 * commit loop retries their claim, for ever, between polls
 * (tm_claim_pending): the member stays in the group, the connector is
 * DEGRADED, and it recovers by itself once the store answers. */
#define CLAIM_PATIENCE_MS 10000

/* claim_list's results besides 0 (claimed) and -1 (FAILED or stopping). */
#define CLAIM_DEFERRED 1

static void sleep_ms(int64_t ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static tm_part *add_part(tm_connector *c, const char *topic,
                         int32_t partition) {
    tm_part *p = tm_conn_part(c, topic, partition);
    if (p)
        return p; /* eager protocol: assigned again after a revoke */
    if (c->nparts == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        tm_part *np = realloc(c->parts, cap * sizeof *np);
        if (!np)
            return NULL;
        c->parts = np;
        c->cap = cap;
    }
    p = &c->parts[c->nparts];
    memset(p, 0, sizeof *p);
    p->topic = strdup(topic);
    if (!p->topic)
        return NULL;
    p->partition = partition;
    p->high_watermark = -1;
    c->nparts++;
    return p;
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
         * has committed nothing worth waiting for. */
        atomic_store(&c->in_claim, 1);
        /* A test holds the host here (TIDEMARK_FAULT) to change the store
         * or deliver a signal before the sink's claim runs. */
        tm_fault("before_claim");
        tm_status st = c->sink.api->claim(c->sink.sink, markers, n, 0, err);
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
    tm_status st =
        n ? c->sink.api->read_markers(c->sink.sink, m, n, &err) : TM_OK;
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

/* A transient error outlasted the patience: an assignment's partitions
 * (fallback NULL) are kept unclaimed, assigned at the log's end (nothing
 * of them is taken: on_message drops their records) until
 * tm_claim_pending claims them and seeks to their markers. */
static int defer(tm_connector *c, tm_kafka_tp *assigned, size_t n,
                 const int64_t *fallback) {
    if (fallback)
        return CLAIM_DEFERRED; /* fenced parts: retried as they are */
    int newly = 0;
    for (size_t i = 0; i < n; i++) {
        tm_part *p = add_part(c, assigned[i].topic, assigned[i].partition);
        if (!p) {
            tm_conn_error(c, 1, "claim: out of memory");
            return -1;
        }
        if (!p->unclaimed) {
            newly++;
            p->unclaimed = 1;
            p->epoch = TM_NO_EPOCH;
            p->committed = p->next_expected = TM_NO_OFFSET;
        }
        assigned[i].offset = TM_KAFKA_OFFSET_END;
    }
    c->any_unclaimed = 1;
    if (newly) {
        tm_conn_log(c, TM_LOG_WARN, NULL, -1, NULL,
                    "%d partition(s) assigned but not claimed yet (%s); the "
                    "claim is retried until the sink takes it",
                    newly, c->last_error);
        tm_conn_status_tick(c, 1);
    }
    return CLAIM_DEFERRED;
}

/* Fenced partitions re-claimed (tm_claim_fenced_again), the claim deferred
 * after the sink took it (the lineage read outlasted the patience): the
 * claim raised each marker's epoch, so the claimed marker, not the one
 * seen when fenced, is what the next look must find unchanged; else
 * tm_marker_moved takes this host's own claim for another live writer's. */
static void keep_claimed_as_fenced(tm_connector *c, const tm_marker *m,
                                   size_t n) {
    for (size_t i = 0; i < n; i++) {
        tm_part *p = tm_conn_part(c, m[i].topic, m[i].partition);
        if (!p || !p->fenced)
            continue;
        p->fenced_marker = m[i];
        p->fenced_marker.topic = p->topic;
    }
}

/* The claim of `assigned`; a partition without a marker starts where the
 * start policy says, or at fallback[i] when given: a fenced partition's
 * re-claim, whose marker was just read (tm_claim_fenced_again), so the
 * claim returns it as it is. Transient errors are retried within
 * patience_ms. 0 claimed, CLAIM_DEFERRED (a
 * transient error outlasted it: defer()), -1 FAILED or stopping. */
static int claim_list(tm_connector *c, tm_kafka_tp *assigned, size_t n,
                      const int64_t *fallback, int64_t patience_ms) {
    if (n == 0)
        return 0;
    int64_t started = tm_now_ms();
    tm_marker *markers = calloc(n, sizeof *markers);
    int64_t *low = calloc(n, sizeof *low), *high = calloc(n, sizeof *high);
    int rc = -1;
    if (!markers || !low || !high) {
        tm_conn_error(c, 1, "claim: out of memory");
        goto out;
    }
    int at_end = 0;
    if (!fallback && (rc = start_at_end(c, &at_end, patience_ms)) != 0) {
        if (rc == CLAIM_DEFERRED)
            rc = defer(c, assigned, n, fallback);
        goto out;
    }
    rc = -1;
    for (size_t i = 0; i < n; i++) {
        const tm_kafka_tp *tp = &assigned[i];
        char why[512];
        /* Right after a leader change the broker answers "not leader"
         * for a while: retried like a busy store, not a reason to fail. */
        tm_backoff wb;
        tm_backoff_init(&wb, 200, 2000, (uint64_t)tm_now_ms());
        int64_t give_up = tm_now_ms() + patience_ms;
        while (tm_kafka_watermarks(c->rk, tp->topic, tp->partition,
                                   WATERMARK_TIMEOUT_MS, &low[i], &high[i], why,
                                   sizeof why) != 0) {
            tm_conn_error(c, 0, "claim: %s; retrying", why);
            if (atomic_load(c->stop))
                goto out;
            if (tm_now_ms() >= give_up) {
                rc = defer(c, assigned, n, fallback);
                goto out;
            }
            sleep_ms(tm_backoff_next(&wb));
        }
        markers[i].struct_size = sizeof markers[i];
        markers[i].topic = tp->topic;
        markers[i].partition = tp->partition;
        markers[i].next_offset = fallback ? fallback[i]
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
        goto out;
    }
    if (st == TM_RETRY) {
        tm_conn_error(c, 0, "claim of %zu partition(s): RETRY: %s", n,
                      err.message);
        rc = defer(c, assigned, n, fallback);
        goto out;
    }
    if (st != TM_OK) {
        /* FATAL or INVALID is a verdict on the store or the config, stop
         * or not: FAILED, never passed off as a clean stop. */
        tm_conn_error(c, 1, "claim of %zu partition(s): %s: %s%s", n,
                      tm_status_name(st), err.message,
                      stopping ? " (while stopping)" : "");
        goto out;
    }
    /* auto.offset.reset=error: a marker outside the log is never a silent
     * jump; the operator decides (offsets --reset-to). */
    for (size_t i = 0; i < n; i++) {
        char why[1024];
        if (!tm_marker_in_log(&markers[i], low[i], high[i], why, sizeof why)) {
            tm_conn_error(c, 1, "%s", why);
            goto out;
        }
    }
    /* Inside the log's bounds is not enough: is it still the same log?
     * Within what is left of the patience: past it, deferred like a store
     * that does not answer (the claim is made again then; its epoch only
     * rises once more). */
    int64_t left = started + patience_ms - tm_now_ms();
    if (patience_ms > 0 && left < 1)
        left = 1; /* spent: one short read (0 would mean one full read) */
    int lineage =
        tm_lineage_check_claim(c, markers, n, low, patience_ms > 0 ? left : 0);
    if (lineage == TM_LINEAGE_DEFERRED) {
        if (fallback)
            keep_claimed_as_fenced(c, markers, n);
        rc = defer(c, assigned, n, fallback);
        goto out;
    }
    if (lineage != 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        tm_part *p = add_part(c, markers[i].topic, markers[i].partition);
        if (!p) {
            tm_conn_error(c, 1, "claim: out of memory");
            goto out;
        }
        p->epoch = markers[i].epoch;
        p->committed = p->next_expected = markers[i].next_offset;
        p->high_watermark = high[i];
        /* Assigned unclaimed at the log's end (defer): the consumer's
         * position is there, not at the marker. */
        p->needs_seek = p->unclaimed;
        p->paused = p->fenced = p->unclaimed = 0;
        tm_part_stop_clear(p); /* read again from the marker: stops again */
        /* librdkafka keeps a partition's pause across unassign and assign:
         * one this host paused when it was fenced would never be fetched
         * again once the group gives it back. Resumed by the commit loop,
         * after the assignment (not from inside the rebalance callback). */
        p->needs_resume = 1;
        p->marker = markers[i];
        p->marker.topic = p->topic;
        assigned[i].offset = markers[i].next_offset;
        tm_conn_log(c, TM_LOG_INFO, p->topic, p->partition, NULL,
                    "claimed: epoch=%" PRId64 " next_offset=%" PRId64
                    " log=[%" PRId64 ",%" PRId64 ")",
                    p->epoch, p->committed, low[i], high[i]);
    }
    c->claimed_before = 1;
    c->markers_dirty = 1;
    c->any_unclaimed = 0;
    for (size_t i = 0; i < c->nparts; i++)
        c->any_unclaimed |= c->parts[i].unclaimed;
    tm_conn_recovered(c, "claimed");
    rc = 0;
    /* At once: `tidemark status` must show what this host owns now, not
     * after its next periodic write. */
    tm_conn_status_tick(c, 1);
out:
    free(markers);
    free(low);
    free(high);
    return rc;
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
    if (!ours) {
        tm_conn_error(c, 1, "claim: out of memory");
        return -1;
    }
    size_t nours;
    int foreign = outside_subscription(c, assigned, n, ours, &nours);
    int rc = claim_list(c, ours, nours, NULL, CLAIM_PATIENCE_MS) < 0 ? -1 : 0;
    /* Where each claimed (or deferred) partition starts. */
    for (size_t i = 0; i < nours; i++)
        for (size_t j = 0; j < n; j++)
            if (assigned[j].partition == ours[i].partition &&
                strcmp(assigned[j].topic, ours[i].topic) == 0)
                assigned[j].offset = ours[i].offset;
    free(ours);
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

/* Retries after a deferral wait with their own backoff, between polls. */
static int retry_due(tm_connector *c) {
    return tm_now_ms() >= c->claim_retry_ms;
}

static void retry_later(tm_connector *c) {
    c->claim_retry_ms = tm_now_ms() + tm_backoff_next(&c->claim_backoff);
}

int tm_claim_pending(tm_connector *c) {
    if (!c->any_unclaimed || !retry_due(c))
        return 0;
    tm_kafka_tp *l = calloc(c->nparts ? c->nparts : 1, sizeof *l);
    if (!l) {
        tm_conn_error(c, 1, "claim: out of memory");
        return -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < c->nparts; i++)
        if (c->parts[i].unclaimed)
            l[n++] = (tm_kafka_tp){c->parts[i].topic, c->parts[i].partition, 0,
                                   NULL};
    /* None left: they were revoked while waiting. */
    int rc = n ? claim_list(c, l, n, NULL, 0) : 0;
    if (n == 0)
        c->any_unclaimed = 0;
    free(l);
    if (rc == CLAIM_DEFERRED) {
        retry_later(c);
        return 0;
    }
    if (rc == 0)
        tm_backoff_reset(&c->claim_backoff);
    return rc;
}

void tm_claim_marker_lost(tm_connector *c, const char *topic,
                          int32_t partition) {
    char why[1024];
    tm_marker_lost_error(why, sizeof why, topic, partition);
    tm_conn_error(c, 1, "%s", why);
}

/* The fenced partitions past the bound, their markers read again: `due`
 * (n of them, each naming its partition) is filled with what the sink
 * holds now. 0, 1 when the read failed (transient: checked
 * again later), -1 when the connector FAILED (a marker is gone). */
static int reread_fenced(tm_connector *c, tm_marker *due, size_t n) {
    tm_error err = tm_error_init();
    tm_status st = c->sink.api->read_markers(c->sink.sink, due, n, &err);
    if (st != TM_OK) {
        tm_conn_error(c, st != TM_RETRY,
                      "fenced partitions: read_markers of %zu: %s: %s", n,
                      tm_status_name(st), err.message);
        return st == TM_RETRY ? 1 : -1;
    }
    for (size_t i = 0; i < n; i++)
        if (due[i].epoch == TM_NO_EPOCH) {
            tm_claim_marker_lost(c, due[i].topic, due[i].partition);
            return -1;
        }
    return 0;
}

int tm_claim_fenced_again(tm_connector *c, int64_t bound_ms) {
    if (!retry_due(c))
        return 0;
    int64_t now = tm_now_ms();
    tm_marker *due = NULL;
    size_t n = 0, fenced = 0;
    for (size_t i = 0; i < c->nparts; i++) {
        const tm_part *p = &c->parts[i];
        fenced += p->fenced != 0;
        if (!p->fenced || now - p->fenced_ms < bound_ms)
            continue;
        tm_marker *nd = realloc(due, (n + 1) * sizeof *nd);
        if (!nd) {
            free(due);
            tm_conn_error(c, 1, "claim: out of memory");
            return -1;
        }
        due = nd;
        memset(&due[n], 0, sizeof due[n]);
        due[n].struct_size = sizeof due[n];
        due[n].topic = p->topic;
        due[n].partition = p->partition;
        n++;
    }
    c->any_fenced = fenced > 0;
    if (!n)
        return 0;
    int rc = reread_fenced(c, due, n);
    if (rc != 0) {
        free(due);
        if (rc < 0)
            return -1;
        retry_later(c);
        return 0;
    }
    tm_kafka_tp *l = calloc(n, sizeof *l);
    int64_t *from = calloc(n, sizeof *from);
    if (!l || !from) {
        tm_conn_error(c, 1, "claim: out of memory");
        rc = -1;
        goto out;
    }
    size_t nclaim = 0;
    for (size_t i = 0; i < n; i++) {
        tm_part *p = tm_conn_part(c, due[i].topic, due[i].partition);
        if (!p)
            continue;
        if (tm_marker_moved(&p->fenced_marker, &due[i])) {
            /* Someone the group does not know of (a host of another
             * group_id: a renamed group, a rolling deploy) still writes
             * it: claiming it back would fence that writer, and it would
             * fence us in turn, for ever, each dropping the other's
             * batches. Left to it; looked at again after another bound. */
            char why[1024];
            tm_marker_moved_error(why, sizeof why, p->topic, p->partition,
                                  &p->fenced_marker, &due[i],
                                  now - p->fenced_ms);
            tm_conn_error(c, 0, "%s", why);
            p->fenced_marker = due[i];
            p->fenced_marker.topic = p->topic;
            p->fenced_ms = now;
            continue;
        }
        tm_conn_log(c, TM_LOG_WARN, p->topic, p->partition, NULL,
                    "fenced and not revoked for %" PRId64
                    " ms, its marker unchanged (next_offset %" PRId64
                    ", epoch %" PRId64
                    "): the group still gives it to this host and nobody "
                    "else writes it; claiming it again",
                    bound_ms, due[i].next_offset, due[i].epoch);
        /* The claim returns the marker as it is (and raises its epoch);
         * its own offset is the only one given. */
        from[nclaim] = due[i].next_offset;
        l[nclaim++] = (tm_kafka_tp){p->topic, p->partition, 0, NULL};
    }
    rc = nclaim ? claim_list(c, l, nclaim, from, 0) : 0;
    if (rc == CLAIM_DEFERRED) {
        /* A transient error: still fenced, claimed again later. */
        retry_later(c);
        rc = 0;
    } else if (rc == 0)
        for (size_t i = 0; i < n; i++) {
            tm_part *p = tm_conn_part(c, due[i].topic, due[i].partition);
            if (!p || p->fenced)
                continue; /* not claimed here: moving */
            /* Paused when it was fenced (needs_resume clears that);
             * librdkafka's position is wherever the fetch was. */
            p->needs_seek = 1;
            /* The claim raises the epoch of a marker it finds: one no
             * higher than read is a marker it made, gone between the read
             * and the claim. */
            if (p->epoch <= due[i].epoch) {
                tm_claim_marker_lost(c, p->topic, p->partition);
                rc = -1;
                break;
            }
        }
out:
    free(l);
    free(from);
    free(due);
    return rc;
}
