#include "metrics/metrics_textfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SUFFIX ".prom"

int tm_metrics_textfile_check(const char *path, char *errstr, size_t errsize) {
    size_t n = strlen(path), s = strlen(SUFFIX);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (n <= s || strcmp(path + n - s, SUFFIX) != 0 || strlen(base) <= s) {
        snprintf(errstr, errsize,
                 "\"%s\": expected a file name ending in \".prom\" (the "
                 "textfile collector reads only those)",
                 path);
        return -1;
    }
    char *copy = strdup(path);
    if (!copy) {
        snprintf(errstr, errsize, "out of memory");
        return -1;
    }
    const char *dir = dirname(copy);
    struct stat st;
    int rc = 0;
    if (stat(dir, &st) != 0) {
        snprintf(errstr, errsize,
                 "\"%s\": expected an existing directory for it: %s: %s", path,
                 dir, strerror(errno));
        rc = -1;
    } else if (!S_ISDIR(st.st_mode)) {
        snprintf(errstr, errsize,
                 "\"%s\": expected an existing directory for it: %s is not "
                 "a directory",
                 path, dir);
        rc = -1;
    }
    free(copy);
    return rc;
}

int tm_metrics_textfile_write(const char *path, const char *text, size_t len,
                              char *errstr, size_t errsize) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        snprintf(errstr, errsize, "%s: path too long", path);
        return -1;
    }
    int fd =
        open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(errstr, errsize, "%s: %s", tmp, strerror(errno));
        return -1;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(errstr, errsize, "%s: %s", tmp,
                     w < 0 ? strerror(errno) : "short write");
            close(fd);
            unlink(tmp);
            return -1;
        }
        done += (size_t)w;
    }
    if (close(fd) != 0) {
        snprintf(errstr, errsize, "%s: %s", tmp, strerror(errno));
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        snprintf(errstr, errsize, "renaming %s to %s: %s", tmp, path,
                 strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}
