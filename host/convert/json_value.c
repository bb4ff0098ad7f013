#include "convert/json_value.h"

#include <stdlib.h>
#include <string.h>

#include "convert/canonical.h"
#include "convert/canonical_span.h"
#include "convert/json_lex.h"

void tm_jvalue_from_node(const json_t *node, tm_jvalue *out) {
    *out = (tm_jvalue){.present = node != NULL, .node = node};
    if (!node)
        return;
    out->kind = json_typeof(node);
    if (out->kind == JSON_INTEGER)
        out->integer = json_integer_value(node);
    else if (out->kind == JSON_REAL)
        out->real = json_real_value(node);
}

int tm_jvalue_string(const tm_jvalue *v, tm_arena *a, const char **s,
                     size_t *n) {
    if (v->node) {
        *s = json_string_value(v->node);
        *n = json_string_length(v->node);
        return 0;
    }
    if (!v->escaped) {
        *s = v->text;
        *n = v->len;
        return 0;
    }
    char *out = tm_arena_alloc(a, v->len);
    if (!out)
        return -1;
    *n = tm_json_decode_string(v->text, v->len, out);
    *s = out;
    return 0;
}

int tm_jvalue_canonical(const tm_jvalue *v, tm_arena *a, const char **s,
                        size_t *n) {
    if (!v->node) {
        /* A string's span is its content's text: read it with its quotes. */
        const char *text = v->kind == JSON_STRING ? v->text - 1 : v->text;
        size_t len = v->kind == JSON_STRING ? v->len + 2 : v->len;
        return tm_canonical_span(text, len, a, s, n);
    }
    char *dump = tm_canonical_json(v->node);
    if (!dump)
        return -1;
    *n = strlen(dump);
    *s = tm_arena_strndup(a, dump, *n);
    free(dump);
    return *s ? 0 : -1;
}
