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
/* The path of what is at byte pos of text, a JSON text valid up to pos
 * (where a parser stopped on an error): the innermost member or element
 * being read, by the raw text of its key ("$.batch.max_bytes",
 * "$.kafka.topics[0]"); "$" outside any. For syntax errors. */
void tm_json_path_at(const char *text, size_t pos, char *out, size_t size);
/* "string", "integer", "number", "boolean", "object", "array", "null". */
const char *tm_json_type_name(const json_t *v);
/* What was found, for "expected X, found Y": "string \"ten\"", "integer
 * -5", "boolean true", "object"; "nothing" for NULL. SHOWN replaces a
 * string's text (the caller's redacted copy), NULL shows its own. Control
 * characters show as '?'; a string longer than MAX bytes is cut on a
 * character boundary and ends in "...". Returns buf. */
const char *tm_json_found(const json_t *v, const char *shown, size_t max,
                          char *buf, size_t size);

#endif
