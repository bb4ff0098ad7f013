/* Declared settings: a plugin's table of tm_setting checked once, the
 * settings object checked against it and the plugin's struct filled, and
 * the schema `tidemark plugins` prints. Messages use the config's words
 * ("PATH: expected X, found Y", "missing required setting", "unknown
 * setting (did you mean ...)"), through the same helpers, so that a
 * setting of a plugin reads like any other setting of the config. */
#include "config/settings_table.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/found.h"
#include "config/json_path.h"
#include "config/settings.h"
#include "services/error.h"

#define PATH_LEN   320
#define EXPECT_LEN 400
#define ENUM_MAX   64 /* allowed values of one enumeration */

static const tm_setting *entry(const tm_setting *table, size_t i) {
    return TM_CELEM(tm_setting, table, i);
}

static size_t field_size(tm_setting_type t) {
    switch (t) {
    case TM_SET_STRING: return sizeof(const char *);
    case TM_SET_INT: return sizeof(int64_t);
    case TM_SET_BOOL:
    case TM_SET_ENUM: return sizeof(int);
    }
    return 0;
}

static size_t field_align(tm_setting_type t) {
    switch (t) {
    case TM_SET_STRING: return alignof(const char *);
    case TM_SET_INT: return alignof(int64_t);
    case TM_SET_BOOL:
    case TM_SET_ENUM: return alignof(int);
    }
    return 1;
}

static size_t enum_count(const tm_setting *e) {
    size_t n = 0;
    while (e->allowed && n <= ENUM_MAX && e->allowed[n])
        n++;
    return n;
}

/* ASCII-only case folding: the locale must not change what matches. */
static int same_word(const char *a, const char *b, int icase) {
    for (;; a++, b++) {
        unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
        if (icase) {
            x = (x >= 'A' && x <= 'Z') ? (unsigned char)(x - 'A' + 'a') : x;
            y = (y >= 'A' && y <= 'Z') ? (unsigned char)(y - 'A' + 'a') : y;
        }
        if (x != y)
            return 0;
        if (!x)
            return 1;
    }
}

/* What a value of entry e must be, in the config's words. */
static const char *expected(const tm_setting *e, char *buf, size_t size) {
    long long lo = (long long)e->min, hi = (long long)e->max;
    switch (e->type) {
    case TM_SET_STRING:
        if (hi == 0 && lo <= 0)
            snprintf(buf, size, "a string");
        else if (hi == 0 && lo == 1)
            snprintf(buf, size, "a non-empty string");
        else if (hi == 0)
            snprintf(buf, size, "a string of at least %lld bytes", lo);
        else if (lo <= 0)
            snprintf(buf, size, "a string of at most %lld bytes", hi);
        else if (lo == 1)
            snprintf(buf, size, "a non-empty string of at most %lld bytes", hi);
        else
            snprintf(buf, size, "a string of %lld to %lld bytes", lo, hi);
        break;
    case TM_SET_INT:
        if (e->min == INT64_MIN && e->max == INT64_MAX)
            snprintf(buf, size, "an integer");
        else
            snprintf(buf, size, "an integer from %lld to %lld", lo, hi);
        break;
    case TM_SET_BOOL: snprintf(buf, size, "a boolean"); break;
    case TM_SET_ENUM: {
        /* "a", "b" or "c": as the config's own enumerations say it */
        size_t n = enum_count(e), used = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < n && used < size; i++) {
            int w = snprintf(buf + used, size - used, "%s\"%s\"",
                             i == 0 ? "" : (i + 1 == n ? " or " : ", "),
                             e->allowed[i]);
            if (w < 0)
                break;
            used += (size_t)w;
        }
        break;
    }
    }
    return buf;
}

/* ---- the table itself ---------------------------------------------------- */

