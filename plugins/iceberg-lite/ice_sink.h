/* The iceberg-lite sink's internals, shared by its files (one concern
 * each):
 *   ice_sink.c        the callback table, open, close, interrupt, describe
 *   settings.c        reading and checking the settings; validate
 *   schema.c          the mapping as an Iceberg schema and Parquet columns
 *   markers.c         markers in snapshot summaries and table properties;
 *                     claim and read_markers
 *   commit.c          one batch, one new table version
 *   datafile.c        a batch's rows as Parquet data files
 *   dead_letters.c    the dead-letter side files (JSON lines)
 *   snapshot_files.c  a snapshot's manifest list and data files, read back
 *   scan.c            read-back of rows and dead letters
 * and the formats beneath: table_meta.c (metadata JSON, the atomic
 * publish), manifest.c, avro_writer.c / avro_reader.c, parquet_writer.c /
 * parquet_reader.c, thrift_compact.c / thrift_reader.c, ib_buf.c, fsio.c.
 * Nothing here is exported: the plugin exports only tidemark_sink_entry. */
#ifndef TM_ICE_SINK_H
#define TM_ICE_SINK_H

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

#include "manifest.h"
#include "parquet_writer.h"
#include "table_meta.h"

/* Hidden columns of every data file: where each row came from, so that
 * scan (and tidemark verify) read offsets back from the effects. */
#define ICE_HIDDEN_PREFIX "_tm_"
#define ICE_NHIDDEN       3

/* Marker keys: ICE_MARKER_PREFIX "<connector>/<topic>/<partition>." then
 * a field name. Topic names cannot hold '/', so the key is unambiguous. */
#define ICE_MARKER_PREFIX "tidemark.marker."
#define ICE_KEY_MAX       600
/* A file:// URI of a path of at most 4096 bytes. */
#define ICE_URI_MAX 4200

/* A manifest list keeps at most this many manifests: past it, the
 * commit merges them into one (the "merge manifests past a small
 * count"), so reading a snapshot stays a few files. */
#define ICE_MANIFEST_MAX 8

/* How many times a commit or claim starts over after losing the race for
 * the next metadata version before answering TM_RETRY. */
#define ICE_RACE_MAX 64

typedef struct ice_settings {
    /* Strings point into the host's config, which outlives the instance. */
    const char *path;
    int create;
    int64_t target_file_size;
    int fsync;
} ice_settings;

typedef struct ice_sink {
    const tm_host_api *host;
    const tm_sink_config *config;
    ice_settings set;
    ice_table table;
    pq_column_def *cols; /* the mapping's columns, then the hidden ones */
    size_t ncols;
    json_t *fields;    /* the Iceberg schema's fields */
    char *schema_json; /* the Iceberg schema, for file headers */
    atomic_int interrupted;
} ice_sink;

/* settings.c */
tm_status ice_settings_load(const tm_host_api *host,
                            const tm_sink_config *config, ice_settings *out,
                            tm_error *err);
tm_status ice_validate(const tm_host_api *host, const tm_sink_config *config,
                       tm_error *err);

/* schema.c */
/* Builds s->cols, s->fields and s->schema_json from the mapping. */
tm_status ice_schema_build(ice_sink *s, tm_error *err);
void ice_schema_free(ice_sink *s);
/* Compares the table's current schema with the mapping's. TM_OK, or
 * TM_INVALID with both shapes. */
tm_status ice_schema_check(ice_sink *s, tm_error *err);

/* markers.c */
void ice_marker_prefix(const ice_sink *s, const char *topic, int32_t partition,
                       char *out, size_t size);
/* The stored marker behind PREFIX in META (everything but topic,
 * partition and struct_size): absent is epoch TM_NO_EPOCH, next_offset
 * TM_NO_OFFSET. */
void ice_marker_get(json_t *meta, const char *prefix, tm_marker *m);
/* Every marker known to META, as summary keys of a new snapshot (so the
 * new current snapshot alone answers read_markers). 0 or -1. */
int ice_markers_carry(json_t *meta, json_t *summary);
int ice_marker_put_summary(json_t *summary, const char *prefix,
                           const tm_marker *m);
tm_status ice_claim(void *sink, tm_marker *markers, size_t n, uint32_t flags,
                    tm_error *err);
tm_status ice_read_markers(void *sink, tm_marker *markers, size_t n,
                           tm_error *err);
/* Refreshes the table: TM_OK, or TM_RETRY / TM_FATAL with err set. */
tm_status ice_refresh(ice_sink *s, tm_error *err);

/* datafile.c */
typedef struct ice_written {
    ice_datafile *files; /* new data files (snapshot_id set) */
    size_t nfiles;
    char dl_path[4096];   /* the dead-letter file, "" when none */
    char dl_rel[256];     /* ... relative to the table root */
    uint64_t *rows, *dls; /* per range */
} ice_written;
/* Writes the batch's rows as Parquet files and its dead letters as a side
 * file, each durable (fsync, then the directories). TM_OK, TM_RETRY (I/O)
 * or TM_FATAL (a row the encoder refused), err set. */
tm_status ice_write_effects(ice_sink *s, const tm_batch *b, int64_t snapshot_id,
                            ice_written *w, tm_error *err);
/* Removes files of a commit that will not be published (best effort). */
void ice_written_discard(ice_written *w);
void ice_written_free(ice_written *w);

/* dead_letters.c */
/* The batch's dead letters as JSON lines. 0 or -1 (memory). */
int ice_dl_encode(const tm_batch *b, ib_buf *out);
typedef int (*ice_dl_fn)(void *ctx, const char *topic, int32_t partition,
                         int64_t offset, tm_dl_reason reason,
                         const char *detail);
/* Calls fn for every dead letter of the file. 0 or -1 with why. */
int ice_dl_read(const char *path, ice_dl_fn fn, void *ctx, char *why,
                size_t why_size);

/* commit.c */
tm_status ice_commit(void *sink, const tm_batch *batch, tm_error *err);
/* A random snapshot id, positive and below 2^53 (JSON readers keep it
 * exact), not used by META yet. */
int64_t ice_new_snapshot_id(json_t *meta);

/* scan.c */
tm_status ice_scan(void *sink, const char *topic, int32_t partition,
                   void *emit_ctx, tm_error *err);
/* snapshot_files.c */
/* The manifest list of SNAPSHOT (NULL: none, an empty list). 0, or -1
 * with why. */
int ice_snapshot_manifests(json_t *snapshot, ice_mfile **mf, size_t *nmf,
                           char *why, size_t why_size);
/* The live data files of the manifests mf[0..n), appended to *files. */
int ice_manifests_files(const ice_mfile *mf, size_t n, ice_datafile **files,
                        size_t *nfiles, char *why, size_t why_size);

#endif
