/* The connector config: defaults, every class of error (each naming the
 * JSON path, what was expected and what was found), all errors collected,
 * interpolation and redaction. */
#include <tidemark/columns.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/connector_config.h"
#include "config/json_path.h"
#include "config/settings.h"
#include "kafka/kafka_conf.h"
#include "check_main.h"

static const char *const BASE =
    "{\"name\":\"orders\","
    " \"kafka\":{\"bootstrap_servers\":\"localhost:9092\","
    "            \"topics\":[\"orders\"]},"
    " \"sink\":{\"plugin\":\"sqlite\","
    "           \"settings\":{\"path\":\"/tmp/x.db\",\"table\":\"t\"}},"
    " \"mapping\":{\"mode\":\"json\",\"columns\":["
    "   {\"name\":\"id\",\"pointer\":\"/id\",\"type\":\"int\","
    "    \"required\":true,\"key\":true},"
    "   {\"name\":\"body\",\"pointer\":\"/body\",\"type\":\"json\"}]}}";

static json_t *base(void) {
    json_error_t jerr;
    json_t *root = json_loads(BASE, 0, &jerr);
    ck_assert_msg(root != NULL, "BASE: %s", jerr.text);
    return root;
}

/* root[a] (or root[a][b] when b is not NULL) = the JSON text (NULL:
 * remove the key). */
static void set(json_t *root, const char *a, const char *b, const char *text) {
    json_t *obj = root;
    const char *key = a;
    if (b) {
        obj = json_object_get(root, a);
        ck_assert_ptr_nonnull(obj);
        key = b;
    }
    if (!text) {
        json_object_del(obj, key);
        return;
    }
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
    ck_assert_msg(v != NULL, "%s: %s", text, jerr.text);
    json_object_set_new(obj, key, v);
}

/* Loads root (consumed). */
static tm_connector_config *load(json_t *root, tm_config_errors *errs) {
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    ck_assert_ptr_nonnull(text);
    tm_connector_config *cfg = tm_config_load_string(text, "t.json", errs);
    free(text);
    return cfg;
}

static int has_line(const tm_config_errors *e, const char *line) {
    for (size_t i = 0; i < e->count; i++)
        if (strcmp(e->lines[i], line) == 0)
            return 1;
    return 0;
}

#define ck_assert_line(errs, line)                                             \
    do {                                                                       \
        if (!has_line((errs), (line))) {                                       \
            for (size_t i_ = 0; i_ < (errs)->count; i_++)                      \
                fprintf(stderr, "  got: %s\n", (errs)->lines[i_]);             \
            ck_abort_msg("missing error line: %s", (line));                    \
        }                                                                      \
    } while (0)

/* Loads root expecting failure with exactly one error line. */
static void expect_one(json_t *root, const char *line) {
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    tm_connector_config *cfg = load(root, &errs);
    ck_assert_ptr_null(cfg);
    ck_assert_line(&errs, line);
    ck_assert_msg(errs.count == 1, "expected 1 error, got %zu", errs.count);
    tm_config_errors_free(&errs);
}

static tm_connector_config *expect_ok(json_t *root) {
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    tm_connector_config *cfg = load(root, &errs);
    for (size_t i = 0; i < errs.count; i++)
        fprintf(stderr, "  unexpected: %s\n", errs.lines[i]);
    ck_assert_ptr_nonnull(cfg);
    ck_assert_uint_eq(errs.count, 0);
    return cfg;
}

START_TEST(defaults) {
    json_t *root = base();
    set(root, "mapping", NULL, "{\"mode\":\"raw\"}");
    set(root, "sink", NULL, "{\"plugin\":\"sqlite\"}");
    tm_connector_config *cfg = expect_ok(root);
    ck_assert_str_eq(cfg->name, "orders");
    ck_assert_str_eq(cfg->file, "t.json");
    ck_assert_str_eq(cfg->kafka.bootstrap_servers, "localhost:9092");
    ck_assert_uint_eq(cfg->kafka.ntopics, 1);
    ck_assert_str_eq(cfg->kafka.topics[0], "orders");
    ck_assert_ptr_null(cfg->kafka.topic_regex);
    ck_assert_str_eq(cfg->kafka.group_id, "tidemark-orders");
    ck_assert_int_eq(cfg->kafka.start, TM_START_EARLIEST);
    ck_assert_uint_eq(cfg->kafka.nproperties, 0);
    ck_assert_int_eq(cfg->batch.max_records, 10000);
    ck_assert_int_eq(cfg->batch.max_bytes, 16 * 1024 * 1024);
    ck_assert_int_eq(cfg->batch.max_wait_ms, 500);
    ck_assert_str_eq(cfg->sink.plugin, "sqlite");
    ck_assert(json_is_object(cfg->sink.settings));
    ck_assert_uint_eq(json_object_size(cfg->sink.settings), 0);
    ck_assert_int_eq(cfg->dedup.enabled, 0);
    ck_assert_int_eq(cfg->dead_letters.sink, 1);
    ck_assert_ptr_null(cfg->dead_letters.topic);
    ck_assert_ptr_null(cfg->state_dir);
    ck_assert_int_eq(cfg->mapping.filter.op, TM_FILTER_NONE);
    ck_assert_uint_eq(cfg->nsecrets, 0);
    tm_config_free(cfg);
}
END_TEST

START_TEST(raw_mode_columns) {
    json_t *root = base();
    set(root, "mapping", NULL, "{\"mode\":\"raw\"}");
    tm_connector_config *cfg = expect_ok(root);
    ck_assert_int_eq(cfg->mapping.mode, TM_MAPPING_RAW);
    ck_assert_ptr_null(cfg->mapping.pointers);
    static const struct {
        const char *name;
        tm_type type;
    } want[] = {{"key", TM_TYPE_BYTES},          {"value", TM_TYPE_BYTES},
                {"headers", TM_TYPE_JSON},       {"topic", TM_TYPE_TEXT},
                {"partition", TM_TYPE_INT},      {"offset", TM_TYPE_INT},
                {"timestamp", TM_TYPE_TIMESTAMP}};
    ck_assert_uint_eq(cfg->mapping.ncolumns, 7);

    tm_settings *settings =
        tm_settings_new(cfg->sink.settings, TM_CONFIG_SETTINGS_PATH);
    ck_assert_ptr_nonnull(settings);
    int ctx = 0;
    tm_sink_config sc;
    tm_config_sink_config(cfg, settings, &ctx, &sc);
    ck_assert_uint_eq(sc.struct_size, sizeof(tm_sink_config));
    ck_assert_str_eq(sc.connector, "orders");
    ck_assert_uint_eq(sc.flags, TM_CONFIG_RAW);
    ck_assert_ptr_eq(sc.host_ctx, &ctx);
    ck_assert_ptr_eq(sc.settings, settings);
    ck_assert_uint_eq(sc.ncolumns, 7);
    for (size_t i = 0; i < 7; i++) {
        const tm_column *c = TM_CELEM(tm_column, sc.columns, i);
        ck_assert_uint_eq(c->struct_size, sizeof(tm_column));
        ck_assert_str_eq(c->name, want[i].name);
        ck_assert_int_eq(c->type, want[i].type);
        ck_assert_int_eq(c->key, 0);
    }
    tm_settings_free(settings);
    tm_config_free(cfg);

    root = base();
    set(root, "mapping", NULL,
        "{\"mode\":\"raw\",\"columns\":[],\"filter\":\"/a == b\"}");
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    ck_assert_ptr_null(load(root, &errs));
    ck_assert_uint_eq(errs.count, 2);
    ck_assert_line(&errs, "$.mapping.columns: not allowed with mode \"raw\" "
                          "(its columns are fixed: key, value, headers, "
                          "topic, partition, offset, timestamp)");
    ck_assert_line(&errs, "$.mapping.filter: not allowed with mode \"raw\" "
                          "(record values are not parsed)");
    tm_config_errors_free(&errs);
}
END_TEST

