/* One batch, one new table version. The data files, the dead-letter file,
 * the manifest and the manifest list are written first; the next metadata
 * (the new snapshot, whose summary carries every marker) goes to a temp
 * file, and one barrier (syncfs) makes all of them durable; link() then
 * publishes it as v<N+1>, failing if
 * another writer created v<N+1> first: then the markers are read again
 * from that version and checked again (FENCED, CONFLICT, ALREADY, or go
 * on on top of it). Nothing is visible to a reader before the link, and
 * everything is afterwards, so a kill anywhere leaves the table either
 * without the batch or with all of it. With keep_snapshots (default 100)
 * the next metadata also drops the snapshots past that count
 * (ice_expire_meta), so the metadata file every commit rewrites stays
 * bounded. With "maintenance", a published batch is followed by at most
 * one maintenance step (ice_auto.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsio.h"
#include "ice_sink.h"
#include "maint.h"

/* What one commit call holds across its attempts. */
typedef struct ice_run {
    ice_sink *s;
    const tm_batch *b;
    tm_marker *stored; /* per range */
    int64_t snapshot_id;
    ice_written w;
    int written;
    int64_t written_ms; /* ice_boot_ms, before w's first file */
    ice_own own;        /* manifest and manifest list of this attempt */
    char index[4096];   /* ... and its dead-letter index, "" when none */
} ice_run;

static void drop_own(ice_run *x) {
    ice_own_drop(&x->own);
    if (x->index[0]) {
        unlink(x->index);
        x->index[0] = '\0';
    }
}

/* The manifest list of the new snapshot: the parent's manifests, those a
 * full size tier merges (ice_manifests_to_merge) replaced by the new
 * manifest, which holds their entries and the new files. *total_files /
 * *total_rows: what the snapshot holds. */
static tm_status write_manifests(ice_run *x, int64_t seq, int64_t parent,
                                 char *list_uri, int64_t *total_files,
                                 int64_t *total_rows, tm_error *err) {
    ice_sink *s = x->s;
    json_t *cur = ice_meta_current_snapshot(s->table.meta);
    ice_mfile *mf = NULL, *keep = NULL, *merged = NULL;
    ice_datafile *files = NULL;
    unsigned char *marks = NULL;
    size_t nmf = 0, nfiles = 0, nkeep = 0, nmerged = 0;
    char why[512];
    tm_status r = TM_OK;
    if (ice_snapshot_manifests(&s->table, cur, &mf, &nmf, why, sizeof why) !=
        0) {
        s->host->set_error(err, "reading the current snapshot: %s", why);
        return TM_FATAL;
    }
    /* Shallow copies: the paths stay owned by mf. */
    marks = calloc(nmf ? nmf : 1, 1);
    keep = calloc(nmf ? nmf : 1, sizeof *keep);
    merged = calloc(nmf ? nmf : 1, sizeof *merged);
    if (!marks || !keep || !merged) {
        s->host->set_error(err, "out of memory");
        r = TM_RETRY;
        goto out;
    }
    ice_manifests_to_merge(mf, nmf, (int64_t)x->w.nfiles, marks);
    for (size_t i = 0; i < nmf; i++) {
        if (marks[i])
            merged[nmerged++] = mf[i];
        else
            keep[nkeep++] = mf[i];
    }
    if (nmerged && ice_manifests_files(&s->table, merged, nmerged, &files,
                                       &nfiles, why, sizeof why) != 0) {
        s->host->set_error(err, "merging manifests: %s", why);
        r = TM_FATAL;
        goto out;
    }
    size_t nnew = nfiles + x->w.nfiles;
    ice_datafile *grown = nnew ? realloc(files, nnew * sizeof *grown) : files;
    if (nnew && !grown) {
        s->host->set_error(err, "out of memory");
        r = TM_RETRY;
        goto out;
    }
    files = grown;
    /* Borrowed entries (paths stay owned by x->w). */
    if (x->w.nfiles)
        memcpy(files + nfiles, x->w.files, x->w.nfiles * sizeof *files);
    if (ice_write_snapshot_manifests(
            &s->table, keep, nkeep, files, nnew, x->snapshot_id, parent, seq,
            s->schema_json, &x->own, list_uri, total_files, total_rows, why,
            sizeof why) != 0) {
        s->host->set_error(err, "batch %s: %s", x->b->batch_id, why);
        r = TM_RETRY;
    }
out:
    free(marks);
    free(keep);
    free(merged);
    ice_mfiles_free(mf, nmf);
    /* files: merged entries own theirs; the new ones are borrowed. */
    for (size_t i = 0; i < nfiles; i++)
        ice_datafile_clear(&files[i]);
    free(files);
    return r;
}

