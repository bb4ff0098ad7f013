/* Sample files the format tests write and the Python judge reads back:
 * the same generator on both sides of the check (values derive from the
 * row index, see judge_formats.py). */
#ifndef TM_ICE_SAMPLES_H
#define TM_ICE_SAMPLES_H

#include <stddef.h>

#include "ib_buf.h"
#include "pq_codec.h"

/* A Parquet file of nrows rows of every column kind, pages split at
 * page_target, row groups at group_target. 0 or -1. */
int ice_sample_parquet(size_t nrows, size_t page_target, size_t group_target,
                       ib_buf *out);
/* The same with its pages compressed with codec. */
int ice_sample_parquet_codec(size_t nrows, size_t page_target,
                             size_t group_target, pq_codec codec, ib_buf *out);
/* An Avro file of nrecs records with field ids and Iceberg's header keys. */
int ice_sample_avro(size_t nrecs, ib_buf *out);

#endif
