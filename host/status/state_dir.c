#define _XOPEN_SOURCE 700 /* S_ISVTX is XSI */
#include "status/state_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Root, who could do anything anyway, or the user the host runs as. */
static int trusted(uid_t uid) {
    return uid == 0 || uid == geteuid();
}

static int in_my_groups(gid_t gid) {
    if (gid == getegid())
        return 1;
    gid_t groups[NGROUPS_MAX];
    int n = getgroups(NGROUPS_MAX, groups);
    for (int i = 0; i < n; i++)
        if (groups[i] == gid)
            return 1;
    return 0;
}

/* DIR (shown as SHOWN), on the way to the state directory TOP, holds the
 * entry below it, owned by ENTRY_UID (a link when IS_LINK). Whoever may
 * change DIR's entries may swap that entry: DIR must be root's or ours and
 * nobody else may write to it, except a sticky directory (/tmp) when the
 * entry is root's or ours (then nobody else may rename or remove it). */
static int check_parent(const char *top, const char *shown,
                        const struct stat *dir, uid_t entry_uid, int is_link,
                        const char *entry, char *errstr, size_t errsize) {
    if (!trusted(dir->st_uid)) {
        snprintf(errstr, errsize,
                 "state directory %s: %s is owned by uid %ld, neither root "
                 "nor this user (uid %ld): refused (its owner could swap what "
                 "is below it)",
                 top, shown, (long)dir->st_uid, (long)geteuid());
        return -1;
    }
    int shared = (dir->st_mode & (S_IWGRP | S_IWOTH)) != 0;
    /* A directory of someone else's in a private parent is refused as the
     * next parent (or as the top) with its own message. */
    if (!trusted(entry_uid) && (is_link || shared)) {
        snprintf(errstr, errsize,
                 "state directory %s: %s is %s owned by uid %ld, neither "
                 "root nor this user (uid %ld): refused (a planted link or "
                 "directory would redirect the host's files)",
                 top, entry, is_link ? "a symbolic link" : "a directory",
                 (long)entry_uid, (long)geteuid());
        return -1;
    }
    if (shared && (dir->st_mode & S_ISVTX) == 0) {
        snprintf(errstr, errsize,
                 "state directory %s: %s is writable by group or others "
                 "(mode %04o): refused (anyone could swap what is below it); "
                 "chmod go-w it or choose another state directory",
                 top, shown, (unsigned)(dir->st_mode & 07777));
        return -1;
    }
    return 0;
}

/* The top state directory itself: ours and private, or the Kubernetes
 * volume layout (owner root or us, setgid, writable by a group of ours and
 * nobody else). The latter lets the group's other members add entries:
 * harmless, since a connector's directory inside is never a link, must be
 * ours and private, and is written through its descriptor only. */
static int check_top(const char *top, const struct stat *st, char *errstr,
                     size_t errsize) {
    int volume = trusted(st->st_uid) && (st->st_mode & S_ISGID) != 0 &&
                 (st->st_mode & S_IWGRP) != 0 && (st->st_mode & S_IWOTH) == 0 &&
                 in_my_groups(st->st_gid);
    if (volume)
        return 0;
    if (st->st_uid != geteuid()) {
        snprintf(errstr, errsize,
                 "state directory %s is owned by uid %ld, not by this user "
                 "(uid %ld): refused (its owner could plant links to your "
                 "files in it)",
                 top, (long)st->st_uid, (long)geteuid());
        return -1;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(errstr, errsize,
                 "state directory %s is writable by group or others (mode "
                 "%04o): refused (anyone could plant links to your files in "
                 "it); chmod go-w it or choose another one",
                 top, (unsigned)(st->st_mode & 07777));
        return -1;
    }
    return 0;
}

/* One step down: NAME inside FD (whose stat is *ST), created 0700 when
 * missing. A link is followed only when the parent rules above accept it;
 * a directory is opened O_NOFOLLOW. The new fd with *ST updated, or -1. */
static int step(int fd, struct stat *st, const char *name, const char *top,
                const char *parent_shown, const char *shown, char *errstr,
                size_t errsize) {
    struct stat lst;
    if (fstatat(fd, name, &lst, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT ||
            (mkdirat(fd, name, 0700) != 0 && errno != EEXIST) ||
            fstatat(fd, name, &lst, AT_SYMLINK_NOFOLLOW) != 0) {
            snprintf(errstr, errsize,
                     "cannot create the state directory %s: %s: %s", top, shown,
                     strerror(errno));
            return -1;
        }
    }
    int is_link = S_ISLNK(lst.st_mode);
    if (check_parent(top, parent_shown, st, lst.st_uid, is_link, shown, errstr,
                     errsize) != 0)
        return -1;
    int nfd =
        openat(fd, name,
               O_RDONLY | O_DIRECTORY | O_CLOEXEC | (is_link ? 0 : O_NOFOLLOW));
    struct stat nst;
    if (nfd < 0 || fstat(nfd, &nst) != 0) {
        snprintf(errstr, errsize,
                 "cannot create the state directory %s: %s: %s", top, shown,
                 strerror(errno));
        if (nfd >= 0)
            close(nfd);
        return -1;
    }
    /* The entry checked is the entry opened (not swapped in between). */
    if (!is_link && (nst.st_dev != lst.st_dev || nst.st_ino != lst.st_ino)) {
        snprintf(errstr, errsize,
                 "state directory %s: %s changed while being opened: refused",
                 top, shown);
        close(nfd);
        return -1;
    }
    *st = nst;
    return nfd;
}

