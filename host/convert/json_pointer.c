#include "convert/json_pointer.h"

#include <stdlib.h>
#include <string.h>

void tm_json_pointer_clear(tm_json_pointer *p) {
    for (size_t i = 0; i < p->ntokens; i++)
        free(p->tokens[i]);
    free(p->tokens);
    free(p->lens);
    free(p->indexes);
    p->tokens = NULL;
    p->lens = NULL;
    p->indexes = NULL;
    p->ntokens = 0;
}

/* tok as an array index; -1 when it is not one. */
static long long array_index(const char *tok) {
    if (!*tok || (tok[0] == '0' && tok[1]))
        return -1;
    long long v = 0;
    for (; *tok; tok++) {
        if (*tok < '0' || *tok > '9' || v > (1LL << 50))
            return -1; /* no array is that long: missing */
        v = v * 10 + (*tok - '0');
    }
    return v;
}

int tm_json_pointer_compile(const char *text, tm_json_pointer *out) {
    out->tokens = NULL;
    out->lens = NULL;
    out->indexes = NULL;
    out->ntokens = 0;
    if (!*text)
        return 0;
    if (*text != '/')
        return -2;
    size_t n = 0;
    for (const char *p = text; *p; p++)
        n += *p == '/';
    out->tokens = calloc(n, sizeof *out->tokens);
    out->lens = calloc(n, sizeof *out->lens);
    out->indexes = calloc(n, sizeof *out->indexes);
    if (!out->tokens || !out->lens || !out->indexes) {
        tm_json_pointer_clear(out);
        return -1;
    }
    const char *p = text;
    while (*p) {
        const char *s = ++p; /* past the '/' */
        while (*p && *p != '/')
            p++;
        char *tok = malloc((size_t)(p - s) + 1);
        if (!tok) {
            tm_json_pointer_clear(out);
            return -1;
        }
        out->tokens[out->ntokens++] = tok;
        size_t k = 0;
        for (const char *q = s; q < p; q++) {
            if (*q == '~') {
                if (q[1] != '0' && q[1] != '1') {
                    tm_json_pointer_clear(out);
                    return -2;
                }
                tok[k++] = q[1] == '0' ? '~' : '/';
                q++;
            } else {
                tok[k++] = *q;
            }
        }
        tok[k] = '\0';
        out->lens[out->ntokens - 1] = k;
        out->indexes[out->ntokens - 1] = array_index(tok);
    }
    return 0;
}

json_t *tm_json_pointer_resolve(const tm_json_pointer *p, json_t *doc) {
    json_t *cur = doc;
    for (size_t i = 0; cur && i < p->ntokens; i++) {
        if (json_is_object(cur)) {
            cur = json_object_get(cur, p->tokens[i]);
        } else if (json_is_array(cur)) {
            long long k = p->indexes[i];
            cur = k < 0 ? NULL : json_array_get(cur, (size_t)k);
        } else {
            cur = NULL;
        }
    }
    return cur;
}
