/* Background maintenance (docs/iceberg-lite.md, "Background
 * maintenance"): with "maintenance" on, the sink compacts small files and
 * vacuums unreferenced ones itself, between batches, in its own thread
 * (the sink ABI has no idle callback, so this runs at the end of a
 * successful commit, after the batch is published: the batch is already
 * in the table, only the return to the host waits). At most one step per
 * batch, each bounded: a compaction rewrites at most target_file_size
 * bytes; a vacuum lists the three directories and reads the kept
 * snapshots' manifests. Snapshots are expired by every commit already
 * (keep_snapshots).
 *
 * Each step is a commit of its own (ice_maint_commit) under this
 * connector's fence: before each attempt, the host's marker check is run
 * on the batch just committed, as a batch of no records starting where it
 * ended, against the markers of the version the step builds on. It passes
 * only while the markers are this connector's, at the epoch it holds, and
 * where its last batch left them; a claim by another host (a newer epoch)
 * fails it, and since the link (or the catalog's swap) publishes only on
 * top of the version checked, a fenced host publishes no maintenance.
 *
 * Vacuum deletes a file only when it has been unreferenced, as far as this
 * process has seen, for the grace period (a reader that loaded a version
 * naming the file then has that long to read it) AND its mtime is older
 * than the age floor (maintenance_min_age_seconds): another host of this
 * connector, or any writer, may have written it for a version it has not
 * published yet, and a writer publishes nothing older than
 * ICE_PUBLISH_MAX_MS (publish_check.c). The grace alone is counted from
 * when this process first saw the file, which says nothing about how long
 * another writer has had it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ice_sink.h"
#include "maint.h"

struct ice_unref {
    char *path;
    int64_t first_ms; /* monotonic: when a vacuum first found it */
    int seen;         /* found by the current vacuum */
};

/* The fence: the host's marker check (the one that guards data commits)
 * on a batch of no records that starts and ends where the last one
 * ended. TM_OK means every range is at this connector's epoch and still
 * where it left it. */
static int fence(void *ctx, ice_table *t, char *why, size_t why_size) {
    ice_sink *s = ctx;
    const tm_batch *b = s->maint.last;
    (void)t; /* the sink's own table: ice_marker_read reads it */
    if (!b) {
        snprintf(why, why_size, "no batch committed by this process yet");
        return -1;
    }
    tm_range *ranges = calloc(b->nranges ? b->nranges : 1, sizeof *ranges);
    tm_marker *stored = calloc(b->nranges ? b->nranges : 1, sizeof *stored);
    tm_error err = {.struct_size = sizeof err};
    tm_status r = ranges && stored ? TM_OK : TM_RETRY;
    if (r != TM_OK)
        s->host->set_error(&err, "out of memory");
    for (size_t i = 0; r == TM_OK && i < b->nranges; i++) {
        const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
        size_t n = g->struct_size < sizeof *g ? g->struct_size : sizeof *g;
        memcpy(&ranges[i], g, n);
        ranges[i].struct_size = sizeof *ranges;
        ranges[i].start_offset = g->end_offset;
        ranges[i].last_offset = TM_NO_OFFSET;
        stored[i].struct_size = sizeof *stored;
        stored[i].topic = g->topic;
        stored[i].partition = g->partition;
        r = ice_marker_read(s, &stored[i], &err);
    }
    if (r == TM_OK) {
        tm_batch none = {.struct_size = sizeof none,
                         .connector = b->connector,
                         .batch_id = b->batch_id,
                         .ranges = ranges,
                         .nranges = b->nranges};
        r = s->host->marker_check(&none, stored, &err);
    }
    free(ranges);
    free(stored);
    if (r == TM_OK)
        return 0;
    snprintf(why, why_size, "%s: not this connector's to maintain now: %s",
             t->root, err.message);
    return -1;
}

/* The index of PATH in the list (kept sorted by path), or where it goes:
 * *found set when it is there. A vacuum looks up every candidate, and the
 * list holds every file unreferenced within the grace period (thousands
 * under a steady load): a binary search. */
