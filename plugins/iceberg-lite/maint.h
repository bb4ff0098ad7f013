/* Reading a table's rows back and the maintenance operations, on a table
 * opened with ice_table_init (create 0) and loaded with ice_table_refresh.
 * Each operation that changes the table is a commit like the sink's: the
 * next v<N+1>.metadata.json is created with link(), and losing the race
 * (EEXIST) means reload, rebuild on top of the winner and try again, so a
 * running connector and a maintenance run never lose each other's commit.
 * Every failure fills why with the file and what was wrong. */
#ifndef TM_ICE_MAINT_H
#define TM_ICE_MAINT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "manifest.h"
#include "parquet_reader.h"
#include "parquet_writer.h"
#include "table_meta.h"

/* ---- file_rows.c: a data file's rows, every column ---- */

/* The Parquet columns of META's current schema (names point into META).
 * 0, or -1 with why (an unknown type). */
int ice_schema_columns(json_t *meta, pq_column_def **cols, size_t *ncols,
                       char *why, size_t why_size);
/* The current schema's fields (a JSON array, borrowed from META), or
 * NULL. */
json_t *ice_schema_fields(json_t *meta);
/* The Parquet kind of an Iceberg type name this sink writes: 0, or -1. */
int ice_type_kind(const char *type, pq_kind *kind);
/* The current schema as JSON text (the "schema" header of manifests and
 * the iceberg.schema footer key), malloc'd; NULL on memory. */
char *ice_schema_text(json_t *meta);
/* Called per row with one cell per column, in the file's column order. */
typedef int (*ice_row_fn)(void *ctx, const pq_cell *cells, size_t ncols);
/* Reads every row of the data file URI (a file:// URI or a path). 0; fn's
 * non-zero; -1 with why. */
int ice_file_rows(const char *uri, ice_row_fn fn, void *ctx, char *why,
                  size_t why_size);
/* The same, one cell per column of COLS (a schema's columns, e.g.
 * ice_schema_columns), matched to the file's columns by field id: a
 * column the file lacks (added to the table after the file was written)
 * is null in every row; one of another physical type is refused. */
int ice_file_rows_as(const char *uri, const pq_column_def *cols, size_t ncols,
                     ice_row_fn fn, void *ctx, char *why, size_t why_size);

/* ---- maint_commit.c: the publish loop shared by the operations ---- */

/* Files an operation wrote for one attempt, removed when the attempt is
 * not published (never after: they belong to the table then). */
typedef struct ice_own {
    char (*paths)[4096];
    size_t n, cap;
} ice_own;
/* 0, or -1: out of memory, or a path longer than a slot (never cut). */
int ice_own_add(ice_own *o, const char *path);
void ice_own_drop(ice_own *o); /* unlinks and forgets them */
void ice_own_free(ice_own *o); /* forgets them */

/* Builds the next metadata on top of t->meta (the newest version): 0 with
 * *next set, 1 nothing to do, -1 with why. */
typedef int (*ice_build_fn)(ice_table *t, void *ctx, json_t **next, char *why,
                            size_t why_size);
/* Right before the link (publish_check.c): the publish check
 * (ice_publish_check) of the files the staged version names that the
 * operation wrote and of STAGED, the staged metadata file itself: they
 * are all there, in time. STAGED is judged like the others: the link
 * fails if it is gone, but a catalog's swap publishes it by its name, and
 * a vacuum takes it as an orphan once it looks old. 0, or -1 with why
 * (nothing published). */
typedef int (*ice_check_fn)(void *ctx, const char *staged, char *why,
                            size_t why_size);
/* Loads the newest version, builds, stages, checks (check is required)
 * and links, again after each lost race (up to ICE_RACE_MAX). 0
 * published; 1 nothing to do; -1 failed (nothing published); -2 linked,
 * but the directory fsync failed (outcome unknown). */
int ice_maint_commit(ice_table *t, ice_build_fn build, ice_check_fn check,
                     void *ctx, char *why, size_t why_size);
/* The manifests of a new snapshot, shared by the sink's commit and the
 * maintenance: the manifest list of snapshot snapshot_id holds the
 * manifests keep[0..nkeep) as they are, then (when n > 0) one new manifest
 * of files[0..n) (those of snapshot_id ADDED, the rest EXISTING with their
 * sequence numbers). Both new files go under metadata/, recorded in own,
 * then metadata/ is fsynced. The list's URI into list_uri (4200 bytes);
 * what the snapshot holds into *total_files / *total_rows. 0 or -1 with
 * why. */
