/* Kafka Connect schemas of change events (JsonConverter's "schema"): the
 * check that a payload keeps to its schema, the schema of the field a
 * column's pointer names, and the field's logical type (Connect's Decimal,
 * Date, Time, Timestamp and Debezium's time types) turned into the plain
 * JSON value the one type conversion (value_convert.h) reads.
 * docs/configuration.md, "Change data capture", says the rules. */
#ifndef TM_CDC_LOGICAL_H
#define TM_CDC_LOGICAL_H

#include <jansson.h>
#include <stddef.h>
#include <tidemark/sink.h>

#include "convert/json_pointer.h"

/* Whether value keeps to schema (a Connect schema object: "type",
 * "optional", "fields" of a struct, "items" of an array); path is where
 * value lies, for the detail. 0 yes; 1 no, why says where and how. */
int tm_cdc_schema_check(const json_t *schema, const json_t *value,
                        const char *path, char *why, size_t n);

/* The schema of the field p names under the struct schema row_schema
 * (borrowed), or NULL when p does not follow struct fields. */
const json_t *tm_cdc_field_schema(const json_t *row_schema,
                                  const tm_json_pointer *p);

/* value (present, not null) of the field whose schema is field_schema
 * (NULL: none), for a column of type: *out a new reference, the value
 * itself when its type has no logical name or the column takes the raw
 * value. 0 ok; 1 the value is not what its logical type says (why set);
 * -1 OOM. */
int tm_cdc_logical(const json_t *field_schema, json_t *value, tm_type type,
                   json_t **out, char *why, size_t n);

/* Whether name (a schema's "name", may be NULL) is one of the date and
 * time logical types tm_cdc_logical converts from an integer. */
int tm_cdc_is_time(const char *name);

#endif
