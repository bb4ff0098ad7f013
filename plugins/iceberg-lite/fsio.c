/* File-system helpers (see fsio.h). */
#define _GNU_SOURCE /* O_PATH */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsio.h"

const char *fs_path_shown(const char *path, char buf[48]) {
    size_t n = strlen(path);
    if (n <= FS_PATH_SHOWN_MAX)
        return path;
    snprintf(buf, 48, "(a path of %zu bytes)", n);
    return buf;
}

static int fail(char *why, size_t size, const char *what, const char *path,
                int e) {
    char shown[48];
    snprintf(why, size, "%s %s: %s", what, fs_path_shown(path, shown),
             strerror(e));
    return -1;
}

int fs_write_new(const char *path, const void *data, size_t len, int sync,
                 char *why, size_t why_size) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return fail(why, why_size, "create", path, errno);
    const uint8_t *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            close(fd);
            unlink(path);
            return fail(why, why_size, "write", path, e);
        }
        p += n;
        left -= (size_t)n;
    }
    if (sync && fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(path); /* never trusted again: a new file, a new name */
        return fail(why, why_size, "fsync", path, e);
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(path);
        return fail(why, why_size, "close", path, e);
    }
    return 0;
}

/* Writes DATA over the whole of FD's file (the spare): written first,
 * then cut to its length, so a longer old content never shows past it. */
static int overwrite(int fd, const void *data, size_t len) {
    const uint8_t *p = data;
    size_t off = 0;
    while (off < len) {
        ssize_t n = pwrite(fd, p + off, len - off, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        off += (size_t)n;
    }
    return ftruncate(fd, (off_t)len);
}

int fs_replace_via_spare(const char *spare, const char *path, const void *data,
                         size_t len, char *why, size_t why_size) {
    /* O_NOFOLLOW | O_NONBLOCK and the fstat: a symlink or a FIFO under
     * the spare's name is refused, never written through or waited on. */
    int fd = open(
        spare, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0)
        return fail(why, why_size, "open", spare, errno);
    /* nlink 1: the spare is nobody else's name too (written in place). */
    struct stat st;
    int e = fstat(fd, &st) != 0                        ? errno
            : !S_ISREG(st.st_mode) || st.st_nlink != 1 ? EINVAL
            : overwrite(fd, data, len) != 0            ? errno
                                                       : 0;
    if (e) {
        close(fd);
        unlink(spare);
        return fail(why, why_size, "write", spare, e);
    }
    if (close(fd) != 0) {
        e = errno;
        unlink(spare);
        return fail(why, why_size, "close", spare, e);
    }
    if (renameat2(AT_FDCWD, spare, AT_FDCWD, path, RENAME_EXCHANGE) == 0)
        return 0;
    /* ENOENT: no PATH yet (or the spare was removed meanwhile: then the
     * rename fails too); EINVAL, ENOSYS: no exchange on this file system
     * or kernel. A plain rename frees PATH's old inode, as a temp file
     * would. */
    if (errno != ENOENT && errno != EINVAL && errno != ENOSYS &&
        errno != EOPNOTSUPP)
        return fail(why, why_size, "exchange with", path, errno);
    if (rename(spare, path) != 0) {
        e = errno;
        unlink(spare);
        return fail(why, why_size, "rename to", path, e);
    }
    return 0;
}

int fs_sync_fs(int fd, const char *what, char *why, size_t why_size) {
    if (syncfs(fd) != 0)
        return fail(why, why_size, "syncfs of the file system of", what, errno);
    return 0;
}

int fs_sync_dir(const char *dir, char *why, size_t why_size) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return fail(why, why_size, "open directory", dir, errno);
    if (fsync(fd) != 0) {
        int e = errno;
        close(fd);
        return fail(why, why_size, "fsync directory", dir, e);
    }
    if (close(fd) != 0)
        return fail(why, why_size, "close directory", dir, errno);
    return 0;
}

/* The directory holding DIR's entry: DIR without its last component
 * ("." for a bare name, "/" for a name under the root). */
