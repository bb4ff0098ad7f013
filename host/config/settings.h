/* tm_settings: a plugin's settings object (JSON) with the JSON path it sits
 * at, so that every error names the full path ("$.sink.settings.path"). */
#ifndef TM_SETTINGS_H
#define TM_SETTINGS_H

#include <jansson.h>
#include <tidemark/sink.h>

/* Takes a new reference to obj (a JSON object). NULL on allocation failure. */
tm_settings *tm_settings_new(json_t *obj, const char *json_path);
void tm_settings_free(tm_settings *s);

int tm_settings_string(const tm_settings *s, const char *key, const char **out,
                       tm_error *err);
int tm_settings_int(const tm_settings *s, const char *key, int64_t *out,
                    tm_error *err);
int tm_settings_bool(const tm_settings *s, const char *key, int *out,
                     tm_error *err);
/* The object and the JSON path it sits at (for the declared settings'
 * walker, settings_table.c). */
const json_t *tm_settings_object(const tm_settings *s);
const char *tm_settings_path(const tm_settings *s);
int tm_settings_check_keys(const tm_settings *s, const char *const *known,
                           size_t n, tm_error *err);

#endif
