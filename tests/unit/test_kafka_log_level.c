/* The level a librdkafka line gets in the host's log
 * (kafka/kafka_conf.h, tm_kafka_log_level), one mapping for every client:
 * errors and warnings as such (MAXPOLL must reach an operator), the rest
 * debug, and CONFWARN (a property set for another role of the one shared
 * configuration) debug, on the consumer as on the producer. */
#include <check.h>

#include "kafka/kafka_conf.h"
#include "check_main.h"

START_TEST(levels) {
    ck_assert_int_eq(tm_kafka_log_level(0, "FAIL"), TM_LOG_ERROR);
    ck_assert_int_eq(tm_kafka_log_level(3, "ERROR"), TM_LOG_ERROR);
    ck_assert_int_eq(tm_kafka_log_level(4, "MAXPOLL"), TM_LOG_WARN);
    ck_assert_int_eq(tm_kafka_log_level(5, "REQTMOUT"), TM_LOG_DEBUG);
    ck_assert_int_eq(tm_kafka_log_level(7, "FETCH"), TM_LOG_DEBUG);
    ck_assert_int_eq(tm_kafka_log_level(4, "CONFWARN"), TM_LOG_DEBUG);
    ck_assert_int_eq(tm_kafka_log_level(3, "CONFWARN"), TM_LOG_DEBUG);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("kafka_log_level");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, levels);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 0);
}
