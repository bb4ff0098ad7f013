/* The json-mode type rules, in one place for both parsers: a JSON value
 * found at a pointer (json_value.h) to a column's tm_value, to the words a
 * type-mismatch detail quotes, or against one literal of the filter
 * (docs/configuration.md, "How records are converted"). */
#ifndef TM_VALUE_CONVERT_H
#define TM_VALUE_CONVERT_H

#include <stddef.h>
#include <tidemark/sink.h>

#include "convert/arena.h"
#include "convert/json_value.h"

#define TM_FOUND_MAX 60 /* bytes of a found value quoted in a detail */

/* v (present, not null) as a value of type; strings and json texts go
 * into the arena. 0 ok, 1 v is not of a kind the type accepts, -1 OOM. */
int tm_value_from_json(const tm_jvalue *v, tm_type type, tm_arena *a,
                       tm_value *out);

/* What v is, for "expected X, found Y": "string \"12\"", "integer 5",
 * "number 1.5", "boolean true", "object {...}", at most TM_FOUND_MAX bytes
 * of the value. 0 ok, -1 OOM. */
int tm_jvalue_describe(const tm_jvalue *v, tm_arena *a, char *out, size_t size);

/* Whether v matches the filter literal lit: a string by its content, an
 * integer, true, false or null by its JSON text, a real by the number lit
 * spells; objects and arrays never. 1 yes, 0 no, -1 OOM. */
int tm_jvalue_matches_literal(const tm_jvalue *v, const char *lit, tm_arena *a);

#endif
