/* vacuum: deletes the files no kept snapshot references and older than a
 * grace period: orphans of crashed or lost commits (data, dead-letter and
 * manifest files, temp metadata), and what expire and compact made
 * unreachable (old manifest lists and manifests, replaced data files,
 * replaced dead-letter indexes, metadata versions past the metadata log).
 * What is referenced is read from the newest version before the directory
 * listing and again after it, so a commit published meanwhile keeps its
 * files; a commit still in flight has only files younger than the grace
 * period (the default of an hour is far above any commit's duration).
 * A table in a catalog (catalog.h): the row names the current metadata
 * file, which is kept with those its metadata log names; every other
 * metadata file is an orphan like any other (no run of versions, no
 * floor: a writer built on a deleted one loses its swap). */
#define _XOPEN_SOURCE 700 /* struct stat's st_mtim */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "dead_letters.h"
#include "fsio.h"
#include "maint.h"
#include "snapshot_files.h"

typedef struct refs {
    char **p;
    size_t n, cap;
    const char *root;
    char *why; /* for add_rel */
    size_t why_size;
} refs;

static int add(refs *r, const char *path) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        char **g = realloc(r->p, cap * sizeof *g);
        if (!g)
            return -1;
        r->p = g;
        r->cap = cap;
    }
    if (!(r->p[r->n] = strdup(path)))
        return -1;
    r->n++;
    return 0;
}

static int add_uri(refs *r, const char *uri) {
    const char *p = uri ? ice_uri_path(uri) : NULL;
    return p ? add(r, p) : 0;
}

/* A dead-letter file or index relative to the table: 0, 1 out of memory,
 * -1 outside the table (why set). */
static int add_rel(void *ctx, const char *rel) {
    refs *r = ctx;
    char path[4096];
    if (ice_path_in(r->root, rel, path, sizeof path, r->why, r->why_size) != 0)
        return -1;
    return add(r, path) != 0;
}

static int cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void refs_free(refs *r) {
    for (size_t i = 0; i < r->n; i++)
        free(r->p[i]);
    free(r->p);
}

/* Everything the loaded version references. */
static int collect(ice_table *t, refs *r, char *why, size_t why_size) {
    json_t *meta = t->meta;
    char path[4096];
    int oom = 0;
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(meta, "snapshots"), i, s) {
        ice_mfile *mf;
        ice_datafile *files = NULL;
        size_t nmf, nfiles = 0;
        if (ice_snapshot_manifests(t, s, &mf, &nmf, why, why_size) != 0)
            return -1;
        int rc =
            ice_manifests_files(t, mf, nmf, &files, &nfiles, why, why_size);
        oom |=
            add_uri(r, json_string_value(json_object_get(s, "manifest-list")));
        for (size_t k = 0; k < nmf; k++)
            oom |= add_uri(r, mf[k].path);
        for (size_t k = 0; k < nfiles; k++)
            oom |= add_uri(r, files[k].path);
        ice_mfiles_free(mf, nmf);
        ice_datafiles_free(files, nfiles);
        if (rc != 0)
            return -1;
        const char *dl = json_string_value(
            json_object_get(json_object_get(s, "summary"), ICE_DL_FILE_KEY));
        if (dl && (rc = add_rel(r, dl)) < 0)
            return -1;
        oom |= dl && rc;
    }
    /* The index's segments, then the files they and the snapshots name. */
    int rc = ice_dl_index_each(NULL, meta, add_rel, r, why, why_size);
    if (rc < 0)
        return -1;
    oom |= rc;
    rc = ice_dl_files(t->root, meta, add_rel, r, why, why_size);
    if (rc > 0)
        oom = 1;
    else if (rc < 0)
        return -1;
    json_array_foreach(json_object_get(meta, "metadata-log"), i, s) oom |=
        add_uri(r, json_string_value(json_object_get(s, "metadata-file")));
    if (t->cat) {
        /* A catalog table's current file, and the file saying that a
         * catalog manages it. */
        oom |= add_uri(r, t->meta_loc);
        snprintf(path, sizeof path, "%s/%s", t->meta_dir, ICE_CATALOG_MARK);
    } else {
        snprintf(path, sizeof path, "%s/v%lld.metadata.json", t->meta_dir,
                 (long long)t->version);
    }
    oom |= add(r, path);
    snprintf(path, sizeof path, "%s/version-hint.text", t->meta_dir);
    oom |= add(r, path);
    snprintf(path, sizeof path, "%s/%s", t->meta_dir, ICE_FLOOR_FILE);
    oom |= add(r, path);
    if (oom) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    return 0;
}

/* DIR, a directory of the table, opened without following a symbolic
 * link anywhere on its path: vacuum lists and deletes only through this
 * descriptor (fstatat, unlinkat), so swapping the directory for a symlink
 * to one elsewhere after it was opened deletes nothing there. The fd; -1
 * when it does not exist (nothing to vacuum there); -2 with why. */
