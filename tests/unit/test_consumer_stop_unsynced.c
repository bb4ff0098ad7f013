/* A consumer stopped after its JoinGroup was answered and before its
 * SyncGroup was: librdkafka 2.0.2 asserts in rd_kafka_destroy when the
 * cooperative-sticky assignor was chosen but its state never made (the
 * state comes with the first SyncGroup answer; fixed in librdkafka 2.3.0),
 * which aborts the whole process (a SIGTERM right after a start, a reload,
 * a stop while a group's first rebalance is slow). The broker is
 * librdkafka's mock cluster with the SyncGroup answer held back; the test
 * first checks that the join is in that window (the fault where intended),
 * then stops the consumer: the process must live on. */
#include <check.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "config/connector_config.h"
#include "kafka/consumer.h"
#include "runtime/connector_state.h"
#include "services/clock.h"

#include "check_main.h"
#include "mock_consumer.h"

#define SYNC_GROUP_API 14    /* the Kafka protocol's SyncGroup ApiKey */
#define SYNC_HELD_MS   20000 /* the SyncGroup answer's delay */

START_TEST(stop_between_join_and_sync_does_not_abort) {
    rd_kafka_t *prk;
    rd_kafka_mock_cluster_t *mc = tm_test_mock_cluster(&prk);
    ck_assert_int_eq(
        rd_kafka_mock_broker_push_request_error_rtts(
            mc, 1, SYNC_GROUP_API, 1, RD_KAFKA_RESP_ERR_NO_ERROR, SYNC_HELD_MS),
        RD_KAFKA_RESP_ERR_NO_ERROR);
    static tm_connector c;
    tm_test_mock_consumer(&c, mc, "unsynced");
    /* The JoinGroup answered (the assignor chosen), the SyncGroup not. */
    const char *proto = NULL;
    for (int i = 0; i < 1000; i++) {
        proto = rd_kafka_rebalance_protocol(c.rk);
        if (proto && strcmp(proto, "NONE") != 0)
            break;
        tm_test_sleep_ms(10);
    }
    ck_assert_msg(proto && strcmp(proto, "COOPERATIVE") == 0,
                  "inconclusive: the join never chose an assignor (%s)",
                  proto ? proto : "NULL");
    int64_t t0 = tm_clock_mono_ms();
    tm_consumer_stop(&c, 5000);
    fprintf(stderr, "stopped in %lld ms\n",
            (long long)(tm_clock_mono_ms() - t0));
    ck_assert_ptr_null(c.rk);
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(prk);
}
END_TEST

int main(void) {
    Suite *s = suite_create("consumer_stop_unsynced");
    TCase *tc = tcase_create("stop");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, stop_between_join_and_sync_does_not_abort);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
