/* The streaming extractor (host/convert/json_extract.c) held to jansson,
 * the reference: every input below, hand-written or generated, must give
 * the same values found and the same conversion outcome through both
 * parsers (convert_diff.h says what is compared).
 *
 * The generated part prints its seed; TM_DIFF_SEED=<n> repeats a run and
 * TM_DIFF_DOCS=<n> sets how many documents it makes (default 300000). */
#include <check.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_main.h"
#include "convert_diff.h"

/* Keys the generator uses, so that these pointers often find something:
 * escaped and raw forms of the same key, '~' and '/' in keys, indexes. */
static const char *const POINTERS[] = {"",
                                       "/a",
                                       "/b",
                                       "/0",
                                       "/1",
                                       "/a/b",
                                       "/a/0",
                                       "/a/1",
                                       "/b/a",
                                       "/~0",
                                       "/~1",
                                       "/a~1b",
                                       "/~01",
                                       "/x y",
                                       "/\xc3\xa9",
                                       "/ab",
                                       "/",
                                       "/a/b/a",
                                       "/0/a",
                                       "/-",
                                       "/00",
                                       "/0/0",
                                       "/\xf0\x9f\x98\x80",
                                       "/a/",
                                       "/b/1/a"};
#define NPOINTERS (sizeof POINTERS / sizeof POINTERS[0])

static tm_diff *diff;

static void setup(void) {
    diff = tm_diff_new(POINTERS, NPOINTERS);
    ck_assert_ptr_nonnull(diff);
}

static void teardown(void) {
    tm_diff_free(diff);
}

/* doc as a C string literal would write it (its first 300 bytes), so that
 * a failing input can be pasted into the corpus. */
