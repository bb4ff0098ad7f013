/* compact: the current snapshot's small data files rewritten into files
 * of up to the target size, partition by partition (a new file holds the
 * rows of one partition and carries its tuple, with fresh column
 * metrics), published as ONE snapshot of operation "replace". Its summary
 * carries every marker as read_markers sees it (ice_markers_carry), so a
 * connector's next commit finds the same markers. The rows are rewritten once,
 * before the publish loop; losing the race to a connector's append only
 * rebuilds the manifests on top of the winner (the replaced files are still
 * live: nothing else deletes files), so neither commit is lost. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_out.h"
#include "fsio.h"
#include "maint.h"
#include "marker_keys.h"
#include "snapshot_files.h"

typedef struct compact_ctx {
    ice_table *t;
    const ice_compact_opts *o;
    int64_t target, snapshot_id;
    ice_datafile *replaced, *written;
    size_t nreplaced, nwritten;
    int64_t rows, replaced_size;
    pq_column_def *cols;
    size_t ncols;
    char *schema_json;
    ice_out out;               /* the file being written */
    int open;                  /* ... when 1 */
    const ice_datafile *group; /* the partition of the files being read */
    ice_own own;               /* this attempt's manifests */
    int64_t written_ms;        /* ice_boot_ms, before the first new file */
    int more; /* stopped taking files at half the bound (rewrite) */
    char *why;
    size_t why_size;
} compact_ctx;

static int same_partition(const ice_datafile *a, const ice_datafile *b) {
    return a->part_len == b->part_len &&
           (a->part_len == 0 || memcmp(a->part, b->part, a->part_len) == 0);
}

/* Finishes the open file into a new data file. */
static int flush(compact_ctx *c) {
    ice_datafile *f = realloc(c->written, (c->nwritten + 1) * sizeof *f);
    if (!f) {
        snprintf(c->why, c->why_size, "out of memory");
        return -1;
    }
    c->written = f;
    /* No fsync of its own: the commit's barrier (ice_meta_stage). */
    int rc = ice_out_finish(&c->out, c->t->data_dir, c->schema_json,
                            c->snapshot_id, c->nwritten,
                            &c->written[c->nwritten], c->why, c->why_size);
    ice_out_free(&c->out);
    c->open = 0;
    if (rc != 0)
        return -1;
    c->nwritten++;
    return 0;
}

static int put_row(void *ctx, const pq_cell *cells, size_t n) {
    compact_ctx *c = ctx;
    if (n != c->ncols) {
        snprintf(c->why, c->why_size,
                 "a data file has %zu columns, the schema %zu", n, c->ncols);
        return -1;
    }
    /* A new file carries the partition tuple of the files it replaces:
     * every file of a group has the same one. */
    if (!c->open) {
        if (ice_out_open(&c->out, c->cols, c->ncols, c->o->codec,
                         c->group->part, c->group->part_len) != 0) {
            snprintf(c->why, c->why_size, "out of memory (Parquet writer)");
            return -1;
        }
        c->open = 1;
    }
    ice_put_row(c->out.pw, c->out.m, cells);
    if (pq_error(c->out.pw)[0]) {
        snprintf(c->why, c->why_size, "Parquet encoder: %s",
                 pq_error(c->out.pw));
        return -1;
    }
    c->rows++;
    return pq_size(c->out.pw) >= (size_t)c->target ? flush(c) : 0;
}

/* Half the bound has passed (on the publish check's boot clock, the test
 * stall included): a run takes no more input files, so that what it
 * rewrote is published in time however large the table. */
static int work_spent(const compact_ctx *c) {
    char why[256];
    return c->o->max_age_ms > 0 &&
           ice_publish_in_time(c->written_ms, c->o->max_age_ms / 2, why,
                               sizeof why) != 0;
}

/* Keeps in c->replaced only the files read (read[i]): the others stay
 * live, for the next run. */
static void keep_read(compact_ctx *c, const unsigned char *read) {
    size_t n = 0;
    c->replaced_size = 0;
    for (size_t i = 0; i < c->nreplaced; i++) {
        if (!read[i]) {
            ice_datafile_clear(&c->replaced[i]);
            continue;
        }
        c->replaced[n++] = c->replaced[i];
        c->replaced_size += c->replaced[i].size;
    }
    c->nreplaced = n;
    c->more = 1;
}

