/* The columns of a change event taken from its Connect schema (a mapping
 * without a column list, docs/configuration.md "Columns from the event's
 * schema"), and the difference between the columns a target already has
 * and the columns an event's schema brings: columns to add, or a change
 * that cannot be applied safely. Pure: no Kafka, no sink. */
#ifndef TM_CDC_COLUMNS_H
#define TM_CDC_COLUMNS_H

#include <jansson.h>
#include <stddef.h>
#include <tidemark/sink.h>

/* A column set: columns[i] (struct_size set, name owned) is read at
 * pointers[i] in the row image ("/" and the field name, escaped); source[i]
 * says what the schema gave, for errors ("int64", "int32 Date"). */
typedef struct tm_cdc_colset {
    tm_column *columns;
    char **pointers;
    char **source;
    size_t ncolumns;
} tm_cdc_colset;

void tm_cdc_colset_clear(tm_cdc_colset *s);

/* The column type of a Connect field schema, by the table of
 * docs/configuration.md: int8..int64 int; float, double (float32,
 * float64) float; boolean bool; string text; bytes text (Decimal: its
 * decimal text; else the base64 as JsonConverter writes it); struct,
 * array, map json; the time logical types timestamp, and Debezium's
 * ZonedTimestamp (a string) timestamp. 0 for a schema without a type it
 * knows. */
tm_type tm_cdc_column_type(const json_t *field_schema);

/* The longest column name: PostgreSQL's identifiers (NAMEDATALEN - 1
 * bytes); one rule for every sink, so a stream goes into any of them. */
#define TM_CDC_NAME_MAX 63

/* The columns of the struct schema row_schema, one per field in its order
 * (the flattened shape's marks "__deleted" and "__op" excepted), required
 * when the field is not optional; key_names (a JSON object: its member
 * names) say which are the key. 0 ok; 1 the schema gives no columns, or a
 * key name is not a field, or a field has a type with no column type, or
 * a name no table can take (the sinks' prefix "_tm_" in any case, longer
 * than TM_CDC_NAME_MAX bytes, or two fields differing only in ASCII case)
 * (why says which, a schema_mismatch detail); -1 OOM. */
int tm_cdc_columns_derive(const json_t *row_schema, const json_t *key_names,
                          tm_cdc_colset *out, char *why, size_t n);

/* The key columns of a record key without a schema, the bare JSON object
 * key (a tombstone read before any event gave the columns): one per member
 * in its order, key and required, typed by its JSON (integer int, number
 * float, string text, boolean bool, object or array json; no schema tells
 * a time from a number). 0 ok; 1 a null member, no member, or a name no
 * table can take (why says which); -1 OOM. */
int tm_cdc_columns_from_key(const json_t *key, tm_cdc_colset *out, char *why,
                            size_t n);

/* 0 when the member names of the record key object key are exactly the
 * key columns of cur (byte for byte); else 1, why naming both (a
 * schema_mismatch detail): a delete by the key reads the key columns from
 * it. */
int tm_cdc_columns_key_match(const tm_cdc_colset *cur, const json_t *key,
                             char *why, size_t n);

/* What an event's columns (ev) do to a target that has cur. */
typedef enum tm_cdc_diff {
    TM_CDC_SAME = 0,  /* nothing to add */
    TM_CDC_ADDED = 1, /* added[0..*nadded): indices in ev of new columns */
    TM_CDC_UNSAFE = 2 /* why names the field and both types */
} tm_cdc_diff;

/* Unsafe: a field of ev named as a column of cur but for its ASCII case
 * (a rename in case only: SQLite folds the case, PostgreSQL does not, so
 * neither a new column nor the old one is right), a column of both whose
 * type differs (any change: a target
 * column is not retyped under its rows), a key column added, dropped or
 * no longer a key, or a column cur requires (never null) that ev drops or
 * makes optional. A new column that is not a key is added as optional
 * whatever its schema says (the rows before it have none), unless only
 * deletes came before it (tm_cdc_columns_append). A column ev drops that
 * cur does not require stays, null from then on. added holds
 * ev->ncolumns entries. */
tm_cdc_diff tm_cdc_columns_diff(const tm_cdc_colset *cur,
                                const tm_cdc_colset *ev, size_t *added,
                                size_t *nadded, char *why, size_t n);

/* cur with ev's columns added[0..nadded) appended: optional whatever ev
 * says when rows came before them (those rows have no value for them);
 * as ev says when none did (deletes only, which set only the key: a
 * column is then as the first event with it would have made it). 0, or
 * -1 OOM (cur unchanged). */
int tm_cdc_columns_append(tm_cdc_colset *cur, const tm_cdc_colset *ev,
                          const size_t *added, size_t nadded, int rows_before);

/* cur back to its first n columns (n <= cur->ncolumns), the columns
 * appended since dropped: an event whose schema added them did not
 * convert. n == 0 clears it. */
void tm_cdc_columns_truncate(tm_cdc_colset *cur, size_t n);

#endif