static const char *shown(const char *doc, size_t n) {
    static char out[300 * 4 + 1];
    size_t o = 0;
    for (size_t i = 0; i < n && i < 300; i++) {
        unsigned char c = (unsigned char)doc[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"')
            out[o++] = (char)c;
        else
            o += (size_t)sprintf(out + o, "\\x%02x", c);
    }
    out[o] = '\0';
    return out;
}

static void expect_same(const char *doc, size_t n) {
    const char *why = tm_diff_check(diff, doc, n);
    if (why)
        ck_abort_msg("%s, for %zu bytes: \"%s\"", why, n, shown(doc, n));
}

/* ---- (a) hand-written inputs ---- */

static const char *const CORPUS[] = {
    /* escapes */
    "{\"a\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}",
    "{\"a\":\"\\x\"}",
    "{\"a\":\"\\u00e9\\u00E9\"}",
    "{\"a\":\"\\u00g9\"}",
    "{\"a\":\"\\u00\"}",
    "{\"a\":\"\\\"}",
    "{\"a\":\"tab\there\"}",
    "{\"a\":\"\x7f\"}",
    "{\"a\":\"\\u001f\\u007f\"}",
    "\"\\/\"",
    /* surrogates */
    "{\"a\":\"\\ud83d\\ude00\"}",
    "{\"a\":\"\\uD83D\\uDE00\"}",
    "{\"a\":\"\\ud83d\"}",
    "{\"a\":\"\\ude00\"}",
    "{\"a\":\"\\ud83d\\u0041\"}",
    "{\"a\":\"\\ud83d\\ud83d\"}",
    "{\"a\":\"\\ud83dx\"}",
    "{\"a\":\"\\ud83d\\n\"}",
    "{\"a\":\"\\udbff\\udfff\"}",
    "{\"a\":\"\\ud800\\udc00\"}",
    "{\"\\ud83d\\ude00\":1}",
    /* NUL */
    "{\"a\":\"\\u0000\"}",
    "{\"a\\u0000\":1}",
    "{\"a\":\"x\\u0000y\"}",
    "\"\\u0000\"",
    /* UTF-8 */
    "{\"a\":\"\xc3\xa9\"}",
    "{\"\xc3\xa9\":\"\xf0\x9f\x98\x80\"}",
    "{\"a\":\"\xc0\xaf\"}",
    "{\"a\":\"\xe0\x80\xaf\"}",
    "{\"a\":\"\xf0\x80\x80\xaf\"}",
    "{\"a\":\"\xed\xa0\x80\"}",
    "{\"a\":\"\xf4\x90\x80\x80\"}",
    "{\"a\":\"\xf5\x80\x80\x80\"}",
    "{\"a\":\"\x80\"}",
    "{\"a\":\"\xc3\"}",
    "{\"a\":\"\xe2\x82\"}",
    "{\"a\":\"\xff\"}",
    "\xc3\xa9",
    "{\"a\":1}\xc3\xa9",
    "\xef\xbb\xbf{}",
    /* numbers */
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "99999999999999999999",
    "-0",
    "0",
    "-0.0",
    "0.0",
    "1e400",
    "-1e400",
    "1e-400",
    "1.7976931348623157e308",
    "1.7976931348623158e308",
    "1.7976931348623159e308",
    "17976931348623158079372897140530341507993413271003782693617377898044496829"
    "27647509466490179775872070963302864166928879109465555478519404026306574886"
    "71505820681908902000708383676273854845817711531764475730270069855571366959"
    "622842914819860834936475292719074168444365510704342711559699508093165372e"
    "0",
    "1e308",
    "10e307",
    "0.000000000000000000000000000001e330",
    "1E2",
    "1e+2",
    "1e-2",
    "1.5E+10",
    "01",
    "-01",
    "1.",
    ".5",
    "1.e5",
    "1e",
    "1e+",
    "+1",
    "-",
    "--1",
    "0x10",
    "1_000",
    "Infinity",
    "NaN",
    "-Infinity",
    "2.5e-3",
    "123456789012345678901234567890",
    "0.1",
    "1.0",
    "[1.0,1e3]",
    "{\"a\":1.5,\"b\":2}",
    "{\"a\":9223372036854775807}",
    "{\"a\":1e400}",
    "{\"x\":1e400}",
    "{\"x\":99999999999999999999}",
    "[0,1,2]",
    "[-0,-0.0]",
    "1e99999999999999999999",
    "0e999999",
    "-0e-999999",
    "1.5e-999999999999999",
    /* literals */
    "true",
    "false",
    "null",
    "True",
    "nul",
    "truex",
    "true1",
    "[true,false]",
    "{\"a\":null}",
    "{\"a\":nulll}",
    "[null,]",
    /* whitespace */
    " \t\r\n{ \"a\" : 1 , \"b\" : [ 1 , 2 ] } \t\r\n",
    "\f{}",
    "{}\v",
    "\xc2\xa0{}",
    "[1,\n2]",
    "\n\n\"x\n\"",
    /* trailing garbage, empty input, top-level scalars */
    "",
    " ",
    "{}x",
    "{} {}",
    "[]]",
    "1 2",
    "\"a\"\"b\"",
    "{},",
    "{\"a\":1}}",
    "42",
    "\"text\"",
    "1.5",
    "\"2024-05-01T12:00:00Z\"",
    "1714564800123",
    /* objects and arrays, broken */
    "{",
    "[",
    "{\"a\"",
    "{\"a\":",
    "{\"a\":1",
    "{\"a\":1,",
    "{\"a\":1,}",
    "[1,]",
    "[,1]",
    "{,}",
    "{\"a\" 1}",
    "{a:1}",
    "{'a':1}",
    "{\"a\":1;\"b\":2}",
    "{1:1}",
    "[1 2]",
    "{\"a\":[}",
    "{\"a\":{]}",
    "]",
    "}",
    /* duplicate keys */
    "{\"a\":1,\"a\":2}",
    "{\"a\":{\"b\":1},\"a\":{\"c\":2}}",
    "{\"a\":{\"b\":1},\"a\":5}",
    "{\"a\":5,\"a\":{\"b\":1}}",
    "{\"a\":{\"b\":1,\"b\":\"x\"}}",
    "{\"a\":1,\"\\u0061\":2}",
    "{\"a\":[1,2],\"a\":[3]}",
    "{\"a\":1,\"a\":2,\"a\":null}",
    "{\"a\":{\"b\":{\"a\":1}},\"a\":{\"b\":{\"a\":2}}}",
    /* pointers: ~0, ~1, indexes */
    "{\"~\":1,\"/\":2,\"a/b\":3,\"~1\":4,\"x y\":5,\"\":6}",
    "{\"\\u007e\":1,\"\\/\":2,\"a\\/b\":3}",
    "{\"ab\":1,\"a\\u0062\":2}",
    "[[1,2],{\"a\":3}]",
    "[{\"a\":1},{\"a\":2}]",
    "{\"0\":{\"0\":1}}",
    "[[[\"x\"]]]",
    "{\"-\":1,\"00\":2}",
    "[1,2,3]",
    "{\"a\":[\"x\",\"y\"],\"b\":[0,{\"a\":\"z\"}]}",
    "{\"\xc3\xa9\":1,\"\\u00e9\":2}",
    "{\"\xf0\x9f\x98\x80\":\"smile\"}",
    "{\"a\":{\"\":{\"\":1}}}",
    /* column types */
    "{\"a\":\"2024-05-01T12:00:00.123456+02:00\",\"b\":\"2024-02-30T00:00:"
    "00Z\"}",
    "{\"a\":\"12\",\"b\":12,\"0\":1.0,\"1\":true}",
    "{\"a\":-9223372036854775808,\"b\":9223372036854775807}",
    "{\"a\":{\"z\":1,\"a\":0.1},\"b\":[1,{\"y\":2,\"x\":[]}]}",
    "{\"a\":\"a very long string that is longer than sixty bytes, so the "
    "detail cuts it \xc3\xa9\xc3\xa9\xc3\xa9\"}",
    "{\"a\":\"ctl\\u0001\\u001f here\",\"b\":{\"k\":\"\\u2028\"}}",
    "{\"a\":[1.25e300,1e-320,5e-324]}",
};

START_TEST(corpus_agrees) {
    for (size_t i = 0; i < sizeof CORPUS / sizeof CORPUS[0]; i++)
        expect_same(CORPUS[i], strlen(CORPUS[i]));
    /* With a raw NUL byte inside and at the end. */
    expect_same("{\"a\":\"x\0y\"}", 11);
    expect_same("{\"a\":1}\0", 8);
    expect_same("\0", 1);
    /* jansson loses one NUL byte after a number or a literal. */
    static const char *const LOST_NUL[] = {
        "1\0",     "1\0\0",
        "[1\0]",   "[1\0,2]",
        "true\0",  "{\"a\":null\0}",
        "\"x\"\0", "1.5\0 ",
        "-0\0",    "{\"a\":1e2\0,\"b\":false\0}"};
    static const size_t LOST_NUL_LEN[] = {2, 3, 4, 6, 5, 11, 4, 5, 3, 21};
    for (size_t i = 0; i < sizeof LOST_NUL / sizeof LOST_NUL[0]; i++)
        expect_same(LOST_NUL[i], LOST_NUL_LEN[i]);
    size_t valid, invalid;
    tm_diff_counts(diff, &valid, &invalid);
    ck_assert_uint_gt(valid, 50);
    ck_assert_uint_gt(invalid, 50);
}
END_TEST

/* n levels of arrays or of {"a": ...} around a scalar, or empty inside. */
static char *nested(size_t n, int objects, const char *inner) {
    size_t open = objects ? 5 : 1, len = n * (open + 1) + strlen(inner) + 1;
    char *s = malloc(len), *p = s;
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i < n; i++) {
        memcpy(p, objects ? "{\"a\":" : "[", open);
        p += open;
    }
    p += sprintf(p, "%s", inner);
    for (size_t i = 0; i < n; i++)
        *p++ = objects ? '}' : ']';
    *p = '\0';
    return s;
}

