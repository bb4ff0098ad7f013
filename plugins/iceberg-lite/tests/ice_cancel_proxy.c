/* See ice_cancel_proxy.h. One thread accepts; one thread per connection
 * reads the first packet's 8 bytes (length, code), then either holds a
 * cancel request, or ends a session at once (refuse), or connects to the
 * server and copies bytes both ways.
 * Every wait polls at most 100 ms, so icp_stop ends them all. */
#define _XOPEN_SOURCE 700

#include "ice_cancel_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CANCEL_REQUEST_CODE 80877102u

typedef struct conn_arg {
    icp_proxy *x;
    int fd;
} conn_arg;

/* Reads exactly n bytes unless stopped or closed: 0 or -1. */
static int read_all(icp_proxy *x, int fd, unsigned char *p, size_t n) {
    while (n > 0 && !atomic_load(&x->stop)) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 100) <= 0)
            continue;
        ssize_t r = read(fd, p, n);
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return n == 0 ? 0 : -1;
}

static int write_all(int fd, const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Copies both ways until either side closes or the proxy stops. */
static void pump(icp_proxy *x, int cfd, int sfd) {
    unsigned char buf[16384];
    while (!atomic_load(&x->stop)) {
        struct pollfd pf[2] = {{.fd = cfd, .events = POLLIN},
                               {.fd = sfd, .events = POLLIN}};
        if (poll(pf, 2, 100) <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t r = read(pf[i].fd, buf, sizeof buf);
            if (r <= 0 || write_all(i ? cfd : sfd, buf, (size_t)r) != 0)
                return;
        }
    }
}

static void *conn_main(void *arg) {
    conn_arg a = *(conn_arg *)arg;
    icp_proxy *x = a.x;
    unsigned char head[8];
    if (read_all(x, a.fd, head, sizeof head) != 0)
        return NULL;
    uint32_t len, code;
    memcpy(&len, head, 4);
    memcpy(&code, head + 4, 4);
    if (ntohl(len) == 16 && ntohl(code) == CANCEL_REQUEST_CODE) {
        atomic_fetch_add(&x->cancels, 1);
        if (atomic_load(&x->blackhole)) {
            atomic_fetch_add(&x->blackholed, 1);
            while (!atomic_load(&x->stop)) /* never read, never answer */
                poll(NULL, 0, 100);
            return NULL;
        }
    } else {
        if (atomic_load(&x->refuse)) {
            shutdown(a.fd, SHUT_RDWR); /* the client reads EOF */
            return NULL;
        }
        atomic_fetch_add(&x->sessions, 1);
    }
    int sfd = socket(AF_INET, SOCK_STREAM, 0);
    if (sfd < 0)
        return NULL;
    if (connect(sfd, (struct sockaddr *)&x->server, sizeof x->server) == 0 &&
        write_all(sfd, head, sizeof head) == 0)
        pump(x, a.fd, sfd);
    close(sfd);
    shutdown(a.fd, SHUT_RDWR); /* the server's end reaches the client */
    return NULL;
}

static void *accept_main(void *arg) {
    icp_proxy *x = arg;
    static conn_arg args[ICP_MAX_CONNS];
    while (!atomic_load(&x->stop)) {
        struct pollfd pf = {.fd = x->lfd, .events = POLLIN};
        if (poll(&pf, 1, 100) <= 0)
            continue;
        int fd = accept(x->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        int i = atomic_load(&x->nconns);
        if (i >= ICP_MAX_CONNS) {
            close(fd);
            continue;
        }
        x->conn_fd[i] = fd;
        args[i] = (conn_arg){x, fd};
        if (pthread_create(&x->conn_th[i], NULL, conn_main, &args[i]) != 0) {
            close(fd);
            continue;
        }
        atomic_store(&x->nconns, i + 1);
    }
    return NULL;
}

int icp_start(icp_proxy *x, const char *host, int port) {
    memset(x, 0, sizeof *x);
    x->server.sin_family = AF_INET;
    x->server.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &x->server.sin_addr) != 1)
        return -1;
    x->lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (x->lfd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (bind(x->lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(x->lfd, 16) != 0 ||
        getsockname(x->lfd, (struct sockaddr *)&a, &alen) != 0 ||
        pthread_create(&x->accept_th, NULL, accept_main, x) != 0) {
        close(x->lfd);
        return -1;
    }
    x->port = ntohs(a.sin_port);
    return 0;
}

void icp_stop(icp_proxy *x) {
    atomic_store(&x->stop, 1);
    pthread_join(x->accept_th, NULL);
    int n = atomic_load(&x->nconns);
    for (int i = 0; i < n; i++) {
        pthread_join(x->conn_th[i], NULL);
        close(x->conn_fd[i]);
    }
    close(x->lfd);
}