static int open_dir(const char *dir, char *why, size_t why_size) {
    char inner[512];
    int fd = fs_open_nofollow(dir, O_RDONLY | O_DIRECTORY, inner, sizeof inner);
    if (fd == -2)
        snprintf(why, why_size,
                 "%s: not a directory of the table (a symlink or a file): "
                 "nothing vacuumed (%s)",
                 dir, inner);
    return fd;
}

/* A before B. Compared field by field, not as nanoseconds since 1970:
 * those overflow 64 bits past 2262 (and before 1677), and a mtime is
 * whatever the file system holds (a bad clock, `touch -d`): wrapped, a
 * far-future file would look ancient and be deleted. */
static int earlier(const struct timespec *a, const struct timespec *b) {
    return a->tv_sec != b->tv_sec ? a->tv_sec < b->tv_sec
                                  : a->tv_nsec < b->tv_nsec;
}

/* The unreferenced regular files of DIR (its descriptor dfd) changed
 * before the cutoff; entries are fstatat'ed without following a
 * symlink. */
static int list_dir(const char *dir, int dfd, const struct timespec *cutoff,
                    const refs *r, refs *out, char *why, size_t why_size) {
    int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        snprintf(why, why_size, "open %s: %s", dir, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    rewinddir(d);
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        char path[4096], *key = path;
        struct stat st;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT)
                continue; /* removed meanwhile */
            snprintf(why, why_size, "stat %s: %s", path, strerror(errno));
            rc = -1;
        } else if (S_ISREG(st.st_mode) && earlier(&st.st_mtim, cutoff) &&
                   !bsearch(&key, r->p, r->n, sizeof *r->p, cmp) &&
                   add(out, path) != 0) {
            snprintf(why, why_size, "out of memory");
            rc = -1;
        }
    }
    closedir(d);
    return rc;
}

/* Metadata versions: vacuum deletes only versions below the oldest one
 * the newest version keeps in its metadata log, and only after raising the
 * version floor (table_meta.h) above them, durably: from then on no writer
 * links those numbers and no reader loads them, so a writer that cached
 * one of them, or links one and dies before its check, never forks the
 * table. Above the floor nothing is deleted: the versions there stay one
 * unbroken run, which is how writers find the newest. */
static int64_t version_of_path(const char *path) {
    const char *slash = strrchr(path, '/');
    return ice_meta_version_of(slash ? slash + 1 : path);
}

/* Non-version files first (by name), then versions by number. */
static int cmp_versions_last(const void *a, const void *b) {
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    int64_t vx = version_of_path(x), vy = version_of_path(y);
    if (vx < 0 || vy < 0)
        return vx < 0 && vy < 0 ? strcmp(x, y) : (vx < 0 ? -1 : 1);
    return vx < vy ? -1 : vx > vy;
}

/* The lowest version the loaded one keeps (itself and its log). */
static int64_t oldest_kept_version(const ice_table *t, const refs *r) {
    int64_t low = t->version;
    size_t n = strlen(t->meta_dir);
    for (size_t i = 0; i < r->n; i++) {
        int64_t v = version_of_path(r->p[i]);
        if (v > 0 && v < low && strncmp(r->p[i], t->meta_dir, n) == 0 &&
            r->p[i][n] == '/')
            low = v;
    }
    return low;
}

/* The loaded version must be the directory's highest: a newer one would
 * name files the references miss (a writer published meanwhile, or the
 * run of versions is broken): then nothing is deleted. 0 or -1. */
static int loaded_is_newest(ice_table *t, char *why, size_t why_size) {
    if (t->cat) {
        /* The row is the newest: it must not have moved since the
         * references were collected. */
        char *seen = t->meta_loc ? strdup(t->meta_loc) : NULL;
        int rc = seen ? ice_table_refresh(t, why, why_size) : -1;
        if (!seen)
            snprintf(why, why_size, "out of memory");
        else if (rc == 0 && strcmp(seen, t->meta_loc) != 0) {
            snprintf(why, why_size,
                     "%s: the catalog's row moved on while vacuum looked: "
                     "nothing vacuumed (run it again)",
                     t->meta_dir);
            rc = -1;
        }
        free(seen);
        return rc == 0 ? 0 : -1;
    }
    int64_t high = ice_table_newest_on_disk(t, why, why_size);
    if (high < 0)
        return -1;
    if (high == t->version)
        return 0;
    snprintf(why, why_size,
             "%s: the newest version loaded is v%lld but the directory holds "
             "v%lld: nothing vacuumed (run it again)",
             t->meta_dir, (long long)t->version, (long long)high);
    return -1;
}

/* Vacuums exclude each other (the floor must only go up): an exclusive
 * lock on metadata/ itself (its descriptor FD). 0; 1 held by another
 * vacuum and the owner's hooks say not to wait; -1 with why. */
