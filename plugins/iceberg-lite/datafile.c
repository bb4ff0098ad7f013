/* A batch's effects as files: rows into Parquet data files, one file per
 * partition tuple the rows fall in (each rolled at the target file size),
 * dead letters into their side file. Each file is new
 * (never overwritten) and written without its own fsync: the commit's one
 * barrier (syncfs in ice_meta_stage) makes it and its directory entry
 * durable before any metadata naming it is linked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_out.h"
#include "fsio.h"
#include "ice_sink.h"

/* A record as cells, one per schema column: the mapped values, then the
 * coordinates. Byte values point into the batch. */
static void record_cells(const ice_sink *s, const tm_record *r,
                         const tm_range *g, pq_cell *cells) {
    const tm_sink_config *c = s->config;
    for (size_t k = 0; k < c->ncolumns; k++) {
        const tm_column *col = TM_CELEM(tm_column, c->columns, k);
        const tm_value *v = TM_CELEM(tm_value, r->values, k);
        pq_cell *x = &cells[k];
        memset(x, 0, sizeof *x);
        x->is_null = v->is_null;
        if (v->is_null)
            continue;
        switch (col->type) {
        case TM_TYPE_INT:
        case TM_TYPE_TIMESTAMP: x->i = v->v.i; break;
        case TM_TYPE_BOOL: x->i = v->v.i != 0; break;
        case TM_TYPE_FLOAT: x->f = v->v.f; break;
        case TM_TYPE_TEXT:
        case TM_TYPE_JSON:
        case TM_TYPE_BYTES:
            x->p = (const uint8_t *)(v->v.s.ptr ? v->v.s.ptr : "");
            x->n = v->v.s.len;
            break;
        }
    }
    size_t h = c->ncolumns;
    cells[h] = (pq_cell){.p = (const uint8_t *)g->topic, .n = strlen(g->topic)};
    cells[h + 1] = (pq_cell){.i = g->partition};
    cells[h + 2] = (pq_cell){.i = r->offset};
}

/* The files a batch has open: one per partition tuple its rows fall in
 * (a file never mixes two partitions), found by a hash of the tuple's
 * bytes so that a batch over many partitions stays linear. */
typedef struct open_files {
    ice_out *o;
    size_t n, cap;
    size_t *slot; /* open addressing: index + 1 into o, 0 empty */
    size_t nslot; /* a power of two, at least 2 * cap */
} open_files;

static size_t slot_of(const open_files *of, const uint8_t *p, size_t n) {
    size_t i = ice_murmur3_32(p, n) & (of->nslot - 1);
    while (of->slot[i]) {
        const ice_out *o = &of->o[of->slot[i] - 1];
        if (o->part_len == n && (n == 0 || memcmp(o->part, p, n) == 0))
            break;
        i = (i + 1) & (of->nslot - 1);
    }
    return i;
}

/* Room for one more file: 0, or -1 out of memory. */
static int grow(open_files *of) {
    if (of->n < of->cap)
        return 0;
    size_t nc = of->cap ? 2 * of->cap : 4;
    ice_out *g = realloc(of->o, nc * sizeof *g);
    size_t *slot = calloc(4 * nc, sizeof *slot);
    if (g)
        of->o = g;
    if (!g || !slot) {
        free(slot);
        return -1;
    }
    free(of->slot);
    of->slot = slot;
    of->nslot = 4 * nc;
    of->cap = nc;
    for (size_t k = 0; k < of->n; k++)
        of->slot[slot_of(of, of->o[k].part, of->o[k].part_len)] = k + 1;
    return 0;
}

/* Finishes o into a new data file recorded in w. */
static tm_status flush_file(ice_sink *s, ice_out *o, int64_t snapshot_id,
                            ice_written *w, tm_error *err) {
    ice_datafile *f = realloc(w->files, (w->nfiles + 1) * sizeof *f);
    if (!f) {
        s->host->set_error(err, "out of memory");
        return TM_RETRY;
    }
    w->files = f;
    char why[512];
    int rc = ice_out_finish(o, s->table.data_dir, s->schema_json, snapshot_id,
                            w->nfiles, &w->files[w->nfiles], why, sizeof why);
    if (rc != 0) {
        s->host->set_error(err, "data file: %s", why);
        return rc == -2 ? TM_FATAL : TM_RETRY;
    }
    w->nfiles++;
    return TM_OK;
}

/* The open file of partition tuple part, opened when there is none. */
static ice_out *file_for(ice_sink *s, open_files *of, const ib_buf *part) {
    if (grow(of) != 0)
        return NULL;
    size_t i = slot_of(of, part->p, part->len);
    if (of->slot[i])
        return &of->o[of->slot[i] - 1];
    ice_out *o = &of->o[of->n];
    if (ice_out_open(o, s->cols, s->ncols, s->set.compression, part->p,
                     part->len) != 0)
        return NULL;
    of->slot[i] = ++of->n;
    return o;
}

