/* `tidemark run --metrics-file PATH`: a thread that writes the process's
 * metrics to the textfile every interval, and once more at the stop. The
 * file holds what `tidemark status --format prometheus` prints for the
 * process's connectors: both read the files the hosts save in their state
 * directories, so the two always agree. */
#ifndef TM_METRICS_EXPORTER_H
#define TM_METRICS_EXPORTER_H

#include <stddef.h>
#include <stdio.h>

typedef struct tm_metrics_target {
    const char *state_dir; /* where the connector's status file is */
    const char *connector;
} tm_metrics_target;

/* The text for TARGETS. 0, or -1 when memory ran out. */
int tm_metrics_render(FILE *out, const tm_metrics_target *targets, size_t n);

typedef struct tm_metrics_exporter tm_metrics_exporter;
typedef struct tm_metrics_targets tm_metrics_targets; /* metrics_targets.h */

/* Writes the file once at once (an unwritable path fails here, before any
 * connector starts), then every interval_s seconds on its own thread,
 * each time for the connectors TARGETS holds then. TARGETS must outlive the
 * exporter. NULL with errstr. */
tm_metrics_exporter *tm_metrics_exporter_start(const char *path, int interval_s,
                                               tm_metrics_targets *targets,
                                               char *errstr, size_t errsize);

/* Writes the file a last time (the final states) and ends the thread.
 * NULL is ignored. */
void tm_metrics_exporter_stop(tm_metrics_exporter *e);

#endif
