/* Dead letters as side files of JSON lines (dead_letters.c) and where a
 * table's dead letters are (dl_files.c): the files named by the current
 * snapshot and its ancestors, plus those of snapshots that `expire`
 * removed, which it lists in an index file named by the table property
 * ICE_DL_INDEX_KEY (so the walk never needs an expired snapshot). */
#ifndef TM_ICE_DEAD_LETTERS_H
#define TM_ICE_DEAD_LETTERS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

#include "ib_buf.h"

/* The snapshot summary key naming a snapshot's dead-letter file. */
#define ICE_DL_FILE_KEY "tidemark.dead-letters-file"
/* The table property naming the index of expired snapshots' files: its
 * segments, oldest first, separated by a space, each "PATH:BYTES" (PATH
 * relative to the table, BYTES its size); a bare PATH is the single index
 * file of a table written before segments (its size not recorded). Each
 * segment holds one dead-letter file path a line. */
#define ICE_DL_INDEX_KEY "tidemark.dead-letters-index"
/* Segments this big or bigger (or of unrecorded size) are never merged
 * again (see ice_expire_meta). */
#define ICE_DL_SEGMENT_FROZEN (INT64_C(1) << 20)

/* The next segment of the index property's text at *P (advanced past it):
 * its path into rel, its size into *bytes (-1 not recorded). 1, 0 at the
 * end, -1 a path longer than rel_size. */
int ice_dl_index_next(const char **p, char *rel, size_t rel_size,
                      int64_t *bytes);

/* DATA in standard base64 with padding, malloc'd; NULL on memory. */
char *ice_base64(const void *data, size_t n);
/* The batch's dead letters as JSON lines. 0 or -1 (memory). */
int ice_dl_encode(const tm_batch *b, ib_buf *out);
typedef int (*ice_dl_fn)(void *ctx, const char *topic, int32_t partition,
                         int64_t offset, tm_dl_reason reason,
                         const char *detail);
/* Calls fn for every dead letter of the file. 0 or -1 with why. */
int ice_dl_read(const char *path, ice_dl_fn fn, void *ctx, char *why,
                size_t why_size);

/* Called with each dead-letter file's path relative to the table root,
 * already checked to lie inside it (ice_path_in): ROOT/rel is the file.
 * Non-zero stops the walk (and is returned). */
typedef int (*ice_dl_file_fn)(void *ctx, const char *rel);
/* ROOT NULL: fn(ctx, rel) for each segment of META's dead-letter index
 * (not checked to lie in the table: ice_path_in). Else for each file the
 * segments list (checked), ROOT the table directory. 0, fn's non-zero, or
 * -1 with why (a path too long, a missing or bad segment, a file outside
 * the table). */
int ice_dl_index_each(const char *root, json_t *meta, ice_dl_file_fn fn,
                      void *ctx, char *why, size_t why_size);
/* The dead-letter files of META: the index's entries (oldest first), then
 * the current snapshot's and its ancestors'. ROOT is the table directory.
 * 0, fn's non-zero, or -1 with why (a missing or bad index, a file
 * outside the table). */
int ice_dl_files(const char *root, json_t *meta, ice_dl_file_fn fn, void *ctx,
                 char *why, size_t why_size);

#endif
