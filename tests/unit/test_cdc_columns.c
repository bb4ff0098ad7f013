/* Columns taken from a change event's Connect schema, and the difference
 * between a target's columns and an event's (cdc_columns.h). The schemas
 * are written by hand after JsonConverter's format ({"type": "struct",
 * "fields": [{"field", "type", "optional", "name"}]}); what each should
 * give is docs/configuration.md's table, worked out by hand. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/cdc_columns.h"
#include "check_main.h"

static json_t *parse(const char *text) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j)
        fprintf(stderr, "test JSON: %s: %s\n", text, e.text);
    ck_assert_ptr_nonnull(j);
    return j;
}

/* The colset of the struct schema text with the key names keys (a JSON
 * object text); derive must succeed. */
static tm_cdc_colset derive(const char *schema, const char *keys) {
    json_t *s = parse(schema), *k = parse(keys);
    tm_cdc_colset out;
    char why[512] = "";
    int rc = tm_cdc_columns_derive(s, k, &out, why, sizeof why);
    if (rc != 0)
        fprintf(stderr, "derive: %s\n", why);
    ck_assert_int_eq(rc, 0);
    json_decref(s);
    json_decref(k);
    return out;
}

/* derive must refuse, with a why containing want. */
static void underivable(const char *schema, const char *keys,
                        const char *want) {
    json_t *s = parse(schema), *k = parse(keys);
    tm_cdc_colset out;
    char why[512] = "";
    ck_assert_int_eq(tm_cdc_columns_derive(s, k, &out, why, sizeof why), 1);
    ck_assert_msg(strstr(why, want), "why \"%s\" lacks \"%s\"", why, want);
    ck_assert_uint_eq(out.ncolumns, 0);
    ck_assert_ptr_null(out.columns);
    json_decref(s);
    json_decref(k);
}

#define F(name, type, opt)                                                     \
    "{\"field\":\"" name "\",\"type\":\"" type "\",\"optional\":" opt "}"
#define FN(name, type, lname)                                                  \
    "{\"field\":\"" name "\",\"type\":\"" type                                 \
    "\",\"optional\":true,\"name\":\"" lname "\"}"
#define STRUCT(...) "{\"type\":\"struct\",\"fields\":[" __VA_ARGS__ "]}"

START_TEST(types_follow_the_documented_table) {
    tm_cdc_colset c =
        derive(
            STRUCT(F("id", "int32", "false") "," F("n", "int64", "true") "," F(
                "r", "float",
                "true") "," F("d", "double",
                              "true") "," F("b", "boolean", "true") "," F("s", "string", "true") "," FN("dec", "bytes", "org.apache.kafka.connect.data.Decimal") "," FN("day", "int32", "io.debezium.time.Date") "," FN("ts", "int64", "io.debezium.time.MicroTimestamp") "," FN("cts", "int64", "org.apache.kafka.connect.data.Timestamp") "," FN("z", "string", "io.debezium.time.ZonedTimestamp") "," FN("j", "string", "io.debezium.data.Json") "," FN("year",
                                                                                                                                                                                                                                                                                                                                                                                                                                                           "int32",
                                                                                                                                                                                                                                                                                                                                                                                                                                                           "io.debezium.time.Year") "," F("st",
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                          "struct",
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                          "true") "," F("a", "array", "true")),
            "{\"id\":1}");
    static const struct {
        const char *name;
        tm_type type;
    } want[] = {{"id", TM_TYPE_INT},       {"n", TM_TYPE_INT},
                {"r", TM_TYPE_FLOAT},      {"d", TM_TYPE_FLOAT},
                {"b", TM_TYPE_BOOL},       {"s", TM_TYPE_TEXT},
                {"dec", TM_TYPE_TEXT},     {"day", TM_TYPE_TIMESTAMP},
                {"ts", TM_TYPE_TIMESTAMP}, {"cts", TM_TYPE_TIMESTAMP},
                {"z", TM_TYPE_TIMESTAMP},  {"j", TM_TYPE_TEXT},
                {"year", TM_TYPE_INT},     {"st", TM_TYPE_JSON},
                {"a", TM_TYPE_JSON}};
    ck_assert_uint_eq(c.ncolumns, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < c.ncolumns; i++) {
        ck_assert_str_eq(c.columns[i].name, want[i].name);
        ck_assert_msg(c.columns[i].type == want[i].type, "column %s type %d",
                      want[i].name, (int)c.columns[i].type);
        ck_assert_uint_eq(c.columns[i].struct_size, sizeof(tm_column));
    }
    ck_assert_uint_eq(c.columns[0].key, 1);
    ck_assert_uint_eq(c.columns[0].required, 1);
    ck_assert_uint_eq(c.columns[1].key, 0);
    ck_assert_uint_eq(c.columns[1].required, 0);
    ck_assert_str_eq(c.source[7], "int32 io.debezium.time.Date");
    ck_assert_str_eq(c.source[0], "int32");
    tm_cdc_colset_clear(&c);
}
END_TEST

