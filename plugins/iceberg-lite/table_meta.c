/* Table metadata files and their atomic publication (see table_meta.h). */
#define _XOPEN_SOURCE 700 /* realpath() is XSI, not in _POSIX_C_SOURCE */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "fsio.h"
#include "table_meta.h"

#define PATH_SIZE 4096

int64_t ice_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ice_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ice_boot_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ice_json_int(json_t *obj, const char *key, int64_t def) {
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", a, b);
    return s;
}

void ice_table_free(ice_table *t) {
    for (int i = 0; i < t->nbarrier; i++)
        close(t->barrier_fds[i]);
    free(t->root);
    free(t->location);
    free(t->meta_dir);
    free(t->data_dir);
    free(t->dl_dir);
    if (t->hint_spare)
        unlink(t->hint_spare); /* best effort: else an orphan for vacuum */
    free(t->hint_spare);
    json_decref(t->meta);
    ice_catalog_close(t->cat);
    free(t->meta_loc);
    memset(t, 0, sizeof *t);
}

/* Copies the last component of PATH (trailing slashes dropped) into base
 * and its parent into dir. 0, or -1 when either does not fit. */
static int split_path(const char *path, char *dir, char *base, size_t size) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/')
        b--;
    size_t d = b;
    while (d > 1 && path[d - 1] == '/')
        d--;
    int dn = b == 0 ? snprintf(dir, size, ".")
                    : snprintf(dir, size, "%.*s", (int)d, path);
    int bn = snprintf(base, size, "%.*s", (int)(n - b), path + b);
    return dn < 0 || bn < 0 || (size_t)dn >= size || (size_t)bn >= size ? -1
                                                                        : 0;
}

static int root_fits(const char *real, char *why, size_t why_size) {
    size_t n = strlen(real);
    if (n <= ICE_ROOT_MAX)
        return 0;
    snprintf(why, why_size,
             "the table directory is %zu bytes long as a real path, at most "
             "%d (the table's file paths are built under it)",
             n, ICE_ROOT_MAX);
    return -1;
}

int ice_table_uri_safe(const char *path, char *why, size_t why_size) {
    char real[PATH_MAX], dir[PATH_MAX], base[PATH_MAX], shown[48];
    /* The real path the table would get: the directory's, or its
     * parent's and the name open would create. */
    if (!realpath(path, real)) {
        if (split_path(path, dir, base, sizeof dir) != 0 ||
            !realpath(dir, real) ||
            strlen(real) + 1 + strlen(base) >= sizeof real)
            snprintf(real, sizeof real, "%s", path);
        else
            snprintf(real + strlen(real), sizeof real - strlen(real), "/%s",
                     base);
    }
    const char *bad = strpbrk(real, "#?%\t\n\r");
    if (!bad)
        return 0;
    if (*bad == '\t' || *bad == '\n' || *bad == '\r') {
        snprintf(why, why_size,
                 "the table directory %s holds %s: the table's file:// "
                 "locations are not percent-encoded, and URI parsers "
                 "(pyiceberg's) drop it, so readers could not open the "
                 "table; choose a path without tabs or line breaks",
                 fs_path_shown(real, shown),
                 *bad == '\t'   ? "a tab"
                 : *bad == '\n' ? "a line feed"
                                : "a carriage return");
        return -1;
    }
    snprintf(why, why_size,
             "the table directory %s holds '%c': the table's file:// "
             "locations are not percent-encoded, so readers (pyiceberg) "
             "would take it for %s and could not open the table; choose a "
             "path without '#', '?' or '%%'",
             fs_path_shown(real, shown), *bad,
             *bad == '#'   ? "the start of a URI fragment"
             : *bad == '?' ? "the start of a URI query"
                           : "a percent-escape");
    return -1;
}

