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
#include <stdatomic.h>
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
 * number in 0..ICE_FAULT_STALL_MAX_MS counts as none. Set by accident it
 * refuses every publish, so the first check that sees it set warns on
 * stderr, once per process, and every refusal names it. */
static int64_t test_stall_ms(const char **text) {
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    const char *s = getenv(ICE_FAULT_STALL_ENV);
    *text = s;
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    int bad = errno || *end || v < 0 || v > ICE_FAULT_STALL_MAX_MS;
    if (!atomic_flag_test_and_set(&warned))
        fprintf(stderr,
                "tidemark: warning: %s=%s is set (a test's fault variable): "
                "%s\n",
                ICE_FAULT_STALL_ENV, s,
                bad ? "not a whole number of ms in range, ignored"
                    : "every publish check counts its files that many ms "
                      "older, and refuses them past the writers' bound");
    return bad ? 0 : v;
}

int ice_publish_in_time(int64_t written_ms, int64_t max_ms, char *why,
                        size_t why_size) {
    const char *text;
    int64_t stall = test_stall_ms(&text);
    int64_t age = ice_mono_ms() - written_ms + stall;
    if (age <= max_ms)
        return 0;
    char fault[128] = "";
    if (stall > 0)
        snprintf(fault, sizeof fault, " (%lld ms of it %s=%.24s)",
                 (long long)stall, ICE_FAULT_STALL_ENV, text);
    snprintf(why, why_size,
             "its files were written %lld ms ago%s, more than the %lld ms a "
             "writer may take to publish them (another writer's vacuum may "
             "delete them from then on): not published",
             (long long)age, fault, (long long)max_ms);
    return 1;
}