/* Reads the small files' rows into new files (durable at the commit's
 * barrier, before the link that names them), one partition at a time:
 * a new file never holds rows of two partitions. Past half the bound it
 * stops taking files (work_spent) at a partition's end, or once two of
 * the partition are read (a merge of fewer gains nothing). */
static int rewrite(compact_ctx *c) {
    unsigned char *read = calloc(c->nreplaced + 1, 1);
    size_t nread = 0;
    if (!read) {
        snprintf(c->why, c->why_size, "out of memory");
        return -1;
    }
    int rc = 0;
    for (size_t g = 0; rc == 0 && !c->more && g < c->nreplaced; g++) {
        size_t first = 0;
        while (!same_partition(&c->replaced[first], &c->replaced[g]))
            first++;
        if (first < g)
            continue; /* its partition was rewritten with an earlier file */
        c->group = &c->replaced[g];
        size_t in_group = 0;
        for (size_t i = g; rc == 0 && i < c->nreplaced; i++) {
            if (!same_partition(&c->replaced[i], c->group))
                continue;
            /* Past the bound already: the publish would be refused, so
             * stop reading (an operator's run over a large table learns
             * it now, not after rewriting all of it). */
            if (c->o->max_age_ms > 0 &&
                ice_publish_in_time(c->written_ms, c->o->max_age_ms, c->why,
                                    c->why_size) != 0) {
                rc = -1;
                break;
            }
            if ((in_group >= 2 || (in_group == 0 && nread > 0)) &&
                work_spent(c)) {
                keep_read(c, read);
                break;
            }
            if (c->o->stop && c->o->stop(c->o->stop_ctx)) {
                snprintf(c->why, c->why_size,
                         "%s: stopped (a stop, or the batch's deadline) "
                         "after rewriting %lld rows: nothing published",
                         c->t->root, (long long)c->rows);
                rc = -1;
                break;
            }
            if (ice_file_rows_as(c->replaced[i].path, c->cols, c->ncols,
                                 put_row, c, c->why, c->why_size) != 0) {
                rc = -1;
                break;
            }
            read[i] = 1;
            nread++;
            in_group++;
        }
        if (rc == 0 && c->open && flush(c) != 0)
            rc = -1;
    }
    free(read);
    return rc;
}

static int is_replaced(const compact_ctx *c, const char *path) {
    for (size_t i = 0; i < c->nreplaced; i++)
        if (strcmp(c->replaced[i].path, path) == 0)
            return 1;
    return 0;
}

static json_t *replace_summary(compact_ctx *c, json_t *meta,
                               const ice_datafile *files, size_t n) {
    int64_t rows = 0, size = 0, added_size = 0;
    int over = 0;
    for (size_t i = 0; i < n; i++)
        over |= ice_count_add(&rows, files[i].records) |
                ice_count_add(&size, files[i].size);
    for (size_t i = 0; i < c->nwritten; i++)
        over |= ice_count_add(&added_size, c->written[i].size);
    if (over)
        return NULL; /* a crafted manifest's counts: refused, not wrapped */
    json_t *sum = json_object();
    int bad =
        !sum ||
        json_object_set_new(sum, "operation", json_string("replace")) != 0 ||
        ice_sum_int(sum, "added-data-files", (int64_t)c->nwritten) ||
        ice_sum_int(sum, "deleted-data-files", (int64_t)c->nreplaced) ||
        ice_sum_int(sum, "added-records", c->rows) ||
        ice_sum_int(sum, "deleted-records", c->rows) ||
        ice_sum_int(sum, "added-files-size", added_size) ||
        ice_sum_int(sum, "removed-files-size", c->replaced_size) ||
        ice_sum_int(sum, "total-data-files", (int64_t)n) ||
        ice_sum_int(sum, "total-records", rows) ||
        ice_sum_int(sum, "total-files-size", size) ||
        ice_sum_int(sum, "total-delete-files", 0) ||
        ice_sum_int(sum, "total-position-deletes", 0) ||
        ice_sum_int(sum, "total-equality-deletes", 0) ||
        ice_markers_carry(meta, sum) != 0;
    if (bad) {
        json_decref(sum);
        return NULL;
    }
    return sum;
}

/* The new data files, this attempt's manifests and its staged metadata
 * are there, written in time for the link. */
static int check(void *ctx, const char *staged, char *why, size_t why_size) {
    compact_ctx *c = ctx;
    ice_pub_files f = {.data = c->written,
                       .ndata = c->nwritten,
                       .own = &c->own,
                       .more = {staged}};
    return ice_publish_check(&f, c->written_ms, c->o->max_age_ms, why,
                             why_size) != 0
               ? -1
               : 0;
}

