#include "cli/cli_sink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services/redact.h"

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
    if (path)
        snprintf(line, sizeof line, "%s: %s: %s", file, path, msg);
    else
        snprintf(line, sizeof line, "%s: %s", file, msg);
    tm_config_redact(cfg, line, red, sizeof red);
    fprintf(stderr, "%s\n", red);
}

tm_connector_config *tm_cli_load_config(const char *file) {
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    tm_connector_config *cfg = tm_config_load(file, &errs);
    if (!cfg) {
        for (size_t i = 0; i < errs.count; i++)
            fprintf(stderr, "%s: %s\n", file, errs.lines[i]);
        if (errs.oom || errs.count == 0)
            fprintf(stderr, "%s: $: out of memory\n", file);
    } else if (tm_redact_add((const char *const *)cfg->secrets,
                             cfg->nsecrets) != 0) {
        /* Every line the process writes is redacted against the secrets
         * known here (services/redact.h): without them, none may run. */
        fprintf(stderr, "%s: $: out of memory\n", file);
        tm_config_free(cfg);
        cfg = NULL;
    }
    tm_config_errors_free(&errs);
    return cfg;
}

int tm_cli_sink_load(tm_cli_sink *s, const char *file, const char *const *dirs,
                     size_t ndirs) {
    memset(s, 0, sizeof *s);
    s->file = file;
    s->cfg = tm_cli_load_config(file);
    if (!s->cfg)
        return -1;
    char errstr[TM_PLUGIN_PATH_MAX + 1024] = "";
    if (tm_sink_instance_load(&s->inst, s->cfg, dirs, ndirs, errstr,
                              sizeof errstr) != 0) {
        tm_cli_report(s->cfg, file, NULL, errstr);
        tm_cli_sink_free(s);
        return -1;
    }
    return 0;
}

int tm_cli_sink_open(tm_cli_sink *s) {
    char errstr[TM_ERROR_MAX + 256];
    if (tm_sink_instance_open(&s->inst, errstr, sizeof errstr) != TM_OK) {
        tm_cli_report(s->cfg, s->file, "$.sink", errstr);
        return -1;
    }
    return 0;
}

void tm_cli_sink_free(tm_cli_sink *s) {
    tm_sink_instance_close(&s->inst);
    tm_config_free(s->cfg);
    memset(s, 0, sizeof *s);
}
