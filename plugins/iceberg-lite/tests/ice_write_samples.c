/* Writes the sample files into a directory for judge_formats.py, which
 * reads them with pyarrow, DuckDB and fastavro (readers we did not write). */
#include <stdio.h>

#include "ice_samples.h"

static int save(const char *dir, const char *name, const ib_buf *b) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return -1;
    }
    int ok = fwrite(b->p, 1, b->len, f) == b->len;
    if (fclose(f) != 0 || !ok) {
        perror(path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    /* Each file in every codec: <name>.parquet uncompressed, then
     * <name>-zstd.parquet and <name>-snappy.parquet. */
    static const struct {
        pq_codec codec;
        const char *suffix;
    } CODECS[] = {{PQ_CODEC_NONE, ""},
                  {PQ_CODEC_ZSTD, "-zstd"},
                  {PQ_CODEC_SNAPPY, "-snappy"}};
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < sizeof CODECS / sizeof CODECS[0]; k++) {
        ib_buf a = {0}, b = {0};
        char na[64], nb[64];
        snprintf(na, sizeof na, "sample%s.parquet", CODECS[k].suffix);
        snprintf(nb, sizeof nb, "sample_groups%s.parquet", CODECS[k].suffix);
        /* 200k rows: several 1 MiB pages per string column; the second
         * file also has several row groups. */
        rc = ice_sample_parquet_codec(200000, 0, 0, CODECS[k].codec, &a) != 0 ||
             save(argv[1], na, &a) != 0 ||
             ice_sample_parquet_codec(50000, 64 * 1024, 256 * 1024,
                                      CODECS[k].codec, &b) != 0 ||
             save(argv[1], nb, &b) != 0;
        ib_buf_free(&a);
        ib_buf_free(&b);
    }
    ib_buf c = {0};
    rc = rc || ice_sample_avro(5000, &c) != 0 ||
         save(argv[1], "sample.avro", &c) != 0;
    ib_buf_free(&c);
    return rc ? 1 : 0;
}
