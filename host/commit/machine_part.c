/* The machine's partition table and what the sink's markers mean for each
 * partition: claimed, deferred, fenced, re-read, re-claimed. Pure: every
 * consequence is an action (commit/machine.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit/machine_internal.h"
#include "commit/marker_check.h"

mpart *tm_m_part(const tm_machine *m, const char *topic, int32_t partition) {
    for (size_t i = 0; i < m->nparts; i++)
        if (m->parts[i].partition == partition &&
            strcmp(m->parts[i].topic, topic) == 0)
            return &m->parts[i];
    return NULL;
}

mpart *tm_m_part_add(tm_machine *m, const char *topic, int32_t partition) {
    mpart *p = tm_m_part(m, topic, partition);
    if (p)
        return p; /* assigned again (eager), or while revoking */
    if (m->nparts == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        mpart *np = realloc(m->parts, cap * sizeof *np);
        if (!np)
            return NULL;
        m->parts = np;
        m->cap = cap;
    }
    char *t = tm_m_strdup(topic);
    if (!t)
        return NULL;
    p = &m->parts[m->nparts++];
    memset(p, 0, sizeof *p);
    p->topic = t;
    p->partition = partition;
    p->state = TM_PART_CLAIMING;
    p->epoch = TM_NO_EPOCH;
    p->committed = p->next_expected = TM_NO_OFFSET;
    p->high_watermark = -1;
    return p;
}

void tm_m_part_remove(tm_machine *m, mpart *p) {
    free(p->topic);
    *p = m->parts[--m->nparts];
}

void tm_m_parts_free(tm_machine *m) {
    for (size_t i = 0; i < m->nparts; i++)
        free(m->parts[i].topic);
    free(m->parts);
    m->parts = NULL;
    m->nparts = m->cap = 0;
}

int tm_m_part_owned(const mpart *p) {
    return p && p->state == TM_PART_RUNNING;
}

/* The markers of one CLAIMED event, checked against the log before any is
 * taken: one outside it fails the connector and none is claimed
 * (commit/claim.c does the same). */
static int all_in_log(tm_machine *m, const tm_machine_event *ev) {
    for (size_t i = 0; i < ev->nmarkers; i++) {
        const tm_marker *mk = &ev->markers[i];
        mpart *p = tm_m_part(m, mk->topic, mk->partition);
        if (!p || !p->claiming)
            continue;
        char why[1024];
        if (!tm_marker_in_log(mk, ev->low[i], ev->high[i], why, sizeof why)) {
            tm_m_fail(m, p, why);
            return 0;
        }
    }
    return 1;
}

int tm_m_parts_claimed(tm_machine *m, const tm_machine_event *ev) {
    if (!all_in_log(m, ev))
        return -1;
    int retried = 0;
    for (size_t i = 0; i < ev->nmarkers; i++) {
        const tm_marker *mk = &ev->markers[i];
        mpart *p = tm_m_part(m, mk->topic, mk->partition);
        if (!p || !p->claiming)
            continue; /* revoked while its claim was out */
        int reclaim = p->reclaiming, fresh = p->from_assignment;
        retried |= p->deferred;
        p->claiming = p->reclaiming = p->from_assignment = 0;
        if (reclaim && mk->epoch <= p->read_epoch) {
            /* The claim raises the epoch of a marker it finds: one no
             * higher than read is a marker it made, the one read gone
             * between the read and the claim. */
            char why[1024];
            tm_marker_lost_error(why, sizeof why, p->topic, p->partition);
            tm_m_fail(m, p, why);
            return -1;
        }
        p->epoch = mk->epoch;
        p->committed = p->next_expected = mk->next_offset;
        p->high_watermark = ev->high[i];
        /* Assigned at the log's end while deferred, or fetched up to the
         * fence: the position is elsewhere. A fresh assignment starts at
         * the marker itself. */
        p->needs_seek = p->deferred || reclaim;
        p->paused = p->deferred = 0;
        /* Read again from the marker: a stop comes again where it was. */
        p->stopped = p->held = 0;
        p->stop_at = 0;
        p->state = TM_PART_RUNNING;
        if (fresh && !p->needs_seek)
            tm_m_emit(m, TM_ACT_START, p, mk->next_offset, NULL);
        /* librdkafka keeps a pause across unassign and assign: one this
         * host paused when fenced would never be fetched again. */
        tm_m_emit(m, TM_ACT_RESUME, p, 0, NULL);
        /* Reads held (HOLD_READS, RETRY's backpressure): this one too,
         * until the batch at the sink settles (seeking to the marker). */
        if (m->at_sink.phase != TM_BATCH_NONE && m->at_sink.paused_parts) {
            tm_m_emit(m, TM_ACT_PAUSE, p, 0, NULL);
            p->paused = 1;
        }
    }
    if (retried)
        tm_backoff_reset(&m->claim_backoff); /* a deferred claim went in */
    m->sink_degraded = 0;                    /* a claim is a sign of recovery */
    tm_m_emit(m, TM_ACT_WRITE_STATUS, NULL, 0, NULL);
    return 0;
}

