/* Read-back for the kit and `tidemark verify`: a partition's rows (the
 * hidden _tm_* columns of the current snapshot's data files, read with our
 * own Parquet reader, and the mapped columns' values) and its dead letters
 * (the side files of ice_dl_files), in offset order. Read-only: one
 * loaded metadata version is one consistent snapshot.
 *
 * The coordinates of every item are gathered first; scan_emit.c sorts
 * them and reads each data file's values once, only when the reader wants
 * them (scan_values.h), so memory holds the files whose rows are being
 * emitted, not the table's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "ice_sink.h"
#include "parquet_reader.h"
#include "scan_emit.h"

typedef struct scan_ctx {
    const char *topic;
    int32_t partition;
    ice_scan_item *items;
    size_t n, cap;
    int oom;
    /* per data file: which rows are ours */
    uint8_t *match;
    int64_t nrows;
    size_t file; /* the data file being read */
} scan_ctx;

static int add_item(scan_ctx *c, int64_t offset, int64_t row, tm_item_kind kind,
                    tm_dl_reason reason, const char *detail) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        ice_scan_item *g = realloc(c->items, cap * sizeof *g);
        if (!g) {
            c->oom = 1;
            return -1;
        }
        c->items = g;
        c->cap = cap;
    }
    ice_scan_item *it = &c->items[c->n];
    it->offset = offset;
    it->file = c->file;
    it->row = row;
    it->kind = kind;
    it->reason = reason;
    it->detail = detail ? strdup(detail) : NULL;
    if (detail && !it->detail) {
        c->oom = 1;
        return -1;
    }
    c->n++;
    return 0;
}

static int on_topic(void *ctx, int64_t row, const pq_cell *cell) {
    scan_ctx *c = ctx;
    if (row >= c->nrows)
        return -1;
    c->match[row] = !cell->is_null && cell->n == strlen(c->topic) &&
                    memcmp(cell->p, c->topic, cell->n) == 0;
    return 0;
}

static int on_partition(void *ctx, int64_t row, const pq_cell *cell) {
    scan_ctx *c = ctx;
    if (row >= c->nrows)
        return -1;
    if (cell->is_null || cell->i != c->partition)
        c->match[row] = 0;
    return 0;
}

static int on_offset(void *ctx, int64_t row, const pq_cell *cell) {
    scan_ctx *c = ctx;
    if (row >= c->nrows)
        return -1;
    if (c->match[row] && !cell->is_null)
        return add_item(c, cell->i, row, TM_ITEM_ROW, (tm_dl_reason)0, NULL);
    return 0;
}

static int scan_file(scan_ctx *c, const char *uri, char *why, size_t size) {
    const char *path = ice_uri_path(uri);
    uint8_t *data;
    size_t len;
    if (!path) {
        snprintf(why, size, "%s: not a local file", uri);
        return -1;
    }
    int rc = fs_read_all(path, &data, &len, why, size);
    if (rc == 1)
        snprintf(why, size, "data file %s is missing", path);
    if (rc != 0)
        return -1;
    pq_reader *r = pq_reader_open(data, len, why, size);
    rc = r ? 0 : -1;
    int ct = r ? pq_reader_find(r, ICE_HIDDEN_PREFIX "topic") : -1;
    int cp = r ? pq_reader_find(r, ICE_HIDDEN_PREFIX "partition") : -1;
    int co = r ? pq_reader_find(r, ICE_HIDDEN_PREFIX "offset") : -1;
    if (r && (ct < 0 || cp < 0 || co < 0)) {
        snprintf(why, size, "%s: no hidden coordinate columns", path);
        rc = -1;
    }
    if (rc == 0) {
        c->nrows = pq_reader_rows(r);
        c->match = calloc(c->nrows > 0 ? (size_t)c->nrows : 1, 1);
        if (!c->match) {
            snprintf(why, size, "out of memory");
            rc = -1;
        }
    }
    if (rc == 0 &&
        (pq_reader_column(r, (size_t)ct, on_topic, c, why, size) != 0 ||
         pq_reader_column(r, (size_t)cp, on_partition, c, why, size) != 0 ||
         pq_reader_column(r, (size_t)co, on_offset, c, why, size) != 0)) {
        if (c->oom)
            snprintf(why, size, "out of memory");
        rc = -1;
    }
    free(c->match);
    c->match = NULL;
    pq_reader_free(r);
    free(data);
    return rc;
}

static int on_dead_letter(void *ctx, const char *topic, int32_t partition,
                          int64_t offset, tm_dl_reason reason,
                          const char *detail) {
    scan_ctx *c = ctx;
    if (partition != c->partition || strcmp(topic, c->topic) != 0)
        return 0;
    return add_item(c, offset, -1, TM_ITEM_DEAD_LETTER, reason, detail);
}

typedef struct dl_walk {
    ice_sink *s;
    scan_ctx *c;
    char *why;
    size_t size;
} dl_walk;

static int on_dl_file(void *ctx, const char *rel) {
    dl_walk *w = ctx;
    char path[4096];
    if (ice_table_path(&w->s->table, rel, path, sizeof path, w->why, w->size) !=
        0)
        return -1;
    return ice_dl_read(path, on_dead_letter, w->c, w->why, w->size) != 0 ? -1
                                                                         : 0;
}

/* The table's dead-letter files (the expired snapshots' index, the current
 * snapshot and its ancestors). */
static int scan_dead_letters(ice_sink *s, scan_ctx *c, char *why, size_t size) {
    dl_walk w = {s, c, why, size};
    return ice_dl_files(s->table.root, s->table.meta, on_dl_file, &w, why,
                        size) != 0
               ? -1
               : 0;
}

tm_status ice_scan(void *sink, const char *topic, int32_t partition,
                   void *emit_ctx, tm_error *err) {
    ice_sink *s = sink;
    tm_status r = ice_refresh(s, err);
    if (r != TM_OK)
        return r;
    scan_ctx c = {.topic = topic, .partition = partition};
    ice_mfile *mf = NULL;
    ice_datafile *files = NULL;
    size_t nmf = 0, nfiles = 0;
    char why[512];
    int rc = ice_snapshot_manifests(&s->table,
                                    ice_meta_current_snapshot(s->table.meta),
                                    &mf, &nmf, why, sizeof why);
    if (rc == 0)
        rc = ice_manifests_files(&s->table, mf, nmf, &files, &nfiles, why,
                                 sizeof why);
    for (c.file = 0; rc == 0 && c.file < nfiles; c.file++)
        rc = scan_file(&c, files[c.file].path, why, sizeof why);
    if (rc == 0)
        rc = scan_dead_letters(s, &c, why, sizeof why);
    if (rc == 0 && c.oom) {
        snprintf(why, sizeof why, "out of memory");
        rc = -1;
    }
    if (rc == 0) {
        rc = ice_scan_emit(s->host, s->config, c.items, c.n, files, nfiles,
                           topic, partition, emit_ctx, why, sizeof why);
    }
    if (rc != 0) {
        s->host->set_error(err, "scan %s[%d]: %s", topic, (int)partition, why);
        r = TM_FATAL;
    }
    for (size_t i = 0; i < c.n; i++)
        free(c.items[i].detail);
    free(c.items);
    ice_mfiles_free(mf, nmf);
    ice_datafiles_free(files, nfiles);
    return r;
}
