#define _GNU_SOURCE /* O_PATH */
#include "control/control_path.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int tm_control_addr(const char *conn_dir, struct sockaddr_un *addr,
                    socklen_t *len, int *dirfd, char *why, size_t size) {
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    *dirfd = -1;
    int n = snprintf(addr->sun_path, sizeof addr->sun_path, "%s/%s", conn_dir,
                     TM_CONTROL_SOCKET);
    if (n < 0 || (size_t)n >= sizeof addr->sun_path) {
        /* Longer than sun_path: the kernel resolves the name through the
         * descriptor's magic link, whatever the directory's length. */
        *dirfd = open(conn_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (*dirfd < 0) {
            snprintf(why, size, "%s: %s", conn_dir, strerror(errno));
            return -1;
        }
        snprintf(addr->sun_path, sizeof addr->sun_path, "/proc/self/fd/%d/%s",
                 *dirfd, TM_CONTROL_SOCKET);
    }
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                       strlen(addr->sun_path) + 1);
    return 0;
}

void tm_control_addr_fd(int dir_fd, struct sockaddr_un *addr, socklen_t *len) {
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    snprintf(addr->sun_path, sizeof addr->sun_path, "/proc/self/fd/%d/%s",
             dir_fd, TM_CONTROL_SOCKET);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                       strlen(addr->sun_path) + 1);
}

int tm_control_peer_allowed(unsigned peer, unsigned own) {
    return peer == own || peer == 0;
}

void tm_control_user(unsigned uid, char *out, size_t size) {
    struct passwd pw, *res = NULL;
    char buf[1024];
    if (getpwuid_r((uid_t)uid, &pw, buf, sizeof buf, &res) == 0 && res)
        snprintf(out, size, "%s (uid %u)", res->pw_name, uid);
    else
        snprintf(out, size, "uid %u", uid);
}
