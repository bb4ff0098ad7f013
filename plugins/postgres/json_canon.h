/* jsonb's output text back to the host's canonical JSON (json_canon.c). */
#ifndef TM_PG_JSON_CANON_H
#define TM_PG_JSON_CANON_H

#include <stddef.h>

#include "pg_sink.h"

/* Appends the canonical text of the JSON value P[0..N) to OUT. 0, or -1
 * when P is not one JSON value or out of memory (OUT->oom set). */
int pg_json_canonical(const char *p, size_t n, pg_buf *out);

#endif
