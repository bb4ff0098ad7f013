/* Record conversion (host/convert): each column type and each failure
 * reason, the filter, JSON pointers, raw mode, headers, timestamps, big and
 * binary values, canonical JSON. Expected values are worked out from
 * docs/configuration.md ("How records are converted"), not taken from
 * the program's output. */
#include <check.h>
#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/connector_config.h"
#include "convert/batch_builder.h"
#include "convert/bytes_json.h"
#include "convert/canonical.h"
#include "convert/json_pointer.h"
#include "convert/timestamp.h"
#include "check_main.h"
#include "config_ok.h"

/* A json-mode config with these columns (JSON array items), an optional
 * filter (already escaped for a JSON string) and optional dedup keys. */
static tm_connector_config *json_cfg(const char *columns, const char *filter,
                                     const char *dedup_keys) {
    char text[4096];
    char f[512] = "", d[256] = "";
    if (filter)
        snprintf(f, sizeof f, ",\"filter\":\"%s\"", filter);
    if (dedup_keys)
        snprintf(d, sizeof d, ",\"dedup\":{\"key\":[%s]}", dedup_keys);
    snprintf(text, sizeof text,
             "{\"name\":\"conv\","
             "\"kafka\":{\"bootstrap_servers\":\"k:9092\",\"topics\":[\"t\"]},"
             "\"sink\":{\"plugin\":\"sqlite\"},"
             "\"mapping\":{\"mode\":\"json\",\"columns\":[%s]%s}%s}",
             columns, f, d);
    return tm_test_config_ok(text, "t.json");
}

static tm_connector_config *raw_cfg(void) {
    return tm_test_config_ok(
        "{\"name\":\"raw\","
        "\"kafka\":{\"bootstrap_servers\":\"k:9092\",\"topics\":[\"t\"]},"
        "\"sink\":{\"plugin\":\"sqlite\"},\"mapping\":{\"mode\":\"raw\"}}",
        "r.json");
}

/* One message converted alone in a fresh batch. */
typedef struct one {
    tm_connector_config *cfg;
    tm_batch_builder *bb;
    const tm_batch *b;
} one;

static void run_msg(one *o, tm_connector_config *cfg, const tm_msg_view *m) {
    o->cfg = cfg;
    o->bb = tm_bb_new(cfg);
    ck_assert_ptr_nonnull(o->bb);
    tm_bb_reset(o->bb, "b-1", 1000);
    int r = tm_bb_range(o->bb, m->topic, m->partition, m->offset, 7);
    ck_assert_int_eq(r, 0);
    ck_assert_int_eq(tm_bb_add(o->bb, (uint32_t)r, m), 0);
    o->b = tm_bb_batch(o->bb);
    ck_assert_ptr_nonnull(o->b);
    ck_assert_uint_eq(tm_bb_messages(o->bb), 1);
}

static void run(one *o, tm_connector_config *cfg, const char *value) {
    tm_msg_view m = {.topic = "t",
                     .partition = 0,
                     .offset = 42,
                     .timestamp_ms = 1000,
                     .value = value,
                     .value_len = value ? strlen(value) : 0};
    run_msg(o, cfg, &m);
}

static void done(one *o) {
    tm_bb_free(o->bb);
    tm_config_free(o->cfg);
}

/* The one row of the batch. */
static const tm_record *row(const one *o) {
    ck_assert_uint_eq(o->b->ndead_letters, 0);
    ck_assert_uint_eq(o->b->nrecords, 1);
    return &o->b->records[0];
}

static const tm_value *val(const one *o, size_t i) {
    const tm_record *r = row(o);
    ck_assert_uint_lt(i, o->cfg->mapping.ncolumns);
    return TM_CELEM(tm_value, r->values, i);
}

/* The one dead letter of the batch, with this reason and detail. */
static void expect_dead(const one *o, tm_dl_reason reason, const char *detail) {
    ck_assert_uint_eq(o->b->nrecords, 0);
    ck_assert_uint_eq(o->b->ndead_letters, 1);
    const tm_dead_letter *d = &o->b->dead_letters[0];
    ck_assert_int_eq(d->reason, reason);
    ck_assert_ptr_nonnull(d->detail);
    ck_assert_str_eq(d->detail, detail);
    ck_assert_int_eq(d->offset, 42);
}

static void expect_text(const tm_value *v, const char *s) {
    ck_assert_int_eq(v->is_null, 0);
    ck_assert_uint_eq(v->v.s.len, strlen(s));
    ck_assert_mem_eq(v->v.s.ptr, s, strlen(s));
}

/* One column of TYPE at /x, required or not, and the outcome of VALUE. */
static void one_col(one *o, const char *type, int required, const char *value) {
    char col[256];
    snprintf(col, sizeof col,
             "{\"name\":\"x\",\"pointer\":\"/x\",\"type\":\"%s\","
             "\"required\":%s}",
             type, required ? "true" : "false");
    run(o, json_cfg(col, NULL, NULL), value);
}

/* ---- types ---- */

