/* SipHash-2-4 of the SQLite sink's keys held in memory (siphash.c) against
 * the reference vectors of the algorithm's authors: the key 00 01 .. 0f,
 * the message 00 01 .. of each length; the 64-bit outputs read as the
 * little-endian numbers of their bytes (15 bytes: the paper's example,
 * a129ca6149be45e5), and the 128-bit output of the empty message. A
 * leading tag byte is the same as that byte before the message. */
#include <check.h>
#include <stdint.h>

#include "check_main.h"
#include "siphash.h"

static uint8_t key[16], msg[64];

static void setup(void) {
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
}

START_TEST(reference_vectors_64) {
    static const struct {
        size_t len;
        uint64_t want;
    } V[] = {{0, 0x726fdb47dd0e0e31ULL},
             {1, 0x74f839c593dc67fdULL},
             {2, 0x0d6c8009d9a94f5aULL},
             {15, 0xa129ca6149be45e5ULL}};
    for (size_t i = 0; i < sizeof V / sizeof V[0]; i++) {
        uint64_t out[2];
        tk_siphash(key, -1, msg, V[i].len, 0, out);
        ck_assert_msg(out[0] == V[i].want, "length %zu: %016llx, want %016llx",
                      V[i].len, (unsigned long long)out[0],
                      (unsigned long long)V[i].want);
    }
}
END_TEST

START_TEST(reference_vector_128) {
    uint64_t out[2];
    tk_siphash(key, -1, msg, 0, 1, out);
    /* a3 81 7f 04 ba 25 a8 e6 6d f6 72 14 c7 55 02 93 */
    ck_assert_uint_eq(out[0], 0xe6a825ba047f81a3ULL);
    ck_assert_uint_eq(out[1], 0x930255c71472f66dULL);
}
END_TEST

START_TEST(tag_is_a_leading_byte) {
    for (size_t len = 0; len < 40; len++) {
        for (int wide = 0; wide < 2; wide++) {
            uint64_t tagged[2] = {0, 0}, plain[2] = {0, 0};
            tk_siphash(key, msg[0], msg + 1, len, wide, tagged);
            tk_siphash(key, -1, msg, len + 1, wide, plain);
            ck_assert_msg(tagged[0] == plain[0] && tagged[1] == plain[1],
                          "length %zu, wide %d", len, wide);
        }
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("sqlite_siphash");
    TCase *tc = tcase_create("siphash");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, reference_vectors_64);
    tcase_add_test(tc, reference_vector_128);
    tcase_add_test(tc, tag_is_a_leading_byte);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
