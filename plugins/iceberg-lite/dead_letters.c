/* Dead letters as a side file of JSON lines, one object per dead letter:
 * topic, partition, offset, timestamp_ms, reason (the SDK's name), detail,
 * key and value (base64, null when absent), headers (the host's JSON text)
 * and batch_id. The file is written before the commit, durable at its
 * barrier (ice_meta_stage), and named in the snapshot summary, so it belongs to
 * the table exactly when the snapshot does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsio.h"
#include "dead_letters.h"
#include "table_meta.h"

char *ice_base64(const void *data, size_t n) {
    static const char A[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const uint8_t *p = data;
    char *out = malloc((n + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        out[o++] = A[v >> 18 & 63];
        out[o++] = A[v >> 12 & 63];
        out[o++] = i + 1 < n ? A[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? A[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

static json_t *base64(const void *data, size_t n) {
    if (!data)
        return json_null();
    char *out = ice_base64(data, n);
    if (!out)
        return NULL;
    json_t *s = json_string(out);
    free(out);
    return s;
}

static json_t *str_or_null(const char *s) {
    return s ? json_string(s) : json_null();
}

int ice_dl_encode(const tm_batch *b, ib_buf *out) {
    for (size_t j = 0; j < b->ndead_letters; j++) {
        const tm_dead_letter *d = TM_CELEM(tm_dead_letter, b->dead_letters, j);
        const tm_range *g = TM_CELEM(tm_range, b->ranges, d->range);
        json_t *o = json_pack(
            "{s:s, s:i, s:I, s:I, s:s, s:o, s:o, s:o, s:o, s:s}", "topic",
            g->topic, "partition", (int)g->partition, "offset",
            (json_int_t)d->offset, "timestamp_ms", (json_int_t)d->timestamp_ms,
            "reason", tm_dl_reason_name(d->reason), "detail",
            str_or_null(d->detail), "key", base64(d->key, d->key_len), "value",
            base64(d->value, d->value_len), "headers",
            str_or_null(d->headers_json), "batch_id",
            b->batch_id ? b->batch_id : "");
        char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!line)
            return -1;
        ib_buf_str(out, line); /* jansson escapes newlines in strings */
        ib_buf_byte(out, '\n');
        free(line);
    }
    return ib_buf_ok(out) ? 0 : -1;
}

int ice_dl_read(const char *path, ice_dl_fn fn, void *ctx, char *why,
                size_t why_size) {
    uint8_t *data;
    size_t len;
    int rc = fs_read_all(path, &data, &len, why, why_size);
    if (rc == 1)
        snprintf(why, why_size, "dead-letter file %s is missing", path);
    if (rc != 0)
        return -1;
    char *p = (char *)data, *end = p + len;
    rc = 0;
    while (rc == 0 && p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        json_error_t jerr;
        json_t *o = n ? json_loadb(p, n, 0, &jerr) : NULL;
        if (n && !json_is_object(o)) {
            snprintf(why, why_size, "%s: a line is not a JSON object", path);
            rc = -1;
        } else if (o) {
            const char *topic = json_string_value(json_object_get(o, "topic"));
            rc = fn(ctx, topic ? topic : "",
                    (int32_t)ice_json_int(o, "partition", -1),
                    ice_json_int(o, "offset", -1),
                    tm_dl_reason_from_name(
                        json_string_value(json_object_get(o, "reason"))),
                    json_string_value(json_object_get(o, "detail")));
        }
        json_decref(o);
        p += n + 1;
    }
    free(data);
    return rc;
}