START_TEST(depth_limit_agrees) {
    /* jansson counts every value, scalars too: 2048 levels, no more. */
    static const size_t LEVELS[] = {1,    2,    100,  2046, 2047,
                                    2048, 2049, 2050, 5000};
    static const char *const INNER[] = {"", "1", "[]", "{}", "\"x\"", "[1"};
    for (size_t l = 0; l < sizeof LEVELS / sizeof LEVELS[0]; l++)
        for (size_t k = 0; k < sizeof INNER / sizeof INNER[0]; k++)
            for (int objects = 0; objects < 2; objects++) {
                if (objects && !*INNER[k])
                    continue; /* {"a":} is a plain syntax error */
                char *s = nested(LEVELS[l], objects, INNER[k]);
                expect_same(s, strlen(s));
                free(s);
            }
    char *ok = nested(2047, 0, "1"), *deep = nested(2048, 0, "1");
    json_t *j = json_loads(ok, JSON_DECODE_ANY, NULL);
    ck_assert_ptr_nonnull(j); /* the limit is where this test thinks */
    json_decref(j);
    ck_assert_ptr_null(json_loads(deep, JSON_DECODE_ANY, NULL));
    free(ok);
    free(deep);
}
END_TEST

/* ---- (b) generated and mutated documents ---- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t next(rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static size_t below(rng *r, size_t n) {
    return (size_t)(next(r) % n);
}

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        ck_assert_ptr_nonnull(b->p);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(buf *b, const char *s) {
    put(b, s, strlen(s));
}

static const char *const KEYS[] = {"a",
                                   "b",
                                   "0",
                                   "1",
                                   "~",
                                   "/",
                                   "a/b",
                                   "~1",
                                   "x y",
                                   "",
                                   "ab",
                                   "a\\u0062",
                                   "\\u0061",
                                   "\xc3\xa9",
                                   "\\u00e9",
                                   "-",
                                   "00",
                                   "\\/",
                                   "\xf0\x9f\x98\x80",
                                   "\\ud83d\\ude00"};

static const char *const NUMBERS[] = {"0",
                                      "-0",
                                      "1",
                                      "-1",
                                      "9223372036854775807",
                                      "9223372036854775808",
                                      "-9223372036854775808",
                                      "-9223372036854775809",
                                      "1.5",
                                      "1e400",
                                      "1e-400",
                                      "1E2",
                                      "0.1",
                                      "1.7976931348623157e308",
                                      "1.8e308",
                                      "-0.0",
                                      "2.5e-3",
                                      "123456789012345678901234567890",
                                      "1714564800123",
                                      "1e308",
                                      "5e-324"};

static const char *const STRING_PIECES[] = {
    "x", "hello", " ", "\\n", "\\\"", "\\\\", "\\/", "\\u00e9", "\\u0041",
    "\\ud83d\\ude00", "\xc3\xa9", "\xf0\x9f\x98\x80", "\\t", "~", "/",
    "2024-05-01T12:00:00Z", "2024-05-01 12:00:00.5+02:00", "12", "true",
    /* rarely, what jansson refuses */
    "\\u0000", "\\ud83d", "\\ude00", "\x01", "\xc0\xaf", "\xed\xa0\x80", "\\q",
    "\xff"};
