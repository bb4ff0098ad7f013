/* $.mapping and $.dedup: raw and json columns, RFC 6901 pointer syntax,
 * the filter expression, and dedup keys resolved against the columns
 * (dedup lives here because its keys only mean something against them). */
#include "config/config_internal.h"

#include <stdlib.h>
#include <string.h>

#include "config/did_you_mean.h"
#include "config/json_path.h"

/* NULL when p is a valid JSON pointer, else why not. */
static const char *pointer_problem(const char *p) {
    if (!*p)
        return NULL; /* the whole document */
    if (*p != '/')
        return "a JSON pointer starts with '/'";
    for (; *p; p++)
        if (*p == '~' && p[1] != '0' && p[1] != '1')
            return "'~' must be followed by 0 or 1 (~0 is '~', ~1 is '/')";
    return NULL;
}

void cfg_filter_clear(tm_filter *f) {
    free(f->pointer);
    for (size_t i = 0; i < f->nvalues; i++)
        free(f->values[i]);
    free(f->values);
    memset(f, 0, sizeof *f);
}

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* One value at *pp: a double-quoted string (\" and \\ escapes) or a bare
 * word up to a space, ',' or ']'. NULL when fine, else why not. */
static const char *filter_value(const char **pp, tm_filter *f, int in_list) {
    const char *p = skip_ws(*pp);
    tm_buf b = {0};
    if (*p == '"') {
        for (p++; *p && *p != '"'; p++) {
            if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                p++;
            tm_buf_add(&b, p, 1);
        }
        if (*p != '"') {
            free(b.p);
            return "unterminated quoted value";
        }
        p++;
        if (!b.p)
            tm_buf_add(&b, "", 0);
    } else {
        const char *s = p;
        while (*p && *p != ' ' && *p != '\t' && *p != ',' &&
               (!in_list || *p != ']') && *p != '"' && *p != '[')
            p++;
        if (p == s) {
            free(b.p);
            return "a value is missing";
        }
        tm_buf_add(&b, s, (size_t)(p - s));
    }
    if (b.oom || cfg_str_push(&f->values, &f->nvalues, b.p, b.n) != 0) {
        free(b.p);
        return "out of memory";
    }
    free(b.p);
    *pp = p;
    return NULL;
}

/* Parses "/pointer in [a, b]" or "/pointer == value". NULL when fine. */
static const char *filter_parse(const char *text, tm_filter *f) {
    const char *p = skip_ws(text);
    if (*p != '/')
        return "it must start with a JSON pointer (\"/field\")";
    const char *s = p;
    while (*p && *p != ' ' && *p != '\t')
        p++;
    if (!(f->pointer = malloc((size_t)(p - s) + 1)))
        return "out of memory";
    memcpy(f->pointer, s, (size_t)(p - s));
    f->pointer[p - s] = '\0';
    const char *why = pointer_problem(f->pointer);
    if (why)
        return why;
    p = skip_ws(p);
    if (strncmp(p, "==", 2) == 0) {
        f->op = TM_FILTER_EQ;
        p += 2;
        if ((why = filter_value(&p, f, 0)))
            return why;
    } else if (strncmp(p, "in", 2) == 0 &&
               (p[2] == ' ' || p[2] == '\t' || p[2] == '[')) {
        f->op = TM_FILTER_IN;
        p = skip_ws(p + 2);
        if (*p != '[')
            return "\"in\" needs a list in brackets";
        p++;
        if (*skip_ws(p) == ']')
            return "the list is empty";
        for (;;) {
            if ((why = filter_value(&p, f, 1)))
                return why;
            p = skip_ws(p);
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p == ']') {
                p++;
                break;
            }
            return *p ? "expected ',' or ']' in the list"
                      : "the list is not closed with ']'";
        }
    } else {
        return "the operator must be \"==\" or \"in\"";
    }
    if (*skip_ws(p))
        return "unexpected text after the filter";
    return NULL;
}

