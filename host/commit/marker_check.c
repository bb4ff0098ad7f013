/* The marker check: the one place that decides whether a batch continues
 * what the sink has stored. Every plugin reaches it through
 * tm_host_api.marker_check, inside its commit transaction, with the
 * markers locked. */
#include "commit/marker_check.h"

#include <inttypes.h>
#include <string.h>

#include "commit/lineage.h"
#include "services/error.h"

typedef enum range_verdict {
    RANGE_APPLY,
    RANGE_ALREADY,
    RANGE_FENCED,
    RANGE_CONFLICT
} range_verdict;

/* One partition: the four rules of docs/architecture.md, in their order. */
static range_verdict check_range(const tm_range *r, const tm_marker *m) {
    if (m->epoch == TM_NO_EPOCH)
        return RANGE_CONFLICT; /* never claimed: the host cannot own it */
    if (m->epoch != r->epoch)
        return RANGE_FENCED;
    if (r->start_offset == m->next_offset)
        return RANGE_APPLY;
    if (r->end_offset <= m->next_offset)
        return RANGE_ALREADY;
    return RANGE_CONFLICT;
}

static void describe(tm_error *err, range_verdict v, const tm_range *r,
                     const tm_marker *m, const char *batch_id) {
    const char *topic = r->topic ? r->topic : "?";
    switch (v) {
    case RANGE_FENCED:
        tm_error_set(err,
                     "%s[%" PRId32 "]: fenced: batch %s carries epoch %" PRId64
                     ", the sink's marker has epoch %" PRId64
                     " (another owner claimed the partition)",
                     topic, r->partition, batch_id, r->epoch, m->epoch);
        break;
    case RANGE_CONFLICT:
        if (m->epoch == TM_NO_EPOCH)
            tm_error_set(err,
                         "%s[%" PRId32 "]: conflict: the sink has no marker "
                         "for this partition (never claimed)",
                         topic, r->partition);
        else
            tm_error_set(err,
                         "%s[%" PRId32 "]: conflict: batch %s covers [%" PRId64
                         ", %" PRId64 ") but the sink's marker is at %" PRId64
                         " (%s)",
                         topic, r->partition, batch_id, r->start_offset,
                         r->end_offset, m->next_offset,
                         r->start_offset > m->next_offset ? "gap" : "overlap");
        break;
    case RANGE_ALREADY:
        tm_error_set(
            err,
            "%s[%" PRId32 "]: batch %s [%" PRId64 ", %" PRId64
            ") was already applied (marker at %" PRId64 ", last batch %s)",
            topic, r->partition, batch_id, r->start_offset, r->end_offset,
            m->next_offset, m->last_batch_id[0] ? m->last_batch_id : "-");
        break;
    case RANGE_APPLY: break;
    }
}

/* Every range must be a range (start <= end, offsets not negative) and
 * name its partition once: a backwards range would move a marker back
 * (100 -> 40, the records between applied twice), a partition named twice
 * would be advanced twice. O(n^2) over the ranges: a batch has a few. */
static int ranges_well_formed(const tm_batch *b, const char *batch_id,
                              tm_error *err) {
    for (size_t i = 0; i < b->nranges; i++) {
        const tm_range *r = TM_CELEM(tm_range, b->ranges, i);
        const char *topic = r->topic ? r->topic : "?";
        if (r->start_offset < 0) {
            tm_error_set(err,
                         "batch %s is malformed: range %zu %s[%" PRId32
                         "] starts at a negative offset %" PRId64,
                         batch_id, i, topic, r->partition, r->start_offset);
            return 0;
        }
        if (r->start_offset > r->end_offset) {
            tm_error_set(err,
                         "batch %s is malformed: range %zu %s[%" PRId32
                         "] runs backwards: [%" PRId64 ", %" PRId64 ")",
                         batch_id, i, topic, r->partition, r->start_offset,
                         r->end_offset);
            return 0;
        }
        for (size_t k = 0; k < i; k++) {
            const tm_range *o = TM_CELEM(tm_range, b->ranges, k);
            if (o->partition == r->partition &&
                strcmp(o->topic ? o->topic : "?", topic) == 0) {
                tm_error_set(err,
                             "batch %s is malformed: ranges %zu and %zu both "
                             "name %s[%" PRId32 "]",
                             batch_id, k, i, topic, r->partition);
                return 0;
            }
        }
    }
    return 1;
}

/* Every record and dead letter must name a range of the batch and lie in
 * it. The host builds batches, so a failure here is a host bug; checking
 * it once, here, keeps every sink from indexing past its arrays. */
static int batch_well_formed(const tm_batch *b, const char *batch_id,
                             tm_error *err) {
    for (size_t j = 0; j < b->nrecords + b->ndead_letters; j++) {
        int is_record = j < b->nrecords;
        uint32_t range;
        int64_t offset;
        if (is_record) {
            const tm_record *r = TM_CELEM(tm_record, b->records, j);
            range = r->range;
            offset = r->offset;
        } else {
            const tm_dead_letter *d =
                TM_CELEM(tm_dead_letter, b->dead_letters, j - b->nrecords);
            range = d->range;
            offset = d->offset;
        }
        const char *what = is_record ? "record" : "dead letter";
        size_t index = is_record ? j : j - b->nrecords;
        if (range >= b->nranges) {
            tm_error_set(err,
                         "batch %s is malformed: %s %zu names range %" PRIu32
                         " of %zu",
                         batch_id, what, index, range, b->nranges);
            return 0;
        }
        const tm_range *g = TM_CELEM(tm_range, b->ranges, range);
        if (offset < g->start_offset || offset >= g->end_offset) {
            tm_error_set(err,
                         "batch %s is malformed: %s %zu at offset %" PRId64
                         " lies outside its range %s[%" PRId32 "] [%" PRId64
                         ", %" PRId64 ")",
                         batch_id, what, index, offset,
                         g->topic ? g->topic : "?", g->partition,
                         g->start_offset, g->end_offset);
            return 0;
        }
    }
    return 1;
}

