/* The iceberg-lite sink's internals, shared by its files (one concern
 * each):
 *   ice_sink.c        the callback table, open, close, interrupt
 *   settings.c        the declared settings, the mapping check; validate
 *   schema.c          the mapping as an Iceberg schema and Parquet columns
 *   schema_evolve.c   ... against an existing table (schema evolution)
 *   partition.c       the "partition" setting as the table's spec
 *   markers.c         claim and read_markers
 *   commit.c          one batch, one new table version
 *   ice_auto.c        background maintenance after a batch ("maintenance")
 *   datafile.c        a batch's rows as Parquet data files
 *   scan.c            read-back of rows and dead letters
 * on top of the table library (iceberg_lite_table, which the CLI links
 * too): marker_keys.c, dead_letters.c, snapshot_files.c, table_meta.c
 * (metadata JSON, the atomic publish), catalog*.c (a table in an Iceberg
 * SQL catalog: the row's compare-and-swap, catalog.h), pspec.c (partition specs
 * and transforms), metrics.c (column metrics), data_out.c (one data file being
 * written), the maintenance operations (maint.h) and the formats:
 * manifest.c, avro_writer.c / avro_reader.c,
 * parquet_writer.c / parquet_reader.c, thrift_compact.c /
 * thrift_reader.c, ib_buf.c, fsio.c. Nothing here is exported: the plugin
 * exports only tidemark_sink_entry. */
#ifndef TM_ICE_SINK_H
#define TM_ICE_SINK_H

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

#include "dead_letters.h"
#include "manifest.h"
#include "marker_keys.h"
#include "parquet_writer.h"
#include "snapshot_files.h"
#include "table_meta.h"

/* Hidden columns of every data file: where each row came from, so that
 * scan (and tidemark verify) read offsets back from the effects. */
#define ICE_HIDDEN_PREFIX "_tm_"
#define ICE_NHIDDEN       3

/* A file:// URI of a path of at most 4096 bytes. */
#define ICE_URI_MAX 4200

/* Filled by the host from ICE_SETTINGS (settings.c). Strings point into
 * the host's config, which lives until close() returns (sink.h,
 * settings_fill). */
typedef struct ice_settings {
    const char *path;
    int create;
    int64_t target_file_size;
    int fsync;
    int64_t keep_snapshots; /* 0: never expire */
    int shared_table;       /* other connectors' markers are expected */
    int codec;              /* the index of "compression" in its names */
    pq_codec compression;   /* of the Parquet pages */
    const char *partition;  /* the partition spec's text, "" none */
    /* An Iceberg SQL catalog holding the table (catalog.h); "" uri: none,
     * the table's versions are v<N>.metadata.json files. */
    const char *catalog_uri, *catalog_name, *catalog_namespace, *catalog_table;
    int64_t catalog_lock_timeout_ms; /* PostgreSQL: a statement's longest
                                        wait (catalog.h) */
    /* Background maintenance (ice_auto.c): off unless "maintenance". */
    int maintenance;
    int64_t maint_min_files; /* small files that start a compaction */
    int64_t maint_grace_s;   /* before vacuum deletes an unreferenced file */
    int64_t maint_min_age_s; /* ... and younger files (mtime) it never does */
    int64_t maint_vacuum_every_s; /* between two vacuums */
} ice_settings;

/* The background maintenance's state between commits (ice_auto.c). */
typedef struct ice_unref ice_unref; /* files vacuum saw unreferenced */
typedef struct ice_auto {
    ice_owner_hooks hooks;  /* s->table.hooks when maintenance is on */
    const tm_batch *last;   /* the batch just committed, for the fence */
    int64_t files_since;    /* data files committed since the last plan */
    int64_t last_vacuum_ms; /* monotonic, 0 never */
    ice_unref *unref;       /* first seen unreferenced, by path */
    size_t nunref, capunref;
} ice_auto;

typedef struct ice_sink {
    const tm_host_api *host;
    const tm_sink_config *config;
    ice_settings set;
    ice_table table;
    pq_column_def *cols; /* the mapping's columns, then the hidden ones */
    size_t ncols;
    json_t *fields;    /* the Iceberg schema's fields, in cols' order */
    char *schema_json; /* the Iceberg schema, for file headers */
    int64_t schema_id; /* of schema_json */
    int64_t last_column_id;
    /* The loaded table's current schema is not schema_json (the mapping
     * adds optional columns or widens types): the next commit appends it
     * to the table's schemas and makes it current, with its batch. */
    int evolve;
    json_t *spec_fields; /* the partition spec from the settings (JSON) */
    ice_pspec spec;      /* ... parsed against the schema */
    atomic_int interrupted;
    ice_auto maint;
} ice_sink;

/* settings.c */
/* The declared settings (tm_sink_api.settings). */
extern const tm_setting ICE_SETTINGS[];
tm_status ice_settings_load(const tm_host_api *host,
                            const tm_sink_config *config, ice_settings *out,
                            tm_error *err);
tm_status ice_validate(const tm_host_api *host, const tm_sink_config *config,
                       tm_error *err);
/* TM_OK, or TM_INVALID naming $.sink.settings.path and the character
 * when a table created at PATH could not be read (ice_table_uri_safe). */
