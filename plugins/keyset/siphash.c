/* SipHash-2-4 (Aumasson and Bernstein), its 64- and 128-bit outputs: the
 * digests of business keys held in memory (keyset.c). Written from the
 * algorithm's description; the reference vectors are checked by
 * test_sqlite_siphash. No SQLite, no host: a file of its own so that the
 * test links it directly (the plugin exports nothing). */
#include "siphash.h"

static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                               \
    do {                                                                       \
        v0 += v1;                                                              \
        v1 = ROTL(v1, 13);                                                     \
        v1 ^= v0;                                                              \
        v0 = ROTL(v0, 32);                                                     \
        v2 += v3;                                                              \
        v3 = ROTL(v3, 16);                                                     \
        v3 ^= v2;                                                              \
        v0 += v3;                                                              \
        v3 = ROTL(v3, 21);                                                     \
        v3 ^= v0;                                                              \
        v2 += v1;                                                              \
        v1 = ROTL(v1, 17);                                                     \
        v1 ^= v2;                                                              \
        v2 = ROTL(v2, 32);                                                     \
    } while (0)

/* SipHash-2-4 of IN (LEN bytes, after the optional byte TAG when tag >= 0)
 * under the 16-byte KEY; out[0] the 64-bit result, out[1] too when wide
 * (the 128-bit variant). */
void tk_siphash(const uint8_t key[16], int tag, const void *in, size_t len,
                int wide, uint64_t out[2]) {
    uint64_t k0 = rd64(key), k1 = rd64(key + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
    uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
    uint64_t v3 = 0x7465646279746573ULL ^ k1;
    if (wide)
        v1 ^= 0xee;
    const uint8_t *p = in;
    size_t total = len + (tag >= 0);
    uint8_t block[8];
    size_t fill = 0;
    if (tag >= 0)
        block[fill++] = (uint8_t)tag;
    for (size_t i = 0; i < len; i++) {
        block[fill++] = p[i];
        if (fill == 8) {
            uint64_t m = rd64(block);
            v3 ^= m;
            SIPROUND;
            SIPROUND;
            v0 ^= m;
            fill = 0;
        }
    }
    uint64_t b = (uint64_t)total << 56;
    for (size_t i = 0; i < fill; i++)
        b |= (uint64_t)block[i] << (8 * i);
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= wide ? 0xee : 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    out[0] = v0 ^ v1 ^ v2 ^ v3;
    if (!wide)
        return;
    v1 ^= 0xdd;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    out[1] = v0 ^ v1 ^ v2 ^ v3;
}
