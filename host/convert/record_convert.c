/* json mode: find the values at the pointers (the streaming extractor, or
 * jansson's tree), filter, then the columns in their order; the first
 * failure makes the dead letter, so its detail names one pointer and one
 * column. raw mode: the seven fixed columns, never a failure. */
#include "convert/record_convert.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/cdc_envelope.h"
#include "convert/cdc_logical.h"
#include "convert/json_extract.h"
#include "convert/json_pointer.h"
#include "convert/timestamp.h"
#include "convert/value_convert.h"

#define DETAIL_MAX     1024
#define FOUND_ON_STACK 16 /* pointers whose values fit on the stack */

struct tm_converter {
    const tm_connector_config *cfg;
    tm_json_parser parser;
    /* json mode: one per column, then the filter's when there is one */
    tm_json_pointer *pointers;
    size_t npointers;
    tm_json_plan *plan; /* the pointers, for the extractor */
};

void tm_converter_free(tm_converter *cv) {
    if (!cv)
        return;
    tm_json_plan_free(cv->plan);
    for (size_t i = 0; cv->pointers && i < cv->npointers; i++)
        tm_json_pointer_clear(&cv->pointers[i]);
    free(cv->pointers);
    free(cv);
}

tm_converter *tm_converter_new_with(const tm_connector_config *cfg,
                                    tm_json_parser parser) {
    tm_converter *cv = calloc(1, sizeof *cv);
    if (!cv)
        return NULL;
    cv->cfg = cfg;
    cv->parser = parser;
    if (cfg->mapping.mode != TM_MAPPING_JSON)
        return cv;
    size_t n = cfg->mapping.ncolumns;
    int filtered = cfg->mapping.filter.op != TM_FILTER_NONE;
    if (!(cv->pointers = calloc(n + 1, sizeof *cv->pointers)))
        goto fail;
    for (size_t i = 0; i < n + (size_t)filtered; i++, cv->npointers++)
        if (tm_json_pointer_compile(i < n ? cfg->mapping.pointers[i]
                                          : cfg->mapping.filter.pointer,
                                    &cv->pointers[i]) != 0)
            goto fail;
    if (!(cv->plan = tm_json_plan_new(cv->pointers, cv->npointers)))
        goto fail;
    return cv;
fail:
    tm_converter_free(cv);
    return NULL;
}

tm_converter *tm_converter_new(const tm_connector_config *cfg) {
    return tm_converter_new_with(cfg, TM_PARSER_EXTRACTOR);
}

/* ---- details ---- */

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

/* 1 kept, 0 filtered, -1 OOM. v: the value at the filter's pointer. */
static int filter_keeps(const tm_converter *cv, const tm_jvalue *v,
                        tm_arena *a) {
    const tm_filter *f = &cv->cfg->mapping.filter;
    if (f->op == TM_FILTER_NONE)
        return 1;
    if (!v->present)
        return 0; /* a missing pointer matches nothing */
    for (size_t i = 0; i < f->nvalues; i++) {
        int m = tm_jvalue_matches_literal(v, f->values[i], a);
        if (m != 0)
            return m;
    }
    return 0;
}

/* Column i from the value found (present, not JSON null). 0 ok, 1 a type
 * mismatch (detail set), -1 OOM. */
