/* A change-data-capture mapping without a column list: the config, and
 * the batch builder taking each batch's columns from the events' Connect
 * schemas (columns added mid-batch, earlier rows null for them, in memory
 * linear in the batch's values; a dead letter's schema not learnt; after
 * deletes only, added columns required as their schema says; an event
 * without a schema a dead letter; an unsafe change a stop; a bare key's
 * tombstone by the learnt schema). Events are written by hand after
 * Debezium's format in JsonConverter's envelope. */
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

/* A tombstone (no value) of the record key key, at offset. */
static int add_tombstone(tm_batch_builder *bb, int64_t offset,
                         const char *key) {
    tm_msg_view m = {.topic = "t",
                     .offset = offset,
                     .timestamp_ms = -1,
                     .key = key,
                     .key_len = strlen(key)};
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

/* A create of row id with a field p of the Connect type ptype, value v. */
static int add_p(tm_batch_builder *bb, int64_t offset, int id,
                 const char *ptype, const char *v) {
    char fields[256], row[128];
    snprintf(fields, sizeof fields,
             F("id", "int32", "false") "," F("p", "%s", "true"), ptype);
    snprintf(row, sizeof row, "{\"id\":%d,\"p\":%s}", id, v);
    return add(bb, offset, id, event("c", fields, row));
}

START_TEST(a_narrowed_type_stops) {
    tm_connector_config *c = schema_cfg();
    tm_batch_builder *bb = tm_bb_new(c);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b1", 0);
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 0, 1), 0);
    ck_assert_int_eq(add_p(bb, 0, 1, "double", "1.5"), 0);
    ck_assert_ptr_null(tm_bb_stopped(bb));
    ck_assert_int_eq(add_p(bb, 1, 2, "int32", "1"), -2);
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
    ck_assert_int_eq(add_p(bb, 1, 2, "int32", "1"), -2);
    tm_bb_free(bb);
    tm_config_free(c);
}
END_TEST

/* The pipeline's two builders: the second beside the first. */
static void two_builders(tm_connector_config **c, tm_batch_builder **first,
                         tm_batch_builder **second) {
    *c = schema_cfg();
    *first = tm_bb_new(*c);
    ck_assert_ptr_nonnull(*first);
    *second = tm_bb_new_beside(*first);
    ck_assert_ptr_nonnull(*second);
}

static void two_builders_free(tm_connector_config *c, tm_batch_builder *first,
                              tm_batch_builder *second) {
    tm_bb_free(second);
    tm_bb_free(first);
    tm_config_free(c);
}

/* The pipeline's second builder converts with the first's converter: a
 * narrowed type in the batch it builds stops as it would in the first
 * (with a converter of its own it took that event's schema for the
 * table's), and a batch taken from the first keeps its own columns while
 * the second's events add more. */
START_TEST(a_builder_beside_another_shares_its_columns) {
    tm_connector_config *c;
    tm_batch_builder *first, *second;
    two_builders(&c, &first, &second);
    tm_bb_reset(first, "b1", 0);
    ck_assert_int_eq(tm_bb_range(first, "t", 0, 0, 1), 0);
    ck_assert_int_eq(add_p(first, 0, 1, "double", "1.5"), 0);
    const tm_batch *b1 = tm_bb_batch(first);
    ck_assert_ptr_nonnull(b1);
    ck_assert_uint_eq(b1->ncolumns, 2);

    /* batch 2, built while batch 1 is at the sink, begins with the
     * narrowed type: it stops */
    tm_bb_reset(second, "b2", 0);
    ck_assert_int_eq(tm_bb_range(second, "t", 0, 1, 1), 0);
    ck_assert_int_eq(add_p(second, 1, 2, "int32", "1"), -2);
    const char *why = tm_bb_stopped(second);
    ck_assert_ptr_nonnull(why);
    ck_assert_msg(strstr(why, "field p changed type"), "%s", why);

    /* batch 2 again, its events adding columns */
    tm_bb_reset(second, "b2", 0);
    ck_assert_int_eq(tm_bb_range(second, "t", 0, 1, 1), 0);
    char fields[2048] = F("id", "int32", "false") "," F("p", "double", "true");
    char row[1024] = "{\"id\":2,\"p\":2.5";
    for (int k = 0; k < 20; k++) { /* enough to move the converter's array */
        char f[128], v[64];
        snprintf(f, sizeof f, "," F("c%d", "string", "true"), k);
        snprintf(v, sizeof v, ",\"c%d\":\"x\"", k);
        ck_assert_uint_lt(strlen(fields) + strlen(f), sizeof fields);
        ck_assert_uint_lt(strlen(row) + strlen(v) + 1, sizeof row);
        strcat(fields, f);
        strcat(row, v);
        char whole[1100];
        snprintf(whole, sizeof whole, "%s}", row);
        ck_assert_int_eq(add(second, 1 + k, 2, event("u", fields, whole)), 0);
    }
    const tm_batch *b2 = tm_bb_batch(second);
    ck_assert_ptr_nonnull(b2);
    ck_assert_uint_eq(b2->ncolumns, 22);
    ck_assert_str_eq(b2->columns[21].name, "c19");
    /* batch 1 still says what its events knew (its own copy: the
     * converter's array moved) */
    ck_assert_uint_eq(b1->ncolumns, 2);
    ck_assert_str_eq(b1->columns[0].name, "id");
    ck_assert_str_eq(b1->columns[1].name, "p");
    ck_assert_int_eq(b1->columns[1].type, TM_TYPE_FLOAT);
    two_builders_free(c, first, second);
}
END_TEST

