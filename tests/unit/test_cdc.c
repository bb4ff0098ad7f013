/* Change data capture (docs/configuration.md, "Change data capture"): the
 * config's $.mapping.format, the Connect and Debezium envelopes and the
 * ExtractNewRecordState shape, Connect's logical types, the dead letters
 * of bad events, and the batch builder keeping every event in order.
 * The events are written by hand after the documented formats (a
 * Debezium change event: before, after, source, op, ts_ms; JsonConverter
 * with schemas: {"schema", "payload"}); expected values worked out by
 * hand (base64 of big-endian integers, days and microseconds since
 * 1970). */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/connector_config.h"
#include "convert/arena.h"
#include "convert/batch_builder.h"
#include "convert/record_convert.h"
#include "convert/timestamp.h"
#include "check_main.h"

#define COLS                                                                   \
    "[{\"name\":\"id\",\"pointer\":\"/id\",\"type\":\"int\",\"key\":true},"    \
    "{\"name\":\"name\",\"pointer\":\"/name\",\"type\":\"text\","              \
    "\"required\":true}]"

/* The config text with mapping M; NULL (and the errors in errs) when it
 * is refused. */
static tm_connector_config *load(const char *m, tm_config_errors *errs) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\":\"cdc\",\"kafka\":{\"bootstrap_servers\":\"k:9092\","
             "\"topics\":[\"t\"]},\"sink\":{\"plugin\":\"sqlite\"},"
             "\"mapping\":%s}",
             m);
    return tm_config_load_string(text, "t.json", errs);
}

static tm_connector_config *cfg(const char *format, const char *cols) {
    char m[2048];
    snprintf(m, sizeof m,
             "{\"mode\":\"json\",\"format\":\"%s\",\"columns\":%s}", format,
             cols);
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    tm_connector_config *c = load(m, &errs);
    for (size_t i = 0; i < errs.count; i++)
        fprintf(stderr, "config: %s\n", errs.lines[i]);
    tm_config_errors_free(&errs);
    ck_assert_ptr_nonnull(c);
    return c;
}

/* The config's first error, which must exist and contain want. */
static void refused(const char *mapping, const char *want) {
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    tm_connector_config *c = load(mapping, &errs);
    ck_assert_ptr_null(c);
    ck_assert_uint_ge(errs.count, 1);
    int found = 0;
    for (size_t i = 0; i < errs.count; i++)
        found |= strstr(errs.lines[i], want) != NULL;
    if (!found)
        fprintf(stderr, "wanted \"%s\" in: %s\n", want, errs.lines[0]);
    ck_assert(found);
    tm_config_errors_free(&errs);
}

typedef struct conv {
    tm_arena a;
    tm_converter *cv;
    tm_conv_result res;
    tm_conv_outcome out;
} conv;

static void run(conv *x, const tm_connector_config *c, const char *key,
                const char *value) {
    tm_arena_init(&x->a);
    x->cv = tm_converter_new(c);
    ck_assert_ptr_nonnull(x->cv);
    tm_conv_input in = {.topic = "t",
                        .offset = 7,
                        .timestamp_ms = -1,
                        .key = key,
                        .key_len = key ? strlen(key) : 0,
                        .value = value,
                        .value_len = value ? strlen(value) : 0};
    x->out = tm_convert(x->cv, &x->a, &in, &x->res);
}

static void done(conv *x) {
    tm_converter_free(x->cv);
    tm_arena_free(&x->a);
}

static void expect_dead(const tm_connector_config *c, const char *key,
                        const char *value, tm_dl_reason reason,
                        const char *detail_part) {
    conv x;
    run(&x, c, key, value);
    ck_assert_int_eq(x.out, TM_CONV_DEAD_LETTER);
    ck_assert_int_eq(x.res.reason, reason);
    if (!strstr(x.res.detail, detail_part))
        fprintf(stderr, "detail: %s\n", x.res.detail);
    ck_assert_ptr_nonnull(strstr(x.res.detail, detail_part));
    done(&x);
}

/* ---- config ---- */

