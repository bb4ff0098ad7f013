/* json mode: parse (jansson), filter, then the columns in their order; the
 * first failure makes the dead letter, so its detail names one pointer
 * and one column. raw mode: the seven fixed columns, never a failure. */
#include "convert/record_convert.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/canonical.h"
#include "convert/json_pointer.h"
#include "convert/timestamp.h"

#define FOUND_MAX  60 /* bytes of a found value quoted in a detail */
#define DETAIL_MAX 1024

struct tm_converter {
    const tm_connector_config *cfg;
    tm_json_pointer *pointers; /* json mode: one per column */
    tm_json_pointer filter;
};

void tm_converter_free(tm_converter *cv) {
    if (!cv)
        return;
    if (cv->pointers)
        for (size_t i = 0; i < cv->cfg->mapping.ncolumns; i++)
            tm_json_pointer_clear(&cv->pointers[i]);
    free(cv->pointers);
    tm_json_pointer_clear(&cv->filter);
    free(cv);
}

tm_converter *tm_converter_new(const tm_connector_config *cfg) {
    tm_converter *cv = calloc(1, sizeof *cv);
    if (!cv)
        return NULL;
    cv->cfg = cfg;
    if (cfg->mapping.mode != TM_MAPPING_JSON)
        return cv;
    size_t n = cfg->mapping.ncolumns;
    if (!(cv->pointers = calloc(n ? n : 1, sizeof *cv->pointers)))
        goto fail;
    for (size_t i = 0; i < n; i++)
        if (tm_json_pointer_compile(cfg->mapping.pointers[i],
                                    &cv->pointers[i]) != 0)
            goto fail;
    if (cfg->mapping.filter.op != TM_FILTER_NONE &&
        tm_json_pointer_compile(cfg->mapping.filter.pointer, &cv->filter) != 0)
        goto fail;
    return cv;
fail:
    tm_converter_free(cv);
    return NULL;
}

/* ---- details ---- */

/* At most FOUND_MAX bytes of s (cut on a UTF-8 character boundary,
 * control characters shown as '?'), "..." when cut. */
static void shorten(const char *s, size_t n, char *out, size_t size) {
    size_t k = n;
    if (k > FOUND_MAX) {
        k = FOUND_MAX;
        while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
            k--; /* s[k] continues a character: cut before it starts */
    }
    size_t o = 0;
    for (size_t i = 0; i < k && o + 1 < size; i++)
        out[o++] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
    if (k < n)
        for (int d = 0; d < 3 && o + 1 < size; d++)
            out[o++] = '.';
    out[o] = '\0';
}

/* What a value is, for "expected X, found Y": "string \"12\"",
 * "integer 5", "number 1.5", "boolean true", "object {...}". 0 ok, -1
 * OOM. */
static int describe(const json_t *v, char *out, size_t size) {
    char s[FOUND_MAX + 8];
    if (json_is_string(v)) {
        shorten(json_string_value(v), json_string_length(v), s, sizeof s);
        snprintf(out, size, "string \"%s\"", s);
    } else if (json_is_integer(v)) {
        snprintf(out, size, "integer %" JSON_INTEGER_FORMAT,
                 json_integer_value(v));
    } else if (json_is_boolean(v)) {
        snprintf(out, size, "boolean %s", json_is_true(v) ? "true" : "false");
    } else {
        const char *kind = json_is_real(v)     ? "number"
                           : json_is_object(v) ? "object"
                                               : "array";
        char *text = tm_canonical_json(v);
        if (!text)
            return -1;
        shorten(text, strlen(text), s, sizeof s);
        snprintf(out, size, "%s %s", kind, s);
        free(text);
    }
    return 0;
}

/* The column's pointer as a detail shows it ("" for the whole value). */
static const char *shown_pointer(const char *p) {
    return *p ? p : "\"\"";
}

static tm_conv_outcome dead(tm_arena *a, tm_conv_result *out, tm_dl_reason r,
                            const char *fmt, ...) TM_PRINTF(4, 5);

static tm_conv_outcome dead(tm_arena *a, tm_conv_result *out, tm_dl_reason r,
                            const char *fmt, ...) {
    char d[DETAIL_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d, sizeof d, fmt, ap);
    va_end(ap);
    out->reason = r;
    out->detail = tm_arena_strdup(a, d);
    out->values = NULL;
    return out->detail ? TM_CONV_DEAD_LETTER : TM_CONV_OOM;
}

/* ---- json mode ---- */

/* One literal of the filter against the value found: a string by its
 * content, an integer, true, false or null by its JSON text, a real by
 * the number the literal spells; objects and arrays never match. */
