/* A partition stopped by a change it cannot apply safely (a column's type
 * narrowed, a column dropped, in the events' schemas: docs/operations.md,
 * "A stopped partition"). The record at stop_at and everything after it
 * stay in Kafka: the partition is paused in librdkafka, its marker stays at
 * or below stop_at, and the other partitions go on. Only a revoke or a
 * claim of it again ends the stop; the next owner reads stop_at again.
 * The connector core decides all of it (commit/machine.h, RECORD_STOP);
 * here are the words the status shows. */
#ifndef TM_PART_STOP_H
#define TM_PART_STOP_H

#include <stddef.h>

#include "runtime/connector_state.h"

/* The converter's words (the field and both types) into out, cut to its
 * size at a whole character: the status is JSON. */
void tm_part_stop_words(char *out, size_t size, const char *words);

/* Forgets the stop's words (a claim of P again reads stop_at again). */
void tm_part_stop_clear(tm_part *p);

/* The first stopped partition and how many are, for the status. */
const tm_part *tm_part_stop_first(const tm_connector *c, size_t *count);

#endif