/* A batch (in bb, reset) of one create at offset (row id = offset + 1),
 * its row schema's fields rowfields, payload row. */
static const tm_batch *one_event_batch(tm_batch_builder *bb, int64_t offset,
                                       const char *rowfields, const char *row) {
    tm_bb_reset(bb, "b", 0);
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, offset, 1), 0);
    ck_assert_int_eq(
        add(bb, offset, (int)offset + 1, event("c", rowfields, row)), 0);
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    return b;
}

/* The pipeline drops batch N+1 (built beside batch N while N was at the
 * sink) when N's answer is neither OK nor ALREADY, and builds N again from
 * its markers: the columns N+1's events taught were never committed, so
 * the batch built again carries the columns its own events give, as the
 * first time (the table gets a column in the batch that first carries it,
 * with the rows that carry it). */
START_TEST(a_batch_built_again_has_no_columns_of_a_dropped_later_batch) {
    tm_connector_config *c;
    tm_batch_builder *first, *second;
    two_builders(&c, &first, &second);
    static const char *const N = "{\"id\":1,\"name\":\"a\"}";
    static const char *const N1 = "{\"id\":2,\"name\":\"b\",\"note\":\"n\"}";
    const tm_batch *b = one_event_batch(first, 0, ROW2, N);
    ck_assert_uint_eq(b->ncolumns, 2);
    /* N+1, while N is at the sink: note added at the source */
    ck_assert_uint_eq(one_event_batch(second, 1, ROW3, N1)->ncolumns, 3);
    /* N answered CONFLICT: N+1 dropped, N built again from offset 0 */
    tm_bb_unlearn(second); /* the machine drops N+1, then N */
    tm_bb_unlearn(first);
    b = one_event_batch(first, 0, ROW2, N);
    ck_assert_msg(b->ncolumns == 2,
                  "batch N built again carries %zu columns (the last %s), "
                  "its events give 2",
                  b->ncolumns, b->columns[b->ncolumns - 1].name);
    /* and N+1 built again learns note again */
    b = one_event_batch(second, 1, ROW3, N1);
    ck_assert_uint_eq(b->ncolumns, 3);
    ck_assert_str_eq(b->columns[2].name, "note");
    text_is(&b->records[0].values[2], "n");
    two_builders_free(c, first, second);
}
END_TEST

/* Process start, a tombstone read first (only deletes converted: a column
 * added is required as its schema says) and an event that is a dead
 * letter (its schema not learnt); N+1 beside it brings a required column
 * and is dropped. Built again, N's dead letter is a dead letter again,
 * not a stop for a required column it never had. */
