/* `tidemark run --metrics-listen ADDR:PORT`: GET /metrics served on a
 * loopback address only, for a Prometheus on the same machine to scrape.
 * Its own thread, one connection at a time with short timeouts and a
 * bounded request: a slow or hostile client delays only the next scrape,
 * never a connector (the text is made from the state directory's files,
 * metrics_exporter.h, never from a connector's memory under a lock). */
#ifndef TM_METRICS_HTTP_H
#define TM_METRICS_HTTP_H

#include <stddef.h>

#include "metrics/metrics_exporter.h"

typedef struct tm_metrics_http tm_metrics_http;

/* Checks ADDR ("127.0.0.1:PORT" or "[::1]:PORT", PORT 1..65535) into
 * *family, the address bytes and *port. 0, or -1 with errstr saying what
 * was expected. */
int tm_metrics_listen_parse(const char *addr, int *family, unsigned char ip[16],
                            int *port, char *errstr, size_t errsize);

/* Binds ADDR and serves the connectors TARGETS holds at each request
 * (TARGETS must outlive the server). NULL with errstr (an address refused,
 * a port in use). */
tm_metrics_http *tm_metrics_http_start(const char *addr,
                                       tm_metrics_targets *targets,
                                       char *errstr, size_t errsize);

/* Stops serving, ends the thread, closes the socket. NULL is ignored. */
void tm_metrics_http_stop(tm_metrics_http *h);

#endif
