/* The consumer's stop is bounded by its close watchdog even while the
 * fetcher's waker (kafka/fetch_wake.h) waits on a broker that does not
 * answer. librdkafka 2.0.2's rd_kafka_query_watermark_offsets does not
 * honour its timeout once its ListOffsets requests are sent: it waits for
 * their answer, up to socket.timeout.ms. The broker here is librdkafka's
 * mock cluster with a 10 s round trip; the consumer's queue length is
 * scripted (rd_kafka_queue_length wrapped at link time) so that the waker
 * fires once, and rd_kafka_query_watermark_offsets is wrapped to see the
 * request begin (the fault where intended) and how long it really took. */
#include <check.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "config/connector_config.h"
#include "kafka/consumer.h"
#include "kafka/fetch_wake.h"
#include "runtime/connector_state.h"
#include "services/clock.h"

#include "check_main.h"
#include "mock_consumer.h"

#define RTT_MS 10000

/* -1: the real length; otherwise what the waker is told. */
static atomic_llong fake_len = -1;

size_t __real_rd_kafka_queue_length(rd_kafka_queue_t *q);
size_t __wrap_rd_kafka_queue_length(rd_kafka_queue_t *q);
size_t __wrap_rd_kafka_queue_length(rd_kafka_queue_t *q) {
    long long v = atomic_load(&fake_len);
    return v < 0 ? __real_rd_kafka_queue_length(q) : (size_t)v;
}

static atomic_int queries_begun;
static atomic_llong query_took_ms = -1;

rd_kafka_resp_err_t
__real_rd_kafka_query_watermark_offsets(rd_kafka_t *rk, const char *topic,
                                        int32_t partition, int64_t *low,
                                        int64_t *high, int timeout_ms);
rd_kafka_resp_err_t
__wrap_rd_kafka_query_watermark_offsets(rd_kafka_t *rk, const char *topic,
                                        int32_t partition, int64_t *low,
                                        int64_t *high, int timeout_ms);
rd_kafka_resp_err_t
__wrap_rd_kafka_query_watermark_offsets(rd_kafka_t *rk, const char *topic,
                                        int32_t partition, int64_t *low,
                                        int64_t *high, int timeout_ms) {
    atomic_fetch_add(&queries_begun, 1);
    int64_t t0 = tm_clock_mono_ms();
    rd_kafka_resp_err_t err = __real_rd_kafka_query_watermark_offsets(
        rk, topic, partition, low, high, timeout_ms);
    atomic_store(&query_took_ms, tm_clock_mono_ms() - t0);
    return err;
}

START_TEST(stop_bounded_while_a_wake_up_waits_on_the_broker) {
    rd_kafka_t *prk;
    rd_kafka_mock_cluster_t *mc = tm_test_mock_cluster(&prk);
    static tm_connector c; /* outlives a stop that never returns */
    tm_test_mock_consumer(&c, mc, "stopwaker");
    ck_assert_msg(c.fetch_wake != NULL, "inconclusive: no waker made");
    /* The partition's leader known, so that the request is sent at once. */
    const struct rd_kafka_metadata *md = NULL;
    ck_assert_int_eq(rd_kafka_metadata(c.rk, 1, NULL, &md, 5000),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_metadata_destroy(md);
    ck_assert_int_eq(rd_kafka_mock_broker_set_rtt(mc, 1, RTT_MS), 0);
    /* A full queue (armed), then a drained one (fired). */
    atomic_store(&fake_len, 1000000);
    for (int i = 0; i < 256; i++)
        tm_fetch_wake_seen(c.fetch_wake, "t", 0);
    atomic_store(&fake_len, 0);
    for (int i = 0; i < 256; i++)
        tm_fetch_wake_seen(c.fetch_wake, "t", 0);
    ck_assert_int_eq(tm_fetch_wake_count(c.fetch_wake), 1);
    for (int i = 0; i < 200 && atomic_load(&queries_begun) == 0; i++)
        tm_test_sleep_ms(10);
    ck_assert_msg(atomic_load(&queries_begun) == 1,
                  "inconclusive: the waker asked nothing");
    tm_test_sleep_ms(300); /* the request on the wire */
    int64_t t0 = tm_clock_mono_ms();
    tm_consumer_stop(&c, 1500);
    int64_t took = tm_clock_mono_ms() - t0;
    fprintf(stderr, "stop took %lld ms; the wake-up's request %lld ms\n",
            (long long)took, (long long)atomic_load(&query_took_ms));
    ck_assert_msg(took < 4000,
                  "the stop, its close given 1500 ms, took %lld ms: it "
                  "waited for the waker's request to an unanswering broker",
                  (long long)took);
}
END_TEST

int main(void) {
    Suite *s = suite_create("consumer_stop_waker");
    TCase *tc = tcase_create("stop");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, stop_bounded_while_a_wake_up_waits_on_the_broker);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