static int build(ice_table *t, void *ctx, json_t **next, char *why,
                 size_t why_size) {
    compact_ctx *c = ctx;
    ice_own_drop(&c->own); /* a lost attempt's manifests */
    json_t *cur = ice_meta_current_snapshot(t->meta);
    ice_datafile *live = NULL;
    size_t nlive = 0, kept = 0;
    if (ice_snapshot_datafiles(t, cur, &live, &nlive, why, why_size) != 0)
        return -1;
    int rc = 0;
    /* Live files minus the replaced ones, plus the new ones. */
    ice_datafile *files = calloc(nlive + c->nwritten + 1, sizeof *files);
    if (!files) {
        snprintf(why, why_size, "out of memory");
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < nlive; i++)
        if (!is_replaced(c, live[i].path))
            files[kept++] = live[i];
    if (rc == 0 && nlive - kept != c->nreplaced) {
        snprintf(why, why_size,
                 "%s: another writer replaced some of the files being "
                 "compacted; run compact again",
                 t->root);
        rc = -1;
    }
    if (rc == 0) {
        memcpy(files + kept, c->written, c->nwritten * sizeof *files);
        size_t n = kept + c->nwritten;
        int64_t parent = ice_json_int(cur, "snapshot-id", -1);
        int64_t seq = ice_json_int(t->meta, "last-sequence-number", 0) + 1;
        char list_uri[4200];
        int64_t total_files, total_rows;
        rc = ice_write_snapshot_manifests(
            t, NULL, 0, files, n, c->snapshot_id, parent, seq, c->schema_json,
            &c->own, list_uri, &total_files, &total_rows, why, why_size);
        json_t *m = rc == 0 ? ice_meta_next(t) : NULL;
        json_t *sum = m ? replace_summary(c, t->meta, files, n) : NULL;
        /* The markers move here from the parent, as an append's do: a
         * parent that kept them could be rolled back to, and a claim made
         * since (a higher sequence number) would win over them, past rows
         * the rollback removed. */
        json_t *own =
            sum && parent >= 0 ? ice_meta_own_snapshot(m, parent) : NULL;
        if (sum && parent >= 0 &&
            (!own || ice_markers_move(own, c->snapshot_id) != 0)) {
            json_decref(sum);
            sum = NULL;
        }
        if (rc == 0 &&
            (!sum || ice_meta_add_snapshot(m, c->snapshot_id, parent, seq,
                                           list_uri, sum) != 0)) {
            json_decref(m);
            snprintf(why, why_size, "out of memory (metadata)");
            rc = -1;
        }
        if (rc == 0)
            *next = m;
    }
    free(files); /* entries borrowed from live and c->written */
    ice_datafiles_free(live, nlive);
    return rc;
}

/* The files to rewrite: the small ones, smallest first, while their
 * sizes sum to at most max_bytes (and, with similar_sizes, while the next
 * is at most twice those of its partition taken together: twice, as two
 * files of the same rows differ by a few bytes). A file is rewritten only
 * with at least half its size of new rows, so a row is rewritten about
 * log(target / batch) times;
 * letting a partition's big file join its one new small file (as the
 * first two files of the whole table once could) rewrote every row of
 * the partition at every batch: 29 000 rows for each batch of 50 in
 * crash.iceberg_catalog.kills, partitioned. take[i] set for each. Fewer
 * than min_files small files: none. */
static int fit_cap(const ice_compact_opts *o, const ice_datafile *live,
                   size_t nlive, unsigned char *take) {
    size_t *order = calloc(nlive + 1, sizeof *order), n = 0;
    if (!order)
        return -1;
    for (size_t i = 0; i < nlive; i++)
        if (live[i].size < o->small_below)
            order[n++] = i;
    /* Insertion sort by size: a snapshot has few small files (compaction
     * keeps it so) and this runs once per compaction. */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i;
             j > 0 && live[order[j]].size < live[order[j - 1]].size; j--) {
            size_t x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    int64_t sum = 0;
    for (size_t i = 0; n >= o->min_files && i < n; i++) {
        int64_t size = live[order[i]].size;
        if (size < 0 || size > o->max_bytes - sum)
            break; /* the rest are larger still */
        if (o->similar_sizes) {
            int64_t own = 0;
            size_t nown = 0;
            for (size_t k = 0; k < i; k++)
                if (take[order[k]] &&
                    same_partition(&live[order[k]], &live[order[i]])) {
                    own += live[order[k]].size;
                    nown++;
                }
            if (nown >= 1 && size / 2 > own)
                continue; /* its partition's rest are larger still */
        }
        sum += size;
        take[order[i]] = 1;
    }
    free(order);
    return 0;
}

