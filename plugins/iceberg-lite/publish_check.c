/* The check a writer makes between staging a version and publishing it
 * (docs/iceberg-lite.md, "Vacuum beside writers"): every file the version
 * names that this writer wrote for it is still there, and was written
 * less than ICE_PUBLISH_MAX_MS ago. Another host's vacuum deletes an
 * unreferenced file only once its mtime is older than its age floor
 * (maintenance_min_age_seconds, above ICE_PUBLISH_MAX_MS by a margin), so
 * a writer that passes this check links before any vacuum may take its
 * files, unless it stalls for longer than that margin between the check
 * and the link (a catalog swap waiting on a lock is bounded below it:
 * ICE_CATALOG_LOCK_TIMEOUT_MAX_MS, catalog.h). Cheap: a stat of each of
 * its own files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "maint.h"

int ice_file_present(const char *path, char *why, size_t why_size) {
    const char *p = ice_uri_path(path);
    struct stat st;
    if (!p)
        p = path; /* a plain path */
    if (stat(p, &st) == 0)
        return 0;
    if (errno == ENOENT) {
        snprintf(why, why_size,
                 "%s was deleted before the version naming it was published "
                 "(another writer's vacuum)",
                 p);
        return 1;
    }
    snprintf(why, why_size, "stat %s: %s", p, strerror(errno));
    return -1;
}

int ice_own_present(const ice_own *o, char *why, size_t why_size) {
    for (size_t i = 0; i < o->n; i++) {
        int rc = ice_file_present(o->paths[i], why, why_size);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int ice_datafiles_present(const ice_datafile *f, size_t n, char *why,
                          size_t why_size) {
    for (size_t i = 0; i < n; i++) {
        int rc = ice_file_present(f[i].path, why, why_size);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* TIDEMARK_FAULT_STALL_MS (docs/operations.md, "Crash points"): a test's
 * stall of that many ms between writing the files and this check, added
 * to their age, so that a late publish is tested without waiting for the
 * bound. It can only make a writer refuse; text that is not a whole
 * number in 0..ICE_FAULT_STALL_MAX_MS counts as none. */
static int64_t test_stall_ms(void) {
    const char *s = getenv(ICE_FAULT_STALL_ENV);
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    return errno || *end || v < 0 || v > ICE_FAULT_STALL_MAX_MS ? 0 : v;
}

int ice_publish_in_time(int64_t written_ms, int64_t max_ms, char *why,
                        size_t why_size) {
    int64_t age = ice_mono_ms() - written_ms + test_stall_ms();
    if (age <= max_ms)
        return 0;
    snprintf(why, why_size,
             "its files were written %lld ms ago, more than the %lld ms a "
             "writer may take to publish them (another writer's vacuum may "
             "delete them from then on): not published",
             (long long)age, (long long)max_ms);
    return 1;
}
