/* The batch builder (host/convert/batch_builder.h): ranges and their
 * ends, in-batch duplicates and identity conflicts, counts and bytes, a
 * stable batch across repeated calls, reuse after reset, and the SHA-256
 * behind the identity hash (FIPS 180-2 vectors). Expected values are
 * worked out by hand from docs/configuration.md. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit/marker_check.h"
#include "config/connector_config.h"
#include "convert/batch_builder.h"
#include "convert/sha256.h"
#include "check_main.h"
#include "config_ok.h"

#define COLS_ID_V                                                              \
    "{\"name\":\"id\",\"pointer\":\"/id\",\"type\":\"int\"},"                  \
    "{\"name\":\"v\",\"pointer\":\"/v\",\"type\":\"text\"}"

static tm_connector_config *cfg_with(const char *mapping, const char *dedup) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\":\"orders\","
             "\"kafka\":{\"bootstrap_servers\":\"k:9092\",\"topics\":[\"t\"]},"
             "\"sink\":{\"plugin\":\"sqlite\"},\"mapping\":%s%s%s%s}",
             mapping, dedup ? ",\"dedup\":{\"key\":[" : "", dedup ? dedup : "",
             dedup ? "]}" : "");
    return tm_test_config_ok(text, "t.json");
}

static tm_connector_config *json_cfg(const char *columns, const char *dedup) {
    char mapping[2048];
    snprintf(mapping, sizeof mapping, "{\"mode\":\"json\",\"columns\":[%s]}",
             columns);
    return cfg_with(mapping, dedup);
}

/* Adds the JSON text value at topic t, partition, offset to range r. */
static void add(tm_batch_builder *bb, int r, int32_t partition, int64_t offset,
                const char *value) {
    tm_msg_view m = {.topic = "t",
                     .partition = partition,
                     .offset = offset,
                     .timestamp_ms = 1000 + offset,
                     .value = value,
                     .value_len = value ? strlen(value) : 0};
    ck_assert_int_ge(r, 0);
    ck_assert_int_eq(tm_bb_add(bb, (uint32_t)r, &m), 0);
}

/* ---- sha256 ---- */

static void expect_sha(const void *data, size_t n, const char *want) {
    char hex[TM_SHA256_HEX_LEN + 1];
    tm_sha256_hex(data, n, hex);
    ck_assert_str_eq(hex, want);
}

