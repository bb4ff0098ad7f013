/* The mapping as an Iceberg schema (field ids 1..n in mapping order, then
 * the hidden coordinate columns) and as the Parquet columns of the data
 * files, with the same field ids: readers match Parquet columns to the
 * table's columns by field id, not by name. Against an existing
 * table: schema_evolve.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ice_sink.h"

/* format/spec.md "Primitive Types"; json is text to Iceberg. */
static const char *iceberg_type(tm_type t) {
    switch (t) {
    case TM_TYPE_TEXT:
    case TM_TYPE_JSON: return "string";
    case TM_TYPE_INT: return "long";
    case TM_TYPE_FLOAT: return "double";
    case TM_TYPE_BOOL: return "boolean";
    case TM_TYPE_TIMESTAMP: return "timestamptz";
    case TM_TYPE_BYTES: return "binary";
    }
    return NULL;
}

static pq_kind parquet_kind(tm_type t) {
    switch (t) {
    case TM_TYPE_TEXT:
    case TM_TYPE_JSON: return PQ_STRING;
    case TM_TYPE_INT: return PQ_INT64;
    case TM_TYPE_FLOAT: return PQ_DOUBLE;
    case TM_TYPE_BOOL: return PQ_BOOLEAN;
    case TM_TYPE_TIMESTAMP: return PQ_TIMESTAMP;
    case TM_TYPE_BYTES: return PQ_BINARY;
    }
    return PQ_BINARY;
}

static const struct {
    const char *name, *type;
    pq_kind kind;
} HIDDEN[ICE_NHIDDEN] = {
    {ICE_HIDDEN_PREFIX "topic", "string", PQ_STRING},
    {ICE_HIDDEN_PREFIX "partition", "long", PQ_INT64},
    {ICE_HIDDEN_PREFIX "offset", "long", PQ_INT64},
};

void ice_schema_free(ice_sink *s) {
    free(s->cols);
    json_decref(s->fields);
    free(s->schema_json);
    s->cols = NULL;
    s->fields = NULL;
    s->schema_json = NULL;
}

tm_status ice_schema_build(ice_sink *s, tm_error *err) {
    const tm_sink_config *c = s->config;
    s->ncols = c->ncolumns + ICE_NHIDDEN;
    s->cols = calloc(s->ncols, sizeof *s->cols);
    s->fields = json_array();
    int bad = !s->cols || !s->fields;
    for (size_t i = 0; !bad && i < s->ncols; i++) {
        int32_t id = (int32_t)i + 1;
        const char *name, *type;
        int required;
        pq_kind kind;
        if (i < c->ncolumns) {
            const tm_column *col = TM_CELEM(tm_column, c->columns, i);
            name = col->name;
            type = iceberg_type(col->type);
            kind = parquet_kind(col->type);
            required = col->required != 0;
        } else {
            name = HIDDEN[i - c->ncolumns].name;
            type = HIDDEN[i - c->ncolumns].type;
            kind = HIDDEN[i - c->ncolumns].kind;
            required = 1;
        }
        s->cols[i] = (pq_column_def){name, kind, required, id};
        bad = json_array_append_new(s->fields,
                                    json_pack("{s:i, s:s, s:b, s:s}", "id", id,
                                              "name", name, "required",
                                              required, "type", type)) != 0;
    }
    json_t *schema = bad ? NULL
                         : json_pack("{s:s, s:i, s:O}", "type", "struct",
                                     "schema-id", 0, "fields", s->fields);
    s->schema_json = schema ? json_dumps(schema, JSON_COMPACT) : NULL;
    json_decref(schema);
    s->schema_id = 0;
    s->last_column_id = (int64_t)s->ncols;
    s->evolve = 0;
    if (!s->schema_json) {
        ice_schema_free(s);
        s->host->set_error(err, "out of memory (schema)");
        return TM_FATAL;
    }
    return TM_OK;
}