START_TEST(each_type_converts) {
    one o;
    run(&o,
        json_cfg("{\"name\":\"s\",\"pointer\":\"/s\",\"type\":\"text\"},"
                 "{\"name\":\"i\",\"pointer\":\"/i\",\"type\":\"int\"},"
                 "{\"name\":\"f\",\"pointer\":\"/f\",\"type\":\"float\"},"
                 "{\"name\":\"fi\",\"pointer\":\"/fi\",\"type\":\"float\"},"
                 "{\"name\":\"b\",\"pointer\":\"/b\",\"type\":\"bool\"},"
                 "{\"name\":\"bf\",\"pointer\":\"/bf\",\"type\":\"bool\"},"
                 "{\"name\":\"ts\",\"pointer\":\"/ts\",\"type\":\"timestamp\"},"
                 "{\"name\":\"tm\",\"pointer\":\"/tm\",\"type\":\"timestamp\"},"
                 "{\"name\":\"j\",\"pointer\":\"/j\",\"type\":\"json\"}",
                 NULL, NULL),
        "{\"s\":\"h\\u00e9llo\",\"i\":-42,\"f\":1.5,\"fi\":3,\"b\":true,"
        "\"bf\":false,\"ts\":\"2024-05-01T12:00:00Z\",\"tm\":1714564800123,"
        "\"j\":{\"b\":[1,2.5],\"a\":null}}");
    const tm_record *r = row(&o);
    ck_assert_uint_eq(r->values->struct_size, sizeof(tm_value));
    expect_text(val(&o, 0), "h\xc3\xa9llo");
    ck_assert_int_eq(val(&o, 1)->is_null, 0);
    ck_assert_int_eq(val(&o, 1)->v.i, -42);
    ck_assert_double_eq(val(&o, 2)->v.f, 1.5);
    ck_assert_double_eq(val(&o, 3)->v.f, 3.0);
    ck_assert_int_eq(val(&o, 4)->v.i, 1);
    ck_assert_int_eq(val(&o, 5)->is_null, 0);
    ck_assert_int_eq(val(&o, 5)->v.i, 0);
    ck_assert_int_eq(val(&o, 6)->v.i, 1714564800000000LL);
    ck_assert_int_eq(val(&o, 7)->v.i, 1714564800123000LL); /* ms -> us */
    expect_text(val(&o, 8), "{\"a\":null,\"b\":[1,2.5]}");
    ck_assert_ptr_null(r->identity); /* no dedup */
    ck_assert_ptr_null(r->identity_hash);
    done(&o);
}
END_TEST

START_TEST(missing_and_null) {
    one o;
    run(&o,
        json_cfg("{\"name\":\"a\",\"pointer\":\"/a\",\"type\":\"text\"},"
                 "{\"name\":\"n\",\"pointer\":\"/n\",\"type\":\"int\"},"
                 "{\"name\":\"j\",\"pointer\":\"/j\",\"type\":\"json\"}",
                 NULL, NULL),
        "{\"n\":null,\"j\":null}");
    for (size_t i = 0; i < 3; i++)
        ck_assert_int_eq(val(&o, i)->is_null, 1);
    done(&o);

    one_col(&o, "text", 1, "{\"y\":1}");
    expect_dead(&o, TM_DL_MISSING_FIELD, "/x: required, missing (column x)");
    done(&o);
    one_col(&o, "int", 1, "{\"x\":null}");
    expect_dead(&o, TM_DL_MISSING_FIELD, "/x: required, found null (column x)");
    done(&o);
}
END_TEST

