/* The connector config: load, the top-level sections (kafka, batch, sink,
 * dead_letters, state_dir), free, and the plugin's view of it. Mapping and
 * dedup are in mapping.c, interpolation in interpolate.c, typed getters in
 * config_getters.c, error lines in config_errors.c: this file only decides
 * what the remaining sections accept. */
#include "config/connector_config.h"

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"
#include "config/interpolate.h"
#include "config/json_path.h"

/* A connector's name becomes marker keys in the sink, file and directory
 * names under the state directory and the default group id: a bounded
 * word of a safe alphabet, never a path component of its own. */
#define NAME_MAX_BYTES 200
/* Kafka's own rule for topic names (clients and brokers refuse others). */
#define TOPIC_MAX_BYTES 249
#define TOPIC_EXPECTED                                                         \
    "a Kafka topic name (1 to 249 letters, digits, '.', '_' or '-'; not "      \
    "\".\" or \"..\")"

static int word_ok(const char *s) {
    if (!*s)
        return 0;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static int dots_only(const char *s) {
    return strcmp(s, ".") == 0 || strcmp(s, "..") == 0;
}

static int topic_ok(const char *s) {
    return word_ok(s) && !dots_only(s) && strlen(s) <= TOPIC_MAX_BYTES;
}

static void load_name(loader *L, json_t *root) {
    static const char *const EXPECTED =
        "a name of letters, digits, '.', '_' or '-'";
    json_t *name = NULL;
    if (cfg_get_typed(L, root, "$", "name", 1, JSON_STRING, EXPECTED, &name) !=
        1)
        return;
    const char *s = json_string_value(name);
    size_t len = strlen(s);
    if (!word_ok(s))
        cfg_fail_type(L, "$.name", EXPECTED, name);
    else if (dots_only(s))
        cfg_fail_type(L, "$.name", "a name other than \".\" or \"..\"", name);
    else if (len > NAME_MAX_BYTES)
        cfg_fail(L, "$.name",
                 "expected a name of at most %d bytes, found %zu bytes",
                 NAME_MAX_BYTES, len);
    else
        L->cfg->name = cfg_xstrdup(L, s);
}

/* librdkafka properties tidemark sets itself, and why. */
static const struct {
    const char *key, *why;
} RESERVED[] = {
    {"enable.auto.commit",
     "offsets are committed to the group by tidemark, only after the sink's "
     "commit"},
    {"enable.auto.offset.store",
     "offsets are stored by tidemark, only after the sink's commit"},
    {"auto.offset.reset",
     "the start position comes from the sink's markers (set $.kafka.start "
     "for partitions without one)"},
    {"group.id", "set $.kafka.group_id instead"},
    {"bootstrap.servers", "set $.kafka.bootstrap_servers instead"},
    {"metadata.broker.list",
     "an alias of bootstrap.servers: set $.kafka.bootstrap_servers instead"},
    {"enable.partition.eof",
     "tidemark needs partition-end events to move markers past transaction "
     "markers"},
    {"isolation.level",
     "tidemark reads committed records only (read_committed)"},
    {"auto.commit.enable",
     "an alias of enable.auto.commit: offsets are committed to the group by "
     "tidemark, only after the sink's commit"},
    /* The dead-letter producer's: $.kafka.properties reach every client,
     * and acks=0 there lost dead letters without a trace. */
    {"acks", "the dead-letter producer waits for every in-sync replica "
             "(acks=all): with less a dead letter can be lost"},
    {"request.required.acks", "an alias of acks: the dead-letter producer "
                              "waits for every in-sync replica (acks=all)"},
    {"enable.idempotence", "the dead-letter producer is idempotent: a retry "
                           "never writes a dead letter twice"},
    {"transactional.id", "the dead-letter producer is not transactional: "
                         "with a transactional.id it delivers nothing"},
};

/* Properties that make librdkafka load or run code of the file or command
 * they name: every command that reads a config builds its librdkafka
 * configuration (validate too), so a config could run anything. */
static const struct {
    const char *key, *what;
} UNSAFE[] = {
    {"plugin.library.paths", "load and run the libraries it names"},
    {"ssl.engine.location", "load and run the OpenSSL engine it names"},
    {"sasl.kerberos.kinit.cmd", "run it as a shell command"},
};

static void load_kafka(loader *L, json_t *root) {
    static const char *const KNOWN[] = {
        "bootstrap_servers", "topics", "topic_regex",
        "group_id",          "start",  "properties",
        "static_membership"};
    static const char *const STARTS[] = {"earliest", "latest"};
    const char *P = "$.kafka";
    tm_connector_config *c = L->cfg;
    json_t *k = NULL;
    c->kafka.static_membership = 1;
    if (cfg_get_object(L, root, "$", "kafka", 1, &k) != 1)
        return;
    cfg_check_keys(L, k, P, KNOWN, N(KNOWN));
    cfg_get_string(L, k, P, "bootstrap_servers", 1,
                   &c->kafka.bootstrap_servers);

    json_t *topics = NULL;
    int has_topics = cfg_get_typed(L, k, P, "topics", 0, JSON_ARRAY,
                                   "an array of topic names", &topics);
    int has_regex =
        cfg_get_string(L, k, P, "topic_regex", 0, &c->kafka.topic_regex);
    if (has_topics == 1) {
        size_t i;
        json_t *t;
        if (json_array_size(topics) == 0)
            cfg_fail_type(L, "$.kafka.topics", "an array of topic names",
                          topics);
        json_array_foreach(topics, i, t) {
            char path[PATH_MAX_LEN];
            tm_json_path_index(path, sizeof path, "$.kafka.topics", i);
            if (!json_is_string(t) || !*json_string_value(t)) {
                cfg_fail_type(L, path, "a topic name (non-empty string)", t);
                continue;
            }
            const char *s = json_string_value(t);
            if (!topic_ok(s)) {
                cfg_fail_type(L, path, TOPIC_EXPECTED, t);
                continue;
            }
            if (cfg_str_push(&c->kafka.topics, &c->kafka.ntopics, s, strlen(s)))
                cfg_fail(L, path, "out of memory");
        }
    }
    if (has_regex == 1) {
        /* Compiled as the consumer subscribes with it, as librdkafka does. */
        char *pattern = tm_config_subscription_pattern(c->kafka.topic_regex);
        regex_t re;
        int rc = pattern ? regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) : 0;
        free(pattern);
        if (!pattern) {
            cfg_fail(L, "$.kafka.topic_regex", "out of memory");
        } else if (rc != 0) {
            char why[128];
            regerror(rc, &re, why, sizeof why);
            cfg_fail(L, "$.kafka.topic_regex",
                     "expected a regular expression (POSIX extended), found "
                     "string \"%s\" (%s)",
                     c->kafka.topic_regex, why);
        } else {
            regfree(&re);
        }
    }
    if (has_topics != 0 && has_regex != 0)
        cfg_fail(L, P,
                 "expected exactly one of \"topics\" or \"topic_regex\", found "
                 "both");
    else if (has_topics == 0 && has_regex == 0)
        cfg_fail(L, P,
                 "expected exactly one of \"topics\" or \"topic_regex\", found "
                 "neither");

    cfg_get_string(L, k, P, "group_id", 0, &c->kafka.group_id);
    size_t start = 0;
    if (cfg_get_enum(L, k, P, "start", 0, STARTS, N(STARTS), &start) == 1)
        c->kafka.start = start == 0 ? TM_START_EARLIEST : TM_START_LATEST;

    int static_rc =
        cfg_get_bool(L, k, P, "static_membership", &c->kafka.static_membership);
    json_t *props = NULL;
    if (cfg_get_object(L, k, P, "properties", 0, &props) != 1)
        return;
    /* Opting out and naming a member id at once: one of them is a mistake,
     * and which one the user meant cannot be told. */
    if (static_rc == 1 && !c->kafka.static_membership &&
        json_object_get(props, "group.instance.id"))
        cfg_fail(L, "$.kafka.static_membership",
                 "expected true or no \"static_membership\" when "
                 "$.kafka.properties[\"group.instance.id\"] is set, found "
                 "false (a member id makes the member static: remove one of "
                 "the two)");
    const char *key;
    json_t *v;
    json_object_foreach(props, key, v) {
        char path[PATH_MAX_LEN];
        tm_json_path_key(path, sizeof path, "$.kafka.properties", key);
        size_t r;
        for (r = 0; r < N(RESERVED); r++)
            if (strcmp(RESERVED[r].key, key) == 0)
                break;
        if (r < N(RESERVED)) {
            cfg_fail(L, path, "reserved: tidemark sets \"%s\" itself (%s)", key,
                     RESERVED[r].why);
            continue;
        }
        for (r = 0; r < N(UNSAFE); r++)
            if (strcmp(UNSAFE[r].key, key) == 0)
                break;
        if (r < N(UNSAFE)) {
            cfg_fail(L, path,
                     "not allowed: librdkafka would %s, in every command that "
                     "reads the config (validate included)",
                     UNSAFE[r].what);
            continue;
        }
        if (!json_is_string(v)) {
            cfg_fail_type(L, path, "a string (librdkafka takes string values)",
                          v);
            continue;
        }
        tm_config_property *np = realloc(
            c->kafka.properties, (c->kafka.nproperties + 1) * sizeof *np);
        if (!np) {
            cfg_fail(L, path, "out of memory");
            return;
        }
        c->kafka.properties = np;
        tm_config_property *pr = &np[c->kafka.nproperties];
        pr->key = strdup(key);
        pr->value = strdup(json_string_value(v));
        c->kafka.nproperties++;
        if (!pr->key || !pr->value)
            cfg_fail(L, path, "out of memory");
    }
}