/* The summary of the new snapshot: Iceberg's usual counters, the batch's
 * own keys, every marker carried over, the batch's advanced ones. */
static json_t *summary(ice_run *x, int64_t total_files, int64_t total_rows) {
    const tm_batch *b = x->b;
    json_t *sum = json_object();
    int64_t added_rows = 0, added_size = 0, dls = 0;
    for (size_t i = 0; i < x->w.nfiles; i++) {
        added_rows += x->w.files[i].records;
        added_size += x->w.files[i].size;
    }
    for (size_t i = 0; i < b->nranges; i++)
        dls += (int64_t)x->w.dls[i];
    json_t *prev =
        json_object_get(ice_meta_current_snapshot(x->s->table.meta), "summary");
    const char *psize =
        json_string_value(json_object_get(prev, "total-files-size"));
    /* The previous summary is read from the table (crafted or corrupt
     * text possible): a total that is not a count starts again from this
     * commit's files rather than wrapping. */
    int64_t total_size = psize ? strtoll(psize, NULL, 10) : 0;
    if (total_size < 0 || ice_count_add(&total_size, added_size) != 0)
        total_size = added_size;
    int bad =
        !sum ||
        json_object_set_new(sum, "operation", json_string("append")) != 0 ||
        ice_sum_int(sum, "added-data-files", (int64_t)x->w.nfiles) ||
        ice_sum_int(sum, "added-records", added_rows) ||
        ice_sum_int(sum, "added-files-size", added_size) ||
        ice_sum_int(sum, "total-data-files", total_files) ||
        ice_sum_int(sum, "total-records", total_rows) ||
        ice_sum_int(sum, "total-files-size", total_size) ||
        ice_sum_int(sum, "total-delete-files", 0) ||
        ice_sum_int(sum, "total-position-deletes", 0) ||
        ice_sum_int(sum, "total-equality-deletes", 0) ||
        json_object_set_new(sum, "tidemark.connector",
                            json_string(x->s->config->connector
                                            ? x->s->config->connector
                                            : "")) != 0 ||
        json_object_set_new(sum, "tidemark.batch-id",
                            json_string(b->batch_id ? b->batch_id : "")) != 0 ||
        ice_sum_int(sum, "tidemark.added-dead-letters", dls) ||
        (x->w.dl_rel[0] &&
         json_object_set_new(sum, ICE_DL_FILE_KEY, json_string(x->w.dl_rel)) !=
             0) ||
        ice_markers_carry(x->s->table.meta, sum) != 0;
    for (size_t i = 0; !bad && i < b->nranges; i++) {
        const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
        char *prefix = ice_marker_prefix(x->s, g->topic, g->partition);
        bad = !prefix || ice_marker_put_summary(sum, prefix, &x->stored[i]);
        free(prefix);
    }
    if (bad) {
        json_decref(sum);
        return NULL;
    }
    return sum;
}

/* Reads the stored markers from the loaded version and lets the host's
 * check decide. */
static tm_status check(ice_run *x, tm_error *err) {
    const tm_batch *b = x->b;
    /* Whose table this is can change while we run (a connector that did
     * not consent to sharing joined): checked on every version we load. */
    tm_status r = ice_check_owner(x->s, TM_FATAL, err);
    if (r != TM_OK)
        return r;
    for (size_t i = 0; i < b->nranges; i++) {
        const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
        x->stored[i].struct_size = sizeof(tm_marker);
        x->stored[i].topic = g->topic;
        x->stored[i].partition = g->partition;
        r = ice_marker_read(x->s, &x->stored[i], err);
        if (r != TM_OK)
            return r;
    }
    return x->s->host->marker_check(b, x->stored, err);
}