int ice_write_snapshot_manifests(
    ice_table *t, const ice_mfile *keep, size_t nkeep,
    const ice_datafile *files, size_t n, int64_t snapshot_id, int64_t parent_id,
    int64_t seq, const char *schema_json, ice_own *own, char *list_uri,
    int64_t *total_files, int64_t *total_rows, char *why, size_t why_size);
/* summary[key] = "<v>". 0 or -1. */
int ice_sum_int(json_t *summary, const char *key, int64_t v);

/* ---- publish_check.c: before a writer links (docs/iceberg-lite.md,
 * "Vacuum beside writers") ---- */
/* The longest a writer takes from writing a file to publishing the version
 * naming it: past this it publishes nothing (the host's commit deadline,
 * $.batch.commit_timeout_ms, is at most this long too). */
#define ICE_PUBLISH_MAX_MS INT64_C(240000)
/* The default age floor of background vacuum (maintenance_min_age_seconds):
 * no file younger than this (by its mtime) is deleted. ICE_PUBLISH_MAX_MS
 * and a margin of 60 s for a writer stalled between its check and its
 * link. */
#define ICE_VACUUM_MIN_AGE_S 300
/* Tests only, beside the host's TIDEMARK_FAULT* variables: a stall of
 * this many ms (at most ICE_FAULT_STALL_MAX_MS) taken to pass between a
 * writer's files and its publish check, which then refuses as after a
 * real stall (a SIGSTOP, a swap's wait) without the test waiting. */
#define ICE_FAULT_STALL_ENV    "TIDEMARK_FAULT_STALL_MS"
#define ICE_FAULT_STALL_MAX_MS INT64_C(86400000)
/* The files a writer wrote for the version it is about to publish. */
typedef struct ice_pub_files {
    const ice_datafile *data; /* data[0..ndata) */
    size_t ndata;
    const ice_own *own; /* NULL: none */
    /* Single files (a dead-letter file, an index, the staged metadata
     * file): NULL or "" for none. */
    const char *more[3];
} ice_pub_files;
/* The publish check, last before a writer's link or swap (every writer:
 * the sink's commit and claim, compaction, expiry): every file of F is
 * there (a stat each) and, when MAX_MS > 0, they were written at most
 * MAX_MS ago (ICE_PUBLISH_MAX_MS for every writer beside a vacuum), by
 * the larger of two ages: the time since WRITTEN_MS (ice_boot_ms, taken
 * before the first of them), and the oldest file's mtime against this
 * host's wall clock, as vacuum judges it; a mtime ahead of the wall
 * clock is no age by the mtime (the boot clock's still counts); the test
 * stall of ICE_FAULT_STALL_ENV is added. 0 publish; 1 a file is gone
 * (why); 2 too late (why); -1 a stat failed (why). */
int ice_publish_check(const ice_pub_files *f, int64_t written_ms,
                      int64_t max_ms, char *why, size_t why_size);
/* The first age alone (the stall counted), for a writer's own progress
 * bound before it has files to judge: 0 while at most MAX_MS have passed
 * since WRITTEN_MS (ice_boot_ms); 1 past it (why). */
int ice_publish_in_time(int64_t written_ms, int64_t max_ms, char *why,
                        size_t why_size);

/* ---- maint_compact.c ---- */
typedef struct ice_compact_result {
    int64_t snapshot_id;
    size_t files_in, files_out; /* small files replaced, files written */
    int64_t rows;               /* rows rewritten */
    int more;                   /* stopped taking files at the work bound (see
                                   ice_compact_opts.max_age_ms): run again for the rest */
} ice_compact_result;
/* Rewrites the current snapshot's data files smaller than target_size
 * (at least two of them) into files of up to target_size, as one snapshot
 * of operation "replace" whose summary carries every marker unchanged,
 * under the writers' bound (max_age_ms ICE_PUBLISH_MAX_MS: an operator's
 * compaction runs beside connectors' vacuums too). 0 done; 1 nothing to
 * compact; -1 / -2 as ice_maint_commit. */
int ice_compact(ice_table *t, int64_t target_size, ice_compact_result *res,
                char *why, size_t why_size);
/* What a compaction takes (ice_compact: target_size for the first two,
 * no cap, at least two files, zstd). */