int ice_table_check_path(const char *path, int create, char *why,
                         size_t why_size) {
    char real[PATH_MAX], dir[PATH_MAX], base[PATH_MAX];
    char shown[48], shown2[48];
    struct stat st;
    if (stat(path, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            snprintf(why, why_size, "%s: not a directory",
                     fs_path_shown(path, shown));
            return -1;
        }
        if (!realpath(path, real)) {
            snprintf(why, why_size, "%s: %s", fs_path_shown(path, shown),
                     strerror(errno));
            return -1;
        }
        return root_fits(real, why, why_size);
    }
    if (errno != ENOENT) {
        snprintf(why, why_size, "%s: %s", fs_path_shown(path, shown),
                 strerror(errno));
        return -1;
    }
    if (!create)
        return 1;
    /* Only the table's own directory is created: its parent must be an
     * existing directory. */
    if (split_path(path, dir, base, sizeof dir) != 0) {
        snprintf(why, why_size, "path too long (%zu bytes)", strlen(path));
        return -1;
    }
    if (stat(dir, &st) != 0) {
        snprintf(why, why_size,
                 "%s: the parent directory %s %s (only the table's own "
                 "directory is created)",
                 fs_path_shown(path, shown), fs_path_shown(dir, shown2),
                 errno == ENOENT ? "does not exist" : strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, why_size,
                 "%s: the parent %s is not a directory (only the table's "
                 "own directory is created)",
                 fs_path_shown(path, shown), fs_path_shown(dir, shown2));
        return -1;
    }
    if (!realpath(dir, real)) {
        snprintf(why, why_size, "%s: %s", fs_path_shown(dir, shown),
                 strerror(errno));
        return -1;
    }
    size_t n = strlen(real);
    int k = snprintf(real + n, sizeof real - n, "/%s", base);
    if (k < 0 || (size_t)k >= sizeof real - n) {
        snprintf(why, why_size, "path too long (%zu bytes)", strlen(path));
        return -1;
    }
    return root_fits(real, why, why_size);
}

/* The barrier's descriptors: the table's directory, then each of
 * metadata/, data/ and dead_letters/ that is on another file system than
 * those already held (one syncfs per file system the commit writes on).
 * A missing subdirectory holds nothing to sync. 0, or -1 with why. */
static int open_barriers(ice_table *t, char *why, size_t why_size) {
    const char *dirs[] = {t->root, t->meta_dir, t->data_dir, t->dl_dir};
    dev_t devs[4];
    for (size_t i = 0; i < 4; i++) {
        int fd = open(dirs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 && (i > 0 && errno == ENOENT))
            continue;
        if (fd < 0 || fstat(fd, &st) != 0) {
            snprintf(why, why_size, "table directory %s: %s", dirs[i],
                     strerror(errno));
            if (fd >= 0)
                close(fd);
            return -1;
        }
        int seen = 0;
        for (int k = 0; k < t->nbarrier; k++)
            seen |= devs[k] == st.st_dev;
        if (seen) {
            close(fd);
            continue;
        }
        devs[t->nbarrier] = st.st_dev;
        t->barrier_fds[t->nbarrier++] = fd;
    }
    return 0;
}