static int should_stop(ice_run *x) {
    return atomic_load(&x->s->interrupted) ||
           (x->b->deadline_ms > 0 && ice_mono_ms() > x->b->deadline_ms);
}

/* Last before the link (docs/iceberg-lite.md, "Vacuum beside writers"):
 * the commit is not stopped nor past its deadline (CLOCK_MONOTONIC, the
 * host's), and every file the staged version TMP names that this commit
 * wrote is still there and was written at most ICE_PUBLISH_MAX_MS ago
 * (ice_publish_check). TM_OK; *gone set when one was deleted (another
 * host's vacuum, after a stall past its age floor): the batch is written
 * again; else TM_RETRY with err set. */
static tm_status before_link(ice_run *x, const char *tmp, int *gone,
                             tm_error *err) {
    ice_sink *s = x->s;
    char why[4400];
    *gone = 0;
    if (should_stop(x)) {
        s->host->set_error(err, "batch %s: interrupted or past its deadline",
                           x->b->batch_id);
        return TM_RETRY;
    }
    ice_pub_files f = {.data = x->w.files,
                       .ndata = x->w.nfiles,
                       .own = &x->own,
                       .more = {x->w.dl_path, x->index, tmp}};
    int rc = ice_publish_check(&f, x->written_ms, ICE_PUBLISH_MAX_MS, why,
                               sizeof why);
    if (rc == 1) {
        s->host->log(s->config->host_ctx, TM_LOG_WARN,
                     "batch %s: %s: nothing published, the batch's files "
                     "are written again",
                     x->b->batch_id, why);
        *gone = 1;
    } else if (rc != 0) {
        s->host->set_error(err, "batch %s: %s", x->b->batch_id, why);
        return TM_RETRY;
    }
    return TM_OK;
}

/* One attempt on the loaded version. TM_OK published; *lost when another
 * writer published that version first (go again). */
