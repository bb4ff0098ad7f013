/* Kafka's reachability (kafka/broker_watch.c): librdkafka's statistics
 * read for live brokers (learned from the cluster, connected, not
 * stalled), the leaders of the assigned partitions and the group
 * coordinator; unreachable for TM_KAFKA_DOWN_DEGRADED_MS makes the
 * connector DEGRADED since the outage began; reachable again ends it,
 * unless a later error (the store's) is the one shown. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/broker_watch.h"
#include "runtime/connector_state.h"

#include "check_main.h"

#define INTERNAL                                                               \
    "\":0/internal\": {\"source\": \"internal\", \"state\": \"UP\"}"
#define DOWN_ALL                                                               \
    "{\"name\": \"c\", \"brokers\": {" INTERNAL ", "                           \
    "\"127.0.0.1:9092/1\": {\"source\": \"learned\", \"nodeid\": 1, "          \
    "\"state\": "                                                              \
    "\"CONNECT\"}, "                                                           \
    "\"GroupCoordinator\": {\"source\": \"logical\", \"state\": \"DOWN\"}}}"
#define ONE_UP                                                                 \
    "{\"brokers\": {" INTERNAL ", "                                            \
    "\"127.0.0.1:9092/1\": {\"source\": \"learned\", \"nodeid\": 1, "          \
    "\"state\": \"UP\"}}}"

/* A broker that stopped answering on a connection that stays open (a dead
 * route, a stopped process): UP, a request waiting, nothing received for
 * 12 s (seen: RUNNING for 70 s, until socket.timeout.ms closed it). */
#define STALLED                                                                \
    "{\"brokers\": {" INTERNAL ", "                                            \
    "\"127.0.0.1:9092/1\": {\"source\": \"learned\", \"nodeid\": 1, "          \
    "\"state\": \"UP\", \"waitresp_cnt\": 1, \"rxidle\": 12000000}, "          \
    "\"GroupCoordinator\": {\"source\": \"logical\", \"nodeid\": 1, "          \
    "\"state\": \"UP\", \"waitresp_cnt\": 0, \"rxidle\": 100}}, "              \
    "\"cgrp\": {\"state\": \"up\", \"stateage\": 60000}}"
/* A fetch in its long poll, and an idle connection with nothing asked:
 * both live. */
#define FETCHING                                                               \
    "{\"brokers\": {" INTERNAL ", "                                            \
    "\"127.0.0.1:9092/1\": {\"source\": \"learned\", \"nodeid\": 1, "          \
    "\"state\": \"UP\", \"waitresp_cnt\": 1, \"rxidle\": 400000}, "            \
    "\"127.0.0.1:9093/2\": {\"source\": \"learned\", \"nodeid\": 2, "          \
    "\"state\": \"UP\", \"waitresp_cnt\": 0, \"rxidle\": 600000000}}}"
/* The bootstrap address answers (a proxy, a load balancer), the broker
 * the cluster advertises does not (seen: RUNNING, partitions lost). */
#define BOOTSTRAP_ONLY                                                         \
    "{\"brokers\": {" INTERNAL ", "                                            \
    "\"127.0.0.1:7000/bootstrap\": {\"source\": \"configured\", "              \
    "\"nodeid\": -1, \"state\": \"UP\"}, "                                     \
    "\"127.0.0.1:9092/1\": {\"source\": \"learned\", \"nodeid\": 1, "          \
    "\"state\": \"CONNECT\", \"stateage\": 300000}, "                          \
    "\"GroupCoordinator\": {\"source\": \"logical\", \"nodeid\": 1, "          \
    "\"state\": \"UP\"}}}"
/* A standby (nothing assigned) whose bootstrap address is an alias of the
 * advertised one: the learned broker never wanted (INIT, sparse
 * connections), the bootstrap entry and the group coordinator's own
 * connection (to the advertised address) up. Seen: DEGRADED "Kafka
 * unreachable ... connection INIT" for as long as it ran. */
#define STANDBY_ALIAS                                                          \
    "{\"brokers\": {" INTERNAL ", "                                            \
    "\"localhost:9092/bootstrap\": {\"source\": \"configured\", "              \
    "\"nodeid\": -1, \"state\": \"UP\"}, "                                     \
    "\"127.0.0.1:9092/1\": {\"source\": \"learned\", \"nodeid\": 1, "          \
    "\"state\": \"INIT\", \"stateage\": 300000000}, "                          \
    "\"GroupCoordinator\": {\"source\": \"logical\", \"nodeid\": 1, "          \
    "\"state\": \"UP\", \"waitresp_cnt\": 0, \"rxidle\": 100}}, "              \
    "\"cgrp\": {\"state\": \"up\", \"stateage\": 60000}}"
