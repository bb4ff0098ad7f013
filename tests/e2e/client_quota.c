#include "client_quota.h"

#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "harness.h"

/* Kafka's AlterClientQuotas, version 0 (not a flexible version: plain
 * int16-length strings, no tagged fields), with request header v1. */
#define API_ALTER_CLIENT_QUOTAS 49

typedef struct wbuf {
    unsigned char b[1024];
    size_t n;
} wbuf;

static void put(wbuf *w, const void *p, size_t n) {
    H_CHECK(w->n + n <= sizeof w->b, "AlterClientQuotas: request too long");
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void put_be(wbuf *w, uint64_t v, int bytes) {
    unsigned char b[8];
    for (int i = 0; i < bytes; i++)
        b[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
    put(w, b, (size_t)bytes);
}

static void put_str(wbuf *w, const char *s) {
    size_t n = strlen(s);
    H_CHECK(n < 0x7fff, "AlterClientQuotas: string too long");
    put_be(w, n, 2);
    put(w, s, n);
}

/* The first host:port of the bootstrap list, connected (30 s timeouts). */
static int connect_bootstrap(void) {
    char host[256];
    snprintf(host, sizeof host, "%s", h_bootstrap());
    host[strcspn(host, ",")] = '\0';
    char *colon = strrchr(host, ':');
    H_CHECK(colon, "bootstrap %s: no port", h_bootstrap());
    *colon = '\0';
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, colon + 1, &hints, &ai);
    H_CHECK(rc == 0, "bootstrap %s: %s", h_bootstrap(), gai_strerror(rc));
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    struct timeval tv = {30, 0};
    if (fd >= 0 &&
        (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
         setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0 ||
         connect(fd, ai->ai_addr, ai->ai_addrlen) != 0)) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    H_CHECK(fd >= 0, "connect to %s: %s", h_bootstrap(), strerror(errno));
    return fd;
}

static void io_all(int fd, void *buf, size_t n, int writing) {
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t k = writing ? write(fd, p, n) : read(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        H_CHECK(k > 0, "AlterClientQuotas: %s: %s", writing ? "write" : "read",
                k == 0 ? "connection closed" : strerror(errno));
        p += k;
        n -= (size_t)k;
    }
}

static uint64_t get_be(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = v << 8 | p[i];
    return v;
}

void h_client_quota(const char *client_id, double bytes_per_s) {
    wbuf w = {.n = 4}; /* the size, written last */
    put_be(&w, API_ALTER_CLIENT_QUOTAS, 2);
    put_be(&w, 0, 2);      /* version */
    put_be(&w, 0x7e57, 4); /* correlation id */
    put_str(&w, "tidemark-e2e-quota");
    put_be(&w, 1, 4); /* entries */
    put_be(&w, 1, 4); /* its entity's parts */
    put_str(&w, "client-id");
    put_str(&w, client_id);
    put_be(&w, 1, 4); /* ops */
    put_str(&w, "producer_byte_rate");
    uint64_t bits = 0;
    double v = bytes_per_s < 0 ? 0 : bytes_per_s;
    memcpy(&bits, &v, sizeof bits);
    put_be(&w, bits, 8);
    put_be(&w, bytes_per_s < 0, 1); /* remove */
    put_be(&w, 0, 1);               /* validate_only */
    size_t body = w.n - 4;
    for (int i = 0; i < 4; i++)
        w.b[i] = (unsigned char)(body >> (8 * (3 - i)));

    int fd = connect_bootstrap();
    io_all(fd, w.b, w.n, 1);
    unsigned char len[4], r[1024];
    io_all(fd, len, 4, 0);
    uint64_t n = get_be(len, 4);
    H_CHECK(n >= 4 + 4 + 4 + 2 + 2 && n <= sizeof r,
            "AlterClientQuotas: a response of %llu bytes",
            (unsigned long long)n);
    io_all(fd, r, n, 0);
    close(fd);
    /* correlation id, throttle_time_ms, entries (one), error_code,
     * error_message. */
    H_CHECK(get_be(r, 4) == 0x7e57 && get_be(r + 8, 4) == 1,
            "AlterClientQuotas: not the answer to the request");
    int err = (int16_t)get_be(r + 12, 2);
    int msg_len = (int16_t)get_be(r + 14, 2);
    H_CHECK(err == 0,
            "AlterClientQuotas %s producer_byte_rate=%g: error %d%s%.*s",
            client_id, bytes_per_s, err, msg_len > 0 ? ": " : "",
            msg_len > 0 && (size_t)msg_len <= n - 16 ? msg_len : 0,
            (const char *)r + 16);
}