/* The seven columns of raw mode. */
static const tm_column RAW_COLUMNS[] = {
    {sizeof(tm_column), "key", TM_TYPE_BYTES, 0, 0},
    {sizeof(tm_column), "value", TM_TYPE_BYTES, 0, 0},
    {sizeof(tm_column), "headers", TM_TYPE_JSON, 0, 0},
    {sizeof(tm_column), "topic", TM_TYPE_TEXT, 1, 0},
    {sizeof(tm_column), "partition", TM_TYPE_INT, 1, 0},
    {sizeof(tm_column), "offset", TM_TYPE_INT, 1, 0},
    {sizeof(tm_column), "timestamp", TM_TYPE_TIMESTAMP, 0, 0},
};

static const char *const TYPE_NAMES[] = {"text", "int",       "float",
                                         "bool", "timestamp", "json"};
static const tm_type TYPES[] = {TM_TYPE_TEXT, TM_TYPE_INT,       TM_TYPE_FLOAT,
                                TM_TYPE_BOOL, TM_TYPE_TIMESTAMP, TM_TYPE_JSON};

static void load_raw_columns(loader *L) {
    tm_connector_config *c = L->cfg;
    c->mapping.columns = calloc(N(RAW_COLUMNS), sizeof(tm_column));
    if (!c->mapping.columns) {
        cfg_fail(L, "$.mapping", "out of memory");
        return;
    }
    for (size_t i = 0; i < N(RAW_COLUMNS); i++) {
        c->mapping.columns[i] = RAW_COLUMNS[i];
        c->mapping.columns[i].name = strdup(RAW_COLUMNS[i].name);
        c->mapping.ncolumns = i + 1;
        if (!c->mapping.columns[i].name) {
            cfg_fail(L, "$.mapping", "out of memory");
            return;
        }
    }
}

static void load_json_column(loader *L, json_t *col, const char *path,
                             size_t i) {
    static const char *const KNOWN[] = {"name", "pointer", "type", "required",
                                        "key"};
    tm_connector_config *c = L->cfg;
    tm_column *out = &c->mapping.columns[i];
    out->struct_size = (uint32_t)sizeof(tm_column);
    if (!json_is_object(col)) {
        cfg_fail_type(L, path, "an object (name, pointer, type)", col);
        return;
    }
    cfg_check_keys(L, col, path, KNOWN, N(KNOWN));
    char *name = NULL;
    if (cfg_get_string(L, col, path, "name", 1, &name) == 1) {
        out->name = name;
        long j = cfg_column_index(L, name);
        if (j >= 0) {
            char sub[PATH_MAX_LEN];
            tm_json_path_key(sub, sizeof sub, path, "name");
            cfg_fail(L, sub,
                     "expected a unique column name, found string \"%s\" "
                     "(also $.mapping.columns[%ld])",
                     name, j);
        } else if (json_object_set_new(L->column_index, name,
                                       json_integer((json_int_t)i)) != 0) {
            cfg_fail(L, path, "out of memory");
        }
    }
    json_t *ptr = NULL;
    if (cfg_get_typed(L, col, path, "pointer", 1, JSON_STRING,
                      "a JSON pointer (RFC 6901)", &ptr) == 1) {
        const char *why = pointer_problem(json_string_value(ptr));
        char sub[PATH_MAX_LEN];
        tm_json_path_key(sub, sizeof sub, path, "pointer");
        if (why) {
            char f[FOUND_MAX_LEN + 64];
            cfg_fail(L, sub, "expected a JSON pointer (RFC 6901), found %s: %s",
                     cfg_found(L, ptr, f, sizeof f), why);
        } else if (!(c->mapping.pointers[i] = strdup(json_string_value(ptr)))) {
            cfg_fail(L, sub, "out of memory");
        }
    }
    size_t t = 0;
    if (cfg_get_enum(L, col, path, "type", 1, TYPE_NAMES, N(TYPE_NAMES), &t) ==
        1)
        out->type = TYPES[t];
    int b = 0;
    if (cfg_get_bool(L, col, path, "required", &b) == 1)
        out->required = (uint8_t)b;
    b = 0;
    if (cfg_get_bool(L, col, path, "key", &b) == 1)
        out->key = (uint8_t)b;
}

