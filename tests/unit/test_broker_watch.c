/* Kafka's reachability (kafka/broker_watch.c): librdkafka's statistics
 * read for brokers UP (its internal broker never counted); no broker UP
 * for TM_KAFKA_DOWN_DEGRADED_MS makes the connector DEGRADED since the
 * brokers went down; one UP again ends it, unless a later error (the
 * store's) is the one shown. */
#include <check.h>
#include <string.h>

#include "kafka/broker_watch.h"
#include "runtime/connector_state.h"

#include "check_main.h"

#define INTERNAL                                                               \
    "\":0/internal\": {\"source\": \"internal\", \"state\": \"UP\"}"
#define DOWN_ALL                                                               \
    "{\"name\": \"c\", \"brokers\": {" INTERNAL ", "                           \
    "\"127.0.0.1:9092/1\": {\"source\": \"learned\", \"state\": "              \
    "\"CONNECT\"}, "                                                           \
    "\"GroupCoordinator\": {\"source\": \"logical\", \"state\": \"DOWN\"}}}"
#define ONE_UP                                                                 \
    "{\"brokers\": {" INTERNAL ", "                                            \
    "\"127.0.0.1:9092/1\": {\"source\": \"learned\", \"state\": \"UP\"}}}"

START_TEST(test_stats_count_brokers_up) {
    ck_assert_int_eq(tm_broker_stats_up(DOWN_ALL, strlen(DOWN_ALL)), 0);
    ck_assert_int_eq(tm_broker_stats_up(ONE_UP, strlen(ONE_UP)), 1);
    const char *none = "{\"name\": \"c\"}";
    ck_assert_int_eq(tm_broker_stats_up(none, strlen(none)), -1);
    ck_assert_int_eq(tm_broker_stats_up("{\"brokers\":", 11), -1);
}
END_TEST

static tm_connector_config cfg;

static void setup(tm_connector *c) {
    memset(&cfg, 0, sizeof cfg);
    cfg.name = "broker_watch";
    memset(c, 0, sizeof *c);
    c->cfg = &cfg;
    c->state = TM_CONN_RUNNING;
}

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

int main(void) {
    Suite *s = suite_create("broker_watch");
    TCase *tc = tcase_create("broker_watch");
    tcase_add_test(tc, test_stats_count_brokers_up);
    tcase_add_test(tc, test_down_past_threshold_degrades_then_recovers);
    tcase_add_test(tc, test_later_store_error_keeps_degraded);
    tcase_add_test(tc, test_reasserted_after_another_recovery);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
