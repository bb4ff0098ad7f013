/* The mapping against an existing table's current schema: the mapping's
 * columns take the table's field ids, by name, and the schema evolves
 * only the ways every reader can apply to the files written before
 * (format/spec.md "Schema Evolution"): an optional column added (old files
 * read null), int widened to long, float to double. Anything else is
 * refused, naming the mapping's JSON path. The evolved schema is added to
 * the table by the commit that writes the first batch under it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ice_sink.h"

/* Where the mapping's column I is, for messages: the hidden columns are
 * the sink's own, not the mapping's. */
static void col_path(const ice_sink *s, size_t i, char *out, size_t size) {
    if (i < s->config->ncolumns)
        snprintf(out, size, "$.mapping.columns[%zu]", i);
    else
        snprintf(out, size, "the sink's hidden column");
}

/* The table's current schema object, and the highest field id and schema
 * id any of its schemas ever used (a new id is past both: never reused). */
static json_t *table_schemas(json_t *meta, int64_t *max_field,
                             int64_t *max_schema) {
    int64_t cur = ice_json_int(meta, "current-schema-id", 0);
    json_t *found = NULL, *sc, *f;
    size_t i, k;
    *max_field = ice_json_int(meta, "last-column-id", 0);
    *max_schema = -1;
    json_array_foreach(json_object_get(meta, "schemas"), i, sc) {
        int64_t id = ice_json_int(sc, "schema-id", -1);
        if (id == cur)
            found = sc;
        if (id > *max_schema)
            *max_schema = id;
        json_array_foreach(json_object_get(sc, "fields"), k, f) {
            int64_t fid = ice_json_int(f, "id", 0);
            if (fid > *max_field)
                *max_field = fid;
        }
    }
    return found;
}

/* 0 when a column of Iceberg type HAVE can be read as WANT: the same type,
 * or a widening every reader applies to old files. */
static int promotable(const char *have, const char *want) {
    return strcmp(have, want) == 0 ||
                   (strcmp(have, "int") == 0 && strcmp(want, "long") == 0) ||
                   (strcmp(have, "float") == 0 && strcmp(want, "double") == 0)
               ? 0
               : -1;
}

/* The mapped column named NAME: its index in s->cols, or -1. */
static long col_index(const ice_sink *s, const char *name) {
    for (size_t i = 0; name && i < s->ncols; i++)
        if (strcmp(s->cols[i].name, name) == 0)
            return (long)i;
    return -1;
}

/* The partition field whose source is field id ID, for the message of a
 * dropped column ("" when none). */
static void source_note(json_t *meta, int64_t id, char *out, size_t size) {
    json_t *sp, *f;
    size_t i, k;
    out[0] = '\0';
    json_array_foreach(json_object_get(meta, "partition-specs"), i, sp) {
        json_array_foreach(json_object_get(sp, "fields"), k, f) {
            const char *name = json_string_value(json_object_get(f, "name"));
            if (ice_json_int(f, "source-id", -1) == id && !out[0])
                snprintf(out, size, "; it is the source of partition field %s",
                         name ? name : "(unnamed)");
        }
    }
}

/* A table column the mapping lacks: dropping (or renaming, a drop and an
 * add) is refused, because the table's rows and partition spec keep it. */
static tm_status refuse_drop(ice_sink *s, json_t *meta, json_t *f,
                             const long *match, tm_error *err) {
    const char *name = json_string_value(json_object_get(f, "name"));
    const char *type = json_string_value(json_object_get(f, "type"));
    int64_t id = ice_json_int(f, "id", -1);
    char note[300], renamed[300] = "";
    source_note(meta, id, note, sizeof note);
    /* A new column of the same type is likely the same one renamed. */
    for (size_t i = 0; i < s->config->ncolumns && !renamed[0]; i++) {
        const char *t = json_string_value(
            json_object_get(json_array_get(s->fields, i), "type"));
        if (match[i] < 0 && type && t && strcmp(type, t) == 0)
            snprintf(renamed, sizeof renamed,
                     "; $.mapping.columns[%zu] \"%s\" is new: a rename is a "
                     "drop and an add",
                     i, s->cols[i].name);
    }
    s->host->set_error(
        err,
        "$.mapping.columns: the table %s has column \"%s\" (%s, field id "
        "%lld), the mapping does not: dropping a column is not supported "
        "(the table's files and history keep it)%s%s",
        s->set.path, name ? name : "?", type ? type : "nested", (long long)id,
        renamed, note);
    return TM_INVALID;
}

/* Matches the table's fields to s->cols by name into match[] (the table
 * field each column is, -1 new) and checks each pair. */