static void retry_claims_later(tm_machine *m) {
    m->claim_retry_ms = m->now_ms + tm_backoff_next(&m->claim_backoff);
}

void tm_m_parts_deferred(tm_machine *m, const tm_machine_event *ev) {
    int newly = 0, from_retry = 0;
    for (size_t i = 0; i < ev->nmarkers; i++) {
        const tm_marker *mk = &ev->markers[i];
        mpart *p = tm_m_part(m, mk->topic, mk->partition);
        if (!p || !p->claiming)
            continue;
        int fresh = p->from_assignment;
        p->claiming = p->from_assignment = 0;
        if (p->reclaiming) {
            /* Still fenced. A claim that went through before the defer
             * raised the epoch: that marker is what the next look must
             * find unchanged, not the one seen when fenced. */
            p->reclaiming = 0;
            if (mk->epoch != TM_NO_EPOCH) {
                p->fenced_marker = *mk;
                p->fenced_marker.topic = p->topic;
            }
            from_retry = 1;
            continue;
        }
        from_retry |= !fresh;
        if (!p->deferred) {
            newly++;
            p->deferred = 1;
            p->epoch = TM_NO_EPOCH;
            p->committed = p->next_expected = TM_NO_OFFSET;
        }
        if (fresh)
            tm_m_emit(m, TM_ACT_START, p, TM_MACHINE_LOG_END, NULL);
    }
    /* A deferral inside the assignment is retried at the next timer; one
     * of a retry waits for the claim backoff. */
    if (from_retry)
        retry_claims_later(m);
    if (newly)
        tm_m_emit(m, TM_ACT_WRITE_STATUS, NULL, 0, NULL);
}

/* Another owner claimed it: paused until the group revokes it, or until
 * the fenced bound passes with its marker unchanged. */
static void fence(tm_machine *m, mpart *p, const tm_marker *now) {
    if (p->state != TM_PART_FENCED) {
        tm_m_emit(m, TM_ACT_PAUSE, p, 0, NULL);
        p->fenced_ms = m->now_ms;
        p->fenced_marker = *now;
        p->fenced_marker.topic = p->topic;
    }
    p->state = TM_PART_FENCED;
}

mpart *tm_m_part_of(const tm_machine *m, const mrange *r) {
    mpart *p = tm_m_part(m, r->topic, r->partition);
    return p && p->epoch == r->epoch ? p : NULL;
}

void tm_m_parts_reread(tm_machine *m, const mbatch *b, const tm_marker *mk,
                       size_t n) {
    for (size_t i = 0; i < n; i++) {
        mpart *p = tm_m_part(m, mk[i].topic, mk[i].partition);
        const mrange *r = i < b->nranges ? &b->ranges[i] : NULL;
        if (!p || !r || p->epoch != r->epoch ||
            (p->state != TM_PART_RUNNING && p->state != TM_PART_FENCED))
            continue; /* not ours any more */
        if (mk[i].epoch == TM_NO_EPOCH) {
            char why[1024];
            tm_marker_lost_error(why, sizeof why, p->topic, p->partition);
            tm_m_fail(m, p, why);
            return;
        }
        if (mk[i].epoch != p->epoch) {
            fence(m, p, &mk[i]);
            continue;
        }
        p->committed = p->next_expected = mk[i].next_offset;
        p->needs_seek = 1;
    }
}

