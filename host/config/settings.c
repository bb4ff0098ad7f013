/* A plugin's settings: a JSON object plus the path it sits at, read through
 * tm_host_api.setting_*(). Typed getters so that no plugin parses JSON and
 * every type error names the full path. */
#include "config/settings.h"

#include <stdlib.h>
#include <string.h>

#include "config/did_you_mean.h"
#include "config/json_path.h"
#include "services/error.h"

struct tm_settings {
    json_t *obj;
    char *path;
};

tm_settings *tm_settings_new(json_t *obj, const char *json_path) {
    if (!obj || !json_is_object(obj))
        return NULL;
    tm_settings *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->path = strdup(json_path ? json_path : "$");
    if (!s->path) {
        free(s);
        return NULL;
    }
    s->obj = json_incref(obj);
    return s;
}

void tm_settings_free(tm_settings *s) {
    if (!s)
        return;
    json_decref(s->obj);
    free(s->path);
    free(s);
}

const json_t *tm_settings_object(const tm_settings *s) {
    return s ? s->obj : NULL;
}

const char *tm_settings_path(const tm_settings *s) {
    return s ? s->path : "$";
}

/* The value at key, or NULL. Absent and JSON null both mean "not set". */
static json_t *lookup(const tm_settings *s, const char *key) {
    json_t *v = s ? json_object_get(s->obj, key) : NULL;
    return (v && !json_is_null(v)) ? v : NULL;
}

static int wrong_type(const tm_settings *s, const char *key, const char *want,
                      const json_t *v, tm_error *err) {
    char path[256];
    tm_json_path_key(path, sizeof path, s->path, key);
    tm_error_set(err, "%s: expected %s, found %s", path, want,
                 tm_json_type_name(v));
    return -1;
}

int tm_settings_string(const tm_settings *s, const char *key, const char **out,
                       tm_error *err) {
    json_t *v = lookup(s, key);
    if (!v)
        return 0;
    if (!json_is_string(v))
        return wrong_type(s, key, "a string", v, err);
    *out = json_string_value(v);
    return 1;
}

int tm_settings_int(const tm_settings *s, const char *key, int64_t *out,
                    tm_error *err) {
    json_t *v = lookup(s, key);
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return wrong_type(s, key, "an integer", v, err);
    *out = (int64_t)json_integer_value(v);
    return 1;
}

int tm_settings_bool(const tm_settings *s, const char *key, int *out,
                     tm_error *err) {
    json_t *v = lookup(s, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return wrong_type(s, key, "a boolean", v, err);
    *out = json_is_true(v);
    return 1;
}

int tm_settings_check_keys(const tm_settings *s, const char *const *known,
                           size_t n, tm_error *err) {
    if (!s)
        return 0;
    const char *key;
    json_t *v;
    json_object_foreach(s->obj, key, v) {
        size_t i;
        for (i = 0; i < n; i++)
            if (strcmp(known[i], key) == 0)
                break;
        if (i < n)
            continue;
        char path[256];
        tm_json_path_key(path, sizeof path, s->path, key);
        const char *hint = tm_did_you_mean(key, known, n);
        if (hint)
            tm_error_set(err, "%s: unknown setting (did you mean \"%s\"?)",
                         path, hint);
        else
            tm_error_set(err, "%s: unknown setting", path);
        return -1;
    }
    return 0;
}
