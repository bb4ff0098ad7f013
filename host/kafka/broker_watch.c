#include "kafka/broker_watch.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics_kafka.h"
#include "services/log.h"

static const char *str(json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static int64_t num(json_t *o, const char *key, int64_t missing) {
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : missing;
}

/* A broker the cluster told about: not librdkafka's internal broker
 * (holds unassigned partitions, always "UP"), not a logical one (the
 * group coordinator, a second connection to a learned broker), not a
 * bootstrap entry whose node is unknown (a bootstrap address that answers
 * says nothing of the brokers the cluster advertises). */
static int learned(json_t *b) {
    const char *source = str(b, "source");
    return strcmp(source, "internal") != 0 && strcmp(source, "logical") != 0 &&
           num(b, "nodeid", -1) >= 0;
}

/* How long the learned broker b has been unreachable in ms, 0 when it is
 * live; -1 when it is not but the document does not say since when (a
 * state entered anew at each reconnection attempt). */
static int64_t broker_dead_ms(const char *name, json_t *b, char *why,
                              size_t why_size) {
    if (strcmp(str(b, "state"), "UP") != 0) {
        snprintf(why, why_size, "broker %s: connection %s", name,
                 str(b, "state"));
        return -1;
    }
    int64_t waiting = num(b, "waitresp_cnt", 0);
    int64_t rxidle_ms = num(b, "rxidle", -1) / 1000;
    if (waiting <= 0 || rxidle_ms < TM_KAFKA_STALL_MS)
        return 0;
    snprintf(why, why_size,
             "broker %s: connected, but %" PRId64
             " request(s) unanswered and nothing received for %" PRId64 " s",
             name, waiting, rxidle_ms / 1000);
    return rxidle_ms;
}

/* A learned broker librdkafka has not tried to connect to: with sparse
 * connections a host with nothing to fetch from it (a standby, more hosts
 * than partitions) leaves it so for as long as it runs. Neither live nor
 * dead: it says nothing of whether the cluster answers. */
static int idle(json_t *b) {
    return strcmp(str(b, "state"), "INIT") == 0;
}

/* The learned broker with this node id (its name in *name), NULL when
 * there is none. */
static json_t *broker_by_id(json_t *brokers, int64_t id, const char **name) {
    json_t *b;
    json_object_foreach(brokers, *name, b) {
        if (learned(b) && num(b, "nodeid", -1) == id)
            return b;
    }
    return NULL;
}

/* The group coordinator's own connection (a logical broker with the node
 * id of the coordinator, connected to the address the cluster advertises
 * for it), up and answering while the learned broker of its node is idle:
 * it shows an advertised broker answers (a bootstrap address that is an
 * alias of the advertised one: the learned entry stays INIT). Not when
 * that learned broker is trying and failing or stalled: its fate is the
 * node's, the coordinator's connection may just be quiet. */
static int coordinator_live(json_t *brokers, json_t *b) {
    char why[300];
    const char *name = NULL;
    json_t *node = strcmp(str(b, "source"), "logical") == 0
                       ? broker_by_id(brokers, num(b, "nodeid", -1), &name)
                       : NULL;
    return node && idle(node) && broker_dead_ms("", b, why, sizeof why) == 0;
}

/* 1 when a partition assigned to this consumer has no live leader. */
static int leaderless(json_t *root, json_t *brokers, int64_t *for_ms, char *why,
                      size_t why_size) {
    const char *tname, *pname;
    json_t *t, *p;
    json_object_foreach(json_object_get(root, "topics"), tname, t) {
        json_object_foreach(json_object_get(t, "partitions"), pname, p) {
            if (num(p, "partition", -1) < 0 ||
                !json_is_true(json_object_get(p, "desired")))
                continue;
            int64_t leader = num(p, "leader", -1);
            const char *bname = NULL;
            json_t *b =
                leader >= 0 ? broker_by_id(brokers, leader, &bname) : NULL;
            char bwhy[300] = "no leader known";
            int64_t dead = b ? broker_dead_ms(bname, b, bwhy, sizeof bwhy) : -1;
            if (dead == 0)
                continue;
            snprintf(why, why_size, "partition %s [%s]: %s", tname, pname,
                     bwhy);
            *for_ms = dead > 0 ? dead : 0;
            return 1;
        }
    }
    return 0;
}

int tm_broker_stats_down(const char *json, size_t len, int64_t *for_ms,
                         char *why, size_t why_size) {
    json_error_t e;
    json_t *root = json_loadb(json, len, 0, &e);
    json_t *brokers = root ? json_object_get(root, "brokers") : NULL;
    *for_ms = 0;
    why[0] = '\0';
    if (!json_is_object(brokers)) {
        json_decref(root);
        return -1;
    }
    int live = 0, known = 0, unknown = 0;
    int64_t least = INT64_MAX; /* the least time a dead broker was dead */
    const char *name;
    json_t *b;
    json_object_foreach(brokers, name, b) {
        if (coordinator_live(brokers, b))
            live++;
        if (!learned(b) || idle(b))
            continue;
        known++;
        char bwhy[300];
        int64_t dead = broker_dead_ms(name, b, bwhy, sizeof bwhy);
        if (dead == 0) {
            live++;
            continue;
        }
        if (!why[0] || dead < 0 || (!unknown && dead < least))
            snprintf(why, why_size, "%s", bwhy);
        if (dead < 0)
            unknown = 1;
        else if (dead < least)
            least = dead;
    }
    int down = 0;
    if (!live) {
        down = 1;
        *for_ms = unknown || least == INT64_MAX ? 0 : least;
        if (!known)
            snprintf(why, why_size, "no broker of the cluster connected");
    } else if (leaderless(root, brokers, for_ms, why, why_size)) {
        down = 1;
    } else {
        json_t *cgrp = json_object_get(root, "cgrp");
        const char *state = str(cgrp, "state");
        if (json_is_object(cgrp) && strcmp(state, "up") != 0) {
            down = 1;
            *for_ms = num(cgrp, "stateage", 0);
            snprintf(why, why_size, "group coordinator: %s", state);
        }
    }
    json_decref(root);
    return down;
}

/* A property's value as a whole number of ms; 0 when it is not one
 * (librdkafka refuses it, reported as an error elsewhere). */
static int prop_ms(const char *v, long long *ms) {
    char *end;
    errno = 0;
    *ms = strtoll(v, &end, 10);
    return !errno && end != v && !*end;
}

/* The warning about the first property at index *from or later, *from
 * set past it: 1, or 0 when none is left. */
static int note_from(const tm_connector_config *cfg, size_t *from, char *out,
                     size_t size) {
    for (size_t i = *from; i < cfg->kafka.nproperties; i++) {
        *from = i + 1;
        const char *k = cfg->kafka.properties[i].key;
        const char *v = cfg->kafka.properties[i].value;
        long long ms;
        if (!v || !prop_ms(v, &ms))
            continue;
        if (strcmp(k, "statistics.interval.ms") == 0 &&
            ms > TM_KAFKA_DOWN_DEGRADED_MS) {
            snprintf(out, size,
                     "$.kafka.properties.statistics.interval.ms: %lld ms is "
                     "above the %d s after which Kafka unreachable makes the "
                     "connector DEGRADED: it shows, and ends, up to %lld s "
                     "late (the host reads Kafka's reachability from these "
                     "statistics; %s ms when not given)",
                     ms, TM_KAFKA_DOWN_DEGRADED_MS / 1000, ms / 1000,
                     TM_KAFKA_STATS_INTERVAL);
            return 1;
        }
        if (strcmp(k, "fetch.wait.max.ms") == 0 && ms >= TM_KAFKA_STALL_MS) {
            snprintf(out, size,
                     "$.kafka.properties.fetch.wait.max.ms: %lld ms: on an "
                     "idle topic a fetch waiting %d s or more looks like a "
                     "broker that stopped answering (a request waiting, "
                     "nothing received), and from %d s on the connector "
                     "shows Kafka unreachable while it is not",
                     ms, TM_KAFKA_STALL_MS / 1000,
                     TM_KAFKA_DOWN_DEGRADED_MS / 1000);
            return 1;
        }
    }
    return 0;
}

int tm_broker_watch_config_note(const tm_connector_config *cfg, char *out,
                                size_t size) {
    size_t from = 0;
    return note_from(cfg, &from, out, size);
}

int tm_broker_watch_config_warn(const tm_connector_config *cfg,
                                const char *file, FILE *f) {
    char note[512];
    size_t from = 0;
    int n = 0;
    while (note_from(cfg, &from, note, sizeof note)) {
        fprintf(f, "%s: warning: %s\n", file, note);
        n++;
    }
    return n;
}

void tm_broker_watch_error(tm_connector *c, const char *name,
                           const char *reason) {
    snprintf(c->kafka_why, sizeof c->kafka_why, "%s: %s", name, reason);
}

/* Kafka unreachable for the threshold: DEGRADED, since the outage began
 * (not since the threshold passed): the first statistics that saw it, or
 * earlier when the document tells (for_ms). Asserted again when something
 * else (a batch the store committed meanwhile) counted as a recovery. */
static void down(tm_connector *c, int64_t now, int64_t for_ms,
                 const char *why) {
    if (!c->kafka_down_ms || now - for_ms < c->kafka_down_ms) {
        c->kafka_down_ms = now - for_ms;
        c->kafka_down_wall_ms = tm_wall_ms() - (now - c->kafka_down_ms);
    }
    if (now - c->kafka_down_ms < TM_KAFKA_DOWN_DEGRADED_MS ||
        (c->kafka_error_seq && c->degraded_ms))
        return;
    int was_healthy = !c->degraded_ms;
    c->kafka_prev_degraded_ms = c->degraded_ms;
    c->kafka_prev_error_ms = c->last_error_ms;
    snprintf(c->kafka_prev_error, sizeof c->kafka_prev_error, "%s",
             c->last_error);
    tm_conn_error(c, 0,
                  "Kafka unreachable for %" PRId64
                  " s: %s (librdkafka retries; the last error: %s)",
                  (now - c->kafka_down_ms) / 1000, why,
                  c->kafka_why[0] ? c->kafka_why : "none reported");
    if (was_healthy)
        c->degraded_ms = c->kafka_down_wall_ms;
    c->kafka_error_seq = c->error_seq;
}

void tm_broker_watch_stats(tm_connector *c, const char *json, size_t len) {
    tm_metrics_kafka_stats(c->metrics, json, len);
    int64_t for_ms;
    char why[400];
    int state = tm_broker_stats_down(json, len, &for_ms, why, sizeof why);
    if (state < 0) {
        tm_log(TM_LOG_DEBUG, c->cfg->name,
               "Kafka statistics without brokers: ignored");
        return;
    }
    if (state > 0) {
        down(c, tm_now_ms(), for_ms, why);
        return;
    }
    int ours = c->kafka_error_seq && c->error_seq == c->kafka_error_seq;
    int64_t prev_degraded_ms = c->kafka_prev_degraded_ms;
    c->kafka_down_ms = 0;
    c->kafka_error_seq = 0;
    c->kafka_why[0] = '\0';
    c->kafka_prev_degraded_ms = 0;
    /* Only when the last error is still ours: a later one (the store)
     * keeps the connector DEGRADED until its own progress. */
    if (!ours)
        return;
    if (!prev_degraded_ms || !c->degraded_ms) {
        tm_conn_recovered(c, "Kafka is reachable again");
        return;
    }
    /* DEGRADED before Kafka went: that cause is not ended by Kafka
     * answering; it shows again, since when it began. */
    snprintf(c->last_error, sizeof c->last_error, "%s", c->kafka_prev_error);
    c->last_error_ms = c->kafka_prev_error_ms;
    c->degraded_ms = prev_degraded_ms;
    tm_log(TM_LOG_INFO, c->cfg->name,
           "Kafka is reachable again; still DEGRADED: %s", c->last_error);
}
