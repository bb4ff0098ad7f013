/* Page compression (see pq_codec.h): thin wrappers over libzstd and
 * libsnappy's C API, each result checked. */
#include <snappy-c.h>
#include <string.h>
#include <zstd.h>

#include "pq_codec.h"

static const struct {
    const char *name;
    pq_codec codec;
} NAMES[] = {
    {"zstd", PQ_CODEC_ZSTD},
    {"snappy", PQ_CODEC_SNAPPY},
    {"none", PQ_CODEC_NONE},
};
#define NNAMES (sizeof NAMES / sizeof NAMES[0])

int pq_codec_parse(const char *name, pq_codec *out) {
    for (size_t i = 0; name && i < NNAMES; i++)
        if (strcmp(name, NAMES[i].name) == 0) {
            *out = NAMES[i].codec;
            return 0;
        }
    return -1;
}

const char *pq_codec_name(pq_codec c) {
    for (size_t i = 0; i < NNAMES; i++)
        if (NAMES[i].codec == c)
            return NAMES[i].name;
    return "unknown";
}

int pq_codec_known(int64_t thrift_codec) {
    return thrift_codec == PQ_CODEC_NONE || thrift_codec == PQ_CODEC_SNAPPY ||
           thrift_codec == PQ_CODEC_ZSTD;
}

void pq_codec_ctx_free(void *ctx) {
    ZSTD_freeCCtx(ctx); /* NULL is fine */
}

int pq_compress(pq_codec c, void **ctx, const void *src, size_t n,
                ib_buf *out) {
    if (c == PQ_CODEC_NONE) {
        ib_buf_add(out, src, n);
        return ib_buf_ok(out) ? 0 : -1;
    }
    size_t bound = c == PQ_CODEC_ZSTD ? ZSTD_compressBound(n)
                                      : snappy_max_compressed_length(n);
    if (!ib_buf_ok(out) || (c == PQ_CODEC_ZSTD && ZSTD_isError(bound)) ||
        ib_buf_reserve(out, bound) != 0) {
        out->oom = 1;
        return -1;
    }
    size_t got = bound;
    if (c == PQ_CODEC_ZSTD) {
        if (!*ctx && !(*ctx = ZSTD_createCCtx())) {
            out->oom = 1;
            return -1;
        }
        got = ZSTD_compressCCtx(*ctx, out->p + out->len, bound, src, n,
                                PQ_ZSTD_LEVEL);
        if (ZSTD_isError(got)) {
            out->oom = 1;
            return -1;
        }
    } else if (snappy_compress(src, n, (char *)out->p + out->len, &got) !=
               SNAPPY_OK) {
        out->oom = 1;
        return -1;
    }
    out->len += got;
    return 0;
}

int pq_declared_size_is(pq_codec c, const void *src, size_t n, size_t want) {
    if (c == PQ_CODEC_NONE)
        return n == want ? 0 : -1;
    if (c == PQ_CODEC_ZSTD) {
        unsigned long long got = ZSTD_getFrameContentSize(src, n);
        return got == (unsigned long long)want ? 0 : -1;
    }
    size_t got;
    return c == PQ_CODEC_SNAPPY &&
                   snappy_uncompressed_length(src, n, &got) == SNAPPY_OK &&
                   got == want
               ? 0
               : -1;
}

int pq_decompress(pq_codec c, const void *src, size_t n, void *dst,
                  size_t dst_n) {
    if (c == PQ_CODEC_NONE) {
        if (n != dst_n)
            return -1;
        memcpy(dst, src, n);
        return 0;
    }
    if (c == PQ_CODEC_ZSTD) {
        /* Exactly dst_n: a frame that would be longer fails with
         * dstSize_tooSmall, one that is shorter is caught below. */
        size_t got = ZSTD_decompress(dst, dst_n, src, n);
        return !ZSTD_isError(got) && got == dst_n ? 0 : -1;
    }
    if (c == PQ_CODEC_SNAPPY) {
        size_t want;
        if (snappy_uncompressed_length(src, n, &want) != SNAPPY_OK ||
            want != dst_n)
            return -1;
        size_t got = dst_n;
        return snappy_uncompress(src, n, dst, &got) == SNAPPY_OK && got == dst_n
                   ? 0
                   : -1;
    }
    return -1;
}
