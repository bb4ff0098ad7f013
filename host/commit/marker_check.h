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

#endif
