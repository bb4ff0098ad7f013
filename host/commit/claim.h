/* Step 1 of the commit protocol: claim on assignment, and only there. The
 * connector core (commit/machine.h) decides what a claim means; here are
 * the rebalance's entry and the executors of CLAIM and READ_MARKERS
 * (commit_internal.h). */
#ifndef TM_CLAIM_H
#define TM_CLAIM_H

#include "kafka/consumer_ops.h"
#include "runtime/connector_state.h"

/* The rebalance callback's assignment (newly given to this host by the
 * group): the partitions outside the subscription are set aside (their
 * offset the log's end, none of their records taken), the others are
 * ASSIGNED to the machine, which claims them (the executor: the start
 * policy against the broker's watermarks, one claim of them all in the
 * sink, the lineage check). Each entry's offset is set to where it starts:
 * the marker's next_offset, or the log's end while its claim is deferred
 * (a transient error of the store or the broker outlasting a few seconds:
 * the machine claims it again later, between polls). 0, or -1 when the
 * connector is FAILED (the reason in c->last_error). */
int tm_claim_assigned(tm_connector *c, tm_kafka_tp *assigned, size_t n);

#endif
