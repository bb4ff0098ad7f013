/* The key of a change event as verify groups a partition's events by it
 * (docs/exactly-once.md, "Deletes"). */
#ifndef TM_VERIFY_CDC_KEY_H
#define TM_VERIFY_CDC_KEY_H

#include <stddef.h>
#include <tidemark/sink.h>

/* The canonical JSON array of the key columns' values (config order) of
 * a converted record: columns[0..ncolumns) the mapping's, values the
 * record's. A float key of -0.0 is written as 0.0: both sinks store them
 * as one key (-0.0 = 0.0 in SQL). Only here: the canonical form of dedup
 * identities, stored in the sinks, keeps its sign. Malloc'd; NULL on
 * OOM. */
char *tm_verify_cdc_key(const tm_column *columns, size_t ncolumns,
                        const tm_value *values);

#endif
