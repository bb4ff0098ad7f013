/* Unwrapping in three steps: the Connect envelope (when there is one:
 * required by format "connect", optional for "debezium"), then the
 * Debezium event (op, before/after) or the flattened row, then the
 * payload checked against its schema, so that a value converted later is
 * one its schema vouches for. */
#include "convert/cdc_envelope.h"

#include <stdio.h>
#include <string.h>

#include "convert/cdc_logical.h"

void tm_cdc_row_clear(tm_cdc_row *r) {
    json_decref(r->row);
    json_decref(r->key_doc);
    memset(r, 0, sizeof *r);
}

/* {"schema": {...}, "payload": ...} with nothing else. */
static int is_connect_envelope(const json_t *doc) {
    return json_is_object(doc) && json_object_size(doc) == 2 &&
           json_is_object(json_object_get(doc, "schema")) &&
           json_object_get(doc, "payload");
}

static const json_t *struct_field(const json_t *schema, const char *name) {
    const json_t *fields = json_object_get(schema, "fields"), *f;
    size_t i;
    json_array_foreach(fields, i, f) {
        const char *fn = json_string_value(json_object_get(f, "field"));
        if (fn && strcmp(fn, name) == 0)
            return f;
    }
    return NULL;
}

/* ExtractNewRecordState's marks: "__deleted" "true" (delete.handling
 * rewrite) or "__op" "d" (add.fields op). */
static uint32_t flattened_op(const json_t *row) {
    const json_t *del = json_object_get(row, "__deleted");
    const char *op = json_string_value(json_object_get(row, "__op"));
    if (json_is_true(del) ||
        (json_is_string(del) && strcmp(json_string_value(del), "true") == 0) ||
        (op && strcmp(op, "d") == 0))
        return TM_OP_DELETE;
    return TM_OP_UPSERT;
}

static int is_flattened(const json_t *ev) {
    return json_object_get(ev, "__deleted") || json_object_get(ev, "__op");
}

/* The record key as a row: its JSON, out of the Connect envelope. Its
 * fields convert by their logical types (a Date key is days, not epoch
 * milliseconds): by the key envelope's own schema, checked against its
 * payload, else by row_schema (the event's "before" schema: Debezium's
 * key fields are the row's columns), else as plain JSON like any value
 * without a schema. 0, 1 none (no key, not a JSON object: *reason
 * TM_DL_NULL_KEY) or a key breaking its schema (why set), -1 OOM. */
static int key_row(const void *key, size_t key_len, const json_t *row_schema,
                   tm_cdc_row *out, tm_dl_reason *reason, char *why, size_t n) {
    if (!key)
        return 1;
    json_error_t e;
    out->key_doc = json_loadb(key, key_len, JSON_DECODE_ANY, &e);
    if (!out->key_doc && json_error_code(&e) == json_error_out_of_memory)
        return -1; /* not the record's fault: no dead letter */
    json_t *k = out->key_doc;
    const json_t *schema = row_schema;
    if (is_connect_envelope(k)) {
        schema = json_object_get(k, "schema");
        k = json_object_get(k, "payload");
        if (json_is_object(k) &&
            tm_cdc_schema_check(schema, k, "/key/payload", why, n) != 0) {
            *reason = TM_DL_SCHEMA_MISMATCH;
            return 1;
        }
    }
    if (!json_is_object(k))
        return 1;
    out->row = json_incref(k);
    out->schema = schema;
    return 0;
}

/* A delete's before image without the value of a key field (null or
 * missing: a replica identity without the key, say) takes it from the
 * record key, a JSON object (enveloped or not) of the key fields; a key
 * that is none leaves before as it is. 0, or -1 OOM. */
static int fill_key(json_t *before, const void *key, size_t key_len) {
    if (!key)
        return 0;
    json_error_t e;
    json_t *doc = json_loadb(key, key_len, JSON_DECODE_ANY, &e);
    if (!doc)
        return json_error_code(&e) == json_error_out_of_memory ? -1 : 0;
    json_t *k =
        is_connect_envelope(doc) ? json_object_get(doc, "payload") : doc;
    const char *name;
    json_t *v;
    int rc = 0;
    if (json_is_object(k))
        json_object_foreach(k, name, v) {
            const json_t *have = json_object_get(before, name);
            if ((!have || json_is_null(have)) && !json_is_null(v) &&
                json_object_set(before, name, v) != 0)
                rc = -1;
        }
    json_decref(doc);
    return rc;
}

