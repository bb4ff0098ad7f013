/* A simulated power loss for sinks that keep their state in files.
 *
 * The kit exports its own fsync(), fdatasync() and syncfs() (linked with
 * --export-dynamic-symbol), so that a plugin it loads, and the libraries
 * that plugin links (libsqlite3...), resolve to them through the dynamic
 * linker, as an LD_PRELOAD shim would be. Each calls the C library's and,
 * when armed in a committing child, records what the call made durable in
 * a shadow directory:
 *   - a regular file: its whole content at that moment (f<inode>);
 *   - a directory: its entries, name -> inode (d<inode>).
 * syncfs() makes every file and directory of its file system durable, so
 * it records the whole state directory (when it is on that file system).
 * After the child is killed, kit_pl_reboot() replaces the state directory
 * by what a machine that lost power would find: the names of each
 * directory's last sync (or of the round's start), each file with the
 * content of its last sync (or empty when it never had one). Every write
 * not made durable that way is gone.
 *
 * Limits: only fsync/fdatasync/syncfs calls that go through the dynamic
 * linker are seen (not O_SYNC/O_DSYNC writes, sync_file_range, msync,
 * sync: a sink relying on those is judged as if it never synced); a file
 * is durable as a whole, at its last sync (no torn pages); only regular
 * files and directories are kept; an inode number freed and reused within
 * a round may give a file that never synced the content last synced under
 * that number. */
#define _GNU_SOURCE /* RTLD_NEXT */

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "powerloss.h"

static char pl_root[512], pl_shadow[512];
static int pl_armed;

/* Writes SHADOW/NAME atomically from the open stream's bytes. */
static int shadow_put(const char *shadow, const char *name, const char *buf,
                      size_t len) {
    char tmp[1024], dst[1024];
    snprintf(tmp, sizeof tmp, "%s/.tmp-%d", shadow, (int)getpid());
    snprintf(dst, sizeof dst, "%s/%s", shadow, name);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    size_t w = len ? fwrite(buf, 1, len, f) : 0;
    int ok = w == len && fclose(f) == 0;
    if (!ok) {
        unlink(tmp);
        return -1;
    }
    return rename(tmp, dst);
}

/* Reads all of PATH (a regular file) into *out. */
static int slurp(const char *path, char **out, size_t *len) {
    FILE *mem = open_memstream(out, len);
    FILE *f = mem ? fopen(path, "r") : NULL;
    char chunk[8192];
    size_t r;
    while (f && (r = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, r, mem);
    int ok = f && !ferror(f);
    if (f)
        fclose(f);
    if (mem && fclose(mem) != 0)
        ok = 0;
    if (!ok && mem) {
        free(*out);
        *out = NULL;
    }
    return ok ? 0 : -1;
}

/* Records PATH (of inode ST) as durable now. */
static int record(const char *shadow, const char *path, const struct stat *st) {
    char name[64], *buf = NULL;
    size_t len = 0;
    int rc = -1;
    if (S_ISREG(st->st_mode)) {
        snprintf(name, sizeof name, "f%" PRIuMAX, (uintmax_t)st->st_ino);
        if (slurp(path, &buf, &len) == 0)
            rc = shadow_put(shadow, name, buf, len);
    } else if (S_ISDIR(st->st_mode)) {
        snprintf(name, sizeof name, "d%" PRIuMAX, (uintmax_t)st->st_ino);
        DIR *d = opendir(path);
        FILE *mem = d ? open_memstream(&buf, &len) : NULL;
        struct dirent *e;
        while (mem && (e = readdir(d)) != NULL) {
            struct stat est;
            char p[1024];
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
                strchr(e->d_name, '\n'))
                continue;
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            if (lstat(p, &est) == 0 &&
                (S_ISREG(est.st_mode) || S_ISDIR(est.st_mode)))
                fprintf(mem, "%c %" PRIuMAX " %s\n",
                        S_ISDIR(est.st_mode) ? 'd' : 'f', (uintmax_t)est.st_ino,
                        e->d_name);
        }
        if (d)
            closedir(d);
        if (mem && fclose(mem) == 0)
            rc = shadow_put(shadow, name, buf, len);
    } else {
        rc = 0; /* not kept */
    }
    free(buf);
    return rc;
}