START_TEST(a_batch_built_again_converts_as_the_first_time) {
    tm_connector_config *c;
    tm_batch_builder *first, *second;
    two_builders(&c, &first, &second);
    static const char BARE_KEY[] = "{\"id\":1}";
    /* a Date of 2^31-1 days: a dead letter, its schema not learnt */
    char dead[4096];
    snprintf(dead, sizeof dead, "%s",
             event("c",
                   F("id", "int32", "false") ",{\"field\":\"p\",\"type\":"
                                             "\"int32\",\"optional\":true,"
                                             "\"name\":\"org.apache.kafka."
                                             "connect.data.Date\"}",
                   "{\"id\":2,\"p\":2147483647}"));
    for (int pass = 0; pass < 2; pass++) {
        tm_bb_reset(first, pass ? "n again" : "n", 0);
        ck_assert_int_eq(tm_bb_range(first, "t", 0, 0, 1), 0);
        ck_assert_int_eq(add_tombstone(first, 0, BARE_KEY), 0);
        int rc = add(first, 1, 2, dead);
        ck_assert_msg(rc == 0,
                      "pass %d: the dead letter at offset 1 is %d (%s)", pass,
                      rc, tm_bb_stopped(first) ? tm_bb_stopped(first) : "");
        const tm_batch *b = tm_bb_batch(first);
        ck_assert_ptr_nonnull(b);
        ck_assert_uint_eq(b->ndead_letters, 1);
        ck_assert_uint_eq(b->ncolumns, 1);
        if (pass)
            break;
        /* N+1, while N is at the sink: name, required */
        b = one_event_batch(
            second, 2,
            F("id", "int32", "false") "," F("name", "string", "false"),
            "{\"id\":3,\"name\":\"c\"}");
        ck_assert_uint_eq(b->ncolumns, 2);
        ck_assert_uint_eq(b->columns[1].required, 1);
        /* N answered CONFLICT: N+1 dropped, N built again */
        tm_bb_unlearn(second); /* the machine drops N+1, then N */
        tm_bb_unlearn(first);
    }
    two_builders_free(c, first, second);
}
END_TEST

/* A delete read from a bare record key (a tombstone) with columns
 * learnt: its key converts by the learnt schema's field (a Date key is
 * days), so it names the row its create made. */
START_TEST(a_bare_keys_tombstone_converts_by_the_learnt_schema) {
    tm_connector_config *c = schema_cfg();
    tm_batch_builder *bb = tm_bb_new(c);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b1", 0);
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 0, 1), 0);
    static const char KEY_DAY[] = "{\"day\":19000}";
    const char *v = event("c",
                          "{\"field\":\"day\",\"type\":\"int32\",\"optional\":"
                          "false,\"name\":\"io.debezium.time.Date\"},"
                          "{\"field\":\"name\",\"type\":\"string\","
                          "\"optional\":true}",
                          "{\"day\":19000,\"name\":\"a\"}");
    tm_msg_view m = {.topic = "t",
                     .offset = 0,
                     .timestamp_ms = -1,
                     .key = KEY_DAY,
                     .key_len = strlen(KEY_DAY),
                     .value = v,
                     .value_len = strlen(v)};
    ck_assert_int_eq(tm_bb_add(bb, 0, &m), 0);
    m.offset = 1;
    m.value = NULL;
    m.value_len = 0;
    ck_assert_int_eq(tm_bb_add(bb, 0, &m), 0);
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->ndead_letters, 0);
    ck_assert_uint_eq(b->nrecords, 2);
    ck_assert_uint_eq(b->columns[0].type, TM_TYPE_TIMESTAMP);
    ck_assert_uint_eq(b->records[1].op, TM_OP_DELETE);
    ck_assert_uint_eq(b->records[1].values[0].is_null, 0);
    ck_assert_int_eq(b->records[1].values[0].v.i, b->records[0].values[0].v.i);
    text_is(&b->records[1].values[1], NULL);
    tm_bb_free(bb);
    tm_config_free(c);
}
END_TEST

#define ID_OPT F("id", "int32", "true")

/* Columns an event adds whose outcome is a dead letter are not learnt:
 * the batch's columns stay as they were until an event that converts
 * brings them, and then the earlier records get them, null. */
START_TEST(a_dead_letters_columns_are_not_learnt) {
    tm_connector_config *c = schema_cfg();
    tm_batch_builder *bb = tm_bb_new(c);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b1", 0);
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 0, 1), 0);
    ck_assert_int_eq(add(bb, 0, 1,
                         event("c", ID_OPT "," F("name", "string", "true"),
                               "{\"id\":1,\"name\":\"a\"}")),
                     0);
    /* the schema adds note; its key is null: a dead letter null_key, its
     * columns not learnt */
    ck_assert_int_eq(add(bb, 1, 2,
                         event("c",
                               ID_OPT "," F("name", "string", "true") "," F(
                                   "note", "string", "true"),
                               "{\"id\":null,\"name\":\"b\",\"note\":\"n\"}")),
                     0);
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->ndead_letters, 1);
    ck_assert_int_eq(b->dead_letters[0].reason, TM_DL_NULL_KEY);
    ck_assert_uint_eq(b->ncolumns, 2);
    /* the same schema in an event that converts: note is learnt now */
    ck_assert_int_eq(add(bb, 2, 3,
                         event("c",
                               ID_OPT "," F("name", "string", "true") "," F(
                                   "note", "string", "true"),
                               "{\"id\":3,\"name\":\"c\",\"note\":\"m\"}")),
                     0);
    b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->ncolumns, 3);
    ck_assert_uint_eq(b->nrecords, 2);
    text_is(&b->records[0].values[1], "a");
    ck_assert_uint_eq(b->records[0].values[2].struct_size, sizeof(tm_value));
    text_is(&b->records[0].values[2], NULL);
    text_is(&b->records[1].values[2], "m");
    tm_bb_free(bb);
    tm_config_free(c);
}
END_TEST