tm_status ice_path_uri_check(const tm_host_api *host, const char *path,
                             tm_error *err);
/* The table path refused, one message for validate and open: rc
 * ICE_PATH_MISSING (1, from ice_table_check_path / ice_table_init),
 * ICE_PATH_NO_TABLE (no metadata and create false), or -1 with why.
 * Always TM_INVALID. */
/* With catalog_uri: makes T (after ice_table_init) a catalog table,
 * opening the catalog (created when missing if create; else a catalog not
 * there yet has no table). TM_OK, or TM_INVALID naming
 * $.sink.settings.catalog_uri and why. */
tm_status ice_settings_catalog(const tm_host_api *host, const ice_settings *set,
                               ice_table *t, int create, tm_error *err);
#define ICE_PATH_MISSING  1
#define ICE_PATH_NO_TABLE 2
tm_status ice_path_refused(const tm_host_api *host, const ice_settings *set,
                           int rc, const char *why, tm_error *err);

/* schema.c */
/* Builds s->cols, s->fields and s->schema_json from the mapping. */
tm_status ice_schema_build(ice_sink *s, tm_error *err);
void ice_schema_free(ice_sink *s);
/* schema_evolve.c */
/* The mapping against the loaded table's current schema (schema
 * evolution, docs/iceberg-lite.md): columns matched by name take the
 * table's field ids; a new optional column gets a new id past every id
 * the table used; int to long and float to double widen. s->cols,
 * s->fields, s->schema_json and s->evolve follow, and the partition spec
 * is rebuilt on the table's ids. A dropped column, a changed or narrowed
 * type, a new required column or a changed "required" is TM_INVALID
 * naming the mapping's JSON path and why. *moved (may be NULL): a
 * column's field id changed. */
tm_status ice_schema_check(ice_sink *s, tm_error *err);
tm_status ice_schema_reconcile(ice_sink *s, int *moved, tm_error *err);
/* Adds the evolved schema to NEXT (the metadata a commit publishes) when
 * s->evolve: appended to "schemas", made current, last-column-id raised.
 * 0, or -1 out of memory. */
int ice_schema_put(const ice_sink *s, json_t *next);

/* partition.c */
/* The "partition" setting as the table's partition spec: s->spec_fields
 * and s->spec, after ice_schema_build. TM_OK, or TM_INVALID naming
 * $.sink.settings.partition and what is wrong. */
tm_status ice_partition_build(ice_sink *s, tm_error *err);
/* The table's partition spec against the setting's: TM_OK, or TM_INVALID
 * showing both (spec evolution is not supported). */
tm_status ice_partition_check(ice_sink *s, tm_error *err);
void ice_partition_free(ice_sink *s);

/* markers.c */
/* This connector's marker key prefix for a partition, allocated (free());
 * NULL out of memory. */
char *ice_marker_prefix(const ice_sink *s, const char *topic,
                        int32_t partition);
/* m's stored marker (by m->topic, m->partition) from the loaded version.
 * TM_OK, or TM_RETRY with err set. */
tm_status ice_marker_read(ice_sink *s, tm_marker *m, tm_error *err);
tm_status ice_claim(void *sink, tm_marker *markers, size_t n, uint32_t flags,
                    tm_error *err);
tm_status ice_read_markers(void *sink, tm_marker *markers, size_t n,
                           tm_error *err);
/* Unless shared_table, a table holding another connector's markers is
 * refused with REFUSE (TM_INVALID at open and validate, TM_FATAL at
 * claim), the message naming the table, the other connector and the
 * setting; so is a table whose current snapshot another engine wrote
 * (read_markers refuses it too). TM_OK, REFUSE, or TM_RETRY (out of
 * memory). */
tm_status ice_check_owner(ice_sink *s, tm_status refuse, tm_error *err);
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
 * file, not synced: the commit's barrier (ice_meta_stage) makes them
 * durable before the link. TM_OK, TM_RETRY (I/O)
 * or TM_FATAL (a row the encoder refused), err set. */
tm_status ice_write_effects(ice_sink *s, const tm_batch *b, int64_t snapshot_id,
                            ice_written *w, tm_error *err);
/* Removes files of a commit that will not be published (best effort). */
void ice_written_discard(ice_written *w);
void ice_written_free(ice_written *w);

/* commit.c */
tm_status ice_commit(void *sink, const tm_batch *batch, tm_error *err);

/* ice_auto.c: the background maintenance (docs/iceberg-lite.md,
 * "Background maintenance"). */
/* Sets up the table's hooks when "maintenance" is on. */
void ice_auto_init(ice_sink *s);
/* After batch B was committed (TM_OK), in the sink's thread: at most one
 * maintenance step (a compaction, or a vacuum), each its own commit under
 * this connector's fence. Never fails the batch: a step that fails is
 * logged and tried again after a later batch. */
void ice_auto_run(ice_sink *s, const tm_batch *b, size_t files_added);
void ice_auto_free(ice_sink *s);

/* scan.c */
tm_status ice_scan(void *sink, const char *topic, int32_t partition,
                   void *emit_ctx, tm_error *err);
#endif
