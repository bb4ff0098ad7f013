/* A loopback TCP proxy in front of the PostgreSQL catalog for the cancel
 * tests: sessions pass through untouched, and while `blackhole` is set a
 * cancel request (the 16-byte CancelRequest packet a libpq PQcancel
 * sends on a connection of its own) is accepted and never answered nor
 * forwarded, as a proxy or server that hangs would. What it saw is
 * counted, so a test proves the cancel went there before it trusts the
 * outcome. */
#ifndef TM_ICE_CANCEL_PROXY_H
#define TM_ICE_CANCEL_PROXY_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>

#define ICP_MAX_CONNS 16

typedef struct icp_proxy {
    int lfd, port;
    struct sockaddr_in server;
    pthread_t accept_th;
    pthread_t conn_th[ICP_MAX_CONNS];
    int conn_fd[ICP_MAX_CONNS];
    atomic_int nconns;
    atomic_int stop;
    atomic_int blackhole;  /* hold cancel requests unanswered */
    atomic_int refuse;     /* close new sessions at once (a server gone) */
    atomic_int cancels;    /* cancel requests seen */
    atomic_int blackholed; /* ... of which held unanswered */
    atomic_int sessions;   /* other connections, passed through */
} icp_proxy;

/* Starts the proxy in front of host:port; 0 or -1. */
int icp_start(icp_proxy *x, const char *host, int port);
/* Stops it: every connection (a held cancel too) closed, threads joined. */
void icp_stop(icp_proxy *x);

#endif