#define NSAFE_PIECES 19

static void gen_string(rng *r, buf *b, int bad) {
    puts_(b, "\"");
    size_t n = below(r, 5);
    for (size_t i = 0; i < n; i++) {
        size_t k = bad && below(r, 20) == 0
                       ? below(r, sizeof STRING_PIECES / sizeof(char *))
                       : below(r, NSAFE_PIECES);
        puts_(b, STRING_PIECES[k]);
    }
    puts_(b, "\"");
}

static void ws(rng *r, buf *b) {
    static const char *const WS[] = {" ", "\n", "\t", "\r", "  \n "};
    if (below(r, 6) == 0)
        puts_(b, WS[below(r, 5)]);
}

static void gen_value(rng *r, buf *b, int depth, int bad) {
    size_t kind = below(r, depth > 6 ? 6 : 9);
    char num[32];
    ws(r, b);
    switch (kind) {
    case 0: puts_(b, below(r, 2) ? "true" : "false"); break;
    case 1: puts_(b, "null"); break;
    case 2:
        puts_(b, NUMBERS[below(r, sizeof NUMBERS / sizeof NUMBERS[0])]);
        break;
    case 3:
        snprintf(num, sizeof num, "%lld",
                 (long long)(next(r) >> below(r, 64)) * (below(r, 2) ? 1 : -1));
        puts_(b, num);
        break;
    case 4:
        snprintf(num, sizeof num, "%.*g", (int)below(r, 18) + 1,
                 (double)(int64_t)next(r) / (double)(1ULL << below(r, 63)));
        puts_(b, num);
        break;
    case 5: gen_string(r, b, bad); break;
    case 6:
    case 7: {
        puts_(b, "{");
        size_t n = below(r, 5);
        for (size_t i = 0; i < n; i++) {
            if (i)
                puts_(b, ",");
            ws(r, b);
            puts_(b, "\"");
            puts_(b, KEYS[below(r, sizeof KEYS / sizeof KEYS[0])]);
            puts_(b, "\"");
            ws(r, b);
            puts_(b, ":");
            gen_value(r, b, depth + 1, bad);
        }
        ws(r, b);
        puts_(b, "}");
        break;
    }
    default: {
        puts_(b, "[");
        size_t n = below(r, 5);
        for (size_t i = 0; i < n; i++) {
            if (i)
                puts_(b, ",");
            gen_value(r, b, depth + 1, bad);
        }
        puts_(b, "]");
    }
    }
    ws(r, b);
}

