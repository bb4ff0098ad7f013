/* Avro container reader for the plugin's own files (see avro_reader.h). */
#include <string.h>

#include "avro_reader.h"

int64_t av_get_long(av_reader *r) {
    uint64_t u = 0;
    for (int shift = 0; !r->err; shift += 7) {
        if (r->p >= r->end || shift > 63) {
            r->err = 1;
            break;
        }
        uint8_t c = *r->p++;
        u |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    }
    return 0;
}

int av_get_bool(av_reader *r) {
    if (r->err || r->p >= r->end) {
        r->err = 1;
        return 0;
    }
    return *r->p++ != 0;
}

double av_get_double(av_reader *r) {
    double d = 0;
    if (r->err || r->end - r->p < 8) {
        r->err = 1;
        return 0;
    }
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u |= (uint64_t)r->p[i] << (8 * i);
    memcpy(&d, &u, sizeof d);
    r->p += 8;
    return d;
}

void av_get_bytes(av_reader *r, const uint8_t **p, size_t *n) {
    int64_t len = av_get_long(r);
    *p = r->p;
    *n = 0;
    if (r->err || len < 0 || len > r->end - r->p) {
        r->err = 1;
        return;
    }
    *n = (size_t)len;
    r->p += len;
}

/* Walks the header map; with KEY set, stops at that key's value. */
static int walk_meta(av_reader *r, const char *key, const uint8_t **val,
                     size_t *len) {
    for (;;) {
        int64_t count = av_get_long(r);
        if (r->err)
            return -1;
        if (count == 0)
            return key ? -1 : 0;
        if (count < 0) { /* a negative count is followed by the byte size */
            if (count == INT64_MIN) { /* -count is not an int64_t */
                r->err = 1;
                return -1;
            }
            count = -count;
            if (av_get_long(r) < 0)
                r->err = 1;
        }
        for (int64_t i = 0; i < count; i++) {
            const uint8_t *k, *v;
            size_t kn, vn;
            av_get_bytes(r, &k, &kn);
            av_get_bytes(r, &v, &vn);
            if (r->err)
                return -1;
            if (key && kn == strlen(key) && memcmp(k, key, kn) == 0) {
                *val = v;
                *len = vn;
                return 0;
            }
        }
    }
}

int av_read_meta(const av_reader *r, const char *key, const uint8_t **val,
                 size_t *len) {
    av_reader m = {.p = r->meta, .end = r->meta_end};
    return walk_meta(&m, key, val, len);
}

int av_read_open(av_reader *r, const uint8_t *data, size_t n) {
    memset(r, 0, sizeof *r);
    if (n < 4 + AV_SYNC_SIZE || memcmp(data, "Obj\x01", 4) != 0)
        return -1;
    r->p = r->meta = data + 4;
    r->end = data + n;
    if (walk_meta(r, NULL, NULL, NULL) != 0 || r->end - r->p < AV_SYNC_SIZE)
        return -1;
    r->meta_end = r->p;
    memcpy(r->sync, r->p, AV_SYNC_SIZE);
    r->p += AV_SYNC_SIZE;
    const uint8_t *codec;
    size_t clen;
    if (av_read_meta(r, "avro.codec", &codec, &clen) == 0 &&
        !(clen == 4 && memcmp(codec, "null", 4) == 0))
        return -1;
    return 0;
}

int av_read_next(av_reader *r) {
    if (r->err)
        return -1;
    while (r->left == 0) {
        if (r->block_end) {
            /* The previous block is done: its records must have used
             * exactly its size, then comes its sync marker. */
            if (r->p != r->block_end) {
                r->err = 1;
                return -1;
            }
            r->p = r->block_end + AV_SYNC_SIZE;
            r->block_end = NULL;
        }
        if (r->p == r->end)
            return 0;
        int64_t count = av_get_long(r);
        int64_t size = av_get_long(r);
        if (r->err || count < 0 || size < 0 ||
            size > r->end - r->p - AV_SYNC_SIZE ||
            memcmp(r->p + size, r->sync, AV_SYNC_SIZE) != 0) {
            r->err = 1;
            return -1;
        }
        r->left = count;
        r->block_end = r->p + size;
    }
    r->left--;
    return 1;
}

static void skip_raw(av_reader *r, int64_t n) {
    if (r->err || n < 0 || n > r->end - r->p)
        r->err = 1;
    else
        r->p += n;
}

/* Array and map blocks: count (negative: then the byte size), items. */
static void skip_blocks(av_reader *r, json_t *items, json_t *values,
                        int depth) {
    for (;;) {
        int64_t count = av_get_long(r);
        if (r->err || count == 0)
            return;
        if (count < 0) {
            if (count == INT64_MIN) {
                r->err = 1;
                return;
            }
            count = -count;
            (void)av_get_long(r); /* the block's byte size */
        }
        for (int64_t i = 0; i < count && !r->err; i++) {
            const uint8_t *before = r->p;
            if (values) { /* a map: the key, then the value */
                const uint8_t *k;
                size_t kn;
                av_get_bytes(r, &k, &kn);
                av_skip(r, values, depth + 1);
            } else {
                av_skip(r, items, depth + 1);
            }
            if (r->p == before)
                r->err = 1; /* items of no bytes: a crafted count */
        }
    }
}

void av_skip(av_reader *r, json_t *type, int depth) {
    if (r->err || depth > AV_SKIP_DEPTH_MAX) {
        r->err = 1;
        return;
    }
    if (json_is_array(type)) { /* a union: the branch, then its value */
        int64_t b = av_get_long(r);
        if (b < 0 || (size_t)b >= json_array_size(type))
            r->err = 1;
        else
            av_skip(r, json_array_get(type, (size_t)b), depth + 1);
        return;
    }
    if (json_is_object(type) &&
        !json_is_string(json_object_get(type, "type"))) {
        av_skip(r, json_object_get(type, "type"), depth + 1); /* nested */
        return;
    }
    const char *t = json_string_value(
        json_is_object(type) ? json_object_get(type, "type") : type);
    if (!t) {
        r->err = 1;
    } else if (strcmp(t, "null") == 0) {
    } else if (strcmp(t, "boolean") == 0) {
        skip_raw(r, 1);
    } else if (strcmp(t, "int") == 0 || strcmp(t, "long") == 0 ||
               strcmp(t, "enum") == 0) {
        (void)av_get_long(r);
    } else if (strcmp(t, "float") == 0) {
        skip_raw(r, 4);
    } else if (strcmp(t, "double") == 0) {
        skip_raw(r, 8);
    } else if (strcmp(t, "bytes") == 0 || strcmp(t, "string") == 0) {
        const uint8_t *p;
        size_t n;
        av_get_bytes(r, &p, &n);
    } else if (strcmp(t, "fixed") == 0) {
        skip_raw(r, json_integer_value(json_object_get(type, "size")));
    } else if (strcmp(t, "array") == 0) {
        skip_blocks(r, json_object_get(type, "items"), NULL, depth);
    } else if (strcmp(t, "map") == 0) {
        skip_blocks(r, NULL, json_object_get(type, "values"), depth);
    } else if (strcmp(t, "record") == 0) {
        size_t i;
        json_t *f;
        json_array_foreach(json_object_get(type, "fields"), i, f) {
            av_skip(r, json_object_get(f, "type"), depth + 1);
        }
    } else {
        r->err = 1; /* a named type reference: not in the files we write */
    }
}
