/* The mapped columns' values of one data file, for scan (scan.c): loaded
 * once, then handed out row by row as tm_value arrays that point into it. */
#ifndef TM_ICE_SCAN_VALUES_H
#define TM_ICE_SCAN_VALUES_H

#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

#include "parquet_reader.h"

typedef struct ice_vals {
    uint8_t *data;  /* the file's bytes (cells point into them) */
    pq_reader *r;   /* its decompressed pages too */
    pq_cell *cells; /* nrows x ncols, row major */
    pq_phys *phys;  /* per mapped column; PQ_PHYS_OTHER: not in the file */
    int64_t nrows;
    size_t ncols;
} ice_vals;

/* What ice_vals_load failed at: the file's values cannot be decoded by
 * this reader (not Parquet it knows, not a local file: its rows may go
 * without values), or the load itself failed (the file gone or unreadable,
 * memory ran out: the scan must fail, not lose the values). */
#define ICE_VALS_UNDECODABLE (-1)
#define ICE_VALS_FAILED      (-2)

/* Loads the data file URI's columns named as CONFIG's columns (a column
 * the file lacks, added to the table after it was written, reads null; one
 * of another physical type than its mapped type's is not read, and its
 * rows have no values).
 * 0, or ICE_VALS_UNDECODABLE / ICE_VALS_FAILED with why (*v then needs no
 * free). */
int ice_vals_load(ice_vals *v, const char *uri, const tm_sink_config *config,
                  char *why, size_t why_size);
/* Row ROW's values into out[0..ncols), valid until ice_vals_free. 0, or -1
 * when a column's physical type is not its mapped type's (the row is then
 * given without values, never with misread ones). */
int ice_vals_row(const ice_vals *v, const tm_sink_config *config, int64_t row,
                 tm_value *out);
void ice_vals_free(ice_vals *v);
/* How many times ice_vals_load has run in this process (tests count a
 * scan's file reads with it). */
size_t ice_vals_load_count(void);

#endif