START_TEST(sha256_vectors) {
    expect_sha(
        "", 0,
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    expect_sha(
        "abc", 3,
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 =
        "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    expect_sha(
        m448, strlen(m448),
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* A million 'a', fed in uneven pieces to cross block boundaries. */
    static char a[1000];
    memset(a, 'a', sizeof a);
    tm_sha256 c;
    tm_sha256_init(&c);
    size_t fed = 0, step = 1;
    while (fed < 1000000) {
        size_t k = step < 1000000 - fed ? step : 1000000 - fed;
        if (k > sizeof a)
            k = sizeof a;
        tm_sha256_update(&c, a, k);
        fed += k;
        step = step * 7 % 997 + 1;
    }
    uint8_t d[TM_SHA256_LEN];
    tm_sha256_final(&c, d);
    static const uint8_t want[TM_SHA256_LEN] = {
        0xcd, 0xc7, 0x6e, 0x5c, 0x99, 0x14, 0xfb, 0x92, 0x81, 0xa1, 0xc7,
        0xe2, 0x84, 0xd7, 0x3e, 0x67, 0xf1, 0x80, 0x9a, 0x48, 0xa4, 0x97,
        0x20, 0x0e, 0x04, 0x6d, 0x39, 0xcc, 0xc7, 0x11, 0x2c, 0xd0};
    ck_assert_mem_eq(d, want, TM_SHA256_LEN);
    /* Lengths around the padding boundary (55, 56, 63, 64 bytes). */
    expect_sha(
        a, 55,
        "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    expect_sha(
        a, 56,
        "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    expect_sha(
        a, 63,
        "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34");
    expect_sha(
        a, 64,
        "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}
END_TEST

/* ---- ranges ---- */

START_TEST(ranges_and_extend) {
    tm_connector_config *cfg = json_cfg(COLS_ID_V, NULL);
    tm_batch_builder *bb = tm_bb_new(cfg);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "batch-1", 123456);
    int r0 = tm_bb_range(bb, "t", 0, 100, 3);
    int r1 = tm_bb_range(bb, "t", 1, 50, 4);
    int r2 = tm_bb_range(bb, "u", 0, 7, 5); /* same partition, other topic */
    ck_assert_int_eq(r0, 0);
    ck_assert_int_eq(r1, 1);
    ck_assert_int_eq(r2, 2);
    /* The same partition again: the same range, unchanged. */
    ck_assert_int_eq(tm_bb_range(bb, "t", 1, 999, 9), 1);
    ck_assert_int_eq(tm_bb_range(bb, "u", 0, 1, 1), 2);
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 1, 1), 0);
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 1, 1), 0);

    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_uint_eq(b->nranges, 3);
    ck_assert_int_eq(b->ranges[1].start_offset, 50);
    ck_assert_int_eq(b->ranges[1].end_offset, 50); /* empty so far */
    ck_assert_int_eq(b->ranges[1].epoch, 4);

    add(bb, r0, 0, 100, "{\"id\":1}");
    add(bb, r0, 0, 105, "{\"id\":2}");   /* offsets need not be dense */
    tm_bb_extend(bb, (uint32_t)r0, 110); /* past control records */
    tm_bb_extend(bb, (uint32_t)r0, 104); /* never backwards */
    tm_bb_extend(bb, (uint32_t)r1, 60);  /* a range with no record */
    tm_bb_extend(bb, 99, 60);            /* no such range: ignored */

    b = tm_bb_batch(bb);
    ck_assert_uint_eq(b->struct_size, sizeof(tm_batch));
    ck_assert_str_eq(b->connector, "orders");
    ck_assert_str_eq(b->batch_id, "batch-1");
    ck_assert_int_eq(b->deadline_ms, 123456);
    const tm_range *r = &b->ranges[0];
    ck_assert_uint_eq(r->struct_size, sizeof(tm_range));
    ck_assert_str_eq(r->topic, "t");
    ck_assert_int_eq(r->partition, 0);
    ck_assert_int_eq(r->start_offset, 100);
    ck_assert_int_eq(r->end_offset, 110);
    ck_assert_int_eq(r->epoch, 3);
    ck_assert_int_eq(b->ranges[1].end_offset, 60);
    ck_assert_str_eq(b->ranges[2].topic, "u");
    ck_assert_int_eq(b->ranges[2].end_offset, 7);
    ck_assert_uint_eq(b->nrecords, 2);
    ck_assert_int_eq(b->records[1].offset, 105);

    /* A message behind the range's end leaves the batch unusable. */
    tm_msg_view late = {
        .topic = "t", .offset = 109, .value = "{}", .value_len = 2};
    ck_assert_int_eq(tm_bb_add(bb, (uint32_t)r0, &late), -1);
    ck_assert_ptr_null(tm_bb_batch(bb));
    ck_assert_int_eq(tm_bb_range(bb, "t", 5, 0, 1), -1);
    /* Until reset. */
    tm_bb_reset(bb, "batch-2", 0);
    ck_assert_ptr_nonnull(tm_bb_batch(bb));
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 110, 3), 0);
    /* A range that was not opened is refused too. */
    tm_msg_view m = {
        .topic = "t", .offset = 110, .value = "{}", .value_len = 2};
    ck_assert_int_eq(tm_bb_add(bb, 1, &m), -1);
    ck_assert_ptr_null(tm_bb_batch(bb));

    tm_bb_free(bb);
    tm_config_free(cfg);
}
END_TEST

/* ---- in-batch dedup ---- */