START_TEST(type_mismatches) {
    static const struct {
        const char *type, *value, *detail;
    } CASES[] = {
        {"int", "{\"x\":\"12\"}",
         "/x: expected int, found string \"12\" (column x)"},
        {"int", "{\"x\":1e3}",
         "/x: expected int, found number 1000.0 (column x)"},
        {"int", "{\"x\":1.0}", "/x: expected int, found number 1.0 (column x)"},
        {"int", "{\"x\":true}",
         "/x: expected int, found boolean true (column x)"},
        {"text", "{\"x\":5}", "/x: expected text, found integer 5 (column x)"},
        {"text", "{\"x\":{\"a\":1}}",
         "/x: expected text, found object {\"a\":1} (column x)"},
        {"float", "{\"x\":\"1.5\"}",
         "/x: expected float, found string \"1.5\" (column x)"},
        {"bool", "{\"x\":\"true\"}",
         "/x: expected bool, found string \"true\" (column x)"},
        {"bool", "{\"x\":1}", "/x: expected bool, found integer 1 (column x)"},
        {"timestamp", "{\"x\":\"yesterday\"}",
         "/x: expected timestamp (RFC 3339 text or epoch milliseconds), "
         "found string \"yesterday\" (column x)"},
        {"timestamp", "{\"x\":1.5}",
         "/x: expected timestamp (RFC 3339 text or epoch milliseconds), "
         "found number 1.5 (column x)"},
        {"timestamp", "{\"x\":[1]}",
         "/x: expected timestamp (RFC 3339 text or epoch milliseconds), "
         "found array [1] (column x)"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        one o;
        one_col(&o, CASES[i].type, 0, CASES[i].value);
        expect_dead(&o, TM_DL_TYPE_MISMATCH, CASES[i].detail);
        done(&o);
    }
}
END_TEST

/* A found string is quoted up to 60 bytes, then "...". */
START_TEST(long_found_value_is_cut) {
    char value[256];
    snprintf(value, sizeof value, "{\"x\":\"%s\"}",
             "0123456789012345678901234567890123456789"
             "0123456789012345678901234567890123456789");
    one o;
    one_col(&o, "int", 0, value);
    expect_dead(&o, TM_DL_TYPE_MISMATCH,
                "/x: expected int, found string "
                "\"012345678901234567890123456789012345678901234567890123456789"
                "...\" (column x)");
    done(&o);
}
END_TEST

/* ---- parse errors ---- */

START_TEST(parse_errors) {
    one o;
    one_col(&o, "int", 0, NULL);
    expect_dead(&o, TM_DL_PARSE_ERROR, "tombstone (null value)");
    done(&o);

    const char *bad[] = {"{\"x\":", "{\"x\":1} trailing", "",
                         "{\"x\":\"\xc3\x28\"}", "{\"x\":1,}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        one_col(&o, "int", 0, bad[i]);
        ck_assert_uint_eq(o.b->ndead_letters, 1);
        const tm_dead_letter *d = &o.b->dead_letters[0];
        ck_assert_int_eq(d->reason, TM_DL_PARSE_ERROR);
        ck_assert_msg(
            strncmp(d->detail, "invalid JSON at line 1, column ", 31) == 0,
            "detail: %s", d->detail);
        /* The dead letter keeps the raw value. */
        ck_assert_uint_eq(d->value_len, strlen(bad[i]));
        ck_assert_mem_eq(d->value, bad[i], strlen(bad[i]));
        done(&o);
    }
}
END_TEST

START_TEST(binary_garbage) {
    static const unsigned char junk[] = {0xff, 0xfe, 0x00, 0x01, 0x80, 0x7b};
    tm_msg_view m = {.topic = "t",
                     .offset = 42,
                     .timestamp_ms = -1,
                     .value = junk,
                     .value_len = sizeof junk};
    one o;
    run_msg(&o,
            json_cfg("{\"name\":\"x\",\"pointer\":\"/x\",\"type\":\"int\"}",
                     NULL, NULL),
            &m);
    ck_assert_uint_eq(o.b->ndead_letters, 1);
    const tm_dead_letter *d = &o.b->dead_letters[0];
    ck_assert_int_eq(d->reason, TM_DL_PARSE_ERROR);
    ck_assert_uint_eq(d->value_len, sizeof junk);
    ck_assert_mem_eq(d->value, junk, sizeof junk);
    ck_assert_int_eq(d->timestamp_ms, -1);
    done(&o);

    /* Raw mode never refuses it. */
    run_msg(&o, raw_cfg(), &m);
    ck_assert_uint_eq(o.b->nrecords, 1);
    ck_assert_mem_eq(val(&o, 1)->v.s.ptr, junk, sizeof junk);
    done(&o);
}
END_TEST

/* ---- filter ---- */

/* 1 when VALUE is kept by FILTER, 0 when filtered. */
static int kept(const char *filter, const char *value) {
    one o;
    run(&o,
        json_cfg("{\"name\":\"id\",\"pointer\":\"/id\",\"type\":\"int\","
                 "\"required\":true}",
                 filter, NULL),
        value);
    int k = (int)o.b->nrecords;
    ck_assert_uint_eq(o.b->ranges[0].filtered, (uint64_t)!k);
    ck_assert_uint_eq(o.b->ndead_letters, 0);
    tm_bb_counts c;
    tm_bb_counts(o.bb, &c);
    ck_assert_uint_eq(c.filtered, (uint64_t)!k);
    ck_assert_uint_eq(c.rows, (uint64_t)k);
    /* The range still covers the filtered offset. */
    ck_assert_int_eq(o.b->ranges[0].end_offset, 43);
    done(&o);
    return k;
}

START_TEST(filter_forms) {
    ck_assert_int_eq(kept("/type == edit", "{\"id\":1,\"type\":\"edit\"}"), 1);
    ck_assert_int_eq(kept("/type == edit", "{\"id\":1,\"type\":\"log\"}"), 0);
    ck_assert_int_eq(kept("/type == edit", "{\"id\":1}"), 0); /* missing */
    ck_assert_int_eq(kept("/type == edit", "{\"id\":1,\"type\":null}"), 0);
    /* Numbers, booleans and null by their JSON text. */
    ck_assert_int_eq(kept("/ns == 0", "{\"id\":1,\"ns\":0}"), 1);
    ck_assert_int_eq(kept("/ns == 0", "{\"id\":1,\"ns\":\"0\"}"), 1);
    ck_assert_int_eq(kept("/ns == 0", "{\"id\":1,\"ns\":10}"), 0);
    ck_assert_int_eq(kept("/ns == -3", "{\"id\":1,\"ns\":-3}"), 1);
    ck_assert_int_eq(kept("/ns == 0", "{\"id\":1,\"ns\":0.0}"), 1);
    ck_assert_int_eq(kept("/ns == 00", "{\"id\":1,\"ns\":0}"), 0);
    ck_assert_int_eq(kept("/ns == 0", "{\"id\":1,\"ns\":\"00\"}"), 0);
    ck_assert_int_eq(kept("/r == 1.5", "{\"id\":1,\"r\":1.5}"), 1);
    ck_assert_int_eq(kept("/r == 1.5", "{\"id\":1,\"r\":1.25}"), 0);
    ck_assert_int_eq(kept("/bot == false", "{\"id\":1,\"bot\":false}"), 1);
    ck_assert_int_eq(kept("/bot == false", "{\"id\":1,\"bot\":true}"), 0);
    ck_assert_int_eq(kept("/x == null", "{\"id\":1,\"x\":null}"), 1);
    ck_assert_int_eq(kept("/x == 1", "{\"id\":1,\"x\":[1]}"), 0);
    /* in [...], with a quoted value keeping its comma and space. */
    const char *in = "/t in [edit, new, \\\"a, b\\\"]";
    ck_assert_int_eq(kept(in, "{\"id\":1,\"t\":\"new\"}"), 1);
    ck_assert_int_eq(kept(in, "{\"id\":1,\"t\":\"edit\"}"), 1);
    ck_assert_int_eq(kept(in, "{\"id\":1,\"t\":\"a, b\"}"), 1);
    ck_assert_int_eq(kept(in, "{\"id\":1,\"t\":\"a\"}"), 0);
    ck_assert_int_eq(kept(in, "{\"id\":1,\"t\":\"log\"}"), 0);
    ck_assert_int_eq(kept("/a~1b == 1", "{\"id\":1,\"a/b\":1}"), 1);
}
END_TEST

/* Parse comes first, then the filter, then the columns. */
START_TEST(outcome_order) {
    /* Filtered out: its missing required column does not matter. */
    ck_assert_int_eq(kept("/type == edit", "{\"type\":\"log\"}"), 0);
    /* Not valid JSON: a dead letter, even though no filter could match. */
    one o;
    run(&o,
        json_cfg("{\"name\":\"id\",\"pointer\":\"/id\",\"type\":\"int\"}",
                 "/type == edit", NULL),
        "not json");
    ck_assert_uint_eq(o.b->ndead_letters, 1);
    ck_assert_uint_eq(o.b->ranges[0].filtered, 0);
    done(&o);
    /* Kept, then the first failing column in column order decides. */
    run(&o,
        json_cfg("{\"name\":\"a\",\"pointer\":\"/a\",\"type\":\"int\"},"
                 "{\"name\":\"b\",\"pointer\":\"/b\",\"type\":\"int\","
                 "\"required\":true}",
                 "/type == edit", NULL),
        "{\"type\":\"edit\",\"a\":\"x\"}");
    expect_dead(&o, TM_DL_TYPE_MISMATCH,
                "/a: expected int, found string \"x\" (column a)");
    done(&o);
}
END_TEST

/* ---- pointers ---- */

static json_t *at(json_t *doc, const char *pointer) {
    tm_json_pointer p;
    ck_assert_int_eq(tm_json_pointer_compile(pointer, &p), 0);
    json_t *v = tm_json_pointer_resolve(&p, doc);
    tm_json_pointer_clear(&p);
    return v;
}

START_TEST(pointer_resolution) {
    json_error_t jerr;
    json_t *doc =
        json_loads("{\"a/b\":1,\"m~n\":2,\"~1\":3,\"\":4,\"items\":[{\"sku\":"
                   "\"s0\"},{\"sku\":\"s1\"}],\"n\":{\"deep\":{\"x\":5}},"
                   "\"10\":6,\"s\":\"str\"}",
                   0, &jerr);
    ck_assert_ptr_nonnull(doc);
    ck_assert_ptr_eq(at(doc, ""), doc);
    ck_assert_int_eq(json_integer_value(at(doc, "/a~1b")), 1);
    ck_assert_int_eq(json_integer_value(at(doc, "/m~0n")), 2);
    /* ~01 is "~1" (unescaped once, ~0 first), not "/". */
    ck_assert_int_eq(json_integer_value(at(doc, "/~01")), 3);
    ck_assert_int_eq(json_integer_value(at(doc, "/")), 4); /* key "" */
    ck_assert_str_eq(json_string_value(at(doc, "/items/1/sku")), "s1");
    ck_assert_str_eq(json_string_value(at(doc, "/items/0/sku")), "s0");
    ck_assert_int_eq(json_integer_value(at(doc, "/n/deep/x")), 5);
    ck_assert_int_eq(json_integer_value(at(doc, "/10")), 6); /* member */
    ck_assert_ptr_null(at(doc, "/items/2"));                 /* past the end */
    ck_assert_ptr_null(at(doc, "/items/-"));  /* after the last */
    ck_assert_ptr_null(at(doc, "/items/01")); /* leading zero */
    ck_assert_ptr_null(at(doc, "/items/x"));  /* not an index */
    ck_assert_ptr_null(at(doc, "/items/-1")); /* not an index */
    ck_assert_ptr_null(at(doc, "/s/0"));      /* into a scalar */
    ck_assert_ptr_null(at(doc, "/a/b"));      /* no member "a" */
    ck_assert_ptr_null(at(doc, "/items/1/sku/x"));
    json_decref(doc);

    tm_json_pointer p;
    ck_assert_int_eq(tm_json_pointer_compile("a", &p), -2);
    ck_assert_int_eq(tm_json_pointer_compile("/a~2", &p), -2);
    ck_assert_int_eq(tm_json_pointer_compile("/a~", &p), -2);
    ck_assert_int_eq(tm_json_pointer_compile("/a/b/", &p), 0);
    ck_assert_uint_eq(p.ntokens, 3);
    ck_assert_str_eq(p.tokens[2], "");
    tm_json_pointer_clear(&p);
}
END_TEST

START_TEST(pointers_in_columns) {
    one o;
    run(&o,
        json_cfg("{\"name\":\"sku\",\"pointer\":\"/items/1/sku\",\"type\":"
                 "\"text\"},"
                 "{\"name\":\"t\",\"pointer\":\"/a~1b/m~0n\",\"type\":\"int\"},"
                 "{\"name\":\"all\",\"pointer\":\"\",\"type\":\"json\"},"
                 "{\"name\":\"gone\",\"pointer\":\"/items/5\",\"type\":"
                 "\"json\"}",
                 NULL, NULL),
        "{\"items\":[{\"sku\":\"a\"},{\"sku\":\"b\"}],\"a/b\":{\"m~n\":9}}");
    expect_text(val(&o, 0), "b");
    ck_assert_int_eq(val(&o, 1)->v.i, 9);
    expect_text(val(&o, 2),
                "{\"a/b\":{\"m~n\":9},\"items\":[{\"sku\":\"a\"},{\"sku\":"
                "\"b\"}]}");
    ck_assert_int_eq(val(&o, 3)->is_null, 1);
    done(&o);

    /* The whole value may be a scalar. */
    run(&o,
        json_cfg("{\"name\":\"v\",\"pointer\":\"\",\"type\":\"int\","
                 "\"required\":true}",
                 NULL, NULL),
        "42");
    ck_assert_int_eq(val(&o, 0)->v.i, 42);
    done(&o);

    /* A required column whose pointer is "" names it readably. */
    run(&o,
        json_cfg("{\"name\":\"v\",\"pointer\":\"\",\"type\":\"int\"}", NULL,
                 NULL),
        "\"x\"");
    expect_dead(&o, TM_DL_TYPE_MISMATCH,
                "\"\": expected int, found string \"x\" (column v)");
    done(&o);
}
END_TEST

/* ---- raw mode ---- */

START_TEST(raw_mode_columns) {
    static const char key[] = "k1";
    static const unsigned char value[] = {'v', 0x00, 0xff};
    tm_header_view h[] = {{"trace", "abc", 3}};
    tm_msg_view m = {.topic = "orders",
                     .partition = 3,
                     .offset = 17,
                     .timestamp_ms = 1714564800123,
                     .key = key,
                     .key_len = 2,
                     .value = value,
                     .value_len = sizeof value,
                     .headers = h,
                     .nheaders = 1};
    one o;
    run_msg(&o, raw_cfg(), &m);
    ck_assert_uint_eq(o.cfg->mapping.ncolumns, 7);
    const tm_record *r = row(&o);
    ck_assert_int_eq(val(&o, 0)->is_null, 0);
    ck_assert_uint_eq(val(&o, 0)->v.s.len, 2);
    ck_assert_mem_eq(val(&o, 0)->v.s.ptr, "k1", 2);
    ck_assert_uint_eq(val(&o, 1)->v.s.len, 3);
    ck_assert_mem_eq(val(&o, 1)->v.s.ptr, value, 3);
    expect_text(val(&o, 2), "[[\"trace\",\"abc\"]]");
    expect_text(val(&o, 3), "orders");
    ck_assert_int_eq(val(&o, 4)->v.i, 3);
    ck_assert_int_eq(val(&o, 5)->v.i, 17);
    ck_assert_int_eq(val(&o, 6)->is_null, 0);
    ck_assert_int_eq(val(&o, 6)->v.i, 1714564800123000LL);
    /* The record carries the raw message too. */
    ck_assert_int_eq(r->offset, 17);
    ck_assert_int_eq(r->timestamp_ms, 1714564800123);
    ck_assert_uint_eq(r->key_len, 2);
    ck_assert_mem_eq(r->key, "k1", 2);
    ck_assert_uint_eq(r->value_len, 3);
    ck_assert_str_eq(r->headers_json, "[[\"trace\",\"abc\"]]");
    done(&o);

    /* Null key, tombstone, no headers, no timestamp: nulls, still a row. */
    tm_msg_view t = {.topic = "orders", .offset = 5, .timestamp_ms = -1};
    run_msg(&o, raw_cfg(), &t);
    r = row(&o);
    ck_assert_int_eq(val(&o, 0)->is_null, 1);
    ck_assert_int_eq(val(&o, 1)->is_null, 1);
    ck_assert_int_eq(val(&o, 2)->is_null, 1);
    ck_assert_int_eq(val(&o, 6)->is_null, 1);
    ck_assert_int_eq(val(&o, 5)->v.i, 5);
    ck_assert_ptr_null(r->key);
    ck_assert_ptr_null(r->value);
    ck_assert_ptr_null(r->headers_json);
    done(&o);

    /* An empty (not null) key stays an empty value. */
    tm_msg_view e = {.topic = "orders", .key = "", .value = ""};
    run_msg(&o, raw_cfg(), &e);
    ck_assert_int_eq(val(&o, 0)->is_null, 0);
    ck_assert_uint_eq(val(&o, 0)->v.s.len, 0);
    ck_assert_ptr_nonnull(row(&o)->key);
    done(&o);
}
END_TEST

/* ---- headers ---- */

START_TEST(headers_json_forms) {
    static const unsigned char bin[] = {0xff, 0x00};
    static const char nul_text[] = {'a', 0x00, 'b'};
    tm_header_view h[] = {
        {"a", "1", 1},          {"bin", bin, 2},      {"n", NULL, 0},
        {"e", "", 0},           {"a", "2", 1},        {"q\"", "x\ny", 3},
        {"utf", "\xc3\xa9", 2}, {"nul", nul_text, 3}, {"\xff", "v", 1},
    };
    tm_msg_view m = {.topic = "t",
                     .offset = 42,
                     .value = "{\"x\":1}",
                     .value_len = 7,
                     .headers = h,
                     .nheaders = sizeof h / sizeof h[0]};
    const char *want = "[[\"a\",\"1\"],[\"bin\",{\"base64\":\"/wA=\"}],"
                       "[\"n\",null],[\"e\",\"\"],[\"a\",\"2\"],"
                       "[\"q\\\"\",\"x\\ny\"],[\"utf\",\"\xc3\xa9\"],"
                       "[\"nul\",\"a\\u0000b\"],[{\"base64\":\"/w==\"},\"v\"]]";
    one o;
    run_msg(&o,
            json_cfg("{\"name\":\"x\",\"pointer\":\"/x\",\"type\":\"int\"}",
                     NULL, NULL),
            &m);
    ck_assert_str_eq(row(&o)->headers_json, want);
    done(&o);

    /* Dead letters carry them as well. */
    m.value = "{";
    m.value_len = 1;
    run_msg(&o,
            json_cfg("{\"name\":\"x\",\"pointer\":\"/x\",\"type\":\"int\"}",
                     NULL, NULL),
            &m);
    ck_assert_uint_eq(o.b->ndead_letters, 1);
    ck_assert_str_eq(o.b->dead_letters[0].headers_json, want);
    done(&o);
}
END_TEST

/* What counts as text in a header (and a raw value): RFC 3629 UTF-8. */
START_TEST(utf8_rules) {
    static const struct {
        const char *s;
        size_t n;
        int valid;
    } CASES[] = {
        {"", 0, 1},
        {"plain", 5, 1},
        {"a\0b", 3, 1},             /* NUL is a character */
        {"\xc3\xa9", 2, 1},         /* U+00E9 */
        {"\xe2\x82\xac", 3, 1},     /* U+20AC */
        {"\xf0\x9f\x98\x80", 4, 1}, /* U+1F600 */
        {"\xf4\x8f\xbf\xbf", 4, 1}, /* U+10FFFF, the last */
        {"\xc0\x80", 2, 0},         /* overlong NUL */
        {"\xc1\xbf", 2, 0},         /* overlong */
        {"\xe0\x9f\xbf", 3, 0},     /* overlong 3-byte */
        {"\xf0\x8f\xbf\xbf", 4, 0}, /* overlong 4-byte */
        {"\xed\xa0\x80", 3, 0},     /* surrogate U+D800 */
        {"\xed\xbf\xbf", 3, 0},     /* surrogate U+DFFF */
        {"\xf4\x90\x80\x80", 4, 0}, /* past U+10FFFF */
        {"\xf5\x80\x80\x80", 4, 0},
        {"\xe2\x82", 2, 0}, /* cut short */
        {"\x80", 1, 0},     /* lone continuation */
        {"\xc3\x28", 2, 0}, /* bad continuation */
        {"\xff", 1, 0},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        ck_assert_msg(tm_utf8_valid(CASES[i].s, CASES[i].n) == CASES[i].valid,
                      "case %zu", i);
    /* Base64 padding for 1, 2 and 3 bytes (RFC 4648 section 10). */
    static const char *const B64[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                      "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t n = 0; n <= 6; n++) {
        char *b = tm_base64("foobar", n);
        ck_assert_ptr_nonnull(b);
        ck_assert_str_eq(b, B64[n]);
        free(b);
    }
    /* A surrogate in a header value is binary. */
    tm_header_view h = {"s", "\xed\xa0\x80", 3};
    tm_msg_view m = {.topic = "t", .headers = &h, .nheaders = 1};
    one o;
    run_msg(&o, raw_cfg(), &m);
    ck_assert_str_eq(row(&o)->headers_json, "[[\"s\",{\"base64\":\"7aCA\"}]]");
    done(&o);
}
END_TEST

/* ---- timestamps ---- */

static int64_t ts(const char *s) {
    int64_t us = 0;
    ck_assert_msg(tm_timestamp_parse(s, strlen(s), &us) == 0, "refused %s", s);
    return us;
}

static int ts_refused(const char *s) {
    int64_t us = 0;
    return tm_timestamp_parse(s, strlen(s), &us) == -1;
}

START_TEST(timestamp_forms) {
    const int64_t T = 1714564800LL * 1000000; /* 2024-05-01T12:00:00Z */
    ck_assert_int_eq(ts("2024-05-01T12:00:00Z"), T);
    ck_assert_int_eq(ts("2024-05-01t12:00:00z"), T);
    ck_assert_int_eq(ts("2024-05-01T12:00:00"), T); /* no zone: UTC */
    ck_assert_int_eq(ts("2024-05-01 12:00:00"), T);
    ck_assert_int_eq(ts("2024-05-01T12:00:00+00:00"), T);
    ck_assert_int_eq(ts("2024-05-01T12:00:00-00:00"), T);
    ck_assert_int_eq(ts("2024-05-01T12:00:00.123456+02:00"),
                     1714557600LL * 1000000 + 123456);
    ck_assert_int_eq(ts("2024-05-01T12:00:00-05:30"), 1714584600LL * 1000000);
    ck_assert_int_eq(ts("2024-05-01T12:00:00.5Z"), T + 500000);
    ck_assert_int_eq(ts("2024-05-01T12:00:00.000001Z"), T + 1);
    ck_assert_int_eq(ts("2024-05-01T12:00:00.1234569Z"), T + 123456); /* cut */
    ck_assert_int_eq(ts("2024-05-01 12:00:00.25"), T + 250000);
    ck_assert_int_eq(ts("1970-01-01T00:00:00Z"), 0);
    ck_assert_int_eq(ts("1969-12-31T23:59:59Z"), -1000000);
    ck_assert_int_eq(ts("1969-12-31T23:59:59.5Z"), -500000);
    ck_assert_int_eq(ts("2024-02-29T23:59:59Z"), 1709251199LL * 1000000);
    ck_assert_int_eq(ts("2000-03-01T00:00:00Z"), 951868800LL * 1000000);
    ck_assert_int_eq(ts("1900-03-01T00:00:00Z"), -2203891200LL * 1000000);

    ck_assert(ts_refused("2023-02-29T00:00:00Z")); /* not a leap year */
    ck_assert(ts_refused("1900-02-29T00:00:00Z"));
    ck_assert(ts_refused("2024-04-31T00:00:00Z"));
    ck_assert(ts_refused("2024-13-01T00:00:00Z"));
    ck_assert(ts_refused("2024-05-01"));
    ck_assert(ts_refused("2024-5-01T12:00:00Z"));
    ck_assert(ts_refused("2024-05-01T12:00Z"));
    ck_assert(ts_refused("2024-05-01T24:00:00Z"));
    ck_assert(ts_refused("2024-05-01T12:60:00Z"));
    ck_assert(ts_refused("2024-05-01T12:00:60Z"));
    ck_assert(ts_refused("2024-05-01T12:00:00.Z"));
    ck_assert(ts_refused("2024-05-01T12:00:00+0200"));
    ck_assert(ts_refused("2024-05-01T12:00:00+02"));
    ck_assert(ts_refused("2024-05-01T12:00:00Z "));
    ck_assert(ts_refused("2024-05-01X12:00:00Z"));
    ck_assert(ts_refused(""));

    int64_t us = 0;
    ck_assert_int_eq(tm_timestamp_from_ms(-1500, &us), 0);
    ck_assert_int_eq(us, -1500000);
    ck_assert_int_eq(tm_timestamp_from_ms(INT64_MAX / 100, &us), -1);

    /* Through a column: a huge epoch-ms integer does not fit. */
    one o;
    one_col(&o, "timestamp", 0, "{\"x\":9223372036854775807}");
    expect_dead(&o, TM_DL_TYPE_MISMATCH,
                "/x: expected timestamp (RFC 3339 text or epoch milliseconds), "
                "found integer 9223372036854775807 (column x)");
    done(&o);
    one_col(&o, "timestamp", 1, "{\"x\":\"2024-05-01T12:00:00.123456+02:00\"}");
    ck_assert_int_eq(val(&o, 0)->v.i, 1714557600LL * 1000000 + 123456);
    done(&o);
}
END_TEST

/* ---- big values ---- */

START_TEST(ten_megabyte_value) {
    const size_t n = 10 * 1024 * 1024;
    char *value = malloc(n + 1);
    ck_assert_ptr_nonnull(value);
    /* {"blob":"xxxx...x"} filling exactly n bytes. */
    memcpy(value, "{\"blob\":\"", 9);
    for (size_t i = 9; i < n - 2; i++)
        value[i] = (char)('a' + i % 26);
    memcpy(value + n - 2, "\"}", 2);
    value[n] = '\0';
    tm_connector_config *cfg =
        json_cfg("{\"name\":\"blob\",\"pointer\":\"/blob\",\"type\":\"text\"}",
                 NULL, NULL);
    tm_batch_builder *bb = tm_bb_new(cfg);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "big", 0);
    int r = tm_bb_range(bb, "t", 0, 0, 1);
    tm_msg_view m = {.topic = "t", .value = value, .value_len = n};
    ck_assert_int_eq(tm_bb_add(bb, (uint32_t)r, &m), 0);
    ck_assert_uint_eq(tm_bb_bytes(bb), n);
    /* The builder kept its own copy: the caller's buffer may change. */
    char *copy = malloc(n);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, value, n);
    memset(value, 'Z', n);
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_uint_eq(b->nrecords, 1);
    ck_assert_uint_eq(b->records[0].value_len, n);
    ck_assert(memcmp(b->records[0].value, copy, n) == 0);
    const tm_value *v = b->records[0].values;
    ck_assert_uint_eq(v->v.s.len, n - 11);
    ck_assert(memcmp(v->v.s.ptr, copy + 9, n - 11) == 0);
    free(copy);
    free(value);
    tm_bb_free(bb);
    tm_config_free(cfg);
}
END_TEST

