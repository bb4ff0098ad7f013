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

/* How a connector is driven from outside its thread: by the run loop
 * (runtime/supervisor.c) and its control socket (control/control_server.h).
 * Each flag is only ever set by the others; loop_stop is cleared by the
 * connector alone (on resume). */
typedef struct tm_run_ctl {
    atomic_int stop;      /* stop for good (SIGTERM, a reload, a restart) */
    atomic_int pause;     /* paused by an operator (`tidemark pause`) */
    atomic_int loop_stop; /* stop or pause: what the commit loop watches */
    atomic_int failed;    /* set by the connector: it is FAILED */
    atomic_int restart;   /* `tidemark restart`: the run loop stops it and
                             starts it again */
} tm_run_ctl;

/* Zeroes every flag. */
void tm_run_ctl_init(tm_run_ctl *ctl);

/* Sets stop (and loop_stop): the connector finishes or abandons its batch
 * in flight and returns. */
void tm_run_ctl_stop(tm_run_ctl *ctl);

/* The state directory of cfg's connectors: opt's --state-dir, else the
 * config's state_dir, else the default (tm_status_default_dir). */
void tm_run_state_dir(const tm_connector_config *cfg, const tm_run_options *opt,
                      char *out, size_t size);

/* Runs until ctl->stop is set. A connector that fails sets ctl->failed and
 * stays FAILED in its status file until the stop (its consumer closed: a
 * dynamic member leaves the group, a static one keeps its partitions until
 * the group's session.timeout.ms, kafka/member_id.h): the caller ends the
 * process when every connector is down. While ctl->pause is set (or its
 * pause file says so at start: control/pause_file.h) it commits nothing,
 * its partitions paused in librdkafka, still polling (its membership and
 * assignment kept). */
tm_run_result tm_connector_run(const tm_connector_config *cfg,
                               const tm_run_options *opt, tm_run_ctl *ctl);

#endif
