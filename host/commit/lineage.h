/* The marker's lineage (docs/exactly-once.md, "A log replaced under the
 * marker"): the last applied record's offset, timestamp and hash, kept
 * with the marker and read back from Kafka at claim, so that a log which
 * is no longer the one the marker describes is never resumed silently. */
#ifndef TM_LINEAGE_H
#define TM_LINEAGE_H

#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

struct tm_connector;

/* The record hash of tm_range.last_record_hash (sink.h says the bytes). */
void tm_lineage_hash(const void *key, size_t key_len, const void *value,
                     size_t value_len, char out[TM_RECORD_HASH_MAX]);

/* Sets every range's lineage (ranges[i] for batch->ranges[i], a copy the
 * caller owns, walked with its own struct_size) from the highest-offset
 * record or dead letter the batch carries for it. */
void tm_lineage_fill_ranges(tm_range *ranges, const tm_batch *batch);

/* marker_advance's part: the range's lineage into the stored marker, when
 * both carry one and the range has a record; else the marker keeps its. */
void tm_lineage_advance(tm_marker *stored, const tm_range *r);

typedef enum tm_lineage_verdict {
    TM_LINEAGE_NONE = 0,      /* the marker keeps no lineage: no check */
    TM_LINEAGE_SAME = 1,      /* the record is the one the marker applied */
    TM_LINEAGE_UNCHECKED = 2, /* the record is gone (retention, compaction) */
    TM_LINEAGE_OTHER = 3      /* another record there: another log */
} tm_lineage_verdict;

/* Compares marker m's lineage with what Kafka holds: found is NULL when
 * the log holds no record at or past m->last_offset, else its first one
 * there (offset, timestamp, key, value). why gets what differs. Pure. */
typedef struct tm_lineage_seen {
    int64_t offset;
    int64_t timestamp_ms;
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
} tm_lineage_seen;
tm_lineage_verdict tm_lineage_compare(const tm_marker *m,
                                      const tm_lineage_seen *found, char *why,
                                      size_t whysize);

/* At claim, after the watermark checks: reads back the record each
 * claimed marker last applied (one consumer for all of them; low[i] is
 * markers[i]'s log start) and compares. A read that fails or times out is
 * retried within patience_ms (0: one attempt; a stop ends it at once).
 * 0: every log is the marker's own (or cannot be checked); -1: the
 * connector is FAILED with the reason and the reset command, or stopping;
 * TM_LINEAGE_DEFERRED: Kafka did not answer within the patience (the
 * connector DEGRADED with why): the caller retries the claim later. */
#define TM_LINEAGE_DEFERRED 1
int tm_lineage_check_claim(struct tm_connector *c, const tm_marker *markers,
                           size_t n, const int64_t *low, int64_t patience_ms);

#endif
