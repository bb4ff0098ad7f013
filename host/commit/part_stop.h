/* A partition stopped by a change it cannot apply safely (a column's type
 * narrowed, a column dropped, in the events' schemas: docs/operations.md,
 * "A stopped partition"). The record at stop_at and everything after it
 * stay in Kafka: the partition is paused in librdkafka, its marker stays at
 * or below stop_at, and the other partitions go on. Only a revoke (the
 * tm_part goes) or a claim of it again (commit/claim.c) ends the stop; the
 * next owner reads stop_at again. */
#ifndef TM_PART_STOP_H
#define TM_PART_STOP_H

#include <stdint.h>

#include "runtime/connector_state.h"

/* Stops P at OFFSET for WHY (the converter's words: the field and both
 * types). The open batch is dropped and read again without OFFSET: what
 * came before it on P, and the other partitions, commit as usual. */
void tm_part_stop(tm_connector *c, tm_part *p, int64_t offset, const char *why);

/* Whether a message of P at OFFSET must not be taken: P is stopped and
 * OFFSET is at or past where it stopped. The first such message also
 * pauses P in librdkafka, and carries the open batch's range of P up to
 * stop_at when everything before it was read (the marker ends at stop_at
 * exactly). */
int tm_part_stop_refuses(tm_connector *c, tm_part *p, int64_t offset);

/* Before a seek of P: a stopped P paused in librdkafka whose batch was
 * dropped (next_expected below stop_at again) is resumed to read up to
 * stop_at once more. 1 when P may be sought, 0 when it stays as it is. */
int tm_part_stop_may_seek(tm_connector *c, tm_part *p);

/* Forgets the stop (a claim of P again reads stop_at again). */
void tm_part_stop_clear(tm_part *p);

/* The first stopped partition and how many are, for the status. */
const tm_part *tm_part_stop_first(const tm_connector *c, size_t *count);

#endif