START_TEST(pointers_escape_names_and_marks_are_not_columns) {
    tm_cdc_colset c = derive(
        STRUCT(F("a/b", "int32", "false") "," F("t~x", "string", "true") "," F(
            "__deleted", "string",
            "true") "," F("__op", "string", "true") "," F("__table", "string",
                                                          "true")),
        "{\"a/b\":null}");
    ck_assert_uint_eq(c.ncolumns, 3);
    ck_assert_str_eq(c.pointers[0], "/a~1b");
    ck_assert_str_eq(c.pointers[1], "/t~0x");
    ck_assert_str_eq(c.columns[2].name, "__table");
    ck_assert_str_eq(c.pointers[2], "/__table");
    ck_assert_uint_eq(c.columns[0].key, 1);
    tm_cdc_colset_clear(&c);
}
END_TEST

START_TEST(underivable_schemas_say_why) {
    underivable(STRUCT(""), "{}", "no fields");
    underivable("{\"type\":\"struct\"}", "{}", "no fields");
    underivable(STRUCT(F("__op", "string", "true")), "{}", "no fields");
    underivable(STRUCT(F("id", "int32", "false")), "{\"uid\":1}",
                "key field uid is not a field");
    underivable(STRUCT(F("id", "int32", "false") "," F("x", "decimal", "true")),
                "{\"id\":1}", "field x: type \"decimal\" has no column type");
    underivable(STRUCT("{\"type\":\"int32\"}"), "{}", "field 0");
}
END_TEST

#define BASE                                                                   \
    STRUCT(F("id", "int32", "false") "," F("name", "string", "false") "," F(   \
        "price", "double", "true"))

/* The diff of cur (schema text) against ev (schema text), both keyed by
 * id; *why and the added names (space-separated) for the checks. */
static tm_cdc_diff diff(const char *cur_s, const char *ev_s, char *why,
                        size_t n, char *names, size_t nn) {
    tm_cdc_colset cur = derive(cur_s, "{\"id\":1}");
    tm_cdc_colset ev = derive(ev_s, "{\"id\":1}");
    size_t added[32], nadded = 99;
    why[0] = names[0] = '\0';
    tm_cdc_diff d = tm_cdc_columns_diff(&cur, &ev, added, &nadded, why, n);
    if (d != TM_CDC_ADDED)
        ck_assert_uint_eq(nadded, 0);
    for (size_t k = 0; k < nadded; k++) {
        strncat(names, ev.columns[added[k]].name, nn - strlen(names) - 2);
        strcat(names, " ");
    }
    tm_cdc_colset_clear(&cur);
    tm_cdc_colset_clear(&ev);
    return d;
}

