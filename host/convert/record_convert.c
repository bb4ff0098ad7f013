/* json mode: find the values at the pointers (the streaming extractor, or
 * jansson's tree), filter, then the columns in their order; the first
 * failure makes the dead letter, so its detail names one pointer and one
 * column. raw mode: the seven fixed columns, never a failure. */
#include "convert/record_convert.h"

#include <tidemark/columns.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/cdc_columns.h"
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
    /* A mapping without a column list: what the events' schemas taught
     * it, held aside (the converter's configuration never changes, and
     * tm_convert takes it const). */
    struct schema_state *ss;
};

/* The columns the schemas of the events that converted gave so far,
 * their compiled pointers (ncompiled of them, then the filter's), and the
 * last row schema and key names that gave them (an event with the same
 * ones needs no diff). rows: an upsert converted under them in this
 * process (until then only deletes did, which carry the key alone: a
 * column added is as its schema says, cdc_columns.h). */
typedef struct schema_state {
    tm_cdc_colset cols;
    tm_json_pointer *compiled;
    size_t ncompiled;
    json_t *seen_schema, *seen_keys;
    int rows;
    uint64_t taught; /* events converted, less those unlearnt */
} schema_state;

static void clear_compiled(const tm_converter *cv) {
    schema_state *ss = cv->ss;
    size_t n = ss->ncompiled + (cv->cfg->mapping.filter.op != TM_FILTER_NONE);
    for (size_t i = 0; ss->compiled && i < n; i++)
        tm_json_pointer_clear(&ss->compiled[i]);
    free(ss->compiled);
    ss->compiled = NULL;
    ss->ncompiled = 0;
}

