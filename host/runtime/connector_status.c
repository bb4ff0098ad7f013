/* The status file of a running connector: written at every commit and at
 * least every second, from the connector's own state and the sink's
 * markers (their counts are the sink's truth, re-read when they moved). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit/commit_loop.h"
#include "commit/part_stop.h"
#include "kafka/consumer_ops.h"
#include "kafka/partitions.h"
#include "metrics/metrics_persist.h"
#include "runtime/connector_state.h"
#include "runtime/sink_calls.h"
#include "services/error.h"
#include "services/log.h"
#include "services/redact.h"
#include "status/status_file.h"
#include "status/status_pulse.h"

void tm_conn_refresh_markers(tm_connector *c) {
    /* Not while a commit is at the sink: its answer moves them again. */
    if (!c->markers_dirty || !c->sink.sink || c->nparts == 0 ||
        tm_sink_commit_out(c))
        return;
    tm_marker *m = calloc(c->nparts, sizeof *m);
    if (!m)
        return;
    for (size_t i = 0; i < c->nparts; i++) {
        m[i].struct_size = sizeof m[i];
        m[i].topic = c->parts[i].topic;
        m[i].partition = c->parts[i].partition;
    }
    tm_error err = tm_error_init();
    tm_status st = tm_sink_read_markers(c, m, c->nparts, &err);
    if (st == TM_OK) {
        for (size_t i = 0; i < c->nparts; i++) {
            /* Totals are what the sink counted since this host claimed:
             * only it knows which rows were duplicates of stored keys. */
            const tm_marker *was = &c->parts[i].marker;
            if (was->epoch == m[i].epoch && m[i].rows >= was->rows) {
                c->totals.rows += m[i].rows - was->rows;
                c->totals.dead_letters += m[i].dead_letters - was->dead_letters;
                c->totals.filtered += m[i].filtered - was->filtered;
                c->totals.duplicates += m[i].duplicates - was->duplicates;
            }
            c->parts[i].marker = m[i];
            c->parts[i].marker.topic = c->parts[i].topic;
        }
        c->markers_dirty = 0;
    } else {
        tm_log(TM_LOG_DEBUG, c->cfg->name, "status: read_markers: %s: %s",
               tm_status_name(st), err.message);
    }
    free(m);
}

/* How often, and for how long at most, a paused connector (or one with a
 * stopped partition) asks the broker for its partitions' high
 * watermarks. */
#define WATERMARK_QUERY_PERIOD_MS 5000
#define WATERMARK_QUERY_BUDGET_MS 1000

/* The broker's high watermarks, asked for (a round trip, from the thread
 * that owns the consumer): librdkafka learns them from its fetches, and a
 * paused partition is not fetched, so its cached one stays where it was
 * (a lag of 0 shown while records wait). Every partition (HELD_ONLY: each
 * paused for its stop) in turn, within the budget, from where the last
 * round stopped. */
static void query_watermarks(tm_connector *c, int64_t now, int held_only) {
    if (c->nparts == 0 || (c->wm_queried_ms &&
                           now - c->wm_queried_ms < WATERMARK_QUERY_PERIOD_MS))
        return;
    c->wm_queried_ms = now;
    int64_t deadline = now + WATERMARK_QUERY_BUDGET_MS;
    size_t k = 0;
    for (; k < c->nparts; k++) {
        int64_t left = deadline - tm_now_ms();
        if (left <= 0)
            break;
        tm_part *p = &c->parts[(c->wm_next + k) % c->nparts];
        if (held_only && !p->stop_held)
            continue;
        int64_t lo = -1, hi = -1;
        char why[512];
        if (tm_kafka_watermarks(c->rk, p->topic, p->partition, (int)left, &lo,
                                &hi, why, sizeof why) != 0)
            tm_log(TM_LOG_DEBUG, c->cfg->name, "status: %s", why);
        else if (hi >= 0)
            p->high_watermark = hi;
    }
    c->wm_next = (c->wm_next + k) % c->nparts;
}

/* The broker's high watermark as librdkafka last saw it (no round trip),
 * unless it is below the committed offset: a partition librdkafka did not
 * fetch since (assigned paused after a claim read a fresher one) keeps an
 * old one. While paused by an operator nothing is fetched: asked from the
 * broker instead (the cache would undo each answer); so for a partition
 * paused for its stop (commit/part_stop.h). */