static int lock_vacuum(const ice_table *t, int fd, char *why, size_t why_size) {
    int nowait = t->hooks && t->hooks->vacuum_nowait;
    while (flock(fd, LOCK_EX | (nowait ? LOCK_NB : 0)) != 0) {
        if (errno == EWOULDBLOCK)
            return 1;
        if (errno != EINTR) {
            snprintf(why, why_size, "lock %s: %s", t->meta_dir,
                     strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* Removes candidate PATH through the descriptor of its directory. */
static int remove_in(const char *const dirs[3], const int dfd[3],
                     const char *path, char *why, size_t why_size) {
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(dirs[k]);
        if (strncmp(path, dirs[k], n) != 0 || path[n] != '/')
            continue;
        if (unlinkat(dfd[k], path + n + 1, 0) != 0 && errno != ENOENT) {
            snprintf(why, why_size, "remove %s: %s", path, strerror(errno));
            return -1;
        }
        return 0;
    }
    snprintf(why, why_size, "%s: not in a directory of the table", path);
    return -1;
}

int ice_vacuum(ice_table *t, int64_t grace_seconds, ice_vacuum_fn fn, void *ctx,
               size_t *removed, char *why, size_t why_size) {
    refs r = {.root = t->root, .why = why, .why_size = why_size}, cand = {0};
    *removed = 0;
    if (grace_seconds < 0 || grace_seconds > ICE_GRACE_MAX) {
        snprintf(why, why_size, "grace period %lld s is out of range",
                 (long long)grace_seconds);
        return -1;
    }
    const char *dirs[3] = {t->data_dir, t->dl_dir, t->meta_dir};
    int dfd[3] = {-1, -1, -1}, rc = 0;
    for (int k = 0; rc == 0 && k < 3; k++)
        if ((dfd[k] = open_dir(dirs[k], why, why_size)) == -2)
            rc = -1;
    if (rc == 0 && dfd[2] < 0) {
        snprintf(why, why_size, "%s: no table metadata", t->meta_dir);
        rc = -1;
    }
    int busy = 0;
    if (rc == 0 && (rc = lock_vacuum(t, dfd[2], why, why_size)) == 1) {
        busy = 1; /* another vacuum runs: its work is ours */
        rc = -1;
    }
    if (rc == 0)
        rc = ice_table_refresh(t, why, why_size);
    if (rc == 1)
        snprintf(why, why_size, "%s: no table metadata", t->meta_dir);
    if (rc == 0)
        rc = collect(t, &r, why, why_size);
    /* grace_seconds is at most ICE_GRACE_MAX: no wrap. */
    struct timespec cutoff;
    clock_gettime(CLOCK_REALTIME, &cutoff);
    cutoff.tv_sec -= (time_t)grace_seconds;
    if (rc == 0)
        qsort(r.p, r.n, sizeof *r.p, cmp);
    for (int k = 0; rc == 0 && k < 3; k++)
        if (dfd[k] >= 0)
            rc = list_dir(dirs[k], dfd[k], &cutoff, &r, &cand, why, why_size);
    /* A version published while we listed keeps what it names. */
    if (rc == 0)
        rc = ice_table_refresh(t, why, why_size);
    if (rc == 0)
        rc = collect(t, &r, why, why_size);
    if (rc == 0)
        rc = loaded_is_newest(t, why, why_size);
    /* A fenced owner deletes nothing: what it judged unreferenced may be
     * named by the new owner's versions it no longer follows. */
    const ice_owner_hooks *h = t->hooks;
    if (rc == 0 && h && h->fence)
        rc = h->fence(h->ctx, t, why, why_size);
    if (rc == 0)
        qsort(r.p, r.n, sizeof *r.p, cmp);
    int64_t keep_from = rc == 0 ? oldest_kept_version(t, &r) : 0;
    /* Metadata versions go last, oldest first, once the floor is above
     * every one of them. */
    if (rc == 0 && cand.n > 0) /* cand.p is NULL when nothing is listed */
        qsort(cand.p, cand.n, sizeof *cand.p, cmp_versions_last);
    int floor_raised = 0;
    for (size_t i = 0; rc == 0 && i < cand.n; i++) {
        if (bsearch(&cand.p[i], r.p, r.n, sizeof *r.p, cmp))
            continue;
        /* Not referenced, but perhaps not for long enough: a reader that
         * loaded a version naming it may still be reading it. */
        if (h && h->vacuum_hold && h->vacuum_hold(h->ctx, cand.p[i]))
            continue;
        /* A catalog table has no run of versions to keep unbroken and no
         * floor: the row names the current file, and any other metadata
         * file nothing kept references is an orphan like any other. */
        int64_t v =
            t->cat ? -1 : ice_meta_version_of(strrchr(cand.p[i], '/') + 1);
        if (v > 0 && v >= keep_from)
            break; /* later candidates are all newer versions */
        if (v > 0 && !floor_raised) {
            if ((rc = ice_table_raise_floor(t, keep_from - 1, why, why_size)) !=
                0)
                break;
            floor_raised = 1;
        }
        if ((rc = remove_in(dirs, dfd, cand.p[i], why, why_size)) != 0)
            break;
        (*removed)++;
        if (fn)
            fn(ctx, cand.p[i]);
    }
    refs_free(&r);
    refs_free(&cand);
    for (int k = 0; k < 3; k++)
        if (dfd[k] >= 0)
            close(dfd[k]); /* releases the lock too */
    return busy ? 1 : rc == 0 ? 0 : -1;
}
