/* LD_PRELOAD'ed into a host by health_e2e: every IPv4 connect() to port
 * FROM goes to port TO of the same address (HEALTH_REDIRECT="FROM:TO").
 * The broker advertises its own address, so pointing a host's bootstrap at
 * a proxy is not enough: librdkafka would connect to the advertised port
 * directly. Redirected, every connection of the host to the broker passes
 * through the test's proxy, which can then cut them all, while the shared
 * broker itself keeps running for everyone else. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

int connect(int fd, const struct sockaddr *sa, socklen_t len) {
    connect_fn real = (connect_fn)dlsym(RTLD_NEXT, "connect");
    const char *spec = getenv("HEALTH_REDIRECT");
    if (!real)
        return -1;
    if (!spec || !sa || sa->sa_family != AF_INET ||
        len < (socklen_t)sizeof(struct sockaddr_in))
        return real(fd, sa, len);
    char *end;
    long from = strtol(spec, &end, 10);
    long to = *end == ':' ? strtol(end + 1, NULL, 10) : 0;
    struct sockaddr_in a;
    memcpy(&a, sa, sizeof a);
    if (from <= 0 || to <= 0 || to > 65535 || ntohs(a.sin_port) != from)
        return real(fd, sa, len);
    a.sin_port = htons((uint16_t)to);
    return real(fd, (const struct sockaddr *)&a, sizeof a);
}
