/* Marker keys in table metadata. The current snapshot's summary carries
 * every partition's marker under ICE_MARKER_PREFIX "<connector>/<topic>/
 * <partition>." then a field; epochs and claim records live in the table
 * properties (a claim is a metadata commit without a snapshot). Shared by
 * the plugin (commit, claim, read_markers) and the maintenance operations
 * (compact carries the markers unchanged into its replace snapshot). */
#ifndef TM_ICE_MARKER_KEYS_H
#define TM_ICE_MARKER_KEYS_H

#include <jansson.h>
#include <stddef.h>
#include <tidemark/sink.h>

/* Topic names cannot hold '/', so the key is unambiguous. Keys are
 * built in allocated buffers: a connector or topic name of any length
 * makes a whole key, never a cut one that two partitions would share. */
#define ICE_MARKER_PREFIX "tidemark.marker."
/* What every summary key of ours starts with (markers, connector, batch
 * id, dead letters): a snapshot without one is another engine's. */
#define ICE_OWN_KEY_PREFIX "tidemark."

#define ICE_F_NEXT    "next-offset"
#define ICE_F_BATCH   "batch-id"
#define ICE_F_ROWS    "rows"
#define ICE_F_DLS     "dead-letters"
#define ICE_F_FILTER  "filtered"
#define ICE_F_DUPS    "duplicates"
#define ICE_F_EPOCH   "epoch"
#define ICE_F_CLAIMED "claimed"
/* The marker's lineage (ABI 1.1): in the summary, and in the properties
 * beside the claim's record ("last_offset,last_timestamp_ms,hash") so
 * that a claim carries it (a reset claim clears it). Absent in a table
 * written before: no lineage, no check. */
#define ICE_F_LAST         "last-offset"
#define ICE_F_LAST_TS      "last-timestamp-ms"
#define ICE_F_LAST_HASH    "last-record-hash"
#define ICE_F_CLAIMED_LAST "claimed-lineage"

/* A formatted string in a new allocation (free()), or NULL (out of
 * memory or a bad format). */
char *ice_strfmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* ICE_MARKER_PREFIX "<connector>/<topic>/<partition>." allocated, or
 * NULL (out of memory). */
char *ice_marker_prefix_new(const char *connector, const char *topic,
                            int32_t partition);
/* The stored marker behind PREFIX in META (everything but topic,
 * partition and struct_size): absent is epoch TM_NO_EPOCH, next_offset
 * TM_NO_OFFSET. A claim's record wins over a summary of a sequence number
 * not above the claim's. 0, or -1: out of memory or a stored batch id
 * longer than TM_BATCH_ID_MAX (never cut). */
int ice_marker_get(json_t *meta, const char *prefix, tm_marker *m);
/* Every marker known to META (as ice_marker_get resolves it), as summary
 * keys of a new snapshot, so the new current snapshot alone answers
 * read_markers with the same values. 0 or -1. */
int ice_markers_carry(json_t *meta, json_t *summary);
int ice_marker_put_summary(json_t *summary, const char *prefix,
                           const tm_marker *m);
/* Only the current snapshot carries markers: a commit moves them from
 * its parent into its own summary and leaves in the parent's this key,
 * naming the snapshot they moved to (as a string). The metadata then
 * holds one set of markers, not one per snapshot kept. A current snapshot
 * holding the key was made current again by a rollback: its markers are
 * gone, and it is refused rather than read as "no markers". */
#define ICE_MARKERS_MOVED_KEY "tidemark.markers-moved-to"
/* Removes every marker key from the summary of SNAP (the parent of a new
 * snapshot: the next metadata's own copy of it, ice_meta_own_snapshot)
 * and sets ICE_MARKERS_MOVED_KEY to SUCCESSOR. 0 or -1 (out of memory). */
int ice_markers_move(json_t *snap, int64_t successor);

/* obj[prefix field] = value (a string). 0 or -1. */
int ice_marker_put(json_t *obj, const char *prefix, const char *field,
                   const char *value);

/* Whether META holds markers of a connector other than CONNECTOR: 1
 * (*other its name, allocated), 0 none, -1 out of memory. */
int ice_marker_other_connector(json_t *meta, const char *connector,
                               char **other);

#endif
