/* Keeps a running connector's status file fresh while its thread cannot
 * write it: inside the sink's commit, or waiting for the dead-letter
 * topic's confirmations, which may each take minutes. A thread of its own
 * rewrites the last snapshot the connector published (its updated_ms
 * renewed, and what the connector says it waits on) whenever a period has
 * passed without a write (docs/operations.md: at least every second). */
#ifndef TM_STATUS_PULSE_H
#define TM_STATUS_PULSE_H

#include <stddef.h>
#include <stdint.h>

#include "status/status_file.h"
#include "status/status_model.h"

typedef struct tm_status_pulse tm_status_pulse;

/* A pulse writing through W (which it does not own) at least every
 * PERIOD_MS. NULL when memory ran out; without its thread (it could not
 * be started: a warning with WHO) it still writes what is published. */
tm_status_pulse *tm_status_pulse_start(tm_status_writer *w, int64_t period_ms,
                                       const char *who);

/* Writes S at once (its waiting fields replaced by the pulse's) and keeps
 * a copy of it, partitions included, for the rewrites. 0, or -1 with
 * errstr. A failure of this write or of a rewrite is logged by the pulse,
 * once until it changes (the caller does not log it again). Any thread. */
int tm_status_pulse_write(tm_status_pulse *p, const tm_status_snapshot *s,
                          char *errstr, size_t errsize);

/* The connector waits on ON (NULL or "": no more) since WALL_MS, until
 * UNTIL_WALL_MS at the latest (0: no known end): shown by every write from
 * now on, the rewrites included. Any thread. */
void tm_status_pulse_waiting(tm_status_pulse *p, const char *on,
                             int64_t wall_ms, int64_t until_wall_ms);

/* Stops the thread (the last snapshot was written) and frees P. NULL is
 * ignored. */
void tm_status_pulse_stop(tm_status_pulse *p);

#endif