static void load_batch(loader *L, json_t *root) {
    static const char *const KNOWN[] = {"max_records", "max_bytes",
                                        "max_wait_ms", "commit_timeout_ms"};
    json_t *b = NULL;
    if (cfg_get_object(L, root, "$", "batch", 0, &b) != 1)
        return;
    cfg_check_keys(L, b, "$.batch", KNOWN, N(KNOWN));
    /* Upper bounds keep the arithmetic on them (queue sizes, deadlines)
     * far from overflow; none is near a sensible setting. */
    cfg_get_positive(L, b, "$.batch", "max_records", 1000000,
                     &L->cfg->batch.max_records);
    cfg_get_positive(L, b, "$.batch", "max_bytes", 1073741824,
                     &L->cfg->batch.max_bytes);
    cfg_get_positive(L, b, "$.batch", "max_wait_ms", 3600000,
                     &L->cfg->batch.max_wait_ms);
    /* At most 4 minutes: the consumer is not polled during a commit, and
     * librdkafka's default max.poll.interval.ms (5 minutes) would take the
     * member out of the group first. */
    cfg_get_positive(L, b, "$.batch", "commit_timeout_ms", 240000,
                     &L->cfg->batch.commit_timeout_ms);
}

static void load_sink(loader *L, json_t *root) {
    static const char *const KNOWN[] = {"plugin", "settings"};
    json_t *s = NULL, *set = NULL;
    if (cfg_get_object(L, root, "$", "sink", 1, &s) != 1)
        return;
    cfg_check_keys(L, s, "$.sink", KNOWN, N(KNOWN));
    cfg_get_string(L, s, "$.sink", "plugin", 1, &L->cfg->sink.plugin);
    if (cfg_get_object(L, s, "$.sink", "settings", 0, &set) == 1) {
        json_decref(L->cfg->sink.settings);
        L->cfg->sink.settings = json_incref(set);
    }
}

