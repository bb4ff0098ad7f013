/* Record conversion allocates nothing per record once its batch's arena
 * has room: malloc is counted (the test links with --wrap=malloc, so every
 * call from the host's objects comes through here) while records go
 * through a warmed-up converter and arena. The mapping has 40 pointers,
 * more than the values found that fit on the stack. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/connector_config.h"
#include "convert/arena.h"
#include "convert/record_convert.h"
#include "check_main.h"
#include "config_ok.h"

#define NCOLS 40

void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);

static size_t mallocs;

void *__wrap_malloc(size_t n) {
    mallocs++;
    return __real_malloc(n);
}

/* A json-mode config of NCOLS int columns c0..c39 at /c0../c39. */
static tm_connector_config *forty_columns(void) {
    char cols[NCOLS * 64] = "";
    size_t at = 0;
    for (int i = 0; i < NCOLS; i++)
        at += (size_t)snprintf(cols + at, sizeof cols - at,
                               "%s{\"name\":\"c%d\",\"type\":\"int\","
                               "\"pointer\":\"/c%d\"}",
                               i ? "," : "", i, i);
    char text[sizeof cols + 512];
    snprintf(text, sizeof text,
             "{\"name\":\"conv\","
             "\"kafka\":{\"bootstrap_servers\":\"k:9092\",\"topics\":[\"t\"]},"
             "\"sink\":{\"plugin\":\"sqlite\"},"
             "\"mapping\":{\"mode\":\"json\",\"columns\":[%s]}}",
             cols);
    return tm_test_config_ok(text, "t.json");
}

START_TEST(forty_pointers_convert_without_malloc) {
    tm_connector_config *cfg = forty_columns();
    size_t at_start = mallocs;
    tm_converter *cv = tm_converter_new(cfg);
    ck_assert_ptr_nonnull(cv);
    /* The counter sees the host's mallocs (the plan is malloc'd): else a
     * count of 0 below would prove nothing. */
    ck_assert_msg(mallocs > at_start, "inconclusive: malloc is not counted");
    /* {"c0":1000,"c1":1001,...}: column i's value is 1000 + i. */
    char value[NCOLS * 24] = "{";
    size_t at = 1;
    for (int i = 0; i < NCOLS; i++)
        at += (size_t)snprintf(value + at, sizeof value - at, "%s\"c%d\":%d",
                               i ? "," : "", i, 1000 + i);
    at += (size_t)snprintf(value + at, sizeof value - at, "}");
    tm_conv_input in = {
        .topic = "t", .timestamp_ms = -1, .value = value, .value_len = at};
    tm_arena a;
    tm_arena_init(&a);
    for (int round = 0; round < 2; round++) {
        /* Round 0 warms up (the arena's chunk, any buffer kept for later
         * records); round 1 counts, around tm_convert alone (Check's own
         * asserts allocate too). */
        size_t counted = 0;
        for (int r = 0; r < 100; r++) {
            tm_conv_result res;
            size_t before = mallocs;
            tm_conv_outcome rc = tm_convert(cv, &a, &in, &res);
            counted += mallocs - before;
            ck_assert_int_eq(rc, TM_CONV_ROW);
            for (int i = 0; i < NCOLS; i++) {
                ck_assert(!res.values[i].is_null);
                ck_assert_int_eq(res.values[i].v.i, 1000 + i);
            }
            tm_arena_reset(&a);
        }
        if (round == 1)
            ck_assert_msg(counted == 0, "%zu mallocs converting 100 records",
                          counted);
    }
    tm_arena_free(&a);
    tm_converter_free(cv);
    tm_config_free(cfg);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("convert_alloc");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, forty_pointers_convert_without_malloc);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
