#include "status/state_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p PATH, each new directory 0700. 0 or -1 with errno set. */
static int mkdirs(const char *path) {
    char buf[PATH_MAX];
    int n = snprintf(buf, sizeof buf, "%s", path);
    if (n < 0 || (size_t)n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

int tm_state_dir_prepare(const char *path, int follow, char *errstr,
                         size_t errsize) {
    if (mkdirs(path) != 0) {
        snprintf(errstr, errsize, "cannot create the state directory %s: %s",
                 path, strerror(errno));
        return -1;
    }
    struct stat st;
    if ((follow ? stat(path, &st) : lstat(path, &st)) != 0) {
        snprintf(errstr, errsize, "cannot create the state directory %s: %s",
                 path, strerror(errno));
        return -1;
    }
    if (S_ISLNK(st.st_mode)) {
        snprintf(errstr, errsize,
                 "state directory %s is a symbolic link: refused (a "
                 "connector's directory is never followed)",
                 path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(errstr, errsize, "cannot create the state directory %s: %s",
                 path, strerror(ENOTDIR));
        return -1;
    }
    if (st.st_uid != geteuid()) {
        snprintf(errstr, errsize,
                 "state directory %s is owned by uid %ld, not by this user "
                 "(uid %ld): refused (its owner could plant links to your "
                 "files in it)",
                 path, (long)st.st_uid, (long)geteuid());
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(errstr, errsize,
                 "state directory %s is writable by group or others (mode "
                 "%04o): refused (anyone could plant links to your files in "
                 "it); chmod go-w it or choose another one",
                 path, (unsigned)(st.st_mode & 07777));
        return -1;
    }
    return 0;
}

int tm_state_file_open(const char *path, int flags, const char *verb,
                       char *errstr, size_t errsize) {
    /* O_NONBLOCK: a planted FIFO must not hang the open. */
    int fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP)
            snprintf(errstr, errsize,
                     "%s is a symbolic link: refused (links in a state "
                     "directory are never followed; remove it)",
                     path);
        else
            snprintf(errstr, errsize, "cannot %s %s: %s", verb, path,
                     strerror(e));
        errno = e; /* callers tell a missing file from the rest */
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(errstr, errsize, "%s is not a regular file: refused", path);
        close(fd);
        errno = EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        snprintf(errstr, errsize, "cannot %s %s: %s", verb, path,
                 strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}
