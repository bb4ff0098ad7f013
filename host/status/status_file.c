#include "status/status_file.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "services/fault.h"
#include "status/state_dir.h"
#include "status/status_json.h"
#include "status/status_lock.h"

struct tm_status_writer {
    int dir_fd; /* the connector's directory: every open, rename and unlink
                   is relative to it, so swapping a directory on the way
                   after start redirects nothing */
    int lock_fd;
    char connector[256];
    char dir[PATH_MAX];  /* the connector's directory, for messages */
    char path[PATH_MAX]; /* status.json */
    char tmp[PATH_MAX];  /* status.json.tmp: one writer per dir (the lock) */
};

void tm_status_default_dir(char *out, size_t size) {
    const char *v = getenv("TIDEMARK_STATE_DIR");
    if (v && v[0]) {
        snprintf(out, size, "%s", v);
        return;
    }
    /* The XDG spec says a relative value is invalid and must be ignored. */
    v = getenv("XDG_STATE_HOME");
    if (v && v[0] == '/') {
        snprintf(out, size, "%s/tidemark", v);
        return;
    }
    v = getenv("HOME");
    if (!v || !v[0]) {
        const struct passwd *pw = getpwuid(getuid());
        v = pw && pw->pw_dir ? pw->pw_dir : "/";
    }
    snprintf(out, size, "%s/.local/state/tidemark", v);
}

/* Takes the exclusive lock. A status reader's probe holds a shared lock
 * for a few microseconds, so a refusal is retried briefly before it is
 * believed: starting must not fail because someone ran `tidemark status`. */
static int lock_exclusive(int fd) {
    for (int i = 0; i < 20; i++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK)
            return -1;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    errno = EWOULDBLOCK;
    return -1;
}

static int write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

tm_status_writer *tm_status_writer_open(const char *state_dir,
                                        const char *connector, char *errstr,
                                        size_t errsize) {
    char dir[PATH_MAX], lock[PATH_MAX];
    if (tm_status_path(dir, sizeof dir, state_dir, connector, NULL, errstr,
                       errsize) != 0 ||
        tm_status_path(lock, sizeof lock, state_dir, connector,
                       TM_STATUS_LOCK_FILE, errstr, errsize) != 0)
        return NULL;
    tm_status_writer *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(errstr, errsize, "out of memory");
        return NULL;
    }
    w->dir_fd = -1;
    w->lock_fd = -1;
    snprintf(w->connector, sizeof w->connector, "%s", connector);
    snprintf(w->dir, sizeof w->dir, "%s", dir);
    int top = -1;
    if (tm_status_path(w->path, sizeof w->path, state_dir, connector,
                       TM_STATUS_FILE, errstr, errsize) != 0 ||
        tm_status_path(w->tmp, sizeof w->tmp, state_dir, connector,
                       TM_STATUS_FILE ".tmp", errstr, errsize) != 0 ||
        (top = tm_state_dir_open(state_dir, errstr, errsize)) < 0 ||
        (w->dir_fd =
             tm_state_subdir_open(top, connector, dir, errstr, errsize)) < 0 ||
        (w->lock_fd = tm_state_file_openat(w->dir_fd, TM_STATUS_LOCK_FILE, lock,
                                           O_RDWR | O_CREAT, "open", errstr,
                                           errsize)) < 0) {
        if (top >= 0)
            close(top);
        tm_status_writer_close(w);
        return NULL;
    }
    close(top);
    if (lock_exclusive(w->lock_fd) != 0) {
        if (errno == EWOULDBLOCK)
            snprintf(errstr, errsize,
                     "connector %s is already running (pid %ld)", connector,
                     tm_status_lock_read_pid(w->lock_fd));
        else
            snprintf(errstr, errsize, "cannot lock %s: %s", lock,
                     strerror(errno));
        tm_status_writer_close(w);
        return NULL;
    }
    /* The pid goes in only once the lock is ours; readers believe it only
     * while the lock is held. */
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(w->lock_fd, 0) != 0 ||
        pwrite(w->lock_fd, pid, (size_t)n, 0) != n) {
        snprintf(errstr, errsize, "cannot write %s: %s", lock, strerror(errno));
        tm_status_writer_close(w);
        return NULL;
    }
    return w;
}

int tm_status_writer_dir_fd(const tm_status_writer *w, const char **shown) {
    *shown = w->dir;
    return w->dir_fd;
}

int tm_status_writer_write(tm_status_writer *w, const tm_status_snapshot *s,
                           char *errstr, size_t errsize) {
    json_t *doc = tm_status_to_json(s);
    char *text = doc ? json_dumps(doc, JSON_INDENT(2)) : NULL;
    json_decref(doc);
    if (!text) {
        snprintf(errstr, errsize, "status: out of memory");
        return -1;
    }
    /* No fsync: the file is advisory (progress lives in the sink), and a
     * crash that loses the last update loses nothing a restart will not
     * rewrite within a second. rename() alone keeps readers from ever
     * seeing a torn file. */
    /* A test makes every write fail here as a full disk would. */
    if (tm_fault_fail("status.write")) {
        free(text);
        snprintf(errstr, errsize, "cannot write %s: %s", w->tmp,
                 strerror(ENOSPC));
        return -1;
    }
    int fd = tm_state_file_openat(w->dir_fd, TM_STATUS_FILE ".tmp", w->tmp,
                                  O_WRONLY | O_CREAT | O_TRUNC, "create",
                                  errstr, errsize);
    int rc = -1;
    if (fd < 0) {
        /* errstr says why */
    } else if (write_all(fd, text, strlen(text)) != 0 ||
               write_all(fd, "\n", 1) != 0) {
        snprintf(errstr, errsize, "cannot write %s: %s", w->tmp,
                 strerror(errno));
        close(fd);
    } else if (close(fd) != 0) {
        snprintf(errstr, errsize, "cannot write %s: %s", w->tmp,
                 strerror(errno));
    } else if (renameat(w->dir_fd, TM_STATUS_FILE ".tmp", w->dir_fd,
                        TM_STATUS_FILE) != 0) {
        snprintf(errstr, errsize, "cannot rename %s to %s: %s", w->tmp, w->path,
                 strerror(errno));
    } else {
        rc = 0;
    }
    if (rc != 0)
        unlinkat(w->dir_fd, TM_STATUS_FILE ".tmp", 0);
    free(text);
    return rc;
}

void tm_status_writer_close(tm_status_writer *w) {
    if (!w)
        return;
    if (w->lock_fd >= 0)
        close(w->lock_fd); /* releases the flock */
    if (w->dir_fd >= 0)
        close(w->dir_fd);
    free(w);
}

int tm_status_is_live(const char *state_dir, const char *connector,
                      long *pid_out) {
    char lock[PATH_MAX], errstr[256];
    if (pid_out)
        *pid_out = 0;
    if (tm_status_path(lock, sizeof lock, state_dir, connector,
                       TM_STATUS_LOCK_FILE, errstr, sizeof errstr) != 0)
        return -1;
    return tm_status_lock_probe(lock, pid_out, errstr, sizeof errstr);
}
