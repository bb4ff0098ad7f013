/* The host services table handed to every plugin (tm_host_api), and the
 * host-side types behind its opaque pointers. */
#ifndef TM_HOST_SERVICES_H
#define TM_HOST_SERVICES_H

#include <tidemark/sink.h>

/* The table: one static instance for the whole process. */
const tm_host_api *tm_host_services(void);

/* What the host passes as tm_sink_config.host_ctx: names added to every
 * line a plugin logs (PostgreSQL's errcontext). */
typedef struct tm_log_context {
    const char *connector;
    const char *plugin;
} tm_log_context;

/* What the host passes as emit_ctx to a plugin's scan(): host->emit(ctx,
 * item) calls fn(user, item); host->scan_wants_values(ctx) is
 * !no_values (zero-initialised: values wanted). */
typedef int (*tm_emit_fn)(void *user, const tm_scan_item *item);
typedef struct tm_emit_target {
    tm_emit_fn fn;
    void *user;
    int no_values; /* the reader needs no values: the sink skips them */
} tm_emit_target;

#endif
