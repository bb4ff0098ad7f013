/* The unit tests' consumer on librdkafka's mock cluster: one broker (id
 * 1) holding topic "t" of one partition, and a connector NAME subscribed
 * to it (dynamic membership), its consumer started by the host's own
 * tm_consumer_start. The cluster's producer handle goes to *prk (destroyed
 * after the cluster). */
#ifndef TM_TEST_MOCK_CONSUMER_H
#define TM_TEST_MOCK_CONSUMER_H

#include <check.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "config_ok.h"
#include "kafka/consumer.h"
#include "runtime/connector_state.h"

static inline void tm_test_sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline rd_kafka_mock_cluster_t *tm_test_mock_cluster(rd_kafka_t **prk) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    ck_assert_int_eq(rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err),
                     RD_KAFKA_CONF_OK);
    *prk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    ck_assert_msg(*prk != NULL, "%s", err);
    rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(*prk, 1);
    ck_assert_ptr_nonnull(mc);
    ck_assert_int_eq(rd_kafka_mock_topic_create(mc, "t", 1, 1), 0);
    return mc;
}

/* c: zeroed here; static in the test, as a stop may outlive it. */
static inline void tm_test_mock_consumer(tm_connector *c,
                                         rd_kafka_mock_cluster_t *mc,
                                         const char *name) {
    char json[1024], err[512];
    snprintf(json, sizeof json,
             "{\"name\":\"%s\","
             "\"kafka\":{\"bootstrap_servers\":\"%s\",\"topics\":[\"t\"],"
             "\"static_membership\":false},"
             "\"sink\":{\"plugin\":\"sqlite\"},\"mapping\":{\"mode\":\"raw\"}}",
             name, rd_kafka_mock_cluster_bootstraps(mc));
    memset(c, 0, sizeof *c);
    c->cfg = tm_test_config_ok(json, "c.json");
    ck_assert_msg(tm_consumer_start(c, err, sizeof err) == 0, "%s", err);
}

#endif