/* A Date of 2^31-1 days converts to no timestamp: read first, the event
 * is a dead letter and its schema (p a Date) is not the table's; the next
 * valid event (p a double) makes the columns, no stop. */
START_TEST(a_dead_letter_read_first_leaves_no_columns) {
    tm_connector_config *c = schema_cfg();
    tm_batch_builder *bb = tm_bb_new(c);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b1", 0);
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 0, 1), 0);
    ck_assert_int_eq(
        add(bb, 0, 1,
            event("c",
                  F("id", "int32", "false") ",{\"field\":\"p\",\"type\":"
                                            "\"int32\",\"optional\":true,"
                                            "\"name\":\"org.apache.kafka."
                                            "connect.data.Date\"}",
                  "{\"id\":1,\"p\":2147483647}")),
        0);
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->ndead_letters, 1);
    ck_assert_int_eq(b->dead_letters[0].reason, TM_DL_SCHEMA_MISMATCH);
    ck_assert_uint_eq(b->ncolumns, 0);
    ck_assert_int_eq(
        add(bb, 1, 2,
            event("c", F("id", "int32", "false") "," F("p", "double", "true"),
                  "{\"id\":2,\"p\":1.5}")),
        0);
    ck_assert_ptr_null(tm_bb_stopped(bb));
    b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->ncolumns, 2);
    ck_assert_uint_eq(b->columns[1].type, TM_TYPE_FLOAT);
    ck_assert_uint_eq(b->nrecords, 1);
    ck_assert_double_eq(b->records[0].values[1].v.f, 1.5);
    tm_bb_free(bb);
    tm_config_free(c);
}
END_TEST

/* A tombstone read first (bare key, or the key with its schema) learns
 * the key columns only; deletes have no values a later column lacks, so
 * the columns a later event adds keep their schema's required flag (the
 * table made from that schema requires them). Once a row converted, a
 * column added after it is optional: that row has no value for it. */
static void tombstone_first_then_required(const char *tombstone_key) {
    tm_connector_config *c = schema_cfg();
    tm_batch_builder *bb = tm_bb_new(c);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b1", 0);
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 0, 1), 0);
    ck_assert_int_eq(add_tombstone(bb, 0, tombstone_key), 0);
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->nrecords, 1);
    ck_assert_uint_eq(b->ncolumns, 1);
    ck_assert_int_eq(
        add(bb, 1, 3,
            event("c",
                  F("id", "int32", "false") "," F("name", "string", "false"),
                  "{\"id\":3,\"name\":\"c\"}")),
        0);
    b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->ncolumns, 2);
    ck_assert_str_eq(b->columns[1].name, "name");
    ck_assert_uint_eq(b->columns[1].required, 1);
    ck_assert_uint_eq(b->records[0].op, TM_OP_DELETE);
    ck_assert_uint_eq(b->records[0].values[0].is_null, 0);
    ck_assert_int_eq(b->records[0].values[0].v.i, 1);
    text_is(&b->records[0].values[1], NULL);
    text_is(&b->records[1].values[1], "c");
    /* a row converted under the columns: the next one added is optional */
    ck_assert_int_eq(add(bb, 2, 4,
                         event("c",
                               F("id", "int32", "false") "," F(
                                   "name", "string",
                                   "false") "," F("note", "string", "false"),
                               "{\"id\":4,\"name\":\"d\",\"note\":\"n\"}")),
                     0);
    b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->ncolumns, 3);
    ck_assert_uint_eq(b->columns[1].required, 1);
    ck_assert_uint_eq(b->columns[2].required, 0);
    tm_bb_free(bb);
    tm_config_free(c);
}

