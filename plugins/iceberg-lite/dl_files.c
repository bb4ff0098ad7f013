/* Where a table's dead letters are (see dead_letters.h). The walk reads
 * the index first: `expire` moves the dead-letter files of the snapshots
 * it removes into a new index segment (one relative path a line) and names
 * it in a table property beside the older segments, so dropping snapshots
 * never hides dead letters and the walk never needs an expired
 * snapshot. */
#define _GNU_SOURCE /* memrchr */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dead_letters.h"
#include "fsio.h"
#include "table_meta.h"

/* fn(ctx, rel) for a dead-letter file inside the table; -1 with why for
 * one the metadata names outside it (never handed on, so no caller reads
 * or deletes it). */
static int confined(const char *root, const char *rel, ice_dl_file_fn fn,
                    void *ctx, char *why, size_t why_size) {
    char path[4096];
    if (ice_path_in(root, rel, path, sizeof path, why, why_size) != 0)
        return -1;
    return fn(ctx, rel);
}

static int walk_index(const char *root, const char *rel, ice_dl_file_fn fn,
                      void *ctx, char *why, size_t why_size) {
    char path[4096];
    uint8_t *data;
    size_t len;
    if (ice_path_in(root, rel, path, sizeof path, why, why_size) != 0)
        return -1;
    int rc = fs_read_all(path, &data, &len, why, why_size);
    if (rc == 1)
        snprintf(why, why_size, "dead-letter index %s is missing", path);
    if (rc != 0)
        return -1;
    char *p = (char *)data, *end = p + len;
    rc = 0;
    while (rc == 0 && p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            snprintf(why, why_size, "%s: the last line is not complete", path);
            rc = -1;
            break;
        }
        *nl = '\0';
        if (*p)
            rc = confined(root, p, fn, ctx, why, why_size);
        p = nl + 1;
    }
    free(data);
    return rc;
}

int ice_dl_index_next(const char **p, char *rel, size_t rel_size,
                      int64_t *bytes) {
    const char *s = *p + strspn(*p, " ");
    size_t n = strcspn(s, " ");
    if (n == 0)
        return 0;
    *p = s + n;
    /* ":BYTES" ends a segment; a path without it is an older index. */
    const char *colon = memrchr(s, ':', n);
    size_t digits = colon ? (size_t)(s + n - colon - 1) : 0;
    *bytes = -1;
    if (digits > 0 && digits < 19 &&
        strspn(colon + 1, "0123456789") >= digits) {
        *bytes = 0;
        for (size_t i = 0; i < digits; i++)
            *bytes = *bytes * 10 + (colon[1 + i] - '0');
        n = (size_t)(colon - s);
    }
    if (n >= rel_size)
        return -1;
    memcpy(rel, s, n);
    rel[n] = '\0';
    return 1;
}

int ice_dl_index_each(const char *root, json_t *meta, ice_dl_file_fn fn,
                      void *ctx, char *why, size_t why_size) {
    const char *p = json_string_value(
        json_object_get(json_object_get(meta, "properties"), ICE_DL_INDEX_KEY));
    char seg[4096];
    int64_t bytes;
    int rc;
    while (p && (rc = ice_dl_index_next(&p, seg, sizeof seg, &bytes)) != 0) {
        if (rc < 0) {
            snprintf(why, why_size, "%s: a path too long", ICE_DL_INDEX_KEY);
            return -1;
        }
        rc =
            root ? walk_index(root, seg, fn, ctx, why, why_size) : fn(ctx, seg);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The walk's files (the current snapshot's and its ancestors'), and which
 * of them the index lists too: main set back to a snapshot that expiry had
 * taken off the walk (kept for a tag) finds its file in a segment and on
 * the walk again. One file, handed on once. */
typedef struct walk_files {
    const char **rel;
    unsigned char *indexed;
    size_t n;
    ice_dl_file_fn fn;
    void *ctx;
} walk_files;

static int index_line(void *ctx, const char *rel) {
    walk_files *w = ctx;
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->rel[i], rel) == 0)
            w->indexed[i] = 1;
    return w->fn(w->ctx, rel);
}

int ice_dl_files(const char *root, json_t *meta, ice_dl_file_fn fn, void *ctx,
                 char *why, size_t why_size) {
    /* The guard stops a parent cycle in a corrupt file. */
    size_t guard = json_array_size(json_object_get(meta, "snapshots"));
    walk_files w = {calloc(guard + 1, sizeof *w.rel), calloc(guard + 1, 1), 0,
                    fn, ctx};
    if (!w.rel || !w.indexed) {
        free(w.rel);
        free(w.indexed);
        snprintf(why, why_size, "out of memory (dead-letter files)");
        return -1;
    }
    json_t *snap = ice_meta_current_snapshot(meta);
    for (size_t k = 0; snap && k <= guard; k++) {
        const char *rel = json_string_value(
            json_object_get(json_object_get(snap, "summary"), ICE_DL_FILE_KEY));
        if (rel)
            w.rel[w.n++] = rel;
        int64_t parent = ice_json_int(snap, "parent-snapshot-id", -1);
        snap = parent >= 0 ? ice_meta_snapshot(meta, parent) : NULL;
    }
    int rc = ice_dl_index_each(root, meta, index_line, &w, why, why_size);
    for (size_t i = 0; rc == 0 && i < w.n; i++)
        if (!w.indexed[i])
            rc = confined(root, w.rel[i], fn, ctx, why, why_size);
    free(w.rel);
    free(w.indexed);
    return rc;
}
