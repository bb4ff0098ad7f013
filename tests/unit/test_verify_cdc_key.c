/* verify's key of a change event (host/verify/cdc_key.h): the key
 * columns only, in config order, and a float key of -0.0 the same key
 * as 0.0, as both sinks store them; the canonical form of dedup
 * identities keeps the sign (stored identities depend on it). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "convert/canonical.h"
#include "verify/cdc_key.h"
#include "check_main.h"

static const tm_column COLS[] = {
    {.struct_size = sizeof(tm_column), .name = "name", .type = TM_TYPE_TEXT},
    {.struct_size = sizeof(tm_column),
     .name = "f",
     .type = TM_TYPE_FLOAT,
     .key = 1},
    {.struct_size = sizeof(tm_column),
     .name = "id",
     .type = TM_TYPE_INT,
     .key = 1},
};

static tm_value real(double f) {
    tm_value v = {.struct_size = sizeof(tm_value)};
    v.v.f = f;
    return v;
}

static tm_value integer(int64_t i) {
    tm_value v = {.struct_size = sizeof(tm_value)};
    v.v.i = i;
    return v;
}

static tm_value text(const char *s) {
    tm_value v = {.struct_size = sizeof(tm_value)};
    v.v.s.ptr = s;
    v.v.s.len = strlen(s);
    return v;
}

static void key_is(double f, const char *name, const char *want) {
    tm_value vals[] = {text(name), real(f), integer(7)};
    char *k = tm_verify_cdc_key(COLS, 3, vals);
    ck_assert_ptr_nonnull(k);
    ck_assert_str_eq(k, want);
    free(k);
}

START_TEST(negative_zero_is_zero) {
    key_is(0.0, "a", "[0.0,7]");
    key_is(-0.0, "b", "[0.0,7]"); /* the non-key column is not in it */
    key_is(1.5, "a", "[1.5,7]");
    key_is(-1.5, "a", "[-1.5,7]");
    key_is(-5e-324, "a", "[-4.9406564584124654e-324,7]");
}
END_TEST

START_TEST(null_key_value) {
    tm_value vals[] = {text("a"), real(0.0), integer(7)};
    vals[1].is_null = 1;
    char *k = tm_verify_cdc_key(COLS, 3, vals);
    ck_assert_ptr_nonnull(k);
    ck_assert_str_eq(k, "[null,7]");
    free(k);
}
END_TEST

/* Dedup identities are stored: their canonical form must not change. */
START_TEST(identity_form_keeps_sign) {
    tm_value vals[] = {text("a"), real(-0.0), integer(7)};
    const size_t idx[] = {1};
    char *k = tm_canonical_array(COLS, vals, idx, 1);
    ck_assert_ptr_nonnull(k);
    ck_assert_str_eq(k, "[-0.0]");
    free(k);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("verify_cdc_key");
    TCase *t = tcase_create("all");
    tcase_add_test(t, negative_zero_is_zero);
    tcase_add_test(t, null_key_value);
    tcase_add_test(t, identity_form_keeps_sign);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
