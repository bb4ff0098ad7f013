/* Small pieces of libtidemark-store: the directory sync, the checksum, the
 * lock, the sorted emit of scan. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

int tms_sync_dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if ((size_t)(slash - path) >= sizeof dir) {
        errno = ENAMETOOLONG;
        return -1;
    } else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

uint32_t tms_crc32(const void *buf, size_t len) {
    const unsigned char *p = buf;
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

tm_status tms_io_error(const tm_host_api *host, const char *what,
                       const char *path, tm_error *err) {
    host->set_error(err, "%s %s: %s", what, path, strerror(errno));
    return TM_RETRY;
}

int tms_lock(const tm_host_api *host, const char *path, tm_error *err) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    int rc = -1;
    if (fd >= 0)
        while ((rc = fcntl(fd, F_SETLKW, &fl)) != 0 && errno == EINTR)
            ;
    if (rc == 0)
        return fd;
    tms_io_error(host, "lock", path, err);
    if (fd >= 0)
        close(fd);
    return -1;
}

static int by_offset(const void *a, const void *b) {
    const tm_scan_item *x = a, *y = b;
    if (x->offset != y->offset)
        return (x->offset > y->offset) - (x->offset < y->offset);
    return (x->kind > y->kind) - (x->kind < y->kind);
}

void tms_emit_sorted(const tm_host_api *host, tm_scan_item *items, size_t n,
                     void *emit_ctx) {
    if (n)
        qsort(items, n, sizeof *items, by_offset);
    for (size_t i = 0; i < n; i++)
        if (host->emit(emit_ctx, &items[i]) != 0)
            return; /* the reader has seen enough */
}
