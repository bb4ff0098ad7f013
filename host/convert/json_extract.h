/* The streaming extractor: one pass over a record's value that validates
 * all of it as jansson would (json_lex.h for the tokens; nesting up to
 * JSON_PARSER_MAX_DEPTH values deep, counting scalars as jansson does;
 * any value at the top level; nothing but whitespace after it) and notes,
 * for each compiled pointer, where the value it names lies. Nothing is
 * built: a value no pointer leads into is only checked. When an object
 * has a key twice, the last one counts (jansson replaces the member), so
 * a later duplicate forgets what was found under the earlier one. */
#ifndef TM_JSON_EXTRACT_H
#define TM_JSON_EXTRACT_H

#include <stddef.h>

#include "convert/json_pointer.h"
#include "convert/json_value.h"

enum { TM_EXTRACT_OK = 0, TM_EXTRACT_INVALID = 1, TM_EXTRACT_OOM = -1 };

/* The pointers compiled for the extractor (json_extract.c says how). */
typedef struct tm_json_plan tm_json_plan;

/* ptrs[0..nptrs) outlive the plan. NULL on OOM. */
tm_json_plan *tm_json_plan_new(const tm_json_pointer *ptrs, size_t nptrs);
void tm_json_plan_free(tm_json_plan *plan);

/* Reads text[0..n) and sets found[i] for the plan's pointer i (present or
 * not; spans point into text). OK, INVALID (not JSON as jansson reads it;
 * found is then unset) or OOM. */
int tm_json_extract(const tm_json_plan *plan, const char *text, size_t n,
                    tm_jvalue *found);

#endif
