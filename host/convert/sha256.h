/* SHA-256 (FIPS 180-4), for the identity hash of deduplicated records.
 * Written here rather than taken from a crypto library: the host needs
 * one digest of short canonical texts, not a new dependency. */
#ifndef TM_SHA256_H
#define TM_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define TM_SHA256_LEN     32
#define TM_SHA256_HEX_LEN 64 /* lowercase hex digits, without the NUL */

typedef struct tm_sha256 {
    uint32_t h[8];
    uint64_t bits; /* message length so far */
    uint8_t buf[64];
    size_t nbuf;
} tm_sha256;

void tm_sha256_init(tm_sha256 *c);
void tm_sha256_update(tm_sha256 *c, const void *data, size_t len);
void tm_sha256_final(tm_sha256 *c, uint8_t out[TM_SHA256_LEN]);

/* The digest of data as lowercase hex into out (TM_SHA256_HEX_LEN + 1
 * bytes, NUL-terminated). */
void tm_sha256_hex(const void *data, size_t len,
                   char out[TM_SHA256_HEX_LEN + 1]);

#endif
