/* Column metrics of a data file (format/spec.md, "Manifests", data_file
 * fields 109, 110, 125, 128): per column the value count, the null count
 * and the lower and upper bounds in the spec's single-value binary form
 * ("Appendix D"), gathered as the file's rows go into its Parquet writer,
 * so that readers prune files by a row filter. Strings and binary bounds
 * are cut to ICE_BOUND_PREFIX code points (bytes): the lower bound is the
 * prefix, the upper one the prefix with its last character incremented
 * (none when no character can be). NaN is left out of a double's bounds. */
#ifndef TM_ICE_METRICS_H
#define TM_ICE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "ib_buf.h"
#include "parquet_reader.h"
#include "parquet_writer.h"

#define ICE_BOUND_PREFIX 16

typedef struct ice_metrics ice_metrics;

/* NULL out of memory. cols is borrowed until ice_metrics_free. */
ice_metrics *ice_metrics_new(const pq_column_def *cols, size_t ncols);
void ice_metrics_free(ice_metrics *m);
/* A row of cells (one per column, in column order) into the Parquet
 * writer and the metrics: the one way rows go into a data file. */
void ice_put_row(pq_writer *w, ice_metrics *m, const pq_cell *cells);
/* The four optional map fields value_counts, null_value_counts,
 * lower_bounds, upper_bounds, Avro-encoded in that order (manifest.c's
 * schema), appended to out. 0, or -1 out of memory. */
int ice_metrics_encode(const ice_metrics *m, ib_buf *out);

#endif
