/* What the pieces of the connector config loader share, and nothing else:
 * the parse context, the error helpers, the typed getters, the string
 * helpers and the section loaders split out of connector_config.c. Not
 * installed and not for other modules: connector_config.h is the API. */
#ifndef TM_CONFIG_INTERNAL_H
#define TM_CONFIG_INTERNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "config/connector_config.h"
#include "services/buf.h" /* tm_buf: the strings being built */

#define PATH_MAX_LEN   512
#define LINE_MAX_LEN   1024
#define FOUND_MAX_LEN  64 /* characters of a found string shown */
#define FILE_VALUE_MAX (1024 * 1024)

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* One load in progress: the config being filled, where errors go, and
 * whether any was found (errs may be NULL, so it cannot tell). */
typedef struct loader {
    tm_connector_config *cfg;
    tm_config_errors *errs;
    int failed;
    /* json mode: column name -> its first index (a JSON integer), so that
     * duplicate names and dedup keys are found in constant time, not by
     * scanning all columns (validate was quadratic in columns). NULL until
     * the columns are loaded, and when memory ran out. */
    json_t *column_index;
} loader;

/* ---- error lines (config_errors.c) ---- */

/* Appends a copy of line; sets errs->oom when it cannot. errs may be
 * NULL. Used directly only before a loader exists. */
void cfg_errs_push(tm_config_errors *errs, const char *line);

/* "PATH: message", redacted, appended to the list; marks the load failed. */
void cfg_fail(loader *L, const char *path, const char *fmt, ...)
    TM_PRINTF(3, 4);

/* "string \"ten\"", "integer -5", "object": what was found, for messages
 * (redacted and shortened). Returns buf. */
const char *cfg_found(loader *L, const json_t *v, char *buf, size_t size);

/* "PATH: expected EXPECTED, found WHAT". */
void cfg_fail_type(loader *L, const char *path, const char *expected,
                   const json_t *v);

/* The line for a text jansson could not parse (e, from json_loadb of
 * text[0..len)), appended to errs: the mistakes a hand-edited file runs
 * into in plain words at the JSON path of the value, else jansson's
 * message at "$"; when jansson ran out of memory, only errs->oom is set. */
void cfg_syntax_error(const char *text, size_t len, const json_error_t *e,
                      tm_config_errors *errs);

/* ---- typed getters (config_getters.c) ----
 * Unless said otherwise they return 1 found, 0 absent (an error when
 * required), -1 wrong (error added). */

/* An error for every key of obj not in known, with "did you mean". */
void cfg_check_keys(loader *L, json_t *obj, const char *path,
                    const char *const *known, size_t n);
int cfg_get_typed(loader *L, json_t *obj, const char *parent, const char *key,
                  int required, json_type want, const char *expected,
                  json_t **out);
/* strdup() that reports out of memory at "$". */
char *cfg_xstrdup(loader *L, const char *s);
int cfg_get_string(loader *L, json_t *obj, const char *parent, const char *key,
                   int required, char **out);
int cfg_get_object(loader *L, json_t *obj, const char *parent, const char *key,
                   int required, json_t **out);
int cfg_get_bool(loader *L, json_t *obj, const char *parent, const char *key,
                 int *out);
/* *out untouched unless an integer in [1, max] is there. */
void cfg_get_positive(loader *L, json_t *obj, const char *parent,
                      const char *key, int64_t max, int64_t *out);
int cfg_get_enum(loader *L, json_t *obj, const char *parent, const char *key,
                 int required, const char *const *words, size_t n, size_t *out);

/* ---- strings (config_strings.c) ---- */

/* Appends a copy of s[0..len) to the vector *v of *n; -1 out of memory.
 * The vector must only ever grow through this function (its capacity is
 * implied by *n). */
int cfg_str_push(char ***v, size_t *n, const char *s, size_t len);

/* ---- sections (mapping.c) ---- */

void cfg_load_mapping(loader *L, json_t *root);
/* After cfg_load_mapping(): the keys are resolved against its columns. */
void cfg_load_dedup(loader *L, json_t *root);
/* The index of the column named name, from L->column_index; -1 when
 * there is none. */
long cfg_column_index(const loader *L, const char *name);
/* Frees a filter's contents and zeroes it (safe on a zeroed one). */
void cfg_filter_clear(tm_filter *f);

/* ---- $.state_dir (state_dir.c) ---- */

/* After L->cfg->state_dir is set from v: refuses a directory run could not
 * create or write. */
void cfg_check_state_dir(loader *L, const json_t *v);

#endif
