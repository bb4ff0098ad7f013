/* Schema-derived columns and their difference. The column type of a
 * field follows the mapping a hand-written list uses for the same field
 * (docs/configuration.md, "Against Debezium's PostgreSQL connector"), so
 * that a table made either way holds the same values. */
#include "convert/cdc_columns.h"

#include <tidemark/columns.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/connector_config.h"
#include "convert/cdc_logical.h"

void tm_cdc_colset_clear(tm_cdc_colset *s) {
    for (size_t i = 0; i < s->ncolumns; i++) {
        free((char *)s->columns[i].name);
        free(s->pointers[i]);
        free(s->source[i]);
    }
    free(s->columns);
    free(s->pointers);
    free(s->source);
    memset(s, 0, sizeof *s);
}

static const char *str(const json_t *o, const char *k) {
    return json_string_value(json_object_get(o, k));
}

tm_type tm_cdc_column_type(const json_t *fs) {
    const char *t = str(fs, "type"), *name = str(fs, "name");
    if (!t)
        return 0;
    if ((tm_cdc_is_time(name) && strncmp(t, "int", 3) == 0) ||
        (name && strcmp(name, "io.debezium.time.ZonedTimestamp") == 0))
        return TM_TYPE_TIMESTAMP;
    if (strncmp(t, "int", 3) == 0)
        return TM_TYPE_INT;
    if (strncmp(t, "float", 5) == 0 || strcmp(t, "double") == 0)
        return TM_TYPE_FLOAT;
    if (strcmp(t, "boolean") == 0)
        return TM_TYPE_BOOL;
    if (strcmp(t, "string") == 0 || strcmp(t, "bytes") == 0)
        return TM_TYPE_TEXT;
    if (strcmp(t, "struct") == 0 || strcmp(t, "array") == 0 ||
        strcmp(t, "map") == 0)
        return TM_TYPE_JSON;
    return 0;
}

