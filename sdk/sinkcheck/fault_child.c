/* A commit in a forked child under a named crash point: the real host fault
 * hook (TIDEMARK_FAULT / TIDEMARK_FAULT_FD) must write the point's name and
 * SIGKILL the child. The parent proves both, then judges the state. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kit.h"

/* Child side: never returns. Exit codes say what went wrong. */
static void child_commit(const kit_fixture *fx, const kit_batch *kb,
                         const char *point, int fd) {
    char fdbuf[16];
    void *sink;
    tm_error err;
    snprintf(fdbuf, sizeof fdbuf, "%d", fd);
    if (setenv("TIDEMARK_FAULT", point, 1) != 0 ||
        setenv("TIDEMARK_FAULT_FD", fdbuf, 1) != 0 ||
        unsetenv("TIDEMARK_FAULT_ACTION") != 0 ||
        unsetenv("TIDEMARK_FAULT_HIT") != 0)
        _exit(20);
    if (kit_open(fx, NULL, &sink, &err) != TM_OK)
        _exit(21);
    tm_status rc = kit_commit(fx->run, sink, kb, &err);
    /* Reaching here means the point was never called. */
    _exit(rc == TM_OK ? 22 : 23);
}

static const char *child_exit_reason(int code) {
    switch (code) {
    case 20: return "setenv failed";
    case 21: return "open failed in the child";
    case 22: return "commit returned OK without reaching the point";
    case 23: return "commit failed without reaching the point";
    }
    return "unexpected exit";
}

int kit_commit_with_fault(const kit_fixture *fx, const kit_batch *kb,
                          const char *point, kit_result *res) {
    int fds[2];
    char got[64] = "";
    size_t len = 0;
    if (pipe(fds) != 0) {
        kit_fail(res, "%s: pipe: %s", point, strerror(errno));
        return -1;
    }
    fflush(NULL); /* the child must not flush our buffers again */
    pid_t pid = fork();
    if (pid < 0) {
        kit_fail(res, "%s: fork: %s", point, strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        child_commit(fx, kb, point, fds[1]);
    }
    close(fds[1]);
    /* Read until EOF (the child's death closes the pipe), 30 s at most. */
    int64_t deadline = tm_clock_mono_ms() + 30000;
    for (;;) {
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        int64_t left = deadline - tm_clock_mono_ms();
        int n = left > 0 ? poll(&pfd, 1, (int)left) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            kill(pid, SIGKILL); /* hung: end it, report below */
            break;
        }
        ssize_t r = read(fds[0], got + len, sizeof got - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || (len += (size_t)r) >= sizeof got - 1)
            break;
    }
    got[len] = '\0';
    close(fds[0]);
    int status;
    pid_t w;
    while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    if (w != pid) {
        kit_fail(res, "%s: waitpid: %s", point, strerror(errno));
        return -1;
    }
    got[strcspn(got, "\n")] = '\0';
    if (strcmp(got, point) != 0) {
        if (WIFEXITED(status))
            kit_fail(res,
                     "%s: inconclusive: the point's name never came "
                     "back (child exited %d: %s)",
                     point, WEXITSTATUS(status),
                     child_exit_reason(WEXITSTATUS(status)));
        else
            kit_fail(res,
                     "%s: inconclusive: the point's name never came "
                     "back (read '%s'; child %s %d)",
                     point, got,
                     WIFSIGNALED(status) ? "killed by signal" : "status",
                     WIFSIGNALED(status) ? WTERMSIG(status) : status);
        return -1;
    }
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
        kit_fail(res,
                 "%s: the child reached the point but did not die by "
                 "SIGKILL (status %d)",
                 point, status);
        return -1;
    }
    return 0;
}
