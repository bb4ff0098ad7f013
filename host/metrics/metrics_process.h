/* The metrics of one `tidemark run` process (docs/operations.md,
 * Metrics): its options checked before anything starts, then the textfile
 * writer and the loopback listener started and stopped together. */
#ifndef TM_METRICS_PROCESS_H
#define TM_METRICS_PROCESS_H

#include <stddef.h>

typedef struct tm_metrics_options {
    const char *file;     /* --metrics-file, NULL: no textfile */
    const char *interval; /* --metrics-interval-s as given, NULL: default */
    const char *listen;   /* --metrics-listen, NULL: no listener */
    int interval_s;       /* set by tm_metrics_options_check */
} tm_metrics_options;

/* Checks O (each refusal printed as "tidemark run: OPTION: what was
 * expected"). 0, or -1: a usage error. */
int tm_metrics_options_check(tm_metrics_options *o);

typedef struct tm_metrics_process tm_metrics_process;

/* Starts what O asks for the N connectors NAMES, whose status files are in
 * STATE_DIRS[i] (copied). With nothing asked, returns a process that does
 * nothing. NULL with the error printed (the file cannot be written, the
 * address cannot be bound). */
tm_metrics_process *tm_metrics_process_start(const tm_metrics_options *o,
                                             const char *const *names,
                                             const char *const *state_dirs,
                                             size_t n);

/* The connectors the metrics are about from now (a reload applied: those
 * it added show, those it removed go), as for tm_metrics_process_start.
 * 0, or -1 out of memory (logged; the metrics keep the connectors they
 * had). NULL is ignored. */
int tm_metrics_process_set(tm_metrics_process *p, const char *const *names,
                           const char *const *state_dirs, size_t n);

/* The textfile's last write (the final states), the listener closed.
 * NULL is ignored. */
void tm_metrics_process_stop(tm_metrics_process *p);

#endif
