/* The poll rule (docs/configuration.md, "The poll rule: dead-letter wait
 * and commit"): an attempt to commit a batch waits for the dead-letter
 * topic, then for the sink's commit, without polling the consumer, and
 * librdkafka takes a member that does not poll within
 * max.poll.interval.ms out of its group. So both waits end within four
 * fifths of the max.poll.interval.ms in effect from the consumer's last
 * poll (c->polled_ms). */
#ifndef TM_POLL_BUDGET_H
#define TM_POLL_BUDGET_H

#include <stdint.h>

#include "runtime/connector_state.h"

/* When the dead-letter wait of an attempt starting at NOW (monotonic ms)
 * ends: $.dead_letters.delivery_timeout_ms after NOW, or earlier, so that
 * the commit after it keeps its time within the budget. */
int64_t tm_poll_budget_dlq_until(tm_connector *c, int64_t now);

/* When the sink's commit starting at NOW must end (before the stop's
 * bound): $.batch.commit_timeout_ms after NOW, or the budget's end. */
int64_t tm_poll_budget_commit_until(tm_connector *c, int64_t now);

/* The time one commit gets within the budget: $.batch.commit_timeout_ms,
 * or the budget when that is shorter (the machine's commit deadline). */
int64_t tm_poll_budget_commit_ms(tm_connector *c);

/* How long the consumer may go unpolled while the next batch, due, waits
 * for the one at the sink (the pipeline), before reads are held so that it
 * can be polled meanwhile: what leaves the next batch's attempt (its
 * dead-letter wait, its commit) its whole time within the budget, less a
 * second for the loop's own waits; 0 when nothing is left. */
int64_t tm_poll_budget_hold_after_ms(tm_connector *c);

/* Logs once per run that the configured waits do not fit the budget, and
 * what each gets. */
void tm_poll_budget_warn(tm_connector *c);

#endif
