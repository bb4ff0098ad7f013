/* Parquet files (apache/parquet-format), the subset Iceberg data files
 * need: flat schemas of BOOLEAN, INT64, DOUBLE and BYTE_ARRAY columns
 * (BYTE_ARRAY as UTF8 strings or raw binary, INT64 as TIMESTAMP(MICROS,
 * UTC)), a field_id on every column, PLAIN encoding, data pages v1 split
 * near the page target (uncompressed), each page compressed with the
 * writer's codec (pq_codec.h; none unless set), definition levels (RLE) on
 * optional columns, and the Thrift compact footer. No statistics, no
 * dictionary.
 *
 * Values go in row by row, one per column (pq_put_*), then pq_end_row().
 * The file is built in memory: pq_finish() hands back its bytes, so the
 * caller knows the exact size Iceberg's manifest must record. */
#ifndef TM_ICE_PARQUET_WRITER_H
#define TM_ICE_PARQUET_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "ib_buf.h"
#include "pq_codec.h"

typedef enum pq_kind {
    PQ_BOOLEAN = 1,
    PQ_INT64 = 2,
    PQ_DOUBLE = 3,
    PQ_STRING = 4,   /* BYTE_ARRAY, STRING (UTF8) */
    PQ_BINARY = 5,   /* BYTE_ARRAY, no annotation */
    PQ_TIMESTAMP = 6 /* INT64, TIMESTAMP(isAdjustedToUTC, MICROS) */
} pq_kind;

typedef struct pq_column_def {
    const char *name; /* copied */
    pq_kind kind;
    int required;
    int32_t field_id;
} pq_column_def;

#define PQ_PAGE_TARGET      (1u << 20) /* split pages near 1 MiB */
#define PQ_ROW_GROUP_TARGET (128u << 20)

typedef struct pq_writer pq_writer;

/* NULL on allocation failure or a bad definition (no name, bad kind). */
pq_writer *pq_writer_new(const pq_column_def *cols, size_t ncols,
                         size_t page_target, size_t row_group_target);
void pq_writer_free(pq_writer *w);
/* The codec every page of the file is compressed with (PQ_CODEC_NONE
 * until set). Before the first row; later, or an unknown codec, sets the
 * writer's error. */
void pq_writer_set_codec(pq_writer *w, pq_codec codec);

/* One value of column col of the current row. BOOLEAN takes 0/1 through
 * pq_put_i64. A null in a required column, a second value for a column or
 * a kind mismatch sets the writer's error (pq_finish fails). */
void pq_put_null(pq_writer *w, size_t col);
void pq_put_i64(pq_writer *w, size_t col, int64_t v);
void pq_put_double(pq_writer *w, size_t col, double v);
void pq_put_bytes(pq_writer *w, size_t col, const void *p, size_t n);
/* Ends the row: every column must have had its value. */
void pq_end_row(pq_writer *w);

int64_t pq_rows(const pq_writer *w);
/* Bytes written so far (an estimate of the file size, for rolling). */
size_t pq_size(const pq_writer *w);
/* The writer's first error ("" when none). */
const char *pq_error(const pq_writer *w);

/* Closes the last row group and writes the footer with key/value metadata
 * kv[2i] = kv[2i+1]. The file's bytes are appended to out. 0, or -1 with
 * pq_error() saying why. The writer is done afterwards. */
int pq_finish(pq_writer *w, const char *const *kv, size_t nkv, ib_buf *out);

#endif