int ice_table_init(ice_table *t, const char *path, int create, int fsync,
                   char *why, size_t why_size) {
    char shown[48];
    memset(t, 0, sizeof *t);
    t->fsync = fsync;
    int rc = ice_table_check_path(path, create, why, why_size);
    if (rc != 0)
        return rc;
    if (create && fs_mkdir(path, fsync, why, why_size) != 0)
        return -1;
    char real[PATH_MAX];
    if (!realpath(path, real)) {
        if (errno == ENOENT && !create)
            return 1;
        snprintf(why, why_size, "table path %s: %s", fs_path_shown(path, shown),
                 strerror(errno));
        return -1;
    }
    /* Checked again: the directory may have been replaced meanwhile. */
    if (root_fits(real, why, why_size) != 0)
        return -1;
    size_t n = strlen(real) + 8;
    t->root = strdup(real);
    t->location = malloc(n);
    t->meta_dir = join(real, "metadata");
    t->data_dir = join(real, "data");
    t->dl_dir = join(real, "dead_letters");
    if (!t->root || !t->location || !t->meta_dir || !t->data_dir ||
        !t->dl_dir) {
        ice_table_free(t);
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    snprintf(t->location, n, "file://%s", real);
    if (create && (fs_mkdir(t->meta_dir, fsync, why, why_size) != 0 ||
                   fs_mkdir(t->data_dir, fsync, why, why_size) != 0 ||
                   fs_mkdir(t->dl_dir, fsync, why, why_size) != 0)) {
        ice_table_free(t);
        return -1;
    }
    if (fsync && open_barriers(t, why, why_size) != 0) {
        ice_table_free(t);
        return -1;
    }
    return 0;
}

const char *ice_uri_path(const char *uri) {
    if (strncmp(uri, "file://", 7) == 0)
        return uri + 7;
    return uri[0] == '/' ? uri : NULL;
}

int ice_path_in(const char *root, const char *ref, char *out, size_t size,
                char *why, size_t why_size) {
    size_t n = strlen(root);
    const char *abs = ice_uri_path(ref);
    int len = abs ? snprintf(out, size, "%s", abs)
                  : snprintf(out, size, "%s/%s", root, ref);
    if (len < 0 || (size_t)len >= size) {
        snprintf(why, why_size, "path too long (%zu bytes, at most %zu)",
                 strlen(abs ? abs : ref), size - 1);
        return -1;
    }
    /* Lexically under root/, and no component that could leave it. */
    int inside = strncmp(out, root, n) == 0 && out[n] == '/';
    for (const char *c = out + n; inside && *c == '/';) {
        const char *end = strchr(c + 1, '/');
        size_t k = end ? (size_t)(end - c - 1) : strlen(c + 1);
        if (k == 0 || (k == 1 && c[1] == '.') ||
            (k == 2 && c[1] == '.' && c[2] == '.'))
            inside = 0;
        c = end ? end : c + 1 + k;
    }
    if (!inside) {
        snprintf(why, why_size, "%s: outside the table %s (refused)", ref,
                 root);
        return -1;
    }
    return 0;
}

int ice_table_path(const ice_table *t, const char *ref, char *out, size_t size,
                   char *why, size_t why_size) {
    return ice_path_in(t->root, ref, out, size, why, why_size);
}

static void version_path(const ice_table *t, int64_t v, char *out,
                         size_t size) {
    snprintf(out, size, "%s/v%lld.metadata.json", t->meta_dir, (long long)v);
}

/* N of canonical decimal digits (no sign, no leading zero, no blank) in
 * [1, ICE_VERSION_MAX], the first non-digit into *end; else -1. One
 * spelling per number: "v0099" is not an alias of "v99", and no value
 * saturates or overflows. */
static int64_t version_number(const char *text, const char **end) {
    const char *p = text;
    if (*p < '1' || *p > '9')
        return -1;
    int64_t v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (ICE_VERSION_MAX - (*p - '0')) / 10)
            return -1;
        v = v * 10 + (*p - '0');
    }
    *end = p;
    return v;
}

int64_t ice_meta_version_of(const char *name) {
    const char *end;
    if (name[0] != 'v')
        return -1;
    int64_t v = version_number(name + 1, &end);
    return v > 0 && strcmp(end, ".metadata.json") == 0 ? v : -1;
}

/* The highest v<N>.metadata.json in the directory (0 when none). */
static int64_t scan_versions(const ice_table *t, char *why, size_t why_size) {
    DIR *d = opendir(t->meta_dir);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        snprintf(why, why_size, "open %s: %s", t->meta_dir, strerror(errno));
        return -1;
    }
    int64_t best = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int64_t v = ice_meta_version_of(e->d_name);
        if (v > best)
            best = v;
    }
    closedir(d);
    return best;
}

/* The hint's number, 0 when absent or not a version number. */
static int64_t read_hint(const ice_table *t) {
    char path[PATH_SIZE], why[256];
    snprintf(path, sizeof path, "%s/version-hint.text", t->meta_dir);
    uint8_t *data;
    size_t len;
    if (fs_read_all(path, &data, &len, why, sizeof why) != 0)
        return 0;
    const char *end;
    int64_t v = version_number((const char *)data, &end);
    int ok = v > 0 && (*end == '\0' || *end == '\n');
    free(data);
    return ok ? v : 0;
}

