/* The "partition" setting: a string, because a declared setting (ABI 1.3
 * tm_setting) is a string, integer, boolean or enum, and settings_fill
 * refuses any other key, so an array of objects cannot be declared or
 * read. It lists the spec's fields, comma-separated, each
 * "transform(column)" or a bare "column" (identity):
 *   "day(ts), bucket[16](id)"
 * It becomes the table's partition spec (pspec.h): field ids from 1000 in
 * that order, the spec's default names. A table whose spec differs is
 * refused: spec evolution is not supported. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ice_sink.h"
#include "maint.h"

#define SETTING_PATH "$.sink.settings.partition"

static void trim(const char **b, const char **e) {
    while (*b < *e && isspace((unsigned char)**b))
        (*b)++;
    while (*e > *b && isspace((unsigned char)(*e)[-1]))
        (*e)--;
}

static int64_t column_id(json_t *schema, const char *name) {
    size_t i;
    json_t *f;
    json_array_foreach(schema, i, f) {
        const char *n = json_string_value(json_object_get(f, "name"));
        if (n && strcmp(n, name) == 0)
            return ice_json_int(f, "id", -1);
    }
    return -1;
}

/* One field "transform(column)" or "column", item b..e (index i), into
 * the spec's fields. 0, or -1 with why. */
static int parse_item(json_t *schema, const char *b, const char *e, size_t i,
                      json_t *fields, char *why, size_t why_size) {
    char item[200], tr[64] = "identity", col[256];
    trim(&b, &e);
    snprintf(item, sizeof item, "%.*s", (int)(e - b > 199 ? 199 : e - b), b);
    const char *open = memchr(b, '(', (size_t)(e - b));
    const char *cb = b, *ce = e;
    if (open) {
        const char *tb = b, *te = open;
        trim(&tb, &te);
        if (e[-1] != ')' || te == tb || (size_t)(te - tb) >= sizeof tr) {
            snprintf(why, why_size,
                     "field %zu \"%s\": expected transform(column) or a "
                     "column name",
                     i + 1, item);
            return -1;
        }
        snprintf(tr, sizeof tr, "%.*s", (int)(te - tb), tb);
        cb = open + 1;
        ce = e - 1;
        trim(&cb, &ce);
    }
    ice_transform t;
    int32_t param;
    char e2[200];
    if (ce == cb || (size_t)(ce - cb) >= sizeof col) {
        snprintf(why, why_size, "field %zu \"%s\": no column name", i + 1,
                 item);
        return -1;
    }
    snprintf(col, sizeof col, "%.*s", (int)(ce - cb), cb);
    if (ice_transform_parse(tr, &t, &param, e2, sizeof e2) != 0) {
        snprintf(why, why_size, "field %zu \"%s\": %s", i + 1, item, e2);
        return -1;
    }
    int64_t id = column_id(schema, col);
    if (id < 0) {
        snprintf(why, why_size,
                 "field %zu \"%s\": no column \"%s\" in the mapping", i + 1,
                 item, col);
        return -1;
    }
    char name[600];
    ice_pfield_default_name(col, t, name, sizeof name);
    json_t *f =
        json_pack("{s:I, s:I, s:s, s:s}", "source-id", (json_int_t)id,
                  "field-id", (json_int_t)(ICE_PARTITION_FIRST_ID + (int64_t)i),
                  "name", name, "transform", tr);
    if (!f || json_array_append_new(fields, f) != 0) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    return 0;
}

tm_status ice_partition_build(ice_sink *s, tm_error *err) {
    const char *text = s->set.partition ? s->set.partition : "";
    char why[1024];
    int rc = 0;
    s->spec_fields = json_array();
    if (!s->spec_fields) {
        s->host->set_error(err, "out of memory");
        return TM_FATAL;
    }
    const char *b = text, *end = text + strlen(text);
    trim(&b, &end);
    for (size_t i = 0; rc == 0 && b < end; i++) {
        const char *comma = memchr(b, ',', (size_t)(end - b));
        const char *e = comma ? comma : end;
        rc = parse_item(s->fields, b, e, i, s->spec_fields, why, sizeof why);
        b = comma ? comma + 1 : end;
        if (rc == 0 && comma && b >= end) {
            snprintf(why, sizeof why, "a trailing comma");
            rc = -1;
        }
    }
    if (rc == 0)
        rc = ice_pspec_build(s->fields, s->spec_fields, &s->spec, why,
                             sizeof why);
    if (rc != 0) {
        s->host->set_error(err, "%s: %s", SETTING_PATH, why);
        return TM_INVALID;
    }
    return TM_OK;
}

/* "day(ts), bucket[16](id)" of spec fields, for messages. */
static void spec_text(json_t *fields, json_t *schema, char *out, size_t size) {
    size_t i, len = 0;
    json_t *f;
    snprintf(out, size, "unpartitioned");
    if (json_array_size(fields) > 0)
        len = (size_t)snprintf(out, size, "partitioned by ");
    json_array_foreach(fields, i, f) {
        const char *col = NULL;
        size_t k;
        json_t *c;
        json_array_foreach(schema, k, c) {
            if (json_equal(json_object_get(c, "id"),
                           json_object_get(f, "source-id")))
                col = json_string_value(json_object_get(c, "name"));
        }
        const char *tr = json_string_value(json_object_get(f, "transform"));
        int n = snprintf(out + len, size - len, "%s%s(%s)", i ? ", " : "",
                         tr ? tr : "?", col ? col : "?");
        if (n < 0 || (size_t)n >= size - len)
            break;
        len += (size_t)n;
    }
}

tm_status ice_partition_check(ice_sink *s, tm_error *err) {
    json_t *meta = s->table.meta, *sp, *have = NULL;
    int64_t def = ice_json_int(meta, "default-spec-id", 0);
    size_t i;
    json_array_foreach(json_object_get(meta, "partition-specs"), i, sp) {
        if (ice_json_int(sp, "spec-id", -1) == def)
            have = json_object_get(sp, "fields");
    }
    if (json_is_array(have) && json_equal(have, s->spec_fields))
        return TM_OK;
    char got[512], want[512];
    spec_text(have, ice_schema_fields(meta), got, sizeof got);
    spec_text(s->spec_fields, s->fields, want, sizeof want);
    s->host->set_error(err,
                       "%s: the table %s is %s; the setting says %s "
                       "(partition spec evolution is not supported: write "
                       "a new table)",
                       SETTING_PATH, s->set.path, got, want);
    return TM_INVALID;
}

void ice_partition_free(ice_sink *s) {
    json_decref(s->spec_fields);
    s->spec_fields = NULL;
    ice_pspec_free(&s->spec);
}
