#define _GNU_SOURCE /* struct ucred, SO_PEERCRED */
#include "control/control_server.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "control/control_path.h"
#include "control/pause_file.h"
#include "services/clock.h"
#include "services/log.h"
#include "services/thread_name.h"

struct tm_control_server {
    int dir_fd; /* the connector's directory (borrowed) */
    char dir[4400];
    char name[256];
    tm_run_ctl *ctl;
    int fd;
    int wake[2]; /* a byte written to wake[1] ends the serving at once */
    atomic_int done;
    pthread_t thread;
};

void tm_control_handle(int dir_fd, const char *shown, const char *name,
                       tm_run_ctl *ctl, const char *line, unsigned peer,
                       unsigned own, long long now_ms, char *answer,
                       size_t size) {
    char who[160], why[512];
    tm_control_user(peer, who, sizeof who);
    if (!tm_control_peer_allowed(peer, own)) {
        char owner[160];
        tm_control_user(own, owner, sizeof owner);
        snprintf(answer, size,
                 "error: permission denied: %s is neither the user the "
                 "process runs as (%s) nor root",
                 who, owner);
        tm_log(TM_LOG_WARN, name, "control: %s refused to %s", line, who);
        return;
    }
    if (strcmp(line, "pause") == 0) {
        if (atomic_load(&ctl->pause)) {
            snprintf(answer, size, "ok: %s is already paused", name);
            return;
        }
        /* The file first: a pause answered "ok" survives a restart. */
        if (tm_pause_file_write(dir_fd, shown, who, now_ms, why, sizeof why) !=
            0) {
            snprintf(answer, size, "error: %s", why);
            return;
        }
        atomic_store(&ctl->pause, 1);
        atomic_store(&ctl->loop_stop, 1);
        tm_log(TM_LOG_INFO, name, "control: pause asked by %s", who);
        snprintf(answer, size,
                 "ok: pausing %s (its batch in flight is finished first; its "
                 "partitions stay assigned to it, paused)",
                 name);
    } else if (strcmp(line, "resume") == 0) {
        if (tm_pause_file_remove(dir_fd, shown, why, sizeof why) != 0) {
            snprintf(answer, size, "error: %s", why);
            return;
        }
        if (!atomic_load(&ctl->pause)) {
            snprintf(answer, size, "ok: %s is not paused", name);
            return;
        }
        atomic_store(&ctl->pause, 0);
        tm_log(TM_LOG_INFO, name, "control: resume asked by %s", who);
        snprintf(answer, size, "ok: resuming %s", name);
    } else if (strcmp(line, "restart") == 0) {
        /* Stopping already (a reload that removes or restarts it, SIGTERM,
         * a restart under way): the flag would be lost when it is started
         * again, or never looked at when it is removed. */
        if (atomic_load(&ctl->stop)) {
            snprintf(answer, size,
                     "error: %s is stopping (SIGTERM, a reload or a restart "
                     "under way): restart not done; `tidemark status` shows "
                     "whether it starts again",
                     name);
            return;
        }
        atomic_store(&ctl->restart, 1);
        tm_log(TM_LOG_INFO, name, "control: restart asked by %s", who);
        snprintf(answer, size,
                 "ok: restarting %s (stopped as by SIGTERM, then started "
                 "again%s)",
                 name, atomic_load(&ctl->pause) ? "; still paused" : "");
    } else {
        snprintf(answer, size,
                 "error: unknown request \"%.64s\" (expected pause, resume or "
                 "restart)",
                 line);
    }
}

/* Milliseconds left until deadline_ms (monotonic), 0 when past. */
static int left_ms(long long deadline_ms) {
    long long left = deadline_ms - tm_clock_mono_ms();
    return left > 0 ? (int)left : 0;
}

/* Reads one request line from FD into line (NUL-ended, without its
 * newline) before deadline_ms, or until WAKE_FD becomes readable (the
 * server stops). 0 with a line; -1 otherwise, with why. */
static int read_line(int fd, int wake_fd, long long deadline_ms, char *line,
                     size_t size, const char **why) {
    size_t n = 0;
    for (;;) {
        struct pollfd p[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
        int left = left_ms(deadline_ms);
        int r = left > 0 ? poll(p, wake_fd >= 0 ? 2 : 1, left) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            *why = "no complete request in time";
            return -1;
        }
        if (wake_fd >= 0 && p[1].revents) {
            *why = "the connector is stopping";
            return -1;
        }
        ssize_t got = recv(fd, line + n, size - 1 - n, MSG_DONTWAIT);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got <= 0) {
            *why = "the client hung up before its request was complete";
            return -1;
        }
        n += (size_t)got;
        line[n] = '\0';
        char *nl = memchr(line, '\n', n);
        if (nl) {
            *nl = '\0';
            return 0;
        }
        if (n == size - 1) {
            *why = "request too long";
            return -1;
        }
    }
}