static tm_status attempt(ice_run *x, int *lost, tm_error *err) {
    ice_sink *s = x->s;
    const tm_batch *b = x->b;
    *lost = 0;
    tm_status r = check(x, err);
    if (r != TM_OK)
        return r;
    if (should_stop(x)) {
        s->host->set_error(err, "batch %s: interrupted or past its deadline",
                           b->batch_id);
        return TM_RETRY;
    }
    /* The schema as the loaded version has it: another writer may have
     * evolved it since open (the mapping may then lack its column). */
    int moved = 0;
    r = ice_schema_reconcile(s, &moved, err);
    if (r != TM_OK)
        return r == TM_INVALID ? TM_FATAL : r;
    if (moved && x->written) {
        /* This batch's files carry the field ids of before. */
        s->host->set_error(err,
                           "batch %s: another writer changed the schema of "
                           "%s meanwhile: the resend writes the batch again",
                           b->batch_id, s->table.root);
        return TM_RETRY;
    }
    if (!x->written) {
        x->snapshot_id = ice_new_snapshot_id(s->table.meta);
        x->written_ms = ice_boot_ms();
        if ((r = ice_write_effects(s, b, x->snapshot_id, &x->w, err)) != TM_OK)
            return r;
        x->written = 1;
    }
    json_t *cur = ice_meta_current_snapshot(s->table.meta);
    int64_t parent = cur ? ice_json_int(cur, "snapshot-id", -1) : -1;
    int64_t seq = ice_json_int(s->table.meta, "last-sequence-number", 0) + 1;
    int64_t total_files = 0, total_rows = 0;
    char list_uri[ICE_URI_MAX], why[512], tmp[4096];
    r = write_manifests(x, seq, parent, list_uri, &total_files, &total_rows,
                        err);
    if (r != TM_OK)
        return r;
    s->host->fault(TM_FAULT_AFTER_EFFECTS);
    for (size_t i = 0; i < b->nranges; i++)
        s->host->marker_advance(&x->stored[i], b, i, x->w.rows[i], x->w.dls[i],
                                0);
    json_t *next = ice_meta_next(&s->table);
    json_t *sum = next ? summary(x, total_files, total_rows) : NULL;
    /* The markers move into the new snapshot: the parent (still current
     * in next) keeps none, so the metadata holds one set, not one per
     * snapshot kept. A new schema lands with the first batch written
     * under it. */
    json_t *own =
        sum && parent >= 0 ? ice_meta_own_snapshot(next, parent) : NULL;
    if (sum && ((parent >= 0 &&
                 (!own || ice_markers_move(own, x->snapshot_id) != 0)) ||
                ice_schema_put(s, next) != 0)) {
        json_decref(sum);
        sum = NULL;
    }
    if (!sum || ice_meta_add_snapshot(next, x->snapshot_id, parent, seq,
                                      list_uri, sum) != 0) {
        json_decref(next);
        s->host->set_error(err, "out of memory (metadata)");
        return TM_RETRY;
    }
    size_t dropped;
    if (s->set.keep_snapshots > 0 &&
        ice_expire_meta(&s->table, next, (size_t)s->set.keep_snapshots,
                        x->index, &dropped, why, sizeof why) != 0) {
        json_decref(next);
        s->host->set_error(err, "batch %s: expiring old snapshots: %s",
                           b->batch_id, why);
        return TM_RETRY;
    }
    if (ice_meta_stage(&s->table, next, tmp, why, sizeof why) != 0) {
        json_decref(next);
        s->host->set_error(err, "batch %s: %s", b->batch_id, why);
        return TM_RETRY;
    }
    s->host->fault(TM_FAULT_AFTER_MARKER);
    int gone;
    if ((r = before_link(x, tmp, &gone, err)) != TM_OK || gone) {
        unlink(tmp);
        json_decref(next);
        if (gone) {
            /* Nothing of this attempt is named anywhere: all of it goes
             * (the caller drops the manifests), and the next attempt
             * writes the batch again under new names. */
            ice_written_discard(&x->w);
            ice_written_free(&x->w);
            x->written = 0;
            *lost = 1;
        }
        return r;
    }
    int rc = ice_meta_link(&s->table, next, tmp, why, sizeof why);
    json_decref(next);
    if (rc == 1) {
        *lost = 1;
        return TM_OK;
    }
    if (rc == -1) {
        s->host->set_error(err, "batch %s: %s", b->batch_id, why);
        return TM_RETRY;
    }
    x->written = 2; /* published: the files belong to the table now */
    if (rc == -2) {
        /* Linked, but not known to be durable: the resend's check
         * settles it (ALREADY if it stuck). */
        s->host->set_error(err, "batch %s: outcome unknown: %s", b->batch_id,
                           why);
        return TM_RETRY;
    }
    if (ice_table_write_hint(&s->table, why, sizeof why) != 0)
        s->host->log(s->config->host_ctx, TM_LOG_WARN,
                     "version-hint.text not replaced (readers probe past "
                     "it): %s",
                     why);
    return TM_OK;
}

tm_status ice_commit(void *sink, const tm_batch *b, tm_error *err) {
    ice_sink *s = sink;
    ice_run x = {.s = s, .b = b};
    s->host->fault(TM_FAULT_BEFORE_BEGIN);
    atomic_store(&s->interrupted, 0);
    x.stored = calloc(b->nranges ? b->nranges : 1, sizeof *x.stored);
    if (!x.stored) {
        s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
        return TM_RETRY;
    }
    tm_status r = TM_RETRY;
    int lost = 1;
    for (int i = 0; lost && i < ICE_RACE_MAX; i++) {
        if ((r = ice_refresh(s, err)) != TM_OK)
            break;
        r = attempt(&x, &lost, err);
        if (lost || (r != TM_OK && x.written != 2))
            drop_own(&x); /* this attempt's manifests will never be used */
        if (r != TM_OK)
            break;
    }
    if (r == TM_OK && lost) {
        s->host->set_error(err,
                           "batch %s: another writer committed to %s first "
                           "%d times in a row",
                           b->batch_id, s->table.root, ICE_RACE_MAX);
        r = TM_RETRY;
    }
    if (x.written == 1)
        ice_written_discard(&x.w); /* never published */
    size_t added = x.w.nfiles;
    ice_written_free(&x.w);
    ice_own_free(&x.own);
    free(x.stored);
    if (r == TM_OK) {
        s->host->fault(TM_FAULT_AFTER_COMMIT);
        /* The batch is published: background maintenance may take a
         * step now (its own commits; never this batch's outcome). */
        ice_auto_run(s, b, added);
    }
    return r;
}
