/* Step 1 of the commit protocol: claim on assignment, and only there. */
#ifndef TM_CLAIM_H
#define TM_CLAIM_H

#include "kafka/consumer_ops.h"
#include "runtime/connector_state.h"

/* For every partition of `assigned` (newly given to this host by the
 * group): resolve where it would start without a marker (the start policy
 * against the broker's watermarks), claim them all in the sink in one call
 * (raising their epochs), check each marker against the log's bounds, add
 * them to c->parts and set each entry's offset to the marker's next_offset
 * for the consumer's assignment. A transient error (the store or
 * the broker) outlasting a few seconds does not fail it: the partitions
 * are kept unclaimed (their offsets set to the log's end, none of their
 * records taken) and tm_claim_pending claims them later. Returns 0; -1
 * when nothing was claimed: the connector is now FAILED (the reason is in
 * c->last_error) or stopping; entries' offsets untouched. */
int tm_claim_assigned(tm_connector *c, tm_kafka_tp *assigned, size_t n);

/* The commit loop's retry of the unclaimed partitions (outside the
 * rebalance callback, between polls, so the member stays in the group),
 * with a capped backoff, for ever: one attempt when due. 0 (claimed, or
 * to be retried later), -1 when the connector is FAILED or stopping. */
int tm_claim_pending(tm_connector *c);

/* Partitions fenced (their epoch moved) for bound_ms with no revoke from
 * the group, which still gives them to this host. Their markers are read
 * again first: a marker that moved since the fence (next_offset, last
 * batch or epoch) has a live writer (a host of another group): not
 * claimed, the connector DEGRADED saying so, looked at again after
 * another bound. A marker that is gone FAILS the connector
 * (tm_claim_marker_lost): the host never creates one from its own memory.
 * Otherwise the owner is gone: claimed again, the claim returning the
 * marker and raising its epoch, so a host that still holds the old one is
 * fenced in turn. 0, or -1 when the connector is FAILED or stopping. */
int tm_claim_fenced_again(tm_connector *c, int64_t bound_ms);

/* The sink no longer holds a marker this host claimed (deleted, or the
 * sink restored from a backup that predates it): the connector FAILS. A
 * marker made again at this host's committed offset would hide every
 * record below it that the sink lost with the marker; the operator
 * decides with `tidemark offsets --reset-to`. */
void tm_claim_marker_lost(tm_connector *c, const char *topic,
                          int32_t partition);

#endif
