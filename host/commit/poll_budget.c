#include "commit/poll_budget.h"

#include <inttypes.h>

#include "kafka/consumer_ops.h"
#include "services/log.h"

/* The consumer is not polled while an attempt waits for the dead-letter
 * topic and then for the sink's commit: past max.poll.interval.ms without
 * a poll, librdkafka takes the member out of its group (MAXPOLL: its
 * partitions revoked, a static member fenced, its consumer made again).
 * So both waits of an attempt end within four fifths of that interval
 * from the last poll; the fifth left is the margin for what comes before
 * the next poll (the status, a seek, a sink late at its deadline). The
 * commit keeps its $.batch.commit_timeout_ms when it fits, and the
 * dead-letter wait gets what is left before it (docs/configuration.md). */
#define POLL_SHARE_NUM 4
#define POLL_SHARE_DEN 5

static int64_t poll_budget_ms(tm_connector *c) {
    return tm_kafka_consumer_max_poll_ms(c->rk) / POLL_SHARE_DEN *
           POLL_SHARE_NUM;
}

int64_t tm_poll_budget_commit_ms(tm_connector *c) {
    int64_t budget = poll_budget_ms(c);
    return c->cfg->batch.commit_timeout_ms < budget
               ? c->cfg->batch.commit_timeout_ms
               : budget;
}

/* The loop's own waits between two looks at the time (a collect of up to
 * 100 ms, a status write) and the step that pauses. */
#define HOLD_MARGIN_MS 1000

int64_t tm_poll_budget_hold_after_ms(tm_connector *c) {
    int64_t dlq = c->dlq ? c->cfg->dead_letters.delivery_timeout_ms : 0,
            left = poll_budget_ms(c) - dlq - tm_poll_budget_commit_ms(c) -
                   HOLD_MARGIN_MS;
    return left > 0 ? left : 0;
}

/* Said once per run when the configured waits do not fit together (the
 * dead-letter wait only with a dead-letter topic). */
void tm_poll_budget_warn(tm_connector *c) {
    int64_t budget = poll_budget_ms(c),
            dlq = c->dlq ? c->cfg->dead_letters.delivery_timeout_ms : 0;
    if (c->poll_cut_warned || dlq + c->cfg->batch.commit_timeout_ms <= budget)
        return;
    c->poll_cut_warned = 1;
    if (!c->dlq) {
        tm_conn_log(c, TM_LOG_WARN, NULL, -1, c->batch_id,
                    "$.batch.commit_timeout_ms (%" PRId64
                    ") passes 4/5 of max.poll.interval.ms (%" PRId64
                    "): each commit waits at most %" PRId64
                    " ms, so that the consumer is polled in time",
                    c->cfg->batch.commit_timeout_ms,
                    tm_kafka_consumer_max_poll_ms(c->rk), budget);
        return;
    }
    tm_conn_log(c, TM_LOG_WARN, NULL, -1, c->batch_id,
                "$.dead_letters.delivery_timeout_ms (%" PRId64
                ") and $.batch.commit_timeout_ms (%" PRId64
                ") together pass 4/5 of max.poll.interval.ms (%" PRId64
                "): each attempt waits at most %" PRId64
                " ms for the dead-letter topic and %" PRId64
                " ms for the commit, so that the consumer is polled in time",
                dlq, c->cfg->batch.commit_timeout_ms,
                tm_kafka_consumer_max_poll_ms(c->rk),
                budget - tm_poll_budget_commit_ms(c),
                tm_poll_budget_commit_ms(c));
}

int64_t tm_poll_budget_dlq_until(tm_connector *c, int64_t now) {
    int64_t until = now + c->cfg->dead_letters.delivery_timeout_ms,
            room =
                c->polled_ms + poll_budget_ms(c) - tm_poll_budget_commit_ms(c);
    return room < until ? room : until;
}

int64_t tm_poll_budget_commit_until(tm_connector *c, int64_t now) {
    int64_t until = now + c->cfg->batch.commit_timeout_ms,
            room = c->polled_ms + poll_budget_ms(c);
    return room < until ? room : until;
}
