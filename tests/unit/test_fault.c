/* The fault hook: silent unless TIDEMARK_FAULT names the point; then the
 * point's name reaches the descriptor before the process dies (or stops). */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "services/fault.h"
#include "check_main.h"

/* Runs the hook in a child with the given environment; returns its wait
 * status and what it wrote to the pipe. */
static int run_child(const char *fault, const char *action, const char *hit,
                     int calls, char *out, size_t outsz) {
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        char fd[16];
        snprintf(fd, sizeof fd, "%d", fds[1]);
        setenv("TIDEMARK_FAULT_FD", fd, 1);
        if (fault)
            setenv("TIDEMARK_FAULT", fault, 1);
        if (action)
            setenv("TIDEMARK_FAULT_ACTION", action, 1);
        if (hit)
            setenv("TIDEMARK_FAULT_HIT", hit, 1);
        tm_fault("before_begin");
        for (int i = 0; i < calls; i++)
            tm_fault("after_marker");
        _exit(0);
    }
    close(fds[1]);
    int status;
    if (action && strcmp(action, "stop") == 0) {
        ck_assert_int_eq(waitpid(pid, &status, WUNTRACED), pid);
        ck_assert_msg(WIFSTOPPED(status), "child not stopped");
        kill(pid, SIGCONT);
    }
    /* WUNTRACED: a second stop must show, not hang the test. */
    ck_assert_int_eq(waitpid(pid, &status, WUNTRACED), pid);
    if (WIFSTOPPED(status)) {
        kill(pid, SIGKILL);
        int ignored;
        waitpid(pid, &ignored, 0);
    }
    ssize_t n = read(fds[0], out, outsz - 1);
    out[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    return status;
}

START_TEST(silent_without_env) {
    char out[64];
    int st = run_child(NULL, NULL, NULL, 3, out, sizeof out);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(kills_at_named_point) {
    char out[64];
    int st = run_child("after_marker", NULL, NULL, 3, out, sizeof out);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    ck_assert_str_eq(out, "after_marker\n");
}
END_TEST

START_TEST(nth_hit) {
    char out[64];
    int st = run_child("after_marker", NULL, "3", 2, out, sizeof out);
    ck_assert(WIFEXITED(st)); /* only 2 hits: never fires */
    ck_assert_str_eq(out, "");
    st = run_child("after_marker", NULL, "3", 3, out, sizeof out);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    ck_assert_str_eq(out, "after_marker\n");
}
END_TEST

START_TEST(stop_then_resume) {
    char out[64];
    int st = run_child("before_begin", "stop", NULL, 0, out, sizeof out);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert_str_eq(out, "before_begin\n");
}
END_TEST

START_TEST(stop_fires_once) {
    char out[64];
    /* Three hits of a stopping point: stopped at the first only, then the
     * continued process runs through the other two and exits. */
    int st = run_child("after_marker", "stop", NULL, 3, out, sizeof out);
    ck_assert_msg(!WIFSTOPPED(st), "stopped again after SIGCONT");
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert_str_eq(out, "after_marker\n");
}
END_TEST

START_TEST(stop_at_nth_hit_only) {
    char out[64];
    /* HIT=2 with three calls: fires at the second (the first passes). */
    int st = run_child("after_marker", "stop", "2", 3, out, sizeof out);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert_str_eq(out, "after_marker\n");
}
END_TEST

int main(void) {
    Suite *s = suite_create("fault");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, silent_without_env);
    tcase_add_test(tc, kills_at_named_point);
    tcase_add_test(tc, nth_hit);
    tcase_add_test(tc, stop_then_resume);
    tcase_add_test(tc, stop_fires_once);
    tcase_add_test(tc, stop_at_nth_hit_only);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 0);
}
