/* The table's metadata files (format/spec.md, "Table Metadata", format
 * version 2) and the commit primitive of Iceberg's file-system tables:
 * the next v<N+1>.metadata.json is created atomically and never
 * overwritten (link() of a fully written, durable temp file fails with
 * EEXIST when another writer got there first). version-hint.text is only
 * a hint: loading probes v<hint+1>, v<hint+2>... until one is missing. */
#ifndef TM_ICE_TABLE_META_H
#define TM_ICE_TABLE_META_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Kept in the metadata log (Iceberg's write.metadata.previous-versions-max
 * defaults to 100; a few are enough to find recent versions). */
#define ICE_METADATA_LOG_MAX 10

/* How many times a commit, claim or maintenance operation starts over
 * after losing the race for the next metadata version before giving up. */
#define ICE_RACE_MAX 64

struct ice_catalog; /* catalog.h */
struct ice_table;

/* What a running connector adds to the maintenance it runs on its own
 * table (the sink's background maintenance, ice_auto.c); a table without
 * them (the CLI's) runs the operations as they are. */
typedef struct ice_owner_hooks {
    /* Checked on every version a maintenance commit builds on (after each
     * reload, so the link or the catalog's swap that publishes it is the
     * step that makes the check hold) and by vacuum before it deletes
     * anything: 0 go on; -1 refuse, why set (the connector was fenced: a
     * zombie publishes no maintenance). */
    int (*fence)(void *ctx, struct ice_table *t, char *why, size_t why_size);
    /* A crash point (tm_host_api.fault), called with ICE_FAULT_MAINT_* . */
    void (*fault)(const char *point);
    /* vacuum: 1 keeps candidate PATH this time (not referenced, but not
     * for long enough yet), 0 deletes it. */
    int (*vacuum_hold)(void *ctx, const char *path);
    /* vacuum: another vacuum holding the table's lock is waited for (0),
     * or vacuum returns at once, doing nothing (1). */
    int vacuum_nowait;
    void *ctx;
} ice_owner_hooks;

/* Crash points of a maintenance commit: its next version staged (files
 * and metadata durable), not yet linked or swapped in. */
#define ICE_FAULT_MAINT_STAGED "maint_staged"

typedef struct ice_table {
    char *root;     /* absolute path of the table directory */
    char *location; /* "file://" + root */
    char *meta_dir, *data_dir, *dl_dir;
    int fsync; /* 0 only when the user turned durability off */
    /* With fsync: the table's directory, open since ice_table_init, for
     * the commit's one barrier (syncfs, see ice_meta_stage), and metadata/,
     * data/ or dead_letters/ when one is another file system (a mount
     * point). Open that long so that a write-back error of any file
     * written since is reported to them. */
    int barrier_fds[4];
    int nbarrier;
    /* metadata/tmp-<uuid>.hint.part: this instance's spare for the hint
     * (ice_table_write_hint), made at the first hint it writes and
     * removed by ice_table_free; NULL before. */
    char *hint_spare;
    int64_t version; /* of meta; 0 when none is loaded */
    json_t *meta;    /* the current metadata */
    /* A table registered in an Iceberg SQL catalog (catalog.h): its
     * versions are the catalog row's metadata_location, published by the
     * row's compare-and-swap, not v<N>.metadata.json links. NULL: a
     * file-system table. */
    struct ice_catalog *cat;
    char *meta_loc; /* with cat: the location meta was loaded from */
    int cat_marked; /* with cat: metadata/ says a catalog manages it */
    const ice_owner_hooks *hooks; /* NULL, or the owner's (not owned) */
    /* With cat: the table-uuid of the first version loaded or published
     * ("" none yet); a row naming another is refused and replaced set. */
    char cat_uuid[64];
    int replaced;
} ice_table;

/* The longest table directory (its real path): every file the sink names
 * under it (metadata/<temp or manifest name>, data/<id>-<k>-<uuid>.parquet,
 * at most about 100 bytes more) then fits the 4096-byte path buffers, so
 * no path of ours is ever cut. Names read from metadata are checked one by
 * one (ice_path_in). */
#define ICE_ROOT_MAX 3840

/* Whether PATH can be (or is) a table directory: an existing directory,
 * or, when create, a missing one whose parent is an existing directory;
 * its real path at most ICE_ROOT_MAX bytes. Changes nothing: what
 * validate and open both check. 0; 1 it does not exist and !create; -1
 * with why. */
