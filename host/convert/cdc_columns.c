/* Schema-derived columns and their difference. The column type of a
 * field follows the mapping a hand-written list uses for the same field
 * (docs/configuration.md, "Against Debezium's PostgreSQL connector"), so
 * that a table made either way holds the same values. */
#include "convert/cdc_columns.h"

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
    out->columns = calloc(nf, sizeof *out->columns);
    out->pointers = calloc(nf, sizeof *out->pointers);
    out->source = calloc(nf, sizeof *out->source);
    if (!out->columns || !out->pointers || !out->source) {
        tm_cdc_colset_clear(out);
        return -1;
    }
    json_array_foreach(fields, i, f) {
        const char *name = str(f, "field");
        if (!name || !*name) {
            snprintf(why, n, "field %zu of the row's schema has no name", i);
            tm_cdc_colset_clear(out);
            return 1;
        }
        if (is_mark(name))
            continue;
        tm_type type = tm_cdc_column_type(f);
        if (type == 0) {
            snprintf(why, n, "field %s: type \"%.40s\" has no column type",
                     name, str(f, "type") ? str(f, "type") : "(none)");
            tm_cdc_colset_clear(out);
            return 1;
        }
        size_t c = out->ncolumns;
        tm_column *col = &out->columns[c];
        col->struct_size = (uint32_t)sizeof *col;
        col->type = type;
        col->key = json_object_get(key_names, name) != NULL;
        col->required = !json_is_true(json_object_get(f, "optional"));
        col->name = strdup(name);
        out->pointers[c] = pointer_of(name);
        out->source[c] = source_of(f);
        out->ncolumns++; /* cleared with the rest from here on */
        if (!col->name || !out->pointers[c] || !out->source[c]) {
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

static long find(const tm_cdc_colset *s, const char *name) {
    for (size_t i = 0; i < s->ncolumns; i++)
        if (strcmp(s->columns[i].name, name) == 0)
            return (long)i;
    return -1;
}

static const char *tn(tm_type t) {
    const char *s = tm_config_type_name(t);
    return s ? s : "?";
}

tm_cdc_diff tm_cdc_columns_diff(const tm_cdc_colset *cur,
                                const tm_cdc_colset *ev, size_t *added,
                                size_t *nadded, char *why, size_t n) {
    *nadded = 0;
    for (size_t i = 0; i < cur->ncolumns; i++) {
        const tm_column *c = &cur->columns[i];
        long j = find(ev, c->name);
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
                          const size_t *added, size_t nadded) {
    size_t total = cur->ncolumns + nadded;
    tm_column *cols = calloc(total, sizeof *cols);
    char **ptrs = calloc(total, sizeof *ptrs);
    char **src = calloc(total, sizeof *src);
    int ok = cols && ptrs && src;
    for (size_t k = 0; ok && k < nadded; k++) {
        size_t t = cur->ncolumns + k;
        const tm_column *e = &ev->columns[added[k]];
        cols[t] = *e;
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
