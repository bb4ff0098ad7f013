/* metrics_emit OUT.prom STATE_DIR CONNECTOR...: records known figures in
 * the metrics registry for each CONNECTOR (two commits of 2 ms and 30 ms,
 * three conversions of 1 us, one error) and saves them in the connector's
 * directory as its host does, then writes OUT.prom through the
 * exporter `tidemark run --metrics-file` uses (once at its start, once at
 * its stop), for metrics_parse.py to judge with prometheus_client. */
#include <stdio.h>
#include <stdlib.h>

#include <fcntl.h>
#include <unistd.h>

#include "metrics/metrics_exporter.h"
#include "metrics/metrics_persist.h"
#include "metrics/metrics_registry.h"
#include "metrics/metrics_targets.h"

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr,
                "usage: metrics_emit OUT.prom STATE_DIR CONNECTOR...\n");
        return 2;
    }
    size_t n = (size_t)argc - 3;
    const char **dirs = calloc(n, sizeof *dirs);
    tm_metrics_targets *set = tm_metrics_targets_new();
    if (!dirs || !set)
        return 1;
    for (size_t i = 0; i < n; i++) {
        dirs[i] = argv[2];
        tm_metrics_conn *m = tm_metrics_conn_get(argv[3 + i]);
        if (!m)
            return 1;
        tm_metrics_commit_observe(m, 2000000);
        tm_metrics_commit_observe(m, 30000000);
        for (int k = 0; k < 3; k++)
            tm_metrics_convert_observe(m, 1000);
        tm_metrics_error(m);
        char dir[4096], why[1024];
        snprintf(dir, sizeof dir, "%s/%s", argv[2], argv[3 + i]);
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || tm_metrics_save_at(m, fd, dir, why, sizeof why) != 0) {
            fprintf(stderr, "metrics_emit: saving in %s failed\n", dir);
            return 1;
        }
        close(fd);
    }
    if (tm_metrics_targets_set(set, (const char *const *)argv + 3, dirs, n) !=
        0)
        return 1;
    char why[1024];
    tm_metrics_exporter *e =
        tm_metrics_exporter_start(argv[1], 3600, set, why, sizeof why);
    if (!e) {
        fprintf(stderr, "metrics_emit: %s\n", why);
        return 1;
    }
    tm_metrics_exporter_stop(e);
    tm_metrics_registry_reset();
    tm_metrics_targets_free(set);
    free(dirs);
    return 0;
}
