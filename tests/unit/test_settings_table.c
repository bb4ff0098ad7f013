/* Declared settings (tm_setting): the host's walker checks every key
 * against the plugin's table and fills the plugin's struct; errors name
 * the JSON path, what was expected and what was found, as the config's
 * own errors do. Also the check of the table itself and the schema. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/settings.h"
#include "config/settings_table.h"
#include "check_main.h"

typedef struct demo {
    const char *path;
    const char *schema;
    int64_t timeout_ms;
    int64_t retention_s; /* 0: not set */
    int create;
    int mode;
    int sync;
} demo;

static const char *const MODES[] = {"append", "upsert", NULL};
static const char *const SYNCS[] = {"FULL", "NORMAL", "OFF", NULL};

static const tm_setting TABLE[] = {
    TM_SETTING_STRING("path", demo, path, TM_SETTING_REQUIRED, NULL, 1, 0,
                      "the database file"),
    TM_SETTING_STRING("schema", demo, schema, 0, "public", 1, 8, NULL),
    TM_SETTING_INT("timeout_ms", demo, timeout_ms, 0, 5000, 0, INT32_MAX,
                   "lock timeout"),
    TM_SETTING_INT("retention_s", demo, retention_s, TM_SETTING_NO_DEFAULT, 0,
                   1, INT64_MAX / 1000, NULL),
    TM_SETTING_BOOL("create", demo, create, 1, NULL),
    TM_SETTING_ENUM("mode", demo, mode, 0, MODES, 0, NULL),
    TM_SETTING_ENUM("synchronous", demo, sync, TM_SETTING_ICASE, SYNCS, 0,
                    NULL),
    TM_SETTING_END,
};

