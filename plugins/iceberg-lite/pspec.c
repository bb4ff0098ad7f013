/* Partition specs and transforms (see pspec.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "avro_writer.h"
#include "maint.h"
#include "pspec.h"

static const char *const NAMES[] = {"identity", "bucket", "truncate", "year",
                                    "month",    "day",    "hour"};
/* The default partition field name's suffix (identity: the column). */
static const char *const SUFFIX[] = {"",       "_bucket", "_trunc", "_year",
                                     "_month", "_day",    "_hour"};

int ice_transform_parse(const char *s, ice_transform *t, int32_t *param,
                        char *why, size_t why_size) {
    *param = 0;
    for (int k = 0; k < (int)(sizeof NAMES / sizeof NAMES[0]); k++) {
        size_t n = strlen(NAMES[k]);
        if (strncmp(s, NAMES[k], n) != 0)
            continue;
        int takes = k == ICE_T_BUCKET || k == ICE_T_TRUNCATE;
        if (!takes && s[n] == '\0') {
            *t = (ice_transform)k;
            return 0;
        }
        if (!takes || s[n] != '[')
            continue;
        /* "bucket[N]": N decimal digits, 1 to ICE_TRANSFORM_PARAM_MAX. */
        const char *p = s + n + 1;
        int64_t v = 0;
        size_t digits = 0;
        while (isdigit((unsigned char)*p) && v <= ICE_TRANSFORM_PARAM_MAX) {
            v = v * 10 + (*p++ - '0');
            digits++;
        }
        if (digits == 0 || *p != ']' || p[1] != '\0' || v < 1 ||
            v > ICE_TRANSFORM_PARAM_MAX) {
            snprintf(why, why_size, "%s: %s must be an integer from 1 to %d", s,
                     k == ICE_T_BUCKET ? "N of bucket[N]" : "W of truncate[W]",
                     ICE_TRANSFORM_PARAM_MAX);
            return -1;
        }
        *t = (ice_transform)k;
        *param = (int32_t)v;
        return 0;
    }
    snprintf(why, why_size,
             "%s: not a transform (identity, bucket[N], truncate[W], year, "
             "month, day, hour)",
             s);
    return -1;
}

void ice_pfield_default_name(const char *column, ice_transform t, char *out,
                             size_t size) {
    snprintf(out, size, "%s%s", column, SUFFIX[t]);
}

/* Whether transform t applies to a column of kind k (spec, "Partition
 * Transforms", for the types this sink writes). */
static int applies(ice_transform t, pq_kind k) {
    switch (t) {
    case ICE_T_IDENTITY: return 1;
    case ICE_T_BUCKET:
        return k == PQ_INT64 || k == PQ_TIMESTAMP || k == PQ_STRING ||
               k == PQ_BINARY;
    case ICE_T_TRUNCATE:
        return k == PQ_INT64 || k == PQ_STRING || k == PQ_BINARY;
    case ICE_T_YEAR:
    case ICE_T_MONTH:
    case ICE_T_DAY:
    case ICE_T_HOUR: return k == PQ_TIMESTAMP;
    }
    return 0;
}

/* The Avro type of a transform's result (a union with null). */
static json_t *result_avro(ice_transform t, pq_kind k) {
    switch (t) {
    case ICE_T_BUCKET:
    case ICE_T_YEAR:
    case ICE_T_MONTH:
    case ICE_T_HOUR: return json_string("int");
    case ICE_T_DAY:
        return json_pack("{s:s, s:s}", "type", "int", "logicalType", "date");
    case ICE_T_IDENTITY:
    case ICE_T_TRUNCATE: break;
    }
    switch (k) {
    case PQ_BOOLEAN: return json_string("boolean");
    case PQ_INT64: return json_string("long");
    case PQ_DOUBLE: return json_string("double");
    case PQ_STRING: return json_string("string");
    case PQ_BINARY: return json_string("bytes");
    case PQ_TIMESTAMP:
        return json_pack("{s:s, s:s, s:b}", "type", "long", "logicalType",
                         "timestamp-micros", "adjust-to-utc", 1);
    }
    return NULL;
}

/* An Avro name for a partition field name (Avro names are
 * [A-Za-z_][A-Za-z0-9_]*): other bytes become "_x" and their hex, as
 * Iceberg's own writers do. Readers match the fields by field id. */
static void avro_name(const char *name, char *out, size_t size) {
    size_t o = 0;
    for (size_t i = 0; name[i] && o + 5 < size; i++) {
        unsigned char c = (unsigned char)name[i];
        int ok = c == '_' || isalpha(c) || (i > 0 && isdigit(c));
        if (ok)
            out[o++] = (char)c;
        else if (i == 0 && isdigit(c))
            o += (size_t)snprintf(out + o, size - o, "_%c", c);
        else
            o += (size_t)snprintf(out + o, size - o, "_x%02X", c);
    }
    out[o] = '\0';
}

static json_t *column_by_id(json_t *schema, int64_t id, size_t *index) {
    size_t i;
    json_t *f;
    json_array_foreach(schema, i, f) {
        if (ice_json_int(f, "id", -1) == id) {
            *index = i;
            return f;
        }
    }
    return NULL;
}

