/* Iceberg v2 manifests and manifest lists (format/spec.md, "Manifests",
 * "Manifest Lists"), as Avro files with the spec's field ids and header
 * keys, and their read-back (the plugin's own files only: the fields are
 * decoded in the order manifest.c writes them). */
#ifndef TM_ICE_MANIFEST_H
#define TM_ICE_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "ib_buf.h"
#include "pspec.h"

/* manifest_entry.status */
enum { ICE_EXISTING = 0, ICE_ADDED = 1, ICE_DELETED = 2 };

/* One data file with its snapshot and sequence numbers resolved (the
 * values an ADDED entry inherits from its manifest list entry filled in). */
typedef struct ice_datafile {
    char *path; /* as recorded: a file:// URI */
    int64_t records, size;
    int64_t snapshot_id, seq, file_seq;
    /* data_file.partition as Avro bytes (pspec.h; none when unpartitioned)
     * and the column metrics fields (metrics.h; none in entries written
     * before metrics): carried as they are into a later manifest. Owned,
     * NULL when empty. */
    uint8_t *part, *metrics;
    size_t part_len, metrics_len;
} ice_datafile;

/* acc += v for counts and sizes read from table files (a crafted or
 * corrupt manifest can hold any int64): 0, or -1 when v is negative or the
 * sum would overflow (acc unchanged). */
static inline int ice_count_add(int64_t *acc, int64_t v) {
    int64_t sum;
    if (v < 0 || __builtin_add_overflow(*acc, v, &sum))
        return -1;
    *acc = sum;
    return 0;
}

/* One manifest_file record of a manifest list. */
typedef struct ice_mfile {
    char *path;
    int64_t length;
    int64_t seq, min_seq, added_snapshot_id;
    int32_t added_files, existing_files, deleted_files;
    int64_t added_rows, existing_rows, deleted_rows;
} ice_mfile;

/* A manifest of files[0..n): those with snapshot_id == snapshot_id are
 * ADDED (sequence numbers left null: inherited from the list), the others
 * EXISTING with their values. table_schema is the table's schema JSON
 * (the "schema" header key), spec its partition spec (the
 * "partition-spec" key and the type of data_file.partition). Appends the
 * file to out; 0 or -1 (memory). */
int ice_manifest_encode(const ice_datafile *files, size_t n,
                        int64_t snapshot_id, const char *table_schema,
                        const ice_pspec *spec, ib_buf *out);
/* The manifest list of snapshot snapshot_id (parent < 0: none). */
int ice_manifest_list_encode(const ice_mfile *m, size_t n, int64_t snapshot_id,
                             int64_t parent_id, int64_t seq, ib_buf *out);

/* Decodes a manifest list into a malloc'd array. 0 or -1 (malformed or
 * memory). */
int ice_manifest_list_decode(const uint8_t *data, size_t len, ice_mfile **out,
                             size_t *n);
/* Decodes the live entries (ADDED, EXISTING) of the manifest MF, appending
 * them to *files (grown with realloc; *n and *cap updated). 0 or -1. */
int ice_manifest_decode(const uint8_t *data, size_t len, const ice_mfile *mf,
                        ice_datafile **files, size_t *n, size_t *cap);

/* Merging manifests as a commit appends (Iceberg's fast append with
 * commit.manifest.min-count-to-merge), by size tiers so that a commit's
 * cost does not grow with the table: a manifest of e entries is in tier
 * floor(log8(e)); when a tier (counting the smaller ones and the manifest
 * the commit is writing) reaches ICE_MERGE_MIN_COUNT manifests, they are
 * merged into the commit's manifest, which may then fill the next tier,
 * and so on. Each entry is thus rewritten once per tier, and a list holds
 * fewer than ICE_MERGE_MIN_COUNT manifests per tier. Manifests of
 * ICE_MANIFEST_FROZEN entries or more (about 8 MB, Iceberg's
 * commit.manifest.target-size-bytes) are never merged again. */
#define ICE_MERGE_MIN_COUNT 8
#define ICE_MANIFEST_FROZEN 32768
/* Marks in merge[0..n) the manifests of mf[0..n) to merge into the
 * manifest of a commit adding new_entries files. Returns how many. */
size_t ice_manifests_to_merge(const ice_mfile *mf, size_t n,
                              int64_t new_entries, unsigned char *merge);

/* The same tiers over any sizes: marks in merge[0..n) the items of
 * size[0..n) to merge into one forming of FORMING; items of FROZEN or more
 * (or of a negative size) are never merged. Returns how many. */
size_t ice_tiers_to_merge(const int64_t *size, size_t n, int64_t forming,
                          int64_t frozen, unsigned char *merge);

void ice_mfiles_free(ice_mfile *m, size_t n);
void ice_datafiles_free(ice_datafile *f, size_t n);
/* Frees what one entry owns (path, partition, metrics). */
void ice_datafile_clear(ice_datafile *f);
/* Copies bytes into *dst (malloc'd, NULL when n is 0). 0 or -1. */
int ice_bytes_dup(uint8_t **dst, size_t *dst_len, const uint8_t *p, size_t n);

#endif