static int bad_entry(char *why, size_t size, size_t i, const tm_setting *e,
                     const char *fmt, const char *detail) {
    char msg[256];
    snprintf(msg, sizeof msg, fmt, detail ? detail : "");
    if (e && e->name)
        snprintf(why, size, "entry %zu (\"%.64s\"): %s", i, e->name, msg);
    else
        snprintf(why, size, "entry %zu: %s", i, msg);
    return -1;
}

static int check_enum(const tm_setting *e, size_t i, char *why, size_t size) {
    size_t n = enum_count(e);
    if (n == 0)
        return bad_entry(why, size, i, e,
                         "an enumeration with no allowed "
                         "values%s",
                         NULL);
    if (n > ENUM_MAX)
        return bad_entry(why, size, i, e,
                         "more allowed values than the host takes (64), or "
                         "no NULL at their end%s",
                         NULL);
    for (size_t a = 0; a < n; a++) {
        if (!e->allowed[a][0])
            return bad_entry(why, size, i, e, "an empty allowed value%s", NULL);
        for (size_t b = 0; b < a; b++)
            if (same_word(e->allowed[a], e->allowed[b],
                          (e->flags & TM_SETTING_ICASE) != 0))
                return bad_entry(why, size, i, e,
                                 "allowed value \"%.64s\" twice",
                                 e->allowed[a]);
    }
    if (e->def_int < 0 || (uint64_t)e->def_int >= n)
        return bad_entry(why, size, i, e,
                         "the default is not an index of the allowed "
                         "values%s",
                         NULL);
    return 0;
}

static int check_bounds(const tm_setting *e, size_t i, char *why, size_t size) {
    int required = (e->flags & TM_SETTING_REQUIRED) != 0;
    if (e->type == TM_SET_STRING) {
        if (e->min < 0 || (e->max != 0 && e->max < e->min))
            return bad_entry(why, size, i, e, "length bounds out of order%s",
                             NULL);
        if (required && e->def_string)
            return bad_entry(why, size, i, e, "required, yet a default%s",
                             NULL);
        size_t len = e->def_string ? strlen(e->def_string) : 0;
        if (e->def_string &&
            ((int64_t)len < e->min || (e->max != 0 && (int64_t)len > e->max)))
            return bad_entry(why, size, i, e,
                             "the default's length is out of its bounds%s",
                             NULL);
    } else if (e->type == TM_SET_INT) {
        if (e->min > e->max)
            return bad_entry(why, size, i, e, "min is above max%s", NULL);
        int has_default = !required && !(e->flags & TM_SETTING_NO_DEFAULT);
        if (has_default && (e->def_int < e->min || e->def_int > e->max))
            return bad_entry(why, size, i, e,
                             "the default is out of its bounds (give "
                             "TM_SETTING_NO_DEFAULT for none)%s",
                             NULL);
        if ((e->flags & TM_SETTING_NO_DEFAULT) && e->min <= 0 && e->max >= 0)
            return bad_entry(why, size, i, e,
                             "no default, but 0 (what absent leaves) is "
                             "within the bounds%s",
                             NULL);
    } else if (e->type == TM_SET_BOOL) {
        if (e->def_int != 0 && e->def_int != 1)
            return bad_entry(why, size, i, e, "a boolean default not 0 or 1%s",
                             NULL);
    } else if (e->type == TM_SET_ENUM) {
        return check_enum(e, i, why, size);
    }
    return 0;
}

int tm_setting_table_check(const tm_setting *table, size_t out_size, char *why,
                           size_t why_size) {
    return tm_setting_table_check_sized(table, sizeof(tm_setting), out_size,
                                        why, why_size);
}