START_TEST(diff_same_and_added) {
    char why[512], names[256];
    ck_assert_int_eq(diff(BASE, BASE, why, sizeof why, names, sizeof names),
                     TM_CDC_SAME);
    /* an optional field dropped: it stays, null from then on */
    ck_assert_int_eq(
        diff(BASE,
             STRUCT(F("id", "int32", "false") "," F("name", "string", "false")),
             why, sizeof why, names, sizeof names),
        TM_CDC_SAME);
    /* a narrower Connect type that is the same column type */
    ck_assert_int_eq(diff(STRUCT(F("id", "int64", "false")),
                          STRUCT(F("id", "int32", "false")), why, sizeof why,
                          names, sizeof names),
                     TM_CDC_SAME);
    /* Debezium after ALTER TABLE ADD COLUMN: new optional fields, and a
     * required one (NOT NULL DEFAULT), added in the event's order */
    ck_assert_int_eq(
        diff(
            BASE,
            STRUCT(
                F("id", "int32", "false") "," F("note", "string", "true") "," F(
                    "name", "string",
                    "false") "," F("price", "double",
                                   "true") "," F("qty", "int32", "false")),
            why, sizeof why, names, sizeof names),
        TM_CDC_ADDED);
    ck_assert_str_eq(names, "note qty ");
}
END_TEST

/* diff must be unsafe, with why containing every want. */
static void unsafe(const char *cur_s, const char *ev_s, const char *w1,
                   const char *w2, const char *w3) {
    char why[512], names[256];
    ck_assert_int_eq(diff(cur_s, ev_s, why, sizeof why, names, sizeof names),
                     TM_CDC_UNSAFE);
    const char *w[] = {w1, w2, w3};
    for (size_t i = 0; i < 3; i++)
        ck_assert_msg(!w[i] || strstr(why, w[i]), "why \"%s\" lacks \"%s\"",
                      why, w[i]);
}

START_TEST(diff_unsafe_changes_name_field_and_types) {
    /* narrowed: double to int32 */
    unsafe(BASE,
           STRUCT(F("id", "int32", "false") "," F(
               "name", "string", "false") "," F("price", "int32", "true")),
           "field price changed type",
           "the target column is float (from "
           "double)",
           "the event's schema says int (int32)");
    /* a logical type changed: int64 to Timestamp */
    unsafe(STRUCT(F("id", "int32", "false") "," F("t", "int64", "true")),
           STRUCT(F("id", "int32", "false") "," FN(
               "t", "int64", "org.apache.kafka.connect.data.Timestamp")),
           "field t changed type", "int (from int64)",
           "timestamp (int64 org.apache.kafka.connect.data.Timestamp)");
    /* a required column dropped */
    unsafe(BASE,
           STRUCT(F("id", "int32", "false") "," F("price", "double", "true")),
           "field name (string, column text required", "dropped", NULL);
    /* a required column made optional */
    unsafe(BASE,
           STRUCT(F("id", "int32", "false") "," F(
               "name", "string", "true") "," F("price", "double", "true")),
           "field name (string) became optional", NULL, NULL);
}
END_TEST

START_TEST(diff_key_changes_are_unsafe) {
    char why[512] = "";
    tm_cdc_colset cur = derive(BASE, "{\"id\":1}");
    tm_cdc_colset ev = derive(BASE, "{\"id\":1,\"name\":1}");
    size_t added[8], nadded;
    ck_assert_int_eq(
        tm_cdc_columns_diff(&cur, &ev, added, &nadded, why, sizeof why),
        TM_CDC_UNSAFE);
    ck_assert_msg(strstr(why, "field name (string) joined the key"), "%s", why);
    ck_assert_int_eq(
        tm_cdc_columns_diff(&ev, &cur, added, &nadded, why, sizeof why),
        TM_CDC_UNSAFE);
    ck_assert_msg(strstr(why, "field name (string) left the key"), "%s", why);
    tm_cdc_colset_clear(&ev);
    /* a new field that is a key */
    ev = derive(
        STRUCT(F("id", "int32", "false") "," F("name", "string", "false") "," F(
            "price", "double", "true") "," F("region", "string", "false")),
        "{\"id\":1,\"region\":1}");
    ck_assert_int_eq(
        tm_cdc_columns_diff(&cur, &ev, added, &nadded, why, sizeof why),
        TM_CDC_UNSAFE);
    ck_assert_msg(strstr(why, "field region (string) joined the key"), "%s",
                  why);
    tm_cdc_colset_clear(&ev);
    /* the key dropped */
    ev = derive(STRUCT(F("name", "string", "false")), "{}");
    ck_assert_int_eq(
        tm_cdc_columns_diff(&cur, &ev, added, &nadded, why, sizeof why),
        TM_CDC_UNSAFE);
    ck_assert_msg(strstr(why, "field id (int32, column int key) was dropped"),
                  "%s", why);
    tm_cdc_colset_clear(&ev);
    tm_cdc_colset_clear(&cur);
}
END_TEST

