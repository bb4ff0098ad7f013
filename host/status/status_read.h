/* Reading what hosts published in a state directory, for `tidemark
 * status`. Liveness comes from the host lock, never from the file: a file
 * whose lock is free belongs to a dead or stopped process, and is reported
 * STOPPED whatever state it says, with the time of its last update. */
#ifndef TM_STATUS_READ_H
#define TM_STATUS_READ_H

#include <stddef.h>

#include "status/status_model.h"

typedef struct tm_status_report {
    tm_status_snapshot snap;    /* snap.state is the effective state;
                                   snap.partitions points into parts */
    tm_status_partition *parts; /* owned */
    tm_conn_state written;      /* the state the file says */
    int has_file;               /* 0: a live host that wrote nothing yet
                                   (reported STARTING) */
    int live;                   /* a process holds the host lock */
    long live_pid;              /* its pid (0 when not live or unknown) */
} tm_status_report;

/* Reads CONNECTOR's status in STATE_DIR. 0 with *out filled (free it with
 * tm_status_report_free), 1 when the connector has neither a status file
 * nor a live host there (errstr says so), -1 with errstr on errors (an
 * unreadable or malformed file). */
int tm_status_read(const char *state_dir, const char *connector,
                   tm_status_report *out, char *errstr, size_t errsize);

void tm_status_report_free(tm_status_report *r);

/* The connectors that have a status file or a host lock in STATE_DIR,
 * sorted by name. 0 with *names (each and the array freed by the caller
 * with tm_status_names_free) and *n; -1 with errstr when the directory
 * cannot be read (a missing directory names it). */
int tm_status_list(const char *state_dir, char ***names, size_t *n,
                   char *errstr, size_t errsize);

void tm_status_names_free(char **names, size_t n);

#endif