int tm_setting_table_check_sized(const tm_setting *table, size_t host_size,
                                 size_t out_size, char *why, size_t why_size) {
    if (!table) {
        snprintf(why, why_size, "no table");
        return -1;
    }
    /* Entries are walked with the first one's struct_size as the stride
     * (TM_CELEM), so that an older plugin's smaller entries stay readable
     * when tm_setting grows. Every field read here is ABI 1.3's: within
     * any accepted size. Larger than the host's (a newer plugin, refused
     * before by its minor version) could read past the table; bounded by
     * it, walking TM_SETTING_TABLE_MAX entries stays within reach. */
    if (table->name && (table->struct_size < TM_SETTING_SIZE_1_3 ||
                        table->struct_size > host_size)) {
        char got[160];
        if (table->struct_size < TM_SETTING_SIZE_1_3)
            snprintf(got, sizeof got,
                     "%lu is smaller than tm_setting (%zu bytes) of ABI 1.3",
                     (unsigned long)table->struct_size, TM_SETTING_SIZE_1_3);
        else
            snprintf(got, sizeof got,
                     "%lu is larger than tm_setting (%zu bytes) of this host",
                     (unsigned long)table->struct_size, host_size);
        return bad_entry(why, why_size, 0, NULL, "struct_size %s", got);
    }
    for (size_t i = 0;; i++) {
        if (i >= TM_SETTING_TABLE_MAX)
            return bad_entry(why, why_size, i, NULL,
                             "no end entry (TM_SETTING_END) within 256 "
                             "entries%s",
                             NULL);
        const tm_setting *e = entry(table, i);
        if (!e->name)
            return 0;
        if (e->struct_size != table->struct_size)
            return bad_entry(why, why_size, i, e,
                             "struct_size differs from the first entry's%s",
                             NULL);
        if (!e->name[0])
            return bad_entry(why, why_size, i, NULL, "an empty name%s", NULL);
        size_t fs = field_size(e->type);
        if (fs == 0)
            return bad_entry(why, why_size, i, e, "an unknown type%s", NULL);
        if (e->flags & ~(uint32_t)(TM_SETTING_REQUIRED | TM_SETTING_ICASE |
                                   TM_SETTING_NO_DEFAULT))
            return bad_entry(why, why_size, i, e, "unknown flags%s", NULL);
        /* Bounded without a struct too: tm_settings_check sizes a scratch
         * struct by the largest offset (2^31 was a 2 GB allocation). */
        if (e->offset > TM_SETTING_STRUCT_MAX - fs) {
            char at[64];
            snprintf(at, sizeof at, "%zu", e->offset);
            return bad_entry(why, why_size, i, e,
                             "its field ends past the 65536 bytes a settings "
                             "struct may have (offset %s)",
                             at);
        }
        if (e->offset % field_align(e->type) != 0 ||
            (out_size != 0 &&
             (e->offset > out_size || out_size - e->offset < fs)))
            return bad_entry(why, why_size, i, e,
                             "its field is outside the settings struct or "
                             "misaligned%s",
                             NULL);
        for (size_t j = 0; j < i; j++)
            if (strcmp(entry(table, j)->name, e->name) == 0)
                return bad_entry(why, why_size, i, e, "a name declared twice%s",
                                 NULL);
        if (check_bounds(e, i, why, why_size) != 0)
            return -1;
    }
}

/* ---- filling ------------------------------------------------------------- */

static void put(void *out, const tm_setting *e, const void *v) {
    memcpy((char *)out + e->offset, v, field_size(e->type));
}

static void put_default(void *out, const tm_setting *e) {
    if (e->type == TM_SET_STRING) {
        put(out, e, &e->def_string);
    } else if (e->type == TM_SET_INT) {
        int64_t v = (e->flags & (TM_SETTING_NO_DEFAULT | TM_SETTING_REQUIRED))
                        ? 0
                        : e->def_int;
        put(out, e, &v);
    } else {
        int v = (int)e->def_int;
        put(out, e, &v);
    }
}

