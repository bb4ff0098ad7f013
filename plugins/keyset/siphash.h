/* SipHash-2-4 (siphash.c). */
#ifndef TM_KEYSET_SIPHASH_H
#define TM_KEYSET_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 under the 16-byte KEY of the byte TAG (when tag >= 0)
 * followed by IN (LEN bytes): out[0] the 64-bit result, or with WIDE the
 * 128-bit variant's, out[0] its first 8 bytes read little-endian and
 * out[1] the last 8. */
void tk_siphash(const uint8_t key[16], int tag, const void *in, size_t len,
                int wide, uint64_t out[2]);

#endif
