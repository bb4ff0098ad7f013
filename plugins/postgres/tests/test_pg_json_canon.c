/* json_canon.c under memory exhaustion: every out of memory while making
 * jsonb's text canonical must come back as one (out->oom set, so scan
 * fails with "out of memory"), never as "not JSON" (the row would be given
 * without values, hiding the failure). The buffer functions of conn.c are
 * replaced here by ones that fail their Kth growth, for every K until a
 * run needs no more than K. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "json_canon.h"

static int grows, fail_at; /* fail the fail_at-th growth (0: none) */

void pg_buf_addn(pg_buf *b, const char *s, size_t n) {
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 16;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = ++grows == fail_at ? NULL : realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void pg_buf_add(pg_buf *b, const char *s) {
    pg_buf_addn(b, s, strlen(s));
}

void pg_buf_free(pg_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* Nested objects, arrays and strings: growths in keys, member values
 * (where the old code lost the flag) and the output. */
static const char *const TEXT =
    "{\"outer\": {\"b\": [1, 2.5, \"two\"], \"a\": {\"deep\": \"value\"}}, "
    "\"k\": \"v\"}";
static const char *const CANON =
    "{\"k\":\"v\",\"outer\":{\"a\":{\"deep\":\"value\"},\"b\":[1,2.5,"
    "\"two\"]}}";

START_TEST(every_oom_is_reported_as_oom) {
    int injected = 0;
    for (fail_at = 1;; fail_at++) {
        grows = 0;
        pg_buf out = {0};
        int rc = pg_json_canonical(TEXT, strlen(TEXT), &out);
        int hit = grows >= fail_at;
        if (!hit) { /* no growth failed: the text itself */
            ck_assert_int_eq(rc, 0);
            ck_assert_str_eq(out.p, CANON);
            pg_buf_free(&out);
            break;
        }
        injected++;
        ck_assert_msg(rc == -1 && out.oom,
                      "growth %d failed: pg_json_canonical gave %d with "
                      "oom %d (an out of memory taken for no JSON)",
                      fail_at, rc, out.oom);
        pg_buf_free(&out);
    }
    ck_assert_msg(injected > 5, "inconclusive: only %d growths failed",
                  injected);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("pg_json_canon");
    TCase *tc = tcase_create("oom");
    tcase_add_test(tc, every_oom_is_reported_as_oom);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 0);
}
