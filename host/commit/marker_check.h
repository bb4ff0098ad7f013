/* The marker check of the commit protocol (docs/architecture.md, step 4):
 * the one implementation, reached by plugins through tm_host_api. */
#ifndef TM_MARKER_CHECK_H
#define TM_MARKER_CHECK_H

#include <tidemark/sink.h>

/* stored[i] is the sink's marker for batch->ranges[i]. TM_OK (apply all),
 * TM_ALREADY (all applied before), TM_FENCED, TM_CONFLICT; err names the
 * first offending partition and the offsets. TM_INVALID for a malformed
 * batch: a range running backwards (start > end) or starting below 0, a
 * partition named by two ranges, a record or dead letter naming a range
 * the batch does not have, or lying outside its range. */
tm_status tm_marker_check(const tm_batch *batch, const tm_marker *stored,
                          tm_error *err);

void tm_marker_advance(tm_marker *stored, const tm_batch *batch, size_t range,
                       uint64_t rows, uint64_t dead_letters,
                       uint64_t duplicates);

/* Whether a claimed marker lies inside the log [low, high] (low the log
 * start offset, high the high watermark): 1, else 0 with err naming the
 * partition, the bound and the reset command in why. auto.offset.reset=error: a
 * marker outside the log is never a silent jump. */
int tm_marker_in_log(const tm_marker *m, int64_t low, int64_t high, char *why,
                     size_t whysize);

/* Whether a marker moved between two reads (next_offset, epoch or last
 * batch): someone still commits its partition. */
int tm_marker_moved(const tm_marker *then, const tm_marker *now);

/* The DEGRADED reason of a fenced partition whose marker moved from `then`
 * to `now` in `ms`: another live writer (another group or host) keeps
 * committing it, so it is not claimed again while it moves. */
void tm_marker_moved_error(char *why, size_t whysize, const char *topic,
                           int32_t partition, const tm_marker *then,
                           const tm_marker *now, int64_t ms);

/* The error of a marker the sink no longer holds for a partition this host
 * claimed (deleted, or the sink restored from a backup): the connector
 * fails; the operator decides with `tidemark offsets --reset-to`. */
void tm_marker_lost_error(char *why, size_t whysize, const char *topic,
                          int32_t partition);

#endif
