/* Connect schemas and logical types. Decimal: base64 of the big-endian
 * two's-complement unscaled integer, with parameters.scale: its decimal
 * text ("-12.345") for text columns, that number for float columns, an
 * integer for int columns when the scale is 0. Dates and times: to
 * microseconds, then RFC 3339 text (timestamp.h), which timestamp and
 * text columns read; zoned texts go as they are. Other column types take
 * the payload's value as it is. */
#include "convert/cdc_logical.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/timestamp.h"

#define DECIMAL_MAX_BYTES 64 /* 154 digits: more than any database keeps */

static const char *schema_type(const json_t *schema) {
    const char *t = json_string_value(json_object_get(schema, "type"));
    return t ? t : "";
}

/* Whether the payload's JSON kind is what the Connect type carries.
 * JsonConverter's schemas name FLOAT32 "float" and FLOAT64 "double" (its
 * JsonSchema constants), not Connect's enum names float32/float64, which
 * are accepted too. */
static int kind_fits(const char *type, const json_t *v) {
    if (strncmp(type, "int", 3) == 0)
        return json_is_integer(v);
    if (strncmp(type, "float", 5) == 0 || strcmp(type, "double") == 0)
        return json_is_number(v);
    if (strcmp(type, "boolean") == 0)
        return json_is_boolean(v);
    if (strcmp(type, "string") == 0 || strcmp(type, "bytes") == 0)
        return json_is_string(v);
    if (strcmp(type, "struct") == 0)
        return json_is_object(v);
    if (strcmp(type, "array") == 0)
        return json_is_array(v);
    if (strcmp(type, "map") == 0)
        return json_is_object(v) || json_is_array(v);
    return 0;
}

static int struct_check(const json_t *schema, const json_t *value,
                        const char *path, char *why, size_t n) {
    const json_t *fields = json_object_get(schema, "fields");
    if (!json_is_array(fields)) {
        snprintf(why, n, "%s: the struct schema has no \"fields\" array", path);
        return 1;
    }
    char sub[512];
    size_t i;
    const json_t *f;
    json_array_foreach(fields, i, f) {
        const char *name = json_string_value(json_object_get(f, "field"));
        if (!name) {
            snprintf(why, n, "%s: schema field %zu has no \"field\" name", path,
                     i);
            return 1;
        }
        snprintf(sub, sizeof sub, "%s/%s", path, name);
        if (tm_cdc_schema_check(f, json_object_get(value, name), sub, why, n))
            return 1;
    }
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)value, key, v) {
        int known = 0;
        json_array_foreach(fields, i, f) {
            const char *name = json_string_value(json_object_get(f, "field"));
            known |= name && strcmp(name, key) == 0;
        }
        if (!known) {
            snprintf(why, n, "%s/%s: in the payload, not in the schema", path,
                     key);
            return 1;
        }
    }
    return 0;
}

int tm_cdc_schema_check(const json_t *schema, const json_t *value,
                        const char *path, char *why, size_t n) {
    if (!json_is_object(schema)) {
        snprintf(why, n, "%s: the schema is not an object", path);
        return 1;
    }
    const char *type = schema_type(schema);
    if (!value || json_is_null(value)) {
        if (json_is_true(json_object_get(schema, "optional")))
            return 0;
        snprintf(why, n, "%s: %s, but the schema's %s is not optional", path,
                 value ? "null" : "missing", *type ? type : "field");
        return 1;
    }
    if (!kind_fits(type, value)) {
        snprintf(why, n, "%s: the schema says %s, the payload has %s", path,
                 *type ? type : "(no type)",
                 json_is_object(value)    ? "an object"
                 : json_is_array(value)   ? "an array"
                 : json_is_string(value)  ? "a string"
                 : json_is_boolean(value) ? "a boolean"
                 : json_is_integer(value) ? "an integer"
                                          : "a number");
        return 1;
    }
    if (strcmp(type, "struct") == 0)
        return struct_check(schema, value, path, why, n);
    if (strcmp(type, "array") == 0) {
        const json_t *items = json_object_get(schema, "items");
        size_t i;
        const json_t *e;
        char sub[512];
        json_array_foreach(value, i, e) {
            snprintf(sub, sizeof sub, "%s/%zu", path, i);
            if (items && tm_cdc_schema_check(items, e, sub, why, n))
                return 1;
        }
    }
    return 0;
}

