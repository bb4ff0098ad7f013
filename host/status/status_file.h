/* The status file a running host publishes for `tidemark status`, and the
 * host lock that says whether that host is still alive (status_lock.h has
 * the directory layout). */
#ifndef TM_STATUS_FILE_H
#define TM_STATUS_FILE_H

#include <stddef.h>

#include "status/status_model.h"

typedef struct tm_status_writer tm_status_writer;

/* Default state dir when neither the config's state_dir nor --state-dir is
 * given: $TIDEMARK_STATE_DIR, else $XDG_STATE_HOME/tidemark (when
 * absolute), else $HOME/.local/state/tidemark. Writes into out. */
void tm_status_default_dir(char *out, size_t size);

/* Creates DIR/CONNECTOR/ (mkdir -p), takes an exclusive flock on
 * DIR/CONNECTOR/host.lock held for the writer's life and writes the pid
 * into it; NULL with errstr when another live process holds it ("connector
 * X is already running (pid N)") or on I/O errors. */
tm_status_writer *tm_status_writer_open(const char *state_dir,
                                        const char *connector, char *errstr,
                                        size_t errsize);

/* The connector's directory, open for the writer's life (other files of
 * the host go in it, relative to this fd), and its path for messages. */
int tm_status_writer_dir_fd(const tm_status_writer *w, const char **shown);

/* status.json written to a temporary name in the same dir and renamed over
 * (readers never see half a file). 0 or -1 with errstr. */
int tm_status_writer_write(tm_status_writer *w, const tm_status_snapshot *s,
                           char *errstr, size_t errsize);

/* Releases the lock; keeps the file. NULL is ignored. */
void tm_status_writer_close(tm_status_writer *w);

/* 1 when a live process holds CONNECTOR's lock in state_dir, 0 when not,
 * -1 on error. *pid_out gets the holder's pid (0 when not held); pid_out may
 * be NULL. */
int tm_status_is_live(const char *state_dir, const char *connector,
                      long *pid_out);

#endif
