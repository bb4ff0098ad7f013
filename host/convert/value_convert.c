#include "convert/value_convert.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/timestamp.h"

/* The value's content, NUL-terminated, as a column keeps it. */
static int keep_text(const char *s, size_t n, tm_arena *a, tm_value *out) {
    out->v.s.len = n;
    out->v.s.ptr = tm_arena_strndup(a, s, n);
    return out->v.s.ptr ? 0 : -1;
}

int tm_value_from_json(const tm_jvalue *v, tm_type type, tm_arena *a,
                       tm_value *out) {
    const char *s;
    size_t n;
    switch (type) {
    case TM_TYPE_TEXT:
        if (v->kind != JSON_STRING)
            return 1;
        if (tm_jvalue_string(v, a, &s, &n) != 0)
            return -1;
        return keep_text(s, n, a, out);
    case TM_TYPE_INT:
        if (v->kind != JSON_INTEGER)
            return 1;
        out->v.i = v->integer;
        return 0;
    case TM_TYPE_FLOAT:
        if (v->kind != JSON_INTEGER && v->kind != JSON_REAL)
            return 1;
        out->v.f = v->kind == JSON_REAL ? v->real : (double)v->integer;
        return 0;
    case TM_TYPE_BOOL:
        if (v->kind != JSON_TRUE && v->kind != JSON_FALSE)
            return 1;
        out->v.i = v->kind == JSON_TRUE;
        return 0;
    case TM_TYPE_TIMESTAMP:
        if (v->kind == JSON_INTEGER)
            return tm_timestamp_from_ms(v->integer, &out->v.i) == 0 ? 0 : 1;
        if (v->kind != JSON_STRING)
            return 1;
        if (tm_jvalue_string(v, a, &s, &n) != 0)
            return -1;
        return tm_timestamp_parse(s, n, &out->v.i) == 0 ? 0 : 1;
    case TM_TYPE_JSON:
        /* Already a NUL-terminated copy in the arena: kept as it is. */
        if (tm_jvalue_canonical(v, a, &s, &n) != 0)
            return -1;
        out->v.s.ptr = s;
        out->v.s.len = n;
        return 0;
    case TM_TYPE_BYTES: break; /* not a json-mode type */
    }
    return 1;
}

/* At most TM_FOUND_MAX bytes of s (cut on a UTF-8 character boundary,
 * control characters shown as '?'), "..." when cut. */
static void shorten(const char *s, size_t n, char *out, size_t size) {
    size_t k = n;
    if (k > TM_FOUND_MAX) {
        k = TM_FOUND_MAX;
        while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
            k--; /* s[k] continues a character: cut before it starts */
    }
    size_t o = 0;
    for (size_t i = 0; i < k && o + 1 < size; i++)
        out[o++] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
    if (k < n)
        for (int d = 0; d < 3 && o + 1 < size; d++)
            out[o++] = '.';
    out[o] = '\0';
}

int tm_jvalue_describe(const tm_jvalue *v, tm_arena *a, char *out,
                       size_t size) {
    char s[TM_FOUND_MAX + 8];
    const char *text;
    size_t n;
    switch (v->kind) {
    case JSON_STRING:
        if (tm_jvalue_string(v, a, &text, &n) != 0)
            return -1;
        shorten(text, n, s, sizeof s);
        snprintf(out, size, "string \"%s\"", s);
        return 0;
    case JSON_INTEGER:
        snprintf(out, size, "integer %" PRId64, v->integer);
        return 0;
    case JSON_TRUE:
    case JSON_FALSE:
        snprintf(out, size, "boolean %s",
                 v->kind == JSON_TRUE ? "true" : "false");
        return 0;
    default: {
        const char *kind = v->kind == JSON_REAL     ? "number"
                           : v->kind == JSON_OBJECT ? "object"
                                                    : "array";
        if (tm_jvalue_canonical(v, a, &text, &n) != 0)
            return -1;
        shorten(text, n, s, sizeof s);
        snprintf(out, size, "%s %s", kind, s);
        return 0;
    }
    }
}

int tm_jvalue_matches_literal(const tm_jvalue *v, const char *lit,
                              tm_arena *a) {
    char text[32];
    const char *s;
    size_t n;
    switch (v->kind) {
    case JSON_STRING:
        if (tm_jvalue_string(v, a, &s, &n) != 0)
            return -1;
        return n == strlen(lit) && memcmp(s, lit, n) == 0;
    case JSON_INTEGER:
        snprintf(text, sizeof text, "%" PRId64, v->integer);
        return strcmp(text, lit) == 0;
    case JSON_REAL: {
        char *end = NULL;
        double d = strtod(lit, &end);
        return *lit && end && *end == '\0' && d == v->real;
    }
    case JSON_TRUE: return strcmp(lit, "true") == 0;
    case JSON_FALSE: return strcmp(lit, "false") == 0;
    case JSON_NULL: return strcmp(lit, "null") == 0;
    default: return 0;
    }
}
