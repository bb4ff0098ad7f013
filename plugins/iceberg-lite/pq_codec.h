/* Parquet page compression: the codecs a data file's pages may use, by
 * their parquet.thrift CompressionCodec numbers. zstd (libzstd) is the
 * sink's default, snappy (libsnappy's C API) and none are settings; the
 * reader accepts all three, so tables written before compression existed
 * (every page uncompressed) still read and append. */
#ifndef TM_ICE_PQ_CODEC_H
#define TM_ICE_PQ_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "ib_buf.h"

typedef enum pq_codec {
    PQ_CODEC_NONE = 0,   /* UNCOMPRESSED */
    PQ_CODEC_SNAPPY = 1, /* SNAPPY */
    PQ_CODEC_ZSTD = 6    /* ZSTD */
} pq_codec;

/* The sink's default ("compression" unset) and what `tidemark table
 * compact` writes. */
#define PQ_CODEC_DEFAULT PQ_CODEC_ZSTD

/* The zstd level pages are written with: libzstd's default, the speed and
 * ratio the benchmarks report (docs/benchmarks.md). */
#define PQ_ZSTD_LEVEL 3

/* A page decompresses to at most this many bytes: a footer or page header
 * claiming more is refused before anything is allocated for it. The
 * writer refuses such a page too, so every file it writes reads back. */
#define PQ_MAX_PAGE_BYTES (1u << 30)

/* The codec named NAME ("zstd", "snappy", "none"): 0, or -1 for any other
 * name. The names the setting takes; PQ_CODEC_NAMES lists them for
 * messages. */
int pq_codec_parse(const char *name, pq_codec *out);
#define PQ_CODEC_NAMES "\"zstd\", \"snappy\" or \"none\""
const char *pq_codec_name(pq_codec c);
/* 1 for a codec this module reads and writes (by its thrift number). */
int pq_codec_known(int64_t thrift_codec);

/* Appends src[0..n) compressed with codec c to out. *ctx is the caller's
 * compression context, made on first use and kept across calls (a writer
 * compresses many pages; a new zstd context each time would cost more
 * than a small page), freed with pq_codec_ctx_free. 0, or -1 (out of
 * memory, or the library refused: out is marked failed). */
int pq_compress(pq_codec c, void **ctx, const void *src, size_t n, ib_buf *out);
void pq_codec_ctx_free(void *ctx);

/* 0 when src[0..n) declares that it decompresses to exactly want bytes
 * (zstd's frame header, snappy's preamble; none: n == want), so a reader
 * allocates only what the data says it needs. -1 otherwise. */
int pq_declared_size_is(pq_codec c, const void *src, size_t n, size_t want);

/* Decompresses src[0..n) into dst, which must come out exactly dst_n
 * bytes long. 0, or -1 when the input is corrupt or its size differs. */
int pq_decompress(pq_codec c, const void *src, size_t n, void *dst,
                  size_t dst_n);

#endif
