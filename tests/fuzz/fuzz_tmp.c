/* Temp directory of a fuzz target (see fuzz_tmp.h). */
#define _XOPEN_SOURCE 700 /* nftw */
#include "fuzz_tmp.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static int remove_one(const char *path, const struct stat *st, int flag,
                      struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void remove_dir(void) {
    nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fuzz_tmpdir(void) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/tm-fuzz-XXXXXX");
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            abort();
        }
        atexit(remove_dir);
    }
    return dir;
}

void fuzz_path(char *out, size_t size, const char *rel) {
    int n = snprintf(out, size, "%s/%s", fuzz_tmpdir(), rel);
    if (n < 0 || (size_t)n >= size)
        abort();
}

void fuzz_mkdir(const char *rel) {
    char path[512];
    fuzz_path(path, sizeof path, rel);
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        perror(path);
        abort();
    }
}

void fuzz_write(const char *path, const uint8_t *data, size_t size) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(path);
        abort();
    }
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            perror(path);
            abort();
        }
        off += (size_t)w;
    }
    if (close(fd) != 0)
        abort();
}
