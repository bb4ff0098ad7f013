/* The set's generations (plugins/keyset, tk_tab_drop_gens), as the
 * PostgreSQL sink follows another host's removal of batch rows: the keys
 * of a span of generations go, every other key stays findable, however
 * the removals shift the runs (keys crowded onto few home slots, runs that
 * wrap past the table's end) and across the 32-bit wrap of generations. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "check_main.h"
#include "keyset.h"

#define NKEYS 700 /* of 1024 slots */

static uint64_t next(uint64_t *x) {
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 11;
}

/* NKEYS keys, key i of generation BASE + gen_of(i); their home slots among
 * a few (B's low bits from a small range, some near the table's end). */
static void fill(tk_tab *t, tk_key *keys, uint32_t *gens, uint32_t base) {
    uint64_t x = 42;
    *t = (tk_tab){.gens = 1};
    ck_assert_int_eq(tk_tab_grow(t, NKEYS), TK_OK);
    ck_assert_uint_eq(t->mask + 1, 1024);
    for (int i = 0; i < NKEYS; i++) {
        uint64_t b = next(&x) << 12 | (next(&x) % 2 ? 1020 + i % 4 : i % 37);
        keys[i] = (tk_key){next(&x) | 1, b, (uint64_t)i};
        gens[i] = base + (uint32_t)(next(&x) % 10);
        t->put_gen = gens[i];
        ck_assert_int_eq(tk_tab_put(t, keys[i]), TK_OK);
    }
    ck_assert_uint_eq(t->n, NKEYS);
}

static void check_span(uint32_t base, uint32_t after, uint32_t upto) {
    static tk_key keys[NKEYS];
    static uint32_t gens[NKEYS];
    tk_tab t;
    fill(&t, keys, gens, base);
    size_t want = 0;
    for (int i = 0; i < NKEYS; i++)
        want += gens[i] - after - 1 < upto - after;
    ck_assert_msg(want > 0 && want < NKEYS, "inconclusive: %zu of %d in span",
                  want, NKEYS);
    ck_assert_uint_eq(tk_tab_drop_gens(&t, after, upto), want);
    ck_assert_uint_eq(t.n, NKEYS - want);
    for (int i = 0; i < NKEYS; i++) {
        int gone = gens[i] - after - 1 < upto - after;
        tk_key *e = tk_tab_find(&t, keys[i].a, keys[i].b);
        ck_assert_msg(gone ? e == NULL : e && e->ph == (uint64_t)i,
                      "key %d of generation %u after dropping (%u, %u]: %s", i,
                      gens[i], after, upto, e ? "found" : "missing");
        if (e)
            ck_assert_uint_eq(t.gen[e - t.slot], gens[i]);
    }
    tk_tab_clear(&t);
}

START_TEST(drop_a_span_of_generations) {
    check_span(100, 102, 106);
}
END_TEST

START_TEST(drop_across_the_32_bit_wrap) {
    check_span(UINT32_MAX - 4, UINT32_MAX - 3, 2);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("pg_keyset_gens");
    TCase *tc = tcase_create("gens");
    tcase_add_test(tc, drop_a_span_of_generations);
    tcase_add_test(tc, drop_across_the_32_bit_wrap);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 0);
}