/* Two brokers, the one leading an assigned partition down. */
#define LEADER_DOWN                                                            \
    "{\"brokers\": {" INTERNAL ", "                                            \
    "\"127.0.0.1:9092/1\": {\"source\": \"learned\", \"nodeid\": 1, "          \
    "\"state\": \"UP\"}, "                                                     \
    "\"127.0.0.1:9093/2\": {\"source\": \"learned\", \"nodeid\": 2, "          \
    "\"state\": \"DOWN\"}}, "                                                  \
    "\"topics\": {\"t\": {\"partitions\": {"                                   \
    "\"0\": {\"partition\": 0, \"leader\": 1, \"desired\": true}, "            \
    "\"1\": {\"partition\": 1, \"leader\": 2, \"desired\": true}, "            \
    "\"-1\": {\"partition\": -1, \"leader\": -1, \"desired\": false}}}}}"
/* A broker UP, the group's coordinator not found for 15 s. */
#define NO_COORDINATOR                                                         \
    "{\"brokers\": {" INTERNAL ", "                                            \
    "\"127.0.0.1:9092/1\": {\"source\": \"learned\", \"nodeid\": 1, "          \
    "\"state\": \"UP\"}}, "                                                    \
    "\"cgrp\": {\"state\": \"wait-coord\", \"stateage\": 15000}}"

static tm_connector_config cfg;

static void setup(tm_connector *c) {
    memset(&cfg, 0, sizeof cfg);
    cfg.name = "broker_watch";
    memset(c, 0, sizeof *c);
    c->cfg = &cfg;
    c->state = TM_CONN_RUNNING;
}

static void feed(tm_connector *c, const char *doc) {
    tm_broker_watch_stats(c, doc, strlen(doc));
}

/* F1: a stalled broker is unreachable, since its last answer: DEGRADED
 * at the first statistics that show it 12 s old, dated 12 s back. */
START_TEST(test_stalled_broker_degrades_since_last_answer) {
    tm_connector c;
    setup(&c);
    int64_t wall = tm_wall_ms();
    feed(&c, STALLED);
    ck_assert_int_ne(c.degraded_ms, 0);
    ck_assert_int_le(c.degraded_ms, wall - 12000 + 100);
    ck_assert_int_ge(c.degraded_ms, wall - 12000 - 1000);
    ck_assert_ptr_nonnull(strstr(c.last_error, "Kafka unreachable"));
    ck_assert_ptr_nonnull(strstr(c.last_error, "unanswered"));
    feed(&c, FETCHING);
    ck_assert_int_eq(c.degraded_ms, 0);
}
END_TEST

START_TEST(test_long_poll_and_idle_are_live) {
    tm_connector c;
    setup(&c);
    feed(&c, FETCHING);
    ck_assert_int_eq(c.kafka_down_ms, 0);
    ck_assert_int_eq(c.degraded_ms, 0);
}
END_TEST

/* F2: the bootstrap entry never counts, nor the coordinator's connection
 * while the learned broker of its node is trying and failing. */
START_TEST(test_bootstrap_only_degrades) {
    tm_connector c;
    setup(&c);
    feed(&c, BOOTSTRAP_ONLY);
    ck_assert_int_ne(c.kafka_down_ms, 0);
    c.kafka_down_ms = tm_now_ms() - TM_KAFKA_DOWN_DEGRADED_MS - 1;
    feed(&c, BOOTSTRAP_ONLY);
    ck_assert_int_ne(c.degraded_ms, 0);
    ck_assert_ptr_nonnull(strstr(c.last_error, "127.0.0.1:9092/1"));
}
END_TEST

/* A standby whose learned broker stays INIT while the coordinator's
 * connection answers: healthy, however long it lasts. */
START_TEST(test_standby_learned_init_coordinator_up_is_healthy) {
    tm_connector c;
    setup(&c);
    feed(&c, STANDBY_ALIAS);
    ck_assert_int_eq(c.kafka_down_ms, 0);
    c.kafka_down_ms = tm_now_ms() - TM_KAFKA_DOWN_DEGRADED_MS - 1;
    feed(&c, STANDBY_ALIAS);
    ck_assert_int_eq(c.kafka_down_ms, 0);
    ck_assert_int_eq(c.degraded_ms, 0);
    ck_assert_str_eq(c.last_error, "");
}
END_TEST

