/* JSON paths in error messages ("$.sink.settings.path"): the one place that
 * spells them, and the names of JSON types as users read them. */
#ifndef TM_JSON_PATH_H
#define TM_JSON_PATH_H

#include <jansson.h>
#include <stddef.h>

/* parent + "." + key, or parent + "[\"key\"]" when key is not a plain
 * identifier. Truncates safely. */
void tm_json_path_key(char *out, size_t size, const char *parent,
                      const char *key);
void tm_json_path_index(char *out, size_t size, const char *parent,
                        size_t index);
/* "string", "integer", "number", "boolean", "object", "array", "null". */
const char *tm_json_type_name(const json_t *v);

#endif
