/* expire: drops all but the newest snapshots from the metadata, which
 * otherwise grows by one snapshot (with every partition's markers in its
 * summary) per commit. The markers need only the current snapshot, which
 * is always kept; so is every snapshot a ref names (another engine's tag
 * or branch, with the branch's newest), as the Iceberg spec requires. Dead
 * letters are found by walking the current snapshot's ancestors, which would
 * lose the dropped snapshots' files; rather than keeping those snapshots,
 * expire moves their file names into a new dead-letter index
 * (dead_letters/index-<uuid>.txt, the old index's lines then the dropped
 * snapshots', oldest first) named by a table property, so the walk
 * (ice_dl_files) never needs an expired snapshot and the metadata stays
 * bounded. No file is deleted here: vacuum removes what became unreachable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dead_letters.h"
#include "fsio.h"
#include "maint.h"

typedef struct expire_ctx {
    size_t keep, removed;
    ice_own own;        /* this attempt's index file */
    int64_t written_ms; /* before this attempt wrote it (ice_boot_ms) */
} expire_ctx;

/* The snapshot ids expire keeps. */
typedef struct id_set {
    int64_t *ids;
    size_t n, cap;
} id_set;

static int is_kept(const id_set *k, int64_t id) {
    for (size_t i = 0; i < k->n; i++)
        if (k->ids[i] == id)
            return 1;
    return 0;
}

/* Keeps SNAP and its ancestors, N snapshots at most (N bounds a parent
 * cycle in a corrupt file too). 0 or -1 out of memory. */
static int keep_chain(id_set *k, json_t *meta, json_t *snap, size_t n) {
    for (size_t i = 0; snap && i < n; i++) {
        int64_t id = ice_json_int(snap, "snapshot-id", -1);
        if (!is_kept(k, id)) {
            if (k->n == k->cap) {
                size_t cap = k->cap ? 2 * k->cap : 16;
                int64_t *ids = realloc(k->ids, cap * sizeof *ids);
                if (!ids)
                    return -1;
                k->ids = ids;
                k->cap = cap;
            }
            k->ids[k->n++] = id;
        }
        int64_t parent = ice_json_int(snap, "parent-snapshot-id", -1);
        snap = parent >= 0 ? ice_meta_snapshot(meta, parent) : NULL;
    }
    return 0;
}

/* What every ref other than main needs (the Iceberg spec's retention:
 * never a snapshot a ref names): a tag its snapshot, a branch its
 * min-snapshots-to-keep (else KEEP) newest. Refs naming no snapshot of
 * the table are left alone. 0 or -1 out of memory. */
static int keep_refs(id_set *k, json_t *meta, size_t keep) {
    const char *name;
    json_t *ref;
    json_object_foreach(json_object_get(meta, "refs"), name, ref) {
        json_t *snap =
            ice_meta_snapshot(meta, ice_json_int(ref, "snapshot-id", -1));
        const char *type = json_string_value(json_object_get(ref, "type"));
        int64_t min = ice_json_int(ref, "min-snapshots-to-keep", -1);
        size_t n = type && strcmp(type, "tag") == 0 ? 1
                   : min > 0                        ? (size_t)min
                                                    : keep;
        if (snap && keep_chain(k, meta, snap, n) != 0)
            return -1;
    }
    return 0;
}

/* LINE is a line of TEXT. */
static int has_line(const ib_buf *text, const char *line) {
    size_t n = strlen(line);
    for (size_t at = 0; at + n <= text->len;) {
        const char *p = (const char *)text->p + at;
        const char *nl = memchr(p, '\n', text->len - at);
        size_t len = nl ? (size_t)(nl - p) : text->len - at;
        if (len == n && memcmp(p, line, n) == 0)
            return 1;
        at += len + 1;
    }
    return 0;
}

/* The new index: the old one's text, then the files of the snapshots
 * the walk from the current snapshot no longer reaches (those not among
 * its kept ancestors, the first NMAIN of KEPT): the dropped ones and
 * those kept only for a ref, each once. *changed when any was added. 0
 * or -1 with why. */
static int index_text(const ice_table *t, json_t *meta, json_t *snaps,
                      const id_set *kept, size_t nmain, ib_buf *text,
                      int *changed, char *why, size_t why_size) {
    const char *old = json_string_value(
        json_object_get(json_object_get(meta, "properties"), ICE_DL_INDEX_KEY));
    *changed = 0;
    if (old) {
        char path[4096];
        uint8_t *data;
        size_t len;
        if (ice_table_path(t, old, path, sizeof path, why, why_size) != 0)
            return -1;
        int rc = fs_read_all(path, &data, &len, why, why_size);
        if (rc == 1)
            snprintf(why, why_size, "dead-letter index %s is missing", path);
        if (rc != 0)
            return -1;
        ib_buf_add(text, data, len);
        free(data);
    }
    id_set main_chain = {kept->ids, nmain, nmain};
    size_t i;
    json_t *s;
    json_array_foreach(snaps, i, s) {
        const char *rel = json_string_value(
            json_object_get(json_object_get(s, "summary"), ICE_DL_FILE_KEY));
        int64_t id = ice_json_int(s, "snapshot-id", -1);
        if (rel && !is_kept(&main_chain, id) && !has_line(text, rel)) {
            ib_buf_str(text, rel);
            ib_buf_byte(text, '\n');
            *changed = 1;
        }
    }
    if (!ib_buf_ok(text)) {
        snprintf(why, why_size, "out of memory (dead-letter index)");
        return -1;
    }
    return 0;
}

