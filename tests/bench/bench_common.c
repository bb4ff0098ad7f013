#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "config/settings.h"
#include "services/host_services.h"

double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int by_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *t, size_t n) {
    qsort(t, n, sizeof t[0], by_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

double bench_time_sink(const tm_sink_api *api, json_t *settings,
                       const char *plugin, const tm_column *cols, size_t ncols,
                       const char *topic, bench_prepare_fn prepare, void *ctx,
                       const tm_batch *batches, size_t nbatches, char *errstr,
                       size_t errstr_size) {
    return bench_time_sink_flags(api, settings, plugin, cols, ncols, 0, topic,
                                 prepare, ctx, batches, nbatches, errstr,
                                 errstr_size);
}

double bench_time_sink_flags(const tm_sink_api *api, json_t *settings,
                             const char *plugin, const tm_column *cols,
                             size_t ncols, uint32_t flags, const char *topic,
                             bench_prepare_fn prepare, void *ctx,
                             const tm_batch *batches, size_t nbatches,
                             char *errstr, size_t errstr_size) {
    tm_settings *set = tm_settings_new(settings, "$.sink.settings");
    if (!set) {
        snprintf(errstr, errstr_size, "settings: out of memory");
        return -1;
    }
    tm_log_context logctx = {"bench", plugin};
    tm_sink_config config = {.struct_size = sizeof config,
                             .connector = "bench",
                             .settings = set,
                             .columns = cols,
                             .ncolumns = ncols,
                             .flags = flags,
                             .host_ctx = &logctx};
    tm_error err = {sizeof err, ""};
    void *sink = NULL;
    double t = -1;
    const char *step = "open";
    if (api->open(tm_host_services(), &config, &sink, &err) != TM_OK)
        goto out;
    tm_marker m = {.struct_size = sizeof m, .topic = topic};
    step = "claim";
    if (api->claim(sink, &m, 1, 0, &err) != TM_OK)
        goto out;
    prepare(ctx, m.epoch);
    step = "commit";
    double t0 = bench_now_s();
    for (size_t k = 0; k < nbatches; k++) {
        tm_status rc = api->commit(sink, &batches[k], &err);
        if (rc != TM_OK) {
            snprintf(errstr, errstr_size, "commit: %s: %s", tm_status_name(rc),
                     err.message);
            goto close;
        }
    }
    t = bench_now_s() - t0;
    goto close;
out:
    snprintf(errstr, errstr_size, "%s: %s", step, err.message);
close:
    if (sink)
        api->close(sink);
    tm_settings_free(set);
    return t;
}
