/* The connectors the metrics of one `tidemark run` process are about: set
 * at its start and again by each reload it applies (docs/operations.md,
 * Reload), so that a connector a reload added shows and one it removed
 * goes; read by the textfile writer and the listener on their own threads. */
#ifndef TM_METRICS_TARGETS_H
#define TM_METRICS_TARGETS_H

#include <stddef.h>
#include <stdio.h>

typedef struct tm_metrics_targets tm_metrics_targets;

/* An empty list; NULL out of memory. */
tm_metrics_targets *tm_metrics_targets_new(void);

/* Replaces the list with copies of the N connectors NAMES, whose status
 * files are in STATE_DIRS[i]. 0, or -1 out of memory (the list as
 * before). */
int tm_metrics_targets_set(tm_metrics_targets *t, const char *const *names,
                           const char *const *state_dirs, size_t n);

/* tm_metrics_render of the list as it is now. 0, or -1 out of memory. */
int tm_metrics_targets_render(tm_metrics_targets *t, FILE *out);

/* NULL is ignored. */
void tm_metrics_targets_free(tm_metrics_targets *t);

#endif