static int convert_column(const tm_converter *cv, size_t i, const tm_jvalue *v,
                          tm_value *val, tm_arena *a, tm_conv_result *out) {
    const tm_column *col = &cv->cfg->mapping.columns[i];
    int rc = tm_value_from_json(v, col->type, a, val);
    if (rc <= 0)
        return rc;
    char found[TM_FOUND_MAX + 64];
    if (tm_jvalue_describe(v, a, found, sizeof found) != 0)
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

/* The values at the converter's pointers into found. ROW when found; else the
 * record's outcome (a parse_error dead letter, or OOM). *doc: jansson's tree
 * when jansson found them (the caller frees it; the values point into it). */
static tm_conv_outcome find_values(const tm_converter *cv, tm_arena *a,
                                   const tm_conv_input *in, tm_jvalue *found,
                                   json_t **doc, tm_conv_result *out) {
    *doc = NULL;
    if (cv->parser == TM_PARSER_EXTRACTOR) {
        int rc = tm_json_extract(cv->plan, in->value, in->value_len, found);
        if (rc != TM_EXTRACT_INVALID)
            return rc == TM_EXTRACT_OK ? TM_CONV_ROW : TM_CONV_OOM;
        /* Not JSON: jansson says why, in the words and at the position
         * the detail has always quoted. Were jansson to read it after all,
         * its values are taken: the reference decides. */
    }
    json_error_t jerr;
    int oom = 0;
    if (!(*doc = parse(in, &jerr, &oom))) {
        if (oom)
            return TM_CONV_OOM;
        return dead(a, out, TM_DL_PARSE_ERROR,
                    "invalid JSON at line %d, column %d: %s", jerr.line,
                    jerr.column, jerr.text);
    }
    for (size_t i = 0; i < cv->npointers; i++)
        tm_jvalue_from_node(tm_json_pointer_resolve(&cv->pointers[i], *doc),
                            &found[i]);
    return TM_CONV_ROW;
}

/* Filter, then columns, from the values found; keys_only (a change
 * event's delete): the other columns are null, required or not. */
static tm_conv_outcome convert_found(const tm_converter *cv, tm_arena *a,
                                     const tm_jvalue *found, int keys_only,
                                     tm_conv_result *out) {
    const tm_connector_config *cfg = cv->cfg;
    size_t n = cfg->mapping.ncolumns;
    int keep = filter_keeps(cv, &found[n], a);
    if (keep <= 0)
        return keep == 0 ? TM_CONV_FILTERED : TM_CONV_OOM;
    tm_value *vals = tm_arena_alloc(a, n * sizeof *vals);
    if (!vals)
        return TM_CONV_OOM;
    memset(vals, 0, n * sizeof *vals);
    for (size_t i = 0; i < n; i++) {
        const tm_column *col = &cfg->mapping.columns[i];
        const tm_jvalue *v = &found[i];
        tm_value *val = &vals[i];
        val->struct_size = (uint32_t)sizeof(tm_value);
        if (!v->present || v->kind == JSON_NULL) {
            val->is_null = 1;
            if (col->required && !keys_only)
                return dead(a, out, TM_DL_MISSING_FIELD,
                            "%s: required, %s (column %s)",
                            shown_pointer(cfg->mapping.pointers[i]),
                            v->present ? "found null" : "missing", col->name);
            continue;
        }
        int c = convert_column(cv, i, v, val, a, out);
        if (c != 0)
            return c > 0 ? TM_CONV_DEAD_LETTER : TM_CONV_OOM;
    }
    out->values = vals;
    return TM_CONV_ROW;
}

static tm_conv_outcome convert_json(const tm_converter *cv, tm_arena *a,
                                    const tm_conv_input *in,
                                    tm_conv_result *out) {
    if (!in->value)
        return dead(a, out, TM_DL_PARSE_ERROR, "tombstone (null value)");
    /* One more than the pointers: found[ncolumns] is the filter's value,
     * absent when there is no filter. */
    tm_jvalue found_here[FOUND_ON_STACK + 1];
    tm_jvalue *found = found_here;
    size_t slots = cv->npointers + 1;
    if (slots > FOUND_ON_STACK + 1)
        found = tm_arena_scratch(a, slots * sizeof *found);
    tm_conv_outcome rc = TM_CONV_OOM;
    json_t *doc = NULL;
    if (found) {
        found[cv->npointers].present = 0;
        rc = find_values(cv, a, in, found, &doc, out);
        if (rc == TM_CONV_ROW)
            rc = convert_found(cv, a, found, 0, out);
    }
    json_decref(doc);
    return rc;
}

/* ---- change events ---- */

/* found[i] for the converter's pointer i into the event's row, each value
 * of a column through its field's logical type (cdc_logical.h); keep
 * holds the converted values. ROW, or a dead letter, or OOM. */
static tm_conv_outcome find_in_row(const tm_converter *cv, tm_arena *a,
                                   const tm_cdc_row *row, json_t *keep,
                                   tm_jvalue *found, tm_conv_result *out) {
    const tm_connector_config *cfg = cv->cfg;
    size_t n = cfg->mapping.ncolumns;
    for (size_t i = 0; i < cv->npointers; i++) {
        const tm_column *col = i < n ? &cfg->mapping.columns[i] : NULL;
        json_t *node = tm_json_pointer_resolve(&cv->pointers[i], row->row);
        if (col && row->op == TM_OP_DELETE && !col->key)
            node = NULL; /* a delete sets its key only */
        if (col && node && !json_is_null(node) && row->schema) {
            char why[DETAIL_MAX / 2];
            json_t *conv = NULL;
            const json_t *fs =
                tm_cdc_field_schema(row->schema, &cv->pointers[i]);
            int r = tm_cdc_logical(fs, node, col->type, &conv, why, sizeof why);
            if (r != 0)
                return r < 0 ? TM_CONV_OOM
                             : dead(a, out, TM_DL_SCHEMA_MISMATCH,
                                    "%s: %s (column %s)",
                                    shown_pointer(cfg->mapping.pointers[i]),
                                    why, col->name);
            if (json_array_append_new(keep, conv) != 0)
                return TM_CONV_OOM;
            node = conv;
        }
        tm_jvalue_from_node(node, &found[i]);
        if (col && col->key &&
            (!found[i].present || found[i].kind == JSON_NULL))
            return dead(a, out, TM_DL_NULL_KEY,
                        "%s: key column %s is %s: no row to %s by it",
                        shown_pointer(cfg->mapping.pointers[i]), col->name,
                        found[i].present ? "null" : "missing",
                        row->op == TM_OP_DELETE ? "delete" : "upsert");
    }
    return TM_CONV_ROW;
}

static tm_conv_outcome convert_cdc(const tm_converter *cv, tm_arena *a,
                                   const tm_conv_input *in,
                                   tm_conv_result *out) {
    json_error_t jerr;
    int oom = 0;
    json_t *doc = NULL;
    if (in->value && !(doc = parse(in, &jerr, &oom)))
        return oom ? TM_CONV_OOM
                   : dead(a, out, TM_DL_PARSE_ERROR,
                          "invalid JSON at line %d, column %d: %s", jerr.line,
                          jerr.column, jerr.text);
    tm_cdc_row row;
    tm_dl_reason reason = TM_DL_ENVELOPE;
    char why[DETAIL_MAX];
    /* A tombstone deletes its key's row: after its delete event it
     * changes nothing, and compaction may have left it alone. */
    int u = doc ? tm_cdc_unwrap(cv->cfg->mapping.format, doc, in->key,
                                in->key_len, &row, &reason, why, sizeof why)
                : tm_cdc_tombstone(in->key, in->key_len, &row, &reason, why,
                                   sizeof why);
    tm_conv_outcome rc = TM_CONV_OOM;
    json_t *keep = json_array();
    tm_jvalue *found = tm_arena_scratch(a, (cv->npointers + 1) * sizeof *found);
    if (u > 0) {
        rc = dead(a, out, reason, "%s", why);
    } else if (u == 0 && keep && found) {
        found[cv->npointers].present = 0;
        rc = find_in_row(cv, a, &row, keep, found, out);
        if (rc == TM_CONV_ROW)
            rc = convert_found(cv, a, found, row.op == TM_OP_DELETE, out);
        out->op = row.op;
    }
    if (u == 0)
        tm_cdc_row_clear(&row);
    json_decref(keep);
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
    out->op = TM_OP_UPSERT;
    if (cv->cfg->mapping.mode == TM_MAPPING_RAW)
        return convert_raw(cv, a, in, out);
    if (cv->cfg->mapping.format != TM_FORMAT_PLAIN)
        return convert_cdc(cv, a, in, out);
    return convert_json(cv, a, in, out);
}