START_TEST(json_mapping_full) {
    json_t *root = base();
    set(root, "kafka", NULL,
        "{\"bootstrap_servers\":\"k:9092\",\"topic_regex\":\"^orders\\\\..*\","
        "\"group_id\":\"g1\",\"start\":\"latest\","
        "\"properties\":{\"fetch.max.bytes\":\"1048576\","
        "\"client.id\":\"me\"}}");
    set(root, "batch", NULL,
        "{\"max_records\":7,\"max_bytes\":1024,\"max_wait_ms\":9}");
    set(root, "mapping", "filter", "\"/meta/type in [edit, \\\"a, b\\\"]\"");
    set(root, "dedup", NULL, "{\"key\":[\"body\",\"id\"]}");
    set(root, "dead_letters", NULL, "{\"sink\":false,\"topic\":\"dlq\"}");
    set(root, "state_dir", NULL, "\"/var/lib/tm\"");
    tm_connector_config *cfg = expect_ok(root);
    ck_assert_ptr_null(cfg->kafka.topics);
    ck_assert_str_eq(cfg->kafka.topic_regex, "^orders\\..*");
    ck_assert_str_eq(cfg->kafka.group_id, "g1");
    ck_assert_int_eq(cfg->kafka.start, TM_START_LATEST);
    ck_assert_uint_eq(cfg->kafka.nproperties, 2);
    ck_assert_str_eq(cfg->kafka.properties[0].key, "fetch.max.bytes");
    ck_assert_str_eq(cfg->kafka.properties[0].value, "1048576");
    ck_assert_int_eq(cfg->batch.max_records, 7);
    ck_assert_int_eq(cfg->batch.max_bytes, 1024);
    ck_assert_int_eq(cfg->batch.max_wait_ms, 9);
    ck_assert_int_eq(cfg->mapping.mode, TM_MAPPING_JSON);
    ck_assert_uint_eq(cfg->mapping.ncolumns, 2);
    ck_assert_str_eq(cfg->mapping.columns[0].name, "id");
    ck_assert_int_eq(cfg->mapping.columns[0].type, TM_TYPE_INT);
    ck_assert_int_eq(cfg->mapping.columns[0].required, 1);
    ck_assert_int_eq(cfg->mapping.columns[0].key, 1);
    ck_assert_int_eq(cfg->mapping.columns[1].type, TM_TYPE_JSON);
    ck_assert_int_eq(cfg->mapping.columns[1].required, 0);
    ck_assert_str_eq(cfg->mapping.pointers[0], "/id");
    ck_assert_str_eq(cfg->mapping.pointers[1], "/body");
    ck_assert_int_eq(cfg->mapping.filter.op, TM_FILTER_IN);
    ck_assert_str_eq(cfg->mapping.filter.pointer, "/meta/type");
    ck_assert_uint_eq(cfg->mapping.filter.nvalues, 2);
    ck_assert_str_eq(cfg->mapping.filter.values[0], "edit");
    ck_assert_str_eq(cfg->mapping.filter.values[1], "a, b");
    ck_assert_int_eq(cfg->dedup.enabled, 1);
    ck_assert_uint_eq(cfg->dedup.nkey, 2);
    ck_assert_str_eq(cfg->dedup.key[0], "body");
    ck_assert_uint_eq(cfg->dedup.key_columns[0], 1);
    ck_assert_uint_eq(cfg->dedup.key_columns[1], 0);
    ck_assert_int_eq(cfg->dead_letters.sink, 0);
    ck_assert_str_eq(cfg->dead_letters.topic, "dlq");
    ck_assert_str_eq(cfg->state_dir, "/var/lib/tm");

    tm_settings *settings =
        tm_settings_new(cfg->sink.settings, TM_CONFIG_SETTINGS_PATH);
    tm_sink_config sc;
    tm_config_sink_config(cfg, settings, NULL, &sc);
    ck_assert_uint_eq(sc.flags, TM_CONFIG_DEDUP);
    ck_assert_str_eq(sc.state_dir, "/var/lib/tm");
    tm_error err = {sizeof err, ""};
    const char *table = NULL;
    int64_t n;
    ck_assert_int_eq(tm_settings_string(settings, "table", &table, &err), 1);
    ck_assert_str_eq(table, "t");
    ck_assert_int_eq(tm_settings_int(settings, "path", &n, &err), -1);
    ck_assert_str_eq(err.message,
                     "$.sink.settings.path: expected an integer, found string");
    tm_settings_free(settings);
    tm_config_free(cfg);

    root = base();
    set(root, "mapping", "filter", "\"/type == \\\"new\\\"\"");
    cfg = expect_ok(root);
    ck_assert_int_eq(cfg->mapping.filter.op, TM_FILTER_EQ);
    ck_assert_str_eq(cfg->mapping.filter.pointer, "/type");
    ck_assert_uint_eq(cfg->mapping.filter.nvalues, 1);
    ck_assert_str_eq(cfg->mapping.filter.values[0], "new");
    tm_config_free(cfg);
}
END_TEST

START_TEST(unknown_keys_did_you_mean) {
    json_t *root = base();
    set(root, "batch", NULL, "{\"max_record\":5}");
    expect_one(root, "$.batch.max_record: unknown setting (did you mean "
                     "\"max_records\"?)");

    root = base();
    set(root, "stat_dir", NULL, "\"/x\"");
    expect_one(root, "$.stat_dir: unknown setting (did you mean "
                     "\"state_dir\"?)");

    root = base();
    set(root, "zzzzzz", NULL, "1");
    expect_one(root, "$.zzzzzz: unknown setting");

    root = base();
    json_array_append_new(
        json_object_get(json_object_get(root, "mapping"), "columns"),
        json_pack("{s:s,s:s,s:s,s:b}", "name", "x", "pointer", "/x", "type",
                  "text", "requird", 1));
    expect_one(root, "$.mapping.columns[2].requird: unknown setting (did you "
                     "mean \"required\"?)");

    root = base();
    set(root, "kafka", "bootstrap_server", "\"x\"");
    expect_one(root, "$.kafka.bootstrap_server: unknown setting (did you mean "
                     "\"bootstrap_servers\"?)");
}
END_TEST

