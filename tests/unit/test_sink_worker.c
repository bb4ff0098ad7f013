/* The sink's own thread of a connector (runtime/sink_worker.h), the
 * pipeline's: one job at a time, run on a thread other than the caller's,
 * the caller going on meanwhile, woken once the job is done, and its
 * result taken back once. Built under ThreadSanitizer too (threads are
 * new). */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "runtime/sink_worker.h"

#include "check_main.h"

typedef struct job {
    pthread_t ran_on;
    atomic_int release; /* the job returns once set */
    int result;
} job;

static void run(void *p) {
    job *j = p;
    j->ran_on = pthread_self();
    while (!atomic_load(&j->release)) {
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    j->result = 42;
}

static atomic_int woken;

static void wake(void *arg) {
    atomic_fetch_add((atomic_int *)arg, 1);
}

START_TEST(one_job_on_its_own_thread) {
    atomic_store(&woken, 0);
    tm_sink_worker *w = tm_sink_worker_start(wake, &woken);
    ck_assert_ptr_nonnull(w);
    job j = {0};
    atomic_init(&j.release, 0);
    ck_assert_int_eq(tm_sink_worker_busy(w), 0);
    ck_assert_int_eq(tm_sink_worker_submit(w, run, &j), 0);
    /* Out: a second one is refused, nothing is done yet. */
    ck_assert_int_eq(tm_sink_worker_busy(w), 1);
    job other = {0};
    atomic_init(&other.release, 1);
    ck_assert_int_eq(tm_sink_worker_submit(w, run, &other), -1);
    ck_assert_int_eq(tm_sink_worker_wait(w, 0), 0);
    ck_assert_int_eq(tm_sink_worker_wait(w, 50), 0);
    ck_assert_ptr_null(tm_sink_worker_take(w));
    ck_assert_int_eq(atomic_load(&woken), 0);
    atomic_store(&j.release, 1);
    ck_assert_int_eq(tm_sink_worker_wait(w, 10000), 1);
    ck_assert_int_eq(atomic_load(&woken), 1);
    /* Done but not taken: still out. */
    ck_assert_int_eq(tm_sink_worker_busy(w), 1);
    ck_assert_ptr_eq(tm_sink_worker_take(w), &j);
    ck_assert_int_eq(j.result, 42);
    ck_assert(!pthread_equal(j.ran_on, pthread_self()));
    ck_assert_int_eq(tm_sink_worker_busy(w), 0);
    ck_assert_ptr_null(tm_sink_worker_take(w));
    /* The next job runs on the same thread. */
    pthread_t first = j.ran_on;
    ck_assert_int_eq(tm_sink_worker_submit(w, run, &other), 0);
    ck_assert_int_eq(tm_sink_worker_wait(w, 10000), 1);
    ck_assert_ptr_eq(tm_sink_worker_take(w), &other);
    ck_assert(pthread_equal(other.ran_on, first));
    tm_sink_worker_stop(w);
}
END_TEST

typedef struct release_later {
    job *j;
    int ms;
} release_later;

static void *releaser(void *p) {
    release_later *r = p;
    struct timespec ts = {0, (long)r->ms * 1000000L};
    nanosleep(&ts, NULL);
    atomic_store(&r->j->release, 1);
    return NULL;
}

/* Stopping with a job out waits for it: nothing it uses may go before. */
START_TEST(stop_waits_for_the_job_out) {
    tm_sink_worker *w = tm_sink_worker_start(NULL, NULL);
    ck_assert_ptr_nonnull(w);
    job j = {0};
    atomic_init(&j.release, 0);
    ck_assert_int_eq(tm_sink_worker_submit(w, run, &j), 0);
    release_later r = {&j, 100};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, releaser, &r), 0);
    tm_sink_worker_stop(w);
    ck_assert_int_eq(j.result, 42);
    pthread_join(th, NULL);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("sink_worker");
    TCase *tc = tcase_create("worker");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, one_job_on_its_own_thread);
    tcase_add_test(tc, stop_waits_for_the_job_out);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 0);
}
