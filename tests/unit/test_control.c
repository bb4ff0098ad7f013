/* The control channel's pure parts and its socket (host/control): who may
 * ask (the process's own user or root, from SO_PEERCRED), what each
 * request does to the connector's flags and its pause file, and a socket
 * under a directory longer than sun_path still served and reached. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "control/control_path.h"
#include "control/control_server.h"
#include "control/pause_file.h"
#include "runtime/connector.h"

#include "check_main.h"

static char dir[4096];
static int dfd = -1;

static void make_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/tm-control-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    dfd = open(dir, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(dfd, 0);
}

static void remove_dir(void) {
    char why[256];
    tm_pause_file_remove(dfd, dir, why, sizeof why);
    close(dfd);
    rmdir(dir);
}

START_TEST(test_peer_allowed) {
    ck_assert(tm_control_peer_allowed(1000, 1000));
    ck_assert(tm_control_peer_allowed(0, 1000)); /* root */
    ck_assert(!tm_control_peer_allowed(1001, 1000));
    ck_assert(!tm_control_peer_allowed(1000, 0)); /* a user, root's host */
}
END_TEST

/* Another user is refused, and nothing changes: no flag, no file. */
START_TEST(test_other_user_refused) {
    make_dir();
    tm_run_ctl ctl;
    tm_run_ctl_init(&ctl);
    char answer[1024], by[160], why[256];
    int64_t since;
    tm_control_handle(dfd, dir, "c", &ctl, "pause", 1001, 1000, 5, answer,
                      sizeof answer);
    ck_assert_msg(strncmp(answer, "error: permission denied: uid 1001", 34) ==
                          0 ||
                      strstr(answer, "(uid 1001) is neither") != NULL,
                  "%s", answer);
    ck_assert_int_eq(atomic_load(&ctl.pause), 0);
    ck_assert_int_eq(atomic_load(&ctl.loop_stop), 0);
    ck_assert_int_eq(
        tm_pause_file_read(dfd, dir, by, sizeof by, &since, why, sizeof why),
        0);
    tm_control_handle(dfd, dir, "c", &ctl, "restart", 1001, 1000, 5, answer,
                      sizeof answer);
    ck_assert_int_eq(atomic_load(&ctl.restart), 0);
    remove_dir();
}
END_TEST

/* pause: the file (who, when) and the flags; resume: both undone;
 * restart: its flag; anything else: an error naming the requests. */
START_TEST(test_requests) {
    make_dir();
    tm_run_ctl ctl;
    tm_run_ctl_init(&ctl);
    char answer[1024], by[160], why[256];
    int64_t since = 0;
    unsigned me = (unsigned)geteuid();
    tm_control_handle(dfd, dir, "c", &ctl, "pause", me, me, 1234, answer,
                      sizeof answer);
    ck_assert_msg(strncmp(answer, "ok: pausing c", 13) == 0, "%s", answer);
    ck_assert_int_eq(atomic_load(&ctl.pause), 1);
    ck_assert_int_eq(atomic_load(&ctl.loop_stop), 1);
    ck_assert_int_eq(
        tm_pause_file_read(dfd, dir, by, sizeof by, &since, why, sizeof why),
        1);
    ck_assert_int_eq(since, 1234);
    char want[160];
    tm_control_user(me, want, sizeof want);
    ck_assert_str_eq(by, want);
    tm_control_handle(dfd, dir, "c", &ctl, "pause", me, me, 9999, answer,
                      sizeof answer);
    ck_assert_msg(strstr(answer, "already paused") != NULL, "%s", answer);
    tm_pause_file_read(dfd, dir, by, sizeof by, &since, why, sizeof why);
    ck_assert_int_eq(since, 1234); /* the first pause's time is kept */

    tm_control_handle(dfd, dir, "c", &ctl, "resume", me, me, 2000, answer,
                      sizeof answer);
    ck_assert_msg(strncmp(answer, "ok: resuming c", 14) == 0, "%s", answer);
    ck_assert_int_eq(atomic_load(&ctl.pause), 0);
    ck_assert_int_eq(
        tm_pause_file_read(dfd, dir, by, sizeof by, &since, why, sizeof why),
        0);
    tm_control_handle(dfd, dir, "c", &ctl, "resume", me, me, 2000, answer,
                      sizeof answer);
    ck_assert_msg(strstr(answer, "is not paused") != NULL, "%s", answer);

    tm_control_handle(dfd, dir, "c", &ctl, "restart", 0, me, 3000, answer,
                      sizeof answer);
    ck_assert_msg(strncmp(answer, "ok: restarting c", 16) == 0, "%s", answer);
    ck_assert_int_eq(atomic_load(&ctl.restart), 1);

    tm_control_handle(dfd, dir, "c", &ctl, "stop", me, me, 0, answer,
                      sizeof answer);
    ck_assert_msg(strstr(answer, "error: unknown request") == answer, "%s",
                  answer);
    remove_dir();
}
END_TEST

