/* The marker set in memory: lookup, claim, and the stored markers a commit
 * hands to host->marker_check(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

tm_marker *tms_find(tms_markers *ms, const char *topic, int32_t partition) {
    for (size_t i = 0; i < ms->n; i++)
        if (ms->v[i].m.partition == partition &&
            strcmp(ms->v[i].topic, topic) == 0)
            return &ms->v[i].m;
    return NULL;
}

/* Appends an absent marker (no epoch, no lineage); NULL on memory or a
 * topic too long to be Kafka's. The set's pointers move: re-point topics. */
tm_marker *tms_add_marker(tms_markers *ms, const char *topic,
                          int32_t partition) {
    if (strlen(topic) >= TMS_TOPIC_MAX)
        return NULL;
    if (ms->n == ms->cap) {
        size_t cap = ms->cap ? ms->cap * 2 : 8;
        tms_marker *v = realloc(ms->v, cap * sizeof *v);
        if (!v)
            return NULL;
        ms->v = v, ms->cap = cap;
        for (size_t i = 0; i < ms->n; i++)
            ms->v[i].m.topic = ms->v[i].topic;
    }
    tms_marker *e = &ms->v[ms->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->topic, sizeof e->topic, "%s", topic);
    e->m.struct_size = sizeof e->m;
    e->m.topic = e->topic;
    e->m.partition = partition;
    e->m.next_offset = TM_NO_OFFSET;
    e->m.epoch = TM_NO_EPOCH;
    e->m.last_offset = TM_NO_OFFSET; /* no record applied yet */
    e->m.last_timestamp_ms = -1;
    return &e->m;
}

void tms_fill(tm_marker *out, const tm_marker *stored) {
    const char *topic = out->topic;
    int32_t partition = out->partition;
    uint32_t size = out->struct_size;
    size_t n = sizeof *out < size ? sizeof *out : size;
    if (stored) {
        memcpy(out, stored, n);
    } else {
        memset(out, 0, n);
        out->next_offset = TM_NO_OFFSET;
        out->epoch = TM_NO_EPOCH;
        if (TM_MARKER_HAS_LINEAGE(out)) {
            out->last_offset = TM_NO_OFFSET;
            out->last_timestamp_ms = -1;
        }
    }
    out->struct_size = size;
    out->topic = topic;
    out->partition = partition;
}

tm_status tms_claim(const tm_host_api *host, tms_markers *ms, tm_marker *want,
                    size_t n, uint32_t flags, tm_error *err) {
    for (size_t i = 0; i < n; i++) {
        tm_marker *w = TM_ELEM(tm_marker, want, i);
        tm_marker *m = tms_find(ms, w->topic, w->partition);
        if (!m && (m = tms_add_marker(ms, w->topic, w->partition)))
            m->next_offset = w->next_offset; /* created at the start */
        else if (m && (flags & TM_CLAIM_RESET)) {
            m->next_offset = w->next_offset;
            m->last_offset = TM_NO_OFFSET; /* no record known there */
            m->last_timestamp_ms = -1;
            m->last_record_hash[0] = '\0';
        }
        if (!m) {
            host->set_error(err,
                            "claim %s[%d]: out of memory or topic name "
                            "too long",
                            w->topic, (int)w->partition);
            return TM_FATAL;
        }
        m->epoch++; /* fences every older owner */
    }
    for (size_t i = 0; i < n; i++) {
        tm_marker *w = TM_ELEM(tm_marker, want, i);
        tms_fill(w, tms_find(ms, w->topic, w->partition));
    }
    return TM_OK;
}

tm_status tms_stored(const tm_host_api *host, tms_markers *ms,
                     const tm_batch *b, tm_marker **stored, tm_error *err) {
    *stored = calloc(b->nranges + 1, sizeof **stored);
    if (!*stored) {
        host->set_error(err, "batch %s: out of memory", b->batch_id);
        return TM_FATAL;
    }
    for (size_t i = 0; i < b->nranges; i++) {
        const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
        tm_marker *s = &(*stored)[i];
        s->struct_size = sizeof *s;
        s->topic = g->topic;
        s->partition = g->partition;
        tms_fill(s, tms_find(ms, g->topic, g->partition));
    }
    return TM_OK;
}

void tms_update(tms_markers *ms, const tm_batch *b, const tm_marker *stored) {
    for (size_t i = 0; i < b->nranges; i++) {
        const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
        tm_marker *m = tms_find(ms, g->topic, g->partition);
        if (m) { /* the check said OK: every range has a claimed marker */
            const char *topic = m->topic;
            *m = stored[i];
            m->topic = topic;
        }
    }
}

void tms_markers_free(tms_markers *ms) {
    free(ms->v);
    memset(ms, 0, sizeof *ms);
}
