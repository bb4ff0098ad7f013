/* A connector's sink: its plugin loaded, its capabilities checked against
 * the config, its settings wrapped, and one instance opened. The one place
 * that does these steps, for `run` and for the CLI's offline views. */
#ifndef TM_SINK_INSTANCE_H
#define TM_SINK_INSTANCE_H

#include <stddef.h>
#include <tidemark/sink.h>

#include "config/connector_config.h"
#include "plugin/loader.h"
#include "services/host_services.h"

typedef struct tm_sink_instance {
    tm_plugin plugin;
    const tm_sink_api *api; /* plugin.api */
    tm_settings *settings;
    tm_log_context log_ctx;
    tm_sink_config config;
    void *sink; /* the plugin's handle, NULL until opened */
} tm_sink_instance;

/* Loads cfg's plugin from dirs and refuses a config its capabilities cannot
 * keep (dedup without TM_CAP_DEDUP, dead letters in the sink without
 * TM_CAP_DEAD_LETTERS). 0, or -1 with "PATH: message" in errstr. */
int tm_sink_instance_load(tm_sink_instance *si, const tm_connector_config *cfg,
                          const char *const *dirs, size_t ndirs, char *errstr,
                          size_t errsize);

/* Opens the instance (after load). Returns the plugin's status; on failure
 * errstr holds "plugin NAME: open: STATUS: message". */
tm_status tm_sink_instance_open(tm_sink_instance *si, char *errstr,
                                size_t errsize);

/* Closes (when open) and releases everything; si may be partly loaded. */
void tm_sink_instance_close(tm_sink_instance *si);

#endif