START_TEST(config_format_checked) {
    refused("{\"mode\":\"json\",\"format\":\"avro\",\"columns\":" COLS "}",
            "$.mapping.format: expected \"plain\", \"connect\" or "
            "\"debezium\"");
    refused("{\"mode\":\"json\",\"format\":\"debezium\",\"columns\":"
            "[{\"name\":\"id\",\"pointer\":\"/id\",\"type\":\"int\"}]}",
            "$.mapping.columns: expected at least one key column");
    refused("{\"mode\":\"raw\",\"format\":\"connect\"}",
            "$.mapping.format: not allowed with mode \"raw\"");
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    char text[2048];
    snprintf(text, sizeof text,
             "{\"name\":\"cdc\",\"kafka\":{\"bootstrap_servers\":\"k:9092\","
             "\"topics\":[\"t\"]},\"sink\":{\"plugin\":\"sqlite\"},"
             "\"mapping\":{\"mode\":\"json\",\"format\":\"debezium\","
             "\"columns\":%s},\"dedup\":{\"key\":[\"id\"]}}",
             COLS);
    ck_assert_ptr_null(tm_config_load_string(text, "t.json", &errs));
    ck_assert_ptr_nonnull(strstr(errs.lines[0], "$.dedup: not allowed"));
    tm_config_errors_free(&errs);
    /* plain is the default: no CDC flag */
    tm_connector_config *c = cfg("plain", COLS);
    ck_assert_int_eq(c->mapping.format, TM_FORMAT_PLAIN);
    tm_sink_config sc;
    tm_config_sink_config(c, NULL, NULL, &sc);
    ck_assert_uint_eq(sc.flags & TM_CONFIG_CDC, 0);
    tm_config_free(c);
    c = cfg("debezium", COLS);
    tm_config_sink_config(c, NULL, NULL, &sc);
    ck_assert_uint_eq(sc.flags & TM_CONFIG_CDC, TM_CONFIG_CDC);
    tm_config_free(c);
}
END_TEST

/* ---- Debezium ---- */

/* A change event without the Connect envelope (schemas disabled). */
#define EVENT(before, after, op)                                               \
    "{\"before\":" before ",\"after\":" after                                  \
    ",\"source\":{\"connector\":\"postgresql\",\"db\":\"shop\",\"table\":"     \
    "\"customers\",\"lsn\":33227720},\"op\":\"" op                             \
    "\",\"ts_ms\":1700000000000}"

START_TEST(debezium_ops) {
    tm_connector_config *c = cfg("debezium", COLS);
    conv x;
    run(&x, c, NULL, EVENT("null", "{\"id\":1,\"name\":\"ann\"}", "c"));
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_uint_eq(x.res.op, TM_OP_UPSERT);
    ck_assert_int_eq(x.res.values[0].v.i, 1);
    ck_assert_str_eq(x.res.values[1].v.s.ptr, "ann");
    done(&x);
    /* a snapshot read and an update: upserts of the after image */
    run(&x, c, NULL, EVENT("null", "{\"id\":2,\"name\":\"bo\"}", "r"));
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_uint_eq(x.res.op, TM_OP_UPSERT);
    done(&x);
    run(&x, c, NULL,
        EVENT("{\"id\":1,\"name\":\"ann\"}", "{\"id\":1,\"name\":\"anna\"}",
              "u"));
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_str_eq(x.res.values[1].v.s.ptr, "anna");
    done(&x);
    /* a delete: the key from before, the rest null (required or not) */
    run(&x, c, NULL, EVENT("{\"id\":1,\"name\":\"anna\"}", "null", "d"));
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_uint_eq(x.res.op, TM_OP_DELETE);
    ck_assert_int_eq(x.res.values[0].v.i, 1);
    ck_assert(x.res.values[1].is_null);
    done(&x);
    /* a delete without before: the record key (Connect envelope or not) */
    run(&x, c,
        "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"field\":\"id\","
        "\"type\":\"int32\"}]},\"payload\":{\"id\":9}}",
        EVENT("null", "null", "d"));
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_uint_eq(x.res.op, TM_OP_DELETE);
    ck_assert_int_eq(x.res.values[0].v.i, 9);
    done(&x);
    /* a before image without the key's value (missing or null: a
     * replica identity without it): the record key's */
    run(&x, c, "{\"id\":5}", EVENT("{\"name\":\"anna\"}", "null", "d"));
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_uint_eq(x.res.op, TM_OP_DELETE);
    ck_assert_int_eq(x.res.values[0].v.i, 5);
    done(&x);
    run(&x, c,
        "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"field\":\"id\","
        "\"type\":\"int32\"}]},\"payload\":{\"id\":6}}",
        EVENT("{\"id\":null,\"name\":\"anna\"}", "null", "d"));
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_int_eq(x.res.values[0].v.i, 6);
    done(&x);
    /* a tombstone: a delete of its record key's row (compaction may have
     * removed the delete event before it), enveloped key or not */
    run(&x, c, "{\"id\":9}", NULL);
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_uint_eq(x.res.op, TM_OP_DELETE);
    ck_assert_int_eq(x.res.values[0].v.i, 9);
    ck_assert(x.res.values[1].is_null);
    done(&x);
    run(&x, c,
        "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"field\":\"id\","
        "\"type\":\"int32\"}]},\"payload\":{\"id\":10}}",
        NULL);
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_uint_eq(x.res.op, TM_OP_DELETE);
    ck_assert_int_eq(x.res.values[0].v.i, 10);
    done(&x);
    tm_config_free(c);
}
END_TEST

