/* Column values as space-separated text tokens, exact both ways (a file
 * sink stores them; its scan gives them back for the kit to compare). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int is_string(tm_type t) {
    return t == TM_TYPE_TEXT || t == TM_TYPE_JSON || t == TM_TYPE_BYTES;
}

void tms_values_write(FILE *f, const tm_column *columns, size_t n,
                      const tm_value *values) {
    for (size_t i = 0; i < n; i++) {
        const tm_column *c = TM_CELEM(tm_column, columns, i);
        const tm_value *v = TM_CELEM(tm_value, values, i);
        if (v->is_null) {
            fputs(" -", f);
        } else if (c->type == TM_TYPE_FLOAT) {
            fprintf(f, " %a", v->v.f);
        } else if (!is_string(c->type)) {
            fprintf(f, " %" PRId64, v->v.i);
        } else {
            fputs(" x", f);
            for (size_t k = 0; k < v->v.s.len; k++)
                fprintf(f, "%02x", (unsigned char)v->v.s.ptr[k]);
        }
    }
}

static int hex(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
}

/* One token [p, p + len) of type T into *v, decoding strings in place. */
static int parse_one(char *p, size_t len, tm_type t, tm_value *v) {
    char save = p[len], *end;
    memset(v, 0, sizeof *v);
    v->struct_size = sizeof *v;
    if (len == 1 && p[0] == '-') {
        v->is_null = 1;
        return 0;
    }
    if (is_string(t)) {
        if (len == 0 || p[0] != 'x' || (len - 1) % 2)
            return -1;
        for (size_t k = 0; k < (len - 1) / 2; k++) {
            int hi = hex(p[1 + 2 * k]), lo = hex(p[2 + 2 * k]);
            if (hi < 0 || lo < 0)
                return -1;
            p[k] = (char)(hi * 16 + lo); /* behind the read position */
        }
        v->v.s.ptr = p;
        v->v.s.len = (len - 1) / 2;
        return 0;
    }
    p[len] = '\0';
    errno = 0;
    if (t == TM_TYPE_FLOAT)
        v->v.f = strtod(p, &end);
    else
        v->v.i = (int64_t)strtoll(p, &end, 10);
    int ok = len > 0 && end == p + len && errno == 0;
    p[len] = save;
    return ok ? 0 : -1;
}

int tms_values_parse(char *text, const tm_column *columns, size_t n,
                     tm_value *out) {
    char *p = text;
    for (size_t i = 0; i < n; i++) {
        if (*p != ' ')
            return -1;
        size_t len = strcspn(++p, " \n");
        char *next = p + len;
        if (parse_one(p, len, TM_CELEM(tm_column, columns, i)->type, &out[i]) !=
            0)
            return -1;
        p = next;
    }
    return *p == '\0' || *p == '\n' ? 0 : -1;
}