/* A state directory longer than sun_path: the server binds through
 * /proc/self/fd, the client connects the same way, and the request is
 * answered. */
START_TEST(test_long_path_socket) {
    make_dir();
    char deep[4096];
    snprintf(deep, sizeof deep, "%s", dir);
    while (strlen(deep) < 200) {
        strcat(deep, "/a-rather-long-directory-name");
        ck_assert_msg(mkdir(deep, 0700) == 0, "mkdir: %s", strerror(errno));
    }
    struct sockaddr_un addr;
    socklen_t len;
    int dirfd;
    char why[512];
    ck_assert_int_eq(
        tm_control_addr(deep, &addr, &len, &dirfd, why, sizeof why), 0);
    ck_assert_int_ge(dirfd, 0);
    ck_assert(strncmp(addr.sun_path, "/proc/self/fd/", 14) == 0);
    tm_run_ctl ctl;
    tm_run_ctl_init(&ctl);
    int deep_fd = open(deep, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(deep_fd, 0);
    tm_control_server *s =
        tm_control_start(deep_fd, deep, "c", &ctl, why, sizeof why);
    ck_assert_msg(s != NULL, "%s", why);
    char sock[4200];
    snprintf(sock, sizeof sock, "%s/%s", deep, TM_CONTROL_SOCKET);
    struct stat st;
    ck_assert_int_eq(stat(sock, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&addr, len), 0);
    close(dirfd);
    ck_assert_int_eq(write(fd, "restart\n", 8), 8);
    char answer[256] = "";
    ssize_t n = read(fd, answer, sizeof answer - 1);
    ck_assert_int_gt(n, 0);
    ck_assert_msg(strncmp(answer, "ok: restarting c", 16) == 0, "%s", answer);
    close(fd);
    ck_assert_int_eq(atomic_load(&ctl.restart), 1);
    tm_control_stop(s);
    ck_assert_int_ne(stat(sock, &st), 0); /* removed on stop */
    close(deep_fd);
    /* The directories made above, innermost first. */
    while (strlen(deep) > strlen(dir)) {
        rmdir(deep);
        *strrchr(deep, '/') = '\0';
    }
    remove_dir();
}
END_TEST

/* A malformed pause file keeps the connector paused (fail-safe) but says
 * why: its path and the parser's message, for the log and the status. */
START_TEST(test_malformed_pause_file) {
    make_dir();
    int fd = openat(dfd, TM_PAUSE_FILE, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "{\"by\": ", 7), 7);
    close(fd);
    char by[160] = "", why[512] = "";
    int64_t since = -1;
    ck_assert_int_eq(
        tm_pause_file_read(dfd, dir, by, sizeof by, &since, why, sizeof why),
        1);
    ck_assert_str_eq(by, "unknown");
    ck_assert_msg(strstr(why, TM_PAUSE_FILE) && strstr(why, "malformed"),
                  "why: \"%s\"", why);
    /* A good file: nothing to say. */
    ck_assert_int_eq(tm_pause_file_write(dfd, dir, "me", 7, why, sizeof why),
                     0);
    snprintf(why, sizeof why, "stale");
    ck_assert_int_eq(
        tm_pause_file_read(dfd, dir, by, sizeof by, &since, why, sizeof why),
        1);
    ck_assert_str_eq(by, "me");
    ck_assert_str_eq(why, "");
    remove_dir();
}
END_TEST

