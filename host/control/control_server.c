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
#include <sys/time.h>
#include <fcntl.h>
#include <unistd.h>

#include "control/control_path.h"
#include "control/pause_file.h"
#include "services/clock.h"
#include "services/log.h"

struct tm_control_server {
    int dir_fd; /* the connector's directory (borrowed) */
    char dir[4400];
    char name[256];
    tm_run_ctl *ctl;
    int fd;
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

/* One request: a line read within 2 s, one line answered. */
static void serve(tm_control_server *s, int fd) {
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct ucred cred;
    socklen_t clen = sizeof cred;
    char answer[1024];
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) {
        snprintf(answer, sizeof answer,
                 "error: cannot tell who is asking (SO_PEERCRED: %s)",
                 strerror(errno));
    } else {
        char line[128];
        size_t n = 0;
        while (n < sizeof line - 1) {
            ssize_t r = read(fd, line + n, 1);
            if (r <= 0 || line[n] == '\n')
                break;
            n++;
        }
        line[n] = '\0';
        tm_control_handle(s->dir_fd, s->dir, s->name, s->ctl, line,
                          (unsigned)cred.uid, (unsigned)geteuid(),
                          tm_clock_wall_ms(), answer, sizeof answer);
    }
    size_t len = strlen(answer);
    answer[len++] = '\n';
    ssize_t w = write(fd, answer, len);
    (void)w; /* a client gone: nothing to tell */
}

static void *server_main(void *arg) {
    tm_control_server *s = arg;
    while (!atomic_load(&s->done)) {
        struct pollfd p = {s->fd, POLLIN, 0};
        if (poll(&p, 1, 200) <= 0)
            continue;
        int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        serve(s, fd);
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
        free(s);
        return NULL;
    }
    return s;
}

void tm_control_stop(tm_control_server *s) {
    if (!s)
        return;
    atomic_store(&s->done, 1);
    pthread_join(s->thread, NULL);
    close(s->fd);
    unlinkat(s->dir_fd, TM_CONTROL_SOCKET, 0);
    free(s);
}
