#include "config/json_path.h"

#include <ctype.h>
#include <stdio.h>

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
