/* Command-line option parsing: a relative --plugin-dir is resolved against
 * the working directory once, when the command line is read (the loader
 * refuses relative directories: they would follow later chdir()s). */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_args.h"
#include "check_main.h"

START_TEST(relative_plugin_dir_resolved_at_parse) {
    char cwd[PATH_MAX], want[PATH_MAX + 16];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    char a0[] = "--plugin-dir", a1[] = "plugins", a2[] = "--plugin-dir=x/y";
    char *argv[] = {a0, a1, a2};
    int i = 0;
    const char *out = NULL;
    ck_assert_int_eq(tm_cli_opt("plugins", "--plugin-dir", 3, argv, &i, &out),
                     1);
    ck_assert_int_eq(i, 1);
    snprintf(want, sizeof want, "%s/plugins", cwd);
    ck_assert_str_eq(out, want);
    i = 2;
    ck_assert_int_eq(tm_cli_opt("plugins", "--plugin-dir", 3, argv, &i, &out),
                     1);
    snprintf(want, sizeof want, "%s/x/y", cwd);
    ck_assert_str_eq(out, want);
}
END_TEST

START_TEST(absolute_plugin_dir_and_other_options_kept) {
    char a0[] = "--plugin-dir", a1[] = "/opt/p", a2[] = "--state-dir",
         a3[] = "rel";
    char *argv[] = {a0, a1, a2, a3};
    int i = 0;
    const char *out = NULL;
    ck_assert_int_eq(tm_cli_opt("run", "--plugin-dir", 4, argv, &i, &out), 1);
    ck_assert_str_eq(out, "/opt/p");
    i = 2;
    ck_assert_int_eq(tm_cli_opt("run", "--state-dir", 4, argv, &i, &out), 1);
    ck_assert_str_eq(out, "rel");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("cli_args");
    TCase *tc = tcase_create("paths");
    tcase_add_test(tc, relative_plugin_dir_resolved_at_parse);
    tcase_add_test(tc, absolute_plugin_dir_and_other_options_kept);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