/* A tombstone whose record key names no row: a dead letter, never a
 * silent skip (the row it should delete would stay). */
START_TEST(tombstone_without_key) {
    const char *formats[] = {"debezium", "connect"};
    for (size_t f = 0; f < 2; f++) {
        tm_connector_config *c = cfg(formats[f], COLS);
        expect_dead(c, NULL, NULL, TM_DL_NULL_KEY,
                    "a tombstone (null value) without a JSON object as its "
                    "record key");
        expect_dead(c, "not json", NULL, TM_DL_NULL_KEY, "no key to delete by");
        expect_dead(c, "9", NULL, TM_DL_NULL_KEY, "no key to delete by");
        expect_dead(c, "{\"other\":1}", NULL, TM_DL_NULL_KEY,
                    "/id: key column id is missing: no row to delete by");
        expect_dead(c, "{\"id\":null}", NULL, TM_DL_NULL_KEY,
                    "key column id is null");
        expect_dead(c,
                    "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"field\":"
                    "\"id\",\"type\":\"int32\"}]},\"payload\":{\"id\":\"x\"}}",
                    NULL, TM_DL_SCHEMA_MISMATCH, "/key/payload");
        /* connect: the flattened delete ExtractNewRecordState leaves */
        conv x;
        run(&x, c, "{\"id\":4}", NULL);
        ck_assert_int_eq(x.out, TM_CONV_ROW);
        ck_assert_uint_eq(x.res.op, TM_OP_DELETE);
        ck_assert_int_eq(x.res.values[0].v.i, 4);
        done(&x);
        tm_config_free(c);
    }
}
END_TEST

START_TEST(debezium_bad_events) {
    tm_connector_config *c = cfg("debezium", COLS);
    expect_dead(c, NULL, "{\"after\":{\"id\":1,\"name\":\"a\"}}",
                TM_DL_ENVELOPE, "/op: expected a Debezium change event");
    expect_dead(c, NULL, EVENT("null", "null", "t"), TM_DL_ENVELOPE,
                "found \"t\"");
    expect_dead(c, NULL, EVENT("null", "[1]", "c"), TM_DL_ENVELOPE,
                "/after: expected an object");
    expect_dead(c, NULL, "[1,2]", TM_DL_ENVELOPE, "expected an object");
    expect_dead(c, NULL, "{\"op\":", TM_DL_PARSE_ERROR, "invalid JSON");
    /* the key missing, or null */
    expect_dead(c, NULL, EVENT("null", "{\"name\":\"a\"}", "c"), TM_DL_NULL_KEY,
                "/id: key column id is missing");
    expect_dead(c, NULL, EVENT("{\"id\":null}", "null", "d"), TM_DL_NULL_KEY,
                "key column id is null");
    expect_dead(c, NULL, EVENT("null", "null", "d"), TM_DL_NULL_KEY,
                "a delete without the row's before image");
    /* a type the column does not take */
    expect_dead(c, NULL, EVENT("null", "{\"id\":\"x\",\"name\":\"a\"}", "c"),
                TM_DL_TYPE_MISMATCH, "/id: expected int");
    tm_config_free(c);
}
END_TEST

/* The Debezium event in the Connect envelope, its schema describing the
 * before and after structs. */
#define ROW_SCHEMA(opt)                                                        \
    "\"type\":\"struct\",\"optional\":" opt ",\"name\":\"shop.customers."      \
    "Value\",\"fields\":[{\"field\":\"id\",\"type\":\"int32\",\"optional\":"   \
    "false},{\"field\":\"name\",\"type\":\"string\",\"optional\":true}]"

#define ENVELOPED(payload)                                                     \
    "{\"schema\":{\"type\":\"struct\",\"name\":\"shop.customers.Envelope\","   \
    "\"fields\":[{\"field\":\"before\"," ROW_SCHEMA(                           \
        "true") "},{\"field\":\"after\"," ROW_SCHEMA("true") "},{\"field\":"   \
                                                             "\"op\","         \
                                                             "\"type\":"       \
                                                             "\"string\","     \
                                                             "\"optional\":"   \
                                                             "false},"         \
                                                             "{\"field\":"     \
                                                             "\"ts_ms\","      \
                                                             "\"type\":"       \
                                                             "\"int64\","      \
                                                             "\"optional\":"   \
                                                             "true}]},"        \
                                                             "\"payload\""     \
                                                             ":" payload "}"

