/* See scan_emit.h. A partition's rows lie in offset order across data
 * files unless files were rewritten around others or offsets are stored
 * twice: then the rows of two files alternate. Each file's values are
 * loaded once, when its first row comes, and freed after its last row, so
 * a file is never read twice (reading it again whenever its rows came
 * round made duplicated offsets quadratic) and memory holds only the files
 * whose rows are interleaved at that point. A reader that wants no values
 * (verify) makes no file be read at all. A file whose values cannot be
 * decoded (not a Parquet file this reader knows, written by another engine)
 * gives its rows without values, with a warning: the values are extra, the
 * scan of offsets must still work. A load that failed (the file gone,
 * unreadable, memory out) fails the scan: its rows are not given at all. */
#include "scan_emit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scan_values.h"

/* Offset order; at one offset rows before dead letters, and rows by file
 * and row, so that duplicates keep to their file as far as the offsets
 * allow. */
static int by_offset(const void *a, const void *b) {
    const ice_scan_item *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    if (x->kind != y->kind)
        return (int)x->kind - (int)y->kind;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

/* Per data file: its values while rows of it are still to come. */
typedef struct file_vals {
    ice_vals v;
    size_t last; /* index of its last row item */
    int loaded, failed;
} file_vals;

int ice_scan_emit(const tm_host_api *host, const tm_sink_config *config,
                  ice_scan_item *items, size_t n, const ice_datafile *files,
                  size_t nfiles, const char *topic, int32_t partition,
                  void *emit_ctx, char *why, size_t size) {
    int wants = TM_HOST_SCAN_WANTS_VALUES(host, emit_ctx);
    if (n > 1)
        qsort(items, n, sizeof *items, by_offset);
    tm_value *vals =
        calloc(config->ncolumns ? config->ncolumns : 1, sizeof *vals);
    file_vals *fv = wants ? calloc(nfiles ? nfiles : 1, sizeof *fv) : NULL;
    int rc = vals && (fv || !wants) ? 0 : -1;
    if (rc != 0)
        snprintf(why, size, "out of memory");
    for (size_t i = 0; rc == 0 && fv && i < n; i++)
        if (items[i].kind == TM_ITEM_ROW && items[i].file < nfiles)
            fv[items[i].file].last = i;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const ice_scan_item *item = &items[i];
        int with = 0;
        file_vals *f = fv && item->kind == TM_ITEM_ROW && item->file < nfiles
                           ? &fv[item->file]
                           : NULL;
        if (f && !f->loaded) {
            char bad[512];
            f->loaded = 1;
            int lr = ice_vals_load(&f->v, files[item->file].path, config, bad,
                                   sizeof bad);
            if (lr == ICE_VALS_FAILED) {
                /* I/O or memory: rows without values would pass for a
                 * file that has none; the scan fails instead. */
                snprintf(why, size, "reading the values of %s", bad);
                rc = -1;
                break;
            }
            if (lr != 0) {
                f->failed = 1;
                host->log(config->host_ctx, TM_LOG_WARN,
                          "scan %s[%d]: rows given without values: %s", topic,
                          (int)partition, bad);
            }
        }
        if (f && !f->failed)
            with = ice_vals_row(&f->v, config, item->row, vals) == 0;
        tm_scan_item it = {
            .struct_size = sizeof it,
            .kind = item->kind,
            .topic = topic,
            .partition = partition,
            .offset = item->offset,
            .reason = item->reason,
            .detail = item->detail,
            .values = with ? vals : NULL,
            .nvalues = with ? config->ncolumns : 0,
        };
        int stop = host->emit(emit_ctx, &it) != 0;
        if (f && f->last == i)
            ice_vals_free(&f->v); /* no row of it is still to come */
        if (stop)
            break; /* the reader has seen enough */
    }
    for (size_t k = 0; fv && k < nfiles; k++)
        ice_vals_free(&fv[k].v);
    free(fv);
    free(vals);
    return rc;
}
