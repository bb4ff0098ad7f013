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
 * its own files.
 *
 * The age is judged on the clocks vacuum's judgment depends on, not on
 * the monotonic one, which stands still while the machine is suspended
 * (and a paused VM's may too): the time since the writer began writing
 * on CLOCK_BOOTTIME (counts a suspend), and the oldest file's mtime
 * against this host's wall clock, as vacuum judges it; the larger wins.
 * A mtime ahead of the wall clock (a file server's clock ahead of ours)
 * counts as no age by the mtime, only the boot clock's: counting it as age
 * refused every publish, for ever, wherever the skew passed the bound
 * (also on tables no vacuum touches), and a skew below it shrank every
 * commit's budget. A vacuum judging such a file sees it younger still. */
#define _XOPEN_SOURCE 700 /* struct stat's st_mtim */

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "maint.h"

/* PATH as shown in a message: a URI's path. */
static const char *shown(const char *path) {
    const char *p = ice_uri_path(path);
    return p ? p : path;
}

/* stat of PATH (a file:// URI or a path): 0; 1 gone (why); -1 (why). */
static int stat_file(const char *path, struct stat *st, char *why,
                     size_t why_size) {
    const char *p = shown(path);
    if (stat(p, st) == 0)
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

/* A time in ms, its seconds clamped so that no product or difference of
 * two such times overflows (an mtime is whatever the file system says). */
static int64_t ts_ms(const struct timespec *ts) {
    const int64_t lim = INT64_C(1) << 50; /* s: 35 million years */
    int64_t s = ts->tv_sec > lim ? lim : ts->tv_sec < -lim ? -lim : ts->tv_sec;
    return s * 1000 + ts->tv_nsec / 1000000;
}

/* The oldest mtime the stats found, and whose. */
typedef struct file_ages {
    size_t n;
    int64_t oldest_ms;  /* CLOCK_REALTIME ms */
    const char *oldest; /* borrowed */
} file_ages;

static int seen(file_ages *a, const char *path, char *why, size_t why_size) {
    if (!path || !*path)
        return 0;
    struct stat st;
    int rc = stat_file(path, &st, why, why_size);
    if (rc != 0)
        return rc;
    int64_t m = ts_ms(&st.st_mtim);
    if (a->n == 0 || m < a->oldest_ms) {
        a->oldest_ms = m;
        a->oldest = path;
    }
    a->n++;
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

/* The age judgment, written once: 0 in time; 1 past MAX_MS (why). */
static int judge(int64_t written_ms, const file_ages *a, int64_t max_ms,
                 char *why, size_t why_size) {
    const char *text;
    int64_t stall = test_stall_ms(&text);
    int64_t elapsed = ice_boot_ms() - written_ms;
    int64_t age = elapsed, now = a->n ? ice_now_ms() : 0;
    int64_t by_mtime = a->n ? now - a->oldest_ms : 0;
    if (by_mtime > age)
        age = by_mtime;
    age += stall;
    if (age <= max_ms)
        return 0;
    char fault[128] = "", clock[4800];
    if (stall > 0)
        snprintf(fault, sizeof fault, " (%lld ms of it %s=%.24s)",
                 (long long)stall, ICE_FAULT_STALL_ENV, text);
    /* Late by the mtime alone, the boot clock inside the bound: refused
     * before the host's deadline (at most the bound after it called
     * commit), which halves a batch only at or past it; and where the
     * file system's clock is behind ours every attempt is refused so,
     * whatever the batch's size. Said, so the operator fixes the clocks. */
    if (by_mtime > elapsed)
        snprintf(clock, sizeof clock,
                 "by the mtime of %s on this host's wall clock, as vacuum "
                 "judges it; %lld ms passed on its boot clock%s",
                 shown(a->oldest), (long long)elapsed,
                 elapsed + stall <= max_ms
                     ? ": the file system stamped it behind this host's wall "
                       "clock (a file server's clock behind, this clock "
                       "stepped forward, or a pause only it counted); if every "
                       "attempt is refused so, a smaller batch does not help: "
                       "keep the clocks of the hosts and the file server "
                       "within a few seconds (NTP)"
                     : "");
    else
        snprintf(clock, sizeof clock,
                 "on this host's boot clock, since the writer began writing "
                 "them");
    snprintf(why, why_size,
             "its files were written %lld ms ago%s, more than the %lld ms a "
             "writer may take to publish them (another writer's vacuum may "
             "delete them from then on): not published (%s)",
             (long long)age, fault, (long long)max_ms, clock);
    return 1;
}

int ice_publish_in_time(int64_t written_ms, int64_t max_ms, char *why,
                        size_t why_size) {
    file_ages none = {0};
    return judge(written_ms, &none, max_ms, why, why_size);
}

int ice_publish_check(const ice_pub_files *f, int64_t written_ms,
                      int64_t max_ms, char *why, size_t why_size) {
    file_ages a = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < f->ndata; i++)
        rc = seen(&a, f->data[i].path, why, why_size);
    for (size_t i = 0; rc == 0 && f->own && i < f->own->n; i++)
        rc = seen(&a, f->own->paths[i], why, why_size);
    for (size_t i = 0; rc == 0 && i < sizeof f->more / sizeof f->more[0]; i++)
        rc = seen(&a, f->more[i], why, why_size);
    if (rc != 0)
        return rc;
    return max_ms > 0 && judge(written_ms, &a, max_ms, why, why_size) ? 2 : 0;
}
