/* The tokens of JSON text (RFC 8259) accepted exactly as jansson 2.14's
 * json_loadb accepts them with the flags record conversion uses
 * (JSON_DECODE_ANY, no JSON_ALLOW_NUL): strings of well-formed UTF-8 whose
 * \u escapes pair surrogates and never spell U+0000, integers that fit 64
 * bits, reals that do not overflow a double. The streaming extractor
 * (json_extract.c) is built on these; tests hold them to jansson. */
#ifndef TM_JSON_LEX_H
#define TM_JSON_LEX_H

#include <stddef.h>
#include <stdint.h>

/* The string whose opening quote is p[-1], up to end. Returns the byte
 * after its closing quote, or NULL when it is not a string jansson takes.
 * *escaped: whether it holds a backslash (its content is not its text). */
const char *tm_json_scan_string(const char *p, const char *end, int *escaped);

/* The content of a string tm_json_scan_string accepted (raw: between the
 * quotes, n bytes) into out, which has room for n bytes (the content is
 * never longer than its text). Returns the content's length. */
size_t tm_json_decode_string(const char *raw, size_t n, char *out);

/* Whether a string tm_json_scan_string accepted (raw, n, escaped as it
 * said) has the content s[0..sn), without decoding it anywhere. */
int tm_json_string_equals(const char *raw, size_t n, int escaped, const char *s,
                          size_t sn);

typedef struct tm_json_number {
    int is_real;
    /* A real whose decimal exponent is large enough that it may overflow
     * a double: only strtod can tell (tm_json_real_value). */
    int may_overflow;
    int64_t integer; /* !is_real */
} tm_json_number;

/* The number starting at p ('-' or a digit), up to end. Returns the byte
 * after it, or NULL when it is not a number jansson takes (a syntax error
 * or an integer outside 64 bits). */
const char *tm_json_scan_number(const char *p, const char *end,
                                tm_json_number *num);

/* The double a real's text s[0..n) spells, as jansson computes it
 * (strtod). 0 ok, 1 it overflows (jansson refuses the text), -1 OOM. */
int tm_json_real_value(const char *s, size_t n, double *out);

#endif
