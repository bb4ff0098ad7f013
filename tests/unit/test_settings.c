/* Settings getters and "did you mean": every error names the JSON path,
 * what was expected and what was found. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "config/did_you_mean.h"
#include "config/settings.h"
#include "check_main.h"

static tm_settings *load(const char *text) {
    json_error_t jerr;
    json_t *obj = json_loads(text, 0, &jerr);
    ck_assert_ptr_nonnull(obj);
    tm_settings *s = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    ck_assert_ptr_nonnull(s);
    return s;
}

START_TEST(typed_getters) {
    tm_settings *s = load("{\"path\":\"/x\",\"n\":5,\"b\":true,\"z\":null}");
    tm_error err = {sizeof err, ""};
    const char *str = NULL;
    int64_t n = 0;
    int b = 0;
    ck_assert_int_eq(tm_settings_string(s, "path", &str, &err), 1);
    ck_assert_str_eq(str, "/x");
    ck_assert_int_eq(tm_settings_int(s, "n", &n, &err), 1);
    ck_assert_int_eq(n, 5);
    ck_assert_int_eq(tm_settings_bool(s, "b", &b, &err), 1);
    ck_assert_int_eq(b, 1);
    ck_assert_int_eq(tm_settings_string(s, "absent", &str, &err), 0);
    ck_assert_int_eq(tm_settings_string(s, "z", &str, &err), 0);
    tm_settings_free(s);
}
END_TEST

START_TEST(wrong_type_names_path) {
    tm_settings *s = load("{\"n\":\"five\",\"my key\":1}");
    tm_error err = {sizeof err, ""};
    int64_t n;
    ck_assert_int_eq(tm_settings_int(s, "n", &n, &err), -1);
    ck_assert_str_eq(err.message,
                     "$.sink.settings.n: expected an integer, found string");
    const char *str;
    ck_assert_int_eq(tm_settings_string(s, "my key", &str, &err), -1);
    ck_assert_str_eq(err.message, "$.sink.settings[\"my key\"]: expected a "
                                  "string, found integer");
    tm_settings_free(s);
}
END_TEST

START_TEST(unknown_key_did_you_mean) {
    tm_settings *s = load("{\"path\":\"/x\",\"tabel\":\"t\"}");
    const char *known[] = {"path", "table", "synchronous"};
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(tm_settings_check_keys(s, known, 3, &err), -1);
    ck_assert_str_eq(err.message, "$.sink.settings.tabel: unknown setting "
                                  "(did you mean \"table\"?)");
    tm_settings_free(s);
    s = load("{\"zzzzzz\":1}");
    ck_assert_int_eq(tm_settings_check_keys(s, known, 3, &err), -1);
    ck_assert_str_eq(err.message, "$.sink.settings.zzzzzz: unknown setting");
    tm_settings_free(s);
    s = load("{\"path\":\"/x\"}");
    ck_assert_int_eq(tm_settings_check_keys(s, known, 3, &err), 0);
    tm_settings_free(s);
}
END_TEST

START_TEST(did_you_mean_limits) {
    const char *words[] = {"max_records", "max_bytes", "max_wait_ms"};
    ck_assert_str_eq(tm_did_you_mean("max_record", words, 3), "max_records");
    ck_assert_str_eq(tm_did_you_mean("max_wait", words, 3), "max_wait_ms");
    ck_assert_ptr_null(tm_did_you_mean("topic", words, 3));
}
END_TEST

int main(void) {
    Suite *s = suite_create("settings");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, typed_getters);
    tcase_add_test(tc, wrong_type_names_path);
    tcase_add_test(tc, unknown_key_did_you_mean);
    tcase_add_test(tc, did_you_mean_limits);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