const json_t *tm_cdc_field_schema(const json_t *row_schema,
                                  const tm_json_pointer *p) {
    const json_t *s = row_schema;
    for (size_t t = 0; s && t < p->ntokens; t++) {
        const json_t *fields = json_object_get(s, "fields"), *f, *next = NULL;
        size_t i;
        json_array_foreach(fields, i, f) {
            const char *name = json_string_value(json_object_get(f, "field"));
            if (name && strcmp(name, p->tokens[t]) == 0)
                next = f;
        }
        s = next;
    }
    return s == row_schema ? NULL : s;
}

/* ---- Decimal ---- */

static int b64_digit(char c) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Standard base64 (padding optional) into out; its length, or -1 for
 * text that is not base64: a lone last digit (length % 4 == 1), bits left
 * over that are not zero, padding that does not complete a group of 4. */
static long b64_decode(const char *s, size_t len, unsigned char *out,
                       size_t cap) {
    size_t pad = 0;
    while (len > 0 && s[len - 1] == '=') {
        len--;
        pad++;
    }
    if (len % 4 == 1 || pad > 2 || (pad > 0 && (len + pad) % 4 != 0))
        return -1;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int d = b64_digit(s[i]);
        if (d < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= cap)
                return -1;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    if ((acc & ((1u << bits) - 1)) != 0)
        return -1;
    return (long)o;
}

/* The decimal text of the two's-complement big-endian bytes b[0..n)
 * scaled by 10^-scale, into out (cap bytes). 0 ok, -1 too long. */
static int decimal_text(const unsigned char *b, size_t n, long scale, char *out,
                        size_t cap) {
    unsigned char mag[DECIMAL_MAX_BYTES];
    int neg = n > 0 && (b[0] & 0x80);
    for (size_t i = 0; i < n; i++)
        mag[i] = neg ? (unsigned char)~b[i] : b[i];
    if (neg) /* two's complement: invert and add one */
        for (size_t i = n; i-- > 0;)
            if (++mag[i] != 0)
                break;
    /* base 256 to base 10, least significant digit first */
    char dig[3 * DECIMAL_MAX_BYTES + 2];
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned carry = mag[i];
        for (size_t k = 0; k < nd; k++) {
            unsigned v = (unsigned)(dig[k] - '0') * 256u + carry;
            dig[k] = (char)('0' + v % 10);
            carry = v / 10;
        }
        while (carry) {
            dig[nd++] = (char)('0' + carry % 10);
            carry /= 10;
        }
    }
    if (nd == 0)
        dig[nd++] = '0';
    size_t o = 0;
    long intdigits = (long)nd - scale;
    if (scale < 0 || scale > 1000 || nd + (size_t)scale + 4 > cap)
        return -1;
    if (neg && !(nd == 1 && dig[0] == '0'))
        out[o++] = '-';
    if (intdigits <= 0) {
        out[o++] = '0';
    } else {
        for (long k = 0; k < intdigits; k++)
            out[o++] = dig[nd - 1 - (size_t)k];
    }
    if (scale > 0) {
        out[o++] = '.';
        for (long k = intdigits; k < (long)nd; k++)
            out[o++] = k < 0 ? '0' : dig[nd - 1 - (size_t)k];
    }
    out[o] = '\0';
    return 0;
}

