/* Where `tidemark table` finds tidemark-iceberg: beside the running
 * binary's real path. /proc/self/exe's when there is one; without /proc
 * (a container or chroot without it mounted), argv[0] resolved through its
 * symlinks when it holds a '/', else the `tidemark` PATH ran, resolved the
 * same way, else the install's bin directory. The tool's name alone is
 * never looked up on PATH: that would run whatever comes first there. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include "cli/table_tool.h"

static char out[4096];
static char tmp[PATH_MAX]; /* the fixture's directory, resolved */

/* tmp/real/tidemark (an executable file), tmp/link/tidemark -> it, and
 * tmp/decoy/tidemark-iceberg (a tool with no tidemark beside it). */
static void touch_exec(const char *path) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(chmod(path, 0755), 0);
}

static void setup(void) {
    char t[] = "/tmp/tm_table_tool_XXXXXX", p[PATH_MAX + 64];
    ck_assert_ptr_nonnull(mkdtemp(t));
    ck_assert_ptr_nonnull(realpath(t, tmp));
    const char *dirs[] = {"real", "link", "decoy"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", tmp, dirs[i]);
        ck_assert_int_eq(mkdir(p, 0755), 0);
    }
    snprintf(p, sizeof p, "%s/real/tidemark", tmp);
    touch_exec(p);
    snprintf(p, sizeof p, "%s/link/tidemark", tmp);
    ck_assert_int_eq(symlink("../real/tidemark", p), 0);
    snprintf(p, sizeof p, "%s/decoy/tidemark-iceberg", tmp);
    touch_exec(p);
}

static void teardown(void) {
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *in_tmp(const char *rel) {
    static char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", tmp, rel);
    return p;
}

START_TEST(beside_proc_self_exe_first) {
    ck_assert_int_eq(tm_table_tool_path("/opt/tm/bin/tidemark", "/elsewhere/tm",
                                        NULL, "/inst/bin", out, sizeof out),
                     0);
    ck_assert_str_eq(out, "/opt/tm/bin/tidemark-iceberg");
}
END_TEST

START_TEST(symlinked_argv0_resolves_to_the_real_dir) {
    char argv0[PATH_MAX + 64], want[PATH_MAX + 64];
    snprintf(argv0, sizeof argv0, "%s", in_tmp("link/tidemark"));
    snprintf(want, sizeof want, "%s", in_tmp("real/tidemark-iceberg"));
    ck_assert_int_eq(
        tm_table_tool_path(NULL, argv0, NULL, "/inst/bin", out, sizeof out), 0);
    ck_assert_str_eq(out, want);
}
END_TEST

START_TEST(bare_argv0_resolves_tidemark_on_path) {
    /* PATH's first entry has a tool but no tidemark: not taken. */
    char path[2 * PATH_MAX + 200], want[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/decoy:%s/link", tmp, tmp);
    snprintf(want, sizeof want, "%s", in_tmp("real/tidemark-iceberg"));
    ck_assert_int_eq(tm_table_tool_path(NULL, "tidemark", path, "/inst/bin",
                                        out, sizeof out),
                     0);
    ck_assert_str_eq(out, want);
}
END_TEST

START_TEST(bare_argv0_never_searches_path_for_the_tool) {
    /* No tidemark on PATH, a tool there: the install's is run. */
    ck_assert_int_eq(tm_table_tool_path(NULL, "tidemark", in_tmp("decoy"),
                                        "/inst/bin", out, sizeof out),
                     0);
    ck_assert_str_eq(out, "/inst/bin/tidemark-iceberg");
    ck_assert_int_eq(
        tm_table_tool_path(NULL, NULL, NULL, "/inst/bin", out, sizeof out), 0);
    ck_assert_str_eq(out, "/inst/bin/tidemark-iceberg");
}
END_TEST

START_TEST(errors) {
    char small[16];
    ck_assert_int_eq(tm_table_tool_path("/opt/tm/bin/tidemark", NULL, NULL,
                                        "/inst/bin", small, sizeof small),
                     -1);
    ck_assert_int_eq(tm_table_tool_path(NULL, in_tmp("link/missing"), NULL,
                                        "/inst/bin", out, sizeof out),
                     -1); /* argv[0] is a path that does not resolve */
    ck_assert_ptr_nonnull(strstr(out, "link/missing"));
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("table_tool");
    TCase *tc = tcase_create("path");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, beside_proc_self_exe_first);
    tcase_add_test(tc, symlinked_argv0_resolves_to_the_real_dir);
    tcase_add_test(tc, bare_argv0_resolves_tidemark_on_path);
    tcase_add_test(tc, bare_argv0_never_searches_path_for_the_tool);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 0);
}