/* A restart asked while the connector is stopping already (a reload that
 * removes or restarts it, SIGTERM) is not answered "ok: restarting": the
 * stop decides what comes next, and the answer says so. */
START_TEST(test_restart_while_stopping) {
    make_dir();
    tm_run_ctl ctl;
    tm_run_ctl_init(&ctl);
    tm_run_ctl_stop(&ctl);
    char answer[1024];
    tm_control_handle(dfd, dir, "c", &ctl, "restart", 1000, 1000, 5, answer,
                      sizeof answer);
    ck_assert_msg(strncmp(answer, "error: c is stopping", 20) == 0, "%s",
                  answer);
    ck_assert_int_eq(atomic_load(&ctl.restart), 0);
    remove_dir();
}
END_TEST

/* ---- a served socket with slow or departed clients ---- */

static long long mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int client(void) {
    struct sockaddr_un addr;
    socklen_t len;
    tm_control_addr_fd(dfd, &addr, &len);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_msg(connect(fd, (struct sockaddr *)&addr, len) == 0,
                  "connect: %s", strerror(errno));
    return fd;
}

/* A client that sends one byte (never a newline) every 300 ms for up to
 * 10 s, then hangs up. */
typedef struct drip {
    int fd;
    atomic_int sent, quit;
    pthread_t th;
} drip;

static void *drip_main(void *arg) {
    drip *d = arg;
    for (int i = 0; i < 33 && !atomic_load(&d->quit); i++) {
        if (send(d->fd, "p", 1, MSG_NOSIGNAL) != 1)
            break;
        atomic_fetch_add(&d->sent, 1);
        nanosleep(&(struct timespec){0, 300000000}, NULL);
    }
    close(d->fd);
    return NULL;
}

static void drip_start(drip *d) {
    d->fd = client();
    atomic_init(&d->sent, 0);
    atomic_init(&d->quit, 0);
    ck_assert_int_eq(pthread_create(&d->th, NULL, drip_main, d), 0);
    while (atomic_load(&d->sent) < 2) /* the server reads it by now */
        nanosleep(&(struct timespec){0, 10000000}, NULL);
}

static void drip_end(drip *d) {
    atomic_store(&d->quit, 1);
    pthread_join(d->th, NULL);
}

/* A client that drips its request a byte at a time holds the socket at
 * most TM_CONTROL_REQUEST_MS (one deadline per request, not per byte): the
 * next client is answered soon after. */
