/* The host's record conversion (docs/architecture.md, step 3): consumed Kafka
 * messages in, the tm_batch a sink commits out. Every message added gets
 * exactly one outcome: a row (tm_record), a dead letter with a reason, filtered
 * (counted in its range), or an in-batch duplicate (counted in its range;
 * first occurrence wins; for change events the last event of a key wins
 * and the earlier ones are counted). docs/configuration.md, "How records
 * are converted" and "Change data capture", says the rules.
 *
 * The builder copies everything it keeps into its own storage, released by
 * tm_bb_reset; one thread uses a builder at a time. */
#ifndef TM_BATCH_BUILDER_H
#define TM_BATCH_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "config/connector_config.h"

/* One Kafka header; value NULL: a null header. */
typedef struct tm_header_view {
    const char *name;
    const void *value;
    size_t len;
} tm_header_view;

/* One consumed Kafka message, caller-owned, valid only during tm_bb_add. */
typedef struct tm_msg_view {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t timestamp_ms; /* -1: none */
    const void *key;      /* NULL: null key */
    size_t key_len;
    const void *value; /* NULL: tombstone */
    size_t value_len;
    const tm_header_view *headers;
    size_t nheaders;
} tm_msg_view;

typedef struct tm_batch_builder tm_batch_builder; /* opaque */

typedef struct tm_bb_counts {
    uint64_t rows, dead_letters, filtered, duplicates;
} tm_bb_counts;

/* NULL on OOM; cfg outlives it. Starts as after tm_bb_reset(bb, "", 0). */
tm_batch_builder *tm_bb_new(const tm_connector_config *cfg);
/* A second builder for the same connector (the pipeline builds batch N+1
 * while N is at the sink): it converts with first's converter, so that a
 * mapping without a column list has one set of columns learnt from the
 * events, whichever builder converted them (with a converter of its own
 * the second would take its first event's schema for the table's, and
 * miss a narrowed or changed type). Both builders convert on one thread;
 * first outlives it. */
tm_batch_builder *tm_bb_new_beside(tm_batch_builder *first);
void tm_bb_free(tm_batch_builder *bb);

/* Empties the batch (and the in-batch dedup index); copies batch_id. */
void tm_bb_reset(tm_batch_builder *bb, const char *batch_id,
                 int64_t deadline_ms);

/* Opens the range of one partition (start_offset = consumer position, end
 * = start until records arrive). The same topic+partition again in one
 * batch returns the existing index (its start and epoch unchanged). -1 on
 * OOM (or while the builder is unusable, see tm_bb_add). */
int tm_bb_range(tm_batch_builder *bb, const char *topic, int32_t partition,
                int64_t start_offset, int64_t epoch);

/* Converts one message into range `range` (messages arrive in offset order
 * per partition; offset >= the range's end); sets the range's end_offset =
 * offset + 1. 0 ok, -1 OOM or bad range or offset, -2 the message's schema
 * changes the columns unsafely (a mapping without a column list:
 * tm_bb_stopped says which field and both types; the message has no
 * outcome and its partition must stop). After -1 or -2 the batch is
 * unusable until reset: tm_bb_batch returns NULL. */
int tm_bb_add(tm_batch_builder *bb, uint32_t range, const tm_msg_view *m);

/* The batch is dropped, its events to be converted again: what they
 * taught the converter (a mapping without a column list: columns, the
 * required flag of columns added after deletes only) is forgotten, so
 * that a batch before it built again converts as the first time and the
 * columns come back with the events that bring them. Also forgets what a
 * batch built beside it after it taught (dropped with it). */
void tm_bb_unlearn(tm_batch_builder *bb);

/* Why the last tm_bb_add returned -2 (until reset), else NULL. */
const char *tm_bb_stopped(const tm_batch_builder *bb);

/* Moves a range's end to end_offset without a record (position past
 * transaction control records); never backwards. */
void tm_bb_extend(tm_batch_builder *bb, uint32_t range, int64_t end_offset);

/* The batch for the sink's commit: struct_size everywhere, connector =
 * cfg->name, ranges, records, dead letters, and for a mapping without a
 * column list the columns the events' schemas gave so far (ABI 1.6). Same
 * content on repeated calls (a RETRY sends it again); valid until reset/free.
 * NULL while the builder is unusable (a failed tm_bb_add or tm_bb_reset, until
 * the next reset). */
const tm_batch *tm_bb_batch(tm_batch_builder *bb);

size_t tm_bb_messages(const tm_batch_builder *bb); /* added since reset */
/* The bytes the batch's storage holds (its arena: message copies, values,
 * strings), for tests of how it grows with the batch. */
size_t tm_bb_memory(const tm_batch_builder *bb);
/* Key + value + header (name and value) bytes added since reset, for
 * batch.max_bytes. */
size_t tm_bb_bytes(const tm_batch_builder *bb);
/* What one message counts towards them: key, value, headers' names and
 * values. */
size_t tm_bb_message_bytes(const tm_msg_view *m);
/* This batch's outcomes as the host knows them. The function is
 * tm_bb_get_counts because C has one name space for types and functions;
 * the macro lets callers write tm_bb_counts(bb, &c) next to a variable
 * `tm_bb_counts c` (a function-like macro expands only before '('). */
void tm_bb_get_counts(const tm_batch_builder *bb, tm_bb_counts *out);
#define tm_bb_counts(bb, out) tm_bb_get_counts((bb), (out))

#endif