static int decimal(const json_t *schema, json_t *value, tm_type type,
                   json_t **out, char *why, size_t n) {
    const json_t *params = json_object_get(schema, "parameters");
    const char *sc = json_string_value(json_object_get(params, "scale"));
    char *end = NULL;
    long scale = sc ? strtol(sc, &end, 10) : -1;
    if (!sc || !*sc || *end || scale < 0 || scale > 1000) {
        snprintf(why, n, "Decimal without a \"scale\" parameter 0 to 1000");
        return 1;
    }
    if (!json_is_string(value)) {
        snprintf(why, n, "Decimal: expected base64 text");
        return 1;
    }
    unsigned char bytes[DECIMAL_MAX_BYTES];
    long nb = b64_decode(json_string_value(value), json_string_length(value),
                         bytes, sizeof bytes);
    char text[3 * DECIMAL_MAX_BYTES + 1100];
    if (nb < 0 || decimal_text(bytes, (size_t)nb, scale, text, sizeof text)) {
        snprintf(
            why, n,
            "Decimal: expected base64 of at most %d bytes, found \"%.40s\"",
            DECIMAL_MAX_BYTES, json_string_value(value));
        return 1;
    }
    if (type == TM_TYPE_FLOAT) {
        *out = json_real(strtod(text, NULL));
    } else if (type == TM_TYPE_INT && scale == 0) {
        errno = 0;
        long long i = strtoll(text, NULL, 10);
        if (errno == ERANGE) {
            snprintf(why, n, "Decimal %.40s does not fit a 64-bit int", text);
            return 1;
        }
        *out = json_integer((json_int_t)i);
    } else {
        *out = json_string(text);
    }
    return *out ? 0 : -1;
}

/* ---- dates and times ---- */

typedef struct time_kind {
    const char *name;
    int64_t us_per_unit; /* 0: nanoseconds (divided by 1000) */
} time_kind;

static const time_kind TIMES[] = {
    {"org.apache.kafka.connect.data.Date", 86400000000LL},
    {"org.apache.kafka.connect.data.Time", 1000},
    {"org.apache.kafka.connect.data.Timestamp", 1000},
    {"io.debezium.time.Date", 86400000000LL},
    {"io.debezium.time.Time", 1000},
    {"io.debezium.time.Timestamp", 1000},
    {"io.debezium.time.MicroTime", 1},
    {"io.debezium.time.MicroTimestamp", 1},
    {"io.debezium.time.NanoTime", 0},
    {"io.debezium.time.NanoTimestamp", 0},
};

static int time_value(const time_kind *k, json_t *value, json_t **out,
                      char *why, size_t n) {
    if (!json_is_integer(value)) {
        snprintf(why, n, "%s: expected an integer", k->name);
        return 1;
    }
    int64_t v = json_integer_value(value), us;
    if (k->us_per_unit == 0) {
        us = v / 1000 - (v % 1000 < 0); /* floor */
    } else if (v > INT64_MAX / k->us_per_unit ||
               v < INT64_MIN / k->us_per_unit) {
        snprintf(why, n, "%s: %" PRId64 " is out of range", k->name, v);
        return 1;
    } else {
        us = v * k->us_per_unit;
    }
    char text[TM_TIMESTAMP_TEXT_MAX];
    if (tm_timestamp_format(us, text) == 0) {
        snprintf(why, n, "%s: %" PRId64 " is outside years 0000 to 9999",
                 k->name, v);
        return 1;
    }
    *out = json_string(text);
    return *out ? 0 : -1;
}

int tm_cdc_is_time(const char *name) {
    for (size_t i = 0; name && i < sizeof TIMES / sizeof TIMES[0]; i++)
        if (strcmp(name, TIMES[i].name) == 0)
            return 1;
    return 0;
}

int tm_cdc_logical(const json_t *field_schema, json_t *value, tm_type type,
                   json_t **out, char *why, size_t n) {
    const char *name = json_string_value(json_object_get(field_schema, "name"));
    *out = NULL;
    if (name && strcmp(name, "org.apache.kafka.connect.data.Decimal") == 0 &&
        (type == TM_TYPE_TEXT || type == TM_TYPE_FLOAT || type == TM_TYPE_INT))
        return decimal(field_schema, value, type, out, why, n);
    if (name && (type == TM_TYPE_TIMESTAMP || type == TM_TYPE_TEXT))
        for (size_t i = 0; i < sizeof TIMES / sizeof TIMES[0]; i++)
            if (strcmp(name, TIMES[i].name) == 0)
                return time_value(&TIMES[i], value, out, why, n);
    *out = json_incref(value);
    return 0;
}