static int fail_found(tm_error *err, const char *path, const tm_setting *e,
                      const json_t *v, const char *extra) {
    /* Redacted against the process's secrets (every config's are added
     * when it is loaded) before it is cut: validate and run print this. */
    char want[EXPECT_LEN], found[TM_FOUND_MAX_LEN + 64];
    tm_error_set(err, "%s: expected %s, found %s%s", path,
                 expected(e, want, sizeof want),
                 tm_config_found(NULL, v, found, sizeof found),
                 extra ? extra : "");
    return -1;
}

/* One value, present and not null, into out. */
static int fill_one(const tm_setting *e, const json_t *v, const char *path,
                    void *out, tm_error *err) {
    switch (e->type) {
    case TM_SET_STRING: {
        if (!json_is_string(v))
            return fail_found(err, path, e, v, NULL);
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        if (strlen(s) != len) {
            tm_error_set(err,
                         "%s: expected a string without \\u0000 (a NUL "
                         "character), found one",
                         path);
            return -1;
        }
        if ((int64_t)len < e->min || (e->max != 0 && (int64_t)len > e->max)) {
            char extra[48];
            snprintf(extra, sizeof extra, " (%zu bytes)", len);
            return fail_found(err, path, e, v, extra);
        }
        put(out, e, &s);
        return 0;
    }
    case TM_SET_INT: {
        if (!json_is_integer(v))
            return fail_found(err, path, e, v, NULL);
        json_int_t i = json_integer_value(v);
        if (i < e->min || i > e->max)
            return fail_found(err, path, e, v, NULL);
        int64_t x = (int64_t)i;
        put(out, e, &x);
        return 0;
    }
    case TM_SET_BOOL: {
        if (!json_is_boolean(v))
            return fail_found(err, path, e, v, NULL);
        int b = json_is_true(v);
        put(out, e, &b);
        return 0;
    }
    case TM_SET_ENUM: {
        if (!json_is_string(v) ||
            strlen(json_string_value(v)) != json_string_length(v))
            return fail_found(err, path, e, v, NULL);
        size_t n = enum_count(e);
        for (size_t k = 0; k < n; k++)
            if (same_word(json_string_value(v), e->allowed[k],
                          (e->flags & TM_SETTING_ICASE) != 0)) {
                int idx = (int)k;
                put(out, e, &idx);
                return 0;
            }
        return fail_found(err, path, e, v, NULL);
    }
    }
    return fail_found(err, path, e, v, NULL);
}

int tm_settings_fill(const tm_settings *s, const tm_setting *table, void *out,
                     size_t out_size, tm_error *err) {
    char why[512];
    const char *base = tm_settings_path(s);
    if (!out || out_size == 0 ||
        tm_setting_table_check(table, out_size, why, sizeof why) != 0) {
        tm_error_set(err, "%s: the plugin's settings table is wrong: %s", base,
                     out && out_size ? why : "no struct to fill");
        return -1;
    }
    const char *names[TM_SETTING_TABLE_MAX];
    size_t n = 0;
    while (entry(table, n)->name) {
        names[n] = entry(table, n)->name;
        n++;
    }
    if (tm_settings_check_keys(s, names, n, err) != 0)
        return -1;
    memset(out, 0, out_size);
    const json_t *obj = tm_settings_object(s);
    for (size_t i = 0; i < n; i++) {
        const tm_setting *e = entry(table, i);
        char path[PATH_LEN];
        tm_json_path_key(path, sizeof path, base, e->name);
        put_default(out, e);
        const json_t *v = obj ? json_object_get(obj, e->name) : NULL;
        if (v && json_is_null(v))
            v = NULL; /* null means "not set", as for setting_*() */
        if (!v && (e->flags & TM_SETTING_REQUIRED)) {
            char want[EXPECT_LEN];
            tm_error_set(err, "%s: missing required setting (expected %s%s%s)",
                         path, expected(e, want, sizeof want),
                         e->description ? ": " : "",
                         e->description ? e->description : "");
            return -1;
        }
        if (v && fill_one(e, v, path, out, err) != 0)
            return -1;
    }
    return 0;
}