START_TEST(duplicate_and_conflict) {
    tm_connector_config *cfg = json_cfg(COLS_ID_V, "\"id\"");
    tm_batch_builder *bb = tm_bb_new(cfg);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b", 0);
    int p0 = tm_bb_range(bb, "t", 0, 10, 1);
    int p1 = tm_bb_range(bb, "t", 1, 5, 1);
    add(bb, p0, 0, 10, "{\"id\":1,\"v\":\"a\"}");
    add(bb, p0, 0, 11, "{\"v\":\"a\",\"id\":1}");          /* same payload */
    add(bb, p1, 1, 5, "{\"id\":1, \"v\":\"a\", \"x\":0}"); /* other partition */
    add(bb, p1, 1, 6, "{\"id\":1,\"v\":\"b\"}");           /* other payload */
    add(bb, p0, 0, 12, "{\"id\":2,\"v\":\"a\"}");
    add(bb, p0, 0, 13, "{\"id\":1,\"v\":\"c\"}"); /* conflicts with 10 too */

    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_uint_eq(b->nrecords, 2);
    const tm_record *r = &b->records[0];
    ck_assert_int_eq(r->offset, 10);
    ck_assert_str_eq(r->identity, "[1]");
    /* sha256 of the canonical mapped columns [1,"a"]. */
    ck_assert_str_eq(
        r->identity_hash,
        "2010945388e2de98f5651051478912aa4ff38bb13a2cdb1a2c257bb97fbf98ff");
    ck_assert_int_eq(b->records[1].offset, 12);
    ck_assert_str_eq(b->records[1].identity, "[2]");

    ck_assert_uint_eq(b->ranges[0].duplicates, 1);
    ck_assert_uint_eq(b->ranges[1].duplicates, 1);
    ck_assert_uint_eq(b->ndead_letters, 2);
    const tm_dead_letter *d = &b->dead_letters[0];
    ck_assert_uint_eq(d->struct_size, sizeof(tm_dead_letter));
    ck_assert_int_eq(d->reason, TM_DL_IDENTITY_CONFLICT);
    ck_assert_uint_eq(d->range, 1);
    ck_assert_int_eq(d->offset, 6);
    ck_assert_int_eq(d->timestamp_ms, 1006);
    ck_assert_str_eq(d->detail, "key [1] appeared earlier in this batch at "
                                "t/0@10 with another payload");
    ck_assert_mem_eq(d->value, "{\"id\":1,\"v\":\"b\"}", 16);
    ck_assert_int_eq(b->dead_letters[1].offset, 13);
    ck_assert_uint_eq(b->dead_letters[1].range, 0);

    tm_bb_counts c;
    tm_bb_counts(bb, &c);
    ck_assert_uint_eq(c.rows, 2);
    ck_assert_uint_eq(c.dead_letters, 2);
    ck_assert_uint_eq(c.duplicates, 2);
    ck_assert_uint_eq(c.filtered, 0);
    ck_assert_uint_eq(tm_bb_messages(bb), 6);
    ck_assert_int_eq(b->ranges[0].end_offset, 14);
    ck_assert_int_eq(b->ranges[1].end_offset, 7);

    /* The sink's marker check accepts what the builder made. */
    tm_marker stored[2];
    memset(stored, 0, sizeof stored);
    for (int i = 0; i < 2; i++) {
        stored[i].struct_size = (uint32_t)sizeof(tm_marker);
        stored[i].topic = "t";
        stored[i].partition = i;
        stored[i].epoch = 1;
        stored[i].next_offset = b->ranges[i].start_offset;
    }
    tm_error err = {.struct_size = sizeof(tm_error)};
    ck_assert_int_eq(tm_marker_check(b, stored, &err), TM_OK);

    tm_bb_free(bb);
    tm_config_free(cfg);
}
END_TEST

/* Kafka metadata is not part of the payload: a resend of the same event
 * as another message (other key, headers, timestamp) is a duplicate. */
START_TEST(metadata_is_not_payload) {
    tm_connector_config *cfg =
        json_cfg("{\"name\":\"id\",\"pointer\":\"/id\",\"type\":\"text\"},"
                 "{\"name\":\"seq\",\"pointer\":\"/seq\",\"type\":\"int\"},"
                 "{\"name\":\"v\",\"pointer\":\"/v\",\"type\":\"text\"}",
                 "\"id\",\"seq\"");
    tm_batch_builder *bb = tm_bb_new(cfg);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b", 0);
    int r = tm_bb_range(bb, "t", 0, 0, 1);
    const char *v = "{\"id\":\"A-17\",\"seq\":3,\"v\":\"x\"}";
    tm_header_view h = {"trace", "1", 1};
    tm_msg_view m1 = {.topic = "t",
                      .offset = 0,
                      .timestamp_ms = 1,
                      .key = "k1",
                      .key_len = 2,
                      .value = v,
                      .value_len = strlen(v)};
    tm_msg_view m2 = {.topic = "t",
                      .offset = 1,
                      .timestamp_ms = 2,
                      .key = "k2",
                      .key_len = 2,
                      .value = v,
                      .value_len = strlen(v),
                      .headers = &h,
                      .nheaders = 1};
    ck_assert_int_eq(tm_bb_add(bb, (uint32_t)r, &m1), 0);
    ck_assert_int_eq(tm_bb_add(bb, (uint32_t)r, &m2), 0);
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_uint_eq(b->nrecords, 1);
    ck_assert_uint_eq(b->ndead_letters, 0);
    ck_assert_uint_eq(b->ranges[0].duplicates, 1);
    ck_assert_str_eq(b->records[0].identity, "[\"A-17\",3]");
    /* sha256 of ["A-17",3,"x"]. */
    ck_assert_str_eq(
        b->records[0].identity_hash,
        "4610d387cb424fada1cf4b142416baedcfde8dfc18e425b743719e35404a1513");
    tm_bb_free(bb);
    tm_config_free(cfg);
}
END_TEST