/* Picks the current snapshot's small files within the cap, of the
 * partitions that have at least two of them. */
static int plan(compact_ctx *c, char *why, size_t why_size) {
    ice_datafile *live;
    size_t nlive;
    if (ice_snapshot_datafiles(c->t, ice_meta_current_snapshot(c->t->meta),
                               &live, &nlive, why, why_size) != 0)
        return -1;
    c->replaced = calloc(nlive + 1, sizeof *c->replaced);
    unsigned char *take = calloc(nlive + 1, 1);
    if (!c->replaced || !take || fit_cap(c->o, live, nlive, take) != 0) {
        free(take);
        ice_datafiles_free(live, nlive);
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    /* Files merge only within their partition: one that is the only small
     * file of its partition stays. */
    for (size_t i = 0; i < nlive; i++) {
        size_t peers = 0;
        for (size_t j = 0; take[i] && j < nlive; j++)
            peers += take[j] && same_partition(&live[i], &live[j]);
        if (peers >= 2) {
            c->replaced[c->nreplaced++] = live[i];
            c->replaced_size += live[i].size;
        } else {
            ice_datafile_clear(&live[i]);
        }
    }
    free(take);
    free(live);
    return 0;
}

int ice_compact(ice_table *t, int64_t target_size, ice_compact_result *res,
                char *why, size_t why_size) {
    ice_compact_opts o = {.target = target_size,
                          .small_below = target_size,
                          .max_bytes = INT64_MAX,
                          .min_files = 2,
                          .codec = PQ_CODEC_DEFAULT,
                          .max_age_ms = ICE_PUBLISH_MAX_MS};
    return ice_compact_with(t, &o, res, why, why_size);
}

int ice_compact_with(ice_table *t, const ice_compact_opts *o,
                     ice_compact_result *res, char *why, size_t why_size) {
    compact_ctx c = {
        .t = t, .o = o, .target = o->target, .why = why, .why_size = why_size};
    memset(res, 0, sizeof *res);
    int rc = ice_table_refresh(t, why, why_size);
    if (rc == 1)
        snprintf(why, why_size, "%s: no table metadata", t->meta_dir);
    if (rc != 0)
        return -1;
    if (o->target <= 0 || o->max_bytes < 0) {
        snprintf(why, why_size,
                 "target file size %lld is not positive (or the cap %lld is "
                 "negative)",
                 (long long)o->target, (long long)o->max_bytes);
        return -1;
    }
    rc = plan(&c, why, why_size);
    if (rc == 0 && c.nreplaced < 2)
        rc = 1; /* nothing to merge (or fewer small files than min_files) */
    if (rc == 0) {
        c.snapshot_id = ice_new_snapshot_id(t->meta);
        c.schema_json = ice_schema_text(t->meta);
        if (!c.schema_json) {
            snprintf(why, why_size, "%s: no current schema (or no memory)",
                     t->meta_dir);
            rc = -1;
        }
    }
    if (rc == 0)
        rc = ice_schema_columns(t->meta, &c.cols, &c.ncols, why, why_size);
    c.written_ms = ice_boot_ms();
    if (rc == 0)
        rc = rewrite(&c);
    if (rc == 0)
        rc = ice_maint_commit(t, build, check, &c, why, why_size);
    if (rc != 0 && rc != -2) {
        /* Never published: the new files and manifests are ours alone. */
        ice_own_drop(&c.own);
        for (size_t i = 0; i < c.nwritten; i++) {
            const char *p = ice_uri_path(c.written[i].path);
            if (p)
                unlink(p);
        }
    }
    if (rc == 0) {
        res->snapshot_id = c.snapshot_id;
        res->files_in = c.nreplaced;
        res->files_out = c.nwritten;
        res->rows = c.rows;
        res->more = c.more;
    }
    if (c.open)
        ice_out_free(&c.out);
    ice_own_free(&c.own);
    ice_datafiles_free(c.replaced, c.nreplaced);
    ice_datafiles_free(c.written, c.nwritten);
    free(c.cols);
    free(c.schema_json);
    return rc;
}
