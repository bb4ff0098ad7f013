/* The sample generator shared by the format tests and the judge writer. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "avro_writer.h"
#include "ice_samples.h"
#include "parquet_writer.h"

int ice_sample_parquet(size_t nrows, size_t page_target, size_t group_target,
                       ib_buf *out) {
    return ice_sample_parquet_codec(nrows, page_target, group_target,
                                    PQ_CODEC_NONE, out);
}

int ice_sample_parquet_codec(size_t nrows, size_t page_target,
                             size_t group_target, pq_codec codec, ib_buf *out) {
    static const pq_column_def cols[] = {
        {"id", PQ_INT64, 1, 1},      {"body", PQ_STRING, 0, 2},
        {"amount", PQ_DOUBLE, 0, 3}, {"flag", PQ_BOOLEAN, 0, 4},
        {"at", PQ_TIMESTAMP, 1, 5},  {"raw", PQ_BINARY, 0, 6},
    };
    pq_writer *w = pq_writer_new(cols, 6, page_target, group_target);
    if (!w)
        return -1;
    pq_writer_set_codec(w, codec);
    char s[64];
    for (size_t i = 0; i < nrows; i++) {
        pq_put_i64(w, 0, (int64_t)i);
        if (i % 7 == 0) {
            pq_put_null(w, 1);
        } else {
            int n = snprintf(s, sizeof s, "body-%zu-\xc3\xa9", i);
            pq_put_bytes(w, 1, s, (size_t)n);
        }
        if (i % 5 == 0)
            pq_put_null(w, 2);
        else
            pq_put_double(w, 2, (double)i * 0.5);
        if (i % 3 == 0)
            pq_put_null(w, 3);
        else
            pq_put_i64(w, 3, (int64_t)(i % 2));
        pq_put_i64(w, 4, INT64_C(1700000000000000) + (int64_t)i);
        uint8_t raw[3] = {(uint8_t)i, 0, (uint8_t)(i >> 8)};
        if (i % 11 == 0)
            pq_put_null(w, 5);
        else
            pq_put_bytes(w, 5, raw, sizeof raw);
        pq_end_row(w);
    }
    const char *kv[] = {"tidemark.sample", "yes"};
    int rc = pq_finish(w, kv, 1, out);
    if (rc != 0)
        fprintf(stderr, "pq_finish: %s\n", pq_error(w));
    pq_writer_free(w);
    return rc;
}

static const char SAMPLE_SCHEMA[] =
    "{\"type\":\"record\",\"name\":\"sample\",\"fields\":["
    "{\"name\":\"n\",\"type\":\"long\",\"field-id\":1},"
    "{\"name\":\"s\",\"type\":\"string\",\"field-id\":2},"
    "{\"name\":\"o\",\"type\":[\"null\",\"long\"],\"default\":null,"
    "\"field-id\":3},"
    "{\"name\":\"b\",\"type\":\"boolean\",\"field-id\":4},"
    "{\"name\":\"d\",\"type\":\"double\",\"field-id\":5}]}";

int ice_sample_avro(size_t nrecs, ib_buf *out) {
    static const uint8_t sync[AV_SYNC_SIZE] = "0123456789abcdef";
    const char *meta[] = {"schema-id", "0",       "format-version",
                          "2",         "content", "data"};
    av_writer w;
    av_begin(&w, SAMPLE_SCHEMA, meta, 3, sync);
    char s[64];
    for (size_t i = 0; i < nrecs; i++) {
        ib_buf *b = av_record(&w);
        av_put_long(b, (int64_t)i * 1000003 - 5000000);
        snprintf(s, sizeof s, "rec-%zu", i);
        av_put_string(b, s);
        if (i % 2) {
            av_put_branch(b, 0);
        } else {
            av_put_branch(b, 1);
            av_put_long(b, (int64_t)i);
        }
        av_put_bool(b, i % 3 == 0);
        av_put_double(b, (double)i / 4);
    }
    int rc = av_finish(&w);
    if (rc == 0)
        ib_buf_add(out, w.file.p, w.file.len);
    av_free(&w);
    return rc == 0 && ib_buf_ok(out) ? 0 : -1;
}