START_TEST(debezium_with_schema) {
    tm_connector_config *c = cfg("debezium", COLS);
    conv x;
    run(&x, c, NULL,
        ENVELOPED("{\"before\":null,\"after\":{\"id\":3,\"name\":\"cy\"},"
                  "\"op\":\"c\",\"ts_ms\":1}"));
    if (x.out != TM_CONV_ROW)
        fprintf(stderr, "detail: %s\n", x.res.detail);
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_int_eq(x.res.values[0].v.i, 3);
    done(&x);
    /* schema and payload disagree: a string where int32 is said, a field
     * the schema does not have, a non-optional null */
    expect_dead(c, NULL,
                ENVELOPED("{\"before\":null,\"after\":{\"id\":\"3\"},\"op\":"
                          "\"c\",\"ts_ms\":1}"),
                TM_DL_SCHEMA_MISMATCH,
                "/payload/after/id: the schema says int32, the payload has "
                "a string");
    expect_dead(c, NULL,
                ENVELOPED("{\"before\":null,\"after\":{\"id\":3,\"age\":4},"
                          "\"op\":\"c\",\"ts_ms\":1}"),
                TM_DL_SCHEMA_MISMATCH,
                "/payload/after/age: in the payload, not in the schema");
    expect_dead(c, NULL,
                ENVELOPED("{\"before\":null,\"after\":{\"id\":null},\"op\":"
                          "\"c\",\"ts_ms\":1}"),
                TM_DL_SCHEMA_MISMATCH, "/payload/after/id: null");
    tm_config_free(c);
}
END_TEST

/* JsonConverter names Connect's FLOAT32 "float" and FLOAT64 "double" in
 * the schemas it writes (org.apache.kafka.connect.json.JsonSchema), not
 * "float32"/"float64" as Connect's Java enum does: Debezium writes a
 * PostgreSQL double precision column as "double". Both are numbers; an
 * integer-looking value (JSON 3, as Jackson writes 3.0) is one too, and a
 * string is not. */
#define FLOAT_COLS                                                             \
    "[{\"name\":\"id\",\"pointer\":\"/id\",\"type\":\"int\",\"key\":true},"    \
    "{\"name\":\"f\",\"pointer\":\"/f\",\"type\":\"float\"},"                  \
    "{\"name\":\"d\",\"pointer\":\"/d\",\"type\":\"float\"}]"
#define FLOAT_SCHEMA                                                           \
    "{\"type\":\"struct\",\"fields\":[{\"field\":\"id\",\"type\":\"int32\"},"  \
    "{\"field\":\"f\",\"type\":\"float\",\"optional\":true},"                  \
    "{\"field\":\"d\",\"type\":\"double\",\"optional\":true}]}"

START_TEST(connect_float_and_double) {
    tm_connector_config *c = cfg("connect", FLOAT_COLS);
    conv x;
    run(&x, c, NULL,
        "{\"schema\":" FLOAT_SCHEMA ",\"payload\":{\"id\":1,\"f\":1.5,"
        "\"d\":-883655.0992983452}}");
    if (x.out != TM_CONV_ROW)
        fprintf(stderr, "detail: %s\n", x.res.detail);
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert(x.res.values[1].v.f == 1.5);
    ck_assert(x.res.values[2].v.f == -883655.0992983452);
    done(&x);
    run(&x, c, NULL,
        "{\"schema\":" FLOAT_SCHEMA ",\"payload\":{\"id\":2,\"f\":null,"
        "\"d\":3}}");
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert(x.res.values[2].v.f == 3.0);
    done(&x);
    expect_dead(c, NULL,
                "{\"schema\":" FLOAT_SCHEMA ",\"payload\":{\"id\":3,"
                "\"d\":\"3\"}}",
                TM_DL_SCHEMA_MISMATCH,
                "/d: the schema says double, the payload has a string");
    tm_config_free(c);
}
END_TEST

/* ---- Connect and its logical types ---- */

#define LOGICAL_COLS                                                           \
    "[{\"name\":\"id\",\"pointer\":\"/id\",\"type\":\"int\",\"key\":true},"    \
    "{\"name\":\"price\",\"pointer\":\"/price\",\"type\":\"text\"},"           \
    "{\"name\":\"pricef\",\"pointer\":\"/pricef\",\"type\":\"float\"},"        \
    "{\"name\":\"born\",\"pointer\":\"/born\",\"type\":\"timestamp\"},"        \
    "{\"name\":\"at\",\"pointer\":\"/at\",\"type\":\"timestamp\"},"            \
    "{\"name\":\"atn\",\"pointer\":\"/atn\",\"type\":\"timestamp\"},"          \
    "{\"name\":\"atz\",\"pointer\":\"/atz\",\"type\":\"timestamp\"},"          \
    "{\"name\":\"tod\",\"pointer\":\"/tod\",\"type\":\"text\"},"               \
    "{\"name\":\"ms\",\"pointer\":\"/ms\",\"type\":\"timestamp\"}]"