static void load_dead_letters(loader *L, json_t *root) {
    static const char *const KNOWN[] = {"sink", "topic", "delivery_timeout_ms"};
    const char *P = "$.dead_letters";
    tm_connector_config *c = L->cfg;
    json_t *d = NULL;
    if (cfg_get_object(L, root, "$", "dead_letters", 0, &d) != 1)
        return;
    cfg_check_keys(L, d, P, KNOWN, N(KNOWN));
    int sink_rc = cfg_get_bool(L, d, P, "sink", &c->dead_letters.sink);
    json_t *t = json_object_get(d, "topic");
    int topic_rc = cfg_get_string(L, d, P, "topic", 0, &c->dead_letters.topic);
    if (topic_rc == 1) {
        char why[64];
        int reads = 0;
        if (!topic_ok(c->dead_letters.topic))
            cfg_fail_type(L, "$.dead_letters.topic", TOPIC_EXPECTED, t);
        else if (strncmp(c->dead_letters.topic, "__", 2) == 0)
            /* Kafka's own (__consumer_offsets, __transaction_state): the
             * producer would be refused on every batch. */
            cfg_fail_type(L, "$.dead_letters.topic",
                          "a topic that is not one of Kafka's internal ones "
                          "(starting with \"__\")",
                          t);
        else if ((reads = tm_config_reads_topic(c, c->dead_letters.topic, why,
                                                sizeof why)) < 0)
            cfg_fail(L, "$.dead_letters.topic", "out of memory");
        else if (reads) {
            char f[FOUND_MAX_LEN + 64];
            cfg_fail(L, "$.dead_letters.topic",
                     "expected a topic the connector does not read, found %s "
                     "(%s: each dead letter would be read back and fail "
                     "again, for ever)",
                     cfg_found(L, t, f, sizeof f), why);
        }
    }
    /* One attempt's wait for the topic's confirmations. At most 4 minutes,
     * as $.batch.commit_timeout_ms: the consumer is not polled during it. */
    cfg_get_positive(L, d, P, "delivery_timeout_ms", 240000,
                     &c->dead_letters.delivery_timeout_ms);
    /* Without a topic it bounds nothing: said, not silently ignored. */
    if (topic_rc == 0 && d && json_object_get(d, "delivery_timeout_ms"))
        cfg_fail(L, "$.dead_letters.delivery_timeout_ms",
                 "expected it only with \"topic\" (it bounds the delivery to "
                 "the topic), found no topic");
    /* Neither the sink nor a topic: every dead letter would be dropped,
     * uncounted, and its offset committed as if it had been kept. */
    if (sink_rc == 1 && !c->dead_letters.sink && topic_rc == 0)
        cfg_fail(L, P,
                 "expected \"sink\": true or a \"topic\" (dead letters must "
                 "go somewhere), found \"sink\": false and no topic");
}

