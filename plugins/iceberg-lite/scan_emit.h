/* The emit half of scan (scan.c): a partition's gathered items, sorted by
 * offset, handed to the reader one by one, each row with its values when
 * the reader wants them. Apart from scan.c so that a test can drive it
 * with items of its own (duplicate offsets across files). */
#ifndef TM_ICE_SCAN_EMIT_H
#define TM_ICE_SCAN_EMIT_H

#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

#include "manifest.h"

typedef struct ice_scan_item {
    int64_t offset;
    size_t file; /* rows: the data file (index into the snapshot's) */
    int64_t row; /* and the row in it */
    tm_item_kind kind;
    tm_dl_reason reason;
    char *detail;
} ice_scan_item;

/* Sorts ITEMS[0..n) (by offset, rows before dead letters, then by file and
 * row) and emits them through host->emit(emit_ctx, ...) until it returns
 * non-zero. 0, or -1 with why. */
int ice_scan_emit(const tm_host_api *host, const tm_sink_config *config,
                  ice_scan_item *items, size_t n, const ice_datafile *files,
                  size_t nfiles, const char *topic, int32_t partition,
                  void *emit_ctx, char *why, size_t size);

#endif
