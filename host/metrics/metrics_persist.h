/* A connector's figures (metrics_registry.h) saved next to its status file
 * as STATE_DIR/CONNECTOR/metrics.json, so that `tidemark status --format
 * prometheus` prints them with no process to ask, and the metrics textfile
 * is made from the same files. Written the way status.json is (a temporary
 * name in the connector's directory, through its descriptor, renamed
 * over), read with the same refusal of symbolic links. */
#ifndef TM_METRICS_PERSIST_H
#define TM_METRICS_PERSIST_H

#include <stddef.h>

#include "metrics/metrics_registry.h"

#define TM_METRICS_FILE "metrics.json"

struct tm_status_writer;

/* Saves M's figures in W's connector directory. 0, or -1 with errstr; M
 * NULL saves nothing (0). */
int tm_metrics_save(const tm_metrics_conn *m, struct tm_status_writer *w,
                    char *errstr, size_t errsize);

/* The same into the directory open at DIR_FD (SHOWN: its path, for
 * messages). */
int tm_metrics_save_at(const tm_metrics_conn *m, int dir_fd, const char *shown,
                       char *errstr, size_t errsize);

/* Reads CONNECTOR's saved figures in STATE_DIR. 0 with *out filled, 1 when
 * there is no file (a host that saved none yet, or of an older version),
 * -1 with errstr naming the file and what is wrong. */
int tm_metrics_load(const char *state_dir, const char *connector,
                    tm_metrics_values *out, char *errstr, size_t errsize);

#endif
