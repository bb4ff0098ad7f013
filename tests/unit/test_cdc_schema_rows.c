/* A change-data-capture mapping without a column list: the config, and
 * the batch builder taking each batch's columns from the events' Connect
 * schemas (columns added mid-batch, earlier rows null for them; an event
 * without a schema a dead letter; an unsafe change a stop). Events are
 * written by hand after Debezium's format in JsonConverter's envelope. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/connector_config.h"
#include "convert/batch_builder.h"
#include "check_main.h"

static tm_connector_config *load(const char *mapping, tm_config_errors *errs) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"name\":\"cdc\",\"kafka\":{\"bootstrap_servers\":\"k:9092\","
             "\"topics\":[\"t\"]},\"sink\":{\"plugin\":\"sqlite\"},"
             "\"mapping\":%s}",
             mapping);
    return tm_config_load_string(text, "t.json", errs);
}

static tm_connector_config *schema_cfg(void) {
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    tm_connector_config *c =
        load("{\"mode\":\"json\",\"format\":\"debezium\"}", &errs);
    for (size_t i = 0; i < errs.count; i++)
        fprintf(stderr, "config: %s\n", errs.lines[i]);
    tm_config_errors_free(&errs);
    ck_assert_ptr_nonnull(c);
    return c;
}

START_TEST(config_without_columns) {
    tm_connector_config *c = schema_cfg();
    ck_assert_int_eq(c->mapping.from_schema, 1);
    ck_assert_uint_eq(c->mapping.ncolumns, 0);
    tm_sink_config sc;
    tm_config_sink_config(c, NULL, NULL, &sc);
    ck_assert_uint_eq(sc.flags & TM_CONFIG_SCHEMA_COLUMNS,
                      TM_CONFIG_SCHEMA_COLUMNS);
    ck_assert_uint_eq(sc.flags & TM_CONFIG_CDC, TM_CONFIG_CDC);
    ck_assert_uint_eq(sc.ncolumns, 0);
    tm_config_free(c);
    /* plain JSON still needs its columns */
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    ck_assert_ptr_null(load("{\"mode\":\"json\"}", &errs));
    ck_assert_uint_ge(errs.count, 1);
    ck_assert_ptr_nonnull(strstr(errs.lines[0], "$.mapping.columns"));
    tm_config_errors_free(&errs);
}
END_TEST

#define F(name, type, opt)                                                     \
    "{\"field\":\"" name "\",\"type\":\"" type "\",\"optional\":" opt "}"
#define ROW2 F("id", "int32", "false") "," F("name", "string", "true")
#define ROW3 ROW2 "," F("note", "string", "true")
#define KEY                                                                    \
    "{\"schema\":{\"type\":\"struct\",\"fields\":[" F(                         \
        "id", "int32", "false") "]},"                                          \
                                "\"payload\":{\"id\":%d}}"

/* A Debezium event in the envelope: op, after (or before for "d") with
 * the row schema's fields rowfields, payload row. */
static char *event(const char *op, const char *rowfields, const char *row) {
    static char text[4096];
    int del = strcmp(op, "d") == 0;
    snprintf(text, sizeof text,
             "{\"schema\":{\"type\":\"struct\",\"fields\":["
             "{\"field\":\"before\",\"type\":\"struct\",\"optional\":true,"
             "\"fields\":[%s]},"
             "{\"field\":\"after\",\"type\":\"struct\",\"optional\":true,"
             "\"fields\":[%s]},"
             "{\"field\":\"op\",\"type\":\"string\",\"optional\":false}]},"
             "\"payload\":{\"before\":%s,\"after\":%s,\"op\":\"%s\"}}",
             rowfields, rowfields, del ? row : "null", del ? "null" : row, op);
    return text;
}

static int add(tm_batch_builder *bb, int64_t offset, int id,
               const char *value) {
    char key[512];
    snprintf(key, sizeof key, KEY, id);
    tm_msg_view m = {.topic = "t",
                     .partition = 0,
                     .offset = offset,
                     .timestamp_ms = -1,
                     .key = key,
                     .key_len = strlen(key),
                     .value = value,
                     .value_len = value ? strlen(value) : 0};
    return tm_bb_add(bb, 0, &m);
}

static void text_is(const tm_value *v, const char *want) {
    if (!want) {
        ck_assert_uint_eq(v->is_null, 1);
        return;
    }
    ck_assert_uint_eq(v->is_null, 0);
    ck_assert_uint_eq(v->v.s.len, strlen(want));
    ck_assert(memcmp(v->v.s.ptr, want, strlen(want)) == 0);
}

