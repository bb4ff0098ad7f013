#include "control/pause_file.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "status/state_dir.h"

int tm_pause_file_write(int dir_fd, const char *shown, const char *by,
                        int64_t since_ms, char *why, size_t size) {
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", shown, TM_PAUSE_FILE);
    json_t *doc =
        json_pack("{s:s, s:I}", "by", by, "since_ms", (json_int_t)since_ms);
    char *text = doc ? json_dumps(doc, JSON_INDENT(2)) : NULL;
    json_decref(doc);
    if (!text) {
        snprintf(why, size, "out of memory");
        return -1;
    }
    int fd =
        tm_state_file_openat(dir_fd, TM_PAUSE_FILE ".tmp", tmp,
                             O_WRONLY | O_CREAT | O_TRUNC, "create", why, size);
    if (fd < 0) {
        free(text);
        return -1;
    }
    size_t len = strlen(text);
    int ok = write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
    int e = errno;
    ok &= close(fd) == 0;
    free(text);
    if (ok &&
        renameat(dir_fd, TM_PAUSE_FILE ".tmp", dir_fd, TM_PAUSE_FILE) == 0)
        return 0;
    if (ok)
        e = errno;
    snprintf(why, size, "cannot write %s/%s: %s", shown, TM_PAUSE_FILE,
             strerror(e));
    unlinkat(dir_fd, TM_PAUSE_FILE ".tmp", 0);
    return -1;
}

int tm_pause_file_read(int dir_fd, const char *shown, char *by, size_t by_size,
                       int64_t *since_ms, char *why, size_t size) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", shown, TM_PAUSE_FILE);
    int fd = tm_state_file_openat(dir_fd, TM_PAUSE_FILE, path, O_RDONLY, "open",
                                  why, size);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    snprintf(by, by_size, "unknown");
    *since_ms = 0;
    json_error_t jerr;
    json_t *doc = json_loadfd(fd, 0, &jerr);
    close(fd);
    if (!doc)
        snprintf(why, size,
                 "%s is malformed (line %d: %s): kept paused, by unknown; "
                 "`tidemark resume` removes it",
                 path, jerr.line, jerr.text);
    else
        why[0] = '\0';
    const char *b = json_string_value(json_object_get(doc, "by"));
    json_t *s = json_object_get(doc, "since_ms");
    if (b)
        snprintf(by, by_size, "%s", b);
    if (json_is_integer(s))
        *since_ms = (int64_t)json_integer_value(s);
    json_decref(doc);
    return 1;
}

int tm_pause_file_remove(int dir_fd, const char *shown, char *why,
                         size_t size) {
    if (unlinkat(dir_fd, TM_PAUSE_FILE, 0) != 0 && errno != ENOENT) {
        snprintf(why, size, "cannot remove %s/%s: %s", shown, TM_PAUSE_FILE,
                 strerror(errno));
        return -1;
    }
    return 0;
}