static int name_taken(json_t *fields, size_t upto, const char *name) {
    for (size_t j = 0; j < upto; j++) {
        const char *o = json_string_value(
            json_object_get(json_array_get(fields, j), "name"));
        if (o && strcmp(o, name) == 0)
            return 1;
    }
    return 0;
}

/* Checks field i of the spec and appends its Avro field to avro_fields. */
static int build_field(json_t *schema, json_t *fields, size_t i, ice_pfield *pf,
                       json_t *avro_fields, char *why, size_t why_size) {
    json_t *f = json_array_get(fields, i);
    const char *tr = json_string_value(json_object_get(f, "transform"));
    const char *name = json_string_value(json_object_get(f, "name"));
    int64_t source = ice_json_int(f, "source-id", -1);
    int64_t id = ice_json_int(f, "field-id", -1);
    char e[256];
    json_t *col = column_by_id(schema, source, &pf->col);
    const char *cname = json_string_value(json_object_get(col, "name"));
    const char *ctype = json_string_value(json_object_get(col, "type"));
    if (!tr || !name || !*name) {
        snprintf(why, why_size, "partition field %zu: no transform or name",
                 i + 1);
        return -1;
    }
    if (!col || !cname || !ctype || ice_type_kind(ctype, &pf->kind) != 0) {
        snprintf(why, why_size,
                 "partition field %zu (%s): source column %lld is not a "
                 "column of the schema",
                 i + 1, name, (long long)source);
        return -1;
    }
    if (ice_transform_parse(tr, &pf->transform, &pf->param, e, sizeof e) != 0) {
        snprintf(why, why_size, "partition field %zu (%s): %s", i + 1, name, e);
        return -1;
    }
    if (!applies(pf->transform, pf->kind)) {
        snprintf(why, why_size,
                 "partition field %zu: %s(%s): %s does not apply to a %s "
                 "column",
                 i + 1, tr, cname, NAMES[pf->transform], ctype);
        return -1;
    }
    if (id != ICE_PARTITION_FIRST_ID + (int64_t)i) {
        snprintf(why, why_size,
                 "partition field %zu (%s): field-id %lld, expected %lld",
                 i + 1, name, (long long)id,
                 (long long)(ICE_PARTITION_FIRST_ID + i));
        return -1;
    }
    size_t other;
    json_t *clash = NULL;
    json_array_foreach(schema, other, clash) {
        const char *n = json_string_value(json_object_get(clash, "name"));
        if (n && strcmp(n, name) == 0 &&
            !(pf->transform == ICE_T_IDENTITY && other == pf->col))
            break;
    }
    if (name_taken(fields, i, name) || other < json_array_size(schema)) {
        snprintf(why, why_size,
                 "partition field %zu: the name %s is taken (by another "
                 "partition field or a column)",
                 i + 1, name);
        return -1;
    }
    char an[512];
    avro_name(name, an, sizeof an);
    json_t *t = result_avro(pf->transform, pf->kind);
    json_t *af = t ? json_pack("{s:s, s:[s,o], s:n, s:I}", "name", an, "type",
                               "null", t, "default", "field-id", (json_int_t)id)
                   : NULL;
    if (!af || json_array_append_new(avro_fields, af) != 0) {
        snprintf(why, why_size, "out of memory (partition spec)");
        return -1;
    }
    return 0;
}

int ice_pspec_build(json_t *schema, json_t *fields, ice_pspec *spec, char *why,
                    size_t why_size) {
    memset(spec, 0, sizeof *spec);
    size_t n = json_array_size(fields);
    json_t *avro_fields = json_array();
    spec->f = calloc(n ? n : 1, sizeof *spec->f);
    int rc = avro_fields && spec->f ? 0 : -1;
    if (rc != 0)
        snprintf(why, why_size, "out of memory (partition spec)");
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = build_field(schema, fields, i, &spec->f[i], avro_fields, why,
                         why_size);
    json_t *rec = rc == 0 ? json_pack("{s:s, s:s, s:O}", "type", "record",
                                      "name", "r102", "fields", avro_fields)
                          : NULL;
    if (rc == 0) {
        spec->n = n;
        spec->avro = rec ? json_dumps(rec, JSON_COMPACT) : NULL;
        spec->spec_json = json_dumps(fields, JSON_COMPACT);
        if (!spec->avro || !spec->spec_json) {
            snprintf(why, why_size, "out of memory (partition spec)");
            rc = -1;
        }
    }
    json_decref(rec);
    json_decref(avro_fields);
    if (rc != 0)
        ice_pspec_free(spec);
    return rc;
}

int ice_pspec_from_meta(json_t *meta, ice_pspec *spec, char *why,
                        size_t why_size) {
    int64_t def = ice_json_int(meta, "default-spec-id", 0);
    json_t *specs = json_object_get(meta, "partition-specs"), *sp,
           *found = NULL;
    size_t i;
    json_array_foreach(specs, i, sp) {
        if (ice_json_int(sp, "spec-id", -1) == def)
            found = sp;
    }
    json_t *fields = json_object_get(found, "fields");
    json_t *schema = ice_schema_fields(meta);
    if (!json_is_array(fields) || !schema) {
        memset(spec, 0, sizeof *spec);
        snprintf(why, why_size,
                 "the table metadata has no partition spec %lld or no "
                 "current schema",
                 (long long)def);
        return -1;
    }
    return ice_pspec_build(schema, fields, spec, why, why_size);
}

