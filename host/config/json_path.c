#include "config/json_path.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static int plain_identifier(const char *key) {
    if (!*key || isdigit((unsigned char)*key))
        return 0;
    for (const char *p = key; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
            return 0;
    return 1;
}

void tm_json_path_key(char *out, size_t size, const char *parent,
                      const char *key) {
    if (plain_identifier(key))
        snprintf(out, size, "%s.%s", parent, key);
    else
        snprintf(out, size, "%s[\"%s\"]", parent, key);
}

void tm_json_path_index(char *out, size_t size, const char *parent,
                        size_t index) {
    snprintf(out, size, "%s[%zu]", parent, index);
}

const char *tm_json_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "unknown";
}

/* One open object or array while scanning. */
typedef struct frame {
    char kind;       /* '{' or '[' */
    int has_key;     /* '{': a key was read, its value not yet ended */
    size_t index;    /* '[': the element being read */
    const char *key; /* '{': the raw text of the key, when has_key */
    size_t keylen;
} frame;

#define PATH_DEPTH 64 /* frames kept; deeper levels are not named */

void tm_json_path_at(const char *text, size_t pos, char *out, size_t size) {
    frame st[PATH_DEPTH];
    size_t depth = 0; /* may exceed PATH_DEPTH: only the first are kept */
    for (size_t i = 0; i < pos; i++) {
        char c = text[i];
        frame *top = depth && depth <= PATH_DEPTH ? &st[depth - 1] : NULL;
        if (c == '"') {
            size_t start = ++i;
            while (i < pos && text[i] != '"')
                i += text[i] == '\\' ? 2 : 1;
            if (top && top->kind == '{' && !top->has_key) {
                /* A key, even one cut at pos: name it. */
                top->has_key = 1;
                top->key = text + start;
                top->keylen = (i < pos ? i : pos) - start;
            }
        } else if (c == '{' || c == '[') {
            if (depth < PATH_DEPTH)
                st[depth] = (frame){c, 0, 0, NULL, 0};
            depth++;
        } else if ((c == '}' || c == ']') && depth) {
            depth--;
        } else if (c == ',' && top) {
            top->has_key = 0;
            top->index++;
        }
    }
    snprintf(out, size, "$");
    char tmp[512], key[256];
    for (size_t f = 0; f < depth && f < PATH_DEPTH; f++) {
        if (st[f].kind == '[') {
            tm_json_path_index(tmp, sizeof tmp, out, st[f].index);
        } else if (st[f].has_key) {
            size_t n =
                st[f].keylen < sizeof key ? st[f].keylen : sizeof key - 1;
            memcpy(key, st[f].key, n);
            key[n] = '\0';
            tm_json_path_key(tmp, sizeof tmp, out, key);
        } else {
            break; /* between members: the object itself */
        }
        snprintf(out, size, "%s", tmp);
    }
}