tm_status tm_marker_check(const tm_batch *batch, const tm_marker *stored,
                          tm_error *err) {
    const char *batch_id = batch->batch_id ? batch->batch_id : "?";
    if (!ranges_well_formed(batch, batch_id, err) ||
        !batch_well_formed(batch, batch_id, err))
        return TM_INVALID;
    size_t applies = 0, already = 0;
    /* The first fenced partition wins the message: FENCED outranks
     * CONFLICT because its remedy (drop and wait for revoke) is the safe
     * one when both are true. */
    const tm_range *first_conflict = NULL, *first_already = NULL;
    const tm_marker *conflict_marker = NULL, *already_marker = NULL;

    for (size_t i = 0; i < batch->nranges; i++) {
        const tm_range *r = TM_CELEM(tm_range, batch->ranges, i);
        const tm_marker *m = TM_CELEM(tm_marker, stored, i);
        range_verdict v = check_range(r, m);
        switch (v) {
        case RANGE_FENCED: describe(err, v, r, m, batch_id); return TM_FENCED;
        case RANGE_CONFLICT:
            if (!first_conflict) {
                first_conflict = r;
                conflict_marker = m;
            }
            break;
        case RANGE_ALREADY:
            already++;
            if (!first_already) {
                first_already = r;
                already_marker = m;
            }
            break;
        case RANGE_APPLY: applies++; break;
        }
    }
    if (first_conflict) {
        describe(err, RANGE_CONFLICT, first_conflict, conflict_marker,
                 batch_id);
        return TM_CONFLICT;
    }
    if (already > 0 && applies > 0) {
        /* Part applied, part not: the batch was not built from the
         * markers as they are; rebuilding is the only safe answer. */
        tm_error_set(
            err,
            "conflict: batch %s is partly applied: %zu partition(s) "
            "already applied (first %s[%" PRId32 "] at %" PRId64 "), %zu not",
            batch_id, already,
            first_already->topic ? first_already->topic : "?",
            first_already->partition, already_marker->next_offset, applies);
        return TM_CONFLICT;
    }
    if (already > 0) {
        describe(err, RANGE_ALREADY, first_already, already_marker, batch_id);
        return TM_ALREADY;
    }
    if (err)
        err->message[0] = '\0';
    return TM_OK;
}

void tm_marker_advance(tm_marker *stored, const tm_batch *batch, size_t range,
                       uint64_t rows, uint64_t dead_letters,
                       uint64_t duplicates) {
    const tm_range *r = TM_CELEM(tm_range, batch->ranges, range);
    stored->next_offset = r->end_offset;
    snprintf(stored->last_batch_id, sizeof stored->last_batch_id, "%s",
             batch->batch_id ? batch->batch_id : "");
    stored->rows += rows;
    stored->dead_letters += dead_letters;
    stored->filtered += r->filtered;
    stored->duplicates += r->duplicates + duplicates;
    tm_lineage_advance(stored, r);
}

int tm_marker_in_log(const tm_marker *m, int64_t low, int64_t high, char *why,
                     size_t whysize) {
    if (m->next_offset < low) {
        snprintf(why, whysize,
                 "%s [%" PRId32 "]: the sink's marker %" PRId64
                 " is below the log start offset %" PRId64 ": records %" PRId64
                 "..%" PRId64 " were deleted by retention before they were "
                 "applied; reset with `tidemark offsets --reset-to`",
                 m->topic, m->partition, m->next_offset, low, m->next_offset,
                 low - 1);
        return 0;
    }
    if (m->next_offset > high) {
        snprintf(why, whysize,
                 "%s [%" PRId32 "]: the sink's marker %" PRId64
                 " is above the high watermark %" PRId64
                 ": was the topic deleted and created again? reset "
                 "with `tidemark offsets --reset-to`",
                 m->topic, m->partition, m->next_offset, high);
        return 0;
    }
    return 1;
}

int tm_marker_moved(const tm_marker *then, const tm_marker *now) {
    return then->next_offset != now->next_offset || then->epoch != now->epoch ||
           strcmp(then->last_batch_id, now->last_batch_id) != 0;
}

void tm_marker_moved_error(char *why, size_t whysize, const char *topic,
                           int32_t partition, const tm_marker *then,
                           const tm_marker *now, int64_t ms) {
    snprintf(why, whysize,
             "%s [%" PRId32 "]: another live writer (another group or host?) "
             "keeps committing %s[%" PRId32 "]: its marker moved from %" PRId64
             " (epoch %" PRId64 ") to %" PRId64 " (epoch %" PRId64
             ") in %" PRId64 " ms, this host fenced; not claimed again while "
             "it moves",
             topic, partition, topic, partition, then->next_offset, then->epoch,
             now->next_offset, now->epoch, ms);
}

void tm_marker_lost_error(char *why, size_t whysize, const char *topic,
                          int32_t partition) {
    snprintf(why, whysize,
             "%s [%" PRId32 "]: the sink holds no marker for %s[%" PRId32
             "] any more (deleted, or the sink restored from a backup): "
             "nothing more is applied; decide with `tidemark offsets "
             "CONFIG --reset-to ...`",
             topic, partition, topic, partition);
}
