/* The state directory's layout and the host lock that tells a live host
 * from a dead one.
 *
 *   STATE_DIR/CONNECTOR/host.lock    flock()ed exclusively by the running
 *                                    host for its whole life; holds its pid
 *   STATE_DIR/CONNECTOR/status.json  the last snapshot, replaced by rename
 *
 * flock() locks die with the process (kill -9 included), so a lock that
 * can be taken belongs to nobody: no pid file to go stale, no pid reuse to
 * fool the reader. The pid in host.lock is only believed while the lock is
 * held. */
#ifndef TM_STATUS_LOCK_H
#define TM_STATUS_LOCK_H

#include <stddef.h>

#define TM_STATUS_LOCK_FILE "host.lock"
#define TM_STATUS_FILE      "status.json"

/* out = DIR/CONNECTOR/FILE (FILE may be NULL: the connector's directory).
 * 0, or -1 with errstr when the name is not a plain file name (empty, ".",
 * "..", containing '/') or the path does not fit. */
int tm_status_path(char *out, size_t size, const char *dir,
                   const char *connector, const char *file, char *errstr,
                   size_t errsize);

/* Whether a live process holds the lock at LOCK_PATH: tries a shared,
 * non-blocking flock and releases it at once. 1 held (*pid_out = the pid
 * written in the file, 0 if unreadable), 0 free or no such file, -1 with
 * errstr on other errors. pid_out may be NULL. */
int tm_status_lock_probe(const char *lock_path, long *pid_out, char *errstr,
                         size_t errsize);

/* The pid written in the lock file open at FD, 0 when there is none. */
long tm_status_lock_read_pid(int fd);

#endif