/* A null key column is part of the key, as null. */
START_TEST(null_key_column) {
    tm_connector_config *cfg = json_cfg(COLS_ID_V, "\"id\"");
    tm_batch_builder *bb = tm_bb_new(cfg);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b", 0);
    int r = tm_bb_range(bb, "t", 0, 0, 1);
    add(bb, r, 0, 0, "{\"v\":\"a\"}");
    add(bb, r, 0, 1, "{\"id\":null,\"v\":\"a\"}");
    add(bb, r, 0, 2, "{\"v\":\"b\"}");
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_uint_eq(b->nrecords, 1);
    ck_assert_str_eq(b->records[0].identity, "[null]");
    ck_assert_uint_eq(b->ranges[0].duplicates, 1);
    ck_assert_uint_eq(b->ndead_letters, 1);
    ck_assert_str_eq(b->dead_letters[0].detail,
                     "key [null] appeared earlier in this batch at t/0@0 "
                     "with another payload");
    tm_bb_free(bb);
    tm_config_free(cfg);
}
END_TEST

/* Canonical values of every type in the identity. */
START_TEST(identity_of_each_type) {
    tm_connector_config *cfg =
        json_cfg("{\"name\":\"s\",\"pointer\":\"/s\",\"type\":\"text\"},"
                 "{\"name\":\"i\",\"pointer\":\"/i\",\"type\":\"int\"},"
                 "{\"name\":\"f\",\"pointer\":\"/f\",\"type\":\"float\"},"
                 "{\"name\":\"b\",\"pointer\":\"/b\",\"type\":\"bool\"},"
                 "{\"name\":\"t\",\"pointer\":\"/t\",\"type\":\"timestamp\"},"
                 "{\"name\":\"j\",\"pointer\":\"/j\",\"type\":\"json\"}",
                 "\"j\",\"t\",\"b\",\"f\",\"i\",\"s\"");
    tm_batch_builder *bb = tm_bb_new(cfg);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b", 0);
    int r = tm_bb_range(bb, "t", 0, 0, 1);
    add(bb, r, 0, 0,
        "{\"s\":\"q\\\"\\u00e9\",\"i\":-5,\"f\":2,\"b\":false,"
        "\"t\":\"1970-01-01T00:00:01Z\",\"j\":{\"b\":1,\"a\":[0.5]}}");
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_uint_eq(b->nrecords, 1);
    /* In the key's order, not the columns'. */
    ck_assert_str_eq(b->records[0].identity,
                     "[{\"a\":[0.5],\"b\":1},1000000,false,2.0,-5,"
                     "\"q\\\"\xc3\xa9\"]");
    tm_bb_free(bb);
    tm_config_free(cfg);
}
END_TEST

/* Raw mode: the hash covers key, value and headers only. */
START_TEST(raw_mode_dedup) {
    tm_connector_config *cfg = cfg_with("{\"mode\":\"raw\"}", "\"key\"");
    tm_batch_builder *bb = tm_bb_new(cfg);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b", 0);
    int r0 = tm_bb_range(bb, "t", 0, 0, 1);
    int r1 = tm_bb_range(bb, "t", 1, 0, 1);
    tm_msg_view m = {.topic = "t",
                     .offset = 0,
                     .timestamp_ms = 5,
                     .key = "k",
                     .key_len = 1,
                     .value = "\xff",
                     .value_len = 1};
    ck_assert_int_eq(tm_bb_add(bb, (uint32_t)r0, &m), 0);
    m.partition = 1;
    m.offset = 9;
    m.timestamp_ms = 6;
    ck_assert_int_eq(tm_bb_add(bb, (uint32_t)r1, &m), 0); /* duplicate */
    m.offset = 10;
    m.value = "\xfe";
    ck_assert_int_eq(tm_bb_add(bb, (uint32_t)r1, &m), 0); /* conflict */
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_uint_eq(b->nrecords, 1);
    ck_assert_str_eq(b->records[0].identity, "[\"k\"]");
    ck_assert_uint_eq(b->ranges[1].duplicates, 1);
    ck_assert_uint_eq(b->ndead_letters, 1);
    ck_assert_int_eq(b->dead_letters[0].reason, TM_DL_IDENTITY_CONFLICT);
    /* The hash of [key, value, headers]: ["k",{"base64":"/w=="},null]. */
    char want[TM_SHA256_HEX_LEN + 1];
    const char *canon = "[\"k\",{\"base64\":\"/w==\"},null]";
    tm_sha256_hex(canon, strlen(canon), want);
    ck_assert_str_eq(b->records[0].identity_hash, want);
    tm_bb_free(bb);
    tm_config_free(cfg);
}
END_TEST

