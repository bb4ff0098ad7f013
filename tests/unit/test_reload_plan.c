/* The reload plan (runtime/reload_plan.h): which connectors a SIGHUP
 * leaves untouched, restarts, stops or starts, from configs loaded the way
 * `tidemark run` loads them (tm_config_load_string). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/connector_config.h"
#include "runtime/reload_plan.h"

#include "check_main.h"
#include "config_ok.h"

/* A config of NAME with the batch size and the table given; extra is
 * spliced in as more top-level members ("" none). */
static tm_connector_config *conf(const char *name, int max_records,
                                 const char *table, const char *extra) {
    char text[2048];
    snprintf(text, sizeof text,
             "{%s\"name\":\"%s\","
             " \"kafka\":{\"bootstrap_servers\":\"localhost:9092\","
             "            \"topics\":[\"t-%s\"]},"
             " \"batch\":{\"max_records\":%d},"
             " \"sink\":{\"plugin\":\"sqlite\","
             "   \"settings\":{\"path\":\"/tmp/x.db\",\"table\":\"%s\"}},"
             " \"mapping\":{\"mode\":\"raw\"}}",
             extra, name, name, max_records, table);
    return tm_test_config_ok(text, "t.json");
}

/* Key order and spacing are not a change; a value is. */
START_TEST(test_same_ignores_key_order) {
    tm_connector_config *a = conf("a", 10, "t", "");
    tm_connector_config *b = conf("a", 10, "t", "");
    tm_connector_config *c = conf("a", 11, "t", "");
    const char *reordered =
        "{\"sink\":{\"settings\":{\"table\":\"t\",\"path\":\"/tmp/x.db\"},"
        "\"plugin\":\"sqlite\"},\"batch\":{\"max_records\":10},"
        "\"kafka\":{\"topics\":[\"t-a\"],"
        "\"bootstrap_servers\":\"localhost:9092\"},  \"name\":\"a\","
        "\"mapping\":{\"mode\":\"raw\"}}";
    tm_connector_config *d = tm_config_load_string(reordered, "d.json", NULL);
    ck_assert_ptr_nonnull(d);
    ck_assert(tm_reload_same(a, b));
    ck_assert(tm_reload_same(a, d));
    ck_assert(!tm_reload_same(a, c));
    tm_config_free(a);
    tm_config_free(b);
    tm_config_free(c);
    tm_config_free(d);
}
END_TEST

/* An interpolated value that changed is a changed config, though the
 * file's text is the same. */
START_TEST(test_same_sees_interpolated_values) {
    setenv("TM_RELOAD_PLAN_TABLE", "one", 1);
    tm_connector_config *a = conf("a", 10, "${env:TM_RELOAD_PLAN_TABLE}", "");
    tm_connector_config *b = conf("a", 10, "${env:TM_RELOAD_PLAN_TABLE}", "");
    setenv("TM_RELOAD_PLAN_TABLE", "two", 1);
    tm_connector_config *c = conf("a", 10, "${env:TM_RELOAD_PLAN_TABLE}", "");
    ck_assert(tm_reload_same(a, b));
    ck_assert(!tm_reload_same(a, c));
    tm_config_free(a);
    tm_config_free(b);
    tm_config_free(c);
}
END_TEST

/* Running a (unchanged), b (batch size changed), c (removed), f (FAILED,
 * config unchanged); read again: a, b', d (new), f. */
START_TEST(test_plan_each_action) {
    tm_connector_config *run_cfg[] = {
        conf("a", 10, "t", ""), conf("b", 10, "t", ""), conf("c", 10, "t", ""),
        conf("f", 10, "t", "")};
    tm_connector_config *next_cfg[] = {
        conf("d", 10, "t", ""), conf("f", 10, "t", ""), conf("b", 99, "t", ""),
        conf("a", 10, "t", "")};
    tm_reload_entry run[4], next[4];
    for (size_t i = 0; i < 4; i++) {
        run[i] = (tm_reload_entry){run_cfg[i], i == 3};
        next[i] = (tm_reload_entry){next_cfg[i], 0};
    }
    tm_reload_action ra[4], na[4];
    long rn[4];
    tm_reload_plan(run, 4, next, 4, ra, rn, na);
    ck_assert_int_eq(ra[0], TM_RELOAD_KEEP);
    ck_assert_int_eq(rn[0], 3);
    ck_assert_int_eq(ra[1], TM_RELOAD_RESTART);
    ck_assert_int_eq(rn[1], 2);
    ck_assert_int_eq(ra[2], TM_RELOAD_STOP);
    ck_assert_int_eq(rn[2], -1);
    /* Down: started again though its config is the same. */
    ck_assert_int_eq(ra[3], TM_RELOAD_RESTART);
    ck_assert_int_eq(rn[3], 1);
    ck_assert_int_eq(na[0], TM_RELOAD_START);
    ck_assert_int_eq(na[1], TM_RELOAD_RESTART);
    ck_assert_int_eq(na[2], TM_RELOAD_RESTART);
    ck_assert_int_eq(na[3], TM_RELOAD_KEEP);
    for (size_t i = 0; i < 4; i++) {
        tm_config_free(run_cfg[i]);
        tm_config_free(next_cfg[i]);
    }
}
END_TEST

/* A renamed connector (same file, new name) is one removed and one
 * added: markers, locks and groups go by name. */
START_TEST(test_plan_rename) {
    tm_connector_config *old = conf("old", 10, "t", "");
    tm_connector_config *new = conf("new", 10, "t", "");
    tm_reload_entry run = {old, 0}, next = {new, 0};
    tm_reload_action ra, na;
    long rn;
    tm_reload_plan(&run, 1, &next, 1, &ra, &rn, &na);
    ck_assert_int_eq(ra, TM_RELOAD_STOP);
    ck_assert_int_eq(na, TM_RELOAD_START);
    tm_config_free(old);
    tm_config_free(new);
}
END_TEST

int main(void) {
    Suite *s = suite_create("reload_plan");
    TCase *tc = tcase_create("reload_plan");
    tcase_add_test(tc, test_same_ignores_key_order);
    tcase_add_test(tc, test_same_sees_interpolated_values);
    tcase_add_test(tc, test_plan_each_action);
    tcase_add_test(tc, test_plan_rename);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
