/* Fixtures: every case starts from fresh sink state. The settings template
 * gets "${tmpdir}" replaced by a new empty directory and "${case}" by a
 * suffix unique to this fixture (for table names of database sinks). */
#define _XOPEN_SOURCE 700 /* nftw() is XSI, not in _POSIX_C_SOURCE */

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kit.h"

/* Replaces every occurrence of each ${name} in s; returns a malloc'd
 * string or NULL. */
static char *substitute(const char *s, const kit_fixture *fx) {
    const char *names[] = {"${tmpdir}", "${case}"};
    const char *values[] = {fx->tmpdir, fx->case_id};
    size_t cap = strlen(s) + 1, len = 0;
    for (size_t i = 0; i < 2; i++)
        for (const char *p = s; (p = strstr(p, names[i])) != NULL; p++)
            cap += strlen(values[i]);
    char *out = malloc(cap);
    if (!out)
        return NULL;
    while (*s) {
        size_t i;
        for (i = 0; i < 2; i++)
            if (strncmp(s, names[i], strlen(names[i])) == 0)
                break;
        if (i < 2) {
            memcpy(out + len, values[i], strlen(values[i]));
            len += strlen(values[i]);
            s += strlen(names[i]);
        } else {
            out[len++] = *s++;
        }
    }
    out[len] = '\0';
    return out;
}

/* A deep copy of v with substitutions in every string; NULL on failure. */
static json_t *substitute_json(json_t *v, const kit_fixture *fx) {
    if (json_is_string(v)) {
        char *s = substitute(json_string_value(v), fx);
        json_t *out = s ? json_string(s) : NULL;
        free(s);
        return out;
    }
    if (json_is_object(v)) {
        json_t *out = json_object();
        const char *key;
        json_t *val;
        json_object_foreach(v, key, val) {
            json_t *c = out ? substitute_json(val, fx) : NULL;
            if (!c || json_object_set_new(out, key, c) != 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    }
    if (json_is_array(v)) {
        json_t *out = json_array();
        size_t i;
        json_t *val;
        json_array_foreach(v, i, val) {
            json_t *c = out ? substitute_json(val, fx) : NULL;
            if (!c || json_array_append_new(out, c) != 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    }
    return json_deep_copy(v);
}

int kit_fixture_init_settings(kit_fixture *fx, const kit_run *run,
                              const char *name, json_t *settings_template,
                              uint32_t config_flags, kit_result *res) {
    static unsigned counter;
    memset(fx, 0, sizeof *fx);
    fx->run = run;
    const char *base = getenv("TMPDIR");
    snprintf(fx->tmpdir, sizeof fx->tmpdir, "%s/tm-sinkcheck-XXXXXX",
             base && *base ? base : "/tmp");
    if (!mkdtemp(fx->tmpdir)) {
        kit_fail(res, "mkdtemp %s failed", fx->tmpdir);
        fx->tmpdir[0] = '\0';
        return -1;
    }
    /* [a-z0-9_] only, so that it is a valid SQL identifier suffix. */
    int n = snprintf(fx->case_id, sizeof fx->case_id, "%.32s_%x_%u", name,
                     (unsigned)getpid(), ++counter);
    for (int i = 0; i < n && fx->case_id[i]; i++)
        if (!((fx->case_id[i] >= 'a' && fx->case_id[i] <= 'z') ||
              (fx->case_id[i] >= '0' && fx->case_id[i] <= '9')))
            fx->case_id[i] = '_';
    snprintf(fx->connector, sizeof fx->connector, "sinkcheck_%s", fx->case_id);

    json_t *settings = substitute_json(settings_template, fx);
    fx->settings =
        settings ? tm_settings_new(settings, KIT_SETTINGS_PATH) : NULL;
    json_decref(settings); /* tm_settings holds its own reference */
    if (!fx->settings) {
        kit_fail(res, "cannot build the settings (out of memory?)");
        kit_fixture_done(fx);
        return -1;
    }
    fx->logctx.connector = fx->connector;
    fx->logctx.plugin = run->api->name;
    fx->config = (tm_sink_config){
        .struct_size = sizeof(tm_sink_config),
        .connector = fx->connector,
        .settings = fx->settings,
        .columns = run->columns,
        .ncolumns = run->ncolumns,
        .flags = config_flags,
        .state_dir = fx->tmpdir,
        .host_ctx = &fx->logctx,
    };
    return 0;
}

int kit_fixture_init(kit_fixture *fx, const kit_run *run, const char *name,
                     uint32_t config_flags, kit_result *res) {
    return kit_fixture_init_settings(fx, run, name, run->settings, config_flags,
                                     res);
}

static int keep_root; /* nftw's callback takes no argument */
static int remove_failed;

static int remove_entry(const char *path, const struct stat *sb, int type,
                        struct FTW *ftw) {
    (void)sb, (void)type;
    if (keep_root && ftw->level == 0)
        return 0;
    if (remove(path) != 0) {
        fprintf(stderr, "sinkcheck: cannot remove %s\n", path);
        remove_failed = 1;
    }
    return 0; /* go on: leave as little behind as possible */
}

int kit_remove_tree(const char *path, int contents_only) {
    keep_root = contents_only;
    remove_failed = 0;
    int rc = nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc != 0 || remove_failed ? -1 : 0;
}

void kit_fixture_done(kit_fixture *fx) {
    tm_settings_free(fx->settings);
    fx->settings = NULL;
    if (fx->tmpdir[0] && getenv("TIDEMARK_SINKCHECK_KEEP"))
        fprintf(stderr, "sinkcheck: kept %s (TIDEMARK_SINKCHECK_KEEP)\n",
                fx->tmpdir); /* say where: the case's line does not */
    else if (fx->tmpdir[0] && kit_remove_tree(fx->tmpdir, 0) != 0)
        fprintf(stderr, "sinkcheck: cannot remove %s\n", fx->tmpdir);
    fx->tmpdir[0] = '\0';
}

tm_status kit_open(const kit_fixture *fx, const tm_host_api *host, void **sink,
                   tm_error *err) {
    *sink = NULL;
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    tm_status rc = fx->run->api->open(host ? host : tm_host_services(),
                                      &fx->config, sink, err);
    if (rc != TM_OK)
        *sink = NULL; /* nothing to close: a failed open owns nothing */
    return rc;
}