START_TEST(test_dripping_client_deadline) {
    make_dir();
    tm_run_ctl ctl;
    tm_run_ctl_init(&ctl);
    char why[512];
    tm_control_server *s =
        tm_control_start(dfd, dir, "c", &ctl, why, sizeof why);
    ck_assert_msg(s != NULL, "%s", why);
    drip d;
    drip_start(&d);
    long long t0 = mono_ms();
    int fd = client();
    struct timeval tv = {12, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ck_assert_int_eq(write(fd, "restart\n", 8), 8);
    char answer[256] = "";
    ssize_t n = read(fd, answer, sizeof answer - 1);
    long long took = mono_ms() - t0;
    close(fd);
    ck_assert_msg(n > 0 && strncmp(answer, "ok: restarting c", 16) == 0,
                  "no answer (%zd) after %lld ms: %s", n, took, answer);
    ck_assert_msg(took < 4000,
                  "answered %lld ms after a dripping client connected", took);
    drip_end(&d);
    tm_control_stop(s);
    remove_dir();
}
END_TEST

/* A stop while a client is connected (dripping) returns at once: the
 * connector's stop never waits for a client. */
START_TEST(test_stop_with_client_connected) {
    make_dir();
    tm_run_ctl ctl;
    tm_run_ctl_init(&ctl);
    char why[512];
    tm_control_server *s =
        tm_control_start(dfd, dir, "c", &ctl, why, sizeof why);
    ck_assert_msg(s != NULL, "%s", why);
    drip d;
    drip_start(&d);
    long long t0 = mono_ms();
    tm_control_stop(s);
    long long took = mono_ms() - t0;
    drip_end(&d);
    ck_assert_msg(took < 3000, "the stop took %lld ms with a client connected",
                  took);
    remove_dir();
}
END_TEST

/* A request whose client hung up before it could be answered (it gave up
 * waiting) is not applied: it waits in the backlog behind a dripping
 * client; a later client's request, answered, proves it was handled. */
START_TEST(test_hung_up_request_not_applied) {
    make_dir();
    tm_run_ctl ctl;
    tm_run_ctl_init(&ctl);
    char why[512], by[160];
    tm_control_server *s =
        tm_control_start(dfd, dir, "c", &ctl, why, sizeof why);
    ck_assert_msg(s != NULL, "%s", why);
    drip d;
    drip_start(&d);
    int gone = client();
    ck_assert_int_eq(write(gone, "pause\n", 6), 6);
    close(gone);
    int fd = client();
    struct timeval tv = {15, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ck_assert_int_eq(write(fd, "restart\n", 8), 8);
    char answer[256] = "";
    ssize_t n = read(fd, answer, sizeof answer - 1);
    close(fd);
    ck_assert_msg(n > 0 && strncmp(answer, "ok: restarting c", 16) == 0,
                  "no answer to the later client (%zd): %s", n, answer);
    ck_assert_int_eq(atomic_load(&ctl.restart), 1);
    ck_assert_msg(atomic_load(&ctl.pause) == 0,
                  "the pause of a client that hung up was applied");
    int64_t since;
    ck_assert_int_eq(
        tm_pause_file_read(dfd, dir, by, sizeof by, &since, why, sizeof why),
        0);
    drip_end(&d);
    tm_control_stop(s);
    remove_dir();
}
END_TEST

/* A client that half-closes after its request (shutdown(SHUT_WR), as
 * `nc -N`, `socat` or a script that closes its write end do) is still
 * there to read the answer: its request is applied and answered. Only a
 * client gone in both directions is one that gave up. The request and the
 * shutdown wait in the backlog behind a dripping client, so both have
 * happened when the server reads the request. */
START_TEST(test_half_closed_client_answered) {
    make_dir();
    tm_run_ctl ctl;
    tm_run_ctl_init(&ctl);
    char why[512];
    tm_control_server *s =
        tm_control_start(dfd, dir, "c", &ctl, why, sizeof why);
    ck_assert_msg(s != NULL, "%s", why);
    drip d;
    drip_start(&d);
    int fd = client();
    struct timeval tv = {15, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ck_assert_int_eq(write(fd, "pause\n", 6), 6);
    ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
    char answer[256] = "";
    ssize_t n = read(fd, answer, sizeof answer - 1);
    close(fd);
    ck_assert_msg(n > 0 && strncmp(answer, "ok: pausing c", 13) == 0,
                  "a half-closed client got no answer (%zd): %s", n, answer);
    ck_assert_int_eq(atomic_load(&ctl.pause), 1);
    drip_end(&d);
    tm_control_stop(s);
    remove_dir();
}
END_TEST

int main(void) {
    signal(SIGPIPE, SIG_IGN); /* as the host: a client gone is an EPIPE */
    Suite *s = suite_create("control");
    TCase *tc = tcase_create("control");
    tcase_add_test(tc, test_peer_allowed);
    tcase_add_test(tc, test_other_user_refused);
    tcase_add_test(tc, test_requests);
    tcase_add_test(tc, test_long_path_socket);
    tcase_add_test(tc, test_malformed_pause_file);
    tcase_add_test(tc, test_restart_while_stopping);
    suite_add_tcase(s, tc);
    TCase *slow = tcase_create("slow clients");
    tcase_set_timeout(slow, 60);
    tcase_add_test(slow, test_dripping_client_deadline);
    tcase_add_test(slow, test_stop_with_client_connected);
    tcase_add_test(slow, test_hung_up_request_not_applied);
    tcase_add_test(slow, test_half_closed_client_answered);
    suite_add_tcase(s, slow);
    return tm_check_run(s, 1);
}