static void load_root(loader *L, json_t *root) {
    static const char *const KNOWN[] = {"name",         "kafka",    "batch",
                                        "sink",         "mapping",  "dedup",
                                        "dead_letters", "state_dir"};
    tm_connector_config *c = L->cfg;
    cfg_check_keys(L, root, "$", KNOWN, N(KNOWN));
    load_name(L, root);
    load_kafka(L, root);
    load_batch(L, root);
    load_sink(L, root);
    cfg_load_mapping(L, root);
    cfg_load_dedup(L, root);
    load_dead_letters(L, root);
    if (cfg_get_string(L, root, "$", "state_dir", 0, &c->state_dir) == 1)
        cfg_check_state_dir(L, json_object_get(root, "state_dir"));

    if (!c->kafka.group_id && c->name) {
        size_t n = strlen("tidemark-") + strlen(c->name) + 1;
        if ((c->kafka.group_id = malloc(n)))
            snprintf(c->kafka.group_id, n, "tidemark-%s", c->name);
        else
            cfg_fail(L, "$.kafka.group_id", "out of memory");
    }
    if (!c->sink.settings && !(c->sink.settings = json_object()))
        cfg_fail(L, "$.sink.settings", "out of memory");
}

/* ---- entry points ------------------------------------------------------- */

static tm_connector_config *config_new(const char *file) {
    tm_connector_config *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->file = file ? strdup(file) : NULL;
    c->batch.max_records = 10000;
    c->batch.max_bytes = 16 * 1024 * 1024;
    c->batch.max_wait_ms = 500;
    c->batch.commit_timeout_ms = 60000;
    c->kafka.start = TM_START_EARLIEST;
    c->dead_letters.sink = 1;
    c->dead_letters.delivery_timeout_ms = TM_DLQ_DELIVERY_TIMEOUT_MS;
    if (file && !c->file) {
        free(c);
        return NULL;
    }
    return c;
}

static tm_connector_config *load_json(json_t *root, const char *file,
                                      tm_config_errors *errs) {
    tm_connector_config *c = config_new(file);
    if (!c) {
        cfg_errs_push(errs, "$: out of memory");
        json_decref(root);
        return NULL;
    }
    loader L = {c, errs, 0, NULL};
    if (!json_is_object(root)) {
        cfg_fail_type(&L, "$", "an object (one connector)", root);
    } else {
        cfg_interpolate_tree(&L, root, "$");
        load_root(&L, root);
    }
    json_decref(L.column_index);
    if (L.failed) {
        json_decref(root);
        tm_config_free(c);
        return NULL;
    }
    c->resolved = root; /* kept for reload_plan.h */
    return c;
}

