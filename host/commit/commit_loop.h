/* Steps 2-6 of the commit protocol (../docs/architecture.md walks a batch
 * through them): poll, cut a batch by records, bytes or time, convert,
 * commit it atomically in the sink, and act on what the sink answers. */
#ifndef TM_COMMIT_LOOP_H
#define TM_COMMIT_LOOP_H

#include "kafka/consumer_ops.h"
#include "runtime/connector_state.h"

/* Makes the connector core (commit/machine.h) with the connector's batch
 * settings, once its consumer exists; tm_commit_end frees it. 0, or -1
 * with errstr. */
int tm_commit_start(tm_connector *c, char *errstr, size_t errsize);
void tm_commit_end(tm_connector *c);

/* The rebalance callback claims ASSIGNED (n of them): the machine's START
 * actions set where each starts; NULL when it returns. */
void tm_commit_assigning(tm_connector *c, tm_kafka_tp *assigned, size_t n);

/* The machine's view of each partition into c->parts (the status reads
 * it); a partition it no longer holds goes. No-op without a machine. */
void tm_commit_sync_parts(tm_connector *c);

/* Runs until *c->stop is set (then finishes or abandons the batch in
 * flight), the connector is FAILED, or the consumer failed fatally (the
 * batch in flight dropped; c->consumer_fatal set). */
void tm_commit_loop_run(tm_connector *c);

/* The rebalance callback's revoke: REVOKED (or LOST) to the machine, for
 * which a batch never outlives the assignment of its partitions. */
void tm_commit_on_revoke(tm_connector *c, const tm_kafka_tp *revoked,
                         size_t nrevoked, int lost);

/* Writes the status file when a second has passed since the last write, or
 * at once with force (runtime/connector_status.c). 1 when it wrote. */
int tm_conn_status_tick(tm_connector *c, int force);
/* The same at now (monotonic ms), a time the caller read just before: the
 * commit loop reads the clock once per record (docs/benchmarks.md). */
int tm_conn_status_tick_at(tm_connector *c, int force, int64_t now);

/* The stop's deadline (monotonic ms), 0 while the commit loop is not
 * asked to stop (*c->stop: a stop or a pause): TM_STOP_GRACE_MS from when
 * the ask was first seen, by the stop watch or by this thread, whichever
 * came first. The one deadline of a stop: the batch in flight is given up
 * there (its retries, its wait between them, the sink's commit deadline,
 * the delivery of its dead letters), and the stop watch interrupts the
 * sink there. Any thread. */
int64_t tm_stop_deadline_ms(tm_connector *c);

/* 1 once the stop's deadline is set and past: the batch in flight has had
 * its grace. Any thread. */
int tm_stop_grace_over(tm_connector *c);

/* UNTIL (monotonic ms), or the stop's deadline when it is earlier. */
int64_t tm_stop_bound_ms(tm_connector *c, int64_t until);

/* Forgets the deadline of a pause whose batch is settled (before the
 * connector clears *c->stop), so that the next stop or pause gets its
 * own; a real stop's stays. */
void tm_stop_deadline_reset(tm_connector *c);

/* How long a fenced partition waits for its revoke before it is claimed
 * again: twice the consumer's session timeout. */
int64_t tm_fenced_bound_ms(tm_connector *c);

#endif
