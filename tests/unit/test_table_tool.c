/* Where `tidemark table` finds tidemark-iceberg without /proc (a
 * container or chroot without it mounted): beside /proc/self/exe's path
 * when there is one, else beside argv[0] when it is a path (absolute, or
 * relative to the working directory), else the bare name for PATH. */
#include <check.h>
#include <string.h>

#include "check_main.h"
#include "cli/table_tool.h"

static char out[4096];

START_TEST(beside_proc_self_exe_first) {
    ck_assert_int_eq(tm_table_tool_path("/opt/tm/bin/tidemark", "/elsewhere/tm",
                                        "/", out, sizeof out),
                     1);
    ck_assert_str_eq(out, "/opt/tm/bin/tidemark-iceberg");
}
END_TEST

START_TEST(no_proc_absolute_argv0) {
    ck_assert_int_eq(
        tm_table_tool_path(NULL, "/opt/x/bin/tidemark", "/", out, sizeof out),
        1);
    ck_assert_str_eq(out, "/opt/x/bin/tidemark-iceberg");
}
END_TEST

START_TEST(no_proc_relative_argv0_against_cwd) {
    ck_assert_int_eq(tm_table_tool_path(NULL, "build/host/tidemark", "/home/u",
                                        out, sizeof out),
                     1);
    ck_assert_str_eq(out, "/home/u/build/host/tidemark-iceberg");
    ck_assert_int_eq(
        tm_table_tool_path(NULL, "./tidemark", "/srv", out, sizeof out), 1);
    ck_assert_str_eq(out, "/srv/./tidemark-iceberg");
}
END_TEST

START_TEST(no_proc_bare_argv0_searches_path) {
    ck_assert_int_eq(
        tm_table_tool_path(NULL, "tidemark", "/srv", out, sizeof out), 0);
    ck_assert_str_eq(out, "tidemark-iceberg");
    ck_assert_int_eq(tm_table_tool_path(NULL, NULL, NULL, out, sizeof out), 0);
    ck_assert_str_eq(out, "tidemark-iceberg");
}
END_TEST

START_TEST(too_long_is_an_error) {
    char small[16];
    ck_assert_int_eq(tm_table_tool_path("/opt/tm/bin/tidemark", NULL, NULL,
                                        small, sizeof small),
                     -1);
    ck_assert_int_eq(
        tm_table_tool_path(NULL, "rel/tidemark", NULL, out, sizeof out),
        -1); /* relative argv[0], no working directory */
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("table_tool");
    TCase *tc = tcase_create("path");
    tcase_add_test(tc, beside_proc_self_exe_first);
    tcase_add_test(tc, no_proc_absolute_argv0);
    tcase_add_test(tc, no_proc_relative_argv0_against_cwd);
    tcase_add_test(tc, no_proc_bare_argv0_searches_path);
    tcase_add_test(tc, too_long_is_an_error);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 0);
}
