#include "metrics/metrics_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "metrics/metrics_targets.h"
#include "services/log.h"
#include "services/thread_name.h"

#define REQUEST_MAX  8192 /* a GET needs far less: more is refused */
#define IO_TIMEOUT_S 2    /* per read or write of one connection */

struct tm_metrics_http {
    int fd;      /* the listening socket */
    int wake[2]; /* a byte written to wake[1] stops the thread */
    tm_metrics_targets *targets;
    pthread_t thread;
};

int tm_metrics_listen_parse(const char *addr, int *family, unsigned char ip[16],
                            int *port, char *errstr, size_t errsize) {
    const char *colon = strrchr(addr, ':');
    char host[64];
    size_t hlen = colon ? (size_t)(colon - addr) : 0;
    if (colon && hlen < sizeof host) {
        memcpy(host, addr, hlen);
        host[hlen] = '\0';
    }
    char *end = NULL;
    long p = colon ? strtol(colon + 1, &end, 10) : 0;
    int ok = colon && hlen < sizeof host && end != colon + 1 && *end == '\0' &&
             p >= 1 && p <= 65535;
    if (ok && strcmp(host, "127.0.0.1") == 0) {
        *family = AF_INET;
        ok = inet_pton(AF_INET, host, ip) == 1;
    } else if (ok && strcmp(host, "[::1]") == 0) {
        *family = AF_INET6;
        ok = inet_pton(AF_INET6, "::1", ip) == 1;
    } else {
        ok = 0;
    }
    if (!ok) {
        snprintf(errstr, errsize,
                 "expected a loopback address and a port, 127.0.0.1:PORT or "
                 "[::1]:PORT (PORT 1..65535), found \"%s\" (metrics are "
                 "served on loopback only: scrape through node_exporter's "
                 "textfile collector from elsewhere)",
                 addr);
        return -1;
    }
    *port = (int)p;
    return 0;
}

/* Writes all of BUF; -1 on an error or the timeout. */
static int send_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t w = send(fd, buf, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

static void answer(int fd, const char *status, const char *type,
                   const char *body, size_t len) {
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: "
                     "%zu\r\nConnection: close\r\n\r\n",
                     status, type, len);
    if (n > 0 && (size_t)n < sizeof head && send_all(fd, head, (size_t)n) == 0)
        (void)send_all(fd, body, len);
}

/* Reads the request head (up to its blank line, REQUEST_MAX bytes, within
 * the timeouts) and answers it. */
static void serve(tm_metrics_http *h, int fd) {
    struct timeval tv = {IO_TIMEOUT_S, 0};
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
        return;
    char req[REQUEST_MAX + 1];
    size_t len = 0;
    while (len < REQUEST_MAX) {
        ssize_t r = recv(fd, req + len, REQUEST_MAX - len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return; /* closed, an error or the timeout: nothing to answer */
        len += (size_t)r;
        req[len] = '\0';
        if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
            break;
    }
    req[len] = '\0';
    const char *text = "text/plain; charset=utf-8";
    if (!strstr(req, "\r\n\r\n") && !strstr(req, "\n\n")) {
        answer(fd, "431 Request Header Fields Too Large", text, "", 0);
    } else if (strncmp(req, "GET ", 4) != 0) {
        answer(fd, "405 Method Not Allowed", text, "GET only\n", 9);
    } else if (strncmp(req + 4, "/metrics ", 9) != 0 &&
               strncmp(req + 4, "/metrics?", 9) != 0) {
        answer(fd, "404 Not Found", text, "GET /metrics\n", 13);
    } else {
        char *buf = NULL;
        size_t blen = 0;
        FILE *mem = open_memstream(&buf, &blen);
        int rc = mem ? tm_metrics_targets_render(h->targets, mem) : -1;
        if (mem && fclose(mem) != 0)
            rc = -1;
        if (rc != 0 || !buf)
            answer(fd, "500 Internal Server Error", text, "out of memory\n",
                   14);
        else
            answer(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8",
                   buf, blen);
        free(buf);
    }
}

static void *http_main(void *arg) {
    tm_thread_name("tm:metrics");
    tm_metrics_http *h = arg;
    for (;;) {
        struct pollfd p[2] = {{h->fd, POLLIN, 0}, {h->wake[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            tm_log(TM_LOG_ERROR, NULL, "metrics listener: poll: %s",
                   strerror(errno));
            return NULL;
        }
        if (p[1].revents)
            return NULL;
        if (!(p[0].revents & POLLIN))
            continue;
        int c = accept(h->fd, NULL, NULL);
        if (c < 0)
            continue; /* a client gone before accept, EMFILE: next time */
        (void)fcntl(c, F_SETFD, FD_CLOEXEC);
        serve(h, c);
        close(c);
    }
}

tm_metrics_http *tm_metrics_http_start(const char *addr,
                                       tm_metrics_targets *targets,
                                       char *errstr, size_t errsize) {
    int family, port;
    unsigned char ip[16];
    if (tm_metrics_listen_parse(addr, &family, ip, &port, errstr, errsize) != 0)
        return NULL;
    tm_metrics_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(errstr, errsize, "out of memory");
        return NULL;
    }
    h->targets = targets;
    h->wake[0] = h->wake[1] = -1;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t sl;
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        memcpy(&a->sin_addr, ip, 4);
        sl = sizeof *a;
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        memcpy(&a->sin6_addr, ip, 16);
        sl = sizeof *a;
    }
    int one = 1;
    h->fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (h->fd < 0 ||
        setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(h->fd, (struct sockaddr *)&ss, sl) != 0 || listen(h->fd, 8) != 0) {
        snprintf(errstr, errsize, "\"%s\": cannot listen: %s", addr,
                 strerror(errno));
        goto fail;
    }
    if (pipe(h->wake) != 0 || fcntl(h->wake[0], F_SETFD, FD_CLOEXEC) != 0 ||
        fcntl(h->wake[1], F_SETFD, FD_CLOEXEC) != 0) {
        snprintf(errstr, errsize, "cannot make a pipe: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&h->thread, NULL, http_main, h) != 0) {
        snprintf(errstr, errsize, "cannot start its thread");
        goto fail;
    }
    return h;
fail:
    if (h->fd >= 0)
        close(h->fd);
    if (h->wake[0] >= 0) {
        close(h->wake[0]);
        close(h->wake[1]);
    }
    free(h);
    return NULL;
}

void tm_metrics_http_stop(tm_metrics_http *h) {
    if (!h)
        return;
    ssize_t w;
    do
        w = write(h->wake[1], "x", 1);
    while (w < 0 && errno == EINTR);
    pthread_join(h->thread, NULL);
    close(h->fd);
    close(h->wake[0]);
    close(h->wake[1]);
    free(h);
}
