/* The metrics file is rewritten every interval whatever the wall clock
 * does. clock_gettime is wrapped at link time: CLOCK_REALTIME reads an
 * hour ahead of the truth, which is what a wait computed on the wall clock
 * sees when that clock is stepped back an hour (NTP, an operator) during
 * the wait: its deadline lies an hour away. The exporter's interval must
 * be measured on the monotonic clock, which no step moves. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "metrics/metrics_exporter.h"
#include "metrics/metrics_targets.h"

#include "check_main.h"

int __real_clock_gettime(clockid_t clk, struct timespec *ts);
int __wrap_clock_gettime(clockid_t clk, struct timespec *ts);
int __wrap_clock_gettime(clockid_t clk, struct timespec *ts) {
    int rc = __real_clock_gettime(clk, ts);
    if (rc == 0 && clk == CLOCK_REALTIME)
        ts->tv_sec += 3600;
    return rc;
}

/* The file's identity: each write replaces it (a new inode) or at least
 * changes its change time. */
static int identity(const char *path, struct stat *st) {
    return stat(path, st) == 0 ? 0 : -1;
}

static int same(const struct stat *a, const struct stat *b) {
    return a->st_ino == b->st_ino && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
           a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

START_TEST(interval_holds_when_the_wall_clock_steps_back) {
    char dir[] = "/tmp/tm-metrics-clock-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/m.prom", dir);
    tm_metrics_targets *set = tm_metrics_targets_new();
    ck_assert_ptr_nonnull(set);
    char why[512];
    tm_metrics_exporter *e =
        tm_metrics_exporter_start(path, 1, set, why, sizeof why);
    ck_assert_msg(e != NULL, "%s", why);
    struct stat last;
    ck_assert_int_eq(identity(path, &last), 0); /* written at its start */
    /* Interval 1 s, watched for 3.5 s: 2 to 5 more writes (3 on time),
     * none if a wait runs on the stepped clock (an hour), dozens if a wait
     * ends at once (a deadline already past). */
    int writes = 0;
    for (int i = 0; i < 70; i++) {
        nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
        struct stat now;
        if (identity(path, &now) == 0 && !same(&now, &last)) {
            writes++;
            last = now;
        }
    }
    tm_metrics_exporter_stop(e);
    tm_metrics_targets_free(set);
    unlink(path);
    rmdir(dir);
    ck_assert_msg(writes >= 2 && writes <= 5,
                  "the metrics file was rewritten %d times in 3.5 s at an "
                  "interval of 1 s with the wall clock stepped back an hour",
                  writes);
}
END_TEST

int main(void) {
    Suite *s = suite_create("metrics_clock");
    TCase *tc = tcase_create("clock");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, interval_holds_when_the_wall_clock_steps_back);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