typedef struct ice_compact_opts {
    int64_t target;      /* bytes of a new file */
    int64_t small_below; /* a file smaller than this is rewritten */
    /* At most this many bytes of files rewritten, the smallest first: the
     * bound on one run's work. */
    int64_t max_bytes;
    size_t min_files; /* fewer small files than this: nothing to do */
    /* 1: a file joins the ones taken (smallest first) only while it is no
     * larger than all of them together, so a file that grew by earlier
     * compactions is rewritten only once as much new data came (each row
     * rewritten about log2(target / new file size) times, as in a binary
     * counter, not once per compaction). */
    int similar_sizes;
    pq_codec codec; /* of the new files' pages */
    /* NULL, or asked before each file is read: non-zero stops the
     * compaction there (nothing published, its files removed), so that a
     * stop or a deadline waits for one small file, not a whole target. */
    int (*stop)(void *ctx);
    void *stop_ctx;
    /* > 0: nothing published once the first new file is older than this
     * (ice_publish_check with ICE_PUBLISH_MAX_MS, a connector's and
     * ice_compact's), and the rewrite stops at the first file read past
     * it; 0: no bound (only for a table no vacuum with an age floor runs
     * beside: the files are still checked to be there). */
    int64_t max_age_ms;
} ice_compact_opts;
int ice_compact_with(ice_table *t, const ice_compact_opts *o,
                     ice_compact_result *res, char *why, size_t why_size);

/* ---- maint_expire.c ---- */
/* Keeps the current snapshot and its keep-1 newest ancestors and drops the
 * other snapshots from the metadata (and from the snapshot log). The
 * markers live in the current snapshot, which is always kept; the
 * dropped snapshots' dead-letter files move into the dead-letter index
 * (dead_letters.h). Files are not deleted: vacuum does that. *removed:
 * snapshots dropped. 0 done; 1 nothing to drop; -1 / -2 as
 * ice_maint_commit. */
int ice_expire(ice_table *t, size_t keep, size_t *removed, char *why,
               size_t why_size);
/* The same on META, a next version being built (the sink's commit calls
 * it for its keep_snapshots setting, after adding its snapshot); the
 * snapshots refs other than main name are kept too. When snapshots the
 * dead-letter walk reaches no longer do (dropped, or kept only for a ref
 * past a dropped one) and name dead-letter files, one new index segment
 * holds them (with the segments it merges) and its path is put in
 * index_path (4096 bytes, "" when none; durable at the caller's barrier):
 * the caller removes it if META is not published. *removed: snapshots
 * dropped (0 when there are at most keep). 0 or -1 with why. */
int ice_expire_meta(const ice_table *t, json_t *meta, size_t keep,
                    char *index_path, size_t *removed, char *why,
                    size_t why_size);

/* ---- maint_vacuum.c ---- */
/* The longest grace period vacuum takes (100 years, in seconds). */
#define ICE_GRACE_MAX INT64_C(3153600000)
/* Called for each file vacuum removes (its path). */
typedef void (*ice_vacuum_fn)(void *ctx, const char *path);
/* Removes the files under data/, dead_letters/ and metadata/ that no
 * snapshot of the newest metadata references (nor the dead-letter index,
 * nor the current and logged metadata versions, nor version-hint.text)
 * and whose last change is more than grace_seconds old: what crashed or
 * lost commits left, and what expire and compact made unreachable. Not a
 * commit (nothing in the metadata changes): a file a commit in flight will
 * name is younger than the grace period when it is at least
 * ICE_VACUUM_MIN_AGE_S (writers publish nothing older than
 * ICE_PUBLISH_MAX_MS). Deletes nothing when the version
 * it loaded is not the directory's highest (a catalog table: when the
 * catalog's row moved meanwhile; it has no floor); raises the version floor
 * (table_meta.h), durably, before it deletes any metadata version; lists
 * and deletes through the table's directories opened without following
 * symlinks; two vacuums exclude each other (a lock on metadata/). With
 * the owner's hooks (table_meta.h): nothing deleted when its fence
 * refuses; a candidate its vacuum_hold holds stays; with vacuum_nowait, 1
 * (nothing done) when another vacuum holds the lock. 0 or -1 with why. */
int ice_vacuum(ice_table *t, int64_t grace_seconds, ice_vacuum_fn fn, void *ctx,
               size_t *removed, char *why, size_t why_size);

#endif