static tm_settings *load(const char *text) {
    json_error_t jerr;
    json_t *obj = json_loads(text, JSON_ALLOW_NUL, &jerr);
    ck_assert_msg(obj != NULL, "%s: %s", text, jerr.text);
    tm_settings *s = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* The settings of the last fill: the strings filled point into them and
 * live as long as they do (sink.h), so they are kept until the next. */
static tm_settings *live;

static void drop_live(void) {
    tm_settings_free(live);
    live = NULL;
}

/* Fills from TEXT; the return code, the message in err. */
static int fill(const char *text, demo *d, tm_error *err) {
    drop_live();
    live = load(text);
    memset(d, 0xA5, sizeof *d); /* the walker zeroes it first */
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return tm_settings_fill(live, TABLE, d, sizeof *d, err);
}

static void refused(const char *text, const char *want) {
    demo d;
    tm_error err;
    ck_assert_msg(fill(text, &d, &err) == -1, "%s: accepted", text);
    ck_assert_msg(strcmp(err.message, want) == 0, "%s:\n got  %s\n want %s",
                  text, err.message, want);
}

START_TEST(defaults_fill_an_absent_setting) {
    demo d;
    tm_error err;
    ck_assert_msg(fill("{\"path\": \"/db\"}", &d, &err) == 0, "%s",
                  err.message);
    ck_assert_str_eq(d.path, "/db");
    ck_assert_str_eq(d.schema, "public");
    ck_assert_int_eq(d.timeout_ms, 5000);
    ck_assert_int_eq(d.retention_s, 0); /* no default: left zeroed */
    ck_assert_int_eq(d.create, 1);
    ck_assert_int_eq(d.mode, 0);
    ck_assert_int_eq(d.sync, 0);
    /* null is "not set" too, as for the getters */
    ck_assert_int_eq(
        fill("{\"path\": \"/db\", \"timeout_ms\": null}", &d, &err), 0);
    ck_assert_int_eq(d.timeout_ms, 5000);
}
END_TEST

START_TEST(every_type_is_filled) {
    demo d;
    tm_error err;
    ck_assert_msg(fill("{\"path\": \"/db\", \"schema\": \"s\", \"timeout_ms\": "
                       "0, \"retention_s\": 3600, \"create\": false, "
                       "\"mode\": \"upsert\", \"synchronous\": \"normal\"}",
                       &d, &err) == 0,
                  "%s", err.message);
    ck_assert_str_eq(d.schema, "s");
    ck_assert_int_eq(d.timeout_ms, 0);
    ck_assert_int_eq(d.retention_s, 3600);
    ck_assert_int_eq(d.create, 0);
    ck_assert_int_eq(d.mode, 1);
    ck_assert_int_eq(d.sync, 1); /* TM_SETTING_ICASE: "normal" is NORMAL */
}
END_TEST

START_TEST(bounds_are_inclusive) {
    demo d;
    tm_error err;
    ck_assert_int_eq(
        fill("{\"path\": \"/db\", \"timeout_ms\": 2147483647}", &d, &err), 0);
    ck_assert_int_eq(d.timeout_ms, INT32_MAX);
    ck_assert_int_eq(fill("{\"path\": \"/db\", \"retention_s\": 1}", &d, &err),
                     0);
    ck_assert_int_eq(d.retention_s, 1);
    ck_assert_int_eq(
        fill("{\"path\": \"/db\", \"schema\": \"12345678\"}", &d, &err), 0);
    refused("{\"path\": \"/db\", \"timeout_ms\": 2147483648}",
            "$.sink.settings.timeout_ms: expected an integer from 0 to "
            "2147483647, found integer 2147483648");
    refused("{\"path\": \"/db\", \"timeout_ms\": -1}",
            "$.sink.settings.timeout_ms: expected an integer from 0 to "
            "2147483647, found integer -1");
    refused("{\"path\": \"/db\", \"retention_s\": 0}",
            "$.sink.settings.retention_s: expected an integer from 1 to "
            "9223372036854775, found integer 0");
    refused("{\"path\": \"/db\", \"schema\": \"123456789\"}",
            "$.sink.settings.schema: expected a non-empty string of at most 8 "
            "bytes, found string \"123456789\" (9 bytes)");
    refused("{\"path\": \"\"}", "$.sink.settings.path: expected a non-empty "
                                "string, found string \"\" (0 bytes)");
}
END_TEST

/* The largest and smallest int64 pass through exactly; a number beyond
 * them is not an integer to jansson (a real), and is refused as such. */
START_TEST(int64_extremes_and_overflow) {
    static const tm_setting wide[] = {
        TM_SETTING_INT("n", demo, timeout_ms, 0, 0, INT64_MIN, INT64_MAX, NULL),
        TM_SETTING_END};
    demo d;
    tm_error err = {sizeof err, ""};
    tm_settings *s = load("{\"n\": 9223372036854775807}");
    ck_assert_int_eq(tm_settings_fill(s, wide, &d, sizeof d, &err), 0);
    ck_assert(d.timeout_ms == INT64_MAX);
    tm_settings_free(s);
    s = load("{\"n\": -9223372036854775808}");
    ck_assert_int_eq(tm_settings_fill(s, wide, &d, sizeof d, &err), 0);
    ck_assert(d.timeout_ms == INT64_MIN);
    tm_settings_free(s);
    s = load("{\"n\": 1e19}");
    ck_assert_int_eq(tm_settings_fill(s, wide, &d, sizeof d, &err), -1);
    ck_assert_str_eq(err.message,
                     "$.sink.settings.n: expected an integer, found number "
                     "1e+19");
    tm_settings_free(s);
    /* the text itself: jansson refuses it before any settings exist (the
     * config loader reports it with its path, test_connector_config) */
    json_error_t jerr;
    ck_assert_ptr_null(json_loads("{\"n\": 9223372036854775808}", 0, &jerr));
}
END_TEST

START_TEST(required_missing_names_it) {
    refused("{}", "$.sink.settings.path: missing required setting (expected "
                  "a non-empty string: the database file)");
    refused("{\"path\": null}",
            "$.sink.settings.path: missing required setting (expected a "
            "non-empty string: the database file)");
}
END_TEST

START_TEST(wrong_type_says_what_was_found) {
    refused("{\"path\": 5}", "$.sink.settings.path: expected a non-empty "
                             "string, found integer 5");
    refused("{\"path\": \"/db\", \"timeout_ms\": \"5s\"}",
            "$.sink.settings.timeout_ms: expected an integer from 0 to "
            "2147483647, found string \"5s\"");
    refused("{\"path\": \"/db\", \"timeout_ms\": 1.5}",
            "$.sink.settings.timeout_ms: expected an integer from 0 to "
            "2147483647, found number 1.5");
    refused("{\"path\": \"/db\", \"create\": \"yes\"}",
            "$.sink.settings.create: expected a boolean, found string "
            "\"yes\"");
    refused("{\"path\": \"/db\", \"create\": 1}",
            "$.sink.settings.create: expected a boolean, found integer 1");
    refused("{\"path\": \"/db\", \"mode\": true}",
            "$.sink.settings.mode: expected \"append\" or \"upsert\", found "
            "boolean true");
    refused("{\"path\": [\"/db\"]}", "$.sink.settings.path: expected a "
                                     "non-empty string, found array");
}
END_TEST

START_TEST(allowed_values) {
    refused("{\"path\": \"/db\", \"mode\": \"merge\"}",
            "$.sink.settings.mode: expected \"append\" or \"upsert\", found "
            "string \"merge\"");
    /* without TM_SETTING_ICASE the case matters */
    refused("{\"path\": \"/db\", \"mode\": \"Upsert\"}",
            "$.sink.settings.mode: expected \"append\" or \"upsert\", found "
            "string \"Upsert\"");
    refused("{\"path\": \"/db\", \"synchronous\": \"EXTRA\"}",
            "$.sink.settings.synchronous: expected \"FULL\", \"NORMAL\" or "
            "\"OFF\", found string \"EXTRA\"");
}
END_TEST

START_TEST(unknown_key_with_suggestion) {
    refused("{\"path\": \"/db\", \"tiemout_ms\": 5}",
            "$.sink.settings.tiemout_ms: unknown setting (did you mean "
            "\"timeout_ms\"?)");
    refused("{\"path\": \"/db\", \"colour\": 5}",
            "$.sink.settings.colour: unknown setting");
    /* a key that is no identifier is bracketed and escaped in the path */
    refused("{\"path\": \"/db\", \"a \\\"b\": 5}",
            "$.sink.settings[\"a \\\"b\"]: unknown setting");
}
END_TEST

/* A NUL inside a string would cut it short for the plugin's C code: the
 * value the user wrote is never silently shortened. Control characters
 * and quotes in a found value are shown, never sent raw to a log. */
START_TEST(strings_with_nul_and_escapes) {
    refused("{\"path\": \"/db\\u0000x\"}",
            "$.sink.settings.path: expected a string without \\u0000 (a NUL "
            "character), found one");
    refused("{\"path\": \"/db\", \"mode\": \"up\\u0000sert\"}",
            "$.sink.settings.mode: expected \"append\" or \"upsert\", found "
            "string \"up\"");
    refused("{\"path\": \"/db\", \"mode\": \"a\\nb\\\"c\"}",
            "$.sink.settings.mode: expected \"append\" or \"upsert\", found "
            "string \"a?b\"c\"");
    demo d;
    tm_error err;
    ck_assert_int_eq(fill("{\"path\": \"/d\\\"b\\\\\\u00e9\"}", &d, &err), 0);
    ck_assert_str_eq(d.path, "/d\"b\\\xc3\xa9");
}
END_TEST

/* A long value is cut on a character boundary: the message stays UTF-8. */
START_TEST(long_value_cut_on_a_character) {
    char text[1024] = "{\"path\": \"/db\", \"mode\": \"x";
    for (int k = 0; k < 100; k++)
        strcat(text, "\\u00e9");
    strcat(text, "\"}");
    demo d;
    tm_error err;
    ck_assert_int_eq(fill(text, &d, &err), -1);
    const char *q = strstr(err.message, "found string \"x");
    ck_assert_ptr_nonnull(q);
    /* "x" then 31 two-byte characters fit in 64 bytes: cut after them */
    char want[128] = "found string \"x";
    for (int k = 0; k < 31; k++)
        strcat(want, "\xc3\xa9");
    strcat(want, "...\"");
    ck_assert_str_eq(q, want);
}
END_TEST

START_TEST(duplicate_json_keys_are_the_config_loaders) {
    /* jansson keeps the last of duplicated keys unless asked to refuse
     * them; the config loader asks (its error names the key), and the
     * walker sees one value per key */
    json_error_t jerr;
    ck_assert_ptr_null(json_loads("{\"path\": \"/a\", \"path\": \"/b\"}",
                                  JSON_REJECT_DUPLICATES, &jerr));
}
END_TEST

/* `tidemark validate` checks without a struct of the plugin's: the same
 * answers as a fill. */
START_TEST(check_without_a_struct) {
    tm_error err = {sizeof err, ""};
    tm_settings *s = load("{\"path\": \"/db\", \"mode\": \"upsert\"}");
    ck_assert_msg(tm_settings_check(s, TABLE, &err) == 0, "%s", err.message);
    tm_settings_free(s);
    s = load("{\"path\": \"/db\", \"create\": \"yes\"}");
    ck_assert_int_eq(tm_settings_check(s, TABLE, &err), -1);
    ck_assert_str_eq(err.message, "$.sink.settings.create: expected a boolean, "
                                  "found string \"yes\"");
    tm_settings_free(s);
}
END_TEST

/* ---- the table itself ---------------------------------------------------- */

static void table_refused(const tm_setting *t, size_t size, const char *want) {
    char why[512] = "";
    ck_assert_int_eq(tm_setting_table_check(t, size, why, sizeof why), -1);
    ck_assert_msg(strcmp(why, want) == 0, "\n got  %s\n want %s", why, want);
    /* and fill refuses it naming the entry, filling nothing */
    tm_settings *s = load("{}");
    demo d;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(tm_settings_fill(s, t, &d, size ? size : sizeof d, &err),
                     -1);
    ck_assert_ptr_nonnull(strstr(err.message, "settings table is wrong"));
    ck_assert_ptr_nonnull(strstr(err.message, want));
    tm_settings_free(s);
}

START_TEST(table_checks) {
    char why[512];
    ck_assert_msg(
        tm_setting_table_check(TABLE, sizeof(demo), why, sizeof why) == 0, "%s",
        why);
    static const tm_setting twice[] = {
        TM_SETTING_BOOL("create", demo, create, 1, NULL),
        TM_SETTING_BOOL("create", demo, mode, 0, NULL), TM_SETTING_END};
    table_refused(twice, 0, "entry 1 (\"create\"): a name declared twice");
    static const tm_setting past[] = {
        TM_SETTING_ENUM("mode", demo, sync, 0, MODES, 0, NULL), TM_SETTING_END};
    table_refused(past, offsetof(demo, sync),
                  "entry 0 (\"mode\"): its field is outside the settings "
                  "struct or misaligned");
    static const tm_setting bad_default[] = {
        TM_SETTING_INT("n", demo, timeout_ms, 0, -1, 0, 10, NULL),
        TM_SETTING_END};
    table_refused(bad_default, 0,
                  "entry 0 (\"n\"): the default is out of its bounds (give "
                  "TM_SETTING_NO_DEFAULT for none)");
    static const tm_setting zero_allowed[] = {
        TM_SETTING_INT("n", demo, timeout_ms, TM_SETTING_NO_DEFAULT, 0, 0, 10,
                       NULL),
        TM_SETTING_END};
    table_refused(zero_allowed, 0,
                  "entry 0 (\"n\"): no default, but 0 (what absent leaves) is "
                  "within the bounds");
    static const char *const none[] = {NULL};
    static const tm_setting empty_enum[] = {
        TM_SETTING_ENUM("mode", demo, mode, 0, none, 0, NULL), TM_SETTING_END};
    table_refused(empty_enum, 0,
                  "entry 0 (\"mode\"): an enumeration with no allowed values");
    static const char *const dup[] = {"full", "FULL", NULL};
    static const tm_setting dup_enum[] = {
        TM_SETTING_ENUM("s", demo, sync, TM_SETTING_ICASE, dup, 0, NULL),
        TM_SETTING_END};
    table_refused(dup_enum, 0, "entry 0 (\"s\"): allowed value \"FULL\" twice");
    static const tm_setting enum_default[] = {
        TM_SETTING_ENUM("mode", demo, mode, 0, MODES, 2, NULL), TM_SETTING_END};
    table_refused(enum_default, 0,
                  "entry 0 (\"mode\"): the default is not an index of the "
                  "allowed values");
    static const tm_setting req_default[] = {
        TM_SETTING_STRING("p", demo, path, TM_SETTING_REQUIRED, "x", 0, 0,
                          NULL),
        TM_SETTING_END};
    table_refused(req_default, 0, "entry 0 (\"p\"): required, yet a default");
    static const tm_setting long_default[] = {
        TM_SETTING_STRING("p", demo, path, 0, "toolong", 0, 3, NULL),
        TM_SETTING_END};
    table_refused(long_default, 0,
                  "entry 0 (\"p\"): the default's length is out of its bounds");
    tm_setting bad_type[] = {TM_SETTING_BOOL("b", demo, create, 0, NULL),
                             TM_SETTING_END};
    bad_type[0].type = (tm_setting_type)9;
    table_refused(bad_type, 0, "entry 0 (\"b\"): an unknown type");
    tm_setting bad_flags[] = {TM_SETTING_BOOL("b", demo, create, 0, NULL),
                              TM_SETTING_END};
    bad_flags[0].flags = 0x100;
    table_refused(bad_flags, 0, "entry 0 (\"b\"): unknown flags");
    tm_setting misaligned[] = {
        TM_SETTING_INT("n", demo, timeout_ms, 0, 0, 0, 1, NULL),
        TM_SETTING_END};
    misaligned[0].offset += 1;
    table_refused(misaligned, 0,
                  "entry 0 (\"n\"): its field is outside the settings struct "
                  "or misaligned");
}
END_TEST

/* A field's offset far past any settings struct is refused by the table
 * check itself: `tidemark validate` (tm_settings_check, no struct of the
 * plugin's) sized its scratch struct by the largest offset, and 2^31
 * allocated and zeroed 2 GB. */
START_TEST(table_offset_far_past_any_struct) {
    tm_setting far[] = {TM_SETTING_INT("n", demo, timeout_ms, 0, 0, 0, 1, NULL),
                        TM_SETTING_END};
    far[0].offset = (size_t)1 << 31;
    table_refused(far, 0,
                  "entry 0 (\"n\"): its field ends past the 65536 bytes a "
                  "settings struct may have (offset 2147483648)");
    tm_settings *s = load("{}");
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(tm_settings_check(s, far, &err), -1);
    ck_assert_ptr_nonnull(strstr(err.message, "settings table is wrong"));
    tm_settings_free(s);
}
END_TEST

/* A table whose end entry is missing is refused, not read for ever. */
START_TEST(table_without_end) {
    tm_setting *t = calloc(TM_SETTING_TABLE_MAX + 1, sizeof *t);
    ck_assert_ptr_nonnull(t);
    static char names[TM_SETTING_TABLE_MAX + 1][8];
    for (size_t i = 0; i <= TM_SETTING_TABLE_MAX; i++) {
        snprintf(names[i], sizeof names[i], "k%zu", i);
        t[i] = (tm_setting)TM_SETTING_BOOL(names[i], demo, create, 0, NULL);
    }
    char why[512];
    ck_assert_int_eq(tm_setting_table_check(t, 0, why, sizeof why), -1);
    ck_assert_str_eq(why, "entry 256: no end entry (TM_SETTING_END) within "
                          "256 entries");
    free(t);
}
END_TEST

/* Tables stay readable when tm_setting grows in a later ABI: a host takes
 * entries from ABI 1.3's size up to its own, walked with the plugin's own
 * struct_size as the stride, and refuses larger ones (a newer plugin) and
 * smaller ones. A host grown past this one is the check with a larger
 * host size. */
typedef struct grown_setting {
    tm_setting s;
    int64_t later; /* a field of a later minor version */
} grown_setting;

static void grown_table(grown_setting g[3], const char *second) {
    memset(g, 0, 3 * sizeof *g);
    g[0].s = (tm_setting)TM_SETTING_BOOL("create", demo, create, 1, NULL);
    g[1].s = (tm_setting)TM_SETTING_BOOL(second, demo, mode, 0, NULL);
    g[0].s.struct_size = g[1].s.struct_size = (uint32_t)sizeof(grown_setting);
}

START_TEST(table_stride_from_abi_1_3_to_the_hosts) {
    char why[512] = "";
    /* ABI 1.3's entries under a host whose own have grown */
    ck_assert_msg(tm_setting_table_check_sized(TABLE, sizeof(grown_setting),
                                               sizeof(demo), why,
                                               sizeof why) == 0,
                  "%s", why);
    /* that host walks its own grown entries with their stride: entry 1
     * is read where it is (its name found twice, then not) */
    grown_setting g[3];
    grown_table(g, "create");
    ck_assert_int_eq(tm_setting_table_check_sized(
                         &g[0].s, sizeof(grown_setting), 0, why, sizeof why),
                     -1);
    ck_assert_str_eq(why, "entry 1 (\"create\"): a name declared twice");
    grown_table(g, "mode");
    ck_assert_msg(tm_setting_table_check_sized(&g[0].s, sizeof(grown_setting),
                                               0, why, sizeof why) == 0,
                  "%s", why);
    /* this host: grown entries are a newer plugin's, refused */
    char want[160];
    snprintf(want, sizeof want,
             "entry 0: struct_size %zu is larger than tm_setting (%zu bytes) "
             "of this host",
             sizeof(grown_setting), sizeof(tm_setting));
    table_refused(&g[0].s, 0, want);
    /* smaller than ABI 1.3's: refused */
    tm_setting small[] = {TM_SETTING_BOOL("b", demo, create, 0, NULL),
                          TM_SETTING_END};
    small[0].struct_size = (uint32_t)TM_SETTING_SIZE_1_3 - 8;
    snprintf(want, sizeof want,
             "entry 0: struct_size %zu is smaller than tm_setting (%zu "
             "bytes) of ABI 1.3",
             TM_SETTING_SIZE_1_3 - 8, TM_SETTING_SIZE_1_3);
    table_refused(small, 0, want);
}
END_TEST

START_TEST(schema_from_the_table) {
    json_t *got = tm_setting_table_schema(TABLE);
    ck_assert_ptr_nonnull(got);
    json_error_t jerr;
    json_t *want = json_loads(
        "{\"type\": \"object\", \"required\": [\"path\"],"
        " \"additionalProperties\": false, \"properties\": {"
        " \"path\": {\"type\": \"string\", \"minLength\": 1,"
        "  \"description\": \"the database file\"},"
        " \"schema\": {\"type\": \"string\", \"minLength\": 1,"
        "  \"maxLength\": 8, \"default\": \"public\"},"
        " \"timeout_ms\": {\"type\": \"integer\", \"minimum\": 0,"
        "  \"maximum\": 2147483647, \"default\": 5000,"
        "  \"description\": \"lock timeout\"},"
        " \"retention_s\": {\"type\": \"integer\", \"minimum\": 1,"
        "  \"maximum\": 9223372036854775},"
        " \"create\": {\"type\": \"boolean\", \"default\": true},"
        " \"mode\": {\"enum\": [\"append\", \"upsert\"],"
        "  \"default\": \"append\"},"
        " \"synchronous\": {\"enum\": [\"FULL\", \"NORMAL\", \"OFF\"],"
        "  \"default\": \"FULL\"}}}",
        0, &jerr);
    ck_assert_msg(want != NULL, "%s", jerr.text);
    char *g = json_dumps(got, JSON_SORT_KEYS);
    ck_assert_msg(json_equal(got, want), "%s", g);
    free(g);
    json_decref(got);
    json_decref(want);
}
END_TEST

int main(void) {
    Suite *s = suite_create("settings_table");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, NULL, drop_live);
    tcase_add_test(tc, defaults_fill_an_absent_setting);
    tcase_add_test(tc, every_type_is_filled);
    tcase_add_test(tc, bounds_are_inclusive);
    tcase_add_test(tc, int64_extremes_and_overflow);
    tcase_add_test(tc, required_missing_names_it);
    tcase_add_test(tc, wrong_type_says_what_was_found);
    tcase_add_test(tc, allowed_values);
    tcase_add_test(tc, unknown_key_with_suggestion);
    tcase_add_test(tc, strings_with_nul_and_escapes);
    tcase_add_test(tc, long_value_cut_on_a_character);
    tcase_add_test(tc, duplicate_json_keys_are_the_config_loaders);
    tcase_add_test(tc, check_without_a_struct);
    tcase_add_test(tc, table_checks);
    tcase_add_test(tc, table_without_end);
    tcase_add_test(tc, table_offset_far_past_any_struct);
    tcase_add_test(tc, table_stride_from_abi_1_3_to_the_hosts);
    tcase_add_test(tc, schema_from_the_table);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