/* Byte-level damage: what a broken producer or a fuzzer would do. */
static void mutate(rng *r, buf *b) {
    static const char INTERESTING[] = "\"\\{}[],:0-e.+ \x00\x80\xc0\xed\xf4\xff"
                                      "tnu";
    size_t times = 1 + below(r, 3);
    for (size_t t = 0; t < times && b->n; t++) {
        size_t at = below(r, b->n);
        switch (below(r, 5)) {
        case 0: b->p[at] = (char)next(r); break;
        case 1: b->p[at] = INTERESTING[below(r, sizeof INTERESTING - 1)]; break;
        case 2:
            memmove(b->p + at, b->p + at + 1, b->n - at - 1);
            b->n--;
            break;
        case 3: b->n = at; break;
        default: {
            size_t len = below(r, b->n - at) + 1;
            char *copy = malloc(len);
            ck_assert_ptr_nonnull(copy);
            memcpy(copy, b->p + at, len);
            put(b, copy, len);
            free(copy);
        }
        }
    }
}

/* Pointers to a generated document's own values, besides the fixed ones:
 * the first this many in document order. */
#define OWN_PATHS 64

static uint64_t env_number(const char *name, uint64_t fallback) {
    const char *s = getenv(name);
    return s && *s ? strtoull(s, NULL, 0) : fallback;
}

START_TEST(generated_documents_agree) {
    uint64_t seed = env_number("TM_DIFF_SEED", (uint64_t)time(NULL));
    uint64_t docs = env_number("TM_DIFF_DOCS", 300000);
    printf("test_convert_differential: TM_DIFF_SEED=%llu TM_DIFF_DOCS=%llu\n",
           (unsigned long long)seed, (unsigned long long)docs);
    fflush(stdout);
    rng r = {seed};
    buf b = {0};
    for (uint64_t i = 0; i < docs; i++) {
        b.n = 0;
        puts_(&b, "");
        int bad = below(&r, 4) == 0;
        gen_value(&r, &b, 0, bad);
        if (below(&r, 3) == 0)
            mutate(&r, &b);
        const char *why = tm_diff_check(diff, b.p, b.n);
        if (!why)
            why = tm_diff_check_own_paths(diff, b.p, b.n, OWN_PATHS);
        if (why)
            ck_abort_msg("document %llu of seed %llu: %s, for %zu bytes: "
                         "\"%s\"",
                         (unsigned long long)i, (unsigned long long)seed, why,
                         b.n, shown(b.p, b.n));
    }
    size_t valid, invalid;
    tm_diff_counts(diff, &valid, &invalid);
    printf("test_convert_differential: %zu JSON, %zu not JSON\n", valid,
           invalid);
    ck_assert_uint_gt(valid, docs / 4);
    ck_assert_uint_gt(invalid, docs / 10);
    free(b.p);
}
END_TEST

