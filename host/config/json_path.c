#include "config/json_path.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static int plain_identifier(const char *key, size_t len) {
    if (!len || isdigit((unsigned char)*key))
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)key[i]) && key[i] != '_' && key[i] != '-')
            return 0;
    return 1;
}

/* key as the inside of a JSON string: '"' and '\\' escaped, control
 * characters as \\u00XX, so that a bracketed key reads one way only. */
static void escape_key(const char *key, size_t len, char *out, size_t size) {
    size_t n = 0;
    for (size_t i = 0; i < len && n + 7 < size; i++) {
        unsigned char c = (unsigned char)key[i];
        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(out + n, size - n, "\\u%04x", c);
        } else {
            out[n++] = (char)c;
        }
    }
    out[n] = '\0';
}

/* key[0..len) may hold a NUL (a key of the text decoded). */
static void path_key(char *out, size_t size, const char *parent,
                     const char *key, size_t len) {
    char esc[512];
    escape_key(key, len, esc, sizeof esc);
    if (plain_identifier(key, len))
        snprintf(out, size, "%s.%s", parent, esc);
    else
        snprintf(out, size, "%s[\"%s\"]", parent, esc);
}

void tm_json_path_key(char *out, size_t size, const char *parent,
                      const char *key) {
    path_key(out, size, parent, key, strlen(key));
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

const char *tm_json_found(const json_t *v, const char *shown, size_t max,
                          char *buf, size_t size) {
    if (!v) {
        snprintf(buf, size, "nothing");
    } else if (json_is_string(v)) {
        const char *s = shown ? shown : json_string_value(v);
        size_t n = strlen(s), cut = n;
        if (n > max) {
            cut = max;
            /* back to the start of the character that would be split */
            while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
                cut--;
        }
        size_t used = (size_t)snprintf(buf, size, "string \"");
        for (size_t i = 0; i < cut && used + 1 < size; i++)
            buf[used++] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
        if (used < size)
            buf[used] = '\0';
        if (used < size)
            snprintf(buf + used, size - used, "%s\"", cut < n ? "..." : "");
    } else if (json_is_integer(v)) {
        snprintf(buf, size, "integer %" JSON_INTEGER_FORMAT,
                 json_integer_value(v));
    } else if (json_is_real(v)) {
        snprintf(buf, size, "number %g", json_real_value(v));
    } else if (json_is_boolean(v)) {
        snprintf(buf, size, "boolean %s", json_is_true(v) ? "true" : "false");
    } else {
        snprintf(buf, size, "%s", tm_json_type_name(v));
    }
    return buf;
}

static int hex4(const char *s, size_t n, unsigned *v) {
    *v = 0;
    if (n < 4)
        return -1;
    for (size_t i = 0; i < 4; i++) {
        char c = s[i];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d > 15)
            return -1;
        *v = *v << 4 | d;
    }
    return 0;
}

/* The raw text of a key (between its quotes) decoded as JSON does, into
 * out (size >= 8; NUL-terminated, but may hold a decoded NUL): the path
 * then names the key as the loaded config does. An escape that does not
 * decode is kept as written. Returns the decoded length. */
static size_t unescape_key(const char *raw, size_t n, char *out, size_t size) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < size;) {
        if (raw[i] != '\\' || i + 1 >= n) {
            out[o++] = raw[i++];
            continue;
        }
        char e = raw[i + 1];
        const char *simple = strchr("\"\\/bfnrt", e);
        unsigned cp;
        if (e && simple) {
            out[o++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            i += 2;
        } else if (e == 'u' && hex4(raw + i + 2, n - i - 2, &cp) == 0) {
            i += 6;
            unsigned lo;
            if (cp >= 0xD800 && cp < 0xDC00 && i + 1 < n && raw[i] == '\\' &&
                raw[i + 1] == 'u' && hex4(raw + i + 2, n - i - 2, &lo) == 0 &&
                lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            }
            if (cp < 0x80) {
                out[o++] = (char)cp;
            } else if (cp < 0x800) {
                out[o++] = (char)(0xC0 | cp >> 6);
                out[o++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                out[o++] = (char)(0xE0 | cp >> 12);
                out[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
                out[o++] = (char)(0x80 | (cp & 0x3F));
            } else {
                out[o++] = (char)(0xF0 | cp >> 18);
                out[o++] = (char)(0x80 | (cp >> 12 & 0x3F));
                out[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
                out[o++] = (char)(0x80 | (cp & 0x3F));
            }
        } else {
            out[o++] = raw[i++];
        }
    }
    out[o] = '\0';
    return o;
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
            size_t n = unescape_key(st[f].key, st[f].keylen, key, sizeof key);
            path_key(tmp, sizeof tmp, out, key, n);
        } else {
            break; /* between members: the object itself */
        }
        snprintf(out, size, "%s", tmp);
    }
}
