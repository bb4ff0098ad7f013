/* The host's one buffer and one clock (services/buf.c, services/clock.c):
 * growth from nothing and from a caller's room, the sticky out-of-memory
 * state, the array growth rule, and the clocks against time(). */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "services/buf.h"
#include "services/clock.h"
#include "check_main.h"

START_TEST(grows_from_nothing_and_stays_terminated) {
    tm_buf b = {0};
    ck_assert_int_eq(tm_buf_add(&b, "", 0), 0);
    ck_assert_ptr_nonnull(b.p);
    ck_assert_str_eq(b.p, "");
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(tm_buf_add(&b, "abc", 3), 0);
    ck_assert_uint_eq(b.n, 300);
    ck_assert_uint_eq(strlen(b.p), 300);
    ck_assert_int_eq(memcmp(b.p + 297, "abc", 3), 0);
    ck_assert_uint_ge(b.cap, 301);
    ck_assert_int_eq(b.heap, 1);
    tm_buf_free(&b);
    ck_assert_ptr_null(b.p);
    ck_assert_uint_eq(b.n + b.cap, 0);
}
END_TEST

START_TEST(room_is_used_then_left_for_the_heap) {
    char room[8];
    tm_buf b = TM_BUF_ON(room);
    ck_assert_int_eq(tm_buf_put(&b, "12345678", 8), 0); /* fills it */
    ck_assert_ptr_eq(b.p, room);
    ck_assert_int_eq(b.heap, 0);
    ck_assert_int_eq(tm_buf_put(&b, "9", 1), 0);
    ck_assert_ptr_ne(b.p, room);
    ck_assert_int_eq(b.heap, 1);
    ck_assert_uint_eq(b.n, 9);
    ck_assert_int_eq(memcmp(b.p, "123456789", 9), 0);
    tm_buf_free(&b); /* frees the heap copy only (ASan: no bad free) */
}
END_TEST

START_TEST(out_of_memory_sticks) {
    tm_buf b = {0};
    ck_assert_int_eq(tm_buf_add(&b, "kept", 4), 0);
    ck_assert_int_eq(tm_buf_reserve(&b, SIZE_MAX), -1);
    ck_assert_int_eq(b.oom, 1);
    ck_assert_int_eq(tm_buf_add(&b, "x", 1), -1);
    ck_assert_int_eq(tm_buf_put(&b, "x", 1), -1);
    ck_assert_str_eq(b.p, "kept"); /* what was there is untouched */
    tm_buf_free(&b);
    tm_buf c = {0};
    ck_assert_int_eq(tm_buf_add(&c, "", SIZE_MAX), -1);
    ck_assert_int_eq(c.oom, 1);
    tm_buf_free(&c);
}
END_TEST

START_TEST(arrays_double_from_sixteen) {
    size_t cap = 0;
    int *v = tm_grow_array(NULL, &cap, 0, sizeof *v);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(cap, 16);
    ck_assert_ptr_eq(tm_grow_array(v, &cap, 15, sizeof *v), v);
    ck_assert_uint_eq(cap, 16);
    for (int i = 0; i < 16; i++)
        v[i] = i;
    int *w = tm_grow_array(v, &cap, 16, sizeof *w);
    ck_assert_ptr_nonnull(w);
    ck_assert_uint_eq(cap, 32);
    ck_assert_int_eq(w[15], 15);
    w[16] = 16; /* element n has room */
    /* Overflow: NULL, the array and its capacity untouched. */
    ck_assert_ptr_null(tm_grow_array(w, &cap, 32, SIZE_MAX / 8));
    ck_assert_uint_eq(cap, 32);
    ck_assert_int_eq(w[16], 16);
    free(w);
}
END_TEST

START_TEST(clocks_read_the_right_clocks) {
    int64_t wall = tm_clock_wall_ms();
    int64_t t = (int64_t)time(NULL) * 1000;
    ck_assert_int_lt(llabs(wall - t), 2000);
    int64_t m1 = tm_clock_mono_ms();
    uint64_t ns = tm_clock_mono_ns();
    int64_t m2 = tm_clock_mono_ms();
    ck_assert_int_gt(m1, 0);
    ck_assert_int_le(m1, m2);
    ck_assert_int_ge((int64_t)(ns / 1000000u), m1);
    ck_assert_int_le((int64_t)(ns / 1000000u), m2);
}
END_TEST

/* A deadline on the monotonic clock, its nanoseconds carried, and a
 * condition variable of that clock that times out there, not an hour
 * away nor at once. */
START_TEST(monotonic_deadlines_and_waits) {
    int64_t before = tm_clock_mono_ms();
    struct timespec d = tm_clock_mono_after(1999);
    ck_assert_int_ge(d.tv_nsec, 0);
    ck_assert_int_lt(d.tv_nsec, 1000000000L);
    int64_t at = (int64_t)d.tv_sec * 1000 + d.tv_nsec / 1000000;
    ck_assert_int_ge(at, before + 1999);
    ck_assert_int_le(at, tm_clock_mono_ms() + 1999);
    pthread_cond_t cv;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    ck_assert_int_eq(tm_cond_init_mono(&cv), 0);
    struct timespec until = tm_clock_mono_after(200);
    int64_t t0 = tm_clock_mono_ms();
    pthread_mutex_lock(&mu);
    int rc = 0;
    while (rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&cv, &mu, &until);
    pthread_mutex_unlock(&mu);
    int64_t waited = tm_clock_mono_ms() - t0;
    ck_assert_int_ge(waited, 190);
    ck_assert_int_lt(waited, 60000);
    pthread_cond_destroy(&cv);
}
END_TEST

int main(void) {
    Suite *s = suite_create("buf");
    TCase *tc = tcase_create("buf");
    tcase_add_test(tc, grows_from_nothing_and_stays_terminated);
    tcase_add_test(tc, room_is_used_then_left_for_the_heap);
    tcase_add_test(tc, out_of_memory_sticks);
    tcase_add_test(tc, arrays_double_from_sixteen);
    tcase_add_test(tc, clocks_read_the_right_clocks);
    tcase_add_test(tc, monotonic_deadlines_and_waits);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 0);
}
