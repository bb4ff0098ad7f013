/* The consumer's fetch and queue sizing (kafka/fetch_sizing.h): the pure
 * function, table-driven, and the built consumer configuration: tidemark's
 * sizes by default, the user's $.kafka.properties over them (under any of
 * librdkafka's names), and a user's message.max.bytes above the sized
 * fetch.max.bytes still a configuration librdkafka accepts. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/connector_config.h"
#include "kafka/fetch_sizing.h"
#include "kafka/kafka_conf.h"
#include "check_main.h"
#include "config_ok.h"

#define MIB (1024LL * 1024LL)

START_TEST(sizing_table) {
    static const struct {
        int64_t records, bytes, msg_max;
        tm_fetch_sizing want; /* fetch, partition, min messages, kbytes */
    } T[] = {
        /* the defaults: 10 000 records, 16 MiB */
        {10000, 16 * MIB, 1000000, {4 * MIB, 1 * MIB, 40000, 12288}},
        /* small batches: the floors */
        {100, 64 * 1024, 1000000, {4 * MIB, 1 * MIB, 40000, 12288}},
        {1, 1, 1000000, {4 * MIB, 1 * MIB, 40000, 12288}},
        /* large batches: from them, up to the ceilings */
        {100000, 64 * MIB, 1000000, {16 * MIB, 1 * MIB, 200000, 49152}},
        {1000000, 1024 * MIB, 1000000, {64 * MIB, 1 * MIB, 2000000, 786432}},
        /* a message.max.bytes above the sized response raises it */
        {10000, 16 * MIB, 10 * MIB, {10 * MIB, 1 * MIB, 40000, 12288}},
        {10000, 16 * MIB, 3000000000LL, {2147483135LL, 1 * MIB, 40000, 12288}},
        /* nonsense inputs stay in librdkafka's ranges */
        {0, 0, 0, {4 * MIB, 1 * MIB, 40000, 12288}},
        {-5, -5, -5, {4 * MIB, 1 * MIB, 40000, 12288}},
        {INT64_MAX, INT64_MAX, 1000000, {64 * MIB, 1 * MIB, 10000000, 2097151}},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        tm_fetch_sizing g =
            tm_fetch_sizing_of(T[i].records, T[i].bytes, T[i].msg_max);
        ck_assert_msg(
            g.fetch_max_bytes == T[i].want.fetch_max_bytes &&
                g.max_partition_fetch_bytes ==
                    T[i].want.max_partition_fetch_bytes &&
                g.queued_min_messages == T[i].want.queued_min_messages &&
                g.queued_max_kbytes == T[i].want.queued_max_kbytes,
            "row %zu: got %lld %lld %lld %lld", i, (long long)g.fetch_max_bytes,
            (long long)g.max_partition_fetch_bytes,
            (long long)g.queued_min_messages, (long long)g.queued_max_kbytes);
    }
}
END_TEST

/* A connector with batches of MAX_RECORDS and PROPS ("" or ,"k":"v",...
 * inside $.kafka.properties). */
static tm_connector_config *connector(int max_records, const char *props) {
    char text[1024];
    snprintf(text, sizeof text,
             "{\"name\":\"c\",\"kafka\":{\"bootstrap_servers\":\"k:9092\","
             "\"topics\":[\"t\"],\"properties\":{%s}},"
             "\"batch\":{\"max_records\":%d},"
             "\"sink\":{\"plugin\":\"sqlite\"},\"mapping\":{\"mode\":\"raw\"}}",
             props, max_records);
    return tm_test_config_ok(text, "c.json");
}

/* KEY of the consumer's configuration built for cfg, as librdkafka holds it. */
static long long consumer_value(const tm_connector_config *cfg,
                                const char *key) {
    char errstr[512], v[64];
    rd_kafka_conf_t *conf =
        tm_kafka_conf_new(cfg, TM_KAFKA_CONSUMER, errstr, sizeof errstr);
    ck_assert_msg(conf != NULL, "%s", errstr);
    size_t n = sizeof v;
    ck_assert_int_eq(rd_kafka_conf_get(conf, key, v, &n), RD_KAFKA_CONF_OK);
    rd_kafka_conf_destroy(conf);
    return strtoll(v, NULL, 10);
}

static void no_line(void *ctx, const char *line) {
    (void)ctx;
    ck_abort_msg("unexpected: %s", line);
}

START_TEST(consumer_gets_the_sizing) {
    tm_connector_config *cfg = connector(80000, "");
    tm_fetch_sizing z =
        tm_fetch_sizing_of(80000, cfg->batch.max_bytes, 1000000);
    ck_assert_int_eq(z.queued_min_messages, 160000); /* from max_records */
    ck_assert_int_eq(consumer_value(cfg, "fetch.max.bytes"), z.fetch_max_bytes);
    ck_assert_int_eq(consumer_value(cfg, "max.partition.fetch.bytes"),
                     z.max_partition_fetch_bytes);
    ck_assert_int_eq(consumer_value(cfg, "queued.min.messages"),
                     z.queued_min_messages);
    ck_assert_int_eq(consumer_value(cfg, "queued.max.messages.kbytes"),
                     z.queued_max_kbytes);
    tm_config_free(cfg);
}
END_TEST

START_TEST(user_properties_win) {
    tm_connector_config *cfg = connector(
        30000, "\"fetch.max.bytes\":\"52428800\","
               "\"fetch.message.max.bytes\":\"262144\"," /* an alias */
               "\"queued.min.messages\":\"123456\","
               "\"queued.max.messages.kbytes\":\"65536\"");
    ck_assert_int_eq(consumer_value(cfg, "fetch.max.bytes"), 52428800);
    ck_assert_int_eq(consumer_value(cfg, "max.partition.fetch.bytes"), 262144);
    ck_assert_int_eq(consumer_value(cfg, "queued.min.messages"), 123456);
    ck_assert_int_eq(consumer_value(cfg, "queued.max.messages.kbytes"), 65536);
    ck_assert_uint_eq(tm_kafka_conf_check(cfg, no_line, NULL), 0);
    tm_config_free(cfg);
}
END_TEST

/* librdkafka refuses a client whose fetch.max.bytes is below its
 * message.max.bytes: a user who raised the latter (for large dead letters)
 * and left the former to tidemark keeps a config that runs. */
START_TEST(message_max_bytes_raises_the_response) {
    tm_connector_config *cfg =
        connector(10000, "\"message.max.bytes\":\"20000000\"");
    ck_assert_int_eq(consumer_value(cfg, "fetch.max.bytes"), 20000000);
    ck_assert_uint_eq(tm_kafka_conf_check(cfg, no_line, NULL), 0);
    tm_config_free(cfg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("fetch_sizing");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, sizing_table);
    tcase_add_test(tc, consumer_gets_the_sizing);
    tcase_add_test(tc, user_properties_win);
    tcase_add_test(tc, message_max_bytes_raises_the_response);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
