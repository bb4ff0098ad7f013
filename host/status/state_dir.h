/* The state directory's safety rules. The directory may sit in a place
 * others can reach (/tmp, a shared volume): whoever can write to it could
 * plant a link named host.lock or status.json.tmp to a file of ours and
 * have the host truncate it. So the host writes only into directories it
 * owns that nobody else may write to, creates them 0700, and never follows
 * a link inside them. */
#ifndef TM_STATE_DIR_H
#define TM_STATE_DIR_H

#include <stddef.h>

/* mkdir -p PATH (new directories 0700), then checks it: a directory (a
 * symbolic link to one only when follow is non-zero: the top state
 * directory is the user's choice, a connector's directory inside it never
 * is), owned by this user, not writable by group or others. 0, or -1 with
 * errstr naming the directory and the reason. */
int tm_state_dir_prepare(const char *path, int follow, char *errstr,
                         size_t errsize);

/* open(PATH, flags | O_NOFOLLOW | O_CLOEXEC, 0644) for a file inside a
 * state directory; then it must be a regular file. The fd, or -1 with
 * errstr ("PATH is a symbolic link: refused ..." for a planted link; verb
 * is "open", "create", ... for other errors; errno is kept, so that
 * ENOENT tells a missing file). */
int tm_state_file_open(const char *path, int flags, const char *verb,
                       char *errstr, size_t errsize);

#endif
