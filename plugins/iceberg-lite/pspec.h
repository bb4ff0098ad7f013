/* Partition specs (format/spec.md, "Partitioning", "Partition
 * Transforms", "Appendix B: 32-bit Hash Requirements"): the table's one
 * spec (spec-id 0) parsed from the metadata against the current schema,
 * the transforms, and a row's partition tuple encoded as the Avro record
 * that manifests store in data_file.partition.
 *
 * Supported transforms: identity (any column), bucket[N] (long,
 * timestamptz, string, binary), truncate[W] (long, string, binary),
 * year / month / day / hour (timestamptz). Result types follow the spec:
 * bucket, year, month, hour int; day date (an int of days); identity and
 * truncate the source type. */
#ifndef TM_ICE_PSPEC_H
#define TM_ICE_PSPEC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ib_buf.h"
#include "parquet_reader.h"
#include "parquet_writer.h"

typedef enum ice_transform {
    ICE_T_IDENTITY = 0,
    ICE_T_BUCKET,
    ICE_T_TRUNCATE,
    ICE_T_YEAR,
    ICE_T_MONTH,
    ICE_T_DAY,
    ICE_T_HOUR
} ice_transform;

/* Partition field ids start here (the spec: 1000). */
#define ICE_PARTITION_FIRST_ID 1000
/* bucket[N] and truncate[W] take 1 to this. */
#define ICE_TRANSFORM_PARAM_MAX INT32_MAX

typedef struct ice_pfield {
    size_t col; /* the source column's index in the schema's fields */
    pq_kind kind;
    ice_transform transform;
    int32_t param; /* N or W */
} ice_pfield;

typedef struct ice_pspec {
    ice_pfield *f;
    size_t n;        /* 0: unpartitioned */
    char *spec_json; /* the spec's fields, the manifests' header key */
    char *avro;      /* the Avro record type of data_file.partition */
} ice_pspec;

/* Parses a transform string ("day", "bucket[16]"): 0, or -1 with why. */
int ice_transform_parse(const char *s, ice_transform *t, int32_t *param,
                        char *why, size_t why_size);
/* The spec's default name of a partition field ("ts_day", "id_bucket",
 * identity: the column's name) into out. */
void ice_pfield_default_name(const char *column, ice_transform t, char *out,
                             size_t size);

/* Builds SPEC from spec FIELDS (JSON: source-id, field-id, name,
 * transform) against the schema fields SCHEMA (id, name, type): every
 * source column exists, the transform is valid for its type, field ids
 * are 1000, 1001, ... in order, names are unique and no name other than
 * an identity field's is a column name. 0, or -1 with why naming the
 * field (1-based). */
int ice_pspec_build(json_t *schema, json_t *fields, ice_pspec *spec, char *why,
                    size_t why_size);
/* The default spec (spec-id default-spec-id) of table metadata META. */
int ice_pspec_from_meta(json_t *meta, ice_pspec *spec, char *why,
                        size_t why_size);
void ice_pspec_free(ice_pspec *spec);

/* A row's partition tuple: the transforms of cells (one per schema
 * column, as the data file holds them), Avro-encoded (each field a union
 * of null and its result type), appended to out. Equal tuples encode to
 * equal bytes, so the bytes are the tuple's identity. */
void ice_partition_encode(const ice_pspec *spec, const pq_cell *cells,
                          ib_buf *out);

/* Murmur3 x86 32-bit, seed 0 (the spec's bucket hash). */
uint32_t ice_murmur3_32(const void *data, size_t len);
/* bucket[n] of a long (and timestamptz) and of bytes (string, binary). */
int32_t ice_bucket_long(int64_t v, int32_t n);
int32_t ice_bucket_bytes(const void *p, size_t len, int32_t n);

#endif
