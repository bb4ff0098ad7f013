/* RFC 6901 JSON pointers: the one resolver for column pointers and the
 * filter's pointer. A pointer is compiled once (when the batch builder is
 * made), so resolving a record allocates nothing and cannot fail. */
#ifndef TM_JSON_POINTER_H
#define TM_JSON_POINTER_H

#include <jansson.h>
#include <stddef.h>

typedef struct tm_json_pointer {
    char **tokens; /* unescaped reference tokens ("~1" is '/', "~0" '~') */
    size_t *lens;  /* strlen of each token */
    /* Each token as an array index, -1 when it is none: computed once so
     * that both resolvers (jansson's tree, the streaming extractor) read
     * a token on an array the same way. */
    long long *indexes;
    size_t ntokens;
} tm_json_pointer;

/* Splits text into tokens. 0 ok, -1 OOM, -2 not a pointer (does not start
 * with '/' or a '~' is not followed by 0 or 1). "" has no token. */
int tm_json_pointer_compile(const char *text, tm_json_pointer *out);
void tm_json_pointer_clear(tm_json_pointer *p);

/* The value at p in doc (borrowed), or NULL when there is none. No token:
 * the whole document. On an object a token names a member; on an array
 * it must be a decimal index without leading zeros ("0", "12"), and "-"
 * (the element after the last) or an index past the end is missing; on a
 * scalar nothing is found. */
json_t *tm_json_pointer_resolve(const tm_json_pointer *p, json_t *doc);

#endif