static int parent_of(const char *dir, char *out, size_t size) {
    int n = snprintf(out, size, "%s", dir);
    if (n < 0 || (size_t)n >= size)
        return -1;
    while (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';
    char *slash = strrchr(out, '/');
    if (!slash)
        snprintf(out, size, ".");
    else
        slash[slash == out ? 1 : 0] = '\0';
    return 0;
}

int fs_mkdir(const char *dir, int sync, char *why, size_t why_size) {
    int made = mkdir(dir, 0755) == 0;
    if (!made && errno != EEXIST)
        return fail(why, why_size, "mkdir", dir, errno);
    struct stat st;
    if (stat(dir, &st) != 0)
        return fail(why, why_size, "stat", dir, errno);
    if (!S_ISDIR(st.st_mode))
        return fail(why, why_size, "not a directory:", dir, ENOTDIR);
    if (!made || !sync)
        return 0;
    /* The new entry is durable only once its parent is: without this a
     * power loss could take the directory, and the files a claim or a
     * commit later makes durable in it, away. */
    char parent[4096];
    if (parent_of(dir, parent, sizeof parent) != 0)
        return fail(why, why_size, "parent of", dir, ENAMETOOLONG);
    return fs_sync_dir(parent, why, why_size);
}

int fs_open_nofollow(const char *path, int flags, char *why, size_t why_size) {
    char buf[4096];
    int n = snprintf(buf, sizeof buf, "%s", path);
    if (n < 0 || (size_t)n >= sizeof buf) {
        /* Not echoed, not even cut: a path may hold a secret, and a cut
         * one is no longer recognised as one. */
        snprintf(why, why_size, "path too long (%zu bytes, at most %zu)",
                 strlen(path), sizeof buf - 1);
        return -2;
    }
    /* Each directory on the way is opened from the one before, O_NOFOLLOW:
     * a symbolic link anywhere on the path (not only the last component)
     * is refused, and nothing can swap one in between a check and the
     * open. O_PATH: search permission is enough, as for open(). */
    int dfd =
        buf[0] == '/' ? open("/", O_PATH | O_DIRECTORY | O_CLOEXEC) : AT_FDCWD;
    if (dfd == -1)
        return fail(why, why_size, "open", "/", errno) - 1;
    char *c = buf;
    for (;;) {
        while (*c == '/')
            c++;
        char *end = strchr(c, '/');
        while (end && end[1] == '/')
            end++; /* "a//b": one separator */
        int last = !end || end[1] == '\0';
        if (end)
            *end = '\0';
        int fd = last ? openat(dfd, c, flags | O_NOFOLLOW | O_CLOEXEC)
                      : openat(dfd, c,
                               O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        if (dfd != AT_FDCWD)
            close(dfd);
        if (fd < 0) {
            if (e == ENOENT)
                return -1;
            if (e == ELOOP || (!last && e == ENOTDIR)) {
                snprintf(why, why_size,
                         "open %s: %s is a symbolic link (not followed)%s",
                         path, *c ? c : "/",
                         last ? ": not a regular file" : " or not a directory");
                return -2;
            }
            return fail(why, why_size, "open", path, e) - 1;
        }
        if (last)
            return fd;
        dfd = fd;
        c = end + 1;
    }
}

int fs_read_all(const char *path, uint8_t **data, size_t *len, char *why,
                size_t why_size) {
    *data = NULL;
    *len = 0;
    /* O_NONBLOCK: a FIFO opens at once (and is refused below) instead of
     * waiting for a writer; it changes nothing for a regular file. */
    int fd = fs_open_nofollow(path, O_RDONLY | O_NONBLOCK, why, why_size);
    if (fd == -1)
        return 1;
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(why, why_size, "stat", path, e);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        char shown[48];
        snprintf(why, why_size, "open %s: not a regular file",
                 fs_path_shown(path, shown));
        return -1;
    }
    size_t cap = (size_t)st.st_size, n = 0;
    uint8_t *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return fail(why, why_size, "read", path, ENOMEM);
    }
    while (n < cap) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return fail(why, why_size, "read", path, e);
        }
        if (r == 0)
            break; /* shorter than stat said: take what is there */
        n += (size_t)r;
    }
    close(fd); /* read-only: nothing to lose on close */
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
}

int fs_exists(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0)
        return 1;
    return errno == ENOENT ? 0 : -1;
}

int fs_random(void *buf, size_t n) {
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == ENOSYS)
            break; /* a kernel before 3.17: the device below */
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    if (n == 0)
        return 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            close(fd);
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    close(fd);
    return 0;
}

int fs_uuid(char out[37]) {
    uint8_t b[16];
    if (fs_random(b, sizeof b) != 0)
        return -1;
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
             "%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10],
             b[11], b[12], b[13], b[14], b[15]);
    return 0;
}
