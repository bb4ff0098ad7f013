/* expire: drops all but the newest snapshots from the metadata, which
 * otherwise grows by one snapshot (with every partition's markers in its
 * summary) per commit. The markers need only the current snapshot, which
 * is always kept; so is every snapshot a ref names (another engine's tag
 * or branch, with the branch's newest), as the Iceberg spec requires. Dead
 * letters are found by walking the current snapshot's ancestors, which would
 * lose the dropped snapshots' files; rather than keeping those snapshots,
 * expire moves their file names into the dead-letter index, segments
 * (dead_letters/index-<uuid>.txt, one path a line) named by a table
 * property: each expiry writes one new segment with the files leaving the
 * walk, merged by size tiers with the smaller segments, so its cost does
 * not grow with the table's age, the walk (ice_dl_files) never needs an
 * expired snapshot and the metadata stays bounded. No file is deleted
 * here: vacuum removes what became unreachable (merged segments too). */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dead_letters.h"
#include "fsio.h"
#include "maint.h"
#include "manifest.h"
#include "snapshot_files.h"

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

static int add_id(id_set *k, int64_t id) {
    if (is_kept(k, id))
        return 0;
    if (k->n == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 16;
        int64_t *ids = realloc(k->ids, cap * sizeof *ids);
        if (!ids)
            return -1;
        k->ids = ids;
        k->cap = cap;
    }
    k->ids[k->n++] = id;
    return 0;
}

/* Keeps SNAP and its ancestors, N snapshots at most (N bounds a parent
 * cycle in a corrupt file too). 0 or -1 out of memory. */
static int keep_chain(id_set *k, json_t *meta, json_t *snap, size_t n) {
    for (size_t i = 0; snap && i < n; i++) {
        if (add_id(k, ice_json_int(snap, "snapshot-id", -1)) != 0)
            return -1;
        int64_t parent = ice_json_int(snap, "parent-snapshot-id", -1);
        snap = parent >= 0 ? ice_meta_snapshot(meta, parent) : NULL;
    }
    return 0;
}

/* The snapshots the dead-letter walk (ice_dl_files) visits: the current
 * one and its ancestors while META holds them; with KEPT, while they are
 * kept (the walk once the others are dropped). 0 or -1 out of memory. */