static size_t unref_find(const ice_auto *a, const char *path, int *found) {
    size_t lo = 0, hi = a->nunref;
    *found = 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(a->unref[mid].path, path);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* 1 keeps PATH this time: not found unreferenced before, or less than the
 * grace period ago. Out of memory keeps it too (deleting is what may
 * wait). */
static int vacuum_hold(void *ctx, const char *path) {
    ice_sink *s = ctx;
    ice_auto *a = &s->maint;
    int64_t now = ice_mono_ms();
    int found;
    size_t at = unref_find(a, path, &found);
    if (found) {
        ice_unref *u = &a->unref[at];
        /* Deleted now: not seen, so that the prune forgets it. */
        u->seen = now - u->first_ms < s->set.maint_grace_s * 1000;
        return u->seen;
    }
    if (s->set.maint_grace_s == 0)
        return 0;
    if (a->nunref == a->capunref) {
        size_t cap = a->capunref ? 2 * a->capunref : 64;
        ice_unref *g = realloc(a->unref, cap * sizeof *g);
        if (!g)
            return 1;
        a->unref = g;
        a->capunref = cap;
    }
    char *p = strdup(path);
    if (!p)
        return 1;
    memmove(&a->unref[at + 1], &a->unref[at],
            (a->nunref - at) * sizeof *a->unref);
    a->unref[at] = (ice_unref){.path = p, .first_ms = now, .seen = 1};
    a->nunref++;
    return 1;
}

/* Forgets the files the last vacuum did not find (deleted, or named by a
 * version again), and clears the marks for the next one. */
static void unref_prune(ice_auto *a) {
    size_t k = 0;
    for (size_t i = 0; i < a->nunref; i++) {
        if (a->unref[i].seen) {
            a->unref[i].seen = 0;
            a->unref[k++] = a->unref[i];
        } else {
            free(a->unref[i].path);
        }
    }
    a->nunref = k;
}

void ice_auto_init(ice_sink *s) {
    if (!s->set.maintenance)
        return;
    s->maint.hooks = (ice_owner_hooks){.fence = fence,
                                       .fault = s->host->fault,
                                       .vacuum_hold = vacuum_hold,
                                       .vacuum_nowait = 1,
                                       .ctx = s};
    s->table.hooks = &s->maint.hooks;
}

void ice_auto_free(ice_sink *s) {
    for (size_t i = 0; i < s->maint.nunref; i++)
        free(s->maint.unref[i].path);
    free(s->maint.unref);
    s->maint.unref = NULL;
    s->maint.nunref = s->maint.capunref = 0;
}

static void warn(ice_sink *s, const char *what, int rc, const char *why) {
    s->host->log(
        s->config->host_ctx, TM_LOG_WARN,
        "maintenance: %s %s (tried again after a later batch): %s", what,
        rc == -2 ? "published, but its directory sync failed" : "not done",
        why);
}

/* The step must end: the host is stopping, or the batch's deadline (the
 * background steps run inside its commit call) has passed. */
static int must_stop(ice_sink *s, const tm_batch *b) {
    return atomic_load(&s->interrupted) ||
           (b->deadline_ms > 0 && ice_mono_ms() > b->deadline_ms);
}

static int compact_stop(void *ctx) {
    ice_sink *s = ctx;
    return must_stop(s, s->maint.last);
}

/* A compaction when enough small files came: 1 when it ran (published or
 * not), 0 when there was nothing to do. */
static int compact_step(ice_sink *s, const tm_batch *b) {
    ice_auto *a = &s->maint;
    if (a->files_since < s->set.maint_min_files)
        return 0; /* too few new files to make enough small ones */
    /* Small: below half the target, so that two of them fit one new file
     * and a file compacted to at least half the target is never rewritten
     * again; at most one target's worth of bytes per batch; a grown file
     * only with as much new data (similar_sizes). */
    ice_compact_opts o = {.target = s->set.target_file_size,
                          .small_below = s->set.target_file_size / 2,
                          .max_bytes = s->set.target_file_size,
                          .min_files = (size_t)s->set.maint_min_files,
                          .similar_sizes = 1,
                          .codec = s->set.compression,
                          .stop = compact_stop,
                          .stop_ctx = s,
                          .max_age_ms = ICE_PUBLISH_MAX_MS};
    ice_compact_result res;
    char why[1024];
    int64_t t0 = ice_mono_ms();
    int rc = ice_compact_with(&s->table, &o, &res, why, sizeof why);
    if (rc == 1) {
        a->files_since = 0; /* fewer small files than min_files */
        return 0;
    }
    if (rc != 0) {
        a->files_since = 0;
        warn(s, "compaction", rc, why);
        return 1;
    }
    /* files_since stays: the next batch looks again, until the small
     * files are fewer than min_files (the cap may have left some). */
    s->host->log(s->config->host_ctx, TM_LOG_INFO,
                 "maintenance: after batch %s, compacted %zu files (%" PRId64
                 " rows) into %zu as snapshot %" PRId64 " in %" PRId64 " ms",
                 b->batch_id, res.files_in, res.rows, res.files_out,
                 res.snapshot_id, ice_mono_ms() - t0);
    return 1;
}

static void vacuum_step(ice_sink *s) {
    ice_auto *a = &s->maint;
    int64_t now = ice_mono_ms();
    if (a->last_vacuum_ms &&
        now - a->last_vacuum_ms < s->set.maint_vacuum_every_s * 1000)
        return;
    a->last_vacuum_ms = now;
    char why[1024];
    size_t removed = 0;
    /* The age floor on the files' mtime (another writer's files in
     * flight), and vacuum_hold keeps each file for the grace period from
     * when this process first found it unreferenced (readers). */
    int rc = ice_vacuum(&s->table, s->set.maint_min_age_s, NULL, NULL, &removed,
                        why, sizeof why);
    if (rc == 1)
        return; /* another vacuum holds the table: it does the work */
    unref_prune(a);
    if (rc != 0) {
        warn(s, "vacuum", rc, why);
        return;
    }
    if (removed)
        s->host->log(s->config->host_ctx, TM_LOG_INFO,
                     "maintenance: vacuum removed %zu files in %" PRId64
                     " ms (%zu more wait for their grace period)",
                     removed, ice_mono_ms() - now, a->nunref);
}

void ice_auto_run(ice_sink *s, const tm_batch *b, size_t files_added) {
    if (!s->set.maintenance)
        return;
    if (must_stop(s, b))
        return; /* the host is stopping or waiting: not now */
    ice_auto *a = &s->maint;
    a->last = b;
    a->files_since += (int64_t)files_added;
    if (!compact_step(s, b))
        vacuum_step(s);
    a->last = NULL; /* the batch is the host's again */
}