START_TEST(append_adds_optional_columns) {
    char why[512] = "";
    tm_cdc_colset cur = derive(BASE, "{\"id\":1}");
    tm_cdc_colset ev =
        derive(STRUCT(F("id", "int32", "false") "," F(
                   "qty", "int32", "false") "," F("name", "string", "false")),
               "{\"id\":1}");
    size_t added[8], nadded;
    ck_assert_int_eq(
        tm_cdc_columns_diff(&cur, &ev, added, &nadded, why, sizeof why),
        TM_CDC_ADDED);
    ck_assert_int_eq(tm_cdc_columns_append(&cur, &ev, added, nadded, 1), 0);
    ck_assert_uint_eq(cur.ncolumns, 4);
    ck_assert_str_eq(cur.columns[3].name, "qty");
    ck_assert_str_eq(cur.pointers[3], "/qty");
    ck_assert_str_eq(cur.source[3], "int32");
    ck_assert_uint_eq(cur.columns[3].required, 0); /* earlier rows: none */
    ck_assert_uint_eq(cur.columns[3].type, TM_TYPE_INT);
    ck_assert_str_eq(cur.columns[0].name, "id"); /* the old ones kept */
    /* now the same as the event: price, optional, dropped, stays */
    ck_assert_int_eq(
        tm_cdc_columns_diff(&cur, &ev, added, &nadded, why, sizeof why),
        TM_CDC_SAME);
    tm_cdc_colset_clear(&ev);
    tm_cdc_colset_clear(&cur);
}
END_TEST

/* After deletes only (no row lacks a value), an appended column is as its
 * schema says; truncate takes appended columns back. */
START_TEST(append_after_deletes_only_keeps_required_and_truncates) {
    char why[512] = "";
    tm_cdc_colset cur = derive(BASE, "{\"id\":1}");
    tm_cdc_colset ev =
        derive(STRUCT(F("id", "int32", "false") "," F(
                   "qty", "int32", "false") "," F("name", "string", "false")),
               "{\"id\":1}");
    size_t added[8], nadded, had = cur.ncolumns;
    ck_assert_int_eq(
        tm_cdc_columns_diff(&cur, &ev, added, &nadded, why, sizeof why),
        TM_CDC_ADDED);
    ck_assert_int_eq(tm_cdc_columns_append(&cur, &ev, added, nadded, 0), 0);
    ck_assert_uint_eq(cur.ncolumns, had + 1);
    ck_assert_str_eq(cur.columns[had].name, "qty");
    ck_assert_uint_eq(cur.columns[had].required, 1);
    tm_cdc_columns_truncate(&cur, had);
    ck_assert_uint_eq(cur.ncolumns, had);
    ck_assert_int_eq(
        tm_cdc_columns_diff(&cur, &ev, added, &nadded, why, sizeof why),
        TM_CDC_ADDED); /* qty is new again */
    tm_cdc_columns_truncate(&cur, 0);
    ck_assert_uint_eq(cur.ncolumns, 0);
    ck_assert_ptr_null(cur.columns);
    tm_cdc_colset_clear(&ev);
    tm_cdc_colset_clear(&cur);
}
END_TEST

