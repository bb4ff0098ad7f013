/* One data file being written, shared by the sink's commit and compact:
 * its Parquet writer, its column metrics and its partition tuple, then
 * the finished file under data/ with its manifest entry. */
#ifndef TM_ICE_DATA_OUT_H
#define TM_ICE_DATA_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "manifest.h"
#include "metrics.h"
#include "parquet_writer.h"

typedef struct ice_out {
    pq_writer *pw;
    ice_metrics *m;
    uint8_t *part; /* the partition tuple (Avro bytes), owned */
    size_t part_len;
} ice_out;

/* cols borrowed until ice_out_free. 0, or -1 out of memory. */
int ice_out_open(ice_out *o, const pq_column_def *cols, size_t ncols,
                 pq_codec codec, const uint8_t *part, size_t part_len);
void ice_out_free(ice_out *o);
/* Finishes the file into data_dir/<snapshot_id>-<k>-<uuid>.parquet (new,
 * not synced: the commit's barrier makes it durable) with the
 * iceberg.schema footer key, and fills f (path, records, size,
 * snapshot_id, partition, metrics; f owns them). The writer is done
 * afterwards. 0; -1 I/O or memory; -2 the encoder refused a row; why set. */
int ice_out_finish(ice_out *o, const char *data_dir, const char *schema_json,
                   int64_t snapshot_id, size_t k, ice_datafile *f, char *why,
                   size_t why_size);

#endif
