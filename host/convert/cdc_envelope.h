/* Change events (docs/configuration.md, "Change data capture"): the row
 * image a record carries and what it does to the row, from Kafka
 * Connect's JsonConverter envelope ({"schema", "payload"}) or a Debezium
 * change event ("op", "before", "after"), either of them also in the
 * flattened shape ExtractNewRecordState writes ("__deleted", "__op"). */
#ifndef TM_CDC_ENVELOPE_H
#define TM_CDC_ENVELOPE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

#include "config/connector_config.h"

typedef struct tm_cdc_row {
    uint32_t op;          /* TM_OP_UPSERT or TM_OP_DELETE */
    json_t *row;          /* the row image, an object (a reference held) */
    const json_t *schema; /* its struct schema (borrowed), NULL without */
    json_t *key_doc;      /* the parsed record key when the row came from
                             it (a delete without "before"); freed with
                             tm_cdc_row_clear */
} tm_cdc_row;

/* The row of a parsed record value doc (not a tombstone) in format f;
 * key[0..key_len) the record key (NULL: none), read only for a delete
 * whose event has no "before". 0 ok; 1 a dead letter (*reason
 * TM_DL_ENVELOPE, TM_DL_SCHEMA_MISMATCH or TM_DL_NULL_KEY, why set); -1
 * OOM. */
int tm_cdc_unwrap(tm_record_format f, json_t *doc, const void *key,
                  size_t key_len, tm_cdc_row *out, tm_dl_reason *reason,
                  char *why, size_t n);
/* A tombstone (null value) in a change-data-capture mapping: a delete of
 * its record key's row (docs/configuration.md, "Change data capture": a
 * compacted topic may keep a deleted key's tombstone only), the key read
 * as a delete without "before" reads it. Returns as tm_cdc_unwrap. */
int tm_cdc_tombstone(const void *key, size_t key_len, tm_cdc_row *out,
                     tm_dl_reason *reason, char *why, size_t n);
void tm_cdc_row_clear(tm_cdc_row *r);

#endif
