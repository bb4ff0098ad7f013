#include "cli/cli_sink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/settings.h"
#include "services/error.h"

const char **tm_cli_plugin_dirs(const char *const *extra, size_t nextra,
                                size_t *ndirs) {
    size_t max = nextra + TM_PLUGIN_DIRS_MAX;
    const char **dirs = calloc(max, sizeof *dirs);
    if (dirs)
        *ndirs = tm_plugin_dirs(extra, nextra, dirs, max);
    return dirs;
}

void tm_cli_report(const tm_connector_config *cfg, const char *file,
                   const char *path, const char *msg) {
    char line[TM_PLUGIN_PATH_MAX + 2048], red[sizeof line];
    snprintf(line, sizeof line, "%s: %s: %s", file, path, msg);
    tm_config_redact(cfg, line, red, sizeof red);
    fprintf(stderr, "%s\n", red);
}

int tm_cli_sink_load(tm_cli_sink *s, const char *file, const char *const *dirs,
                     size_t ndirs) {
    memset(s, 0, sizeof *s);
    s->file = file;
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    s->cfg = tm_config_load(file, &errs);
    if (!s->cfg) {
        for (size_t i = 0; i < errs.count; i++)
            fprintf(stderr, "%s: %s\n", file, errs.lines[i]);
        if (errs.oom || errs.count == 0)
            fprintf(stderr, "%s: $: out of memory\n", file);
        tm_config_errors_free(&errs);
        return -1;
    }
    char errstr[1024] = "";
    if (tm_plugin_load(s->cfg->sink.plugin, dirs, ndirs, &s->plugin, errstr,
                       sizeof errstr) != 0) {
        tm_cli_report(s->cfg, file, "$.sink.plugin", errstr);
        tm_cli_sink_free(s);
        return -1;
    }
    s->settings =
        tm_settings_new(s->cfg->sink.settings, TM_CONFIG_SETTINGS_PATH);
    if (!s->settings) {
        tm_cli_report(s->cfg, file, TM_CONFIG_SETTINGS_PATH, "out of memory");
        tm_cli_sink_free(s);
        return -1;
    }
    s->logctx.connector = s->cfg->name;
    s->logctx.plugin = s->plugin.api->name;
    tm_config_sink_config(s->cfg, s->settings, &s->logctx, &s->sc);
    return 0;
}

int tm_cli_sink_open(tm_cli_sink *s) {
    tm_error err = tm_error_init();
    void *sink = NULL;
    const tm_sink_api *api = s->plugin.api;
    tm_status st = api->open(tm_host_services(), &s->sc, &sink, &err);
    if (st != TM_OK) {
        char msg[TM_ERROR_MAX + 128];
        snprintf(msg, sizeof msg, "plugin \"%s\" cannot open the sink (%s): %s",
                 api->name, tm_status_name(st),
                 err.message[0] ? err.message : "(no message)");
        tm_cli_report(s->cfg, s->file, "$.sink", msg);
        return -1;
    }
    s->sink = sink;
    return 0;
}

void tm_cli_sink_free(tm_cli_sink *s) {
    if (s->sink)
        s->plugin.api->close(s->sink);
    tm_settings_free(s->settings);
    tm_config_free(s->cfg);
    memset(s, 0, sizeof *s);
}
