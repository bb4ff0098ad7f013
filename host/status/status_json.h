/* status.json: the snapshot as a JSON document, both ways. The one place
 * that knows the file's field names (docs/operations.md lists them). */
#ifndef TM_STATUS_JSON_H
#define TM_STATUS_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "status/status_model.h"

/* Bumped when a field changes meaning; readers refuse other versions. */
#define TM_STATUS_FORMAT 1

/* The document for S, or NULL when memory ran out. */
json_t *tm_status_to_json(const tm_status_snapshot *s);

/* A partition's JSON object, NULL when memory ran out. */
json_t *tm_status_partition_to_json(const tm_status_partition *p);

/* Fills S from DOC; s->partitions points to *parts (allocated here, the
 * caller frees it, NULL when there are none). 0, or -1 with errstr naming
 * the first missing or mistyped field. */
int tm_status_from_json(const json_t *doc, tm_status_snapshot *s,
                        tm_status_partition **parts, char *errstr,
                        size_t errsize);

#endif
