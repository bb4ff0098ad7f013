/* The canonical text (canonical.h) of a JSON value's text, written
 * straight from the text: no tree, no jansson. The extractor hands json
 * columns their values as spans of the record; this turns such a span
 * into what jansson's dump of the parsed value would be. */
#ifndef TM_CANONICAL_SPAN_H
#define TM_CANONICAL_SPAN_H

#include <stddef.h>

#include "convert/arena.h"

/* The canonical text of the value at the start of text[0..n), which the
 * streaming extractor accepted (it is not validated again), into the
 * arena, NUL-terminated: *out and *len. 0 ok, -1 OOM. */
int tm_canonical_span(const char *text, size_t n, tm_arena *a, const char **out,
                      size_t *len);

#endif
