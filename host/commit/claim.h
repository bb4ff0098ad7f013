/* Step 1 of the commit protocol: claim on assignment, and only there. */
#ifndef TM_CLAIM_H
#define TM_CLAIM_H

#include "runtime/connector_state.h"

/* For every partition of `assigned` (newly given to this host by the
 * group): resolve where it would start without a marker (the start policy
 * against the broker's watermarks), claim them all in the sink in one call
 * (raising their epochs), check each marker against the log's bounds, add
 * them to c->parts and set each entry's offset to the marker's next_offset
 * for rd_kafka_incremental_assign(). Returns 0; -1 when nothing was
 * claimed: the connector is now FAILED (the reason is in c->last_error) or
 * stopping; entries' offsets untouched. */
int tm_claim_assigned(tm_connector *c,
                      rd_kafka_topic_partition_list_t *assigned);

#endif