/* F2: an assigned partition whose leader is down. */
START_TEST(test_assigned_partition_leader_down_degrades) {
    tm_connector c;
    setup(&c);
    feed(&c, LEADER_DOWN);
    ck_assert_int_ne(c.kafka_down_ms, 0);
    c.kafka_down_ms = tm_now_ms() - TM_KAFKA_DOWN_DEGRADED_MS - 1;
    feed(&c, LEADER_DOWN);
    ck_assert_int_ne(c.degraded_ms, 0);
    ck_assert_ptr_nonnull(strstr(c.last_error, "partition t [1]"));
}
END_TEST

/* F2: the group coordinator not "up" for longer than the threshold. */
START_TEST(test_coordinator_not_up_degrades) {
    tm_connector c;
    setup(&c);
    feed(&c, NO_COORDINATOR);
    ck_assert_int_ne(c.degraded_ms, 0);
    ck_assert_ptr_nonnull(strstr(c.last_error, "coordinator"));
}
END_TEST

START_TEST(test_stats_read) {
    int64_t for_ms;
    char why[400];
#define DOWN(doc)                                                              \
    tm_broker_stats_down(doc, strlen(doc), &for_ms, why, sizeof why)
    ck_assert_int_eq(DOWN(DOWN_ALL), 1);
    ck_assert_int_eq(for_ms, 0); /* CONNECT: since when, not said */
    ck_assert_int_eq(DOWN(ONE_UP), 0);
    ck_assert_int_eq(DOWN(FETCHING), 0);
    ck_assert_int_eq(DOWN(STALLED), 1);
    ck_assert_int_eq(for_ms, 12000);
    ck_assert_ptr_nonnull(strstr(why, "127.0.0.1:9092/1"));
    ck_assert_int_eq(DOWN(BOOTSTRAP_ONLY), 1);
    ck_assert_int_eq(DOWN(LEADER_DOWN), 1);
    ck_assert_ptr_nonnull(
        strstr(why, "partition t [1]: broker 127.0.0.1:9093/2"));
    ck_assert_int_eq(DOWN(NO_COORDINATOR), 1);
    ck_assert_int_eq(for_ms, 15000);
    const char *none = "{\"name\": \"c\"}";
    ck_assert_int_eq(DOWN(none), -1);
    ck_assert_int_eq(
        tm_broker_stats_down("{\"brokers\":", 11, &for_ms, why, sizeof why),
        -1);
#undef DOWN
}
END_TEST

/* Statistics with every broker down, the first of them `ago_ms` ago. */
static void down_for(tm_connector *c, int64_t ago_ms) {
    tm_broker_watch_stats(c, DOWN_ALL, strlen(DOWN_ALL));
    ck_assert_int_ne(c->kafka_down_ms, 0);
    c->kafka_down_ms = tm_now_ms() - ago_ms;
    tm_broker_watch_stats(c, DOWN_ALL, strlen(DOWN_ALL));
}

START_TEST(test_down_past_threshold_degrades_then_recovers) {
    tm_connector c;
    setup(&c);
    tm_broker_watch_error(&c, "_ALL_BROKERS_DOWN", "1/1 brokers are down");
    down_for(&c, TM_KAFKA_DOWN_DEGRADED_MS - 2000);
    ck_assert_int_eq(c.degraded_ms, 0); /* a blip: not yet */
    down_for(&c, TM_KAFKA_DOWN_DEGRADED_MS + 1);
    ck_assert_int_ne(c.degraded_ms, 0);
    ck_assert_int_eq(c.degraded_ms, c.kafka_down_wall_ms);
    ck_assert_ptr_nonnull(strstr(c.last_error, "Kafka unreachable"));
    ck_assert_ptr_nonnull(strstr(c.last_error, "1/1 brokers are down"));
    tm_broker_watch_stats(&c, ONE_UP, strlen(ONE_UP));
    ck_assert_int_eq(c.degraded_ms, 0);
    ck_assert_int_eq(c.kafka_down_ms, 0);
}
END_TEST

START_TEST(test_later_store_error_keeps_degraded) {
    tm_connector c;
    setup(&c);
    down_for(&c, TM_KAFKA_DOWN_DEGRADED_MS + 1);
    ck_assert_int_ne(c.degraded_ms, 0);
    tm_conn_error(&c, 0, "database is locked; retrying");
    tm_broker_watch_stats(&c, ONE_UP, strlen(ONE_UP));
    ck_assert_int_ne(c.degraded_ms, 0);
    ck_assert_ptr_nonnull(strstr(c.last_error, "locked"));
}
END_TEST