int ice_table_check_path(const char *path, int create, char *why,
                         size_t why_size);
/* Whether a table can be CREATED at PATH with locations readers parse:
 * the metadata names every file by a file:// URI built from the real
 * path as it is (not percent-encoded), so a '#' (a fragment), '?' (a
 * query), '%' (an escape to URI-decoding readers), a tab or a line break
 * (dropped by URI parsers) in it makes a table pyiceberg cannot open. 0; -1
 * with why naming the character (an existing table at such a path is not
 * refused: the sink and CLI still work). */
int ice_table_uri_safe(const char *path, char *why, size_t why_size);
/* Sets up paths for the table at PATH (ice_table_check_path first). create:
 * make the directories (one level for the table itself). 0; 1 the table
 * directory does not exist (and !create); -1 with why. */
int ice_table_init(ice_table *t, const char *path, int create, int fsync,
                   char *why, size_t why_size);
void ice_table_free(ice_table *t);

/* Loads the newest metadata version (a catalog table: the catalog row's,
 * ice_cat_refresh; a file-system table refuses a directory a catalog
 * manages, ice_table_not_cataloged): from the cached version, the hint or
 * the version floor, whichever is highest and still exists, probing
 * v<N+1>, v<N+2>...; when none exists any more (vacuum removed them), from
 * the directory's highest v<N> above the floor. Never a version at or
 * below the floor. Cheap when nothing changed (the floor read twice, the
 * hint and two stats). 0 loaded; 1 no metadata at all (no table yet); -1
 * with why. */
int ice_table_refresh(ice_table *t, char *why, size_t why_size);

/* Reads the metadata file at PATH (a JSON object) into *out. 0; 1 the
 * file does not exist; -1 with why. */
int ice_meta_read(const char *path, json_t **out, char *why, size_t why_size);

/* Metadata for a new table with the given schema fields (a JSON array of
 * Iceberg fields), last column id and partition spec fields (spec-id 0;
 * an empty array: unpartitioned). Returned new reference or NULL. */
json_t *ice_meta_initial(const ice_table *t, json_t *fields,
                         int64_t last_column_id, json_t *spec_fields);
/* A copy of the current metadata made ready to become the next version:
 * last-updated-ms moved on, the current file appended to the metadata log
 * (bounded). NULL on allocation failure. Copy on write: its top-level
 * members and the arrays and objects directly under "snapshots",
 * "snapshot-log", "metadata-log", "properties", "refs", "schemas",
 * "partition-specs" and "sort-orders" are its own (set, append to and
 * remove from them freely); the values below those (a snapshot, a
 * schema, a log entry) are shared with t->meta: replace them, never change
 * them in place (ice_meta_own_snapshot for a snapshot). */
json_t *ice_meta_next(const ice_table *t);
/* The snapshot ID of META (a next version) replaced by a deep copy of it,
 * which is returned, for changing in place; NULL when there is none or
 * out of memory. */
json_t *ice_meta_own_snapshot(json_t *meta, int64_t id);
/* Appends a snapshot and makes it current (refs.main, snapshot log,
 * last-sequence-number); every other ref (another engine's tags and
 * branches) is kept as it is. Steals summary. 0 or -1. */
int ice_meta_add_snapshot(json_t *meta, int64_t id, int64_t parent_id,
                          int64_t seq, const char *manifest_list,
                          json_t *summary);
/* The current snapshot object, or NULL (none). */
json_t *ice_meta_current_snapshot(json_t *meta);
/* The snapshot with id ID, or NULL. */
json_t *ice_meta_snapshot(json_t *meta, int64_t id);
/* A random snapshot id, positive and below 2^53 (JSON readers keep it
 * exact), not used by META yet. */
int64_t ice_new_snapshot_id(json_t *meta);
/* An integer member, or def when absent or not an integer. */
int64_t ice_json_int(json_t *obj, const char *key, int64_t def);
int64_t ice_now_ms(void);
/* CLOCK_MONOTONIC in ms: the clock of tm_batch.deadline_ms. */
int64_t ice_mono_ms(void);
/* CLOCK_BOOTTIME in ms: as monotonic, but counting time suspended. The
 * clock of the writers' publish bound (ice_publish_check), which must
 * see a suspend as vacuum's wall clock does; never of a deadline. */
