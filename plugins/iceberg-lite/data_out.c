/* One data file being written (see data_out.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_out.h"
#include "fsio.h"

int ice_out_open(ice_out *o, const pq_column_def *cols, size_t ncols,
                 pq_codec codec, const uint8_t *part, size_t part_len) {
    memset(o, 0, sizeof *o);
    o->pw = pq_writer_new(cols, ncols, 0, 0);
    o->m = ice_metrics_new(cols, ncols);
    if (!o->pw || !o->m ||
        ice_bytes_dup(&o->part, &o->part_len, part, part_len) != 0) {
        ice_out_free(o);
        return -1;
    }
    pq_writer_set_codec(o->pw, codec);
    return 0;
}

void ice_out_free(ice_out *o) {
    pq_writer_free(o->pw);
    ice_metrics_free(o->m);
    free(o->part);
    memset(o, 0, sizeof *o);
}

int ice_out_finish(ice_out *o, const char *data_dir, const char *schema_json,
                   int64_t snapshot_id, size_t k, ice_datafile *f, char *why,
                   size_t why_size) {
    ib_buf file = {0}, metrics = {0};
    const char *kv[] = {"iceberg.schema", schema_json};
    memset(f, 0, sizeof *f);
    f->records = pq_rows(o->pw);
    f->snapshot_id = snapshot_id;
    if (pq_finish(o->pw, kv, 1, &file) != 0) {
        snprintf(why, why_size, "Parquet encoder: %s", pq_error(o->pw));
        ib_buf_free(&file);
        return strstr(pq_error(o->pw), "memory") ? -1 : -2;
    }
    char uuid[37], path[4096], uri[4200];
    int rc = fs_uuid(uuid);
    if (rc != 0)
        snprintf(why, why_size, "no random bytes for a file name");
    if (rc == 0 && ice_metrics_encode(o->m, &metrics) != 0) {
        snprintf(why, why_size, "out of memory (column metrics)");
        rc = -1;
    }
    snprintf(path, sizeof path, "%s/%lld-%zu-%s.parquet", data_dir,
             (long long)snapshot_id, k, uuid);
    snprintf(uri, sizeof uri, "file://%s", path);
    if (rc == 0)
        rc = fs_write_new(path, file.p, file.len, 0, why, why_size);
    f->size = (int64_t)file.len;
    ib_buf_free(&file);
    if (rc == 0 &&
        (!(f->path = strdup(uri)) ||
         ice_bytes_dup(&f->part, &f->part_len, o->part, o->part_len) != 0 ||
         ice_bytes_dup(&f->metrics, &f->metrics_len, metrics.p, metrics.len) !=
             0)) {
        unlink(path);
        ice_datafile_clear(f);
        snprintf(why, why_size, "out of memory");
        rc = -1;
    }
    ib_buf_free(&metrics);
    return rc;
}