static int literal_matches(const json_t *v, const char *lit) {
    char text[32];
    switch (json_typeof(v)) {
    case JSON_STRING:
        return json_string_length(v) == strlen(lit) &&
               memcmp(json_string_value(v), lit, strlen(lit)) == 0;
    case JSON_INTEGER:
        snprintf(text, sizeof text, "%" JSON_INTEGER_FORMAT,
                 json_integer_value(v));
        return strcmp(text, lit) == 0;
    case JSON_REAL: {
        char *end = NULL;
        double d = strtod(lit, &end);
        return *lit && end && *end == '\0' && d == json_real_value(v);
    }
    case JSON_TRUE: return strcmp(lit, "true") == 0;
    case JSON_FALSE: return strcmp(lit, "false") == 0;
    case JSON_NULL: return strcmp(lit, "null") == 0;
    default: return 0;
    }
}

static int filter_keeps(const tm_converter *cv, json_t *doc) {
    const tm_filter *f = &cv->cfg->mapping.filter;
    if (f->op == TM_FILTER_NONE)
        return 1;
    json_t *v = tm_json_pointer_resolve(&cv->filter, doc);
    if (!v)
        return 0; /* a missing pointer matches nothing */
    for (size_t i = 0; i < f->nvalues; i++)
        if (literal_matches(v, f->values[i]))
            return 1;
    return 0;
}

/* Column i from the value found (not NULL, not JSON null). 0 ok, 1 a
 * type mismatch (detail set), -1 OOM. */
static int convert_column(const tm_converter *cv, size_t i, json_t *v,
                          tm_value *val, tm_arena *a, tm_conv_result *out) {
    const tm_column *col = &cv->cfg->mapping.columns[i];
    switch (col->type) {
    case TM_TYPE_TEXT:
        if (!json_is_string(v))
            break;
        val->v.s.len = json_string_length(v);
        val->v.s.ptr = tm_arena_strndup(a, json_string_value(v), val->v.s.len);
        return val->v.s.ptr ? 0 : -1;
    case TM_TYPE_INT:
        if (!json_is_integer(v))
            break;
        val->v.i = json_integer_value(v);
        return 0;
    case TM_TYPE_FLOAT:
        if (!json_is_number(v))
            break;
        val->v.f = json_number_value(v);
        return 0;
    case TM_TYPE_BOOL:
        if (!json_is_boolean(v))
            break;
        val->v.i = json_is_true(v);
        return 0;
    case TM_TYPE_TIMESTAMP:
        if (json_is_string(v) &&
            tm_timestamp_parse(json_string_value(v), json_string_length(v),
                               &val->v.i) == 0)
            return 0;
        if (json_is_integer(v) &&
            tm_timestamp_from_ms(json_integer_value(v), &val->v.i) == 0)
            return 0;
        break;
    case TM_TYPE_JSON: {
        char *text = tm_canonical_json(v);
        if (!text)
            return -1;
        val->v.s.len = strlen(text);
        val->v.s.ptr = tm_arena_strndup(a, text, val->v.s.len);
        free(text);
        return val->v.s.ptr ? 0 : -1;
    }
    case TM_TYPE_BYTES: break; /* not a json-mode type */
    }
    char found[FOUND_MAX + 64];
    if (describe(v, found, sizeof found) != 0)
        return -1;
    const char *expected = col->type == TM_TYPE_TIMESTAMP
                               ? "timestamp (RFC 3339 text or epoch "
                                 "milliseconds)"
                               : tm_config_type_name(col->type);
    return dead(a, out, TM_DL_TYPE_MISMATCH,
                "%s: expected %s, found %s (column %s)",
                shown_pointer(cv->cfg->mapping.pointers[i]),
                expected ? expected : "?", found,
                col->name) == TM_CONV_DEAD_LETTER
               ? 1
               : -1;
}

/* Whether jansson failed for want of memory rather than because of the
 * text: it says so (json_error_out_of_memory), or it gives up with no
 * message at all (an allocation inside the parser failed). Either way the
 * record is not at fault and must not become a dead letter. */
static int parse_oom(const json_error_t *e) {
    return json_error_code(e) == json_error_out_of_memory || e->text[0] == '\0';
}

/* Parses the value. NULL with *oom clear: the text is not JSON (jerr says
 * why). jansson reports a few allocation failures as syntax errors ("string
 * or '}' expected" where a string failed to be copied), so a syntax error
 * is believed only when a second read finds the very same one: the text
 * decides deterministically, a failed allocation does not. (One failure
 * jansson does not report at all, a lost byte when its token buffer cannot
 * grow; nothing outside jansson can see that one.) */
static json_t *parse(const tm_conv_input *in, json_error_t *jerr, int *oom) {
    *oom = 0;
    json_t *doc = json_loadb(in->value, in->value_len, JSON_DECODE_ANY, jerr);
    if (doc)
        return doc;
    if (parse_oom(jerr)) {
        *oom = 1;
        return NULL;
    }
    json_error_t again;
    doc = json_loadb(in->value, in->value_len, JSON_DECODE_ANY, &again);
    if (doc)
        return doc;
    *oom = parse_oom(&again) || again.line != jerr->line ||
           again.column != jerr->column || strcmp(again.text, jerr->text) != 0;
    return NULL;
}

