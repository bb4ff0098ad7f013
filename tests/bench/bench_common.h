/* What the benchmarks share: the clock, the median, and timing a sink
 * through the plugin API (open and claim outside the timing, every commit
 * inside), so that every sink is measured the same way. */
#ifndef TM_BENCH_COMMON_H
#define TM_BENCH_COMMON_H

#include <jansson.h>
#include <stddef.h>
#include <tidemark/sink.h>

double bench_now_s(void);

/* Sorts t and returns its median (the mean of the middle two for even n). */
double bench_median(double *t, size_t n);

/* Called after the claim with the partition's epoch: stamps the batches. */
typedef void (*bench_prepare_fn)(void *ctx, int64_t epoch);

/* Opens the sink with settings (a JSON object, "$.sink.settings") and the
 * columns, claims partition 0 of topic at offset 0, calls prepare, then
 * times the commits of batches[0..nbatches). Returns the seconds, or -1
 * with errstr naming the step. */
double bench_time_sink(const tm_sink_api *api, json_t *settings,
                       const char *plugin, const tm_column *cols, size_t ncols,
                       const char *topic, bench_prepare_fn prepare, void *ctx,
                       const tm_batch *batches, size_t nbatches, char *errstr,
                       size_t errstr_size);
/* The same with the connector's FLAGS (TM_CONFIG_DEDUP: business keys). */
double bench_time_sink_flags(const tm_sink_api *api, json_t *settings,
                             const char *plugin, const tm_column *cols,
                             size_t ncols, uint32_t flags, const char *topic,
                             bench_prepare_fn prepare, void *ctx,
                             const tm_batch *batches, size_t nbatches,
                             char *errstr, size_t errstr_size);

#endif