int64_t ice_boot_ms(void);

/* Step one of publishing NEXT as version t->version + 1: written whole, as
 * compact JSON, to a temp file, then the commit's barrier (with fsync: one
 * syncfs making this file and every file the commit wrote before it, with
 * their directory entries, durable). The temp path goes into tmp (size >=
 * 4096). 0 or -1 with why (the temp file removed; the caller drops the
 * commit's other files: their durability is unknown). */
int ice_meta_stage(ice_table *t, json_t *next, char *tmp, char *why,
                   size_t why_size);
/* (A catalog table's "temp" file is the new version's final name,
 * ice_cat_new_path: the catalog row, not the name, publishes it.) */
/* Step two: link the temp file to v<version+1>.metadata.json, remove the
 * temp name, fsync the directory. 0 published (t->meta takes a reference
 * to next, t->version moves on); 1 another writer created that version
 * first (nothing published; refresh and start over); -1 failed before the
 * link (nothing published), also when v<version+1> is at or below the
 * version floor (a freed number, never linked) or past ICE_VERSION_MAX;
 * -2 linked but the directory fsync failed, or the floor covered the
 * number once linked (vacuum freed it meanwhile: the link is undone, the
 * cache dropped): the outcome is unknown. The temp file is gone in every
 * case. A catalog table (t->cat) publishes by the catalog row's
 * compare-and-swap instead (ice_cat_publish), with the same results. */
int ice_meta_link(ice_table *t, json_t *next, const char *tmp, char *why,
                  size_t why_size);
/* Replaces version-hint.text (temp + rename) with the loaded version,
 * never with a lower number than it holds (see table_meta.c). Best
 * effort: readers and the next load probe past a stale hint. 0 or -1
 * with why. */
int ice_table_write_hint(ice_table *t, char *why, size_t why_size);

/* The highest version number: far from INT64_MAX, so N + 1 never
 * overflows, and a table is never linked past it. */
#define ICE_VERSION_MAX (INT64_MAX / 2)

/* N of a file name "v<N>.metadata.json": N canonical (decimal digits, no
 * sign, no leading zero) and in [1, ICE_VERSION_MAX]; else -1, and the
 * file is not a version. */
int64_t ice_meta_version_of(const char *name);

/* metadata/version-floor: "N", the highest version number vacuum has
 * freed (or may free). Raised, durably, before vacuum deletes any version
 * at or below it; never lowered. A version at or below it is never linked,
 * probed or loaded, so a stray link of a freed number (a writer that died
 * or stalled between its link and its check) is invisible. */
#define ICE_FLOOR_FILE "version-floor"
/* The floor, 0 when there is none; -1 with why when it cannot be read or
 * is not a version number (never taken as 0). */
int64_t ice_table_floor(const ice_table *t, char *why, size_t why_size);
/* Raises the floor to FLOOR (nothing when it is already there or above):
 * temp file fsynced, rename(), metadata/ fsynced, whatever t->fsync says.
 * Callers that can race (vacuum) serialize among themselves. 0 or -1. */
int ice_table_raise_floor(ice_table *t, int64_t floor, char *why,
                          size_t why_size);
/* The directory's highest version (0 none, -1 with why), the floor not
 * applied. */
int64_t ice_table_newest_on_disk(const ice_table *t, char *why,
                                 size_t why_size);

/* The local path of a URI this plugin wrote ("file://..." or a plain
 * path); NULL for anything else. Not confined: see ice_table_path. */
const char *ice_uri_path(const char *uri);
/* The local path of REF, a file the table's metadata names: a "file://"
 * URI, an absolute path, or a path relative to ROOT. Confined: it must lie
 * under ROOT/ with no empty, "." or ".." component (metadata naming
 * /etc/passwd or ../x is refused, "outside the table"), and fit in out
 * (never cut). Reads then go through fs_read_all, which opens regular
 * files only, without following a final symlink or blocking on a FIFO.
 * 0, or -1 with why. */
int ice_path_in(const char *root, const char *ref, char *out, size_t size,
                char *why, size_t why_size);
int ice_table_path(const ice_table *t, const char *ref, char *out, size_t size,
                   char *why, size_t why_size);

#endif