#define DEC(f)                                                                 \
    "{\"field\":\"" f "\",\"type\":\"bytes\",\"optional\":true,\"name\":"      \
    "\"org.apache.kafka.connect.data.Decimal\",\"parameters\":{\"scale\":"     \
    "\"2\"}}"

#define LOGICAL_SCHEMA                                                         \
    "{\"type\":\"struct\",\"fields\":[{\"field\":\"id\",\"type\":\"int64\"}"   \
    "," DEC("price") "," DEC(                                                  \
        "pricef") ",{\"field\":\"born\",\"type\":\"int32\",\"optional\":true," \
                  "\"name\":"                                                  \
                  "\"org.apache.kafka.connect.data.Date\"},"                   \
                  "{\"field\":\"at\",\"type\":\"int64\",\"optional\":true,"    \
                  "\"name\":"                                                  \
                  "\"io.debezium.time.MicroTimestamp\"},"                      \
                  "{\"field\":\"atn\",\"type\":\"int64\",\"optional\":true,"   \
                  "\"name\":"                                                  \
                  "\"io.debezium.time.NanoTimestamp\"},"                       \
                  "{\"field\":\"atz\",\"type\":\"string\",\"optional\":true,"  \
                  "\"name\":"                                                  \
                  "\"io.debezium.time.ZonedTimestamp\"},"                      \
                  "{\"field\":\"tod\",\"type\":\"int32\",\"optional\":true,"   \
                  "\"name\":"                                                  \
                  "\"org.apache.kafka.connect.data.Time\"},"                   \
                  "{\"field\":\"ms\",\"type\":\"int64\",\"optional\":true,"    \
                  "\"name\":"                                                  \
                  "\"org.apache.kafka.connect.data.Timestamp\"}]}"

START_TEST(connect_logical_types) {
    tm_connector_config *c = cfg("connect", LOGICAL_COLS);
    conv x;
    /* 12345 = 0x3039 ("MDk="), -12345 = 0xCFC7 ("z8c="), scale 2; 19000
     * days is 2022-01-08; 1700000000123456 us is 2023-11-14 22:13:20.123456
     * UTC; 3723004 ms past midnight is 01:02:03.004 */
    run(&x, c, NULL,
        "{\"schema\":" LOGICAL_SCHEMA ",\"payload\":{\"id\":1,\"price\":"
        "\"MDk=\",\"pricef\":\"z8c=\",\"born\":19000,\"at\":1700000000123456,"
        "\"atn\":1700000000123456789,\"atz\":\"2023-11-14T22:13:20.5+01:00\","
        "\"tod\":3723004,\"ms\":1700000000123}}");
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_str_eq(x.res.values[1].v.s.ptr, "123.45");
    ck_assert(x.res.values[2].v.f == -123.45);
    ck_assert_int_eq(x.res.values[3].v.i, 19000LL * 86400 * 1000000);
    ck_assert_int_eq(x.res.values[4].v.i, 1700000000123456LL);
    ck_assert_int_eq(x.res.values[5].v.i, 1700000000123456LL);
    ck_assert_int_eq(x.res.values[6].v.i, 1699996400500000LL);
    ck_assert_str_eq(x.res.values[7].v.s.ptr, "1970-01-01T01:02:03.004000Z");
    ck_assert_int_eq(x.res.values[8].v.i, 1700000000123000LL);
    done(&x);
    /* a Decimal that is not base64: the schema's word against the value */
    expect_dead(c, NULL,
                "{\"schema\":" LOGICAL_SCHEMA ",\"payload\":{\"id\":1,"
                "\"price\":\"**\"}}",
                TM_DL_SCHEMA_MISMATCH, "/price: Decimal: expected base64");
    /* no envelope at all */
    expect_dead(c, NULL, "{\"id\":1}", TM_DL_ENVELOPE,
                "expected the Connect envelope");
    tm_config_free(c);
}
END_TEST

/* Base64 that is not: a lone last digit, bits left over that are not
 * zero, padding that does not make a multiple of 4 (or too much). */
