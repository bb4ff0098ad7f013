#include "cli/cli_sink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/settings_table.h"
#include "kafka/kafka_conf.h"
#include "services/error.h"
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

static void report_line(void *file, const char *line) {
    fprintf(stderr, "%s: %s\n", (const char *)file, line);
}

tm_connector_config *tm_cli_load_config(const char *file) {
    int oom;
    return tm_cli_load_config_oom(file, &oom);
}

tm_connector_config *tm_cli_load_config_oom(const char *file, int *oom) {
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    tm_connector_config *cfg = tm_config_load(file, &errs);
    *oom = 0;
    if (!cfg) {
        for (size_t i = 0; i < errs.count; i++)
            fprintf(stderr, "%s: %s\n", file, errs.lines[i]);
        if (errs.oom || errs.count == 0) {
            fprintf(stderr, "%s: $: out of memory\n", file);
            *oom = 1;
        }
    } else if (tm_redact_add((const char *const *)cfg->secrets,
                             cfg->nsecrets) != 0) {
        /* Every line the process writes is redacted against the secrets
         * known here (services/redact.h): without them, none may run. */
        fprintf(stderr, "%s: $: out of memory\n", file);
        *oom = 1;
        tm_config_free(cfg);
        cfg = NULL;
    }
    tm_config_errors_free(&errs);
    /* The librdkafka configurations run builds, built here for every
     * command, so that a property librdkafka refuses is refused by
     * validate and before run starts anything. */
    if (cfg && tm_kafka_conf_check(cfg, report_line, (void *)file) != 0) {
        tm_config_free(cfg);
        return NULL;
    }
    return cfg;
}

struct cross_ctx {
    tm_connector_config *const *cfgs;
    const size_t *index; /* loaded config k is cfgs[index[k]] */
    int *bad;
};

static void report_cross(void *ctx, size_t k, const char *line) {
    const struct cross_ctx *x = ctx;
    const tm_connector_config *cfg = x->cfgs[x->index[k]];
    tm_cli_report(cfg, cfg->file, NULL, line);
    if (x->bad)
        x->bad[x->index[k]] = 1;
}

size_t tm_cli_cross_check(tm_connector_config *const *cfgs, size_t n,
                          int *bad_files) {
    const tm_connector_config **loaded = calloc(n ? n : 1, sizeof *loaded);
    size_t *index = calloc(n ? n : 1, sizeof *index);
    size_t m = 0, bad;
    if (!loaded || !index) {
        fprintf(stderr, "tidemark: out of memory\n");
        bad = 1;
    } else {
        for (size_t i = 0; i < n; i++)
            if (cfgs[i]) {
                index[m] = i;
                loaded[m++] = cfgs[i];
            }
        struct cross_ctx x = {cfgs, index, bad_files};
        bad = tm_config_cross_check(loaded, m, report_cross, &x);
    }
    free(loaded);
    free(index);
    return bad;
}

int tm_cli_name_clash(const char *const *files, const char *const *names,
                      size_t i) {
    for (size_t k = 0; names[i] && k < i; k++)
        if (names[k] && strcmp(names[i], names[k]) == 0) {
            fprintf(stderr,
                    "%s: $.name: connector \"%s\" is also defined by %s; "
                    "names must be unique\n",
                    files[i], names[i], files[k]);
            return 1;
        }
    return 0;
}

int tm_cli_sink_load(tm_cli_sink *s, const char *file, const char *const *dirs,
                     size_t ndirs) {
    memset(s, 0, sizeof *s);
    s->file = file;
    s->cfg = tm_cli_load_config_oom(file, &s->oom);
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

int tm_cli_sink_validate(tm_cli_sink *s) {
    const tm_sink_api *api = s->inst.api;
    tm_error err = tm_error_init();
    tm_status st = TM_OK;
    /* Declared settings are the host's to check, as open would: also for
     * a plugin without validate(). */
    if (TM_SINK_API_HAS_SETTINGS(api) && api->settings &&
        tm_settings_check(s->inst.settings, api->settings, &err) != 0)
        st = TM_INVALID;
    if (st == TM_OK && api->validate)
        st = api->validate(tm_host_services(), &s->inst.config, &err);
    if (st == TM_OK)
        return 0;
    char msg[TM_ERROR_MAX + 128];
    snprintf(msg, sizeof msg, "plugin \"%s\" refused the config (%s): %s",
             api->name, tm_status_name(st),
             err.message[0] ? err.message : "(no message)");
    tm_cli_report(s->cfg, s->file, "$.sink", msg);
    return -1;
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
