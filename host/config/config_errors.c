/* The error list of a load and the formatting of its lines: "PATH:
 * message", redacted before it is stored, so that no resolved secret
 * reaches a caller through an error. */
#include "config/config_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/json_path.h"

void tm_config_errors_free(tm_config_errors *errs) {
    if (!errs)
        return;
    for (size_t i = 0; i < errs->count; i++)
        free(errs->lines[i]);
    free(errs->lines);
    errs->lines = NULL;
    errs->count = errs->cap = 0;
}

void cfg_errs_push(tm_config_errors *errs, const char *line) {
    if (!errs)
        return;
    if (errs->count == errs->cap) {
        size_t cap = errs->cap ? errs->cap * 2 : 8;
        char **v = realloc(errs->lines, cap * sizeof *v);
        if (!v) {
            errs->oom = 1;
            return;
        }
        errs->lines = v;
        errs->cap = cap;
    }
    char *copy = strdup(line);
    if (!copy) {
        errs->oom = 1;
        return;
    }
    errs->lines[errs->count++] = copy;
}

/* "PATH: message", redacted, appended to the list. */
void cfg_fail(loader *L, const char *path, const char *fmt, ...) {
    char msg[LINE_MAX_LEN], line[LINE_MAX_LEN + PATH_MAX_LEN + 2];
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(msg, sizeof msg, fmt, ap) < 0)
        snprintf(msg, sizeof msg, "(unformattable error)");
    va_end(ap);
    snprintf(line, sizeof line, "%s: %s", path, msg);
    char red[sizeof line];
    tm_config_redact(L->cfg, line, red, sizeof red);
    cfg_errs_push(L->errs, red);
    L->failed = 1;
}

/* "string \"ten\"", "integer -5", "object": what was found, for messages.
 * Strings are redacted before they are shortened, so that no part of a
 * secret survives the cut. */
const char *cfg_found(loader *L, const json_t *v, char *buf, size_t size) {
    if (!v) {
        snprintf(buf, size, "nothing");
    } else if (json_is_string(v)) {
        char red[LINE_MAX_LEN];
        tm_config_redact(L->cfg, json_string_value(v), red, sizeof red);
        size_t n = strlen(red);
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)red[i] < 0x20)
                red[i] = '?';
        if (n > FOUND_MAX_LEN)
            snprintf(buf, size, "string \"%.*s...\"", FOUND_MAX_LEN, red);
        else
            snprintf(buf, size, "string \"%s\"", red);
    } else if (json_is_integer(v)) {
        snprintf(buf, size, "integer %" JSON_INTEGER_FORMAT,
                 json_integer_value(v));
    } else if (json_is_real(v)) {
        snprintf(buf, size, "number %g", json_real_value(v));
    } else if (json_is_boolean(v)) {
        snprintf(buf, size, "boolean %s", json_is_true(v) ? "true" : "false");
    } else {
        snprintf(buf, size, "%s", tm_json_type_name(v));
    }
    return buf;
}

void cfg_fail_type(loader *L, const char *path, const char *expected,
                   const json_t *v) {
    char f[FOUND_MAX_LEN + 64];
    cfg_fail(L, path, "expected %s, found %s", expected,
             cfg_found(L, v, f, sizeof f));
}