START_TEST(names_no_table_takes_are_refused) {
    /* the twin in case of an earlier field (SQLite: one column) */
    underivable(STRUCT(F("id", "int32", "false") "," F(
                    "name", "string", "true") "," F("NAME", "string", "true")),
                "{\"id\":1}", "fields name and NAME differ only in case");
    /* the sinks' prefix, in any case */
    underivable(
        STRUCT(F("id", "int32", "false") "," F("_tm_offset", "int64", "true")),
        "{\"id\":1}", "field _tm_offset: the prefix _tm_");
    underivable(
        STRUCT(F("id", "int32", "false") "," F("_TM_x", "int64", "true")),
        "{\"id\":1}", "field _TM_x: the prefix _tm_");
    /* 64 bytes: one more than PostgreSQL keeps; 63 bytes is a column */
    char n64[65], n63[64], text[512];
    memset(n64, 'x', 64);
    n64[64] = '\0';
    memcpy(n63, n64, 63);
    n63[63] = '\0';
#define LONG_FIELD                                                             \
    STRUCT(F("id", "int32", "false") ",{\"field\":\"%s\",\"type\":"            \
                                     "\"string\",\"optional\":true}")
    snprintf(text, sizeof text, LONG_FIELD, n64);
    underivable(text, "{\"id\":1}", ": 64 bytes, longer than the 63 bytes");
    snprintf(text, sizeof text, LONG_FIELD, n63);
    tm_cdc_colset c = derive(text, "{\"id\":1}");
    ck_assert_uint_eq(c.ncolumns, 2);
    ck_assert_str_eq(c.columns[1].name, n63);
    tm_cdc_colset_clear(&c);
    /* "_tm" alone, and "_t_m_", are names like any other */
    c = derive(STRUCT(F("id", "int32", "false") "," F(
                   "_tm", "int64", "true") "," F("_t_m_", "int64", "true")),
               "{\"id\":1}");
    ck_assert_uint_eq(c.ncolumns, 3);
    tm_cdc_colset_clear(&c);
}
END_TEST

START_TEST(diff_rename_in_case_only_is_unsafe) {
    /* name -> Name: SQLite takes it for the column name, PostgreSQL for a
     * new one; either way the target cannot follow it */
    unsafe(BASE,
           STRUCT(F("id", "int32", "false") "," F(
               "Name", "string", "false") "," F("price", "double", "true")),
           "field Name (string) of the event's schema is the target's "
           "column name (string) renamed in case only",
           NULL, NULL);
    /* an optional column renamed, which a plain drop would keep */
    unsafe(BASE,
           STRUCT(F("id", "int32", "false") "," F(
               "name", "string", "false") "," F("PRICE", "double", "true")),
           "field PRICE (double)", "column price (double) renamed in case",
           NULL);
    /* the key renamed (the record key's field renamed with it) */
    char why[512] = "";
    tm_cdc_colset cur = derive(BASE, "{\"id\":1}");
    tm_cdc_colset ev =
        derive(STRUCT(F("ID", "int32", "false") "," F(
                   "name", "string", "false") "," F("price", "double", "true")),
               "{\"ID\":1}");
    size_t added[8], nadded;
    ck_assert_int_eq(
        tm_cdc_columns_diff(&cur, &ev, added, &nadded, why, sizeof why),
        TM_CDC_UNSAFE);
    ck_assert_msg(strstr(why, "field ID (int32) of the event's schema is the "
                              "target's column id (int32) renamed in case"),
                  "%s", why);
    tm_cdc_colset_clear(&ev);
    tm_cdc_colset_clear(&cur);
}
END_TEST

