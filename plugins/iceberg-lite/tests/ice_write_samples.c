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
    ib_buf a = {0}, b = {0}, c = {0};
    /* 200k rows: several 1 MiB pages per string column; the second file
     * also has several row groups. */
    int rc = ice_sample_parquet(200000, 0, 0, &a) != 0 ||
             save(argv[1], "sample.parquet", &a) != 0 ||
             ice_sample_parquet(50000, 64 * 1024, 256 * 1024, &b) != 0 ||
             save(argv[1], "sample_groups.parquet", &b) != 0 ||
             ice_sample_avro(5000, &c) != 0 ||
             save(argv[1], "sample.avro", &c) != 0;
    ib_buf_free(&a);
    ib_buf_free(&b);
    ib_buf_free(&c);
    return rc ? 1 : 0;
}
