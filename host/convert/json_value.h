/* A JSON value found at a column's or the filter's pointer, as either
 * parser hands it to the type conversion (value_convert.c): the streaming
 * extractor as a span of the record's text, jansson as a node of its tree.
 * The conversion reads values only through this view, so the rules for
 * turning JSON into a column exist once, whichever parser found them. */
#ifndef TM_JSON_VALUE_H
#define TM_JSON_VALUE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "convert/arena.h"

typedef struct tm_jvalue {
    int present;    /* 0: nothing at the pointer (the rest is unset) */
    json_type kind; /* JSON_OBJECT ... JSON_NULL, as jansson names them */
    int64_t integer;
    double real;
    /* Extractor: the value's text in the record (a string's without its
     * quotes) and whether that string holds escapes. */
    const char *text;
    size_t len;
    int escaped;
    const json_t *node; /* jansson: the node; NULL for a span */
} tm_jvalue;

/* The view of a jansson node (NULL: not present). */
void tm_jvalue_from_node(const json_t *node, tm_jvalue *out);

/* A string's content (kind JSON_STRING): the text itself when it holds no
 * escapes, else decoded into the arena. Not NUL-terminated. 0 ok, -1
 * OOM. */
int tm_jvalue_string(const tm_jvalue *v, tm_arena *a, const char **s,
                     size_t *n);

/* The value's canonical text (canonical.h) into the arena, NUL-terminated:
 * *s and *n. A node is dumped by jansson, whose dump defines the form; a
 * span is written from its text (canonical_span.h), which the
 * differential tests hold to that dump. 0 ok, -1 OOM. */
int tm_jvalue_canonical(const tm_jvalue *v, tm_arena *a, const char **s,
                        size_t *n);

#endif