START_TEST(bare_key_columns_by_their_json) {
    json_t *k = parse("{\"id\":1,\"region\":\"eu\",\"r\":1.5,\"b\":true,"
                      "\"o\":{\"x\":1}}");
    tm_cdc_colset c;
    char why[512] = "";
    ck_assert_int_eq(tm_cdc_columns_from_key(k, &c, why, sizeof why), 0);
    static const struct {
        const char *name;
        tm_type type;
    } want[] = {{"id", TM_TYPE_INT},
                {"region", TM_TYPE_TEXT},
                {"r", TM_TYPE_FLOAT},
                {"b", TM_TYPE_BOOL},
                {"o", TM_TYPE_JSON}};
    ck_assert_uint_eq(c.ncolumns, 5);
    for (size_t i = 0; i < 5; i++) {
        ck_assert_str_eq(c.columns[i].name, want[i].name);
        ck_assert_int_eq(c.columns[i].type, want[i].type);
        ck_assert_uint_eq(c.columns[i].key, 1);
        ck_assert_uint_eq(c.columns[i].required, 1);
    }
    ck_assert_str_eq(c.pointers[1], "/region");
    ck_assert_str_eq(c.source[0], "a bare record key's JSON integer");
    /* the key's columns, and the event of the full schema after them: the
     * other fields added, the key the same */
    tm_cdc_colset ev = derive(BASE, "{\"id\":1}");
    tm_cdc_colset_clear(&c);
    json_decref(k);
    k = parse("{\"id\":1}");
    ck_assert_int_eq(tm_cdc_columns_from_key(k, &c, why, sizeof why), 0);
    size_t added[8], nadded;
    ck_assert_int_eq(
        tm_cdc_columns_diff(&c, &ev, added, &nadded, why, sizeof why),
        TM_CDC_ADDED);
    ck_assert_uint_eq(nadded, 2);
    tm_cdc_colset_clear(&ev);
    tm_cdc_colset_clear(&c);
    json_decref(k);
    /* what no key column can be */
    static const struct {
        const char *key, *why;
    } bad[] = {{"{\"id\":null}", "key field id is null"},
               {"{}", "the record key has no fields"},
               {"{\"_tm_key\":1}", "field _tm_key: the prefix _tm_"},
               {"{\"id\":1,\"Id\":2}", "fields id and Id differ only in case"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        k = parse(bad[i].key);
        ck_assert_int_eq(tm_cdc_columns_from_key(k, &c, why, sizeof why), 1);
        ck_assert_msg(strstr(why, bad[i].why), "%s: why \"%s\"", bad[i].key,
                      why);
        ck_assert_uint_eq(c.ncolumns, 0);
        json_decref(k);
    }
}
END_TEST

START_TEST(key_match_is_exact) {
    tm_cdc_colset cur = derive(BASE, "{\"id\":1}");
    char why[512] = "";
    static const struct {
        const char *key;
        int rc;
        const char *why;
    } cases[] = {
        {"{\"id\":7}", 0, ""},
        {"{\"uid\":7}", 1,
         "the record key's fields (uid) are not the key "
         "columns (id)"},
        {"{\"id\":7,\"region\":\"eu\"}", 1, "fields (id, region)"},
        {"{\"ID\":7}", 1, "fields (ID)"},
        {"{}", 1, "fields ()"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *k = parse(cases[i].key);
        why[0] = '\0';
        ck_assert_int_eq(tm_cdc_columns_key_match(&cur, k, why, sizeof why),
                         cases[i].rc);
        ck_assert_msg(strstr(why, cases[i].why), "%s: why \"%s\"", cases[i].key,
                      why);
        json_decref(k);
    }
    tm_cdc_colset_clear(&cur);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("cdc_columns");
    TCase *t = tcase_create("core");
    tcase_add_test(t, types_follow_the_documented_table);
    tcase_add_test(t, pointers_escape_names_and_marks_are_not_columns);
    tcase_add_test(t, underivable_schemas_say_why);
    tcase_add_test(t, diff_same_and_added);
    tcase_add_test(t, diff_unsafe_changes_name_field_and_types);
    tcase_add_test(t, diff_key_changes_are_unsafe);
    tcase_add_test(t, append_adds_optional_columns);
    tcase_add_test(t, append_after_deletes_only_keeps_required_and_truncates);
    tcase_add_test(t, names_no_table_takes_are_refused);
    tcase_add_test(t, diff_rename_in_case_only_is_unsafe);
    tcase_add_test(t, bare_key_columns_by_their_json);
    tcase_add_test(t, key_match_is_exact);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
