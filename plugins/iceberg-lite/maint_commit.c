/* The publish loop of the maintenance operations: the sink's commit
 * protocol (table_meta.h) without a batch. Each attempt builds the next
 * metadata on top of the newest version; a lost link() (EEXIST) reloads
 * and builds again on top of the winner, never overwriting it. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsio.h"
#include "maint.h"

int ice_own_add(ice_own *o, const char *path) {
    if (strlen(path) >= sizeof o->paths[0])
        return -1; /* never a cut path: dropping it would unlink another */
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 8;
        char(*p)[4096] = realloc(o->paths, cap * sizeof *p);
        if (!p)
            return -1;
        o->paths = p;
        o->cap = cap;
    }
    snprintf(o->paths[o->n++], sizeof o->paths[0], "%s", path);
    return 0;
}

void ice_own_drop(ice_own *o) {
    for (size_t i = 0; i < o->n; i++)
        unlink(o->paths[i]); /* an orphan for vacuum if this fails */
    o->n = 0;
}

void ice_own_free(ice_own *o) {
    free(o->paths);
    memset(o, 0, sizeof *o);
}

int ice_sum_int(json_t *summary, const char *key, int64_t v) {
    char text[24];
    snprintf(text, sizeof text, "%" PRId64, v);
    return json_object_set_new(summary, key, json_string(text));
}

int ice_maint_commit(ice_table *t, ice_build_fn build, ice_check_fn check,
                     void *ctx, char *why, size_t why_size) {
    for (int i = 0; i < ICE_RACE_MAX; i++) {
        int rc = ice_table_refresh(t, why, why_size);
        if (rc == 1)
            snprintf(why, why_size, "%s: no table metadata", t->meta_dir);
        if (rc != 0)
            return -1;
        /* The owner's fence, on the version this attempt builds on: the
         * link (or swap) below succeeds only if that version is still the
         * newest, so a claim that fenced us makes it fail and the next
         * attempt checks again. */
        const ice_owner_hooks *h = t->hooks;
        if (h && h->fence && h->fence(h->ctx, t, why, why_size) != 0)
            return -1;
        json_t *next = NULL;
        if ((rc = build(t, ctx, &next, why, why_size)) != 0)
            return rc;
        char tmp[4096];
        if (ice_meta_stage(t, next, tmp, why, why_size) != 0) {
            json_decref(next);
            return -1;
        }
        if (h && h->fault)
            h->fault(ICE_FAULT_MAINT_STAGED);
        /* Last before the link: what it will name, the staged file
         * included, is still there and young enough (a stall past another
         * writer's vacuum floor loses it). */
        if (check(ctx, tmp, why, why_size) != 0) {
            unlink(tmp); /* ENOENT when it was the one gone */
            json_decref(next);
            return -1;
        }
        rc = ice_meta_link(t, next, tmp, why, why_size);
        json_decref(next);
        if (rc == 1)
            continue; /* another writer won v<N+1>: build on top of it */
        if (rc != 0)
            return rc;
        char hint_why[512];
        (void)ice_table_write_hint(t, hint_why, sizeof hint_why); /* a hint */
        return 0;
    }
    snprintf(why, why_size,
             "another writer committed to %s first %d times in a row", t->root,
             ICE_RACE_MAX);
    return -1;
}

static int write_meta_file(ice_table *t, const char *name, const ib_buf *b,
                           ice_own *own, char *uri, char *why,
                           size_t why_size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", t->meta_dir, name);
    /* No fsync of its own: the commit's barrier (ice_meta_stage). */
    if (fs_write_new(path, b->p, b->len, 0, why, why_size) != 0)
        return -1;
    if (ice_own_add(own, path) != 0) {
        unlink(path);
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    snprintf(uri, 4200, "file://%s", path);
    return 0;
}

int ice_write_snapshot_manifests(
    ice_table *t, const ice_mfile *keep, size_t nkeep,
    const ice_datafile *files, size_t n, int64_t snapshot_id, int64_t parent_id,
    int64_t seq, const char *schema_json, ice_own *own, char *list_uri,
    int64_t *total_files, int64_t *total_rows, char *why, size_t why_size) {
    char uuid[37], name[256], uri[4200];
    ib_buf bytes = {0};
    ice_mfile *all = calloc(nkeep + 1, sizeof *all);
    if (!all) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    if (fs_uuid(uuid) != 0) {
        free(all);
        snprintf(why, why_size, "no random bytes for a file name");
        return -1;
    }
    *total_files = *total_rows = 0;
    int bad = 0;
    for (size_t i = 0; i < nkeep; i++) {
        all[i] = keep[i]; /* borrowed */
        bad |= ice_count_add(total_files, keep[i].added_files) |
               ice_count_add(total_files, keep[i].existing_files) |
               ice_count_add(total_rows, keep[i].added_rows) |
               ice_count_add(total_rows, keep[i].existing_rows);
    }
    ice_mfile *m = &all[nkeep];
    m->seq = m->min_seq = seq;
    m->added_snapshot_id = snapshot_id;
    int64_t added_files = 0, existing_files = 0;
    for (size_t i = 0; i < n; i++) {
        if (files[i].snapshot_id == snapshot_id) {
            added_files++;
            bad |= ice_count_add(&m->added_rows, files[i].records);
        } else {
            existing_files++;
            bad |= ice_count_add(&m->existing_rows, files[i].records);
            if (files[i].seq < m->min_seq)
                m->min_seq = files[i].seq;
        }
    }
    bad |= added_files > INT32_MAX || existing_files > INT32_MAX;
    m->added_files = (int32_t)added_files;
    m->existing_files = (int32_t)existing_files;
    bad |= ice_count_add(total_files, added_files) |
           ice_count_add(total_files, existing_files) |
           ice_count_add(total_rows, m->added_rows) |
           ice_count_add(total_rows, m->existing_rows);
    if (bad) {
        free(all);
        snprintf(why, why_size,
                 "the table's manifests count negative or more than 2^63 "
                 "rows or files (a corrupt or crafted manifest)");
        return -1;
    }
    int rc = 0;
    if (n > 0) {
        /* The table's spec types data_file.partition (one spec: a spec
         * that differs is refused at open, so every entry has its type). */
        ice_pspec spec;
        snprintf(name, sizeof name, "%s-m0.avro", uuid);
        rc = ice_pspec_from_meta(t->meta, &spec, why, why_size);
        if (rc == 0 && ice_manifest_encode(files, n, snapshot_id, schema_json,
                                           &spec, &bytes) != 0) {
            snprintf(why, why_size, "out of memory (manifest)");
            rc = -1;
        }
        ice_pspec_free(&spec);
        if (rc == 0)
            rc = write_meta_file(t, name, &bytes, own, uri, why, why_size);
        m->length = (int64_t)bytes.len;
        m->path = uri;
    }
    ib_buf_reset(&bytes);
    if (rc == 0 && ice_manifest_list_encode(all, nkeep + (n > 0), snapshot_id,
                                            parent_id, seq, &bytes) != 0) {
        snprintf(why, why_size, "out of memory (manifest list)");
        rc = -1;
    }
    snprintf(name, sizeof name, "snap-%lld-1-%s.avro", (long long)snapshot_id,
             uuid);
    if (rc == 0)
        rc = write_meta_file(t, name, &bytes, own, list_uri, why, why_size);
    ib_buf_free(&bytes);
    free(all);
    return rc;
}
