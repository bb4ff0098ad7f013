/* The error list of a load and the formatting of its lines: "PATH:
 * message", redacted before it is stored, so that no resolved secret
 * reaches a caller through an error; and the line for a text that is not
 * JSON. */
#include "config/config_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/found.h"
#include "config/json_path.h"
#include "services/redact.h"

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

const char *tm_config_found(const tm_connector_config *cfg, const json_t *v,
                            char *buf, size_t size) {
    /* Redacted whole, before tm_json_found shortens it: a cut secret
     * would no longer match. */
    char red[LINE_MAX_LEN];
    if (v && json_is_string(v)) {
        if (cfg)
            tm_config_redact(cfg, json_string_value(v), red, sizeof red);
        else
            tm_redact(json_string_value(v), TM_REDACT_WHOLE, red, sizeof red);
    }
    return tm_json_found(v, v && json_is_string(v) ? red : NULL,
                         TM_FOUND_MAX_LEN, buf, size);
}

/* "string \"ten\"", "integer -5", "object": what was found, for messages,
 * against this load's secrets (not yet the process's). */
const char *cfg_found(loader *L, const json_t *v, char *buf, size_t size) {
    return tm_config_found(L->cfg, v, buf, size);
}

void cfg_fail_type(loader *L, const char *path, const char *expected,
                   const json_t *v) {
    char f[FOUND_MAX_LEN + 64];
    cfg_fail(L, path, "expected %s, found %s", expected,
             cfg_found(L, v, f, sizeof f));
}

/* The number that ends at byte pos of text (jansson stops right after
 * the number it refuses, and does not always quote it); size >= 4. */
static void number_before(const char *text, size_t pos, char *out,
                          size_t size) {
    size_t start = pos;
    while (start > 0 && strchr("+-.0123456789eE", text[start - 1]) &&
           text[start - 1] != '\0')
        start--;
    size_t n = pos - start;
    if (n == 0)
        snprintf(out, size, "?");
    else if (n >= size)
        snprintf(out, size, "%.*s...", (int)(size - 4), text + start);
    else
        snprintf(out, size, "%.*s", (int)n, text + start);
}

/* jansson's words for the errors a hand-written config runs into, in
 * plain ones: what was expected, what was found, at the JSON path of the
 * value (as far as the text was read) with line and column. Anything else
 * keeps jansson's message, at "$" with its position. */
void cfg_syntax_error(const char *text, size_t len, const json_error_t *e,
                      tm_config_errors *errs) {
    char path[PATH_MAX_LEN], tok[FOUND_MAX_LEN + 1], what[320];
    char line[LINE_MAX_LEN + PATH_MAX_LEN];
    size_t pos = e->position > 0 && (size_t)e->position <= len
                     ? (size_t)e->position
                     : len;
    tm_json_path_at(text, pos, path, sizeof path);
    number_before(text, pos, tok, sizeof tok);
    const char *t = e->text;
    unsigned byte = 0;
    /* jansson out of memory: its error code, or (where it returns without
     * setting one) the untouched error of line -1 and no text. Not a
     * syntax error: the caller reports out of memory. */
    if (json_error_code(e) == json_error_out_of_memory ||
        (e->line == -1 && t[0] == '\0')) {
        if (errs)
            errs->oom = 1;
        return;
    }
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
        cfg_errs_push(errs, "$: expected JSON, found a UTF-8 byte order mark "
                            "(BOM) at the start: save the file without one");
        return;
    }
    if (strncmp(t, "too big integer", 15) == 0 ||
        strncmp(t, "too big negative integer", 24) == 0)
        snprintf(what, sizeof what,
                 "expected an integer from -9223372036854775808 to "
                 "9223372036854775807, found %s",
                 tok);
    else if (strncmp(t, "real number overflow", 20) == 0)
        snprintf(what, sizeof what,
                 "expected a number within the range of a double, found %s",
                 tok);
    else if (strncmp(t, "\\u0000 is not allowed", 21) == 0)
        snprintf(what, sizeof what,
                 "expected a string without \\u0000 (a NUL character), found "
                 "one");
    else if (strncmp(t, "NUL byte in object key", 22) == 0)
        snprintf(what, sizeof what,
                 "expected a key without \\u0000 (a NUL character), found one");
    else if (sscanf(t, "control character 0x%x", &byte) == 1)
        snprintf(what, sizeof what,
                 "expected a string without raw control characters (write "
                 "them as escapes, \\t or \\u%04x), found the character "
                 "0x%02x",
                 byte, byte);
    else if (sscanf(t, "unable to decode byte 0x%x", &byte) == 1)
        snprintf(what, sizeof what,
                 "expected UTF-8 text, found the byte 0x%02x", byte);
    else
        what[0] = '\0';
    if (what[0])
        snprintf(line, sizeof line, "%s: %s (line %d, column %d)", path, what,
                 e->line, e->column);
    else
        snprintf(line, sizeof line,
                 "$: expected JSON, found a syntax error at line %d, column "
                 "%d: %s",
                 e->line, e->column, e->text);
    cfg_errs_push(errs, line);
}
