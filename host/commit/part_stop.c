/* Stopping one partition at an unsafe schema change (part_stop.h): the
 * stop is a bound on what the commit loop takes from that partition, and a
 * pause in librdkafka so that nothing more is fetched for it. */
#include "commit/part_stop.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "commit/commit_internal.h"
#include "convert/bytes_json.h"
#include "kafka/consumer_ops.h"
#include "services/log.h"

/* Pauses (1) or resumes (0) P alone in librdkafka. */
static void hold(tm_connector *c, tm_part *p, int on) {
    tm_kafka_tp tp = {p->topic, p->partition, 0, NULL};
    char why[256];
    if (tm_kafka_set_paused(c->rk, &tp, 1, on, why, sizeof why) != 0) {
        tm_log(TM_LOG_WARN, c->cfg->name, "%s %s [%" PRId32 "]: %s",
               on ? "pause" : "resume", p->topic, p->partition, why);
        return;
    }
    p->stop_held = on;
}

void tm_part_stop(tm_connector *c, tm_part *p, int64_t offset,
                  const char *why) {
    p->stopped = 1;
    p->stop_at = offset;
    p->stop_wall_ms = tm_wall_ms();
    snprintf(p->stop_why, sizeof p->stop_why, "%s", why ? why : "?");
    /* Cut to its buffer maybe inside a character: the status is JSON. */
    size_t n = strlen(p->stop_why);
    for (int k = 0; k < 4 && n > 0 && !tm_utf8_valid(p->stop_why, n); k++)
        p->stop_why[--n] = '\0';
    /* Not FAILED: the other partitions go on. DEGRADED for as long as the
     * stop lasts (runtime/connector_status.c). */
    tm_conn_error(c, 0,
                  "%s [%" PRId32 "] stopped at offset %" PRId64
                  ": %s; nothing at or past it is committed, the other "
                  "partitions go on: change the target table (or list the "
                  "columns in $.mapping) and restart",
                  p->topic, p->partition, offset, p->stop_why);
    /* The batch holds P's records before OFFSET and the other partitions'
     * records; the converter refused OFFSET and left the builder unusable,
     * so the batch is read again, this time bounded by the stop. */
    tm_commit_drop_batch(c, "a partition stopped");
}

int tm_part_stop_refuses(tm_connector *c, tm_part *p, int64_t offset) {
    if (!p->stopped || offset < p->stop_at)
        return 0;
    if (!p->stop_held) {
        /* Delivered in order from next_expected on (no seek pending):
         * every offset below stop_at was read, and those without a record
         * (transaction markers) belong to this batch's range. */
        tm_commit_extend(c, p, p->stop_at);
        hold(c, p, 1);
        /* Resumed only after a seek back to next_expected: what was
         * fetched before the pause is not to be taken. */
        p->needs_seek = 1;
    }
    return 1;
}

int tm_part_stop_may_seek(tm_connector *c, tm_part *p) {
    if (!p->stopped || !p->stop_held)
        return 1;
    if (p->next_expected >= p->stop_at)
        return 0; /* nothing before the stop left to read */
    hold(c, p, 0);
    return !p->stop_held;
}

void tm_part_stop_clear(tm_part *p) {
    p->stopped = p->stop_held = 0;
    p->stop_at = 0;
    p->stop_wall_ms = 0;
    p->stop_why[0] = '\0';
}

const tm_part *tm_part_stop_first(const tm_connector *c, size_t *count) {
    const tm_part *first = NULL;
    *count = 0;
    for (size_t i = 0; i < c->nparts; i++)
        if (c->parts[i].stopped) {
            if (!first)
                first = &c->parts[i];
            ++*count;
        }
    return first;
}
