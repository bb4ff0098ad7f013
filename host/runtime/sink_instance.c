#include "runtime/sink_instance.h"

#include <stdio.h>
#include <string.h>

#include "config/settings.h"
#include "services/error.h"

int tm_sink_instance_load(tm_sink_instance *si, const tm_connector_config *cfg,
                          const char *const *dirs, size_t ndirs, char *errstr,
                          size_t errsize) {
    memset(si, 0, sizeof *si);
    char why[1024] = "";
    if (tm_plugin_load(cfg->sink.plugin, dirs, ndirs, &si->plugin, why,
                       sizeof why) != 0) {
        snprintf(errstr, errsize, "$.sink.plugin: %s", why);
        return -1;
    }
    si->api = si->plugin.api;
    if (cfg->dedup.enabled && !(si->api->capabilities & TM_CAP_DEDUP)) {
        snprintf(errstr, errsize,
                 "$.dedup: plugin \"%s\" (%s) cannot dedup: it lacks the "
                 "dedup capability (TM_CAP_DEDUP); remove $.dedup or use "
                 "another sink",
                 si->api->name, si->plugin.path);
        return -1;
    }
    /* Without both, a sink that ignores TM_CONFIG_CDC would store a
     * delete as a row. */
    const uint32_t cdc_caps = TM_CAP_UPSERT | TM_CAP_DELETE;
    if (cfg->mapping.format != TM_FORMAT_PLAIN &&
        (si->api->capabilities & cdc_caps) != cdc_caps) {
        snprintf(errstr, errsize,
                 "$.mapping.format: plugin \"%s\" (%s) cannot apply change "
                 "events: it needs TM_CAP_UPSERT and TM_CAP_DELETE; use "
                 "format \"plain\" or another sink",
                 si->api->name, si->plugin.path);
        return -1;
    }
    /* Without it the sink would store only the columns it was opened
     * with (none): every field dropped. */
    if (cfg->mapping.from_schema &&
        !(si->api->capabilities & TM_CAP_SCHEMA_COLUMNS)) {
        snprintf(errstr, errsize,
                 "$.mapping.columns: plugin \"%s\" (%s) cannot take its "
                 "columns from the events' schemas (no "
                 "TM_CAP_SCHEMA_COLUMNS); list the columns",
                 si->api->name, si->plugin.path);
        return -1;
    }
    if (cfg->dead_letters.sink &&
        !(si->api->capabilities & TM_CAP_DEAD_LETTERS)) {
        snprintf(errstr, errsize,
                 "$.dead_letters.sink: plugin \"%s\" (%s) cannot store dead "
                 "letters (no TM_CAP_DEAD_LETTERS); set it to false and name "
                 "a $.dead_letters.topic",
                 si->api->name, si->plugin.path);
        return -1;
    }
    si->settings = tm_settings_new(cfg->sink.settings, TM_CONFIG_SETTINGS_PATH);
    if (!si->settings) {
        snprintf(errstr, errsize, "%s: out of memory", TM_CONFIG_SETTINGS_PATH);
        return -1;
    }
    si->log_ctx.connector = cfg->name;
    si->log_ctx.plugin = si->api->name;
    tm_config_sink_config(cfg, si->settings, &si->log_ctx, &si->config);
    return 0;
}

tm_status tm_sink_instance_open(tm_sink_instance *si, char *errstr,
                                size_t errsize) {
    tm_error err = tm_error_init();
    void *sink = NULL;
    tm_status st = si->api->open(tm_host_services(), &si->config, &sink, &err);
    if (st != TM_OK) {
        snprintf(errstr, errsize, "plugin %s: open: %s: %s", si->api->name,
                 tm_status_name(st),
                 err.message[0] ? err.message : "(no message)");
        return st;
    }
    si->sink = sink;
    return TM_OK;
}

void tm_sink_instance_close(tm_sink_instance *si) {
    if (si->sink && si->api)
        si->api->close(si->sink);
    si->sink = NULL;
    tm_settings_free(si->settings);
    si->settings = NULL;
}
