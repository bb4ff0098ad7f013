/* What a reload (SIGHUP, docs/operations.md, Reload) does to each
 * connector: the running ones against the configs read again. Pure logic:
 * no thread, no file. */
#ifndef TM_RELOAD_PLAN_H
#define TM_RELOAD_PLAN_H

#include <stddef.h>

#include "config/connector_config.h"

typedef enum tm_reload_action {
    TM_RELOAD_KEEP = 0,    /* same config, running: left untouched */
    TM_RELOAD_RESTART = 1, /* config changed, or the connector is down
                              (FAILED, could not start): stopped as SIGTERM
                              stops it, started again with the new config */
    TM_RELOAD_STOP = 2,    /* no config of its name any more */
    TM_RELOAD_START = 3    /* a config of a new name */
} tm_reload_action;

/* One connector's config as loaded. */
typedef struct tm_reload_entry {
    const tm_connector_config *cfg;
    int down; /* running ones: FAILED, returned, or never started */
} tm_reload_entry;

/* Whether two loads are the same config: their JSON after interpolation
 * equal (json_equal: key order and spacing do not count; a changed
 * ${env:X} or ${file:P} value is a changed config). */
int tm_reload_same(const tm_connector_config *a, const tm_connector_config *b);

/* The plan: run_action[i] for each running connector (KEEP, RESTART or
 * STOP) with run_next[i] the index of its config in next (-1 for STOP);
 * next_action[k] for each config read (START when no running connector
 * has its name, else the action of the one that has). Names within run and
 * within next are unique (the loads refuse duplicates). */
void tm_reload_plan(const tm_reload_entry *run, size_t nrun,
                    const tm_reload_entry *next, size_t nnext,
                    tm_reload_action *run_action, long *run_next,
                    tm_reload_action *next_action);

#endif
