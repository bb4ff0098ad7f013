/* The fetcher's waker (kafka/fetch_wake.h): the decision, table-driven,
 * and the waker made for a consumer (no broker needed: nothing is fetched)
 * reading queued.min.messages from the consumer's configuration, looking
 * at its queue without asking anything while the queue is empty, and
 * joined at free. Whether a wake-up makes the fetcher go on is measured
 * against a broker by tests/bench/consume_ceiling (--spin-ns, --wake). */
#include <check.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>

#include "check_main.h"
#include "kafka/fetch_wake.h"

START_TEST(due_arms_at_half_fires_at_a_quarter) {
    static const struct {
        int64_t len;
        int due;
    } T[] = {
        {0, 0},                  /* never full: nothing to wake */
        {49999, 0},              /* below half: not armed */
        {20000, 0},              /* ... so no wake-up at a quarter either */
        {50000, 0},              /* half: armed */
        {100000, 0},             /* full: the fetcher stopped, armed still */
        {25001, 0},              /* draining */
        {25000, 1},              /* a quarter: wake, disarmed */
        {10000, 0},              /* disarmed: once per fill */
        {0, 0},      {60000, 0}, /* filled again: armed */
        {0, 1},                  /* drained past the quarter in one look */
        {0, 0},
    };
    int armed = 0;
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        ck_assert_msg(tm_fetch_wake_due(&armed, T[i].len, 100000) == T[i].due,
                      "step %zu: queue %lld: due %d, expected %d", i,
                      (long long)T[i].len, !T[i].due, T[i].due);
}
END_TEST

START_TEST(due_never_with_a_tiny_limit) {
    for (int64_t limit = -1; limit < 4; limit++) {
        int armed = 0;
        for (int64_t len = 0; len < 10; len++)
            ck_assert_int_eq(tm_fetch_wake_due(&armed, 9 - len, limit), 0);
    }
}
END_TEST

static rd_kafka_t *consumer(const char *min_messages) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    ck_assert_ptr_nonnull(conf);
    ck_assert_int_eq(rd_kafka_conf_set(conf, "bootstrap.servers", "127.0.0.1:1",
                                       err, sizeof err),
                     RD_KAFKA_CONF_OK);
    ck_assert_int_eq(
        rd_kafka_conf_set(conf, "group.id", "fetch-wake-test", err, sizeof err),
        RD_KAFKA_CONF_OK);
    ck_assert_int_eq(rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err),
                     RD_KAFKA_CONF_OK);
    if (min_messages)
        ck_assert_int_eq(rd_kafka_conf_set(conf, "queued.min.messages",
                                           min_messages, err, sizeof err),
                         RD_KAFKA_CONF_OK);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    ck_assert_msg(rk != NULL, "%s", err);
    rd_kafka_poll_set_consumer(rk);
    return rk;
}

START_TEST(made_looked_at_and_joined) {
    rd_kafka_t *rk = consumer("8");
    tm_fetch_wake *w = tm_fetch_wake_new(rk);
    ck_assert_ptr_nonnull(w);
    /* An empty queue, never armed: thousands of records seen ask nothing. */
    for (int i = 0; i < 5000; i++)
        tm_fetch_wake_seen(w, "t", 0);
    ck_assert_int_eq(tm_fetch_wake_count(w), 0);
    tm_fetch_wake_free(w);
    tm_fetch_wake_seen(NULL, "t", 0); /* no waker: nothing */
    tm_fetch_wake_free(NULL);
    ck_assert_int_eq(tm_fetch_wake_count(NULL), 0);
    rd_kafka_destroy(rk);
}
END_TEST

int main(void) {
    Suite *s = suite_create("fetch_wake");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, due_arms_at_half_fires_at_a_quarter);
    tcase_add_test(tc, due_never_with_a_tiny_limit);
    tcase_add_test(tc, made_looked_at_and_joined);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
