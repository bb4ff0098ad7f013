/* The connectors of one `tidemark run` process, each on its own thread
 * with its own stop: started, stopped, and changed by a reload
 * (docs/operations.md, Reload) while the others run untouched. Driven by
 * one thread (cli/cmd_run.c's loop); the connector threads only read their
 * own stop and set their own failed and done. */
#ifndef TM_SUPERVISOR_H
#define TM_SUPERVISOR_H

#include <stdatomic.h>
#include <stddef.h>

#include "config/connector_config.h"
#include "runtime/connector.h"

typedef struct tm_supervisor tm_supervisor;

/* opt must outlive the supervisor; all_stop is the process's stop (a
 * connector started after it is set is stopped at once). NULL when memory
 * ran out. */
tm_supervisor *tm_sup_new(const tm_run_options *opt,
                          const atomic_int *all_stop);

/* Starts a connector on its own thread; the supervisor owns cfg from now
 * (on failure too). 0, or -1 (logged) when the thread cannot start. */
int tm_sup_start(tm_supervisor *s, tm_connector_config *cfg);

/* The running config of NAME, NULL when none runs under that name (for a
 * reload's load: a config unchanged from it need not be validated by its
 * plugin again). */
const tm_connector_config *tm_sup_config(const tm_supervisor *s,
                                         const char *name);

/* Whether NAME's connector is down: FAILED, returned, or never started. */
int tm_sup_is_down(const tm_supervisor *s, const char *name);

/* Applies reload SEQ (tm_reload_plan) with the configs read again, which
 * the supervisor owns from now: unchanged connectors untouched, changed
 * and down ones stopped and then started with their new config, removed
 * ones stopped, new ones started. The stops finish in tm_sup_tick. 0, or
 * -1 when refused (out of memory: every connector runs on unchanged, the
 * configs freed). */
int tm_sup_reload(tm_supervisor *s, unsigned seq, tm_connector_config **cfgs,
                  size_t n);

/* The configs of the connectors it runs or is starting (a changed one's
 * new config; those a reload removes left out), in order: the first max
 * into out (which may be NULL when max is 0). Returns how many there are. */
size_t tm_sup_configs(const tm_supervisor *s, tm_connector_config **out,
                      size_t max);

/* Whether a reload is still being applied (a connector it stopped has not
 * returned yet): the next reload waits for it. */
int tm_sup_busy(const tm_supervisor *s);

/* Finishes what stopped connectors wait for: a changed one is started
 * again with its new config once its thread returned, a removed one is
 * forgotten. Logs "reload N done" when the last one did. */
void tm_sup_tick(tm_supervisor *s);

/* 1 when no connector runs any more (each FAILED, returned or not
 * started, none waiting to be started again), with *failed the number
 * FAILED. */
int tm_sup_all_down(const tm_supervisor *s, size_t *failed);

/* Asks every connector to stop. The one call another thread may make (the
 * signal thread: tm_signals_on_stop); the list of connectors is changed
 * under a lock it takes. */
void tm_sup_stop_all(tm_supervisor *s);

/* tm_sup_stop_all for tm_signals_on_stop. */
void tm_sup_stop_all_hook(void *s);

/* After tm_sup_stop_all: waits for every connector thread until
 * TM_SUP_STOP_LIMIT_MS from now; when one is still inside its sink then,
 * the process exits without it (_exit, status 1 when a connector FAILED or
 * rc_before is set, else 0). Otherwise joins them all and returns the exit
 * status: rc_before, or 1 when a connector FAILED or could not start. */
int tm_sup_finish(tm_supervisor *s, int rc_before);

/* Frees the supervisor (after tm_sup_finish) and every config it owns. */
void tm_sup_free(tm_supervisor *s);

/* How long a stop may take (docs/operations.md, Signals): the batch in
 * flight gets TM_STOP_GRACE_MS, then the sink's interrupt(), then the
 * consumer's close its own 5 s watchdog. A sink that does not return even
 * when interrupted (seen: the PostgreSQL sink waiting for a server that
 * went silent, its cancel request lost on the same dead route) must not
 * keep the process alive past it. 10 s from the signal: a second less
 * from when the run loop sees it (it looks every 50 ms), for the exit
 * itself on a loaded machine. */
#define TM_SUP_STOP_LIMIT_MS 9000

#endif