static void refresh_watermarks(tm_connector *c, int64_t now) {
    if (!c->rk)
        return;
    if (c->paused_since_ms) {
        query_watermarks(c, now, 0);
        return;
    }
    int held = 0;
    for (size_t i = 0; i < c->nparts; i++) {
        tm_part *p = &c->parts[i];
        if (p->stop_held) {
            held = 1;
            continue;
        }
        int64_t hi = -1;
        if (tm_kafka_cached_high(c->rk, p->topic, p->partition, &hi) == 0 &&
            hi >= p->committed)
            p->high_watermark = hi;
    }
    if (held)
        query_watermarks(c, now, 1);
    else
        c->wm_queried_ms = 0; /* at once at the next pause or stop */
}

/* Why the first paused partition is paused (the host pauses them all for
 * one reason at a time). */
static void pause_reason(const tm_part *p, char *out, size_t size) {
    if (p->unclaimed)
        snprintf(out, size,
                 "%s [%d] assigned but not claimed yet: the sink's claim is "
                 "retried (see the last error)",
                 p->topic, (int)p->partition);
    else if (p->fenced)
        snprintf(out, size,
                 "%s [%d] paused by this host: fenced (another host claimed "
                 "it), waiting for the group to revoke it",
                 p->topic, (int)p->partition);
    else
        snprintf(out, size,
                 "%s [%d] paused by this host while the sink retries a batch "
                 "(backpressure)",
                 p->topic, (int)p->partition);
}

/* The health model (docs/operations.md, Health): the state the status
 * file shows, with its reason and since when. */
static void health(tm_connector *c, const tm_part *paused, int64_t now_wall,
                   tm_status_snapshot *s) {
    /* A batch committed since the last transient error: recovered. */
    if (c->degraded_ms && c->totals.batches > c->degraded_batches)
        tm_conn_recovered(c, "a batch committed");
    if (!paused)
        c->paused_ms = 0;
    else if (!c->paused_ms)
        c->paused_ms = now_wall;
    s->state = c->state;
    if (c->state == TM_CONN_FAILED) {
        snprintf(s->reason, sizeof s->reason, "%s", c->last_error);
        s->reason_since_ms = c->failed_ms;
        return;
    }
    if (c->state != TM_CONN_RUNNING && c->state != TM_CONN_STARTING)
        return;
    /* A partition stopped by a change it cannot apply: DEGRADED until the
     * operator acts (it never recovers by itself), before any other cause,
     * an operator's pause included (which it names). */
    size_t nstopped;
    const tm_part *stopped = tm_part_stop_first(c, &nstopped);
    if (stopped) {
        s->state = TM_CONN_DEGRADED;
        snprintf(s->reason, sizeof s->reason,
                 "%s [%d] stopped at offset %" PRId64
                 ": %s; the other partitions go on%s%s%s",
                 stopped->topic, (int)stopped->partition, stopped->stop_at,
                 stopped->stop_why,
                 nstopped > 1 ? " (more partitions are stopped: see the "
                                "partitions)"
                              : "",
                 c->paused_since_ms ? "; paused by " : "",
                 c->paused_since_ms ? c->paused_by : "");
        s->reason_since_ms = stopped->stop_wall_ms;
        return;
    }
    /* Paused by an operator: PAUSED for as long as it lasts (never
     * DEGRADED for it: nothing is wrong), with who asked and since when. */
    if (c->paused_since_ms) {
        s->state = TM_CONN_PAUSED;
        snprintf(s->reason, sizeof s->reason,
                 "paused by %s with `tidemark pause`: nothing is committed, "
                 "its partitions stay assigned to it, paused; `tidemark "
                 "resume` goes on%s%s",
                 c->paused_by, c->pause_file_error[0] ? " (" : "",
                 c->pause_file_error[0] ? c->pause_file_error : "");
        if (c->pause_file_error[0])
            snprintf(s->reason + strlen(s->reason),
                     sizeof s->reason - strlen(s->reason), ")");
        s->reason_since_ms = c->paused_since_ms;
        return;
    }
    if (c->degraded_ms) {
        s->state = TM_CONN_DEGRADED;
        snprintf(s->reason, sizeof s->reason, "%s", c->last_error);
        s->reason_since_ms = c->degraded_ms;
        return;
    }
    if (!paused || c->state != TM_CONN_RUNNING)
        return;
    char why[768];
    pause_reason(paused, why, sizeof why);
    int64_t for_ms = now_wall - c->paused_ms;
    s->state =
        for_ms >= TM_PAUSED_DEGRADED_MS ? TM_CONN_DEGRADED : TM_CONN_PAUSED;
    snprintf(s->reason, sizeof s->reason, "%s%s",
             s->state == TM_CONN_DEGRADED ? "paused too long: " : "", why);
    s->reason_since_ms = c->paused_ms;
}