void ice_pspec_free(ice_pspec *spec) {
    free(spec->f);
    free(spec->spec_json);
    free(spec->avro);
    memset(spec, 0, sizeof *spec);
}

/* ---- transforms ---- */

static uint32_t rotl32(uint32_t x, int r) {
    return (x << r) | (x >> (32 - r));
}

uint32_t ice_murmur3_32(const void *data, size_t len) {
    const uint8_t *p = data;
    const uint32_t c1 = 0xcc9e2d51u, c2 = 0x1b873593u;
    uint32_t h = 0, k;
    size_t blocks = len / 4;
    for (size_t i = 0; i < blocks; i++) {
        k = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
            (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
        h = rotl32(h, 13);
        h = h * 5 + 0xe6546b64u;
    }
    const uint8_t *tail = p + 4 * blocks;
    k = 0;
    switch (len & 3) {
    case 3: k ^= (uint32_t)tail[2] << 16; /* fall through */
    case 2: k ^= (uint32_t)tail[1] << 8;  /* fall through */
    case 1:
        k ^= tail[0];
        k *= c1;
        k = rotl32(k, 15);
        k *= c2;
        h ^= k;
    }
    h ^= (uint32_t)len;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

int32_t ice_bucket_bytes(const void *p, size_t len, int32_t n) {
    return (int32_t)((ice_murmur3_32(p, len) & 0x7fffffffu) % (uint32_t)n);
}

int32_t ice_bucket_long(int64_t v, int32_t n) {
    /* The single-value serialization of a long: 8 bytes, little-endian. */
    uint8_t b[8];
    uint64_t u = (uint64_t)v;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(u >> (8 * i));
    return ice_bucket_bytes(b, sizeof b, n);
}

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Year and month (1..12) of a day number since 1970-01-01 (proleptic
 * Gregorian). */
static void civil(int64_t days, int64_t *y, int *m) {
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* The first w code points of UTF-8 text: its byte length. */
static size_t utf8_prefix(const uint8_t *p, size_t n, int64_t w) {
    size_t i = 0;
    for (int64_t cp = 0; i < n && cp < w; cp++) {
        i++;
        while (i < n && (p[i] & 0xC0) == 0x80)
            i++;
    }
    return i;
}

#define US_PER_HOUR INT64_C(3600000000)
#define US_PER_DAY  (24 * US_PER_HOUR)

static void encode_value(const ice_pfield *f, const pq_cell *c, ib_buf *out) {
    int64_t y;
    int m;
    switch (f->transform) {
    case ICE_T_BUCKET:
        av_put_long(out, f->kind == PQ_STRING || f->kind == PQ_BINARY
                             ? ice_bucket_bytes(c->p, c->n, f->param)
                             : ice_bucket_long(c->i, f->param));
        return;
    case ICE_T_YEAR:
        civil(floor_div(c->i, US_PER_DAY), &y, &m);
        av_put_long(out, y - 1970);
        return;
    case ICE_T_MONTH:
        civil(floor_div(c->i, US_PER_DAY), &y, &m);
        av_put_long(out, (y - 1970) * 12 + (m - 1));
        return;
    case ICE_T_DAY: av_put_long(out, floor_div(c->i, US_PER_DAY)); return;
    case ICE_T_HOUR: av_put_long(out, floor_div(c->i, US_PER_HOUR)); return;
    case ICE_T_TRUNCATE:
        if (f->kind == PQ_INT64) {
            /* v - (v mod W), the remainder taken non-negative. */
            int64_t r = c->i % f->param;
            if (r < 0)
                r += f->param;
            av_put_long(out, (int64_t)((uint64_t)c->i - (uint64_t)r));
        } else {
            size_t n = f->kind == PQ_STRING ? utf8_prefix(c->p, c->n, f->param)
                       : c->n < (size_t)f->param ? c->n
                                                 : (size_t)f->param;
            av_put_bytes(out, c->p, n);
        }
        return;
    case ICE_T_IDENTITY: break;
    }
    switch (f->kind) {
    case PQ_BOOLEAN: av_put_bool(out, c->i != 0); break;
    case PQ_INT64:
    case PQ_TIMESTAMP: av_put_long(out, c->i); break;
    case PQ_DOUBLE: av_put_double(out, c->f); break;
    case PQ_STRING:
    case PQ_BINARY: av_put_bytes(out, c->p, c->n); break;
    }
}

void ice_partition_encode(const ice_pspec *spec, const pq_cell *cells,
                          ib_buf *out) {
    for (size_t i = 0; i < spec->n; i++) {
        const pq_cell *c = &cells[spec->f[i].col];
        av_put_branch(out, c->is_null ? 0 : 1);
        if (!c->is_null)
            encode_value(&spec->f[i], c, out);
    }
}
