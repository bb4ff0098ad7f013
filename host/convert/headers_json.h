/* Kafka headers as the JSON text that tm_record.headers_json carries:
 * [[name, value], ...] in the message's order (names may repeat). Each
 * name and value is a JSON string when valid UTF-8, else
 * {"base64": "..."} (bytes_json.h); a null header value is null. */
#ifndef TM_HEADERS_JSON_H
#define TM_HEADERS_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "convert/batch_builder.h"

/* The headers as a new JSON array reference; NULL on OOM. */
json_t *tm_headers_json(const tm_header_view *h, size_t n);

/* The compact text (malloc'd) in *out; NULL when n == 0 (no headers).
 * 0 ok, -1 OOM. */
int tm_headers_json_text(const tm_header_view *h, size_t n, char **out);

#endif