/* The armed hook: what fd names, if it lies under the root. */
static void record_fd(int fd) {
    char link[64], path[1024];
    struct stat st;
    int saved = errno;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    size_t rl = strlen(pl_root);
    if (n > 0 && fstat(fd, &st) == 0) {
        path[n] = '\0';
        if (strncmp(path, pl_root, rl) == 0 &&
            (path[rl] == '\0' || path[rl] == '/') &&
            record(pl_shadow, link, &st) != 0)
            fprintf(stderr, "sinkcheck: power_loss: cannot record %s\n", path);
    }
    errno = saved;
}

typedef int (*sync_fn)(int);

static sync_fn next_sync(const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    sync_fn f;
    memcpy(&f, &p, sizeof f); /* object to function pointer, as POSIX does */
    return f;
}

int fsync(int fd) {
    static sync_fn real;
    if (!real && !(real = next_sync("fsync"))) {
        errno = ENOSYS;
        return -1;
    }
    int rc = real(fd);
    if (rc == 0 && pl_armed)
        record_fd(fd);
    return rc;
}

int fdatasync(int fd) {
    static sync_fn real;
    if (!real && !(real = next_sync("fdatasync"))) {
        errno = ENOSYS;
        return -1;
    }
    int rc = real(fd);
    if (rc == 0 && pl_armed)
        record_fd(fd);
    return rc;
}

static int walk(const char *shadow, const char *path);

int syncfs(int fd) {
    static sync_fn real;
    if (!real && !(real = next_sync("syncfs"))) {
        errno = ENOSYS;
        return -1;
    }
    int rc = real(fd);
    if (rc == 0 && pl_armed) {
        int saved = errno;
        struct stat fs, root;
        if (fstat(fd, &fs) == 0 && stat(pl_root, &root) == 0 &&
            fs.st_dev == root.st_dev && walk(pl_shadow, pl_root) != 0)
            fprintf(stderr, "sinkcheck: power_loss: cannot record %s\n",
                    pl_root);
        errno = saved;
    }
    return rc;
}

void kit_pl_arm(const char *root, const char *shadow) {
    snprintf(pl_root, sizeof pl_root, "%s", root);
    snprintf(pl_shadow, sizeof pl_shadow, "%s", shadow);
    pl_armed = 1;
}

static int walk(const char *shadow, const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0 || record(shadow, path, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode))
        return 0;
    DIR *d = opendir(path);
    struct dirent *e;
    int rc = d ? 0 : -1;
    while (d && rc == 0 && (e = readdir(d)) != NULL) {
        char p[1024];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        rc = walk(shadow, p);
    }
    if (d)
        closedir(d);
    return rc;
}

int kit_pl_snapshot(const char *root, const char *shadow) {
    if (kit_remove_tree(shadow, 1) != 0)
        return -1;
    return walk(shadow, root);
}

/* Rebuilds directory PATH from the shadow's listing of inode INO. */
static int rebuild(const char *shadow, const char *path, uintmax_t ino) {
    char lp[1024], *list = NULL;
    size_t len = 0;
    snprintf(lp, sizeof lp, "%s/d%" PRIuMAX, shadow, ino);
    if (access(lp, F_OK) != 0)
        return 0; /* a directory whose entries were never synced: empty */
    if (slurp(lp, &list, &len) != 0)
        return -1;
    int rc = 0;
    for (char *save = NULL, *line = strtok_r(list, "\n", &save);
         line && rc == 0; line = strtok_r(NULL, "\n", &save)) {
        char type, p[1024], src[1024], *content = NULL;
        uintmax_t child;
        int off = 0;
        size_t clen = 0;
        if (sscanf(line, "%c %" SCNuMAX " %n", &type, &child, &off) != 2 ||
            !line[off]) {
            rc = -1;
            break;
        }
        snprintf(p, sizeof p, "%s/%s", path, line + off);
        if (type == 'd') {
            rc = mkdir(p, 0755) == 0 ? rebuild(shadow, p, child) : -1;
            continue;
        }
        snprintf(src, sizeof src, "%s/f%" PRIuMAX, shadow, child);
        if (access(src, F_OK) == 0 && slurp(src, &content, &clen) != 0)
            rc = -1; /* never synced: the name is durable, its bytes not */
        FILE *f = rc == 0 ? fopen(p, "w") : NULL;
        if (rc == 0 && (!f || (clen && fwrite(content, 1, clen, f) != clen)))
            rc = -1;
        if (f && fclose(f) != 0)
            rc = -1;
        free(content);
    }
    free(list);
    return rc;
}

int kit_pl_reboot(const char *root, const char *shadow) {
    struct stat st;
    if (stat(root, &st) != 0 || kit_remove_tree(root, 1) != 0)
        return -1;
    return rebuild(shadow, root, (uintmax_t)st.st_ino);
}
