/* A batch's effects as files: rows into Parquet data files (rolled at the
 * target file size), dead letters into their side file. Each file is new
 * (never overwritten) and written without its own fsync: the commit's one
 * barrier (syncfs in ice_meta_stage) makes it and its directory entry
 * durable before any metadata naming it is linked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsio.h"
#include "ice_sink.h"

/* One record into the writer: mapped values, then the coordinates. */
static void put_record(ice_sink *s, pq_writer *w, const tm_record *r,
                       const tm_range *g) {
    const tm_sink_config *c = s->config;
    for (size_t k = 0; k < c->ncolumns; k++) {
        const tm_column *col = TM_CELEM(tm_column, c->columns, k);
        const tm_value *v = TM_CELEM(tm_value, r->values, k);
        if (v->is_null) {
            pq_put_null(w, k);
            continue;
        }
        switch (col->type) {
        case TM_TYPE_INT:
        case TM_TYPE_TIMESTAMP: pq_put_i64(w, k, v->v.i); break;
        case TM_TYPE_BOOL: pq_put_i64(w, k, v->v.i != 0); break;
        case TM_TYPE_FLOAT: pq_put_double(w, k, v->v.f); break;
        case TM_TYPE_TEXT:
        case TM_TYPE_JSON:
        case TM_TYPE_BYTES:
            pq_put_bytes(w, k, v->v.s.ptr ? v->v.s.ptr : "", v->v.s.len);
            break;
        }
    }
    size_t h = c->ncolumns;
    pq_put_bytes(w, h, g->topic, strlen(g->topic));
    pq_put_i64(w, h + 1, g->partition);
    pq_put_i64(w, h + 2, r->offset);
    pq_end_row(w);
}

static tm_status add_file(ice_written *w, const char *uri, int64_t records,
                          size_t size, int64_t snapshot_id) {
    ice_datafile *f = realloc(w->files, (w->nfiles + 1) * sizeof *f);
    if (!f)
        return TM_RETRY;
    w->files = f;
    f = &w->files[w->nfiles];
    memset(f, 0, sizeof *f);
    if (!(f->path = strdup(uri)))
        return TM_RETRY;
    w->nfiles++;
    f->records = records;
    f->size = (int64_t)size;
    f->snapshot_id = snapshot_id;
    return TM_OK;
}

/* Finishes the open Parquet writer into a new file under data/. */
static tm_status flush_file(ice_sink *s, pq_writer *pw, int64_t snapshot_id,
                            ice_written *w, tm_error *err) {
    ib_buf file = {0};
    const char *kv[] = {"iceberg.schema", s->schema_json};
    int64_t records = pq_rows(pw);
    if (pq_finish(pw, kv, 1, &file) != 0) {
        s->host->set_error(err, "Parquet encoder: %s", pq_error(pw));
        ib_buf_free(&file);
        return strstr(pq_error(pw), "memory") ? TM_RETRY : TM_FATAL;
    }
    char uuid[37], rel[128], path[4096], uri[4200], why[512];
    if (fs_uuid(uuid) != 0) {
        ib_buf_free(&file);
        s->host->set_error(err, "no random bytes for a file name");
        return TM_RETRY;
    }
    snprintf(rel, sizeof rel, "%lld-%zu-%s.parquet", (long long)snapshot_id,
             w->nfiles, uuid);
    snprintf(path, sizeof path, "%s/%s", s->table.data_dir, rel);
    snprintf(uri, sizeof uri, "file://%s", path);
    int rc = fs_write_new(path, file.p, file.len, 0, why, sizeof why);
    size_t size = file.len;
    ib_buf_free(&file);
    if (rc != 0) {
        s->host->set_error(err, "data file: %s", why);
        return TM_RETRY;
    }
    if (add_file(w, uri, records, size, snapshot_id) != TM_OK) {
        unlink(path);
        s->host->set_error(err, "out of memory");
        return TM_RETRY;
    }
    return TM_OK;
}

static tm_status write_rows(ice_sink *s, const tm_batch *b, int64_t snapshot_id,
                            ice_written *w, tm_error *err) {
    pq_writer *pw = NULL;
    tm_status r = TM_OK;
    for (size_t j = 0; r == TM_OK && j < b->nrecords; j++) {
        const tm_record *rec = TM_CELEM(tm_record, b->records, j);
        const tm_range *g = TM_CELEM(tm_range, b->ranges, rec->range);
        if (!pw) {
            if (!(pw = pq_writer_new(s->cols, s->ncols, 0, 0))) {
                s->host->set_error(err, "out of memory (Parquet writer)");
                return TM_RETRY;
            }
            pq_writer_set_codec(pw, s->set.compression);
        }
        put_record(s, pw, rec, g);
        w->rows[rec->range]++;
        if (pq_size(pw) >= (size_t)s->set.target_file_size) {
            r = flush_file(s, pw, snapshot_id, w, err);
            pq_writer_free(pw);
            pw = NULL;
        }
    }
    if (r == TM_OK && pw)
        r = flush_file(s, pw, snapshot_id, w, err);
    pq_writer_free(pw);
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