void tm_conn_waiting(tm_connector *c, int64_t until_ms, const char *fmt, ...) {
    if (!c->pulse)
        return;
    if (!fmt) {
        tm_status_pulse_waiting(c->pulse, NULL, 0, 0);
        return;
    }
    char raw[TM_STATUS_WAITING_MAX], on[TM_STATUS_WAITING_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    /* Names of topics and batches, maybe given as ${env:...} */
    tm_redact_list((const char *const *)c->cfg->secrets, c->cfg->nsecrets, raw,
                   TM_REDACT_MAYBE_CUT, on, sizeof on);
    /* The end on the wall clock, as the status file's other times. */
    int64_t wall = tm_wall_ms();
    tm_status_pulse_waiting(c->pulse, on, wall,
                            wall + (until_ms - tm_now_ms()));
}

int tm_conn_status_tick(tm_connector *c, int force) {
    return c->pulse ? tm_conn_status_tick_at(c, force, tm_now_ms()) : 0;
}

int tm_conn_status_tick_at(tm_connector *c, int force, int64_t now) {
    if (!c->pulse)
        return 0;
    if (!force && now - c->status_written_ms < TM_STATUS_PERIOD_MS)
        return 0;
    c->status_written_ms = now;
    tm_commit_sync_parts(c);
    tm_conn_refresh_markers(c);
    refresh_watermarks(c, now);

    tm_status_partition *parts =
        c->nparts ? calloc(c->nparts, sizeof *parts) : NULL;
    if (c->nparts && !parts)
        return 1; /* it took the time of a try */
    const tm_part *paused = NULL;
    for (size_t i = 0; i < c->nparts; i++) {
        const tm_part *p = &c->parts[i];
        tm_status_partition *s = &parts[i];
        snprintf(s->topic, sizeof s->topic, "%s", p->topic);
        s->partition = p->partition;
        s->next_offset = p->committed;
        s->epoch = p->epoch;
        /* Never below what is committed: a watermark not known better
         * yet (-1 unknown stays so) shows no lag rather than a negative
         * one. */
        s->high_watermark =
            p->high_watermark >= 0 && p->high_watermark < p->committed
                ? p->committed
                : p->high_watermark;
        s->rows = p->marker.rows;
        s->dead_letters = p->marker.dead_letters;
        s->filtered = p->marker.filtered;
        s->duplicates = p->marker.duplicates;
        s->stopped = p->stopped;
        s->stopped_at = p->stop_at;
        snprintf(s->stop_reason, sizeof s->stop_reason, "%s", p->stop_why);
        int by_host = p->paused || p->fenced || p->unclaimed || p->stopped;
        /* Paused by the host itself (its reason in the status), or with
         * the whole connector by an operator. */
        s->paused = by_host || c->paused_since_ms != 0;
        if (by_host && !paused)
            paused = p;
    }
    tm_status_snapshot s;
    memset(&s, 0, sizeof s);
    snprintf(s.connector, sizeof s.connector, "%s", c->cfg->name);
    if (c->sink.api) {
        snprintf(s.plugin, sizeof s.plugin, "%s", c->sink.api->name);
        snprintf(s.plugin_version, sizeof s.plugin_version, "%s",
                 c->sink.api->version ? c->sink.api->version : "");
    }
    snprintf(s.instance_id, sizeof s.instance_id, "%s", c->instance_id);
    s.pid = (long)getpid();
    s.updated_ms = tm_wall_ms();
    health(c, paused, s.updated_ms, &s);
    s.started_ms = c->started_ms;
    snprintf(s.last_batch_id, sizeof s.last_batch_id, "%s", c->last_batch_id);
    s.last_batch_ms = c->last_batch_ms;
    s.last_batch_records = c->last_batch_records;
    s.partitions = parts;
    s.npartitions = c->nparts;
    s.totals.rows = c->totals.rows;
    s.totals.dead_letters = c->totals.dead_letters;
    s.totals.filtered = c->totals.filtered;
    s.totals.duplicates = c->totals.duplicates;
    s.totals.batches = c->totals.batches;
    s.totals.fenced = c->totals.fenced;
    s.totals.conflicts = c->totals.conflicts;
    s.totals.retries = c->totals.retries;
    snprintf(s.last_error, sizeof s.last_error, "%s", c->last_error);
    s.last_error_ms = c->last_error_ms;
    char why[512];
    /* A failure of the status write is logged by the pulse. */
    if (tm_status_pulse_write(c->pulse, &s, why, sizeof why) == 0) {
        int failed = tm_metrics_save(c->metrics, c->status, why, sizeof why);
        tm_warn_once(&c->metrics_warned, c->cfg->name, "metrics",
                     failed ? why : NULL);
    }
    free(parts);
    return 1;
}
