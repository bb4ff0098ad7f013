/* The consumer's close watchdog waits its timeout whatever the wall clock
 * does. clock_gettime is wrapped at link time so that CLOCK_REALTIME reads
 * an hour off the truth, which is what a wait computed on the wall clock
 * sees when that clock is stepped (NTP, an operator) during the wait: a
 * step forward before the deadline is computed, as a step back during the
 * wait, puts the deadline an hour away (the stop hangs an hour); the other
 * way the deadline is already past (the consumer is abandoned at once,
 * before its close had the time it was given). rd_kafka_consumer_close is
 * wrapped to hang until the test lets it go, as librdkafka 2.0.x can after
 * lost partitions, so that only the watchdog's timeout ends the wait. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "config/connector_config.h"
#include "kafka/consumer.h"
#include "runtime/connector_state.h"
#include "services/clock.h"

#include "check_main.h"
#include "config_ok.h"

/* Added to CLOCK_REALTIME's reading; read by librdkafka's threads too (its
 * log lines ask the time). */
static atomic_llong wall_skew_s;

int __real_clock_gettime(clockid_t clk, struct timespec *ts);
int __wrap_clock_gettime(clockid_t clk, struct timespec *ts);
int __wrap_clock_gettime(clockid_t clk, struct timespec *ts) {
    int rc = __real_clock_gettime(clk, ts);
    if (rc == 0 && clk == CLOCK_REALTIME)
        ts->tv_sec += (time_t)atomic_load(&wall_skew_s);
    return rc;
}

static pthread_mutex_t hang_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hang_cv = PTHREAD_COND_INITIALIZER;
static int closes_entered, let_go;

rd_kafka_resp_err_t __real_rd_kafka_consumer_close(rd_kafka_t *rk);
rd_kafka_resp_err_t __wrap_rd_kafka_consumer_close(rd_kafka_t *rk);
rd_kafka_resp_err_t __wrap_rd_kafka_consumer_close(rd_kafka_t *rk) {
    pthread_mutex_lock(&hang_mu);
    closes_entered++;
    pthread_cond_broadcast(&hang_cv);
    while (!let_go)
        pthread_cond_wait(&hang_cv, &hang_mu);
    pthread_mutex_unlock(&hang_mu);
    return __real_rd_kafka_consumer_close(rk);
}

static void let_closes_go(void) {
    pthread_mutex_lock(&hang_mu);
    let_go = 1;
    pthread_cond_broadcast(&hang_cv);
    pthread_mutex_unlock(&hang_mu);
}

typedef struct stopper {
    tm_connector c;
    int timeout_ms;
    int64_t took_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int returned;
} stopper;

static void *stop_thread(void *arg) {
    stopper *s = arg;
    int64_t t0 = tm_clock_mono_ms();
    tm_consumer_stop(&s->c, s->timeout_ms);
    pthread_mutex_lock(&s->mu);
    s->took_ms = tm_clock_mono_ms() - t0;
    s->returned = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Starts a consumer (no broker behind its address: none is needed to
 * create and close one) and stops it with the wall clock skewed by SKEW_S;
 * the stop's duration on the monotonic clock, or -1 if it had not returned
 * after 5 s. */
static int64_t stop_with_skew(int64_t skew_s, int timeout_ms) {
    static stopper s; /* outlives a stop that never returns */
    memset(&s.c, 0, sizeof s.c);
    s.c.cfg = tm_test_config_ok(
        "{\"name\":\"closeclock\","
        "\"kafka\":{\"bootstrap_servers\":\"127.0.0.1:1\",\"topics\":[\"t\"],"
        "\"static_membership\":false},"
        "\"sink\":{\"plugin\":\"sqlite\"},\"mapping\":{\"mode\":\"raw\"}}",
        "c.json");
    char errstr[512];
    ck_assert_msg(tm_consumer_start(&s.c, errstr, sizeof errstr) == 0, "%s",
                  errstr);
    s.timeout_ms = timeout_ms;
    s.returned = 0;
    ck_assert_int_eq(pthread_mutex_init(&s.mu, NULL), 0);
    ck_assert_int_eq(tm_cond_init_mono(&s.cv), 0);
    atomic_store(&wall_skew_s, skew_s);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, stop_thread, &s), 0);
    struct timespec until = tm_clock_mono_after(5000);
    pthread_mutex_lock(&s.mu);
    while (!s.returned &&
           pthread_cond_timedwait(&s.cv, &s.mu, &until) != ETIMEDOUT)
        ;
    int returned = s.returned;
    int64_t took = s.took_ms;
    pthread_mutex_unlock(&s.mu);
    atomic_store(&wall_skew_s, 0);
    pthread_mutex_lock(&hang_mu);
    int entered = closes_entered;
    pthread_mutex_unlock(&hang_mu);
    /* The fault must be where intended: the close ran and hung. */
    ck_assert_msg(entered >= 1, "inconclusive: the close was never called");
    if (!returned) {
        pthread_detach(th); /* hangs an hour on the old code */
        return -1;
    }
    pthread_join(th, NULL);
    tm_config_free((tm_connector_config *)s.c.cfg);
    return took;
}

START_TEST(wall_clock_behind_gives_the_close_its_time) {
    int64_t took = stop_with_skew(-3600, 600);
    ck_assert_msg(took >= 550 && took < 3000,
                  "a close given 600 ms was abandoned after %lld ms with the "
                  "wall clock an hour behind",
                  (long long)took);
}
END_TEST

START_TEST(wall_clock_ahead_does_not_stretch_the_wait) {
    int64_t took = stop_with_skew(3600, 600);
    ck_assert_msg(took >= 550,
                  "a close given 600 ms: the stop still waiting after 5 s "
                  "with the wall clock an hour ahead (%lld)",
                  (long long)took);
}
END_TEST

int main(void) {
    Suite *s = suite_create("consumer_close_clock");
    TCase *tc = tcase_create("watchdog");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, wall_clock_behind_gives_the_close_its_time);
    tcase_add_test(tc, wall_clock_ahead_does_not_stretch_the_wait);
    suite_add_tcase(s, tc);
    /* Each test in its own process: a close left hanging by one is let go
     * there, not carried into the next. */
    int rc = tm_check_run(s, 1);
    let_closes_go();
    return rc;
}
