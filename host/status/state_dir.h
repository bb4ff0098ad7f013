/* The state directory's safety rules. The directory may sit in a place
 * others can reach (/tmp, a shared volume): whoever can write to it could
 * plant a link named host.lock or status.json.tmp to a file of ours and
 * have the host truncate it, or swap a directory on the way for a link. So
 * the host opens its directories one component at a time, writes only into
 * directories it owns that nobody else may write to, creates them 0700,
 * never follows a link inside them, and does every later open, rename and
 * unlink relative to the connector directory's descriptor. */
#ifndef TM_STATE_DIR_H
#define TM_STATE_DIR_H

#include <stddef.h>

/* Opens the top state directory PATH (relative: against the working
 * directory), creating missing directories 0700, one component at a time
 * from /: each directory on the way must be root's or this user's and
 * writable by nobody else, unless sticky (/tmp) with the entry below it
 * root's or this user's; a symbolic link is followed only under the same
 * rule (so a link planted by someone else is refused); ".." is refused.
 * PATH itself must be this user's and not writable by group or others, or
 * the Kubernetes volume layout: root's or this user's, setgid, writable by
 * one of this process's groups and not by others. An O_DIRECTORY fd, or -1
 * with errstr naming the directory and the reason. */
int tm_state_dir_open(const char *path, char *errstr, size_t errsize);

/* Opens (mkdir 0700 when missing) a connector's directory NAME inside the
 * state directory open at DIR_FD: never a link, this user's, not writable by
 * group or others. SHOWN is its path for messages. The fd, or -1. */
int tm_state_subdir_open(int dir_fd, const char *name, const char *shown,
                         char *errstr, size_t errsize);

/* openat(DIR_FD, NAME, ...) as tm_state_file_open does; SHOWN is its path
 * for messages. */
int tm_state_file_openat(int dir_fd, const char *name, const char *shown,
                         int flags, const char *verb, char *errstr,
                         size_t errsize);

/* open(PATH, flags | O_NOFOLLOW | O_CLOEXEC, 0644) for a file inside a
 * state directory; then it must be a regular file. The fd, or -1 with
 * errstr ("PATH is a symbolic link: refused ..." for a planted link; verb
 * is "open", "create", ... for other errors; errno is kept, so that
 * ENOENT tells a missing file). */
int tm_state_file_open(const char *path, int flags, const char *verb,
                       char *errstr, size_t errsize);

#endif