int64_t ice_table_floor(const ice_table *t, char *why, size_t why_size) {
    char path[PATH_SIZE];
    snprintf(path, sizeof path, "%s/%s", t->meta_dir, ICE_FLOOR_FILE);
    uint8_t *data;
    size_t len;
    int rc = fs_read_all(path, &data, &len, why, why_size);
    if (rc == 1)
        return 0;
    if (rc != 0)
        return -1; /* never taken as 0: a freed number would look free */
    const char *end;
    int64_t v = version_number((const char *)data, &end);
    int ok = v > 0 && (*end == '\0' || *end == '\n');
    free(data);
    if (!ok) {
        snprintf(why, why_size,
                 "%s: not a version number (1 to %lld): refused, the table's "
                 "versions cannot be told apart from freed ones",
                 path, (long long)ICE_VERSION_MAX);
        return -1;
    }
    return v;
}

/* Replaces metadata/NAME by TEXT through a temp file (tmp-<uuid>.TAG.part)
 * and rename(); with sync, the file and then the directory are fsynced. */
static int replace_small_file(ice_table *t, const char *name, const char *tag,
                              const char *text, int sync, char *why,
                              size_t why_size) {
    char tmp[PATH_SIZE], path[PATH_SIZE], uuid[37];
    if (fs_uuid(uuid) != 0) {
        snprintf(why, why_size, "no random bytes for a temp name");
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s/tmp-%s.%s.part", t->meta_dir, uuid, tag);
    snprintf(path, sizeof path, "%s/%s", t->meta_dir, name);
    if (fs_write_new(tmp, text, strlen(text), sync, why, why_size) != 0)
        return -1;
    if (rename(tmp, path) != 0) {
        snprintf(why, why_size, "rename %s to %s: %s", tmp, path,
                 strerror(errno));
        unlink(tmp);
        return -1;
    }
    return sync ? fs_sync_dir(t->meta_dir, why, why_size) : 0;
}

int ice_table_raise_floor(ice_table *t, int64_t floor, char *why,
                          size_t why_size) {
    int64_t cur = ice_table_floor(t, why, why_size);
    if (cur < 0)
        return -1;
    if (floor <= cur)
        return 0;
    char text[32];
    snprintf(text, sizeof text, "%lld\n", (long long)floor);
    /* Always synced, whatever the fsync setting: the floor must be on
     * disk before the versions below it are gone. */
    return replace_small_file(t, ICE_FLOOR_FILE, "floor", text, 1, why,
                              why_size);
}

/* 1 when version V exists, 0 when not (V 0 never does), -1 with why. */
static int version_exists(const ice_table *t, int64_t v, char *why,
                          size_t why_size) {
    char path[PATH_SIZE], shown[48];
    if (v <= 0)
        return 0;
    version_path(t, v, path, sizeof path);
    int e = fs_exists(path);
    if (e < 0)
        snprintf(why, why_size, "stat %s: %s", fs_path_shown(path, shown),
                 strerror(errno));
    return e;
}

/* Moves *v past every version that follows it. 0 or -1. */
static int probe_forward(const ice_table *t, int64_t *v, char *why,
                         size_t why_size) {
    while (*v < ICE_VERSION_MAX) {
        int e = version_exists(t, *v + 1, why, why_size);
        if (e <= 0)
            return e;
        (*v)++;
    }
    return 0;
}

/* The newest version: 0 none, -1 with why. Versions at or below the
 * floor are freed numbers: vacuum raised the floor (durably) before it
 * deleted any of them, so one of those names on disk may be a stray, the
 * link of a writer that died or stalled before its check, and is never
 * probed, loaded or built on. Above the floor vacuum deletes nothing, so
 * the versions there are one unbroken run: from the cached version, the
 * hint or the floor, whichever is highest, probing forward finds the
 * newest; when that start is gone, the directory's highest (above the
 * floor) is. The floor is read again afterwards: a version above it then
 * was never freed before the look. */
static int64_t find_newest(const ice_table *t, char *why, size_t why_size) {
    for (int round = 0; round < ICE_RACE_MAX; round++) {
        int64_t floor = ice_table_floor(t, why, why_size);
        if (floor < 0)
            return -1;
        int64_t v = t->version > floor ? t->version : floor;
        int64_t h = read_hint(t);
        if (h > v) {
            int e = version_exists(t, h, why, why_size);
            if (e < 0)
                return -1;
            if (e == 1)
                v = h; /* the hint only ever moves us forward */
        }
        if (probe_forward(t, &v, why, why_size) != 0)
            return -1;
        int e = v > floor ? version_exists(t, v, why, why_size) : 0;
        if (e < 0)
            return -1;
        if (e == 0) {
            if ((v = scan_versions(t, why, why_size)) < 0)
                return -1;
            if (v == 0 && floor == 0)
                return 0; /* no table */
            if (v <= floor) {
                snprintf(why, why_size,
                         "%s: no metadata version above the version floor "
                         "%lld (every version on disk is a freed number)",
                         t->meta_dir, (long long)floor);
                return -1;
            }
            continue; /* probe from there, then confirm */
        }
        int64_t after = ice_table_floor(t, why, why_size);
        if (after < 0)
            return -1;
        if (v > after)
            return v;
    }
    snprintf(why, why_size,
             "%s: the newest metadata version kept disappearing while it "
             "was looked for",
             t->meta_dir);
    return -1;
}

int64_t ice_table_newest_on_disk(const ice_table *t, char *why,
                                 size_t why_size) {
    return scan_versions(t, why, why_size);
}

int ice_meta_read(const char *path, json_t **out, char *why, size_t why_size) {
    uint8_t *data;
    size_t len;
    *out = NULL;
    int rc = fs_read_all(path, &data, &len, why, why_size);
    if (rc != 0)
        return rc == 1 ? 1 : -1;
    json_error_t jerr;
    json_t *m = json_loadb((const char *)data, len, 0, &jerr);
    free(data);
    if (!m || !json_is_object(m)) {
        json_decref(m);
        snprintf(why, why_size, "%s: not valid table metadata: %s", path,
                 jerr.text);
        return -1;
    }
    *out = m;
    return 0;
}

int ice_table_refresh(ice_table *t, char *why, size_t why_size) {
    char path[PATH_SIZE];
    if (t->cat)
        return ice_cat_refresh(t, why, why_size);
    if (ice_table_not_cataloged(t, why, why_size) != 0)
        return -1;
    for (int round = 0; round < ICE_RACE_MAX; round++) {
        int64_t v = find_newest(t, why, why_size);
        if (v < 0)
            return -1;
        if (v == 0)
            return 1;
        if (v == t->version && t->meta)
            return 0;
        version_path(t, v, path, sizeof path);
        json_t *m;
        int rc = ice_meta_read(path, &m, why, why_size);
        if (rc == 1)
            continue; /* vacuumed between the look and the load */
        if (rc != 0)
            return -1;
        json_decref(t->meta);
        t->meta = m;
        t->version = v;
        return 0;
    }
    snprintf(why, why_size,
             "%s: the newest metadata version kept "
             "disappearing while it was loaded",
             t->meta_dir);
    return -1;
}

json_t *ice_meta_initial(const ice_table *t, json_t *fields,
                         int64_t last_column_id, json_t *spec_fields) {
    char uuid[37];
    if (fs_uuid(uuid) != 0)
        return NULL;
    return json_pack(
        "{s:i, s:s, s:s, s:i, s:I, s:I, s:i, s:[{s:s, s:i, s:O}], s:i,"
        " s:[{s:i, s:O}], s:I, s:i, s:[{s:i, s:[]}], s:{s:s},"
        " s:i, s:{}, s:[], s:[], s:[]}",
        "format-version", 2, "table-uuid", uuid, "location", t->location,
        "last-sequence-number", 0, "last-updated-ms", (json_int_t)ice_now_ms(),
        "last-column-id", (json_int_t)last_column_id, "current-schema-id", 0,
        "schemas", "type", "struct", "schema-id", 0, "fields", fields,
        "default-spec-id", 0, "partition-specs", "spec-id", 0, "fields",
        spec_fields, "last-partition-id",
        (json_int_t)(999 + (int64_t)json_array_size(spec_fields)),
        "default-sort-order-id", 0, "sort-orders", "order-id", 0, "fields",
        "properties", "write.format.default", "parquet", "current-snapshot-id",
        -1, "refs", "snapshots", "snapshot-log", "metadata-log");
}

/* The members a next version changes in place (appending to them,
 * removing from them, replacing a member): copied one level deep for
 * each new version. What they hold (snapshots, schemas, log entries, refs)
 * is shared with the loaded version and never changed in place;
 * ice_meta_own_snapshot gives a private copy of a snapshot to change. */
static const char *const NEXT_COPIED[] = {
    "snapshots", "snapshot-log",    "metadata-log", "properties",
    "refs",      "partition-specs", "schemas",      "sort-orders"};

/* A copy of META sharing what no next version changes in place: a deep
 * copy of the whole metadata (about 100 KB of JSON with 100 snapshots)
 * cost a tenth of a commit. NULL on allocation failure. */
static json_t *copy_for_next(json_t *meta) {
    json_t *m = json_copy(meta);
    for (size_t i = 0; m && i < sizeof NEXT_COPIED / sizeof *NEXT_COPIED; i++) {
        json_t *v = json_object_get(m, NEXT_COPIED[i]);
        if (!json_is_array(v) && !json_is_object(v))
            continue;
        json_t *c = json_copy(v);
        if (!c || json_object_set_new(m, NEXT_COPIED[i], c) != 0) {
            json_decref(m);
            return NULL;
        }
    }
    return m;
}

json_t *ice_meta_own_snapshot(json_t *meta, int64_t id) {
    json_t *snaps = json_object_get(meta, "snapshots");
    for (size_t i = json_array_size(snaps); i > 0; i--) {
        json_t *s = json_array_get(snaps, i - 1);
        if (ice_json_int(s, "snapshot-id", -2) != id)
            continue;
        json_t *own = json_deep_copy(s);
        /* set_new steals own even when it fails. */
        return own && json_array_set_new(snaps, i - 1, own) == 0 ? own : NULL;
    }
    return NULL;
}

json_t *ice_meta_next(const ice_table *t) {
    json_t *m = copy_for_next(t->meta);
    if (!m)
        return NULL;
    int64_t prev = ice_json_int(m, "last-updated-ms", 0);
    int64_t now = ice_now_ms();
    char path[PATH_SIZE], uri[PATH_SIZE + 16];
    if (t->cat) {
        snprintf(uri, sizeof uri, "%s", t->meta_loc ? t->meta_loc : "");
    } else {
        version_path(t, t->version, path, sizeof path);
        snprintf(uri, sizeof uri, "file://%s", path);
    }
    json_t *log = json_object_get(m, "metadata-log");
    if (!json_is_array(log)) {
        log = json_array();
        if (json_object_set_new(m, "metadata-log", log) != 0)
            log = NULL;
    }
    if (!log ||
        json_array_append_new(log, json_pack("{s:I, s:s}", "timestamp-ms",
                                             (json_int_t)prev, "metadata-file",
                                             uri)) != 0 ||
        json_object_set_new(m, "last-updated-ms",
                            json_integer(now > prev ? now : prev)) != 0) {
        json_decref(m);
        return NULL;
    }
    while (json_array_size(log) > ICE_METADATA_LOG_MAX)
        json_array_remove(log, 0);
    return m;
}

json_t *ice_meta_snapshot(json_t *meta, int64_t id) {
    json_t *snaps = json_object_get(meta, "snapshots");
    /* From the newest: the current snapshot and its near ancestors, what
     * a commit looks up again and again, are at the end (ids are unique:
     * ice_new_snapshot_id). */
    for (size_t i = json_array_size(snaps); i > 0; i--) {
        json_t *s = json_array_get(snaps, i - 1);
        if (ice_json_int(s, "snapshot-id", -2) == id)
            return s;
    }
    return NULL;
}

json_t *ice_meta_current_snapshot(json_t *meta) {
    int64_t id = ice_json_int(meta, "current-snapshot-id", -1);
    return id < 0 ? NULL : ice_meta_snapshot(meta, id);
}

int ice_meta_add_snapshot(json_t *meta, int64_t id, int64_t parent_id,
                          int64_t seq, const char *manifest_list,
                          json_t *summary) {
    int64_t ts = ice_json_int(meta, "last-updated-ms", ice_now_ms());
    json_t *s = json_pack("{s:I, s:I, s:I, s:s, s:o, s:i}", "snapshot-id",
                          (json_int_t)id, "sequence-number", (json_int_t)seq,
                          "timestamp-ms", (json_int_t)ts, "manifest-list",
                          manifest_list, "summary", summary, "schema-id",
                          (int)ice_json_int(meta, "current-schema-id", 0));
    if (!s)
        return -1;
    if (parent_id >= 0 && json_object_set_new(s, "parent-snapshot-id",
                                              json_integer(parent_id)) != 0) {
        json_decref(s);
        return -1;
    }
    json_t *snaps = json_object_get(meta, "snapshots");
    json_t *log = json_object_get(meta, "snapshot-log");
    /* Only main moves: the other refs (another engine's tags and
     * branches) are kept as they are. */
    json_t *refs = json_object_get(meta, "refs");
    if (!json_is_object(refs)) {
        refs = json_object();
        if (json_object_set_new(meta, "refs", refs) != 0)
            refs = NULL;
    }
    if (!json_is_array(snaps) || !json_is_array(log) || !refs) {
        json_decref(s);
        return -1;
    }
    /* The *_new calls take their argument's reference even on failure. */
    int rc =
        json_array_append_new(snaps, s) != 0 ||
        json_array_append_new(log, json_pack("{s:I, s:I}", "timestamp-ms",
                                             (json_int_t)ts, "snapshot-id",
                                             (json_int_t)id)) != 0 ||
        json_object_set_new(refs, "main",
                            json_pack("{s:I, s:s}", "snapshot-id",
                                      (json_int_t)id, "type", "branch")) != 0 ||
        json_object_set_new(meta, "current-snapshot-id", json_integer(id)) !=
            0 ||
        json_object_set_new(meta, "last-sequence-number", json_integer(seq)) !=
            0;
    return rc ? -1 : 0;
}

int ice_meta_stage(ice_table *t, json_t *next, char *tmp, char *why,
                   size_t why_size) {
    char uuid[37];
    if (fs_uuid(uuid) != 0) {
        snprintf(why, why_size, "no random bytes for a temp name");
        return -1;
    }
    /* Not matching v<N>.metadata.json: readers never see it. A catalog
     * table's is the new version's own name: only the catalog row's swap
     * publishes it. */
    if (t->cat) {
        ice_cat_new_path(t, uuid, tmp);
    } else {
        snprintf(tmp, PATH_SIZE, "%s/tmp-%s.metadata.json.part", t->meta_dir,
                 uuid);
    }
    /* Compact: indentation was a third of the bytes every commit writes. */
    char *text = json_dumps(next, JSON_COMPACT);
    if (!text) {
        snprintf(why, why_size, "out of memory (metadata JSON)");
        return -1;
    }
    int rc = fs_write_new(tmp, text, strlen(text), 0, why, why_size);
    free(text);
    /* The commit's one barrier: every file this commit wrote unsynced
     * (data, dead letters, manifests, the dead-letter index, this temp
     * file) and their directory entries are durable once it returns, so
     * nothing the link publishes can be lost or torn by an OS crash. */
    for (int i = 0; rc == 0 && i < t->nbarrier; i++)
        if (fs_sync_fs(t->barrier_fds[i], t->root, why, why_size) != 0) {
            unlink(tmp);
            rc = -1;
        }
    return rc;
}

/* Why PATH, a number at or below the floor, is not taken. */
static void say_freed(const char *path, int64_t floor, char *why,
                      size_t why_size) {
    snprintf(why, why_size,
             "%s: at or below the version floor %lld: the version this "
             "commit was built on was vacuumed meanwhile; version number "
             "not taken",
             path, (long long)floor);
}

/* The link took N, at or below the floor (or the floor cannot be read):
 * a freed number, which no reader loads. Taken back (best effort: a stray
 * left by a crash here is just as invisible) and the cache dropped so the
 * next refresh finds the newest afresh; the outcome is reported unknown,
 * as for any failure after a link. */
static int take_back(ice_table *t, const char *path, int64_t floor, char *why,
                     size_t why_size) {
    if (floor >= 0) {
        unlink(path);
        say_freed(path, floor, why, why_size);
    }
    json_decref(t->meta);
    t->meta = NULL;
    t->version = 0;
    return -2;
}

int ice_meta_link(ice_table *t, json_t *next, const char *tmp, char *why,
                  size_t why_size) {
    char path[PATH_SIZE];
    if (t->cat)
        return ice_cat_publish(t, next, tmp, why, why_size);
    if (t->version >= ICE_VERSION_MAX) {
        unlink(tmp);
        snprintf(why, why_size,
                 "%s: v%lld is the highest version number: no version after "
                 "it",
                 t->meta_dir, (long long)t->version);
        return -1;
    }
    version_path(t, t->version + 1, path, sizeof path);
    /* A number at or below the floor is a freed one: never linked. */
    int64_t floor = ice_table_floor(t, why, why_size);
    if (floor < 0 || t->version + 1 <= floor) {
        unlink(tmp);
        if (floor >= 0)
            say_freed(path, floor, why, why_size);
        return -1;
    }
    if (link(tmp, path) != 0) {
        int e = errno;
        unlink(tmp); /* an orphan at worst if this fails */
        if (e == EEXIST)
            return 1;
        snprintf(why, why_size, "link %s to %s: %s", tmp, path, strerror(e));
        return -1;
    }
    /* Vacuum raises the floor before it deletes a version: if it freed
     * our number before the link, the floor now covers it. */
    floor = ice_table_floor(t, why, why_size);
    if (floor < 0 || t->version + 1 <= floor) {
        unlink(tmp);
        return take_back(t, path, floor, why, why_size);
    }
    /* The new version exists from here on, even if what follows fails. */
    json_decref(t->meta);
    t->meta = json_incref(next);
    t->version++;
    if (unlink(tmp) != 0 && errno != ENOENT) {
        snprintf(why, why_size, "unlink %s: %s", tmp, strerror(errno));
        return -2;
    }
    if (t->fsync && fs_sync_dir(t->meta_dir, why, why_size) != 0)
        return -2;
    return 0;
}

/* Writes N as the hint. Not synced: after a crash the hint may be stale,
 * empty or missing, and loading copes with all three (it validates the
 * number and probes past it), so an fsync here would buy nothing.
 * Through this instance's spare, exchanged with the hint: a commit then
 * allocates and frees no inode for its hint (fs_replace_via_spare). When
 * that fails (the spare removed by vacuum while idle, a file system
 * without the exchange), a new temp file and rename, as before. */
static int put_hint(ice_table *t, int64_t v, char *why, size_t why_size) {
    char text[32], hint[PATH_SIZE], uuid[37];
    snprintf(text, sizeof text, "%lld", (long long)v);
    snprintf(hint, sizeof hint, "%s/version-hint.text", t->meta_dir);
    if (!t->hint_spare && fs_uuid(uuid) == 0) {
        char name[64];
        snprintf(name, sizeof name, "tmp-%s.hint.part", uuid);
        t->hint_spare = join(t->meta_dir, name);
    }
    if (t->hint_spare && fs_replace_via_spare(t->hint_spare, hint, text,
                                              strlen(text), why, why_size) == 0)
        return 0;
    return replace_small_file(t, "version-hint.text", "hint", text, 0, why,
                              why_size);
}

int ice_table_write_hint(ice_table *t, char *why, size_t why_size) {
    int64_t v = t->version;
    if (t->cat)
        return 0; /* readers find a catalog table's version in the row */
    /* Never backwards: a writer that published v<N+1> after ours may have
     * written its hint before we write ours. So ours is written only over
     * a lower (or a dangling) hint, and a version found after ours once
     * ours is in place is written too (its own writer may have been
     * first). Whoever publishes after that look writes its hint later. */
    for (int round = 0; round < ICE_RACE_MAX; round++) {
        int64_t h = read_hint(t);
        if (h >= v && version_exists(t, h, why, why_size) == 1)
            return 0;
        if (put_hint(t, v, why, why_size) != 0)
            return -1;
        int64_t after = v;
        if (probe_forward(t, &after, why, why_size) != 0)
            return -1;
        if (after == v)
            return 0;
        v = after;
    }
    return 0;
}

int64_t ice_new_snapshot_id(json_t *meta) {
    for (;;) {
        uint64_t r;
        if (fs_random(&r, sizeof r) != 0)
            r = (uint64_t)ice_now_ms() * 2654435761u;
        int64_t id = (int64_t)(r & ((UINT64_C(1) << 53) - 1));
        if (id > 0 && !ice_meta_snapshot(meta, id))
            return id;
    }
}