/* A config file is read whole, so that a syntax error can be placed in
 * the text; past this size it is not a config. jansson builds the whole
 * tree, about 80 bytes per empty object: 256 MiB of "{}," took gigabytes,
 * 4 MiB stays in the hundreds of megabytes (a config of a thousand
 * columns is under 100 KiB). */
#define CONFIG_FILE_MAX (4L * 1024 * 1024)

static tm_connector_config *load_text(const char *text, size_t len,
                                      const char *file,
                                      tm_config_errors *errs) {
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        cfg_syntax_error(text, len, &jerr, errs);
        return NULL;
    }
    return load_json(root, file, errs);
}

tm_connector_config *tm_config_load_string(const char *text, const char *file,
                                           tm_config_errors *errs) {
    return load_text(text, strlen(text), file, errs);
}

tm_connector_config *tm_config_load(const char *path, tm_config_errors *errs) {
    char line[LINE_MAX_LEN];
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(line, sizeof line, "$: cannot read the file: %s",
                 strerror(errno));
        cfg_errs_push(errs, line);
        return NULL;
    }
    tm_buf b = {0};
    char chunk[65536];
    size_t n;
    while (!b.oom && b.n <= CONFIG_FILE_MAX &&
           (n = fread(chunk, 1, sizeof chunk, f)) > 0)
        tm_buf_add(&b, chunk, n);
    int err = ferror(f) ? errno : 0;
    fclose(f);
    tm_connector_config *c = NULL;
    if (err)
        snprintf(line, sizeof line, "$: cannot read the file: %s",
                 strerror(err));
    else if (b.oom)
        snprintf(line, sizeof line, "$: out of memory");
    else if (b.n > CONFIG_FILE_MAX)
        snprintf(line, sizeof line,
                 "$: cannot read the file: larger than %ld bytes",
                 CONFIG_FILE_MAX);
    else
        c = load_text(b.p ? b.p : "", b.n, path, errs);
    if (err || b.oom || b.n > CONFIG_FILE_MAX)
        cfg_errs_push(errs, line);
    free(b.p);
    return c;
}

static void strv_free(char **v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void tm_config_free(tm_connector_config *c) {
    if (!c)
        return;
    free(c->file);
    free(c->name);
    free(c->kafka.bootstrap_servers);
    strv_free(c->kafka.topics, c->kafka.ntopics);
    free(c->kafka.topic_regex);
    free(c->kafka.group_id);
    for (size_t i = 0; i < c->kafka.nproperties; i++) {
        free(c->kafka.properties[i].key);
        free(c->kafka.properties[i].value);
    }
    free(c->kafka.properties);
    free(c->sink.plugin);
    json_decref(c->sink.settings);
    for (size_t i = 0; i < c->mapping.ncolumns; i++) {
        free((char *)(uintptr_t)c->mapping.columns[i].name);
        if (c->mapping.pointers)
            free(c->mapping.pointers[i]);
    }
    free(c->mapping.columns);
    free(c->mapping.pointers);
    cfg_filter_clear(&c->mapping.filter);
    strv_free(c->dedup.key, c->dedup.nkey);
    free(c->dedup.key_columns);
    free(c->dead_letters.topic);
    free(c->state_dir);
    strv_free(c->secrets, c->nsecrets);
    json_decref(c->resolved);
    free(c);
}

void tm_config_sink_config(const tm_connector_config *cfg,
                           const tm_settings *settings, void *host_ctx,
                           tm_sink_config *out) {
    memset(out, 0, sizeof *out);
    out->struct_size = (uint32_t)sizeof *out;
    out->connector = cfg->name;
    out->settings = settings;
    out->columns = cfg->mapping.columns;
    out->ncolumns = cfg->mapping.ncolumns;
    out->flags = (cfg->mapping.mode == TM_MAPPING_RAW ? TM_CONFIG_RAW : 0u) |
                 (cfg->dedup.enabled ? TM_CONFIG_DEDUP : 0u) |
                 (cfg->mapping.format != TM_FORMAT_PLAIN ? TM_CONFIG_CDC : 0u) |
                 (cfg->mapping.from_schema ? TM_CONFIG_SCHEMA_COLUMNS : 0u);
    out->state_dir = cfg->state_dir;
    out->host_ctx = host_ctx;
}
