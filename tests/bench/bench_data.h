/* The rows and batches a per-sink benchmark feeds both its sides (the
 * sink through the plugin API and its bare loop): made once in memory, so
 * both bind or encode the very same bytes. One batch per BATCH rows of
 * one partition, offsets from 0. */
#ifndef TM_BENCH_DATA_H
#define TM_BENCH_DATA_H

#include <stddef.h>
#include <tidemark/sink.h>

typedef struct bench_data {
    size_t nrows, batch, nbatches, ncols;
    tm_record *records;
    tm_value *values; /* nrows * ncols */
    char *text; /* text_per_row bytes a row: the strings values point at */
    size_t text_per_row;
    tm_range *ranges; /* one per batch */
    tm_batch *batches;
    char (*ids)[32];
} bench_data;

/* Allocates for NROWS rows of NCOLS values in batches of BATCH, with
 * TEXT_PER_ROW bytes of text a row (values' struct_size set, records
 * zeroed). Exits the program, naming PROG, when memory runs out. */
void bench_data_alloc(bench_data *d, const char *prog, size_t nrows,
                      size_t batch, size_t ncols, size_t text_per_row);

/* Row I's record: offset I, timestamp BASE_MS + I, value VALUE (its doc). */
void bench_data_record(bench_data *d, size_t i, int64_t base_ms,
                       const char *value, size_t value_len);

/* The orders rows of sqlite_bench and iceberg_bench: id int, name text,
 * amount float, flag bool, at timestamp, doc json (NCOLS 6, 96 bytes of
 * text a row). */
#define BENCH_ORDERS_NCOLS 6
extern const tm_column BENCH_ORDERS_COLS[BENCH_ORDERS_NCOLS];
void bench_data_orders(bench_data *d, const char *prog, size_t nrows,
                       size_t batch);

/* Rows in batch K. */
size_t bench_data_batch_len(const bench_data *d, size_t k);

/* The batches for one sink run of TOPIC partition 0, stamped with the
 * epoch of that run's claim. */
void bench_data_batches(bench_data *d, const char *topic, int64_t epoch);

void bench_data_free(bench_data *d);

#endif
