/* A reader of the Parquet files this plugin writes (parquet_writer.h):
 * flat schemas, PLAIN data pages v1 (uncompressed, zstd or snappy: see
 * pq_codec.h), RLE/bit-packed definition levels. scan reads its hidden
 * coordinate columns back with it; anything outside that subset is
 * refused, never misread. */
#ifndef TM_ICE_PARQUET_READER_H
#define TM_ICE_PARQUET_READER_H

#include <stddef.h>
#include <stdint.h>

typedef struct pq_reader pq_reader;

typedef struct pq_cell {
    int is_null;
    int64_t i;        /* INT64, BOOLEAN */
    double f;         /* DOUBLE */
    const uint8_t *p; /* BYTE_ARRAY: into the file's bytes */
    size_t n;
} pq_cell;

/* Called per value of a column, rows in order. Non-zero stops the read. */
typedef int (*pq_cell_fn)(void *ctx, int64_t row, const pq_cell *cell);

/* Parses the footer of the file in data[0..len) (kept, not copied).
 * NULL with why on malformed input or memory. */
pq_reader *pq_reader_open(const uint8_t *data, size_t len, char *why,
                          size_t why_size);
void pq_reader_free(pq_reader *r);
int64_t pq_reader_rows(const pq_reader *r);
size_t pq_reader_ncols(const pq_reader *r);
/* The index of the column named NAME, -1 when none. */
int pq_reader_find(const pq_reader *r, const char *name);
/* The column's field id (-1 when absent) and name. */
int32_t pq_reader_field_id(const pq_reader *r, size_t col);
/* The column's physical type: which member of pq_cell its values fill. */
typedef enum pq_phys {
    PQ_PHYS_OTHER = 0,
    PQ_PHYS_BOOLEAN,   /* i */
    PQ_PHYS_INT64,     /* i */
    PQ_PHYS_DOUBLE,    /* f */
    PQ_PHYS_BYTE_ARRAY /* p, n */
} pq_phys;
pq_phys pq_reader_phys(const pq_reader *r, size_t col);
/* The codec of the column's first chunk (pq_codec; -1 when the file has
 * no row group). */
int pq_reader_codec(const pq_reader *r, size_t col);
/* Pages counted by the last pq_reader_column call (tests). */
size_t pq_reader_pages(const pq_reader *r);
/* Reads every value of column COL. 0; 1 stopped by fn; -1 malformed (why). */
int pq_reader_column(pq_reader *r, size_t col, pq_cell_fn fn, void *ctx,
                     char *why, size_t why_size);

#endif