/* "/" and name with "~" as "~0" and "/" as "~1" (RFC 6901). */
static char *pointer_of(const char *name) {
    size_t len = 2;
    for (const char *p = name; *p; p++)
        len += (*p == '~' || *p == '/') ? 2 : 1;
    char *s = malloc(len), *o = s;
    if (!s)
        return NULL;
    *o++ = '/';
    for (const char *p = name; *p; p++) {
        if (*p == '~' || *p == '/') {
            *o++ = '~';
            *o++ = *p == '~' ? '0' : '1';
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return s;
}

/* "int32" or "int32 org.apache.kafka.connect.data.Date". */
static char *source_of(const json_t *fs) {
    const char *t = str(fs, "type"), *name = str(fs, "name");
    if (!t)
        t = "(no type)";
    size_t len = strlen(t) + (name ? strlen(name) + 1 : 0) + 1;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, "%s%s%s", t, name ? " " : "", name ? name : "");
    return s;
}

static unsigned char fold(char c) {
    return (unsigned char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
}

/* a and b alike in their first max bytes, ASCII case folded, as SQLite
 * compares names (PostgreSQL keeps the case of a quoted name, but one
 * rule holds for every sink). */
static int folded_eq(const char *a, const char *b, size_t max) {
    for (size_t i = 0; i < max; i++, a++, b++) {
        if (fold(*a) != fold(*b))
            return 0;
        if (!*a)
            return 1;
    }
    return 1;
}

/* 1 when no table can take the column name (why says so), else 0: the
 * sinks' own prefix "_tm_" (in any case: SQLite folds it), a name longer
 * than PostgreSQL keeps, or the twin in case of a column of s. */
static int name_refused(const char *name, const tm_cdc_colset *s, char *why,
                        size_t n) {
    if (folded_eq(name, "_tm_", 4)) {
        snprintf(why, n,
                 "field %s: the prefix _tm_ is the sinks' own (their "
                 "bookkeeping columns): no column may be named so",
                 name);
        return 1;
    }
    if (strlen(name) > TM_CDC_NAME_MAX) {
        snprintf(why, n,
                 "field %.80s: %zu bytes, longer than the %d bytes a column "
                 "name may have (PostgreSQL's identifiers)",
                 name, strlen(name), TM_CDC_NAME_MAX);
        return 1;
    }
    for (size_t i = 0; i < s->ncolumns; i++)
        if (folded_eq(s->columns[i].name, name, SIZE_MAX)) {
            snprintf(why, n,
                     "fields %s and %s differ only in case: one column to "
                     "SQLite, so no table takes both",
                     s->columns[i].name, name);
            return 1;
        }
    return 0;
}

static int is_mark(const char *name) {
    return strcmp(name, "__deleted") == 0 || strcmp(name, "__op") == 0;
}

/* The field named name in the struct schema's fields, or NULL. */
static const json_t *field(const json_t *fields, const char *name) {
    size_t i;
    const json_t *f;
    json_array_foreach(fields, i, f) {
        const char *fn = str(f, "field");
        if (fn && strcmp(fn, name) == 0)
            return f;
    }
    return NULL;
}

/* Appends column name (key, required) of type and source to out, whose
 * arrays have room. 0, or -1 OOM. */
static int add_column(tm_cdc_colset *out, const char *name, tm_type type,
                      int key, int required, char *source) {
    size_t c = out->ncolumns;
    tm_column *col = &out->columns[c];
    col->struct_size = (uint32_t)sizeof *col;
    col->type = type;
    col->key = (uint8_t)key;
    col->required = (uint8_t)required;
    col->name = strdup(name);
    out->pointers[c] = pointer_of(name);
    out->source[c] = source;
    out->ncolumns++; /* cleared with the rest from here on */
    return col->name && out->pointers[c] && out->source[c] ? 0 : -1;
}

static int alloc_columns(tm_cdc_colset *out, size_t n) {
    out->columns = calloc(n, sizeof *out->columns);
    out->pointers = calloc(n, sizeof *out->pointers);
    out->source = calloc(n, sizeof *out->source);
    if (out->columns && out->pointers && out->source)
        return 0;
    tm_cdc_colset_clear(out);
    return -1;
}

int tm_cdc_columns_derive(const json_t *row_schema, const json_t *key_names,
                          tm_cdc_colset *out, char *why, size_t n) {
    memset(out, 0, sizeof *out);
    const json_t *fields = json_object_get(row_schema, "fields"), *f;
    size_t nf = json_array_size(fields), i;
    if (nf == 0) {
        snprintf(why, n, "the row's schema has no fields: no columns");
        return 1;
    }
    const char *kname;
    const json_t *kv;
    json_object_foreach((json_t *)key_names, kname, kv) {
        if (!field(fields, kname)) {
            snprintf(why, n, "key field %s is not a field of the row's schema",
                     kname);
            return 1;
        }
    }
    if (alloc_columns(out, nf) != 0)
        return -1;
    json_array_foreach(fields, i, f) {
        const char *name = str(f, "field");
        if (!name || !*name) {
            snprintf(why, n, "field %zu of the row's schema has no name", i);
            tm_cdc_colset_clear(out);
            return 1;
        }
        if (is_mark(name))
            continue;
        if (name_refused(name, out, why, n)) {
            tm_cdc_colset_clear(out);
            return 1;
        }
        tm_type type = tm_cdc_column_type(f);
        if (type == 0) {
            snprintf(why, n, "field %s: type \"%.40s\" has no column type",
                     name, str(f, "type") ? str(f, "type") : "(none)");
            tm_cdc_colset_clear(out);
            return 1;
        }
        if (add_column(out, name, type,
                       json_object_get(key_names, name) != NULL,
                       !json_is_true(json_object_get(f, "optional")),
                       source_of(f)) != 0) {
            tm_cdc_colset_clear(out);
            return -1;
        }
    }
    if (out->ncolumns == 0) {
        snprintf(why, n, "the row's schema has no fields: no columns");
        tm_cdc_colset_clear(out);
        return 1;
    }
    return 0;
}

/* The column of s named name (folded: ASCII case folded), or -1. */
static long find_as(const tm_cdc_colset *s, const char *name, int folded) {
    for (size_t i = 0; i < s->ncolumns; i++)
        if (folded ? folded_eq(s->columns[i].name, name, SIZE_MAX)
                   : strcmp(s->columns[i].name, name) == 0)
            return (long)i;
    return -1;
}

/* The column type of a bare key's member (no schema says more), and what
 * the source says for errors; 0 for null. */
static tm_type json_kind_type(const json_t *v, const char **source) {
    static const struct {
        json_type kind;
        tm_type type;
        const char *source;
    } K[] = {
        {JSON_INTEGER, TM_TYPE_INT, "a bare record key's JSON integer"},
        {JSON_REAL, TM_TYPE_FLOAT, "a bare record key's JSON number"},
        {JSON_STRING, TM_TYPE_TEXT, "a bare record key's JSON string"},
        {JSON_TRUE, TM_TYPE_BOOL, "a bare record key's JSON boolean"},
        {JSON_FALSE, TM_TYPE_BOOL, "a bare record key's JSON boolean"},
        {JSON_OBJECT, TM_TYPE_JSON, "a bare record key's JSON object"},
        {JSON_ARRAY, TM_TYPE_JSON, "a bare record key's JSON array"},
    };
    for (size_t i = 0; i < sizeof K / sizeof K[0]; i++)
        if (json_typeof(v) == K[i].kind) {
            *source = K[i].source;
            return K[i].type;
        }
    return 0;
}

int tm_cdc_columns_from_key(const json_t *key, tm_cdc_colset *out, char *why,
                            size_t n) {
    memset(out, 0, sizeof *out);
    if (json_object_size(key) == 0) {
        snprintf(why, n, "the record key has no fields: no key columns");
        return 1;
    }
    if (alloc_columns(out, json_object_size(key)) != 0)
        return -1;
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)key, name, v) {
        const char *source = NULL;
        tm_type type = json_kind_type(v, &source);
        if (type == 0)
            snprintf(why, n, "key field %s is null: no key to delete by", name);
        if (type == 0 || name_refused(name, out, why, n)) {
            tm_cdc_colset_clear(out);
            return 1;
        }
        if (add_column(out, name, type, 1, 1, strdup(source)) != 0) {
            tm_cdc_colset_clear(out);
            return -1;
        }
    }
    return 0;
}

