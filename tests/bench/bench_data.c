/* Rows and batches made once for both sides of a benchmark
 * (bench_data.h). */
#include "bench_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bench_data_alloc(bench_data *d, const char *prog, size_t nrows,
                      size_t batch, size_t ncols, size_t text_per_row) {
    memset(d, 0, sizeof *d);
    d->nrows = nrows;
    d->batch = batch;
    d->ncols = ncols;
    d->text_per_row = text_per_row;
    d->nbatches = (nrows + batch - 1) / batch;
    size_t nvalues = nrows * ncols, ntext = nrows * text_per_row;
    d->records = calloc(nrows ? nrows : 1, sizeof *d->records);
    d->values = calloc(nvalues ? nvalues : 1, sizeof *d->values);
    d->text = malloc(ntext ? ntext : 1);
    d->ranges = calloc(d->nbatches ? d->nbatches : 1, sizeof *d->ranges);
    d->batches = calloc(d->nbatches ? d->nbatches : 1, sizeof *d->batches);
    d->ids = calloc(d->nbatches ? d->nbatches : 1, sizeof *d->ids);
    if (!d->records || !d->values || !d->text || !d->ranges || !d->batches ||
        !d->ids) {
        fprintf(stderr, "%s: data: out of memory\n", prog);
        exit(1);
    }
    for (size_t i = 0; i < nrows * ncols; i++)
        d->values[i].struct_size = sizeof(tm_value);
}

void bench_data_record(bench_data *d, size_t i, int64_t base_ms,
                       const char *value, size_t value_len) {
    d->records[i] = (tm_record){.struct_size = sizeof(tm_record),
                                .range = 0,
                                .offset = (int64_t)i,
                                .timestamp_ms = base_ms + (int64_t)i,
                                .value = value,
                                .value_len = value_len,
                                .values = &d->values[i * d->ncols]};
}

const tm_column BENCH_ORDERS_COLS[BENCH_ORDERS_NCOLS] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 0},
    {sizeof(tm_column), "name", TM_TYPE_TEXT, 0, 0},
    {sizeof(tm_column), "amount", TM_TYPE_FLOAT, 0, 0},
    {sizeof(tm_column), "flag", TM_TYPE_BOOL, 0, 0},
    {sizeof(tm_column), "at", TM_TYPE_TIMESTAMP, 0, 0},
    {sizeof(tm_column), "doc", TM_TYPE_JSON, 0, 0},
};

void bench_data_orders(bench_data *d, const char *prog, size_t nrows,
                       size_t batch) {
    bench_data_alloc(d, prog, nrows, batch, BENCH_ORDERS_NCOLS, 96);
    for (size_t i = 0; i < nrows; i++) {
        tm_value *v = &d->values[i * BENCH_ORDERS_NCOLS];
        char *name = d->text + i * 96, *doc = name + 32;
        int nl = snprintf(name, 32, "customer-%zu", i % 977);
        int dl = snprintf(doc, 64, "{\"sku\":\"A-%zu\",\"qty\":%zu}", i % 131,
                          i % 7 + 1);
        v[0].v.i = (int64_t)i;
        v[1].v.s.ptr = name;
        v[1].v.s.len = (size_t)nl;
        v[2].v.f = (double)(i % 10000) / 100.0;
        v[3].v.i = (int64_t)(i % 2);
        v[4].v.i = 1700000000000000 + (int64_t)i * 1000;
        v[5].v.s.ptr = doc;
        v[5].v.s.len = (size_t)dl;
        bench_data_record(d, i, 1700000000000, doc, (size_t)dl);
    }
}

size_t bench_data_batch_len(const bench_data *d, size_t k) {
    size_t first = k * d->batch;
    return first + d->batch <= d->nrows ? d->batch : d->nrows - first;
}

void bench_data_batches(bench_data *d, const char *topic, int64_t epoch) {
    for (size_t k = 0; k < d->nbatches; k++) {
        size_t first = k * d->batch, n = bench_data_batch_len(d, k);
        snprintf(d->ids[k], sizeof d->ids[k], "bench-%zu", k);
        d->ranges[k] = (tm_range){.struct_size = sizeof(tm_range),
                                  .topic = topic,
                                  .partition = 0,
                                  .start_offset = (int64_t)first,
                                  .end_offset = (int64_t)(first + n),
                                  .epoch = epoch};
        d->batches[k] = (tm_batch){.struct_size = sizeof(tm_batch),
                                   .connector = "bench",
                                   .batch_id = d->ids[k],
                                   .deadline_ms = 0,
                                   .ranges = &d->ranges[k],
                                   .nranges = 1,
                                   .records = &d->records[first],
                                   .nrecords = n};
    }
}

void bench_data_free(bench_data *d) {
    free(d->records);
    free(d->values);
    free(d->text);
    free(d->ranges);
    free(d->batches);
    free(d->ids);
    memset(d, 0, sizeof *d);
}