/* Finishes the open file o and opens the next of its partition (the
 * same tuple, the same slot). */
static tm_status roll(ice_sink *s, ice_out *o, int64_t snapshot_id,
                      ice_written *w, tm_error *err) {
    ice_out next;
    if (ice_out_open(&next, s->cols, s->ncols, s->set.compression, o->part,
                     o->part_len) != 0) {
        s->host->set_error(err, "out of memory (Parquet writer)");
        return TM_RETRY;
    }
    tm_status r = flush_file(s, o, snapshot_id, w, err);
    ice_out_free(o);
    *o = next;
    return r;
}

static tm_status write_rows(ice_sink *s, const tm_batch *b, int64_t snapshot_id,
                            ice_written *w, tm_error *err) {
    open_files of = {0};
    ib_buf part = {0};
    pq_cell *cells = calloc(s->ncols, sizeof *cells);
    tm_status r = cells ? TM_OK : TM_RETRY;
    if (!cells)
        s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
    for (size_t j = 0; r == TM_OK && j < b->nrecords; j++) {
        const tm_record *rec = TM_CELEM(tm_record, b->records, j);
        const tm_range *g = TM_CELEM(tm_range, b->ranges, rec->range);
        record_cells(s, rec, g, cells);
        part.len = 0;
        ice_partition_encode(&s->spec, cells, &part);
        ice_out *o = ib_buf_ok(&part) ? file_for(s, &of, &part) : NULL;
        if (!o) {
            s->host->set_error(err, "out of memory (Parquet writer)");
            r = TM_RETRY;
            break;
        }
        ice_put_row(o->pw, o->m, cells);
        w->rows[rec->range]++;
        if (pq_size(o->pw) >= (size_t)s->set.target_file_size)
            r = roll(s, o, snapshot_id, w, err);
    }
    /* In the order the partitions first came (file names number them). */
    for (size_t i = 0; i < of.n; i++) {
        if (r == TM_OK && pq_rows(of.o[i].pw) > 0)
            r = flush_file(s, &of.o[i], snapshot_id, w, err);
        ice_out_free(&of.o[i]);
    }
    free(of.o);
    free(of.slot);
    free(cells);
    ib_buf_free(&part);
    return r;
}

static tm_status write_dead_letters(ice_sink *s, const tm_batch *b,
                                    int64_t snapshot_id, ice_written *w,
                                    tm_error *err) {
    if (b->ndead_letters == 0)
        return TM_OK;
    ib_buf text = {0};
    char uuid[37], why[512];
    if (ice_dl_encode(b, &text) != 0 || fs_uuid(uuid) != 0) {
        ib_buf_free(&text);
        s->host->set_error(err, "out of memory (dead letters)");
        return TM_RETRY;
    }
    for (size_t j = 0; j < b->ndead_letters; j++)
        w->dls[TM_CELEM(tm_dead_letter, b->dead_letters, j)->range]++;
    snprintf(w->dl_rel, sizeof w->dl_rel, "dead_letters/%lld-%s.jsonl",
             (long long)snapshot_id, uuid);
    snprintf(w->dl_path, sizeof w->dl_path, "%s/%s", s->table.root, w->dl_rel);
    int rc = fs_write_new(w->dl_path, text.p, text.len, 0, why, sizeof why);
    ib_buf_free(&text);
    if (rc != 0) {
        w->dl_path[0] = w->dl_rel[0] = '\0';
        s->host->set_error(err, "dead letters: %s", why);
        return TM_RETRY;
    }
    return TM_OK;
}

tm_status ice_write_effects(ice_sink *s, const tm_batch *b, int64_t snapshot_id,
                            ice_written *w, tm_error *err) {
    size_t n = b->nranges ? b->nranges : 1;
    memset(w, 0, sizeof *w);
    w->rows = calloc(2 * n, sizeof *w->rows);
    if (!w->rows) {
        s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
        return TM_RETRY;
    }
    w->dls = w->rows + n;
    tm_status r = write_rows(s, b, snapshot_id, w, err);
    if (r == TM_OK)
        r = write_dead_letters(s, b, snapshot_id, w, err);
    if (r != TM_OK)
        ice_written_discard(w);
    return r;
}

void ice_written_discard(ice_written *w) {
    for (size_t i = 0; i < w->nfiles; i++) {
        const char *p = ice_uri_path(w->files[i].path);
        if (p)
            unlink(p); /* never published: nobody else refers to it */
    }
    if (w->dl_path[0])
        unlink(w->dl_path);
    ice_datafiles_free(w->files, w->nfiles);
    w->files = NULL;
    w->nfiles = 0;
    w->dl_path[0] = w->dl_rel[0] = '\0';
}

void ice_written_free(ice_written *w) {
    ice_datafiles_free(w->files, w->nfiles);
    free(w->rows);
    memset(w, 0, sizeof *w);
}