/* DEGRADED for a topic not created yet, then Kafka unreachable and back:
 * the topic still missing, the connector stays DEGRADED for it, since it
 * began (seen: RUNNING, `status` exit 0, the topic still missing). */
START_TEST(test_kafka_recovery_keeps_earlier_cause) {
    tm_connector c;
    setup(&c);
    tm_conn_error(&c, 0, "waiting for topic t: Unknown topic");
    int64_t since = c.degraded_ms;
    ck_assert_int_ne(since, 0);
    down_for(&c, TM_KAFKA_DOWN_DEGRADED_MS + 1);
    ck_assert_ptr_nonnull(strstr(c.last_error, "Kafka unreachable"));
    tm_broker_watch_stats(&c, ONE_UP, strlen(ONE_UP));
    ck_assert_int_eq(c.degraded_ms, since);
    ck_assert_ptr_nonnull(strstr(c.last_error, "waiting for topic t"));
}
END_TEST

START_TEST(test_reasserted_after_another_recovery) {
    tm_connector c;
    setup(&c);
    down_for(&c, TM_KAFKA_DOWN_DEGRADED_MS + 1);
    tm_conn_recovered(&c, "a batch committed"); /* the store's progress */
    ck_assert_int_eq(c.degraded_ms, 0);
    tm_broker_watch_stats(&c, DOWN_ALL, strlen(DOWN_ALL));
    ck_assert_int_ne(c.degraded_ms, 0);
}
END_TEST

/* validate's warnings: the statistics' interval above the threshold, a
 * fetch's long poll as long as a stall; nothing for the defaults' like. */
START_TEST(test_config_note) {
    tm_config_property props[2] = {{"statistics.interval.ms", "1000"},
                                   {"fetch.wait.max.ms", "500"}};
    cfg.kafka.properties = props;
    cfg.kafka.nproperties = 2;
    char note[512];
    ck_assert_int_eq(tm_broker_watch_config_note(&cfg, note, sizeof note), 0);
    props[0].value = "60000";
    ck_assert_int_eq(tm_broker_watch_config_note(&cfg, note, sizeof note), 1);
    ck_assert_ptr_nonnull(strstr(note, "statistics.interval.ms: 60000 ms"));
    props[0].value = "1000";
    props[1].value = "5000";
    ck_assert_int_eq(tm_broker_watch_config_note(&cfg, note, sizeof note), 1);
    ck_assert_ptr_nonnull(strstr(note, "fetch.wait.max.ms: 5000 ms"));
    props[1].value = "not a number";
    ck_assert_int_eq(tm_broker_watch_config_note(&cfg, note, sizeof note), 0);
    cfg.kafka.properties = NULL;
    cfg.kafka.nproperties = 0;
}
END_TEST

/* validate printed only the first warning: both properties off, both
 * warned about. */
START_TEST(test_config_warns_each) {
    tm_config_property props[2] = {{"statistics.interval.ms", "60000"},
                                   {"fetch.wait.max.ms", "5000"}};
    cfg.kafka.properties = props;
    cfg.kafka.nproperties = 2;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    int n = tm_broker_watch_config_warn(&cfg, "c.json", f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(n, 2);
    ck_assert_ptr_nonnull(
        strstr(buf, "c.json: warning: $.kafka.properties.statistics"));
    ck_assert_ptr_nonnull(
        strstr(buf, "c.json: warning: $.kafka.properties.fetch.wait.max.ms"));
    free(buf);
    cfg.kafka.properties = NULL;
    cfg.kafka.nproperties = 0;
}
END_TEST

int main(void) {
    Suite *s = suite_create("broker_watch");
    TCase *tc = tcase_create("broker_watch");
    tcase_add_test(tc, test_stats_read);
    tcase_add_test(tc, test_down_past_threshold_degrades_then_recovers);
    tcase_add_test(tc, test_later_store_error_keeps_degraded);
    tcase_add_test(tc, test_reasserted_after_another_recovery);
    tcase_add_test(tc, test_kafka_recovery_keeps_earlier_cause);
    tcase_add_test(tc, test_stalled_broker_degrades_since_last_answer);
    tcase_add_test(tc, test_long_poll_and_idle_are_live);
    tcase_add_test(tc, test_bootstrap_only_degrades);
    tcase_add_test(tc, test_standby_learned_init_coordinator_up_is_healthy);
    tcase_add_test(tc, test_assigned_partition_leader_down_degrades);
    tcase_add_test(tc, test_coordinator_not_up_degrades);
    tcase_add_test(tc, test_config_note);
    tcase_add_test(tc, test_config_warns_each);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