/* Decimal reals around the limits of the extractor's exact arithmetic
 * (json_lex.c, real_fast): mantissas of 1 to 20 digits (2^53 = 9007199254740992
 * among them), the point anywhere, exponents near +-22 and beyond. Each
 * must be the double jansson reads, bit for bit, and be written as
 * jansson writes it. */
static void gen_decimal(rng *r, buf *b) {
    static const char *const MANTISSAS[] = {
        "9007199254740991",  "9007199254740992",     "9007199254740993",
        "18014398509481984", "12345678901234567890", "4503599627370497"};
    char digits[24];
    size_t n;
    if (below(r, 4) == 0) {
        const char *m =
            MANTISSAS[below(r, sizeof MANTISSAS / sizeof *MANTISSAS)];
        n = strlen(m);
        memcpy(digits, m, n);
    } else {
        n = 1 + below(r, 20);
        for (size_t i = 0; i < n; i++)
            digits[i] = (char)('0' + below(r, 10));
        if (n > 1 && digits[0] == '0')
            digits[0] = '1'; /* no leading zero but "0.x" below */
    }
    if (below(r, 2))
        puts_(b, "-");
    size_t point = below(r, n + 1); /* n: no point */
    if (point == 0 && below(r, 2)) {
        puts_(b, "0.");
        for (size_t z = below(r, 4); z > 0; z--)
            puts_(b, "0");
        put(b, digits, n);
    } else {
        put(b, digits, point ? point : n);
        if (point && point < n) {
            puts_(b, ".");
            put(b, digits + point, n - point);
        }
    }
    if (below(r, 3) || point == n || point == 0) {
        char e[32];
        long x = (long)below(r, 61) - 30;
        snprintf(e, sizeof e, "%s%s%ld", below(r, 2) ? "e" : "E",
                 x >= 0 && below(r, 2) ? "+" : "", x);
        puts_(b, e);
    }
}

START_TEST(decimal_reals_agree) {
    uint64_t seed = env_number("TM_DIFF_SEED", (uint64_t)time(NULL));
    rng r = {seed};
    buf b = {0};
    for (int doc = 0; doc < 5000; doc++) {
        b.n = 0;
        puts_(&b, "[");
        for (int i = 0; i < 16; i++) {
            if (i)
                puts_(&b, ",");
            gen_decimal(&r, &b);
        }
        puts_(&b, "]");
        const char *why = tm_diff_check(diff, b.p, b.n);
        if (!why)
            why = tm_diff_check_own_paths(diff, b.p, b.n, 17);
        if (why)
            ck_abort_msg("seed %llu: %s, for \"%s\"", (unsigned long long)seed,
                         why, shown(b.p, b.n));
    }
    size_t valid, invalid;
    tm_diff_counts(diff, &valid, &invalid);
    ck_assert_uint_eq(valid, 5000); /* none overflows: all are JSON */
    free(b.p);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("convert_differential");
    TCase *tc = tcase_create("extractor_vs_jansson");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 1800); /* hundreds of thousands of documents */
    tcase_add_test(tc, corpus_agrees);
    tcase_add_test(tc, depth_limit_agrees);
    tcase_add_test(tc, generated_documents_agree);
    tcase_add_test(tc, decimal_reals_agree);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 0);
}