/* A Debezium change event ev (schema: the event's struct schema or
 * NULL). */
static int debezium_event(json_t *ev, const json_t *schema, const void *key,
                          size_t key_len, tm_cdc_row *out, tm_dl_reason *reason,
                          char *why, size_t n) {
    const char *op = json_string_value(json_object_get(ev, "op"));
    *reason = TM_DL_ENVELOPE;
    if (!op) {
        snprintf(why, n,
                 "/op: expected a Debezium change event (\"op\" one of c, "
                 "r, u, d with \"before\"/\"after\") or a flattened row "
                 "(\"__deleted\" or \"__op\")");
        return 1;
    }
    const char *image;
    if (strcmp(op, "c") == 0 || strcmp(op, "r") == 0 || strcmp(op, "u") == 0) {
        out->op = TM_OP_UPSERT;
        image = "after";
    } else if (strcmp(op, "d") == 0) {
        out->op = TM_OP_DELETE;
        image = "before";
    } else {
        snprintf(why, n,
                 "/op: expected one of \"c\", \"r\", \"u\", \"d\", "
                 "found \"%.20s\"",
                 op);
        return 1;
    }
    json_t *row = json_object_get(ev, image);
    if (!json_is_object(row) && out->op == TM_OP_DELETE) {
        *reason = TM_DL_NULL_KEY;
        int k = key_row(key, key_len,
                        schema ? struct_field(schema, "before") : NULL, out,
                        reason, why, n);
        if (k <= 0 || *reason != TM_DL_NULL_KEY)
            return k;
        snprintf(why, n,
                 "/before: a delete without the row's before image "
                 "nor a JSON record key: no key to delete by");
        return 1;
    }
    if (!json_is_object(row)) {
        snprintf(why, n, "/%s: expected an object (the row), op \"%s\"", image,
                 op);
        return 1;
    }
    if (out->op == TM_OP_DELETE && fill_key(row, key, key_len) != 0)
        return -1;
    out->row = json_incref(row);
    const json_t *f = schema ? struct_field(schema, image) : NULL;
    if (schema && !f) {
        *reason = TM_DL_SCHEMA_MISMATCH;
        snprintf(why, n, "/%s: in the payload, not in the schema", image);
        return 1;
    }
    out->schema = f;
    return 0;
}

int tm_cdc_tombstone(const void *key, size_t key_len, tm_cdc_row *out,
                     tm_dl_reason *reason, char *why, size_t n) {
    memset(out, 0, sizeof *out);
    out->op = TM_OP_DELETE;
    *reason = TM_DL_NULL_KEY;
    int k = key_row(key, key_len, NULL, out, reason, why, n);
    if (k == 1 && *reason == TM_DL_NULL_KEY)
        snprintf(why, n,
                 "a tombstone (null value) without a JSON object as its "
                 "record key: no key to delete by");
    if (k != 0)
        tm_cdc_row_clear(out);
    return k;
}

int tm_cdc_unwrap(tm_record_format f, json_t *doc, const void *key,
                  size_t key_len, tm_cdc_row *out, tm_dl_reason *reason,
                  char *why, size_t n) {
    memset(out, 0, sizeof *out);
    json_t *ev = doc;
    const json_t *schema = NULL;
    if (is_connect_envelope(doc)) {
        schema = json_object_get(doc, "schema");
        ev = json_object_get(doc, "payload");
        if (tm_cdc_schema_check(schema, ev, "/payload", why, n) != 0) {
            *reason = TM_DL_SCHEMA_MISMATCH;
            return 1;
        }
    } else if (f == TM_FORMAT_CONNECT) {
        *reason = TM_DL_ENVELOPE;
        snprintf(why, n,
                 "expected the Connect envelope {\"schema\": {...}, "
                 "\"payload\": ...} and nothing else");
        return 1;
    }
    if (!json_is_object(ev)) {
        *reason = TM_DL_ENVELOPE;
        snprintf(why, n, "%s: expected an object",
                 schema ? "/payload" : "\"\"");
        return 1;
    }
    int rc;
    if (f == TM_FORMAT_DEBEZIUM && !is_flattened(ev)) {
        rc = debezium_event(ev, schema, key, key_len, out, reason, why, n);
    } else {
        out->op = flattened_op(ev);
        out->row = json_incref(ev);
        out->schema = schema;
        rc = 0;
    }
    if (rc != 0)
        tm_cdc_row_clear(out);
    return rc;
}