static int walk_chain(id_set *w, json_t *meta, const id_set *kept) {
    json_t *snap = ice_meta_current_snapshot(meta);
    size_t guard = json_array_size(json_object_get(meta, "snapshots"));
    for (size_t i = 0; snap && i <= guard; i++) {
        int64_t id = ice_json_int(snap, "snapshot-id", -1);
        if ((kept && !is_kept(kept, id)) || add_id(w, id) != 0)
            return kept && !is_kept(kept, id) ? 0 : -1;
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

/* The files of the snapshots the walk reaches before the drop and no
 * longer after it (the dropped ones and those kept only for a ref), in
 * the metadata's order: each leaves the walk once, so it enters the index
 * once, without reading the index. 0 or -1 out of memory. */
static int leaving(json_t *meta, const id_set *kept, ib_buf *lines) {
    id_set before = {0}, after = {0};
    int rc = walk_chain(&before, meta, NULL);
    if (rc == 0)
        rc = walk_chain(&after, meta, kept);
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(meta, "snapshots"), i, s) {
        const char *rel = json_string_value(
            json_object_get(json_object_get(s, "summary"), ICE_DL_FILE_KEY));
        int64_t id = ice_json_int(s, "snapshot-id", -1);
        if (rc == 0 && rel && is_kept(&before, id) && !is_kept(&after, id)) {
            ib_buf_str(lines, rel);
            ib_buf_byte(lines, '\n');
        }
    }
    free(before.ids);
    free(after.ids);
    return rc == 0 && ib_buf_ok(lines) ? 0 : -1;
}

/* A segment's path relative to the table, as long as the readers take
 * (ice_dl_files): another writer's or a hand-made name may be longer than
 * ours, and an expiry that could not hold it would fail every commit. */
#define SEGMENT_PATH_MAX 4096

/* The index's segments as the property lists them. */
typedef struct segments {
    char (*rel)[SEGMENT_PATH_MAX];
    int64_t *bytes;
    unsigned char *merge;
    size_t n;
} segments;

static void segments_free(segments *g) {
    free(g->rel);
    free(g->bytes);
    free(g->merge);
}

static int segments_load(json_t *meta, segments *g, char *why,
                         size_t why_size) {
    const char *p = json_string_value(
        json_object_get(json_object_get(meta, "properties"), ICE_DL_INDEX_KEY));
    size_t cap = 1;
    for (const char *c = p; c && *c; c++)
        cap += *c == ' ';
    g->rel = malloc(cap * sizeof *g->rel);
    g->bytes = malloc(cap * sizeof *g->bytes);
    g->merge = malloc(cap);
    if (!g->rel || !g->bytes || !g->merge) {
        snprintf(why, why_size, "out of memory (dead-letter index)");
        return -1;
    }
    int more;
    while (p && g->n < cap &&
           (more = ice_dl_index_next(&p, g->rel[g->n], sizeof g->rel[0],
                                     &g->bytes[g->n])) != 0) {
        if (more < 0) {
            snprintf(why, why_size, "%s: a path too long", ICE_DL_INDEX_KEY);
            return -1;
        }
        g->n++;
    }
    return 0;
}

/* A table written before segments: its index (a bare path) listed a
 * snapshot kept for a ref at once, while the walk could still reach it;
 * LINES (a file each) keeps those that index does not hold, so the file
 * is not listed twice. 0 or -1 with why. */
static int drop_listed(const ice_table *t, const segments *g, ib_buf *lines,
                       char *why, size_t why_size) {
    for (size_t i = 0; i < g->n; i++) {
        uint8_t *data;
        size_t len, at = 0, out = 0;
        if (g->bytes[i] >= 0)
            continue;
        if (ice_table_read(t, g->rel[i], &data, &len, why, why_size) != 0)
            return -1;
        while (at < lines->len) {
            char *line = (char *)lines->p + at;
            size_t n =
                (size_t)((char *)memchr(line, '\n', lines->len - at) - line) +
                1;
            uint8_t *hit = memmem(data, len, line, n);
            if (!hit || (hit != data && hit[-1] != '\n')) {
                memmove(lines->p + out, line, n); /* not listed: kept */
                out += n;
            }
            at += n;
        }
        lines->len = out;
        free(data);
    }
    return 0;
}

/* The new segment's text: the segments merged into it (their lines as
 * they are), then LINES. 0 or -1 with why. */
static int segment_text(const ice_table *t, const segments *g,
                        const ib_buf *lines, ib_buf *text, char *why,
                        size_t why_size) {
    for (size_t i = 0; i < g->n; i++) {
        if (!g->merge[i])
            continue;
        uint8_t *data;
        size_t len;
        if (ice_table_read(t, g->rel[i], &data, &len, why, why_size) != 0)
            return -1;
        ib_buf_add(text, data, len);
        free(data);
    }
    ib_buf_add(text, lines->p, lines->len);
    if (!ib_buf_ok(text)) {
        snprintf(why, why_size, "out of memory (dead-letter index)");
        return -1;
    }
    return 0;
}

/* The property naming the segments not merged, then the new one. */
static json_t *segments_value(const segments *g, const char *rel,
                              size_t bytes) {
    ib_buf v = {0};
    char size[32];
    for (size_t i = 0; i < g->n; i++) {
        if (g->merge[i])
            continue;
        ib_buf_str(&v, g->rel[i]); /* a bare path: an older index */
        if (g->bytes[i] >= 0) {
            snprintf(size, sizeof size, ":%lld", (long long)g->bytes[i]);
            ib_buf_str(&v, size);
        }
        ib_buf_byte(&v, ' ');
    }
    snprintf(size, sizeof size, ":%zu", bytes);
    ib_buf_str(&v, rel);
    ib_buf_str(&v, size);
    json_t *s = ib_buf_ok(&v) ? json_stringn((const char *)v.p, v.len) : NULL;
    ib_buf_free(&v);
    return s;
}

/* A new segment file: its path into path (4096 bytes). Durable with the
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

/* The dead-letter index after the drop: when files leave the walk, one
 * new segment holding them, merged by size tiers (ice_tiers_to_merge)
 * with the smaller segments, so an expiry writes a bounded number of
 * lines (amortized: each line once per tier) however old the table is.
 * index_path: the new segment, "" when none. 0 or -1 with why. */
static int index_update(const ice_table *t, json_t *meta, const id_set *kept,
                        char *index_path, char *why, size_t why_size) {
    ib_buf lines = {0}, text = {0};
    segments g = {0};
    char rel[256];
    int rc = leaving(meta, kept, &lines);
    if (rc != 0)
        snprintf(why, why_size, "out of memory (dead-letter index)");
    if (rc != 0 || lines.len == 0) {
        ib_buf_free(&lines);
        return rc;
    }
    rc = segments_load(meta, &g, why, why_size);
    if (rc == 0)
        rc = drop_listed(t, &g, &lines, why, why_size);
    if (rc == 0 && lines.len == 0) {
        segments_free(&g);
        ib_buf_free(&lines);
        return 0; /* every file already listed */
    }
    if (rc == 0) {
        ice_tiers_to_merge(g.bytes, g.n, (int64_t)lines.len,
                           ICE_DL_SEGMENT_FROZEN, g.merge);
        rc = segment_text(t, &g, &lines, &text, why, why_size);
    }
    if (rc == 0)
        rc = write_index(t, &text, index_path, rel, sizeof rel, why, why_size);
    json_t *value = rc == 0 ? segments_value(&g, rel, text.len) : NULL;
    if (rc == 0 &&
        (!value || json_object_set_new(json_object_get(meta, "properties"),
                                       ICE_DL_INDEX_KEY, value) != 0)) {
        snprintf(why, why_size, "out of memory (metadata)");
        rc = -1;
    }
    segments_free(&g);
    ib_buf_free(&lines);
    ib_buf_free(&text);
    return rc;
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
    id_set kept = {0};
    int rc = keep_chain(&kept, meta, ice_meta_current_snapshot(meta), keep);
    if (rc == 0)
        rc = keep_refs(&kept, meta, keep);
    if (rc != 0) {
        free(kept.ids);
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    /* The index first: it needs the snapshots the walk reaches now. */
    rc = index_update(t, meta, &kept, index_path, why, why_size);
    if (rc == 0) {
        *removed = filter(snaps, &kept);
        filter(json_object_get(meta, "snapshot-log"), &kept);
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