START_TEST(decimal_bad_base64) {
    tm_connector_config *c =
        cfg("connect", "[{\"name\":\"id\",\"pointer\":\"/id\",\"type\":\"int\","
                       "\"key\":true},{\"name\":\"d\",\"pointer\":\"/d\","
                       "\"type\":\"text\"}]");
    const char *bad[] = {"B", "BQ==B", "BR==", "BR", "BQ=", "BQ===", "MDl="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char v[1024];
        snprintf(v, sizeof v,
                 "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"field\":"
                 "\"id\",\"type\":\"int32\"}," DEC(
                     "d") "]},\"payload\":{\"id\":1,\"d\":\"%s\"}}",
                 bad[i]);
        conv x;
        run(&x, c, NULL, v);
        if (x.out != TM_CONV_DEAD_LETTER)
            fprintf(stderr, "accepted: %s\n", bad[i]);
        ck_assert_int_eq(x.out, TM_CONV_DEAD_LETTER);
        ck_assert_int_eq(x.res.reason, TM_DL_SCHEMA_MISMATCH);
        done(&x);
    }
    /* unpadded but whole: accepted (12345 is "MDk=") */
    conv x;
    run(&x, c, NULL,
        "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"field\":\"id\","
        "\"type\":\"int32\"}," DEC("d") "]},\"payload\":{\"id\":1,\"d\":"
                                        "\"MDk\"}}");
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_str_eq(x.res.values[1].v.s.ptr, "123.45");
    done(&x);
    tm_config_free(c);
}
END_TEST

#define DAY_COLS                                                               \
    "[{\"name\":\"day\",\"pointer\":\"/day\",\"type\":\"timestamp\","          \
    "\"key\":true},{\"name\":\"name\",\"pointer\":\"/name\",\"type\":"         \
    "\"text\"}]"
#define DAY_ROW_SCHEMA(field)                                                  \
    "{\"field\":\"" field "\",\"type\":\"struct\",\"optional\":true,"          \
    "\"fields\":[{\"field\":\"day\",\"type\":\"int32\",\"name\":"              \
    "\"io.debezium.time.Date\"},{\"field\":\"name\",\"type\":\"string\","      \
    "\"optional\":true}]}"
#define DAY_DELETE                                                             \
    "{\"schema\":{\"type\":\"struct\",\"fields\":[" DAY_ROW_SCHEMA(            \
        "before") "," DAY_ROW_SCHEMA("after") ",{\"field\":\"op\",\"type\":"   \
                                              "\"string\"}]},\"payload\":{"    \
                                              "\"before\":null,\"after\":"     \
                                              "null,\"op\":\"d\"}}"

/* A delete without before keys by the record key: its Date converts by
 * the key envelope's own schema, or by the event's row schema for a bare
 * key, never as plain epoch milliseconds (a silent non-match). */
START_TEST(delete_by_key_keeps_logical_type) {
    tm_connector_config *c = cfg("debezium", DAY_COLS);
    const int64_t want = 19000LL * 86400 * 1000000;
    conv x;
    run(&x, c,
        "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"field\":\"day\","
        "\"type\":\"int32\",\"name\":\"io.debezium.time.Date\"}]},"
        "\"payload\":{\"day\":19000}}",
        DAY_DELETE);
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_uint_eq(x.res.op, TM_OP_DELETE);
    ck_assert_int_eq(x.res.values[0].v.i, want);
    done(&x);
    run(&x, c, "{\"day\":19000}", DAY_DELETE);
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_uint_eq(x.res.op, TM_OP_DELETE);
    ck_assert_int_eq(x.res.values[0].v.i, want);
    done(&x);
    /* a key envelope that breaks its own schema */
    expect_dead(c,
                "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"field\":"
                "\"day\",\"type\":\"int32\"}]},\"payload\":{\"day\":\"x\"}}",
                DAY_DELETE, TM_DL_SCHEMA_MISMATCH, "/key");
    tm_config_free(c);
}
END_TEST

