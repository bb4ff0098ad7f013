/*
 * tidemark/store.h - helpers for sinks whose store has no transactions
 * (plain files). Static library libtidemark-store.a; pkg-config
 * tidemark-sdk gives --cflags and --libs. Everything here is POSIX and the
 * host services table; nothing of the host is linked.
 *
 * The scheme (docs/writing-a-sink.md, "Stores without transactions"):
 *   - the effects go to an append-only JOURNAL file;
 *   - the markers, and the journal's committed length, go to a MARKER FILE
 *     that is replaced atomically (temp file, fsync, rename, fsync of the
 *     directory) and carries a checksum;
 *   - publishing the marker file is the commit: journal bytes past the
 *     committed length belong to a batch that died before it, and are cut
 *     when the journal is opened for writing.
 * Every function that can fail returns a tm_status and formats err through
 * host->set_error, naming the file: TM_RETRY for I/O errors (the store may
 * come back), TM_FATAL for a damaged marker file or memory exhaustion.
 */
#ifndef TIDEMARK_STORE_H
#define TIDEMARK_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <tidemark/sink.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the marker set ---------------------------------------------------- */

#define TMS_TOPIC_MAX 256 /* Kafka topic names are at most 249 bytes */

/* One stored marker; m.topic points at topic (the entry owns it). */
typedef struct tms_marker {
    char topic[TMS_TOPIC_MAX];
    tm_marker m;
} tms_marker;

typedef struct tms_markers {
    tms_marker *v;
    size_t n, cap;
    uint64_t committed; /* the journal's committed length */
} tms_markers;

/* The stored marker of (topic, partition), or NULL. */
tm_marker *tms_find(tms_markers *ms, const char *topic, int32_t partition);
/* Copies a stored marker into OUT (one of the host's, of OUT->struct_size
 * bytes), or "absent" (epoch TM_NO_EPOCH, next_offset TM_NO_OFFSET) when
 * STORED is NULL; OUT's topic and partition stay the host's. */
void tms_fill(tm_marker *out, const tm_marker *stored);
/* claim() in memory: creates each missing marker at the offered offset
 * (TM_CLAIM_RESET: also moves existing ones and clears their lineage),
 * raises every epoch by one and fills the host's markers with the result.
 * The caller then saves the set. TM_OK or TM_FATAL (memory). */
tm_status tms_claim(const tm_host_api *host, tms_markers *ms, tm_marker *want,
                    size_t n, uint32_t flags, tm_error *err);
/* The stored markers of the batch's ranges, for host->marker_check():
 * *stored is a malloc'd array of b->nranges (free it). TM_OK or TM_FATAL. */
tm_status tms_stored(const tm_host_api *host, tms_markers *ms,
                     const tm_batch *b, tm_marker **stored, tm_error *err);
/* After the check said TM_OK and the effects are written: copies the
 * advanced STORED[i] back into the set (host->marker_advance() first). */
void tms_update(tms_markers *ms, const tm_batch *b, const tm_marker *stored);
void tms_markers_free(tms_markers *ms);

/* ---- the marker file --------------------------------------------------- */

/* Text, one marker a line, topic and batch id %-escaped, then a line with
 * the CRC-32 of everything before it. *out is malloc'd. 0 or -1 (memory). */
int tms_encode(const tms_markers *ms, char **out, size_t *len);
/* Parses an encoded file into MS (empty on entry). 0, or -1 with WHY: a
 * checksum mismatch, a missing checksum line (torn), a bad line. */
int tms_decode(const char *buf, size_t len, tms_markers *ms, char *why,
               size_t why_size);
/* Loads PATH into MS; a missing file is an empty set (committed 0). */
tm_status tms_load(const tm_host_api *host, const char *path, tms_markers *ms,
                   tm_error *err);
/* Replaces PATH atomically with MS: writes PATH.tmp, fsyncs it, calls
 * host->fault(TM_FAULT_AFTER_MARKER) when FAULTS (a commit's), renames it
 * over PATH and fsyncs the directory. A failure after the rename is
 * TM_RETRY: the outcome is unknown and the marker check settles it. */
tm_status tms_save(const tm_host_api *host, const char *path,
                   const tms_markers *ms, int faults, tm_error *err);

/* ---- the journal ------------------------------------------------------- */

typedef struct tms_journal {
    int fd;
    uint64_t len; /* bytes written so far, committed ones included */
} tms_journal;

/* Opens (creating, and then syncing its directory) the journal PATH for
 * appending and cuts it to COMMITTED: a torn tail is a batch that never
 * committed. A journal shorter than COMMITTED is damage: TM_FATAL. */
tm_status tms_journal_open(const tm_host_api *host, const char *path,
                           uint64_t committed, tms_journal *j, tm_error *err);
tm_status tms_journal_append(const tm_host_api *host, tms_journal *j,
                             const void *buf, size_t len, tm_error *err);
/* fdatasync: the appended bytes are durable once this returns TM_OK. */
tm_status tms_journal_sync(const tm_host_api *host, tms_journal *j,
                           tm_error *err);
void tms_journal_close(tms_journal *j);
/* Reads the committed part [0, committed) of PATH without writing
 * anything (for scan). *out is malloc'd and NUL-terminated; a missing
 * file with committed 0 reads as empty. */
tm_status tms_journal_read(const tm_host_api *host, const char *path,
                           uint64_t committed, char **out, size_t *len,
                           tm_error *err);

/* ---- column values as text --------------------------------------------- */

/* Writes VALUES (n of them, walked with TM_CELEM, typed by COLUMNS) to F
 * as n tokens, each after one space: "-" for null; integers, bools and
 * timestamps in decimal; floats as C99 hex floats (exact); text, JSON and
 * bytes as "x" and their bytes in hex. No token holds a space or a line
 * break, so a line can carry other fields before them. */
void tms_values_write(FILE *f, const tm_column *columns, size_t n,
                      const tm_value *values);
/* Parses what tms_values_write wrote (TEXT: up to the end of the line or
 * string) into OUT[n], in place: strings are decoded into TEXT, and OUT
 * points into it. 0, or -1 when TEXT is not n tokens of those types. */
int tms_values_parse(char *text, const tm_column *columns, size_t n,
                     tm_value *out);

/* ---- small things every file sink needs -------------------------------- */

/* Takes an exclusive fcntl() lock on PATH (created 0644); returns the fd
 * (close it to release; death releases it too) or -1 with err set. */
int tms_lock(const tm_host_api *host, const char *path, tm_error *err);
/* Sorts items by offset (rows before dead letters at one offset) and emits
 * them through host->emit until it asks to stop. */
void tms_emit_sorted(const tm_host_api *host, tm_scan_item *items, size_t n,
                     void *emit_ctx);

#ifdef __cplusplus
}
#endif
#endif /* TIDEMARK_STORE_H */