START_TEST(wrong_types) {
    json_t *root = base();
    set(root, "batch", NULL, "{\"max_records\":\"ten\"}");
    expect_one(root, "$.batch.max_records: expected a positive integer, "
                     "found string \"ten\"");

    root = base();
    set(root, "batch", NULL, "{\"max_bytes\":-1}");
    expect_one(root, "$.batch.max_bytes: expected a positive integer, found "
                     "integer -1");

    root = base();
    set(root, "batch", NULL, "{\"max_wait_ms\":1.5}");
    expect_one(root, "$.batch.max_wait_ms: expected a positive integer, "
                     "found number 1.5");

    root = base();
    set(root, "dead_letters", NULL, "{\"sink\":\"yes\"}");
    expect_one(root, "$.dead_letters.sink: expected a boolean, found string "
                     "\"yes\"");

    root = base();
    set(root, "kafka", "start", "\"first\"");
    expect_one(root, "$.kafka.start: expected \"earliest\" or \"latest\", "
                     "found string \"first\"");

    root = base();
    set(root, "sink", "settings", "[1]");
    expect_one(root, "$.sink.settings: expected an object, found array");

    root = base();
    set(root, "name", NULL, "\"bad name!\"");
    expect_one(root, "$.name: expected a name of letters, digits, '.', '_' "
                     "or '-', found string \"bad name!\"");

    root = base();
    set(root, "mapping", "mode", "\"avro\"");
    expect_one(root, "$.mapping.mode: expected \"raw\" or \"json\", found "
                     "string \"avro\"");

    root = base();
    set(root, "kafka", "topics", "[\"a\", 5]");
    expect_one(root, "$.kafka.topics[1]: expected a topic name (non-empty "
                     "string), found integer 5");

    root = base();
    set(root, "kafka", "properties", "{\"linger.ms\":5}");
    expect_one(root, "$.kafka.properties[\"linger.ms\"]: expected a string "
                     "(librdkafka takes string values), found integer 5");

    root = base();
    set(root, "mapping", "columns",
        "[{\"name\":\"a\",\"pointer\":\"/a\",\"type\":\"string\"}]");
    expect_one(root, "$.mapping.columns[0].type: expected \"text\", \"int\", "
                     "\"float\", \"bool\", \"timestamp\" or \"json\", found "
                     "string \"string\"");

    root = base();
    set(root, "mapping", "columns",
        "[{\"name\":\"a\",\"pointer\":\"/a\",\"type\":\"int\"},"
        " {\"name\":\"a\",\"pointer\":\"/b\",\"type\":\"int\"}]");
    expect_one(root, "$.mapping.columns[1].name: expected a unique column "
                     "name, found string \"a\" (also $.mapping.columns[0])");
}
END_TEST

START_TEST(missing_required) {
    json_t *root = base();
    set(root, "name", NULL, NULL);
    expect_one(root, "$.name: missing required setting (expected a name of "
                     "letters, digits, '.', '_' or '-')");

    root = base();
    set(root, "sink", "plugin", NULL);
    expect_one(root, "$.sink.plugin: missing required setting (expected a "
                     "non-empty string)");

    root = base();
    set(root, "kafka", "bootstrap_servers", NULL);
    expect_one(root, "$.kafka.bootstrap_servers: missing required setting "
                     "(expected a non-empty string)");

    root = base();
    set(root, "mapping", NULL, NULL);
    expect_one(root,
               "$.mapping: missing required setting (expected an object)");

    root = base();
    set(root, "mapping", "columns", "[{\"name\":\"a\",\"type\":\"int\"}]");
    expect_one(root, "$.mapping.columns[0].pointer: missing required setting "
                     "(expected a JSON pointer (RFC 6901))");
}
END_TEST

START_TEST(all_errors_collected) {
    json_t *root = base();
    set(root, "name", NULL, NULL);
    set(root, "batch", NULL, "{\"max_records\":0,\"max_bytes\":\"x\"}");
    set(root, "kafka", "strat", "\"latest\"");
    set(root, "dead_letters", NULL, "{\"topic\":\"\"}");
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    ck_assert_ptr_null(load(root, &errs));
    ck_assert_uint_eq(errs.count, 5);
    ck_assert_line(&errs, "$.batch.max_records: expected a positive integer, "
                          "found integer 0");
    ck_assert_line(&errs, "$.batch.max_bytes: expected a positive integer, "
                          "found string \"x\"");
    ck_assert_line(&errs, "$.kafka.strat: unknown setting (did you mean "
                          "\"start\"?)");
    ck_assert_line(&errs, "$.dead_letters.topic: expected a non-empty string, "
                          "found string \"\"");
    tm_config_errors_free(&errs);
}
END_TEST

START_TEST(topics_xor_regex) {
    json_t *root = base();
    set(root, "kafka", "topic_regex", "\"^o.*\"");
    expect_one(root, "$.kafka: expected exactly one of \"topics\" or "
                     "\"topic_regex\", found both");

    root = base();
    set(root, "kafka", "topics", NULL);
    expect_one(root, "$.kafka: expected exactly one of \"topics\" or "
                     "\"topic_regex\", found neither");

    root = base();
    set(root, "kafka", "topics", "[]");
    expect_one(root, "$.kafka.topics: expected an array of topic names, "
                     "found array");
}
END_TEST

START_TEST(bad_pointer) {
    json_t *root = base();
    set(root, "mapping", "columns",
        "[{\"name\":\"a\",\"pointer\":\"a\",\"type\":\"int\"},"
        " {\"name\":\"b\",\"pointer\":\"/a~2b\",\"type\":\"int\"},"
        " {\"name\":\"c\",\"pointer\":\"/a~0~1b\",\"type\":\"int\"},"
        " {\"name\":\"d\",\"pointer\":\"\",\"type\":\"json\"}]");
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    ck_assert_ptr_null(load(root, &errs));
    ck_assert_uint_eq(errs.count, 2);
    ck_assert_line(&errs, "$.mapping.columns[0].pointer: expected a JSON "
                          "pointer (RFC 6901), found string \"a\": a JSON "
                          "pointer starts with '/'");
    ck_assert_line(&errs, "$.mapping.columns[1].pointer: expected a JSON "
                          "pointer (RFC 6901), found string \"/a~2b\": '~' "
                          "must be followed by 0 or 1 (~0 is '~', ~1 is '/')");
    tm_config_errors_free(&errs);
}
END_TEST

