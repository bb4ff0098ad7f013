#include "kafka/broker_watch.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "metrics/metrics_kafka.h"
#include "services/log.h"

int tm_broker_stats_up(const char *json, size_t len) {
    json_error_t e;
    json_t *root = json_loadb(json, len, 0, &e);
    json_t *brokers = root ? json_object_get(root, "brokers") : NULL;
    if (!json_is_object(brokers)) {
        json_decref(root);
        return -1;
    }
    int up = 0;
    const char *name;
    json_t *b;
    json_object_foreach(brokers, name, b) {
        const char *source = json_string_value(json_object_get(b, "source"));
        const char *state = json_string_value(json_object_get(b, "state"));
        /* The internal broker holds unassigned partitions and is always
         * "UP": it says nothing about the cluster. */
        if (source && strcmp(source, "internal") == 0)
            continue;
        up += state && strcmp(state, "UP") == 0;
    }
    json_decref(root);
    return up;
}

void tm_broker_watch_error(tm_connector *c, const char *name,
                           const char *reason) {
    snprintf(c->kafka_why, sizeof c->kafka_why, "%s: %s", name, reason);
}

/* No broker UP for the threshold: DEGRADED, since the brokers went down
 * (not since the threshold passed). Asserted again when something else
 * (a batch the store committed meanwhile) counted as a recovery. */
static void down(tm_connector *c, int64_t now) {
    if (!c->kafka_down_ms) {
        c->kafka_down_ms = now;
        c->kafka_down_wall_ms = tm_wall_ms();
    }
    if (now - c->kafka_down_ms < TM_KAFKA_DOWN_DEGRADED_MS ||
        (c->kafka_error_seq && c->degraded_ms))
        return;
    int was_healthy = !c->degraded_ms;
    tm_conn_error(c, 0,
                  "Kafka unreachable: no connection to any broker for %" PRId64
                  " s (librdkafka retries; the last error: %s)",
                  (now - c->kafka_down_ms) / 1000,
                  c->kafka_why[0] ? c->kafka_why : "none reported");
    if (was_healthy)
        c->degraded_ms = c->kafka_down_wall_ms;
    c->kafka_error_seq = c->error_seq;
}

void tm_broker_watch_stats(tm_connector *c, const char *json, size_t len) {
    tm_metrics_kafka_stats(c->metrics, json, len);
    int up = tm_broker_stats_up(json, len);
    if (up < 0) {
        tm_log(TM_LOG_DEBUG, c->cfg->name,
               "Kafka statistics without brokers: ignored");
        return;
    }
    if (up == 0) {
        down(c, tm_now_ms());
        return;
    }
    int ours = c->kafka_error_seq && c->error_seq == c->kafka_error_seq;
    c->kafka_down_ms = 0;
    c->kafka_error_seq = 0;
    c->kafka_why[0] = '\0';
    /* Only when the last error is still ours: a later one (the store)
     * keeps the connector DEGRADED until its own progress. */
    if (ours)
        tm_conn_recovered(c, "a Kafka broker is reachable again");
}
