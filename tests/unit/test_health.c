/* The health model's pure parts: the exit status `tidemark status` makes
 * of a set of connectors (tm_status_health), and the DEGRADED state with
 * its reason and since-when through the status file's JSON. Expectations
 * are docs/operations.md's table, written here by hand. */
#include <check.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status/status_json.h"
#include "status/status_print.h"

#include "check_main.h"

/* The reader's wall clock in these tests. */
#define NOW INT64_C(1764770000000)

static tm_status_view view(tm_conn_state st) {
    tm_status_view v;
    memset(&v, 0, sizeof v);
    v.running = 1;
    v.r.live = 1;
    v.r.snap.state = st;
    return v;
}

START_TEST(test_health_degraded_exit_3) {
    tm_status_view v[2] = {view(TM_CONN_RUNNING), view(TM_CONN_DEGRADED)};
    ck_assert_int_eq(tm_status_health(v, 2, NOW), 3);
    v[1] = view(TM_CONN_PAUSED);
    ck_assert_int_eq(tm_status_health(v, 2, NOW), 0);
    v[1] = view(TM_CONN_STARTING);
    ck_assert_int_eq(tm_status_health(v, 2, NOW), 0);
}
END_TEST

/* Down outranks DEGRADED, an unreadable status outranks both. */
START_TEST(test_health_order) {
    tm_status_view v[3] = {view(TM_CONN_DEGRADED), view(TM_CONN_FAILED),
                           view(TM_CONN_RUNNING)};
    ck_assert_int_eq(tm_status_health(v, 3, NOW), 2);
    v[1] = view(TM_CONN_STOPPED);
    ck_assert_int_eq(tm_status_health(v, 3, NOW), 2);
    v[1] = view(TM_CONN_RUNNING);
    v[1].running = 0;
    ck_assert_int_eq(tm_status_health(v, 3, NOW), 2);
    strcpy(v[2].error, "cannot read");
    ck_assert_int_eq(tm_status_health(v, 3, NOW), 1);
}
END_TEST

/* A live host's status file older than TM_STATUS_STALE_MS: the host is hung
 * or cannot write it, so its RUNNING says nothing about now (DEGRADED's
 * exit). A file of a host that is gone, FAILED or STOPPED is judged by
 * that; one without a time, or from "the future" (the wall clock stepped
 * back), is not stale. */
START_TEST(test_health_stale_file) {
    tm_status_view v[1] = {view(TM_CONN_RUNNING)};
    v[0].r.has_file = 1;
    v[0].r.snap.updated_ms = NOW - 10000; /* the documented 10 s */
    ck_assert_int_eq(tm_status_stale_ms(&v[0], NOW), 0);
    ck_assert_int_eq(tm_status_health(v, 1, NOW), 0);
    v[0].r.snap.updated_ms = NOW - 10001;
    ck_assert_int_eq(tm_status_stale_ms(&v[0], NOW), 10001);
    ck_assert_int_eq(tm_status_health(v, 1, NOW), 3);
    v[0].r.snap.state = TM_CONN_PAUSED;
    ck_assert_int_eq(tm_status_health(v, 1, NOW), 3);
    v[0].r.snap.state = TM_CONN_FAILED;
    ck_assert_int_eq(tm_status_stale_ms(&v[0], NOW), 0);
    ck_assert_int_eq(tm_status_health(v, 1, NOW), 2);
    v[0].r.snap.state = TM_CONN_RUNNING;
    v[0].r.has_file = 0;
    ck_assert_int_eq(tm_status_health(v, 1, NOW), 0);
    v[0].r.has_file = 1;
    v[0].r.snap.updated_ms = NOW + 3600000;
    ck_assert_int_eq(tm_status_health(v, 1, NOW), 0);
    v[0].r.snap.updated_ms = 0;
    ck_assert_int_eq(tm_status_health(v, 1, NOW), 0);
    v[0].r.snap.updated_ms = NOW - 60000;
    ck_assert_int_eq(tm_status_stale_ms(&v[0], NOW), 60000);
    v[0].r.live = 0; /* its lock is free: gone, shown STOPPED instead */
    ck_assert_int_eq(tm_status_stale_ms(&v[0], NOW), 0);
    v[0].r.live = 1;
    v[0].running = 0;
    ck_assert_int_eq(tm_status_stale_ms(&v[0], NOW), 0);
}
END_TEST

/* Times from a status file anyone may have written: INT64_MIN in every one
 * of them is shown (text and JSON, of a live host) without an overflow (the
 * ASan+UBSan build aborts on one) and is no age at all. */
START_TEST(test_health_extreme_times) {
    tm_status_view v = view(TM_CONN_DEGRADED);
    v.r.has_file = 1;
    v.r.snap.updated_ms = INT64_MIN;
    v.r.snap.started_ms = INT64_MIN;
    v.r.snap.reason_since_ms = INT64_MIN;
    v.r.snap.waiting_since_ms = INT64_MIN;
    v.r.snap.waiting_until_ms = INT64_MIN;
    strcpy(v.r.snap.reason, "r");
    strcpy(v.r.snap.waiting_on, "w");
    FILE *devnull = fopen("/dev/null", "w");
    ck_assert_ptr_nonnull(devnull);
    tm_status_print_text(devnull, &v, 1, NOW);
    fclose(devnull);
    json_t *doc = tm_status_views_json("d", &v, 1, NOW);
    ck_assert_ptr_nonnull(doc);
    json_t *c = json_array_get(json_object_get(doc, "connectors"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "uptime_ms")), 0);
    ck_assert(json_is_null(json_object_get(c, "stale_ms")));
    ck_assert(json_is_null(json_object_get(c, "overdue_ms")));
    json_decref(doc);
    ck_assert_int_eq(tm_status_stale_ms(&v, NOW), 0);
    ck_assert_int_eq(tm_status_overdue_ms(&v, NOW), 0);
    v.r.snap.updated_ms = INT64_MAX;
    ck_assert_int_eq(tm_status_stale_ms(&v, NOW), 0);
}
END_TEST

