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
