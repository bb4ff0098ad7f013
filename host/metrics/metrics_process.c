#include "metrics/metrics_process.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics_exporter.h"
#include "metrics/metrics_http.h"
#include "metrics/metrics_targets.h"
#include "metrics/metrics_textfile.h"
#include "services/log.h"

struct tm_metrics_process {
    tm_metrics_targets *targets; /* NULL: no metrics asked */
    tm_metrics_exporter *exporter;
    tm_metrics_http *http;
};

int tm_metrics_options_check(tm_metrics_options *o) {
    char why[1024];
    o->interval_s = 10;
    if (o->interval && !o->file) {
        fprintf(stderr,
                "tidemark run: --metrics-interval-s needs --metrics-file\n");
        return -1;
    }
    if (o->interval) {
        char *end;
        errno = 0;
        long v = strtol(o->interval, &end, 10);
        if (errno || end == o->interval || *end || v < 1 || v > 3600) {
            fprintf(stderr,
                    "tidemark run: --metrics-interval-s: expected a number of "
                    "seconds 1..3600, found \"%s\"\n",
                    o->interval);
            return -1;
        }
        o->interval_s = (int)v;
    }
    if (o->file && tm_metrics_textfile_check(o->file, why, sizeof why) != 0) {
        fprintf(stderr, "tidemark run: --metrics-file: %s\n", why);
        return -1;
    }
    int family, port;
    unsigned char ip[16];
    if (o->listen && tm_metrics_listen_parse(o->listen, &family, ip, &port, why,
                                             sizeof why) != 0) {
        fprintf(stderr, "tidemark run: --metrics-listen: %s\n", why);
        return -1;
    }
    return 0;
}

tm_metrics_process *tm_metrics_process_start(const tm_metrics_options *o,
                                             const char *const *names,
                                             const char *const *state_dirs,
                                             size_t n) {
    tm_metrics_process *p = calloc(1, sizeof *p);
    if (!p) {
        fprintf(stderr, "tidemark run: out of memory\n");
        return NULL;
    }
    if (!o->file && !o->listen)
        return p;
    p->targets = tm_metrics_targets_new();
    if (!p->targets ||
        tm_metrics_targets_set(p->targets, names, state_dirs, n) != 0) {
        fprintf(stderr, "tidemark run: out of memory\n");
        tm_metrics_process_stop(p);
        return NULL;
    }
    char why[1024];
    if (o->file &&
        !(p->exporter = tm_metrics_exporter_start(
              o->file, o->interval_s, p->targets, why, sizeof why))) {
        fprintf(stderr, "tidemark run: --metrics-file: %s\n", why);
        tm_metrics_process_stop(p);
        return NULL;
    }
    if (o->listen && !(p->http = tm_metrics_http_start(o->listen, p->targets,
                                                       why, sizeof why))) {
        fprintf(stderr, "tidemark run: --metrics-listen: %s\n", why);
        tm_metrics_process_stop(p);
        return NULL;
    }
    return p;
}

int tm_metrics_process_set(tm_metrics_process *p, const char *const *names,
                           const char *const *state_dirs, size_t n) {
    if (!p || !p->targets)
        return 0;
    if (tm_metrics_targets_set(p->targets, names, state_dirs, n) == 0)
        return 0;
    tm_log(TM_LOG_ERROR, NULL,
           "metrics: out of memory: they keep the connectors of before the "
           "reload");
    return -1;
}

void tm_metrics_process_stop(tm_metrics_process *p) {
    if (!p)
        return;
    tm_metrics_http_stop(p->http);
    tm_metrics_exporter_stop(p->exporter);
    tm_metrics_targets_free(p->targets);
    free(p);
}