void tm_converter_free(tm_converter *cv) {
    if (!cv)
        return;
    tm_json_plan_free(cv->plan);
    for (size_t i = 0; cv->pointers && i < cv->npointers; i++)
        tm_json_pointer_clear(&cv->pointers[i]);
    free(cv->pointers);
    if (cv->ss) {
        clear_compiled(cv);
        tm_cdc_colset_clear(&cv->ss->cols);
        json_decref(cv->ss->seen_schema);
        json_decref(cv->ss->seen_keys);
        free(cv->ss);
    }
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
    if (cfg->mapping.from_schema && !(cv->ss = calloc(1, sizeof *cv->ss)))
        goto fail;
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

/* The columns a record converts to, and their compiled pointers (then
 * the filter's, at index n): the config's, or (a mapping without a column
 * list) those the events' schemas gave so far. */
typedef struct col_view {
    const tm_column *columns;
    char *const *texts; /* the pointers as written, for details */
    const tm_json_pointer *pointers;
    size_t n, npointers;
} col_view;

static col_view config_view(const tm_converter *cv) {
    col_view v = {cv->cfg->mapping.columns, cv->cfg->mapping.pointers,
                  cv->pointers, cv->cfg->mapping.ncolumns, cv->npointers};
    return v;
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
static int convert_column(const col_view *cols, size_t i, const tm_jvalue *v,
                          tm_value *val, tm_arena *a, tm_conv_result *out) {
    const tm_column *col = &cols->columns[i];
    int rc = tm_value_from_json(v, col->type, a, val);
    if (rc <= 0)
        return rc;
    char found[TM_FOUND_MAX + 64];
    if (tm_jvalue_describe(v, a, found, sizeof found) != 0)
        return -1;
    const char *expected = col->type == TM_TYPE_TIMESTAMP
                               ? "timestamp (RFC 3339 text or epoch "
                                 "milliseconds)"
                               : tm_type_name(col->type);
    return dead(a, out, TM_DL_TYPE_MISMATCH,
                "%s: expected %s, found %s (column %s)",
                shown_pointer(cols->texts[i]), expected ? expected : "?", found,
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
static tm_conv_outcome convert_found(const tm_converter *cv,
                                     const col_view *cols, tm_arena *a,
                                     const tm_jvalue *found, int keys_only,
                                     tm_conv_result *out) {
    size_t n = cols->n;
    int keep = filter_keeps(cv, &found[n], a);
    if (keep <= 0)
        return keep == 0 ? TM_CONV_FILTERED : TM_CONV_OOM;
    tm_value *vals = tm_arena_alloc(a, n * sizeof *vals);
    if (!vals)
        return TM_CONV_OOM;
    memset(vals, 0, n * sizeof *vals);
    for (size_t i = 0; i < n; i++) {
        const tm_column *col = &cols->columns[i];
        const tm_jvalue *v = &found[i];
        tm_value *val = &vals[i];
        val->struct_size = (uint32_t)sizeof(tm_value);
        if (!v->present || v->kind == JSON_NULL) {
            val->is_null = 1;
            if (col->required && !keys_only)
                return dead(a, out, TM_DL_MISSING_FIELD,
                            "%s: required, %s (column %s)",
                            shown_pointer(cols->texts[i]),
                            v->present ? "found null" : "missing", col->name);
            continue;
        }
        int c = convert_column(cols, i, v, val, a, out);
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
        if (rc == TM_CONV_ROW) {
            col_view cols = config_view(cv);
            rc = convert_found(cv, &cols, a, found, 0, out);
        }
    }
    json_decref(doc);
    return rc;
}

/* ---- change events ---- */

/* found[i] for the converter's pointer i into the event's row, each value
 * of a column through its field's logical type (cdc_logical.h); keep
 * holds the converted values. ROW, or a dead letter, or OOM. */
static tm_conv_outcome find_in_row(const col_view *cols, tm_arena *a,
                                   const tm_cdc_row *row, json_t *keep,
                                   tm_jvalue *found, tm_conv_result *out) {
    size_t n = cols->n;
    for (size_t i = 0; i < cols->npointers; i++) {
        const tm_column *col = i < n ? &cols->columns[i] : NULL;
        json_t *node = tm_json_pointer_resolve(&cols->pointers[i], row->row);
        if (col && row->op == TM_OP_DELETE && !col->key)
            node = NULL; /* a delete sets its key only */
        if (col && node && !json_is_null(node) && row->schema) {
            char why[DETAIL_MAX / 2];
            json_t *conv = NULL;
            const json_t *fs =
                tm_cdc_field_schema(row->schema, &cols->pointers[i]);
            int r = tm_cdc_logical(fs, node, col->type, &conv, why, sizeof why);
            if (r != 0)
                return r < 0 ? TM_CONV_OOM
                             : dead(a, out, TM_DL_SCHEMA_MISMATCH,
                                    "%s: %s (column %s)",
                                    shown_pointer(cols->texts[i]), why,
                                    col->name);
            if (json_array_append_new(keep, conv) != 0)
                return TM_CONV_OOM;
            node = conv;
        }
        tm_jvalue_from_node(node, &found[i]);
        if (col && col->key &&
            (!found[i].present || found[i].kind == JSON_NULL))
            return dead(a, out, TM_DL_NULL_KEY,
                        "%s: key column %s is %s: no row to %s by it",
                        shown_pointer(cols->texts[i]), col->name,
                        found[i].present ? "null" : "missing",
                        row->op == TM_OP_DELETE ? "delete" : "upsert");
    }
    return TM_CONV_ROW;
}

/* ---- columns from the events' schemas ---- */

/* Compiles the pointers of cv->ss->cols, then the filter's, when the columns
 * grew since. 0, or -1 OOM (left uncompiled: tried again next time). */
static int compile_columns(const tm_converter *cv) {
    if (cv->ss->compiled && cv->ss->ncompiled == cv->ss->cols.ncolumns)
        return 0;
    clear_compiled(cv);
    const tm_filter *f = &cv->cfg->mapping.filter;
    size_t n = cv->ss->cols.ncolumns, all = n + (f->op != TM_FILTER_NONE);
    tm_json_pointer *p = calloc(all ? all : 1, sizeof *p);
    size_t done = 0;
    while (p && done < all &&
           tm_json_pointer_compile(done < n ? cv->ss->cols.pointers[done]
                                            : f->pointer,
                                   &p[done]) == 0)
        done++;
    if (!p || done < all) {
        for (size_t i = 0; p && i < done; i++)
            tm_json_pointer_clear(&p[i]);
        free(p);
        return -1;
    }
    cv->ss->compiled = p;
    cv->ss->ncompiled = n;
    return 0;
}

/* The names of the record key's fields, as the members of *names (a new
 * object): the key envelope's schema fields, else the members of a bare
 * JSON object. 0; 1 none (no key, not JSON, no fields); -1 OOM. */
static int key_names(const void *key, size_t len, json_t **names) {
    *names = NULL;
    if (!key)
        return 1;
    json_error_t e;
    json_t *doc = json_loadb(key, len, JSON_DECODE_ANY, &e);
    if (!doc)
        return json_error_code(&e) == json_error_out_of_memory ? -1 : 1;
    json_t *out = json_object(), *v;
    const json_t *schema = json_object_get(doc, "schema");
    int rc = out ? 0 : -1;
    const char *name;
    size_t i;
    if (out && json_is_object(schema) && json_object_size(doc) == 2 &&
        json_object_get(doc, "payload")) {
        json_array_foreach(json_object_get(schema, "fields"), i, v) {
            name = json_string_value(json_object_get(v, "field"));
            if (name && json_object_set_new(out, name, json_true()) != 0)
                rc = -1;
        }
    } else if (out && json_is_object(doc)) {
        json_object_foreach(doc, name, v) {
            if (json_object_set_new(out, name, json_true()) != 0)
                rc = -1;
        }
    }
    json_decref(doc);
    if (rc == 0 && json_object_size(out) == 0)
        rc = 1;
    if (rc != 0) {
        json_decref(out);
        return rc;
    }
    *names = out;
    return 0;
}

static tm_conv_outcome stop(tm_arena *a, tm_conv_result *out, const char *why) {
    out->detail = tm_arena_strdup(a, why);
    out->values = NULL;
    return out->detail ? TM_CONV_STOP : TM_CONV_OOM;
}

/* The event's columns against those so far (cdc_columns.h): new ones
 * added, an unsafe change a STOP. keys: the key's field names (taken). */
static tm_conv_outcome evolve(const tm_converter *cv, tm_arena *a,
                              const tm_cdc_row *row, json_t *keys,
                              tm_conv_result *out) {
    tm_cdc_colset ev;
    char why[DETAIL_MAX / 2];
    int d = tm_cdc_columns_derive(row->schema, keys, &ev, why, sizeof why);
    if (d != 0) {
        json_decref(keys);
        return d < 0 ? TM_CONV_OOM
                     : dead(a, out, TM_DL_SCHEMA_MISMATCH, "%s", why);
    }
    tm_conv_outcome rc = TM_CONV_ROW;
    size_t *added = malloc(ev.ncolumns * sizeof *added), nadded = 0;
    if (!added) {
        rc = TM_CONV_OOM;
    } else if (cv->ss->cols.ncolumns == 0) {
        cv->ss->cols = ev; /* the first event's: the table's columns */
        memset(&ev, 0, sizeof ev);
    } else {
        switch (tm_cdc_columns_diff(&cv->ss->cols, &ev, added, &nadded, why,
                                    sizeof why)) {
        case TM_CDC_SAME: break;
        case TM_CDC_ADDED:
            if (tm_cdc_columns_append(&cv->ss->cols, &ev, added, nadded,
                                      cv->ss->rows) != 0)
                rc = TM_CONV_OOM;
            break;
        case TM_CDC_UNSAFE: rc = stop(a, out, why); break;
        }
    }
    free(added);
    tm_cdc_colset_clear(&ev);
    if (rc == TM_CONV_ROW) {
        json_decref(cv->ss->seen_schema);
        json_decref(cv->ss->seen_keys);
        cv->ss->seen_schema = json_incref((json_t *)row->schema);
        cv->ss->seen_keys = keys;
    } else {
        json_decref(keys);
    }
    return rc;
}

/* A delete whose row is its record key (a tombstone, a delete without its
 * before image) with columns learnt: the key's fields must be the key
 * columns; a bare key (no schema of its own) converts by the last event
 * schema's fields (a Date key is days, not epoch milliseconds). */
static tm_conv_outcome key_delete(const tm_converter *cv, tm_arena *a,
                                  tm_cdc_row *row, tm_conv_result *out) {
    char why[DETAIL_MAX / 2];
    if (tm_cdc_columns_key_match(&cv->ss->cols, row->row, why, sizeof why))
        return dead(a, out, TM_DL_SCHEMA_MISMATCH, "%s", why);
    if (!row->schema)
        row->schema = cv->ss->seen_schema;
    return TM_CONV_ROW;
}

/* A tombstone of a bare key read before any event gave the columns: its
 * key's fields are the columns (cdc_columns.h), typed by their JSON; the
 * next event with a schema is compared with them as with any columns. */
static tm_conv_outcome learn_from_key(const tm_converter *cv, tm_arena *a,
                                      const tm_cdc_row *row,
                                      tm_conv_result *out) {
    char why[DETAIL_MAX / 2];
    int d = tm_cdc_columns_from_key(row->row, &cv->ss->cols, why, sizeof why);
    if (d != 0)
        return d < 0 ? TM_CONV_OOM
                     : dead(a, out, TM_DL_SCHEMA_MISMATCH, "%s", why);
    return TM_CONV_ROW;
}

/* The columns for the event in row, from its schema: ROW when cv->ss->cols
 * (compiled) are ready for it; else a dead letter, a STOP or OOM. */
static tm_conv_outcome schema_columns(const tm_converter *cv, tm_arena *a,
                                      tm_cdc_row *row, const tm_conv_input *in,
                                      tm_conv_result *out) {
    /* A tombstone has no schema: its key, bare, may have none either. */
    int key_row = row->op == TM_OP_DELETE && row->key_doc;
    if (!row->schema && !(key_row && !in->value))
        return dead(a, out, TM_DL_SCHEMA_MISMATCH,
                    "the event has no schema, and the mapping has no column "
                    "list to read it by: send the schema (JsonConverter "
                    "schemas.enable=true) or list the columns");
    tm_conv_outcome rc = TM_CONV_ROW;
    if (key_row && cv->ss->cols.ncolumns > 0) {
        rc = key_delete(cv, a, row, out);
    } else if (!row->schema) {
        rc = learn_from_key(cv, a, row, out);
    } else if (row->op != TM_OP_DELETE || cv->ss->cols.ncolumns == 0) {
        /* A delete sets only its key columns: its image (a "before" of
         * the key only, the record key) may lack the others. */
        json_t *keys = NULL;
        int k = key_names(in->key, in->key_len, &keys);
        if (k != 0)
            return k < 0 ? TM_CONV_OOM
                         : dead(a, out, TM_DL_NULL_KEY,
                                "the record key is not a JSON object with "
                                "fields (enveloped or not): with columns "
                                "from the event's schema, the key columns "
                                "are the key's fields");
        if (cv->ss->seen_schema &&
            json_equal(cv->ss->seen_schema, row->schema) &&
            json_equal(cv->ss->seen_keys, keys))
            json_decref(keys);
        else
            rc = evolve(cv, a, row, keys, out);
    }
    if (rc == TM_CONV_ROW && compile_columns(cv) != 0)
        rc = TM_CONV_OOM;
    return rc;
}

/* What an event's schema_columns may change, taken before it: an event
 * that does not convert to a row (a dead letter, filtered, a stop) leaves
 * the columns as they were, so that a schema its own payload contradicts
 * never becomes the table's. */
typedef struct schema_mark {
    size_t ncolumns;
    json_t *seen_schema, *seen_keys; /* references of their own */
    int rows;
    uint64_t taught;
} schema_mark;

static schema_mark mark_take(const schema_state *ss) {
    schema_mark m = {ss->cols.ncolumns, json_incref(ss->seen_schema),
                     json_incref(ss->seen_keys), ss->rows, ss->taught};
    return m;
}

/* The event converted (op its row's): what it taught stays. */
static void mark_commit(schema_state *ss, schema_mark *m, uint32_t op) {
    if (op != TM_OP_DELETE)
        ss->rows = 1;
    ss->taught++;
    json_decref(m->seen_schema);
    json_decref(m->seen_keys);
}

/* The event did not convert: the columns and the schema last seen back
 * to the mark (a batch's records were never widened by them: the batch
 * builder widens after a row only). */
static void mark_rollback(const tm_converter *cv, schema_mark *m) {
    schema_state *ss = cv->ss;
    if (ss->cols.ncolumns != m->ncolumns) {
        clear_compiled(cv);
        tm_cdc_columns_truncate(&ss->cols, m->ncolumns);
    }
    json_decref(ss->seen_schema);
    json_decref(ss->seen_keys);
    ss->seen_schema = m->seen_schema;
    ss->seen_keys = m->seen_keys;
}

struct tm_converter_mark {
    schema_mark m;
};

tm_converter_mark *tm_converter_mark_take(const tm_converter *cv) {
    tm_converter_mark *mk = cv->ss ? malloc(sizeof *mk) : NULL;
    if (mk)
        mk->m = mark_take(cv->ss);
    return mk;
}

void tm_converter_unlearn(const tm_converter *cv, const tm_converter_mark *mk) {
    if (!mk || mk->m.taught >= cv->ss->taught)
        return;
    /* references of its own, which mark_rollback takes */
    schema_mark m = {mk->m.ncolumns, json_incref(mk->m.seen_schema),
                     json_incref(mk->m.seen_keys), 0, 0};
    mark_rollback(cv, &m);
    cv->ss->rows = mk->m.rows;
    cv->ss->taught = mk->m.taught;
}

void tm_converter_mark_free(tm_converter_mark *mk) {
    if (!mk)
        return;
    json_decref(mk->m.seen_schema);
    json_decref(mk->m.seen_keys);
    free(mk);
}

const tm_column *tm_converter_columns(const tm_converter *cv, size_t *n) {
    if (!cv->cfg->mapping.from_schema) {
        *n = cv->cfg->mapping.ncolumns;
        return cv->cfg->mapping.columns;
    }
    *n = cv->ss->cols.ncolumns;
    return cv->ss->cols.columns;
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
    col_view cols = config_view(cv);
    int learns = u == 0 && cv->cfg->mapping.from_schema;
    schema_mark mark = {0, NULL, NULL, 0, 0};
    if (learns) {
        mark = mark_take(cv->ss);
        rc = schema_columns(cv, a, &row, in, out);
        col_view derived = {cv->ss->cols.columns, cv->ss->cols.pointers,
                            cv->ss->compiled, cv->ss->cols.ncolumns,
                            cv->ss->ncompiled + (cv->npointers > 0)};
        cols = derived;
    }
    tm_jvalue *found =
        tm_arena_scratch(a, (cols.npointers + 1) * sizeof *found);
    if (u > 0) {
        rc = dead(a, out, reason, "%s", why);
    } else if (u == 0 && (!keep || !found)) {
        rc = TM_CONV_OOM;
    } else if (u == 0 && (rc == TM_CONV_ROW || !cv->cfg->mapping.from_schema)) {
        found[cols.npointers].present = 0;
        rc = find_in_row(&cols, a, &row, keep, found, out);
        if (rc == TM_CONV_ROW)
            rc =
                convert_found(cv, &cols, a, found, row.op == TM_OP_DELETE, out);
        out->op = row.op;
    }
    if (learns && rc == TM_CONV_ROW)
        mark_commit(cv->ss, &mark, row.op);
    else if (learns)
        mark_rollback(cv, &mark);
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