/* The absolute form of PATH (relative ones against the working directory)
 * into out. 0 or -1 with errstr. */
static int absolute(const char *path, char *out, size_t size, char *errstr,
                    size_t errsize) {
    char cwd[PATH_MAX];
    int n;
    if (path[0] == '/') {
        n = snprintf(out, size, "%s", path);
    } else if (getcwd(cwd, sizeof cwd) == NULL) {
        snprintf(errstr, errsize, "state directory %s: cannot resolve: %s",
                 path, strerror(errno));
        return -1;
    } else {
        n = snprintf(out, size, "%s/%s", cwd, path);
    }
    if (n < 0 || (size_t)n >= size) {
        snprintf(errstr, errsize, "state directory %s: path too long", path);
        return -1;
    }
    return 0;
}

int tm_state_dir_open(const char *path, char *errstr, size_t errsize) {
    char abs[PATH_MAX], shown[PATH_MAX], parent[PATH_MAX];
    if (absolute(path, abs, sizeof abs, errstr, errsize) != 0)
        return -1;
    int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(errstr, errsize, "state directory %s: cannot open /: %s", path,
                 strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    snprintf(shown, sizeof shown, "/");
    size_t shown_len = 0; /* shown without its trailing part for "/" */
    char *save = NULL;
    for (char *c = strtok_r(abs, "/", &save); c != NULL;
         c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0)
            continue;
        if (strcmp(c, "..") == 0) {
            snprintf(errstr, errsize,
                     "state directory %s: \"..\" in the path: refused (give "
                     "it without \"..\")",
                     path);
            close(fd);
            return -1;
        }
        memcpy(parent, shown, strlen(shown) + 1);
        int n = snprintf(shown + shown_len, sizeof shown - shown_len, "/%s", c);
        if (n < 0 || (size_t)n >= sizeof shown - shown_len) {
            snprintf(errstr, errsize, "state directory %s: path too long",
                     path);
            close(fd);
            return -1;
        }
        shown_len += (size_t)n;
        int nfd = step(fd, &st, c, path, parent, shown, errstr, errsize);
        close(fd);
        if (nfd < 0)
            return -1;
        fd = nfd;
    }
    if (check_top(path, &st, errstr, errsize) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int tm_state_subdir_open(int dir_fd, const char *name, const char *shown,
                         char *errstr, size_t errsize) {
    if (mkdirat(dir_fd, name, 0700) != 0 && errno != EEXIST) {
        snprintf(errstr, errsize, "cannot create the state directory %s: %s",
                 shown, strerror(errno));
        return -1;
    }
    int fd =
        openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        struct stat lst;
        if ((errno == ELOOP || errno == ENOTDIR) &&
            fstatat(dir_fd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(lst.st_mode))
            snprintf(errstr, errsize,
                     "state directory %s is a symbolic link: refused (a "
                     "connector's directory is never followed)",
                     shown);
        else
            snprintf(errstr, errsize,
                     "cannot create the state directory %s: %s", shown,
                     strerror(errno));
        return -1;
    }
    struct stat st;
    const char *why = NULL;
    if (fstat(fd, &st) != 0)
        why = strerror(errno);
    if (why != NULL) {
        snprintf(errstr, errsize, "cannot open the state directory %s: %s",
                 shown, why);
        close(fd);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        snprintf(errstr, errsize,
                 "state directory %s is owned by uid %ld, not by this user "
                 "(uid %ld): refused (its owner could plant links to your "
                 "files in it)",
                 shown, (long)st.st_uid, (long)geteuid());
        close(fd);
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(errstr, errsize,
                 "state directory %s is writable by group or others (mode "
                 "%04o): refused (anyone could plant links to your files in "
                 "it); chmod go-w it or choose another one",
                 shown, (unsigned)(st.st_mode & 07777));
        close(fd);
        return -1;
    }
    return fd;
}

int tm_state_file_openat(int dir_fd, const char *name, const char *shown,
                         int flags, const char *verb, char *errstr,
                         size_t errsize) {
    /* O_NONBLOCK: a planted FIFO must not hang the open. */
    int fd =
        openat(dir_fd, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP)
            snprintf(errstr, errsize,
                     "%s is a symbolic link: refused (links in a state "
                     "directory are never followed; remove it)",
                     shown);
        else
            snprintf(errstr, errsize, "cannot %s %s: %s", verb, shown,
                     strerror(e));
        errno = e; /* callers tell a missing file from the rest */
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(errstr, errsize, "%s is not a regular file: refused", shown);
        close(fd);
        errno = EINVAL;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        snprintf(errstr, errsize, "cannot %s %s: %s", verb, shown,
                 strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int tm_state_file_open(const char *path, int flags, const char *verb,
                       char *errstr, size_t errsize) {
    return tm_state_file_openat(AT_FDCWD, path, path, flags, verb, errstr,
                                errsize);
}
