/* The canonical JSON form: one text per value, so that equal values give
 * equal texts. Compact, object keys sorted, any value at the top level,
 * reals with 17 significant digits (a double survives the round trip):
 * jansson's JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY |
 * JSON_REAL_PRECISION(17). json columns carry it; the business identity
 * and the identity hash are built from it. */
#ifndef TM_CANONICAL_H
#define TM_CANONICAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

#define TM_CANONICAL_FLAGS                                                     \
    (JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17))

/* Room for a number's canonical text: "-9223372036854775808", or
 * "-2.2250738585072014e-308" (with its NUL). */
#define TM_CANONICAL_NUMBER_MAX 32

/* An integer's canonical text into out: its length. */
size_t tm_canonical_integer(int64_t i, char out[TM_CANONICAL_NUMBER_MAX]);

/* A finite real's canonical text into out, as jansson writes it (%.17g,
 * ".0" added when that looks like an integer, the exponent without '+'
 * or leading zeros): its length, 0 when it has none (NaN, infinite). */
size_t tm_canonical_real(double d, char out[TM_CANONICAL_NUMBER_MAX]);

/* v's canonical text (malloc'd; NULL on OOM). */
char *tm_canonical_json(const json_t *v);

/* The canonical JSON array of converted values, in the order of idx
 * (idx NULL: values 0..n-1), as malloc'd text; NULL on OOM. Each value
 * in its type's JSON form: null; text as a string (as bytes, were it
 * not UTF-8: raw mode's topic); int, bool (true /
 * false) and timestamp (microseconds) as integers; float as a real; json
 * as its canonical text; bytes as bytes_json.h says. columns and values
 * are plain arrays (the config's columns, the converter's values). */
char *tm_canonical_array(const tm_column *columns, const tm_value *values,
                         const size_t *idx, size_t n);

#endif