/* A new index file: its path into path (4096 bytes). Durable with the
 * metadata naming it, at the commit's barrier (ice_meta_stage). */
static int write_index(const ice_table *t, const ib_buf *text, char *path,
                       char *rel, size_t rel_size, char *why, size_t why_size) {
    char uuid[37];
    if (fs_uuid(uuid) != 0) {
        snprintf(why, why_size, "no random bytes for a file name");
        return -1;
    }
    snprintf(rel, rel_size, "dead_letters/index-%s.txt", uuid);
    snprintf(path, 4096, "%s/%s", t->root, rel);
    if (fs_write_new(path, text->p, text->len, 0, why, why_size) != 0) {
        path[0] = '\0';
        return -1;
    }
    return 0;
}

/* Removes from ARR the objects whose "snapshot-id" is not kept. */
static size_t filter(json_t *arr, const id_set *kept) {
    size_t removed = 0;
    for (size_t i = json_array_size(arr); i-- > 0;) {
        int64_t id = ice_json_int(json_array_get(arr, i), "snapshot-id", -1);
        if (!is_kept(kept, id) && json_array_remove(arr, i) == 0)
            removed++;
    }
    return removed;
}

int ice_expire_meta(const ice_table *t, json_t *meta, size_t keep,
                    char *index_path, size_t *removed, char *why,
                    size_t why_size) {
    json_t *snaps = json_object_get(meta, "snapshots");
    *removed = 0;
    index_path[0] = '\0';
    if (keep < 1) {
        snprintf(why, why_size,
                 "keep must be at least 1 (the current "
                 "snapshot holds the markers)");
        return -1;
    }
    if (json_array_size(snaps) <= keep)
        return 0;
    /* The current snapshot's chain first: the first nmain ids. */
    id_set kept = {0};
    size_t nmain = 0;
    int rc = keep_chain(&kept, meta, ice_meta_current_snapshot(meta), keep);
    if (rc == 0) {
        nmain = kept.n;
        rc = keep_refs(&kept, meta, keep);
    }
    if (rc != 0) {
        free(kept.ids);
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    ib_buf text = {0};
    char rel[256];
    int changed = 0;
    rc = index_text(t, meta, snaps, &kept, nmain, &text, &changed, why,
                    why_size);
    if (rc == 0 && changed)
        rc = write_index(t, &text, index_path, rel, sizeof rel, why, why_size);
    ib_buf_free(&text);
    if (rc == 0) {
        *removed = filter(snaps, &kept);
        filter(json_object_get(meta, "snapshot-log"), &kept);
        if (changed &&
            json_object_set_new(json_object_get(meta, "properties"),
                                ICE_DL_INDEX_KEY, json_string(rel)) != 0) {
            snprintf(why, why_size, "out of memory (metadata)");
            rc = -1;
        }
    }
    free(kept.ids);
    return rc;
}

static int build(ice_table *t, void *ctx, json_t **next, char *why,
                 size_t why_size) {
    expire_ctx *c = ctx;
    ice_own_drop(&c->own);
    size_t n = json_array_size(json_object_get(t->meta, "snapshots"));
    if (n <= c->keep)
        return 1; /* nothing to drop */
    json_t *m = ice_meta_next(t);
    char index[4096];
    if (!m) {
        snprintf(why, why_size, "out of memory (metadata)");
        return -1;
    }
    c->written_ms = ice_boot_ms();
    int rc = ice_expire_meta(t, m, c->keep, index, &c->removed, why, why_size);
    if (index[0] && ice_own_add(&c->own, index) != 0) {
        snprintf(why, why_size, "out of memory");
        rc = -1;
    }
    if (rc != 0) {
        json_decref(m);
        return -1;
    }
    *next = m;
    return 0;
}

/* The dead-letter index this attempt wrote, if any, and its staged
 * metadata (often its only file) are still there, written in time for
 * another writer's vacuum (docs/iceberg-lite.md, "Vacuum beside
 * writers"). */
static int check(void *ctx, const char *staged, char *why, size_t why_size) {
    expire_ctx *c = ctx;
    ice_pub_files f = {.own = &c->own, .more = {staged}};
    return ice_publish_check(&f, c->written_ms, ICE_PUBLISH_MAX_MS, why,
                             why_size) != 0
               ? -1
               : 0;
}

int ice_expire(ice_table *t, size_t keep, size_t *removed, char *why,
               size_t why_size) {
    expire_ctx c = {.keep = keep};
    *removed = 0;
    if (keep < 1) {
        snprintf(why, why_size,
                 "keep must be at least 1 (the current "
                 "snapshot holds the markers)");
        return -1;
    }
    int rc = ice_maint_commit(t, build, check, &c, why, why_size);
    if (rc != 0 && rc != -2)
        ice_own_drop(&c.own); /* never published */
    if (rc == 0)
        *removed = c.removed;
    ice_own_free(&c.own);
    return rc;
}