static tm_conv_outcome convert_json(const tm_converter *cv, tm_arena *a,
                                    const tm_conv_input *in,
                                    tm_conv_result *out) {
    const tm_connector_config *cfg = cv->cfg;
    if (!in->value)
        return dead(a, out, TM_DL_PARSE_ERROR, "tombstone (null value)");
    json_error_t jerr;
    int oom = 0;
    json_t *doc = parse(in, &jerr, &oom);
    if (!doc) {
        if (oom)
            return TM_CONV_OOM;
        return dead(a, out, TM_DL_PARSE_ERROR,
                    "invalid JSON at line %d, column %d: %s", jerr.line,
                    jerr.column, jerr.text);
    }
    tm_conv_outcome rc = TM_CONV_ROW;
    if (!filter_keeps(cv, doc)) {
        rc = TM_CONV_FILTERED;
        goto done;
    }
    size_t n = cfg->mapping.ncolumns;
    tm_value *vals = tm_arena_alloc(a, n * sizeof *vals);
    if (!vals) {
        rc = TM_CONV_OOM;
        goto done;
    }
    memset(vals, 0, n * sizeof *vals);
    for (size_t i = 0; i < n; i++) {
        const tm_column *col = &cfg->mapping.columns[i];
        tm_value *val = &vals[i];
        val->struct_size = (uint32_t)sizeof(tm_value);
        json_t *v = tm_json_pointer_resolve(&cv->pointers[i], doc);
        if (!v || json_is_null(v)) {
            val->is_null = 1;
            if (col->required) {
                rc = dead(a, out, TM_DL_MISSING_FIELD,
                          "%s: required, %s (column %s)",
                          shown_pointer(cfg->mapping.pointers[i]),
                          v ? "found null" : "missing", col->name);
                goto done;
            }
            continue;
        }
        int c = convert_column(cv, i, v, val, a, out);
        if (c != 0) {
            rc = c > 0 ? TM_CONV_DEAD_LETTER : TM_CONV_OOM;
            goto done;
        }
    }
    out->values = vals;
done:
    json_decref(doc);
    return rc;
}

/* ---- raw mode ---- */

static void set_bytes(tm_value *v, const void *p, size_t n) {
    v->is_null = p == NULL;
    v->v.s.ptr = p;
    v->v.s.len = p ? n : 0;
}

static tm_conv_outcome convert_raw(const tm_converter *cv, tm_arena *a,
                                   const tm_conv_input *in,
                                   tm_conv_result *out) {
    size_t n = cv->cfg->mapping.ncolumns;
    tm_value *vals = tm_arena_alloc(a, n * sizeof *vals);
    if (!vals)
        return TM_CONV_OOM;
    memset(vals, 0, n * sizeof *vals);
    /* By name, not position: the column order is the config's. */
    for (size_t i = 0; i < n; i++) {
        const char *name = cv->cfg->mapping.columns[i].name;
        tm_value *v = &vals[i];
        v->struct_size = (uint32_t)sizeof(tm_value);
        if (strcmp(name, "key") == 0) {
            set_bytes(v, in->key, in->key_len);
        } else if (strcmp(name, "value") == 0) {
            set_bytes(v, in->value, in->value_len);
        } else if (strcmp(name, "headers") == 0) {
            set_bytes(v, in->headers_json,
                      in->headers_json ? strlen(in->headers_json) : 0);
        } else if (strcmp(name, "topic") == 0) {
            set_bytes(v, in->topic, strlen(in->topic));
        } else if (strcmp(name, "partition") == 0) {
            v->v.i = in->partition;
        } else if (strcmp(name, "offset") == 0) {
            v->v.i = in->offset;
        } else if (strcmp(name, "timestamp") == 0) {
            /* Kafka's "no timestamp" is -1; anything out of range too. */
            v->is_null = in->timestamp_ms < 0 ||
                         tm_timestamp_from_ms(in->timestamp_ms, &v->v.i) != 0;
        } else {
            v->is_null = 1; /* not a raw column: the loader makes none */
        }
    }
    out->values = vals;
    return TM_CONV_ROW;
}

tm_conv_outcome tm_convert(const tm_converter *cv, tm_arena *a,
                           const tm_conv_input *in, tm_conv_result *out) {
    out->values = NULL;
    out->reason = 0;
    out->detail = NULL;
    if (cv->cfg->mapping.mode == TM_MAPPING_RAW)
        return convert_raw(cv, a, in, out);
    return convert_json(cv, a, in, out);
}