/* names, ", " between them, into b (cut short at n). */
static void list_names(char *b, size_t n, const char *const *names,
                       size_t count) {
    size_t at = 0;
    b[0] = '\0';
    for (size_t i = 0; i < count && at < n; i++) {
        int w = snprintf(b + at, n - at, "%s%s", i ? ", " : "", names[i]);
        at += w > 0 ? (size_t)w : 0;
    }
}

int tm_cdc_columns_key_match(const tm_cdc_colset *cur, const json_t *key,
                             char *why, size_t n) {
    size_t nkeys = 0, matched = 0;
    for (size_t i = 0; i < cur->ncolumns; i++)
        if (cur->columns[i].key) {
            nkeys++;
            matched += json_object_get(key, cur->columns[i].name) != NULL;
        }
    if (matched == nkeys && json_object_size(key) == nkeys)
        return 0;
    const char *have[16], *want[16];
    size_t nhave = 0, nwant = 0;
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)key, name, v) {
        if (nhave < 16)
            have[nhave++] = name;
    }
    for (size_t i = 0; i < cur->ncolumns && nwant < 16; i++)
        if (cur->columns[i].key)
            want[nwant++] = cur->columns[i].name;
    char h[256], w[256];
    list_names(h, sizeof h, have, nhave);
    list_names(w, sizeof w, want, nwant);
    snprintf(why, n,
             "the record key's fields (%s) are not the key columns (%s) the "
             "events' schemas gave: no row to delete by them",
             h, w);
    return 1;
}

static long find(const tm_cdc_colset *s, const char *name) {
    return find_as(s, name, 0);
}

static const char *tn(tm_type t) {
    const char *s = tm_type_name(t);
    return s ? s : "?";
}

