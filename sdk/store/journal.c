/* The append journal: effects are appended, made durable with fdatasync,
 * and count only up to the committed length the marker file holds. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

tm_status tms_journal_open(const tm_host_api *host, const char *path,
                           uint64_t committed, tms_journal *j, tm_error *err) {
    struct stat st;
    j->fd = -1;
    j->len = 0;
    int created = stat(path, &st) != 0 && errno == ENOENT;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return tms_io_error(host, "open", path, err);
    if (fstat(fd, &st) != 0) {
        tm_status rc = tms_io_error(host, "stat", path, err);
        close(fd);
        return rc;
    }
    if ((uint64_t)st.st_size < committed) {
        host->set_error(err,
                        "journal %s holds %" PRIu64 " bytes, but %" PRIu64
                        " were committed: the file was damaged or replaced",
                        path, (uint64_t)st.st_size, committed);
        close(fd);
        return TM_FATAL;
    }
    /* A torn tail: a batch that died before its markers were published. */
    int ok = (uint64_t)st.st_size == committed ||
             (ftruncate(fd, (off_t)committed) == 0 && fdatasync(fd) == 0);
    if (ok && created)
        ok = fsync(fd) == 0 && tms_sync_dir_of(path) == 0; /* the new name */
    if (!ok) {
        tm_status rc = tms_io_error(host, "cut the torn tail of", path, err);
        close(fd);
        return rc;
    }
    j->fd = fd;
    j->len = committed;
    return TM_OK;
}

tm_status tms_journal_append(const tm_host_api *host, tms_journal *j,
                             const void *buf, size_t len, tm_error *err) {
    const char *p = buf;
    while (len > 0) {
        ssize_t w = pwrite(j->fd, p, len, (off_t)j->len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            host->set_error(err, "append to the journal at %" PRIu64 ": %s",
                            j->len, strerror(errno));
            return TM_RETRY;
        }
        p += w, len -= (size_t)w, j->len += (uint64_t)w;
    }
    return TM_OK;
}

tm_status tms_journal_sync(const tm_host_api *host, tms_journal *j,
                           tm_error *err) {
    if (fdatasync(j->fd) == 0)
        return TM_OK;
    host->set_error(err, "fdatasync of the journal: %s", strerror(errno));
    return TM_RETRY;
}

void tms_journal_close(tms_journal *j) {
    if (j->fd >= 0)
        close(j->fd);
    j->fd = -1;
}

tm_status tms_journal_read(const tm_host_api *host, const char *path,
                           uint64_t committed, char **out, size_t *len,
                           tm_error *err) {
    *out = NULL;
    *len = 0;
    if (committed >= SIZE_MAX) {
        host->set_error(err, "journal %s: too big to read", path);
        return TM_FATAL;
    }
    char *buf = malloc((size_t)committed + 1);
    if (!buf) {
        host->set_error(err, "journal %s: out of memory", path);
        return TM_FATAL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && committed == 0) {
        buf[0] = '\0';
        *out = buf;
        return TM_OK;
    }
    size_t got = 0;
    ssize_t r = 1;
    while (fd >= 0 && got < committed && r != 0) {
        r = pread(fd, buf + got, (size_t)committed - got, (off_t)got);
        if (r < 0 && errno != EINTR)
            break;
        got += r > 0 ? (size_t)r : 0;
    }
    int saved = errno;
    if (fd >= 0)
        close(fd);
    if (got < committed) {
        free(buf);
        errno = saved;
        if (fd < 0 || r < 0)
            return tms_io_error(host, fd < 0 ? "open" : "read", path, err);
        host->set_error(
            err, "journal %s is shorter than its committed %" PRIu64 " bytes",
            path, committed);
        return TM_FATAL;
    }
    buf[committed] = '\0';
    *out = buf;
    *len = (size_t)committed;
    return TM_OK;
}