START_TEST(bad_filter) {
    static const struct {
        const char *filter, *why;
    } cases[] = {
        {"type in [edit]", "it must start with a JSON pointer (\"/field\")"},
        {"/type = edit", "the operator must be \"==\" or \"in\""},
        {"/type in edit", "\"in\" needs a list in brackets"},
        {"/type in []", "the list is empty"},
        {"/type in [a, b", "the list is not closed with ']'"},
        {"/type in [a b]", "expected ',' or ']' in the list"},
        {"/type in [a,]", "a value is missing"},
        {"/type ==", "a value is missing"},
        {"/type == \"x", "unterminated quoted value"},
        {"/type == a b", "unexpected text after the filter"},
        {"/a~3 == x", "'~' must be followed by 0 or 1 (~0 is '~', ~1 is '/')"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *root = base();
        json_object_set_new(json_object_get(root, "mapping"), "filter",
                            json_string(cases[i].filter));
        char line[512];
        snprintf(line, sizeof line,
                 "$.mapping.filter: expected \"/pointer in [a, b, ...]\" or "
                 "\"/pointer == value\", found string \"%s\": %s",
                 cases[i].filter, cases[i].why);
        expect_one(root, line);
    }
    json_t *root = base();
    set(root, "mapping", "filter", "42");
    expect_one(root, "$.mapping.filter: expected a string \"/pointer in [a, "
                     "b]\" or \"/pointer == value\", found integer 42");
}
END_TEST

START_TEST(dedup_key_not_a_column) {
    json_t *root = base();
    set(root, "dedup", NULL, "{\"key\":[\"idd\", \"nope_at_all\"]}");
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    ck_assert_ptr_null(load(root, &errs));
    ck_assert_uint_eq(errs.count, 2);
    ck_assert_line(&errs, "$.dedup.key[0]: expected a column of "
                          "$.mapping.columns, found string \"idd\" (did you "
                          "mean \"id\"?)");
    ck_assert_line(&errs, "$.dedup.key[1]: expected a column of "
                          "$.mapping.columns, found string \"nope_at_all\"");
    tm_config_errors_free(&errs);

    root = base();
    set(root, "dedup", NULL, "{\"key\":[]}");
    expect_one(root, "$.dedup.key: expected a non-empty array of column "
                     "names, found array");
    root = base();
    set(root, "dedup", NULL, "{}");
    expect_one(root, "$.dedup.key: missing required setting (expected a "
                     "non-empty array of column names)");
}
END_TEST

START_TEST(reserved_properties) {
    static const char *const reserved[] = {
        "enable.auto.commit", "auto.offset.reset", "group.id",
        "bootstrap.servers",  "isolation.level",   "enable.auto.offset.store"};
    for (size_t i = 0; i < 6; i++) {
        json_t *root = base();
        json_t *props = json_object();
        json_object_set_new(props, reserved[i], json_string("x"));
        json_object_set_new(props, "client.id", json_string("ok"));
        json_object_set_new(json_object_get(root, "kafka"), "properties",
                            props);
        tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
        ck_assert_ptr_null(load(root, &errs));
        ck_assert_uint_eq(errs.count, 1);
        char prefix[256];
        snprintf(prefix, sizeof prefix,
                 "$.kafka.properties[\"%s\"]: reserved: tidemark sets \"%s\" "
                 "itself (",
                 reserved[i], reserved[i]);
        ck_assert_msg(strncmp(errs.lines[0], prefix, strlen(prefix)) == 0,
                      "got: %s", errs.lines[0]);
        tm_config_errors_free(&errs);
    }
    json_t *root = base();
    set(root, "kafka", "properties", "{\"group.id\":\"g\"}");
    expect_one(root, "$.kafka.properties[\"group.id\"]: reserved: tidemark "
                     "sets \"group.id\" itself (set $.kafka.group_id "
                     "instead)");
}
END_TEST

START_TEST(interpolation_env) {
    setenv("TM_TEST_HOST", "broker-1", 1);
    setenv("TM_TEST_TABLE", "orders_v2", 1);
    unsetenv("TM_TEST_UNSET");
    json_t *root = base();
    set(root, "kafka", "bootstrap_servers", "\"${env:TM_TEST_HOST}:9092\"");
    set(root, "sink", "settings",
        "{\"table\":\"${env:TM_TEST_TABLE}\",\"x\":[\"a${env:TM_TEST_HOST}\"],"
        "\"lit\":\"$${env:NOT_RESOLVED} and $5\"}");
    tm_connector_config *cfg = expect_ok(root);
    ck_assert_str_eq(cfg->kafka.bootstrap_servers, "broker-1:9092");
    json_t *set_ = cfg->sink.settings;
    ck_assert_str_eq(json_string_value(json_object_get(set_, "table")),
                     "orders_v2");
    ck_assert_str_eq(
        json_string_value(json_array_get(json_object_get(set_, "x"), 0)),
        "abroker-1");
    ck_assert_str_eq(json_string_value(json_object_get(set_, "lit")),
                     "${env:NOT_RESOLVED} and $5");
    ck_assert_uint_eq(cfg->nsecrets, 2);
    tm_config_free(cfg);

    root = base();
    set(root, "sink", "settings", "{\"password\":\"${env:TM_TEST_UNSET}\"}");
    expect_one(root, "$.sink.settings.password: environment variable "
                     "TM_TEST_UNSET is not set");

    root = base();
    set(root, "state_dir", NULL, "\"${env:1BAD}\"");
    expect_one(root, "$.state_dir: expected ${env:NAME} with NAME of letters, "
                     "digits and '_', found \"${env:1BAD}\"");

    root = base();
    set(root, "state_dir", NULL, "\"${vault:x}\"");
    expect_one(root, "$.state_dir: unknown reference \"${vault:x}\": "
                     "expected ${env:NAME} or ${file:PATH} (write $${ for a "
                     "literal \"${\")");

    root = base();
    set(root, "state_dir", NULL, "\"/x/${env:TM_TEST_HOST\"");
    expect_one(root, "$.state_dir: unterminated \"${\": expected ${env:NAME} "
                     "or ${file:PATH} (write $${ for a literal \"${\")");
    unsetenv("TM_TEST_HOST");
    unsetenv("TM_TEST_TABLE");
}
END_TEST

START_TEST(interpolation_file) {
    char path[] = "/tmp/tm-config-secret-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "s3cr3t-pw\n", 10), 10);
    close(fd);
    json_t *root = base();
    char text[256];
    snprintf(text, sizeof text, "\"user:${file:%s}@db\"", path);
    set(root, "sink", "settings", "{}");
    json_error_t jerr;
    json_object_set_new(
        json_object_get(json_object_get(root, "sink"), "settings"), "dsn",
        json_loads(text, JSON_DECODE_ANY, &jerr));
    tm_connector_config *cfg = expect_ok(root);
    ck_assert_str_eq(
        json_string_value(json_object_get(cfg->sink.settings, "dsn")),
        "user:s3cr3t-pw@db");
    ck_assert_uint_eq(cfg->nsecrets, 1);
    ck_assert_str_eq(cfg->secrets[0], "s3cr3t-pw");
    tm_config_free(cfg);

    /* The secret from the file never shows in an error. */
    root = base();
    snprintf(text, sizeof text, "\"${file:%s}\"", path);
    json_object_set_new(root, "batch",
                        json_pack("{s:o}", "max_records",
                                  json_loads(text, JSON_DECODE_ANY, &jerr)));
    expect_one(root, "$.batch.max_records: expected a positive integer, "
                     "found string \"***\"");
    unlink(path);

    root = base();
    set(root, "state_dir", NULL, "\"${file:/nonexistent/tm/secret}\"");
    expect_one(root, "$.state_dir: cannot read file /nonexistent/tm/secret: "
                     "No such file or directory");
}
END_TEST

START_TEST(redaction) {
    setenv("TM_TEST_PW", "hunter2", 1);
    setenv("TM_TEST_PW_LONG", "hunter2-and-more", 1);
    json_t *root = base();
    set(root, "sink", "settings",
        "{\"a\":\"${env:TM_TEST_PW}\",\"b\":\"${env:TM_TEST_PW_LONG}\"}");
    tm_connector_config *cfg = expect_ok(root);
    char out[128];
    ck_assert_str_eq(
        tm_config_redact(cfg, "login hunter2 failed", out, sizeof out),
        "login *** failed");
    ck_assert_str_eq(tm_config_redact(cfg, "hunter2-and-more/hunter2hunter2",
                                      out, sizeof out),
                     "***/******");
    ck_assert_str_eq(tm_config_redact(cfg, "nothing here", out, sizeof out),
                     "nothing here");
    ck_assert_str_eq(tm_config_redact(cfg, "", out, sizeof out), "");
    char small[6];
    ck_assert_str_eq(tm_config_redact(cfg, "ab hunter2", small, sizeof small),
                     "ab **");
    ck_assert_str_eq(tm_config_redact(NULL, "hunter2", out, sizeof out),
                     "hunter2");
    tm_config_free(cfg);

    /* In error lines: a secret in a wrong-typed value, and one that was
     * used inside a longer string. */
    root = base();
    set(root, "batch", NULL, "{\"max_wait_ms\":\"${env:TM_TEST_PW}\"}");
    set(root, "name", NULL, "\"x ${env:TM_TEST_PW} y\"");
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    ck_assert_ptr_null(load(root, &errs));
    ck_assert_uint_eq(errs.count, 2);
    ck_assert_line(&errs, "$.batch.max_wait_ms: expected a positive integer, "
                          "found string \"***\"");
    ck_assert_line(&errs, "$.name: expected a name of letters, digits, '.', "
                          "'_' or '-', found string \"x *** y\"");
    for (size_t i = 0; i < errs.count; i++)
        ck_assert_ptr_null(strstr(errs.lines[i], "hunter2"));
    tm_config_errors_free(&errs);
    unsetenv("TM_TEST_PW");
    unsetenv("TM_TEST_PW_LONG");
}
END_TEST

START_TEST(syntax_and_files) {
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    ck_assert_ptr_null(tm_config_load_string("{\"name\": ", "x", &errs));
    ck_assert_uint_eq(errs.count, 1);
    ck_assert_msg(strncmp(errs.lines[0],
                          "$: expected JSON, found a syntax error at line 1",
                          48) == 0,
                  "got: %s", errs.lines[0]);
    tm_config_errors_free(&errs);

    ck_assert_ptr_null(tm_config_load_string("[1]", "x", &errs));
    ck_assert_line(&errs, "$: expected an object (one connector), found array");
    tm_config_errors_free(&errs);

    ck_assert_ptr_null(
        tm_config_load_string("{\"name\":\"a\",\"name\":\"b\"}", "x", &errs));
    ck_assert_uint_eq(errs.count, 1);
    ck_assert_ptr_nonnull(strstr(errs.lines[0], "duplicate object key"));
    tm_config_errors_free(&errs);

    ck_assert_ptr_null(tm_config_load("/nonexistent/tm.json", &errs));
    ck_assert_line(&errs, "$: cannot read the file: No such file or directory");
    tm_config_errors_free(&errs);

    /* errs may be NULL. */
    ck_assert_ptr_null(tm_config_load_string("[]", NULL, NULL));

    char path[] = "/tmp/tm-config-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, BASE, strlen(BASE)), (ssize_t)strlen(BASE));
    close(fd);
    tm_connector_config *cfg = tm_config_load(path, &errs);
    ck_assert_ptr_nonnull(cfg);
    ck_assert_str_eq(cfg->file, path);
    ck_assert_str_eq(cfg->name, "orders");
    tm_config_free(cfg);
    unlink(path);
    tm_config_free(NULL);
    tm_config_errors_free(&errs);
}
END_TEST

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* validate was quadratic in columns (46.7 s for 150 000): every column's
 * name was compared with all earlier ones, every dedup key with all
 * columns (and dedup keys were appended one realloc at a time). Judged by
 * how the time grows, not by a wall-clock bound (a loaded CI machine
 * missed a fixed 3 s once): 4 times the columns must take less than 10
 * times as long (linear: about 4; the quadratic code: about 16, 0.9 s for
 * 15 000 and 14.5 s for 60 000). The best of three runs of each size. The
 * duplicate name at the end and the dedup keys show the checks still
 * happen. */
#define WIDE 60000

/* Loads a config of wide int columns, the last one repeating c0's name,
 * every other one a dedup key plus an unknown key "c-1"; checks the two
 * errors and returns the seconds the load took. */
static double load_wide(int wide) {
    json_t *root = base();
    json_t *cols = json_array();
    json_t *keys = json_array();
    ck_assert_ptr_nonnull(cols);
    ck_assert_ptr_nonnull(keys);
    for (int i = 0; i < wide; i++) {
        char name[32], ptr[32];
        snprintf(name, sizeof name, "c%d", i == wide - 1 ? 0 : i);
        snprintf(ptr, sizeof ptr, "/c%d", i);
        ck_assert_int_eq(json_array_append_new(
                             cols, json_pack("{s:s,s:s,s:s}", "name", name,
                                             "pointer", ptr, "type", "int")),
                         0);
        if (i % 2 == 1 && i < wide - 1)
            ck_assert_int_eq(json_array_append_new(keys, json_string(name)), 0);
    }
    ck_assert_int_eq(json_array_append_new(keys, json_string("c-1")), 0);
    json_object_set_new(json_object_get(root, "mapping"), "columns", cols);
    json_object_set_new(root, "dedup", json_pack("{s:o}", "key", keys));
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    ck_assert_ptr_nonnull(text);

    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    double t0 = now_s();
    tm_connector_config *cfg = tm_config_load_string(text, "t.json", &errs);
    double took = now_s() - t0;
    free(text);
    ck_assert_ptr_null(cfg);
    char line[256];
    snprintf(line, sizeof line,
             "$.mapping.columns[%d].name: expected a unique column name, "
             "found string \"c0\" (also $.mapping.columns[0])",
             wide - 1);
    ck_assert_line(&errs, line);
    snprintf(line, sizeof line,
             "$.dedup.key[%d]: expected a column of $.mapping.columns, found "
             "string \"c-1\" (did you mean \"c1\"?)",
             wide / 2 - 1);
    ck_assert_line(&errs, line);
    ck_assert_uint_eq(errs.count, 2);
    tm_config_errors_free(&errs);
    return took;
}

static double best_of_three(int wide) {
    double best = load_wide(wide);
    for (int i = 0; i < 2; i++) {
        double t = load_wide(wide);
        if (t < best)
            best = t;
    }
    return best;
}

START_TEST(validate_quadratic_in_columns) {
    double small = best_of_three(WIDE / 4), large = best_of_three(WIDE);
    double ratio = large / (small > 1e-3 ? small : 1e-3);
    ck_assert_msg(ratio < 10.0,
                  "%d columns took %.3f s, %d took %.3f s: %.1f times as "
                  "long for 4 times the columns (quadratic is about 16)",
                  WIDE / 4, small, WIDE, large, ratio);
}
END_TEST

/* The bounds of names are inclusive (200 bytes for a connector, Kafka's
 * 249 for a topic), and a dead-letter topic is refused exactly when the
 * connector reads it: in the topics, or matched anywhere by the regex (as
 * the consumer subscribes), not otherwise. */
START_TEST(names_topics_and_dead_letters_bounds) {
    char name[203], topic[253], json[300];
    memset(name, 'n', 200);
    name[200] = '\0';
    memset(topic, 't', 249);
    topic[249] = '\0';
    json_t *root = base();
    snprintf(json, sizeof json, "\"%s\"", name);
    set(root, "name", NULL, json);
    snprintf(json, sizeof json, "[\"%s\", \"a.b_c-D9\"]", topic);
    set(root, "kafka", "topics", json);
    set(root, "dead_letters", NULL,
        "{\"sink\": false, \"topic\": \"a.b_c-D\"}");
    tm_connector_config *cfg = expect_ok(root);
    ck_assert_uint_eq(strlen(cfg->name), 200);
    ck_assert_str_eq(cfg->kafka.group_id + strlen("tidemark-"), name);
    tm_config_free(cfg);

    root = base();
    strcat(name, "n");
    snprintf(json, sizeof json, "\"%s\"", name);
    set(root, "name", NULL, json);
    expect_one(root, "$.name: expected a name of at most 200 bytes, found "
                     "201 bytes");

    root = base();
    set(root, "kafka", "topics", NULL);
    set(root, "kafka", "topic_regex", "\"rx_[a-z]+$\"");
    set(root, "dead_letters", NULL, "{\"topic\": \"rx_dl9\"}");
    tm_connector_config *ok = expect_ok(root); /* "9" is not [a-z] */
    tm_config_free(ok);

    root = base();
    set(root, "kafka", "topics", NULL);
    set(root, "kafka", "topic_regex", "\"rx_[a-z]+$\"");
    set(root, "dead_letters", NULL, "{\"topic\": \"t_rx_dl\"}");
    expect_one(root, "$.dead_letters.topic: expected a topic the connector "
                     "does not read, found string \"t_rx_dl\" (matched by "
                     "$.kafka.topic_regex: each dead letter would be read "
                     "back and fail again, for ever)");

    /* "sink": false with a topic is fine; an invalid topic is reported
     * alone, not also as "nowhere". */
    root = base();
    set(root, "dead_letters", NULL, "{\"sink\": false, \"topic\": \"\"}");
    expect_one(root, "$.dead_letters.topic: expected a non-empty string, "
                     "found string \"\"");
}
END_TEST

/* jansson's words ("too big integer", "JSON_ALLOW_NUL", a BOM shown as
 * itself) were passed on at "$"; they are said plainly at the path of the
 * value being read, whatever came before it. */
START_TEST(syntax_errors_in_plain_words) {
    static const struct {
        const char *text, *line;
    } CASES[] = {
        {"{\"a\": [1, {\"x\": \"]\\\"\", \"b\": 1e400}]}",
         "$.a[1].b: expected a number within the range of a double, found "
         "1e400 (line 1, column 33)"},
        {"{\"a\": {}, \"k\\\"q\": [[], [-99999999999999999999]]}",
         "$[\"k\\\"q\"][1][0]: expected an integer from -9223372036854775808 "
         "to 9223372036854775807, found -99999999999999999999 (line 1, column "
         "45)"},
        {"{\"k\\u0000\": 1}",
         "$[\"k\\u0000\"]: expected a key without \\u0000 (a NUL character), "
         "found one (line 1, column 10)"},
        {"[\"\\u0000\"]", "$[0]: expected a string without \\u0000 (a NUL "
                          "character), found one (line 1, column 9)"},
        {"{\"a\" 1}", "$: expected JSON, found a syntax error at line 1, "
                      "column 6: ':' expected near '1'"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
        ck_assert_ptr_null(tm_config_load_string(CASES[i].text, "x", &errs));
        ck_assert_uint_eq(errs.count, 1);
        ck_assert_str_eq(errs.lines[0], CASES[i].line);
        tm_config_errors_free(&errs);
    }
}
END_TEST

START_TEST(type_names) {
    ck_assert_str_eq(tm_type_name(TM_TYPE_TIMESTAMP), "timestamp");
    ck_assert_str_eq(tm_type_name(TM_TYPE_BYTES), "bytes");
    ck_assert_ptr_null(tm_type_name((tm_type)99));
}
END_TEST

/* ---- the attacker review's findings ---- */

#define N_KEYS(a) (sizeof(a) / sizeof((a)[0]))

/* Appends key=value to cfg's properties as if the loader had let it
 * through (the loader refuses these keys now: this checks the read-back
 * behind it). */
static void inject_property(tm_connector_config *cfg, const char *key,
                            const char *value) {
    tm_config_property *p = realloc(cfg->kafka.properties,
                                    (cfg->kafka.nproperties + 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    cfg->kafka.properties = p;
    p[cfg->kafka.nproperties].key = strdup(key);
    p[cfg->kafka.nproperties].value = strdup(value);
    ck_assert_ptr_nonnull(p[cfg->kafka.nproperties].key);
    ck_assert_ptr_nonnull(p[cfg->kafka.nproperties].value);
    cfg->kafka.nproperties++;
}

static void collect_line(void *ctx, const char *line) {
    tm_config_errors *errs = ctx;
    char *copy = strdup(line);
    ck_assert_ptr_nonnull(copy);
    errs->lines = realloc(errs->lines, (errs->count + 1) * sizeof *errs->lines);
    ck_assert_ptr_nonnull(errs->lines);
    errs->lines[errs->count++] = copy;
}

/* F1: acks=0 and no idempotence on the dead-letter producer lost dead
 * letters; the loader refuses the keys, and the built conf is read back. */
START_TEST(dead_letter_producer_acks_reserved_and_read_back) {
    static const char *const keys[] = {"acks", "request.required.acks",
                                       "enable.idempotence", "transactional.id",
                                       "auto.commit.enable"};
    for (size_t i = 0; i < N_KEYS(keys); i++) {
        json_t *root = base();
        json_t *props = json_object();
        json_object_set_new(props, keys[i], json_string("0"));
        json_object_set_new(json_object_get(root, "kafka"), "properties",
                            props);
        tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
        ck_assert_ptr_null(load(root, &errs));
        ck_assert_uint_eq(errs.count, 1);
        ck_assert_msg(strstr(errs.lines[0], ": reserved: tidemark sets \"") !=
                          NULL,
                      "got: %s", errs.lines[0]);
        tm_config_errors_free(&errs);
    }
    json_t *root = base();
    set(root, "dead_letters", NULL, "{\"topic\": \"orders.dlq\"}");
    tm_connector_config *cfg = expect_ok(root);
    tm_config_errors got = TM_CONFIG_ERRORS_INIT;
    ck_assert_uint_eq(tm_kafka_conf_check(cfg, collect_line, &got), 0);
    inject_property(cfg, "enable.idempotence", "false");
    inject_property(cfg, "acks", "0");
    ck_assert_uint_eq(tm_kafka_conf_check(cfg, collect_line, &got), 1);
    ck_assert_line(&got,
                   "$.kafka.properties: the dead-letter producer's "
                   "enable.idempotence is false, expected true (a dead letter "
                   "could be lost or written twice)");
    tm_config_errors_free(&got);
    tm_config_free(cfg);
}
END_TEST

/* F2: the loop check matched the config's regex, the consumer subscribes
 * with "^.*(REGEX)", whose groups are renumbered. */
START_TEST(dead_letter_loop_checked_against_subscribed_pattern) {
    char *p = tm_config_subscription_pattern("(a)(b)\\2");
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(p, "^.*((a)(b)\\2)");
    free(p);
    p = tm_config_subscription_pattern("^orders");
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(p, "^orders");
    free(p);

    json_t *root = base();
    set(root, "kafka", "topics", NULL);
    set(root, "kafka", "topic_regex", "\"(a)(b)\\\\2\"");
    set(root, "dead_letters", NULL, "{\"topic\": \"t_abb\"}");
    tm_connector_config *cfg = expect_ok(root); /* \2 is (a) once wrapped */
    char why[64];
    ck_assert_int_eq(tm_config_reads_topic(cfg, "t_aba", why, sizeof why), 1);
    ck_assert_str_eq(why, "matched by $.kafka.topic_regex");
    ck_assert_int_eq(tm_config_reads_topic(cfg, "t_abb", why, sizeof why), 0);
    tm_config_free(cfg);

    root = base();
    set(root, "kafka", "topics", NULL);
    set(root, "kafka", "topic_regex", "\"(a)(b)\\\\2\"");
    set(root, "dead_letters", NULL, "{\"topic\": \"t_aba\"}");
    expect_one(root, "$.dead_letters.topic: expected a topic the connector "
                     "does not read, found string \"t_aba\" (matched by "
                     "$.kafka.topic_regex: each dead letter would be read "
                     "back and fail again, for ever)");
}
END_TEST

static tm_connector_config *named(const char *name, const char *topic,
                                  const char *dl, const char *group) {
    char text[1024];
    snprintf(text, sizeof text,
             "{\"name\":\"%s\",\"kafka\":{\"bootstrap_servers\":\"k:9092\","
             "\"topics\":[\"%s\"]%s%s%s},\"sink\":{\"plugin\":\"sqlite\"},"
             "\"mapping\":{\"mode\":\"raw\"},\"dead_letters\":{\"topic\":"
             "\"%s\"}}",
             name, topic, group ? ",\"group_id\":\"" : "", group ? group : "",
             group ? "\"" : "", dl);
    char file[64];
    snprintf(file, sizeof file, "%s.json", name);
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    tm_connector_config *cfg = tm_config_load_string(text, file, &errs);
    for (size_t i = 0; i < errs.count; i++)
        fprintf(stderr, "  unexpected: %s\n", errs.lines[i]);
    ck_assert_ptr_nonnull(cfg);
    return cfg;
}

struct cross_lines {
    size_t at[8];
    tm_config_errors errs;
};

static void collect_cross(void *ctx, size_t i, const char *line) {
    struct cross_lines *c = ctx;
    ck_assert_uint_lt(c->errs.count, 8);
    c->at[c->errs.count] = i;
    collect_line(&c->errs, line);
}

/* F3: A's dead letters read by B, B's by A (or round three connectors):
 * each file alone is valid, together they loop for ever. A chain is not a
 * loop. Suspected: a shared consumer group. */
START_TEST(cross_config_dead_letter_cycles_and_groups) {
    tm_connector_config *c[4];
    c[0] = named("a", "ta", "tb", NULL);
    c[1] = named("b", "tb", "tc", NULL);
    c[2] = named("c", "tc", "ta", NULL);
    c[3] = named("d", "td", "td.dlq", NULL);
    struct cross_lines got = {{0}, TM_CONFIG_ERRORS_INIT};
    const tm_connector_config *const *cc = (const tm_connector_config **)c;
    /* a -> b -> c -> a: one line for each of the three. */
    ck_assert_uint_eq(tm_config_cross_check(cc, 4, collect_cross, &got), 3);
    ck_assert_str_eq(got.errs.lines[0],
                     "$.dead_letters.topic: expected a topic that does not "
                     "lead back to this connector, found \"tb\" (dead letters "
                     "would go round \"a\" (a.json) -> \"b\" (b.json) -> \"c\" "
                     "(c.json) -> \"a\", for ever)");
    ck_assert_uint_eq(got.at[0], 0);
    ck_assert_uint_eq(got.at[1], 1);
    ck_assert_uint_eq(got.at[2], 2);
    tm_config_errors_free(&got.errs);
    /* Without c, a -> b is a chain: accepted. */
    ck_assert_uint_eq(tm_config_cross_check(cc, 2, collect_cross, &got), 0);
    tm_config_free(c[2]);
    tm_config_free(c[3]);
    /* d in a's default group (tidemark-a). */
    c[2] = named("d", "td", "td.dlq", "tidemark-a");
    ck_assert_uint_eq(tm_config_cross_check(cc, 3, collect_cross, &got), 1);
    ck_assert_uint_eq(got.at[0], 2);
    ck_assert_str_eq(got.errs.lines[0],
                     "$.kafka.group_id: expected a consumer group no other "
                     "connector of the process uses, found \"tidemark-a\" "
                     "(also the group of connector \"a\" (a.json): the two "
                     "would split the partitions between them)");
    tm_config_errors_free(&got.errs);
    for (size_t i = 0; i < 3; i++)
        tm_config_free(c[i]);
}
END_TEST

/* F6: jansson running out of memory was "a syntax error at line -1". */
static size_t allocs_left;
static void *failing_malloc(size_t n) {
    if (allocs_left == 0)
        return NULL;
    allocs_left--;
    return malloc(n);
}

START_TEST(parser_out_of_memory_is_not_a_syntax_error) {
    json_malloc_t m0;
    json_free_t f0;
    json_get_alloc_funcs(&m0, &f0);
    int seen = 0;
    /* Fail jansson's k-th allocation, for each k until the parse
     * succeeds: every failure must read "out of memory". */
    for (size_t k = 0; k < 200; k++) {
        allocs_left = k;
        json_set_alloc_funcs(failing_malloc, free);
        tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
        tm_connector_config *cfg =
            tm_config_load_string("[{}, {}, {}, {}]", "t.json", &errs);
        json_set_alloc_funcs(m0, f0);
        ck_assert_ptr_null(cfg); /* an array is not a connector */
        if (errs.oom) {
            seen = 1;
            ck_assert_msg(errs.count == 0, "k=%zu: got %s", k, errs.lines[0]);
        } else {
            ck_assert_uint_eq(errs.count, 1);
            ck_assert_str_eq(errs.lines[0],
                             "$: expected an object (one connector), found "
                             "array");
            tm_config_errors_free(&errs);
            break;
        }
        tm_config_errors_free(&errs);
    }
    ck_assert_msg(seen, "inconclusive: no allocation failure was injected");
}
END_TEST

START_TEST(config_file_cap) {
    char path[] = "/tmp/tm-test-cap-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "wb");
    ck_assert_ptr_nonnull(f);
    static char chunk[65536];
    memset(chunk, ' ', sizeof chunk);
    for (size_t i = 0; i < 4 * 1024 * 1024 / sizeof chunk; i++)
        ck_assert_uint_eq(fwrite(chunk, 1, sizeof chunk, f), sizeof chunk);
    ck_assert_int_eq(fputc(' ', f), ' ');
    ck_assert_int_eq(fclose(f), 0);
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    ck_assert_ptr_null(tm_config_load(path, &errs));
    unlink(path);
    ck_assert_line(&errs, "$: cannot read the file: larger than 4194304 bytes");
    tm_config_errors_free(&errs);
}
END_TEST

/* F7: a state directory run cannot create, and Kafka's internal topics. */
START_TEST(state_dir_and_internal_dead_letter_topic) {
    char dir[] = "/tmp/tm-test-state-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char json[256], missing[128];
    snprintf(missing, sizeof missing, "%s/a/b", dir);
    snprintf(json, sizeof json, "\"%s\"", missing);
    json_t *root = base();
    set(root, "state_dir", NULL, json);
    tm_config_free(expect_ok(root));
    struct stat st;
    ck_assert_msg(stat(missing, &st) != 0, "validate created %s", missing);
    char sub[128];
    snprintf(sub, sizeof sub, "%s/a", dir);
    ck_assert_msg(stat(sub, &st) != 0, "the check left %s behind", sub);
    ck_assert_int_eq(rmdir(dir), 0); /* empty: no probe left either */

    root = base();
    set(root, "state_dir", NULL, "\"/proc/tm-test-state/x\"");
    expect_one(root, "$.state_dir: expected a directory tidemark can create "
                     "or write, found string \"/proc/tm-test-state/x\" "
                     "(cannot create a directory in /proc: No such file or "
                     "directory)");
    root = base();
    set(root, "state_dir", NULL, "\"/dev/null/x\"");
    expect_one(root, "$.state_dir: expected a directory tidemark can create "
                     "or write, found string \"/dev/null/x\" (/dev/null is "
                     "not a directory)");
    root = base();
    set(root, "dead_letters", NULL, "{\"topic\": \"__transaction_state\"}");
    expect_one(root, "$.dead_letters.topic: expected a topic that is not one "
                     "of Kafka's internal ones (starting with \"__\"), found "
                     "string \"__transaction_state\"");
}
END_TEST

START_TEST(code_loading_properties_refused) {
    static const char *const keys[] = {"plugin.library.paths",
                                       "ssl.engine.location",
                                       "sasl.kerberos.kinit.cmd"};
    for (size_t i = 0; i < N_KEYS(keys); i++) {
        json_t *root = base();
        json_t *props = json_object();
        json_object_set_new(props, keys[i], json_string("/tmp/x"));
        json_object_set_new(json_object_get(root, "kafka"), "properties",
                            props);
        tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
        ck_assert_ptr_null(load(root, &errs));
        ck_assert_uint_eq(errs.count, 1);
        char prefix[256];
        snprintf(prefix, sizeof prefix,
                 "$.kafka.properties[\"%s\"]: not allowed: librdkafka would ",
                 keys[i]);
        ck_assert_msg(strncmp(errs.lines[0], prefix, strlen(prefix)) == 0,
                      "got: %s", errs.lines[0]);
        tm_config_errors_free(&errs);
    }
}
END_TEST

/* F8: a key with a quote or an escape was spelled two ways: raw JSON
 * escapes in syntax-error paths, unescaped (ambiguous) in the others. */
START_TEST(json_path_keys_spelled_once) {
    char out[256];
    tm_json_path_key(out, sizeof out, "$", "ka\"fka");
    ck_assert_str_eq(out, "$[\"ka\\\"fka\"]");
    tm_json_path_key(out, sizeof out, "$", "a\\b\tc");
    ck_assert_str_eq(out, "$[\"a\\\\b\\u0009c\"]");
    const char *text = "{\"k\\u0041y\": {\"ka\\\"fka\": [1, ";
    tm_json_path_at(text, strlen(text), out, sizeof out);
    ck_assert_str_eq(out, "$.kAy[\"ka\\\"fka\"][1]");

    /* The same key, both ways, spelled the same. */
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    ck_assert_ptr_null(
        tm_config_load_string("{\"ka\\\"fka\": 1e400}", "t.json", &errs));
    ck_assert_uint_eq(errs.count, 1);
    ck_assert_msg(strncmp(errs.lines[0], "$[\"ka\\\"fka\"]: ", 13) == 0,
                  "got: %s", errs.lines[0]);
    tm_config_errors_free(&errs);
    json_t *root = base();
    set(root, "ka\"fka", NULL, "1");
    expect_one(root,
               "$[\"ka\\\"fka\"]: unknown setting (did you mean \"kafka\"?)");
}
END_TEST

int main(void) {
    Suite *s = suite_create("connector_config");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, defaults);
    tcase_add_test(tc, raw_mode_columns);
    tcase_add_test(tc, json_mapping_full);
    tcase_add_test(tc, unknown_keys_did_you_mean);
    tcase_add_test(tc, wrong_types);
    tcase_add_test(tc, missing_required);
    tcase_add_test(tc, all_errors_collected);
    tcase_add_test(tc, topics_xor_regex);
    tcase_add_test(tc, bad_pointer);
    tcase_add_test(tc, bad_filter);
    tcase_add_test(tc, dedup_key_not_a_column);
    tcase_add_test(tc, reserved_properties);
    tcase_add_test(tc, interpolation_env);
    tcase_add_test(tc, interpolation_file);
    tcase_add_test(tc, redaction);
    tcase_add_test(tc, syntax_and_files);
    tcase_add_test(tc, type_names);
    tcase_add_test(tc, syntax_errors_in_plain_words);
    tcase_add_test(tc, names_topics_and_dead_letters_bounds);
    tcase_add_test(tc, dead_letter_producer_acks_reserved_and_read_back);
    tcase_add_test(tc, dead_letter_loop_checked_against_subscribed_pattern);
    tcase_add_test(tc, cross_config_dead_letter_cycles_and_groups);
    tcase_add_test(tc, parser_out_of_memory_is_not_a_syntax_error);
    tcase_add_test(tc, config_file_cap);
    tcase_add_test(tc, state_dir_and_internal_dead_letter_topic);
    tcase_add_test(tc, code_loading_properties_refused);
    tcase_add_test(tc, json_path_keys_spelled_once);
    suite_add_tcase(s, tc);
    TCase *wide = tcase_create("wide");
    tcase_set_timeout(wide, 120); /* so that slowness fails the assertion */
    tcase_add_test(wide, validate_quadratic_in_columns);
    suite_add_tcase(s, wide);
    return tm_check_run(s, 1);
}