START_TEST(columns_from_the_schema_and_added_mid_batch) {
    tm_connector_config *c = schema_cfg();
    tm_batch_builder *bb = tm_bb_new(c);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b1", 0);
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 0, 1), 0);
    ck_assert_int_eq(
        add(bb, 0, 1, event("c", ROW2, "{\"id\":1,\"name\":\"a\"}")), 0);
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->ncolumns, 2);
    ck_assert_str_eq(b->columns[0].name, "id");
    ck_assert_uint_eq(b->columns[0].key, 1);
    ck_assert_uint_eq(b->columns[0].type, TM_TYPE_INT);
    ck_assert_str_eq(b->columns[1].name, "name");
    ck_assert_uint_eq(b->columns[1].key, 0);
    ck_assert_uint_eq(b->columns[1].required, 0);
    /* ALTER TABLE ... ADD COLUMN note at the source */
    ck_assert_int_eq(
        add(bb, 1, 2,
            event("c", ROW3, "{\"id\":2,\"name\":\"b\",\"note\":\"n\"}")),
        0);
    /* an event still of the old schema (another partition, say) */
    ck_assert_int_eq(
        add(bb, 2, 3, event("u", ROW2, "{\"id\":3,\"name\":\"c\"}")), 0);
    ck_assert_int_eq(
        add(bb, 3, 1, event("d", ROW2, "{\"id\":1,\"name\":\"a\"}")), 0);
    b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->ncolumns, 3);
    ck_assert_str_eq(b->columns[2].name, "note");
    ck_assert_uint_eq(b->columns[2].type, TM_TYPE_TEXT);
    ck_assert_uint_eq(b->nrecords, 4);
    ck_assert_uint_eq(b->records[0].values[0].v.i, 1);
    text_is(&b->records[0].values[1], "a");
    text_is(&b->records[0].values[2], NULL); /* before the column: null */
    text_is(&b->records[1].values[2], "n");
    text_is(&b->records[2].values[2], NULL);
    ck_assert_uint_eq(b->records[3].op, TM_OP_DELETE);
    ck_assert_uint_eq(b->records[3].values[0].v.i, 1);
    text_is(&b->records[3].values[1], NULL);
    /* the next batch keeps the columns */
    tm_bb_reset(bb, "b2", 0);
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 4, 1), 0);
    ck_assert_int_eq(
        add(bb, 4, 4, event("c", ROW2, "{\"id\":4,\"name\":\"d\"}")), 0);
    b = tm_bb_batch(bb);
    ck_assert_uint_eq(b->ncolumns, 3);
    text_is(&b->records[0].values[2], NULL);
    tm_bb_free(bb);
    tm_config_free(c);
}
END_TEST

START_TEST(without_a_schema_a_dead_letter) {
    tm_connector_config *c = schema_cfg();
    tm_batch_builder *bb = tm_bb_new(c);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b1", 0);
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 0, 1), 0);
    /* schemas.enable=false: the bare event */
    ck_assert_int_eq(
        add(bb, 0, 1, "{\"before\":null,\"after\":{\"id\":1},\"op\":\"c\"}"),
        0);
    /* a key that is no JSON object */
    tm_msg_view m = {.topic = "t",
                     .offset = 1,
                     .timestamp_ms = -1,
                     .key = "17",
                     .key_len = 2};
    const char *v = event("c", ROW2, "{\"id\":1,\"name\":\"a\"}");
    m.value = v;
    m.value_len = strlen(v);
    ck_assert_int_eq(tm_bb_add(bb, 0, &m), 0);
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->nrecords, 0);
    ck_assert_uint_eq(b->ndead_letters, 2);
    ck_assert_int_eq(b->dead_letters[0].reason, TM_DL_SCHEMA_MISMATCH);
    ck_assert_ptr_nonnull(
        strstr(b->dead_letters[0].detail, "the event has no schema"));
    ck_assert_int_eq(b->dead_letters[1].reason, TM_DL_NULL_KEY);
    ck_assert_ptr_nonnull(
        strstr(b->dead_letters[1].detail, "not a JSON object with fields"));
    ck_assert_ptr_null(b->columns);
    ck_assert_uint_eq(b->ncolumns, 0);
    tm_bb_free(bb);
    tm_config_free(c);
}
END_TEST

START_TEST(a_narrowed_type_stops) {
    tm_connector_config *c = schema_cfg();
    tm_batch_builder *bb = tm_bb_new(c);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b1", 0);
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 0, 1), 0);
    ck_assert_int_eq(
        add(bb, 0, 1,
            event("c", F("id", "int32", "false") "," F("p", "double", "true"),
                  "{\"id\":1,\"p\":1.5}")),
        0);
    ck_assert_ptr_null(tm_bb_stopped(bb));
    ck_assert_int_eq(
        add(bb, 1, 2,
            event("c", F("id", "int32", "false") "," F("p", "int32", "true"),
                  "{\"id\":2,\"p\":1}")),
        -2);
    const char *why = tm_bb_stopped(bb);
    ck_assert_ptr_nonnull(why);
    ck_assert_msg(strstr(why, "field p changed type: the target column is "
                              "float (from double), the event's schema says "
                              "int (int32)"),
                  "%s", why);
    ck_assert_ptr_null(tm_bb_batch(bb)); /* nothing to commit */
    /* the converter kept the columns it had: after a reset the old schema
     * converts, the new one stops again */
    tm_bb_reset(bb, "b2", 0);
    ck_assert_ptr_null(tm_bb_stopped(bb));
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 1, 1), 0);
    ck_assert_int_eq(
        add(bb, 1, 2,
            event("c", F("id", "int32", "false") "," F("p", "int32", "true"),
                  "{\"id\":2,\"p\":1}")),
        -2);
    tm_bb_free(bb);
    tm_config_free(c);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("cdc_schema_rows");
    TCase *t = tcase_create("core");
    tcase_add_test(t, config_without_columns);
    tcase_add_test(t, columns_from_the_schema_and_added_mid_batch);
    tcase_add_test(t, without_a_schema_a_dead_letter);
    tcase_add_test(t, a_narrowed_type_stops);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
