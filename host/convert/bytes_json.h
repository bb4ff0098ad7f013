/* Opaque bytes (header values, raw keys and values) as JSON: a string when
 * they are valid UTF-8, else {"base64": "..."} (RFC 4648, padded), so any
 * byte string has one JSON form and binary data survives a round trip. */
#ifndef TM_BYTES_JSON_H
#define TM_BYTES_JSON_H

#include <jansson.h>
#include <stddef.h>

/* A new reference; NULL on OOM. */
json_t *tm_bytes_json(const void *p, size_t n);

/* 1 when p[0..n) is well-formed UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF; NUL bytes allowed), else 0. */
int tm_utf8_valid(const void *p, size_t n);

/* The length (1-4) of the one well-formed UTF-8 character p[0..n) starts
 * with, by the same rules; 0 when it does not start with one. */
size_t tm_utf8_char_len(const void *p, size_t n);

/* Standard base64 of n bytes, padded and NUL-terminated (malloc'd; NULL
 * on OOM). */
char *tm_base64(const void *p, size_t n);

#endif