void cfg_load_mapping(loader *L, json_t *root) {
    static const char *const KNOWN[] = {"mode", "columns", "filter", "format"};
    static const char *const MODES[] = {"raw", "json"};
    static const char *const FORMATS[] = {"plain", "connect", "debezium"};
    const char *P = "$.mapping";
    tm_connector_config *c = L->cfg;
    json_t *m = NULL;
    if (cfg_get_object(L, root, "$", "mapping", 1, &m) != 1)
        return;
    cfg_check_keys(L, m, P, KNOWN, N(KNOWN));
    size_t mode = 0;
    int has_mode = cfg_get_enum(L, m, P, "mode", 1, MODES, N(MODES), &mode);
    json_t *cols = json_object_get(m, "columns");
    json_t *filter = json_object_get(m, "filter");
    size_t format = 0;
    if (cfg_get_enum(L, m, P, "format", 0, FORMATS, N(FORMATS), &format) == 1 &&
        has_mode == 1 && mode == 0 && format != 0)
        cfg_fail(L, "$.mapping.format",
                 "not allowed with mode \"raw\" (record values are not "
                 "parsed); use mode \"json\"");
    c->mapping.format = (tm_record_format)format;
    if (has_mode == 1 && mode == 0) {
        c->mapping.format = TM_FORMAT_PLAIN;
        c->mapping.mode = TM_MAPPING_RAW;
        if (cols)
            cfg_fail(
                L, "$.mapping.columns",
                "not allowed with mode \"raw\" (its columns are fixed: key, "
                "value, headers, topic, partition, offset, timestamp)");
        if (filter)
            cfg_fail(L, "$.mapping.filter",
                     "not allowed with mode \"raw\" (record values are not "
                     "parsed)");
        load_raw_columns(L);
        return;
    }
    if (has_mode != 1)
        return;
    c->mapping.mode = TM_MAPPING_JSON;
    if (!cols && c->mapping.format != TM_FORMAT_PLAIN) {
        /* the event's schema gives them, event by event */
        c->mapping.from_schema = 1;
        goto filter;
    }
    if (cfg_get_typed(L, m, P, "columns", 1, JSON_ARRAY,
                      "a non-empty array of columns", &cols) != 1)
        return;
    size_t n = json_array_size(cols);
    if (n == 0) {
        cfg_fail_type(L, "$.mapping.columns", "a non-empty array of columns",
                      cols);
        return;
    }
    c->mapping.columns = calloc(n, sizeof(tm_column));
    c->mapping.pointers = calloc(n, sizeof(char *));
    L->column_index = json_object();
    if (!c->mapping.columns || !c->mapping.pointers || !L->column_index) {
        cfg_fail(L, "$.mapping.columns", "out of memory");
        return;
    }
    c->mapping.ncolumns = n;
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX_LEN];
        tm_json_path_index(path, sizeof path, "$.mapping.columns", i);
        load_json_column(L, json_array_get(cols, i), path, i);
    }
    if (c->mapping.format != TM_FORMAT_PLAIN) {
        size_t keys = 0;
        for (size_t i = 0; i < n; i++)
            keys += c->mapping.columns[i].key;
        if (keys == 0)
            cfg_fail(L, "$.mapping.columns",
                     "expected at least one key column (\"key\": true) with "
                     "format \"%s\": change events upsert and delete rows "
                     "by their key",
                     c->mapping.format == TM_FORMAT_DEBEZIUM ? "debezium"
                                                             : "connect");
    }