/* Whether the client is still there to be answered: one that gave up (its
 * own timeout) and hung up must not have its request applied after it
 * was told there was no answer. Only a client gone in both directions
 * (POLLHUP) gave up: one that shut down only its writing end (POLLRDHUP:
 * `nc -N`, socat, a script closing stdin) still reads the answer. */
static int peer_gone(int fd) {
    struct pollfd p = {fd, 0, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR)) != 0;
}

int tm_control_serve(int dir_fd, const char *shown, const char *name,
                     tm_run_ctl *ctl, int fd, int wake_fd) {
    long long deadline = tm_clock_mono_ms() + TM_CONTROL_REQUEST_MS;
    struct ucred cred;
    socklen_t clen = sizeof cred;
    char answer[1024], line[128];
    const char *why = NULL;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) {
        why = "SO_PEERCRED";
        snprintf(answer, sizeof answer,
                 "error: cannot tell who is asking (SO_PEERCRED: %s)",
                 strerror(errno));
    } else if (read_line(fd, wake_fd, deadline, line, sizeof line, &why) != 0) {
        tm_log(TM_LOG_WARN, name, "control: request not served: %s", why);
        snprintf(answer, sizeof answer, "error: %s", why);
    } else if (peer_gone(fd)) {
        tm_log(TM_LOG_WARN, name,
               "control: \"%.64s\" not applied: the client hung up before "
               "it could be answered",
               line);
        return -1;
    } else {
        tm_control_handle(dir_fd, shown, name, ctl, line, (unsigned)cred.uid,
                          (unsigned)geteuid(), tm_clock_wall_ms(), answer,
                          sizeof answer);
    }
    size_t len = strlen(answer);
    answer[len++] = '\n';
    /* Never blocks: one short line into an empty socket buffer. */
    ssize_t w = send(fd, answer, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)w; /* a client gone: nothing to tell */
    return why ? -1 : 0;
}

static void *server_main(void *arg) {
    tm_thread_name("tm:control");
    tm_control_server *s = arg;
    while (!atomic_load(&s->done)) {
        struct pollfd p[2] = {{s->fd, POLLIN, 0}, {s->wake[0], POLLIN, 0}};
        if (poll(p, 2, -1) <= 0 || p[1].revents)
            continue;
        int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        tm_control_serve(s->dir_fd, s->dir, s->name, s->ctl, fd, s->wake[0]);
        close(fd);
    }
    return NULL;
}

tm_control_server *tm_control_start(int dir_fd, const char *shown,
                                    const char *name, tm_run_ctl *ctl,
                                    char *why, size_t size) {
    tm_control_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(why, size, "out of memory");
        return NULL;
    }
    s->dir_fd = dir_fd;
    snprintf(s->dir, sizeof s->dir, "%s", shown);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->ctl = ctl;
    atomic_init(&s->done, 0);
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        snprintf(why, size, "control socket: pipe: %s", strerror(errno));
        free(s);
        return NULL;
    }
    struct sockaddr_un addr;
    socklen_t len;
    tm_control_addr_fd(dir_fd, &addr, &len);
    s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    /* Ours to replace: the caller holds the host lock, so a socket there is
     * one a dead process left. */
    unlinkat(dir_fd, TM_CONTROL_SOCKET, 0);
    int ok = s->fd >= 0 && bind(s->fd, (struct sockaddr *)&addr, len) == 0;
    /* The mode before anyone can connect: listen() comes after it. */
    ok = ok && fchmodat(dir_fd, TM_CONTROL_SOCKET, 0600, 0) == 0;
    ok = ok && listen(s->fd, 8) == 0;
    if (!ok)
        snprintf(why, size, "control socket %s/%s: %s", shown,
                 TM_CONTROL_SOCKET, strerror(errno));
    if (ok && pthread_create(&s->thread, NULL, server_main, s) != 0) {
        snprintf(why, size, "control socket: cannot start its thread");
        ok = 0;
    }
    if (!ok) {
        if (s->fd >= 0)
            close(s->fd);
        close(s->wake[0]);
        close(s->wake[1]);
        free(s);
        return NULL;
    }
    return s;
}

void tm_control_stop(tm_control_server *s) {
    if (!s)
        return;
    atomic_store(&s->done, 1);
    /* Wakes the thread in its poll, also while it serves a client: a stop
     * never waits for a client. */
    ssize_t w = write(s->wake[1], "x", 1);
    (void)w; /* the pipe is empty: the byte goes in */
    pthread_join(s->thread, NULL);
    close(s->wake[0]);
    close(s->wake[1]);
    close(s->fd);
    unlinkat(s->dir_fd, TM_CONTROL_SOCKET, 0);
    free(s);
}
