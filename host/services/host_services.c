/* The host services table: everything a plugin may call in the host. One
 * static table for the process; its functions are thread-safe. */
#include "services/host_services.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "commit/marker_check.h"
#include "config/settings.h"
#include "config/settings_table.h"
#include "services/error.h"
#include "services/fault.h"
#include "services/log.h"

static void services_set_error(tm_error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tm_error_vset(err, fmt, ap);
    va_end(ap);
}

static void services_log(void *host_ctx, tm_log_level level, const char *fmt,
                         ...) {
    const tm_log_context *ctx = host_ctx;
    va_list ap;
    va_start(ap, fmt);
    tm_log_v(level, ctx ? ctx->connector : NULL, ctx ? ctx->plugin : NULL, fmt,
             ap);
    va_end(ap);
}

static int services_emit(void *emit_ctx, const tm_scan_item *item) {
    const tm_emit_target *t = emit_ctx;
    if (!t || !t->fn)
        return 1; /* nobody listens: stop the scan */
    return t->fn(t->user, item);
}

static int services_scan_wants_values(void *emit_ctx) {
    const tm_emit_target *t = emit_ctx;
    return t && !t->no_values;
}

static const tm_host_api services = {
    .struct_size = sizeof(tm_host_api),
    .abi_major = TM_SINK_ABI_MAJOR,
    .abi_minor = TM_SINK_ABI_MINOR,
    .marker_check = tm_marker_check,
    .marker_advance = tm_marker_advance,
    .setting_string = tm_settings_string,
    .setting_int = tm_settings_int,
    .setting_bool = tm_settings_bool,
    .settings_check_keys = tm_settings_check_keys,
    .set_error = services_set_error,
    .log = services_log,
    .fault = tm_fault,
    .emit = services_emit,
    .settings_fill = tm_settings_fill,
    .scan_wants_values = services_scan_wants_values,
};

const tm_host_api *tm_host_services(void) {
    return &services;
}