START_TEST(a_bare_keys_tombstone_first_keeps_added_columns_required) {
    tombstone_first_then_required("{\"id\":1}");
}
END_TEST

START_TEST(an_enveloped_keys_tombstone_first_keeps_added_columns_required) {
    char key[512];
    snprintf(key, sizeof key, KEY, 1);
    tombstone_first_then_required(key);
}
END_TEST

/* Events in one batch, event k adding column c<k>: */
#define GROWING_EVENTS 1000

/* Memory linear in the batch's values (rows x columns) when every event
 * of a batch adds a column, not a copy of every earlier row per column
 * added (memory with the cube of the batch). */
START_TEST(memory_linear_in_the_batchs_values) {
    tm_connector_config *c = schema_cfg();
    tm_batch_builder *bb = tm_bb_new(c);
    ck_assert_ptr_nonnull(bb);
    tm_bb_reset(bb, "b1", 0);
    ck_assert_int_eq(tm_bb_range(bb, "t", 0, 0, 1), 0);
    for (int k = 0; k < GROWING_EVENTS; k++) {
        char fields[256], row[128];
        snprintf(fields, sizeof fields,
                 F("id", "int32", "false") ",{\"field\":\"c%d\",\"type\":"
                                           "\"int32\",\"optional\":true}",
                 k);
        snprintf(row, sizeof row, "{\"id\":%d,\"c%d\":%d}", k, k, k);
        ck_assert_int_eq(add(bb, k, k, event("c", fields, row)), 0);
        /* The batch's values: k + 1 rows of k + 2 columns. A generous
         * linear bound: 8 times them, and 1 MiB for the messages,
         * strings and the arena's chunks. A copy of every earlier row per
         * column added passes it at some 60 events. */
        size_t rows = (size_t)k + 1, values = rows * (rows + 1);
        size_t bound = 8 * values * sizeof(tm_value) + ((size_t)1 << 20);
        ck_assert_msg(tm_bb_memory(bb) <= bound,
                      "after %d events adding a column each, the batch "
                      "holds %zu bytes; its values are %zu bytes (bound %zu)",
                      k + 1, tm_bb_memory(bb), values * sizeof(tm_value),
                      bound);
    }
    const tm_batch *b = tm_bb_batch(bb);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->ncolumns, GROWING_EVENTS + 1);
    ck_assert_uint_eq(b->nrecords, GROWING_EVENTS);
    for (size_t k = 0; k < GROWING_EVENTS; k++) {
        const tm_record *rec = &b->records[k];
        char name[32];
        snprintf(name, sizeof name, "c%zu", k);
        ck_assert_str_eq(b->columns[k + 1].name, name);
        for (size_t i = 0; i < GROWING_EVENTS + 1; i++) {
            const tm_value *v = &rec->values[i];
            ck_assert_uint_eq(v->struct_size, sizeof(tm_value));
            ck_assert_uint_eq(v->is_null, !(i == 0 || i == k + 1));
            if (!v->is_null)
                ck_assert_int_eq(v->v.i, (int64_t)k);
        }
    }
    fprintf(stderr, "%d events adding a column each: %zu bytes held\n",
            GROWING_EVENTS, tm_bb_memory(bb));
    tm_bb_free(bb);
    tm_config_free(c);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("cdc_schema_rows");
    TCase *t = tcase_create("core");
    tcase_set_timeout(t, 300); /* memory_linear_in_the_batchs_values */
    tcase_add_test(t, config_without_columns);
    tcase_add_test(t, columns_from_the_schema_and_added_mid_batch);
    tcase_add_test(t, without_a_schema_a_dead_letter);
    tcase_add_test(t, a_narrowed_type_stops);
    tcase_add_test(t, a_builder_beside_another_shares_its_columns);
    tcase_add_test(t,
                   a_batch_built_again_has_no_columns_of_a_dropped_later_batch);
    tcase_add_test(t, a_batch_built_again_converts_as_the_first_time);
    tcase_add_test(t, a_bare_keys_tombstone_converts_by_the_learnt_schema);
    tcase_add_test(t, a_dead_letters_columns_are_not_learnt);
    tcase_add_test(t, a_dead_letter_read_first_leaves_no_columns);
    tcase_add_test(t, a_bare_keys_tombstone_first_keeps_added_columns_required);
    tcase_add_test(
        t, an_enveloped_keys_tombstone_first_keeps_added_columns_required);
    tcase_add_test(t, memory_linear_in_the_batchs_values);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