/* ---- counts, bytes, stability, reuse ---- */

START_TEST(counts_and_bytes) {
    char mapping[1024];
    snprintf(mapping, sizeof mapping,
             "{\"mode\":\"json\",\"columns\":[%s,"
             "{\"name\":\"r\",\"pointer\":\"/r\",\"type\":\"int\","
             "\"required\":true}],\"filter\":\"/k == yes\"}",
             COLS_ID_V);
    tm_connector_config *cfg = cfg_with(mapping, "\"id\"");
    tm_batch_builder *bb = tm_bb_new(cfg);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b", 0);
    ck_assert_uint_eq(tm_bb_messages(bb), 0);
    ck_assert_uint_eq(tm_bb_bytes(bb), 0);
    int r = tm_bb_range(bb, "t", 0, 0, 1);
    tm_header_view h[] = {{"ab", "xyz", 3}, {"n", NULL, 0}};
    const char *v1 = "{\"k\":\"yes\",\"id\":1,\"r\":1}"; /* row */
    tm_msg_view m = {.topic = "t",
                     .offset = 0,
                     .key = "key",
                     .key_len = 3,
                     .value = v1,
                     .value_len = strlen(v1),
                     .headers = h,
                     .nheaders = 2};
    ck_assert_int_eq(tm_bb_add(bb, (uint32_t)r, &m), 0);
    ck_assert_uint_eq(tm_bb_bytes(bb), 3 + strlen(v1) + 2 + 3 + 1);
    size_t bytes = tm_bb_bytes(bb);
    add(bb, r, 0, 1, "{\"k\":\"yes\",\"id\":1,\"r\":1}"); /* duplicate */
    add(bb, r, 0, 2, "{\"k\":\"no\"}");                   /* filtered */
    add(bb, r, 0, 3, "{\"k\":\"yes\",\"id\":2}");         /* missing */
    add(bb, r, 0, 4, NULL);                               /* tombstone */
    add(bb, r, 0, 5, "{\"k\":\"yes\",\"id\":1,\"r\":2}"); /* conflict */
    ck_assert_uint_eq(tm_bb_bytes(bb), bytes + 24 + 10 + 18 + 0 + 24);
    ck_assert_uint_eq(tm_bb_messages(bb), 6);
    tm_bb_counts c;
    tm_bb_counts(bb, &c);
    ck_assert_uint_eq(c.rows, 1);
    ck_assert_uint_eq(c.duplicates, 1);
    ck_assert_uint_eq(c.filtered, 1);
    ck_assert_uint_eq(c.dead_letters, 3);
    /* Every message has exactly one outcome. */
    ck_assert_uint_eq(c.rows + c.duplicates + c.filtered + c.dead_letters,
                      tm_bb_messages(bb));
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_int_eq(b->dead_letters[0].reason, TM_DL_MISSING_FIELD);
    ck_assert_int_eq(b->dead_letters[1].reason, TM_DL_PARSE_ERROR);
    ck_assert_ptr_null(b->dead_letters[1].value);
    ck_assert_int_eq(b->dead_letters[2].reason, TM_DL_IDENTITY_CONFLICT);
    /* Offset order within the partition. */
    ck_assert_int_lt(b->dead_letters[0].offset, b->dead_letters[1].offset);
    ck_assert_int_lt(b->dead_letters[1].offset, b->dead_letters[2].offset);
    ck_assert_str_eq(b->records[0].headers_json,
                     "[[\"ab\",\"xyz\"],[\"n\",null]]");
    ck_assert_mem_eq(b->records[0].key, "key", 3);
    tm_bb_free(bb);
    tm_config_free(cfg);
}
END_TEST