static tm_status match_fields(ice_sink *s, json_t *meta, json_t *have,
                              long *match, int *widened, tm_error *err) {
    size_t i;
    json_t *f;
    char path[64];
    for (i = 0; i < s->ncols; i++)
        match[i] = -1;
    json_array_foreach(have, i, f) {
        long k = col_index(s, json_string_value(json_object_get(f, "name")));
        if (k >= 0 && match[k] < 0)
            match[k] = (long)i;
    }
    json_array_foreach(have, i, f) {
        long k = col_index(s, json_string_value(json_object_get(f, "name")));
        if (k < 0 || match[k] != (long)i)
            return refuse_drop(s, meta, f, match, err);
        json_t *mine = json_array_get(s->fields, (size_t)k);
        const char *ht = json_string_value(json_object_get(f, "type"));
        const char *wt = json_string_value(json_object_get(mine, "type"));
        col_path(s, (size_t)k, path, sizeof path);
        if (!ht || promotable(ht, wt) != 0) {
            s->host->set_error(
                err,
                "%s: column \"%s\" is %s in the table %s, the mapping makes "
                "it %s: only int to long and float to double widen (another "
                "or a narrower type would misread the rows written before)",
                path, s->cols[k].name, ht ? ht : "nested", s->set.path, wt);
            return TM_INVALID;
        }
        *widened |= strcmp(ht, wt) != 0;
        int req = json_is_true(json_object_get(f, "required"));
        if (req != s->cols[k].required) {
            s->host->set_error(
                err,
                "%s: column \"%s\" is %s in the table %s, the mapping says "
                "%s: changing whether a column is required is not supported",
                path, s->cols[k].name, req ? "required" : "optional",
                s->set.path, req ? "optional" : "required");
            return TM_INVALID;
        }
    }
    for (i = 0; i < s->ncols; i++) {
        col_path(s, i, path, sizeof path);
        if (match[i] < 0 && s->cols[i].required) {
            s->host->set_error(
                err,
                "%s: column \"%s\" is new to the table %s and required: a "
                "new column must be optional (the rows written before have "
                "no value for it)",
                path, s->cols[i].name, s->set.path);
            return TM_INVALID;
        }
    }
    return TM_OK;
}

/* Sets the field ids of s->cols and s->fields: the table's for matched
 * columns, new ones past *last for the others. *moved: one changed. */
static int assign_ids(ice_sink *s, json_t *have, const long *match,
                      int64_t *last, int *moved) {
    for (size_t i = 0; i < s->ncols; i++) {
        int64_t id =
            match[i] >= 0
                ? ice_json_int(json_array_get(have, (size_t)match[i]), "id", -1)
                : ++*last;
        if (id <= 0 || id > INT32_MAX)
            return -1;
        *moved |= s->cols[i].field_id != (int32_t)id;
        s->cols[i].field_id = (int32_t)id;
        if (json_object_set_new(json_array_get(s->fields, i), "id",
                                json_integer(id)) != 0)
            return -1;
    }
    return 0;
}

tm_status ice_schema_reconcile(ice_sink *s, int *moved, tm_error *err) {
    json_t *meta = s->table.meta;
    int64_t last, max_schema;
    json_t *cur = table_schemas(meta, &last, &max_schema);
    json_t *have = json_object_get(cur, "fields");
    int widened = 0, changed = 0;
    if (!json_is_array(have)) {
        s->host->set_error(
            err,
            "setting \"path\": the table %s has no current "
            "schema (current-schema-id %lld)",
            s->set.path, (long long)ice_json_int(meta, "current-schema-id", 0));
        return TM_INVALID;
    }
    long *match = calloc(s->ncols, sizeof *match);
    if (!match) {
        s->host->set_error(err, "out of memory (schema)");
        return TM_RETRY;
    }
    tm_status r = match_fields(s, meta, have, match, &widened, err);
    size_t added = 0;
    for (size_t i = 0; i < s->ncols; i++)
        added += match[i] < 0;
    if (r == TM_OK && assign_ids(s, have, match, &last, &changed) != 0) {
        s->host->set_error(err, "the table %s: a field id out of range",
                           s->set.path);
        r = TM_INVALID;
    }
    free(match);
    if (r != TM_OK)
        return r;
    s->evolve = added > 0 || widened;
    s->last_column_id = last;
    s->schema_id =
        s->evolve ? max_schema + 1 : ice_json_int(cur, "schema-id", 0);
    /* Unchanged: the table's own schema text (its field order may differ
     * from the mapping's; readers match by id). */
    json_t *schema =
        s->evolve ? json_pack("{s:s, s:I, s:O}", "type", "struct", "schema-id",
                              (json_int_t)s->schema_id, "fields", s->fields)
                  : json_incref(cur);
    char *text = schema ? json_dumps(schema, JSON_COMPACT) : NULL;
    json_decref(schema);
    if (!text) {
        s->host->set_error(err, "out of memory (schema)");
        return TM_RETRY;
    }
    free(s->schema_json);
    s->schema_json = text;
    if (changed) {
        /* The spec's source ids are the table's: parsed again on them. */
        ice_partition_free(s);
        r = ice_partition_build(s, err);
    }
    if (moved)
        *moved = changed;
    return r;
}

tm_status ice_schema_check(ice_sink *s, tm_error *err) {
    return ice_schema_reconcile(s, NULL, err);
}

int ice_schema_put(const ice_sink *s, json_t *next) {
    if (!s->evolve)
        return 0;
    json_t *schemas = json_object_get(next, "schemas");
    int64_t last = ice_json_int(next, "last-column-id", 0);
    if (!json_is_array(schemas))
        return -1;
    json_t *schema = json_pack("{s:s, s:I, s:O}", "type", "struct", "schema-id",
                               (json_int_t)s->schema_id, "fields", s->fields);
    /* The copy: later commits of this sink change s->fields' ids in
     * place. */
    json_t *copy = schema ? json_deep_copy(schema) : NULL;
    json_decref(schema);
    if (json_array_append_new(schemas, copy) != 0)
        return -1;
    return json_object_set_new(next, "current-schema-id",
                               json_integer(s->schema_id)) != 0 ||
                   json_object_set_new(next, "last-column-id",
                                       json_integer(s->last_column_id > last
                                                        ? s->last_column_id
                                                        : last)) != 0
               ? -1
               : 0;
}
