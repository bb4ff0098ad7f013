#include "status/status_lock.h"

#include "status/state_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

int tm_status_path(char *out, size_t size, const char *dir,
                   const char *connector, const char *file, char *errstr,
                   size_t errsize) {
    /* The name comes from the command line too: never let it climb out of
     * the state directory. */
    if (!connector || !connector[0] || strcmp(connector, ".") == 0 ||
        strcmp(connector, "..") == 0 || strchr(connector, '/')) {
        snprintf(errstr, errsize, "\"%s\" is not a connector name",
                 connector ? connector : "");
        return -1;
    }
    int n = file ? snprintf(out, size, "%s/%s/%s", dir, connector, file)
                 : snprintf(out, size, "%s/%s", dir, connector);
    if (n < 0 || (size_t)n >= size) {
        snprintf(errstr, errsize, "path too long: %s/%s", dir, connector);
        return -1;
    }
    return 0;
}

long tm_status_lock_read_pid(int fd) {
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *end;
    long pid = strtol(buf, &end, 10);
    return (end != buf && pid > 0) ? pid : 0;
}

int tm_status_lock_probe(const char *lock_path, long *pid_out, char *errstr,
                         size_t errsize) {
    if (pid_out)
        *pid_out = 0;
    int fd = tm_state_file_open(lock_path, O_RDONLY, "open", errstr, errsize);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
    int rc;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        flock(fd, LOCK_UN);
        rc = 0;
    } else if (errno == EWOULDBLOCK) {
        if (pid_out)
            *pid_out = tm_status_lock_read_pid(fd);
        rc = 1;
    } else {
        snprintf(errstr, errsize, "cannot lock %s: %s", lock_path,
                 strerror(errno));
        rc = -1;
    }
    close(fd);
    return rc;
}
