/* Typed reads of settings out of the JSON tree. Each getter reports its
 * own problem as an error line, so section loaders only decide what a
 * valid value is. */
#include "config/config_internal.h"

#include <stdlib.h>
#include <string.h>

#include "config/did_you_mean.h"
#include "config/json_path.h"

void cfg_check_keys(loader *L, json_t *obj, const char *path,
                    const char *const *known, size_t n) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        size_t i;
        for (i = 0; i < n; i++)
            if (strcmp(known[i], key) == 0)
                break;
        if (i < n)
            continue;
        char sub[PATH_MAX_LEN];
        tm_json_path_key(sub, sizeof sub, path, key);
        const char *hint = tm_did_you_mean(key, known, n);
        if (hint)
            cfg_fail(L, sub, "unknown setting (did you mean \"%s\"?)", hint);
        else
            cfg_fail(L, sub, "unknown setting");
    }
}

/* The value at obj.key when it has the wanted JSON type: 1 found, 0 absent
 * (an error when required), -1 wrong type (error added). */
int cfg_get_typed(loader *L, json_t *obj, const char *parent, const char *key,
                  int required, json_type want, const char *expected,
                  json_t **out) {
    char path[PATH_MAX_LEN];
    tm_json_path_key(path, sizeof path, parent, key);
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v) {
        if (required)
            cfg_fail(L, path, "missing required setting (expected %s)",
                     expected);
        return 0;
    }
    int ok =
        json_typeof(v) == want || (want == JSON_TRUE && json_is_boolean(v));
    if (!ok) {
        cfg_fail_type(L, path, expected, v);
        return -1;
    }
    *out = v;
    return 1;
}

char *cfg_xstrdup(loader *L, const char *s) {
    char *c = strdup(s);
    if (!c)
        cfg_fail(L, "$", "out of memory");
    return c;
}

/* A non-empty string; *out untouched unless found. */
int cfg_get_string(loader *L, json_t *obj, const char *parent, const char *key,
                   int required, char **out) {
    json_t *v;
    int rc = cfg_get_typed(L, obj, parent, key, required, JSON_STRING,
                           "a non-empty string", &v);
    if (rc != 1)
        return rc;
    if (!*json_string_value(v)) {
        char path[PATH_MAX_LEN];
        tm_json_path_key(path, sizeof path, parent, key);
        cfg_fail_type(L, path, "a non-empty string", v);
        return -1;
    }
    char *s = cfg_xstrdup(L, json_string_value(v));
    if (!s)
        return -1;
    free(*out);
    *out = s;
    return 1;
}

int cfg_get_object(loader *L, json_t *obj, const char *parent, const char *key,
                   int required, json_t **out) {
    return cfg_get_typed(L, obj, parent, key, required, JSON_OBJECT,
                         "an object", out);
}

int cfg_get_bool(loader *L, json_t *obj, const char *parent, const char *key,
                 int *out) {
    json_t *v;
    int rc = cfg_get_typed(L, obj, parent, key, 0, JSON_TRUE, "a boolean", &v);
    if (rc == 1)
        *out = json_is_true(v);
    return rc;
}

void cfg_get_positive(loader *L, json_t *obj, const char *parent,
                      const char *key, int64_t max, int64_t *out) {
    json_t *v = json_object_get(obj, key);
    if (!v)
        return;
    char path[PATH_MAX_LEN];
    tm_json_path_key(path, sizeof path, parent, key);
    if (!json_is_integer(v) || json_integer_value(v) <= 0) {
        cfg_fail_type(L, path, "a positive integer", v);
        return;
    }
    if (json_integer_value(v) > max) {
        cfg_fail(L, path, "expected at most %lld, found %lld", (long long)max,
                 (long long)json_integer_value(v));
        return;
    }
    *out = (int64_t)json_integer_value(v);
}

/* One of words; *out is its index. */
int cfg_get_enum(loader *L, json_t *obj, const char *parent, const char *key,
                 int required, const char *const *words, size_t n,
                 size_t *out) {
    char expected[128] = "";
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(expected);
        snprintf(expected + used, sizeof expected - used, "%s\"%s\"",
                 i == 0 ? "" : (i + 1 == n ? " or " : ", "), words[i]);
    }
    json_t *v;
    int rc =
        cfg_get_typed(L, obj, parent, key, required, JSON_STRING, expected, &v);
    if (rc != 1)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (strcmp(json_string_value(v), words[i]) == 0) {
            *out = i;
            return 1;
        }
    char path[PATH_MAX_LEN];
    tm_json_path_key(path, sizeof path, parent, key);
    cfg_fail_type(L, path, expected, v);
    return -1;
}