int tm_settings_check(const tm_settings *s, const tm_setting *table,
                      tm_error *err) {
    char why[512];
    if (tm_setting_table_check(table, 0, why, sizeof why) != 0) {
        tm_error_set(err, "%s: the plugin's settings table is wrong: %s",
                     tm_settings_path(s), why);
        return -1;
    }
    size_t span = 1;
    for (size_t i = 0; entry(table, i)->name; i++) {
        const tm_setting *e = entry(table, i);
        if (e->offset + field_size(e->type) > span)
            span = e->offset + field_size(e->type);
    }
    void *scratch = calloc(1, span);
    if (!scratch) {
        tm_error_set(err, "%s: out of memory", tm_settings_path(s));
        return -1;
    }
    int rc = tm_settings_fill(s, table, scratch, span, err);
    free(scratch);
    return rc;
}

/* ---- the schema ---------------------------------------------------------- */

static int set_new(json_t *o, const char *key, json_t *v) {
    return v ? json_object_set_new(o, key, v) : -1;
}

static json_t *property(const tm_setting *e) {
    json_t *p = json_object();
    int rc = p ? 0 : -1;
    int has_default =
        !(e->flags & (TM_SETTING_REQUIRED | TM_SETTING_NO_DEFAULT));
    switch (e->type) {
    case TM_SET_STRING:
        rc |= set_new(p, "type", json_string("string"));
        /* bytes, where JSON Schema counts characters: equal for ASCII */
        if (e->min > 0)
            rc |= set_new(p, "minLength", json_integer(e->min));
        if (e->max > 0)
            rc |= set_new(p, "maxLength", json_integer(e->max));
        if (e->def_string)
            rc |= set_new(p, "default", json_string(e->def_string));
        break;
    case TM_SET_INT:
        rc |= set_new(p, "type", json_string("integer"));
        if (e->min != INT64_MIN)
            rc |= set_new(p, "minimum", json_integer(e->min));
        if (e->max != INT64_MAX)
            rc |= set_new(p, "maximum", json_integer(e->max));
        if (has_default)
            rc |= set_new(p, "default", json_integer(e->def_int));
        break;
    case TM_SET_BOOL:
        rc |= set_new(p, "type", json_string("boolean"));
        rc |= set_new(p, "default", json_boolean(e->def_int));
        break;
    case TM_SET_ENUM: {
        json_t *a = json_array();
        size_t n = enum_count(e);
        for (size_t k = 0; a && k < n; k++)
            rc |= json_array_append_new(a, json_string(e->allowed[k]));
        rc |= set_new(p, "enum", a);
        if (has_default)
            rc |= set_new(p, "default", json_string(e->allowed[e->def_int]));
        break;
    }
    }
    if (e->description)
        rc |= set_new(p, "description", json_string(e->description));
    if (rc != 0) {
        json_decref(p);
        return NULL;
    }
    return p;
}

json_t *tm_setting_table_schema(const tm_setting *table) {
    json_t *schema = json_object(), *req = json_array(), *props = json_object();
    int rc = (schema && req && props) ? 0 : -1;
    for (size_t i = 0; rc == 0 && entry(table, i)->name; i++) {
        const tm_setting *e = entry(table, i);
        rc |= set_new(props, e->name, property(e));
        if (e->flags & TM_SETTING_REQUIRED)
            rc |= json_array_append_new(req, json_string(e->name));
    }
    if (rc == 0)
        rc |= set_new(schema, "type", json_string("object"));
    if (rc == 0 && json_array_size(req) > 0)
        rc |= json_object_set(schema, "required", req);
    if (rc == 0)
        rc |= set_new(schema, "additionalProperties", json_false());
    if (rc == 0)
        rc |= json_object_set(schema, "properties", props);
    json_decref(req);
    json_decref(props);
    if (rc != 0) {
        json_decref(schema);
        return NULL;
    }
    return schema;
}