void tm_m_parts_fenced_read(tm_machine *m, const tm_machine_event *ev) {
    for (size_t i = 0; i < m->nparts; i++)
        m->parts[i].reading = 0;
    if (ev->status == TM_RETRY) {
        retry_claims_later(m);
        return;
    }
    if (ev->status != TM_OK) {
        tm_m_fail(m, NULL, ev->why ? ev->why : "read_markers failed");
        return;
    }
    for (size_t i = 0; i < ev->nmarkers; i++)
        if (ev->markers[i].epoch == TM_NO_EPOCH) {
            char why[1024];
            tm_marker_lost_error(why, sizeof why, ev->markers[i].topic,
                                 ev->markers[i].partition);
            tm_m_fail(
                m, tm_m_part(m, ev->markers[i].topic, ev->markers[i].partition),
                why);
            return;
        }
    for (size_t i = 0; i < ev->nmarkers; i++) {
        const tm_marker *mk = &ev->markers[i];
        mpart *p = tm_m_part(m, mk->topic, mk->partition);
        if (!p || p->state != TM_PART_FENCED)
            continue;
        if (tm_marker_moved(&p->fenced_marker, mk)) {
            /* A writer the group does not know of (another group_id)
             * still commits it: claiming it back would start a fencing
             * war. Looked at again after another bound. */
            char why[1024];
            tm_marker_moved_error(why, sizeof why, p->topic, p->partition,
                                  &p->fenced_marker, mk,
                                  m->now_ms - p->fenced_ms);
            tm_m_emit(m, TM_ACT_DEGRADE, p, 0, why);
            p->fenced_marker = *mk;
            p->fenced_marker.topic = p->topic;
            p->fenced_ms = m->now_ms;
            continue;
        }
        /* Nobody else writes it and the group still gives it to us: the
         * owner is gone. The claim returns the marker as it is. */
        p->claiming = p->reclaiming = 1;
        p->read_epoch = mk->epoch;
        tm_m_emit(m, TM_ACT_CLAIM, p, mk->next_offset, NULL);
    }
}

void tm_m_parts_flush_seeks(tm_machine *m) {
    for (size_t i = 0; i < m->nparts; i++) {
        mpart *p = &m->parts[i];
        if (p->state != TM_PART_RUNNING || !p->needs_seek || p->paused)
            continue;
        if (p->held) {
            /* Paused at its stop: read again only when something before
             * the stop is to be read again (its batch dropped). */
            if (p->next_expected >= p->stop_at)
                continue;
            tm_m_emit(m, TM_ACT_RESUME, p, 0, NULL);
            p->held = 0;
        }
        tm_m_emit(m, TM_ACT_SEEK, p, p->next_expected, NULL);
        p->needs_seek = 0;
    }
}

void tm_m_parts_pause_all(tm_machine *m, int pause) {
    for (size_t i = 0; i < m->nparts; i++) {
        mpart *p = &m->parts[i];
        if (p->state != TM_PART_RUNNING || p->held || p->paused == pause)
            continue;
        tm_m_emit(m, pause ? TM_ACT_PAUSE : TM_ACT_RESUME, p, 0, NULL);
        p->paused = pause;
        if (!pause)
            p->needs_seek = 1; /* whatever was fetched before the pause */
    }
}

void tm_m_parts_release(tm_machine *m) {
    for (size_t i = 0; i < m->nparts;) {
        mpart *p = &m->parts[i];
        if (p->state == TM_PART_REVOKING || p->state == TM_PART_LOST)
            tm_m_part_remove(m, p);
        else
            i++;
    }
}

void tm_m_parts_timer(tm_machine *m) {
    /* Stopping: nothing more is claimed (the commit loop has ended). */
    if (m->stopping || m->now_ms < m->claim_retry_ms)
        return;
    int any = 0;
    for (size_t i = 0; i < m->nparts; i++)
        any |= m->parts[i].claiming || m->parts[i].reading;
    if (any)
        return; /* one claim or read at a time */
    for (size_t i = 0; i < m->nparts; i++) {
        mpart *p = &m->parts[i];
        if (p->state == TM_PART_CLAIMING && p->deferred) {
            p->claiming = 1;
            tm_m_emit(m, TM_ACT_CLAIM, p, TM_NO_OFFSET, NULL);
        }
    }
    for (size_t i = 0; i < m->nparts; i++) {
        mpart *p = &m->parts[i];
        if (p->state == TM_PART_FENCED &&
            m->now_ms - p->fenced_ms >= m->cfg.fenced_bound_ms) {
            p->reading = 1;
            tm_m_emit(m, TM_ACT_READ_MARKERS, p, 0, NULL);
        }
    }
}