/* ---- canonical json ---- */

START_TEST(canonical_json_column) {
    static const struct {
        const char *in, *want;
    } CASES[] = {
        {"{ \"z\" : 1, \"a\" : { \"y\" : [ true, false, null ], \"b\" : "
         "\"\\u00e9\\n\" } }",
         "{\"a\":{\"b\":\"\xc3\xa9\\n\",\"y\":[true,false,null]},\"z\":1}"},
        {"0.1", "0.10000000000000001"}, /* 17 significant digits */
        {"{ \"z\": 1, \"a\": 0.1 }", "{\"a\":0.10000000000000001,\"z\":1}"},
        {"1.5", "1.5"},
        {"1e2", "100.0"},                         /* a real stays a real */
        {"9007199254740993", "9007199254740993"}, /* integers exact */
        {"\"a/b\"", "\"a/b\""},                   /* '/' not escaped */
        {"[]", "[]"},
        {"{}", "{}"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char value[256];
        snprintf(value, sizeof value, "{\"j\":%s}", CASES[i].in);
        one o;
        run(&o,
            json_cfg("{\"name\":\"j\",\"pointer\":\"/j\",\"type\":\"json\"}",
                     NULL, NULL),
            value);
        expect_text(val(&o, 0), CASES[i].want);
        done(&o);
    }
}
END_TEST

/* The numbers of canonical texts are written without jansson
 * (canonical.c); they must be what jansson's dump writes, for doubles of
 * every magnitude and integers at both ends. */
START_TEST(canonical_numbers_are_janssons) {
    static const double FIXED[] = {0.0,     -0.0,    1.0,     -1.5,    0.1,
                                   100000., 1e17,    1e-5,    1e21,    1e22,
                                   5e-324,  DBL_MAX, DBL_MIN, 123.456, -2e-308};
    uint64_t state = 0x9E3779B97F4A7C15u;
    char mine[TM_CANONICAL_NUMBER_MAX];
    for (size_t i = 0; i < 200000; i++) {
        double d;
        if (i < sizeof FIXED / sizeof FIXED[0]) {
            d = FIXED[i];
        } else {
            state = state * 6364136223846793005u + 1442695040888963407u;
            uint64_t bits = state ^ (state >> 29);
            memcpy(&d, &bits, sizeof d);
            if (!isfinite(d))
                continue;
        }
        json_t *real = json_real(d);
        ck_assert_ptr_nonnull(real);
        char *theirs = json_dumps(real, TM_CANONICAL_FLAGS);
        json_decref(real);
        ck_assert_ptr_nonnull(theirs);
        size_t n = tm_canonical_real(d, mine);
        ck_assert_msg(n == strlen(theirs) && strcmp(mine, theirs) == 0,
                      "%.17g: %s vs jansson's %s", d, mine, theirs);
        free(theirs);
    }
    ck_assert_uint_eq(tm_canonical_real(NAN, mine), 0);
    ck_assert_uint_eq(tm_canonical_real(INFINITY, mine), 0);
    static const int64_t INTS[] = {0, 1, -1, 9, 10, -10, INT64_MAX, INT64_MIN};
    for (size_t i = 0; i < sizeof INTS / sizeof INTS[0]; i++) {
        char want[32];
        snprintf(want, sizeof want, "%" PRId64, INTS[i]);
        ck_assert_uint_eq(tm_canonical_integer(INTS[i], mine), strlen(want));
        ck_assert_str_eq(mine, want);
    }
}
END_TEST

static Suite *convert_suite(void) {
    Suite *s = suite_create("convert");
    TCase *tc = tcase_create("convert");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, each_type_converts);
    tcase_add_test(tc, missing_and_null);
    tcase_add_test(tc, type_mismatches);
    tcase_add_test(tc, long_found_value_is_cut);
    tcase_add_test(tc, parse_errors);
    tcase_add_test(tc, binary_garbage);
    tcase_add_test(tc, filter_forms);
    tcase_add_test(tc, outcome_order);
    tcase_add_test(tc, pointer_resolution);
    tcase_add_test(tc, pointers_in_columns);
    tcase_add_test(tc, raw_mode_columns);
    tcase_add_test(tc, headers_json_forms);
    tcase_add_test(tc, utf8_rules);
    tcase_add_test(tc, timestamp_forms);
    tcase_add_test(tc, ten_megabyte_value);
    tcase_add_test(tc, canonical_json_column);
    tcase_add_test(tc, canonical_numbers_are_janssons);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(convert_suite(), 1);
}