filter:
    if (!filter)
        return;
    if (!json_is_string(filter)) {
        cfg_fail_type(
            L, "$.mapping.filter",
            "a string \"/pointer in [a, b]\" or \"/pointer == value\"", filter);
        return;
    }
    const char *why =
        filter_parse(json_string_value(filter), &c->mapping.filter);
    if (why) {
        char f[FOUND_MAX_LEN + 64];
        cfg_fail(
            L, "$.mapping.filter",
            "expected \"/pointer in [a, b, ...]\" or \"/pointer == value\", "
            "found %s: %s",
            cfg_found(L, filter, f, sizeof f), why);
        cfg_filter_clear(&c->mapping.filter);
    }
}

long cfg_column_index(const loader *L, const char *name) {
    json_t *j = L->column_index ? json_object_get(L->column_index, name) : NULL;
    return j ? (long)json_integer_value(j) : -1;
}

void cfg_load_dedup(loader *L, json_t *root) {
    static const char *const KNOWN[] = {"key"};
    tm_connector_config *c = L->cfg;
    json_t *d = NULL, *keys = NULL;
    if (cfg_get_object(L, root, "$", "dedup", 0, &d) != 1)
        return;
    c->dedup.enabled = 1;
    if (c->mapping.format != TM_FORMAT_PLAIN)
        cfg_fail(L, "$.dedup",
                 "not allowed with a change-data-capture $.mapping.format: "
                 "events replace and delete rows by their key, the last "
                 "one wins");
    cfg_check_keys(L, d, "$.dedup", KNOWN, N(KNOWN));
    if (cfg_get_typed(L, d, "$.dedup", "key", 1, JSON_ARRAY,
                      "a non-empty array of column names", &keys) != 1)
        return;
    size_t n = json_array_size(keys);
    if (n == 0) {
        cfg_fail_type(L, "$.dedup.key", "a non-empty array of column names",
                      keys);
        return;
    }
    if (!(c->dedup.key_columns = calloc(n, sizeof(size_t)))) {
        cfg_fail(L, "$.dedup.key", "out of memory");
        return;
    }
    /* Column names, for "did you mean". */
    const char **names = calloc(c->mapping.ncolumns + 1, sizeof *names);
    size_t nnames = 0;
    for (size_t j = 0; names && j < c->mapping.ncolumns; j++)
        if (c->mapping.columns[j].name)
            names[nnames++] = c->mapping.columns[j].name;
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k) {
        char path[PATH_MAX_LEN];
        tm_json_path_index(path, sizeof path, "$.dedup.key", i);
        if (!json_is_string(k)) {
            cfg_fail_type(L, path, "a column name (string)", k);
            continue;
        }
        const char *s = json_string_value(k);
        long j = -1;
        if (c->mapping.mode == TM_MAPPING_RAW) {
            for (size_t r = 0; r < c->mapping.ncolumns; r++)
                if (strcmp(c->mapping.columns[r].name, s) == 0)
                    j = (long)r;
        } else {
            j = cfg_column_index(L, s);
        }
        if (j < 0) {
            if (c->mapping.ncolumns == 0)
                continue; /* the mapping itself is in error */
            const char *hint = names ? tm_did_you_mean(s, names, nnames) : NULL;
            char f[FOUND_MAX_LEN + 64];
            cfg_found(L, k, f, sizeof f);
            if (hint)
                cfg_fail(
                    L, path,
                    "expected a column of $.mapping.columns, found %s (did "
                    "you mean \"%s\"?)",
                    f, hint);
            else
                cfg_fail(L, path,
                         "expected a column of $.mapping.columns, found %s", f);
            continue;
        }
        c->dedup.key_columns[c->dedup.nkey] = (size_t)j;
        if (cfg_str_push(&c->dedup.key, &c->dedup.nkey, s, strlen(s)) != 0)
            cfg_fail(L, path, "out of memory");
    }
    free(names);
}