/* A live host's connector waiting on a step of its commit more than
 * TM_STATUS_STALE_MS past the end the host gave it: its file is fresh (the
 * pulse), yet it is stuck in a call that does not return: DEGRADED's exit,
 * with how long in the JSON. Within its end, or 10 s past it, or with no
 * known end, or no wait, or a host gone, FAILED or STOPPED: not overdue. */
START_TEST(test_health_overdue_wait) {
    tm_status_view v[1] = {view(TM_CONN_RUNNING)};
    v[0].r.has_file = 1;
    v[0].r.snap.updated_ms = NOW - 500; /* fresh */
    strcpy(v[0].r.snap.waiting_on, "the sink's commit of batch b-1");
    v[0].r.snap.waiting_since_ms = NOW - 60000;
    v[0].r.snap.waiting_until_ms = NOW + 1000;
    ck_assert_int_eq(tm_status_overdue_ms(&v[0], NOW), 0);
    ck_assert_int_eq(tm_status_health(v, 1, NOW), 0);
    v[0].r.snap.waiting_until_ms = NOW - 10000; /* the documented 10 s */
    ck_assert_int_eq(tm_status_overdue_ms(&v[0], NOW), 0);
    ck_assert_int_eq(tm_status_health(v, 1, NOW), 0);
    v[0].r.snap.waiting_until_ms = NOW - 10001;
    ck_assert_int_eq(tm_status_overdue_ms(&v[0], NOW), 10001);
    ck_assert_int_eq(tm_status_health(v, 1, NOW), 3);
    json_t *doc = tm_status_views_json("d", v, 1, NOW);
    ck_assert_ptr_nonnull(doc);
    json_t *c = json_array_get(json_object_get(doc, "connectors"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "overdue_ms")),
                     10001);
    json_decref(doc);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(out);
    tm_status_print_text(out, v, 1, NOW);
    fclose(out);
    ck_assert_msg(strstr(text, "\n  overdue     the wait is 10s past"),
                  "no overdue line: %s", text);
    free(text);
    v[0].r.snap.state = TM_CONN_PAUSED; /* a pause waits for the commit */
    ck_assert_int_eq(tm_status_health(v, 1, NOW), 3);
    v[0].r.snap.state = TM_CONN_FAILED;
    ck_assert_int_eq(tm_status_overdue_ms(&v[0], NOW), 0);
    v[0].r.snap.state = TM_CONN_RUNNING;
    v[0].r.live = 0; /* gone: it waits on nothing any more */
    ck_assert_int_eq(tm_status_overdue_ms(&v[0], NOW), 0);
    v[0].r.live = 1;
    v[0].r.snap.waiting_until_ms = 0; /* no known end */
    ck_assert_int_eq(tm_status_overdue_ms(&v[0], NOW), 0);
    v[0].r.snap.waiting_until_ms = NOW - 60000;
    v[0].r.snap.waiting_on[0] = '\0'; /* no wait */
    ck_assert_int_eq(tm_status_overdue_ms(&v[0], NOW), 0);
    ck_assert_int_eq(tm_status_health(v, 1, NOW), 0);
}
END_TEST

START_TEST(test_health_state_names) {
    tm_conn_state st;
    ck_assert_str_eq(tm_conn_state_name(TM_CONN_DEGRADED), "DEGRADED");
    ck_assert_int_eq(tm_conn_state_parse("DEGRADED", &st), 0);
    ck_assert_int_eq(st, TM_CONN_DEGRADED);
}
END_TEST

/* The reason and its since-when survive the status file; a file without
 * them (an older host's) reads as no reason. */
START_TEST(test_health_reason_round_trip) {
    tm_status_snapshot s, back;
    memset(&s, 0, sizeof s);
    strcpy(s.connector, "c");
    s.state = TM_CONN_DEGRADED;
    strcpy(s.reason, "claim of 1 partition(s): RETRY: database is locked");
    s.reason_since_ms = 1764000000123;
    json_t *doc = tm_status_to_json(&s);
    ck_assert_ptr_nonnull(doc);
    tm_status_partition *parts = NULL;
    char err[256];
    ck_assert_int_eq(tm_status_from_json(doc, &back, &parts, err, sizeof err),
                     0);
    ck_assert_int_eq(back.state, TM_CONN_DEGRADED);
    ck_assert_str_eq(back.reason, s.reason);
    ck_assert_int_eq(back.reason_since_ms, 1764000000123);
    json_object_del(doc, "reason");
    ck_assert_int_eq(tm_status_from_json(doc, &back, &parts, err, sizeof err),
                     0);
    ck_assert_str_eq(back.reason, "");
    ck_assert_int_eq(back.reason_since_ms, 0);
    json_decref(doc);
}
END_TEST

int main(void) {
    Suite *s = suite_create("health");
    TCase *tc = tcase_create("health");
    tcase_add_test(tc, test_health_degraded_exit_3);
    tcase_add_test(tc, test_health_order);
    tcase_add_test(tc, test_health_stale_file);
    tcase_add_test(tc, test_health_extreme_times);
    tcase_add_test(tc, test_health_overdue_wait);
    tcase_add_test(tc, test_health_state_names);
    tcase_add_test(tc, test_health_reason_round_trip);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