START_TEST(batch_is_stable) {
    tm_connector_config *cfg = json_cfg(COLS_ID_V, "\"id\"");
    tm_batch_builder *bb = tm_bb_new(cfg);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b", 9);
    int r = tm_bb_range(bb, "t", 0, 0, 1);
    add(bb, r, 0, 0, "{\"id\":1,\"v\":\"a\"}");
    add(bb, r, 0, 1, "{\"id\":\"x\"}");
    const tm_batch *b1 = tm_bb_batch(bb);
    tm_batch copy = *b1;
    tm_record rec = b1->records[0];
    const tm_batch *b2 = tm_bb_batch(bb);
    ck_assert_ptr_eq(b1, b2);
    ck_assert_mem_eq(&copy, b2, sizeof copy);
    ck_assert_mem_eq(&rec, &b2->records[0], sizeof rec);
    ck_assert_str_eq(b2->records[0].identity, "[1]");
    ck_assert_uint_eq(b2->ndead_letters, 1);
    tm_bb_free(bb);
    tm_config_free(cfg);
}
END_TEST

START_TEST(reset_reuses) {
    tm_connector_config *cfg = json_cfg(COLS_ID_V, "\"id\"");
    tm_batch_builder *bb = tm_bb_new(cfg);
    ck_assert_ptr_nonnull(bb);
    /* A fresh builder is an empty batch already. */
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->nranges, 0);
    ck_assert_str_eq(b->batch_id, "");
    for (int round = 0; round < 3; round++) {
        char id[32];
        snprintf(id, sizeof id, "round-%d", round);
        tm_bb_reset(bb, id, round);
        memset(id, 'X', sizeof id - 1); /* the builder copied it */
        int r = tm_bb_range(bb, "t", 0, 10 * round, 1);
        ck_assert_int_eq(r, 0);
        /* The same identity again in each batch: a row each time (the
         * dedup index is per batch). */
        add(bb, r, 0, 10 * round, "{\"id\":1,\"v\":\"a\"}");
        add(bb, r, 0, 10 * round + 1, "{\"id\":1,\"v\":\"a\"}");
        b = tm_bb_batch(bb);
        char want[32];
        snprintf(want, sizeof want, "round-%d", round);
        ck_assert_str_eq(b->batch_id, want);
        ck_assert_int_eq(b->deadline_ms, round);
        ck_assert_uint_eq(b->nranges, 1);
        ck_assert_uint_eq(b->nrecords, 1);
        ck_assert_uint_eq(b->ranges[0].duplicates, 1);
        ck_assert_int_eq(b->ranges[0].start_offset, 10 * round);
        ck_assert_uint_eq(tm_bb_messages(bb), 2);
    }
    tm_bb_reset(bb, NULL, 0);
    tm_bb_counts c;
    tm_bb_counts(bb, &c);
    ck_assert_uint_eq(c.rows + c.duplicates + c.filtered + c.dead_letters, 0);
    ck_assert_uint_eq(tm_bb_bytes(bb), 0);
    ck_assert_uint_eq(tm_bb_batch(bb)->nrecords, 0);
    tm_bb_free(bb);
    tm_config_free(cfg);
}
END_TEST

/* Many distinct identities and their duplicates: all found, in order. */
START_TEST(large_batch) {
    tm_connector_config *cfg = json_cfg(COLS_ID_V, "\"id\"");
    tm_batch_builder *bb = tm_bb_new(cfg);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "big", 0);
    int r = tm_bb_range(bb, "t", 0, 0, 1);
    const int N = 50000;
    char v[64];
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < N; i++) {
            snprintf(v, sizeof v, "{\"id\":%d,\"v\":\"p\"}", i);
            add(bb, r, 0, (int64_t)pass * N + i, v);
        }
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_uint_eq(b->nrecords, (size_t)N);
    ck_assert_uint_eq(b->ranges[0].duplicates, (uint64_t)N);
    ck_assert_uint_eq(b->ndead_letters, 0);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(b->records[i].offset, i);
    ck_assert_str_eq(b->records[N - 1].identity, "[49999]");
    tm_bb_free(bb);
    tm_config_free(cfg);
}
END_TEST

/* Out of memory inside jansson (parse, headers, canonical text): the add
 * fails and says so instead of making a wrong outcome, the batch is
 * withheld, and after a reset the builder works again. */
