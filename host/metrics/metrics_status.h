/* Every family, from the files hosts write in their state directories:
 * from status.json each connector's state (the health model), records by
 * outcome, batches by the sink's answer, the marker, high watermark and lag
 * per partition; from metrics.json (metrics_persist.h) the commit duration
 * histogram, conversion time, errors and fetch queue; from /proc the live
 * hosts' resident memory. The same text for `tidemark status --format
 * prometheus` and for the textfile `tidemark run` writes
 * (docs/operations.md, Metrics). */
#ifndef TM_METRICS_STATUS_H
#define TM_METRICS_STATUS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "status/status_print.h"

/* VIEWS[i]'s files are in STATE_DIRS[i]; NOW_MS (wall clock) judges which
 * status files are stale (tm_status_stale_ms). */
void tm_metrics_status_write(FILE *out, const tm_status_view *views, size_t n,
                             const char *const *state_dirs, int64_t now_ms);

/* The resident set of process PID in bytes (from /proc/PID/statm), -1
 * when it cannot be read (gone, no /proc). */
long long tm_metrics_rss_bytes(long pid);

#endif
