/* One connector, run to the end on the calling thread: status lock, sink,
 * consumer, the commit loop, and an orderly stop. */
#ifndef TM_CONNECTOR_H
#define TM_CONNECTOR_H

#include <stdatomic.h>
#include <stddef.h>

#include "config/connector_config.h"

typedef struct tm_run_options {
    const char *const *plugin_dirs;
    size_t nplugin_dirs;
    const char *state_dir; /* overrides the config's; NULL: config's or the
                              default (tm_status_default_dir) */
} tm_run_options;

/* The exit of one connector. */
typedef enum tm_run_result {
    TM_RUN_STOPPED = 0, /* stopped by a signal, cleanly */
    TM_RUN_FAILED = 1,  /* FAILED (the status file says why) */
    TM_RUN_REFUSED = 2  /* could not start: another host runs it here, or
                           its state directory is unusable */
} tm_run_result;

/* Runs until *stop is set. A connector that fails sets *failed and stays
 * FAILED in its status file until *stop (its consumer closed: a dynamic
 * member leaves the group, a static one keeps its partitions until the
 * group's session.timeout.ms, kafka/member_id.h):
 * the caller ends the process when every connector is down. */
tm_run_result tm_connector_run(const tm_connector_config *cfg,
                               const tm_run_options *opt,
                               const atomic_int *stop, atomic_int *failed);

#endif