static long alloc_budget = -1; /* allocations left before failing; -1: all */

static void *budget_malloc(size_t n) {
    if (alloc_budget == 0)
        return NULL;
    if (alloc_budget > 0)
        alloc_budget--;
    return malloc(n);
}

/* Adds m with jansson failing after `budget` allocations. */
static int add_with_budget(tm_batch_builder *bb, const tm_msg_view *m,
                           long budget) {
    tm_bb_reset(bb, "b", 0);
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 0, 1), 0);
    alloc_budget = budget;
    json_set_alloc_funcs(budget_malloc, free);
    int rc = tm_bb_add(bb, 0, m);
    json_set_alloc_funcs(malloc, free);
    alloc_budget = -1;
    return rc;
}

/* Every budget short of enough fails the add (no batch); the first that
 * is enough gives the one expected outcome. Returns the batch. */
static const tm_batch *sweep(tm_batch_builder *bb, const tm_msg_view *m) {
    int failures = 0;
    for (long budget = 0; budget < 1000; budget++) {
        if (add_with_budget(bb, m, budget) == 0) {
            ck_assert_int_gt(failures, 3);
            return tm_bb_batch(bb);
        }
        failures++;
        ck_assert_ptr_null(tm_bb_batch(bb));
    }
    ck_abort_msg("never succeeded");
    return NULL;
}

START_TEST(oom_in_jansson) {
    tm_connector_config *cfg = json_cfg(
        COLS_ID_V ",{\"name\":\"j\",\"pointer\":\"/j\",\"type\":\"json\"}",
        "\"id\"");
    tm_batch_builder *bb = tm_bb_new(cfg);
    ck_assert_ptr_nonnull(bb);
    static const unsigned char bin[] = {0xff, 0x01};
    tm_header_view h[] = {{"h", "v", 1}, {"b", bin, 2}};
    const char *v = "{\"id\":1,\"v\":\"a\",\"j\":{\"k\":[1,2,{\"x\":null}]}}";
    tm_msg_view m = {.topic = "t",
                     .offset = 0,
                     .value = v,
                     .value_len = strlen(v),
                     .headers = h,
                     .nheaders = 2};
    const tm_batch *b = sweep(bb, &m);
    ck_assert_uint_eq(b->nrecords, 1);
    ck_assert_uint_eq(b->ndead_letters, 0);
    ck_assert_str_eq(b->records[0].identity, "[1]");
    ck_assert_str_eq(b->records[0].headers_json,
                     "[[\"h\",\"v\"],[\"b\",{\"base64\":\"/wE=\"}]]");

    /* A type mismatch quoting an object, and a real syntax error: still
     * their dead letters once memory suffices. */
    const char *bad = "{\"id\":{\"a\":[1]}}";
    m.value = bad;
    m.value_len = strlen(bad);
    b = sweep(bb, &m);
    ck_assert_uint_eq(b->ndead_letters, 1);
    ck_assert_str_eq(b->dead_letters[0].detail,
                     "/id: expected int, found object {\"a\":[1]} (column id)");
    const char *broken = "{\"id\":1,\"v\":\"a\" \"j\":2}";
    m.value = broken;
    m.value_len = strlen(broken);
    b = sweep(bb, &m);
    ck_assert_uint_eq(b->ndead_letters, 1);
    ck_assert_int_eq(b->dead_letters[0].reason, TM_DL_PARSE_ERROR);
    ck_assert_str_eq(b->dead_letters[0].detail,
                     "invalid JSON at line 1, column 19: '}' expected near "
                     "'\"j\"'");
    tm_bb_free(bb);
    tm_config_free(cfg);
}
END_TEST

static Suite *builder_suite(void) {
    Suite *s = suite_create("batch_builder");
    TCase *tc = tcase_create("batch_builder");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, sha256_vectors);
    tcase_add_test(tc, ranges_and_extend);
    tcase_add_test(tc, duplicate_and_conflict);
    tcase_add_test(tc, metadata_is_not_payload);
    tcase_add_test(tc, null_key_column);
    tcase_add_test(tc, identity_of_each_type);
    tcase_add_test(tc, raw_mode_dedup);
    tcase_add_test(tc, counts_and_bytes);
    tcase_add_test(tc, batch_is_stable);
    tcase_add_test(tc, reset_reuses);
    tcase_add_test(tc, large_batch);
    tcase_add_test(tc, oom_in_jansson);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(builder_suite(), 1);
}
