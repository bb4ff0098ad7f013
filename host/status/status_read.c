#include "status/status_read.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "status/state_dir.h"
#include "status/status_json.h"
#include "status/status_lock.h"

void tm_status_report_free(tm_status_report *r) {
    if (!r)
        return;
    free(r->parts);
    memset(r, 0, sizeof *r);
}

/* Loads status.json; 1 when there is none. */
static int load_file(const char *path, tm_status_report *out, char *errstr,
                     size_t errsize) {
    int fd = tm_state_file_open(path, O_RDONLY, "open", errstr, errsize);
    if (fd < 0)
        return errno == ENOENT ? 1 : -1;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        snprintf(errstr, errsize, "cannot read %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    json_error_t jerr;
    json_t *doc = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    fclose(f);
    if (!doc) {
        snprintf(errstr, errsize, "%s: %s", path, jerr.text);
        return -1;
    }
    char why[512];
    int rc = tm_status_from_json(doc, &out->snap, &out->parts, why, sizeof why);
    json_decref(doc);
    if (rc != 0) {
        snprintf(errstr, errsize, "%s: %s", path, why);
        return -1;
    }
    out->has_file = 1;
    return 0;
}

int tm_status_read(const char *state_dir, const char *connector,
                   tm_status_report *out, char *errstr, size_t errsize) {
    memset(out, 0, sizeof *out);
    char file[PATH_MAX], lock[PATH_MAX];
    if (tm_status_path(file, sizeof file, state_dir, connector, TM_STATUS_FILE,
                       errstr, errsize) != 0 ||
        tm_status_path(lock, sizeof lock, state_dir, connector,
                       TM_STATUS_LOCK_FILE, errstr, errsize) != 0)
        return -1;
    /* The lock first: a host that dies between the two reads then shows as
     * live with its last file, never as dead with a file it is about to
     * replace. */
    int live = tm_status_lock_probe(lock, &out->live_pid, errstr, errsize);
    if (live < 0)
        return -1;
    out->live = live;
    int rc = load_file(file, out, errstr, errsize);
    if (rc < 0) {
        tm_status_report_free(out);
        return -1;
    }
    if (rc == 1) {
        if (!live) {
            snprintf(errstr, errsize, "no status for connector %s in %s",
                     connector, state_dir);
            return 1;
        }
        /* Locked but nothing written yet: a host that is starting. */
        snprintf(out->snap.connector, sizeof out->snap.connector, "%s",
                 connector);
        out->snap.state = out->written = TM_CONN_STARTING;
        out->snap.pid = out->live_pid;
        return 0;
    }
    out->written = out->snap.state;
    if (!live)
        out->snap.state = TM_CONN_STOPPED;
    else if (out->live_pid > 0)
        out->snap.pid = out->live_pid;
    return 0;
}

void tm_status_names_free(char **names, size_t n) {
    for (size_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether DIR/NAME holds a status file or a host lock. */
static int is_connector_dir(const char *dir, const char *name) {
    char path[PATH_MAX], why[64];
    struct stat st;
    if (tm_status_path(path, sizeof path, dir, name, TM_STATUS_FILE, why,
                       sizeof why) == 0 &&
        stat(path, &st) == 0)
        return 1;
    return tm_status_path(path, sizeof path, dir, name, TM_STATUS_LOCK_FILE,
                          why, sizeof why) == 0 &&
           stat(path, &st) == 0;
}

int tm_status_list(const char *state_dir, char ***names, size_t *n,
                   char *errstr, size_t errsize) {
    *names = NULL;
    *n = 0;
    DIR *d = opendir(state_dir);
    if (!d) {
        if (errno == ENOENT)
            snprintf(errstr, errsize,
                     "state directory %s does not exist (no host ever ran "
                     "with it; see --state-dir)",
                     state_dir);
        else
            snprintf(errstr, errsize, "cannot read the state directory %s: %s",
                     state_dir, strerror(errno));
        return -1;
    }
    char **v = NULL;
    size_t count = 0, cap = 0;
    int rc = 0;
    const struct dirent *e;
    /* errno is reset before every readdir(): only its own error may be
     * left when it returns NULL, not that of the stat() which found the
     * entry before it to be no connector (a SQLite file, say). */
    while (rc == 0 && (errno = 0, e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !is_connector_dir(state_dir, e->d_name))
            continue;
        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            char **nv = realloc(v, ncap * sizeof *nv);
            if (!nv) {
                rc = -1;
                break;
            }
            v = nv;
            cap = ncap;
        }
        if (!(v[count] = strdup(e->d_name))) {
            rc = -1;
            break;
        }
        count++;
    }
    if (rc != 0)
        snprintf(errstr, errsize, "out of memory");
    else if (errno != 0) {
        snprintf(errstr, errsize, "cannot read the state directory %s: %s",
                 state_dir, strerror(errno));
        rc = -1;
    }
    closedir(d);
    if (rc != 0) {
        tm_status_names_free(v, count);
        return -1;
    }
    if (count > 1)
        qsort(v, count, sizeof *v, cmp_names);
    *names = v;
    *n = count;
    return 0;
}