START_TEST(decimal_edges) {
    tm_connector_config *c =
        cfg("connect", "[{\"name\":\"id\",\"pointer\":\"/id\",\"type\":\"int\","
                       "\"key\":true},{\"name\":\"d\",\"pointer\":\"/d\","
                       "\"type\":\"text\"}]");
    const char *cases[][2] = {
        {"BQ==", "0.05"},  /* 5, scale 2 */
        {"/w==", "-0.01"}, /* -1 */
        {"AA==", "0.00"},  /* 0 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char v[1024];
        snprintf(v, sizeof v,
                 "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"field\":"
                 "\"id\",\"type\":\"int32\"}," DEC(
                     "d") "]},\"payload\":{\"id\":1,\"d\":\"%s\"}}",
                 cases[i][0]);
        conv x;
        run(&x, c, NULL, v);
        ck_assert_int_eq(x.out, TM_CONV_ROW);
        ck_assert_str_eq(x.res.values[1].v.s.ptr, cases[i][1]);
        done(&x);
    }
    tm_config_free(c);
}
END_TEST

/* ---- ExtractNewRecordState ---- */

START_TEST(flattened_rows) {
    tm_connector_config *c = cfg("debezium", COLS);
    conv x;
    run(&x, c, NULL, "{\"id\":4,\"name\":\"di\",\"__deleted\":\"false\"}");
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_uint_eq(x.res.op, TM_OP_UPSERT);
    done(&x);
    run(&x, c, NULL, "{\"id\":4,\"name\":\"di\",\"__deleted\":\"true\"}");
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_uint_eq(x.res.op, TM_OP_DELETE);
    done(&x);
    run(&x, c, NULL, "{\"id\":4,\"__op\":\"d\"}");
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_uint_eq(x.res.op, TM_OP_DELETE);
    done(&x);
    tm_config_free(c);
    /* in the Connect envelope */
    c = cfg("connect", COLS);
    run(&x, c, NULL,
        "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"field\":\"id\","
        "\"type\":\"int32\"},{\"field\":\"name\",\"type\":\"string\","
        "\"optional\":true},{\"field\":\"__op\",\"type\":\"string\","
        "\"optional\":true}]},\"payload\":{\"id\":5,\"name\":null,\"__op\":"
        "\"d\"}}");
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_uint_eq(x.res.op, TM_OP_DELETE);
    ck_assert_int_eq(x.res.values[0].v.i, 5);
    done(&x);
    tm_config_free(c);
}
END_TEST

/* The filter reads the row image (after; before for a delete). */
START_TEST(filter_on_row_image) {
    char m[1024];
    snprintf(m, sizeof m,
             "{\"mode\":\"json\",\"format\":\"debezium\",\"columns\":%s,"
             "\"filter\":\"/name == ann\"}",
             COLS);
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    tm_connector_config *c = load(m, &errs);
    tm_config_errors_free(&errs);
    ck_assert_ptr_nonnull(c);
    conv x;
    run(&x, c, NULL, EVENT("null", "{\"id\":1,\"name\":\"ann\"}", "c"));
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    done(&x);
    run(&x, c, NULL, EVENT("null", "{\"id\":2,\"name\":\"bo\"}", "c"));
    ck_assert_int_eq(x.out, TM_CONV_FILTERED);
    done(&x);
    run(&x, c, NULL, EVENT("{\"id\":1,\"name\":\"ann\"}", "null", "d"));
    ck_assert_int_eq(x.out, TM_CONV_ROW);
    ck_assert_uint_eq(x.res.op, TM_OP_DELETE);
    done(&x);
    tm_config_free(c);
}
END_TEST

/* ---- the batch: every event, in offset order ---- */

static void add_keyed(tm_batch_builder *bb, int r, int64_t offset,
                      const char *key, const char *value) {
    tm_msg_view m = {.topic = "t",
                     .key = key,
                     .key_len = key ? strlen(key) : 0,
                     .partition = 0,
                     .offset = offset,
                     .timestamp_ms = -1,
                     .value = value,
                     .value_len = value ? strlen(value) : 0};
    ck_assert_int_eq(tm_bb_add(bb, (uint32_t)r, &m), 0);
}

static void add(tm_batch_builder *bb, int r, int64_t offset,
                const char *value) {
    add_keyed(bb, r, offset, NULL, value);
}

START_TEST(batch_keeps_every_event) {
    tm_connector_config *c = cfg("debezium", COLS);
    tm_batch_builder *bb = tm_bb_new(c);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b1", 0);
    int r = tm_bb_range(bb, "t", 0, 10, 1);
    add(bb, r, 10, EVENT("null", "{\"id\":1,\"name\":\"a\"}", "c"));
    add(bb, r, 11, EVENT("{\"id\":1}", "{\"id\":1,\"name\":\"b\"}", "u"));
    add(bb, r, 12, EVENT("null", "{\"id\":2,\"name\":\"x\"}", "c"));
    /* a primary key change: delete of 1, create of 3 */
    add(bb, r, 13, EVENT("{\"id\":1,\"name\":\"b\"}", "null", "d"));
    add_keyed(bb, r, 14, "{\"id\":1}", NULL); /* its tombstone: a delete */
    add(bb, r, 15, EVENT("null", "{\"id\":3,\"name\":\"b\"}", "c"));
    add(bb, r, 16, EVENT("null", "{\"name\":\"nokey\"}", "c"));
    add(bb, r, 17, EVENT("{\"id\":2,\"name\":\"x\"}", "null", "d"));
    tm_bb_counts n;
    tm_bb_counts(bb, &n);
    ck_assert_uint_eq(n.rows, 7);
    ck_assert_uint_eq(n.duplicates, 0);
    ck_assert_uint_eq(n.filtered, 0);
    ck_assert_uint_eq(n.dead_letters, 1);
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->nrecords, 7);
    /* every event of a key, in offset order: the sink refusing a later
     * one must still have the earlier ones to apply */
    const int64_t offsets[] = {10, 11, 12, 13, 14, 15, 17};
    const uint32_t ops[] = {TM_OP_UPSERT, TM_OP_UPSERT, TM_OP_UPSERT,
                            TM_OP_DELETE, TM_OP_DELETE, TM_OP_UPSERT,
                            TM_OP_DELETE};
    const int64_t ids[] = {1, 1, 2, 1, 1, 3, 2};
    for (size_t i = 0; i < 7; i++) {
        const tm_record *rec = TM_CELEM(tm_record, b->records, i);
        ck_assert_int_eq(rec->offset, offsets[i]);
        ck_assert_uint_eq(TM_RECORD_OP(rec), ops[i]);
        ck_assert_int_eq(rec->values[0].v.i, ids[i]);
    }
    ck_assert_uint_eq(b->ranges[0].duplicates, 0);
    ck_assert_int_eq(b->ranges[0].end_offset, 18);
    /* the same batch again (a RETRY), and more events after a look */
    ck_assert_ptr_eq(tm_bb_batch(bb), b);
    ck_assert_uint_eq(b->nrecords, 7);
    add(bb, r, 18, EVENT("null", "{\"id\":3,\"name\":\"c\"}", "u"));
    tm_bb_counts(bb, &n);
    ck_assert_uint_eq(n.rows, 8);
    b = tm_bb_batch(bb);
    ck_assert_uint_eq(b->nrecords, 8);
    ck_assert_int_eq(TM_CELEM(tm_record, b->records, 7)->offset, 18);
    ck_assert_uint_eq(b->ranges[0].duplicates, 0);
    tm_bb_free(bb);
    tm_config_free(c);
}
END_TEST

START_TEST(timestamp_text_round_trip) {
    const int64_t us[] = {0,
                          1,
                          -1,
                          1700000000123456LL,
                          -86400000000LL * 365,
                          253402300799999999LL};
    for (size_t i = 0; i < sizeof us / sizeof us[0]; i++) {
        char t[TM_TIMESTAMP_TEXT_MAX];
        size_t n = tm_timestamp_format(us[i], t);
        ck_assert_uint_gt(n, 0);
        int64_t back = 0;
        ck_assert_int_eq(tm_timestamp_parse(t, n, &back), 0);
        ck_assert_int_eq(back, us[i]);
    }
    char t[TM_TIMESTAMP_TEXT_MAX];
    ck_assert_uint_eq(tm_timestamp_format(-1, t), 27);
    ck_assert_str_eq(t, "1969-12-31T23:59:59.999999Z");
    ck_assert_uint_eq(tm_timestamp_format(253402300800000000LL, t), 0);
}
END_TEST

/* ABI 1.5: a record of an older host (smaller, no op) reads as an upsert. */
START_TEST(record_op_of_older_hosts) {
    tm_record r;
    memset(&r, 0, sizeof r);
    r.struct_size = (uint32_t)sizeof r;
    r.op = TM_OP_DELETE;
    ck_assert_uint_eq(TM_RECORD_OP(&r), TM_OP_DELETE);
    r.struct_size = (uint32_t)offsetof(tm_record, op);
    ck_assert_uint_eq(TM_RECORD_OP(&r), TM_OP_UPSERT);
    ck_assert_str_eq(tm_dl_reason_name(TM_DL_ENVELOPE), "envelope");
    ck_assert_int_eq(tm_dl_reason_from_name("schema_mismatch"),
                     TM_DL_SCHEMA_MISMATCH);
    ck_assert_int_eq(TM_DL_REASON_LAST, TM_DL_SCHEMA_MISMATCH);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("cdc");
    TCase *t = tcase_create("all");
    tcase_add_test(t, config_format_checked);
    tcase_add_test(t, debezium_ops);
    tcase_add_test(t, tombstone_without_key);
    tcase_add_test(t, debezium_bad_events);
    tcase_add_test(t, debezium_with_schema);
    tcase_add_test(t, connect_logical_types);
    tcase_add_test(t, connect_float_and_double);
    tcase_add_test(t, decimal_edges);
    tcase_add_test(t, flattened_rows);
    tcase_add_test(t, batch_keeps_every_event);
    tcase_add_test(t, delete_by_key_keeps_logical_type);
    tcase_add_test(t, decimal_bad_base64);
    tcase_add_test(t, timestamp_text_round_trip);
    tcase_add_test(t, record_op_of_older_hosts);
    tcase_add_test(t, filter_on_row_image);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