tm_cdc_diff tm_cdc_columns_diff(const tm_cdc_colset *cur,
                                const tm_cdc_colset *ev, size_t *added,
                                size_t *nadded, char *why, size_t n) {
    *nadded = 0;
    for (size_t i = 0; i < cur->ncolumns; i++) {
        const tm_column *c = &cur->columns[i];
        long j = find(ev, c->name), twin = j < 0 ? find_as(ev, c->name, 1) : -1;
        if (twin >= 0) {
            snprintf(why, n,
                     "field %s (%s) of the event's schema is the target's "
                     "column %s (%s) renamed in case only: one column to "
                     "SQLite, two to PostgreSQL, so no target follows it "
                     "safely",
                     ev->columns[twin].name, ev->source[twin], c->name,
                     cur->source[i]);
            return TM_CDC_UNSAFE;
        }
        if (j < 0) {
            if (c->key || c->required) {
                snprintf(why, n,
                         "field %s (%s, column %s %s%s) was dropped from the "
                         "event's schema, and the target requires it",
                         c->name, cur->source[i], tn(c->type),
                         c->key ? "key" : "required",
                         c->key ? "" : ", never null");
                return TM_CDC_UNSAFE;
            }
            continue;
        }
        const tm_column *e = &ev->columns[j];
        if (e->type != c->type) {
            snprintf(why, n,
                     "field %s changed type: the target column is %s (from "
                     "%s), the event's schema says %s (%s)",
                     c->name, tn(c->type), cur->source[i], tn(e->type),
                     ev->source[j]);
            return TM_CDC_UNSAFE;
        }
        if (e->key != c->key) {
            snprintf(why, n,
                     "field %s (%s) %s the key in the event's schema: the "
                     "target's key columns cannot change",
                     c->name, ev->source[j], c->key ? "left" : "joined");
            return TM_CDC_UNSAFE;
        }
        if (c->required && !e->required) {
            snprintf(why, n,
                     "field %s (%s) became optional in the event's schema, "
                     "and the target's column %s requires a value",
                     c->name, ev->source[j], tn(c->type));
            return TM_CDC_UNSAFE;
        }
    }
    for (size_t j = 0; j < ev->ncolumns; j++) {
        if (find(cur, ev->columns[j].name) >= 0)
            continue;
        if (ev->columns[j].key) {
            snprintf(why, n,
                     "field %s (%s) joined the key in the event's schema: "
                     "the target's key columns cannot change",
                     ev->columns[j].name, ev->source[j]);
            return TM_CDC_UNSAFE;
        }
        added[(*nadded)++] = j;
    }
    return *nadded ? TM_CDC_ADDED : TM_CDC_SAME;
}

int tm_cdc_columns_append(tm_cdc_colset *cur, const tm_cdc_colset *ev,
                          const size_t *added, size_t nadded, int rows_before) {
    size_t total = cur->ncolumns + nadded;
    tm_column *cols = calloc(total, sizeof *cols);
    char **ptrs = calloc(total, sizeof *ptrs);
    char **src = calloc(total, sizeof *src);
    int ok = cols && ptrs && src;
    for (size_t k = 0; ok && k < nadded; k++) {
        size_t t = cur->ncolumns + k;
        const tm_column *e = &ev->columns[added[k]];
        cols[t] = *e;
        if (rows_before)
            cols[t].required = 0; /* the rows before it have none */
        cols[t].name = strdup(e->name);
        ptrs[t] = strdup(ev->pointers[added[k]]);
        src[t] = strdup(ev->source[added[k]]);
        ok = cols[t].name && ptrs[t] && src[t];
    }
    if (!ok) {
        for (size_t k = cur->ncolumns; cols && ptrs && src && k < total; k++) {
            free((char *)cols[k].name);
            free(ptrs[k]);
            free(src[k]);
        }
        free(cols);
        free(ptrs);
        free(src);
        return -1;
    }
    for (size_t i = 0; i < cur->ncolumns; i++) {
        cols[i] = cur->columns[i];
        ptrs[i] = cur->pointers[i];
        src[i] = cur->source[i];
    }
    free(cur->columns);
    free(cur->pointers);
    free(cur->source);
    cur->columns = cols;
    cur->pointers = ptrs;
    cur->source = src;
    cur->ncolumns = total;
    return 0;
}

void tm_cdc_columns_truncate(tm_cdc_colset *cur, size_t n) {
    if (n == 0) {
        tm_cdc_colset_clear(cur);
        return;
    }
    for (size_t i = n; i < cur->ncolumns; i++) {
        free((char *)cur->columns[i].name);
        free(cur->pointers[i]);
        free(cur->source[i]);
    }
    cur->ncolumns = n; /* the arrays keep their room */
}
