/* libFuzzer target: any bytes as a Parquet data file of the iceberg-lite
 * sink. pq_reader_open and every column (as scan reads them), then the
 * same bytes as a file through ice_file_rows (as `tidemark table
 * scan|compact` read data files). Every cell's bytes are read, so a cell
 * pointing outside the input is ASan's to see. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_tmp.h"
#include "maint.h"
#include "parquet_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void touch(const pq_cell *c) {
    uint64_t sum = (uint64_t)c->i + (uint64_t)c->is_null;
    for (size_t i = 0; i < c->n; i++)
        sum += c->p[i];
    sink += sum;
}

static int on_cell(void *ctx, int64_t row, const pq_cell *cell) {
    (void)ctx;
    (void)row;
    touch(cell);
    return 0;
}

static int on_row(void *ctx, const pq_cell *cells, size_t ncols) {
    (void)ctx;
    for (size_t i = 0; i < ncols; i++)
        touch(&cells[i]);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[512];
    char why[512];
    if (!path[0])
        fuzz_path(path, sizeof path, "data.parquet");
    pq_reader *r = pq_reader_open(data, size, why, sizeof why);
    if (!r)
        return 0;
    (void)pq_reader_find(r, "id");
    for (size_t c = 0; c < pq_reader_ncols(r); c++) {
        (void)pq_reader_field_id(r, c);
        (void)pq_reader_column(r, c, on_cell, NULL, why, sizeof why);
    }
    pq_reader_free(r);
    fuzz_write(path, data, size);
    (void)ice_file_rows(path, on_row, NULL, why, sizeof why);
    return 0;
}
