/* One message to one outcome, for the mapping of a connector config: a
 * row (its column values), a dead letter (reason and detail), or filtered.
 * Pure: no Kafka, no batch; everything kept goes into the caller's arena.
 * In-batch dedup is the batch builder's, after this. */
#ifndef TM_RECORD_CONVERT_H
#define TM_RECORD_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "config/connector_config.h"
#include "convert/arena.h"

/* A message as the builder stored it (the bytes already in the arena, so
 * raw-mode values point at them and need no second copy). */
typedef struct tm_conv_input {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t timestamp_ms; /* -1: none */
    const void *key;      /* NULL: null key */
    size_t key_len;
    const void *value; /* NULL: tombstone */
    size_t value_len;
    const char *headers_json; /* NULL: no headers */
} tm_conv_input;

typedef enum tm_conv_outcome {
    TM_CONV_OOM = -1,
    TM_CONV_ROW = 0,
    TM_CONV_DEAD_LETTER = 1,
    TM_CONV_FILTERED = 2,
    /* A mapping without a column list: the event's schema changes the
     * columns in a way no table can follow safely (detail says which
     * field and both types): the partition stops, the record has no
     * outcome. */
    TM_CONV_STOP = 3
} tm_conv_outcome;

typedef struct tm_conv_result {
    tm_value *values;    /* ROW: ncolumns values (arena) */
    tm_dl_reason reason; /* DEAD_LETTER */
    const char *detail;  /* DEAD_LETTER: "/count: expected int, ..." (arena) */
    uint32_t op;         /* ROW: TM_OP_UPSERT, or TM_OP_DELETE (a change
                            event's delete: only key columns set) */
} tm_conv_result;

/* The config with its pointers compiled. */
typedef struct tm_converter tm_converter;

/* Which parser finds a json-mode record's values: the streaming extractor
 * (json_extract.h), or jansson's tree, the reference the differential
 * tests hold the extractor to. Both feed the one type conversion
 * (value_convert.h), so they differ only in how values are found. */
typedef enum tm_json_parser {
    TM_PARSER_EXTRACTOR,
    TM_PARSER_JANSSON
} tm_json_parser;

/* NULL on OOM (or a pointer the config loader would have refused). cfg
 * outlives the converter. tm_converter_new uses the production parser. */
tm_converter *tm_converter_new(const tm_connector_config *cfg);
tm_converter *tm_converter_new_with(const tm_connector_config *cfg,
                                    tm_json_parser parser);
void tm_converter_free(tm_converter *cv);

/* Converts in: raw mode always a ROW; json mode parse, then filter, then
 * columns, the first failure deciding (docs/configuration.md, "How
 * records are converted"). A change-data-capture format (debezium,
 * connect) unwraps the event first (cdc_envelope.h) and reads the columns
 * from its row image; a tombstone is a delete of its record key's row
 * (cdc_envelope.h). Without a column list the columns come from the
 * event's schema (cdc_columns.h), and grow as the events' schemas add
 * fields: the converter keeps them when the event that brought them
 * converts to a row (a delete included); a dead letter, a filtered event
 * or a stop leaves them as they were (tm_converter_columns says how
 * many). */
tm_conv_outcome tm_convert(const tm_converter *cv, tm_arena *a,
                           const tm_conv_input *in, tm_conv_result *out);

/* The columns rows convert to (*n of them): the config's, or for a
 * mapping without a column list those the events' schemas gave so far
 * (valid until the next tm_convert; NULL before the first). */
const tm_column *tm_converter_columns(const tm_converter *cv, size_t *n);

/* A mapping without a column list: what the events taught the converter
 * so far (the columns, whether a row converted, the schema last seen),
 * for tm_converter_unlearn; NULL otherwise or on OOM (mark_free takes
 * NULL). unlearn: back to the mark, when events converted since taught
 * more (the batch they were in was dropped, to be converted again);
 * nothing when the converter is there or before it already. */
typedef struct tm_converter_mark tm_converter_mark;
tm_converter_mark *tm_converter_mark_take(const tm_converter *cv);
void tm_converter_unlearn(const tm_converter *cv, const tm_converter_mark *m);
void tm_converter_mark_free(tm_converter_mark *m);

#endif
