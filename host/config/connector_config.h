/* The connector config: one JSON file per connector, strictly validated.
 *
 * tm_config_load() reads the file, resolves ${env:NAME} and ${file:PATH}
 * references inside every string value, then checks every setting. Every
 * problem is collected (not just the first) as one line "PATH: message",
 * where PATH is the JSON path ("$.batch.max_records") and the message says
 * what was expected and what was found. Unknown keys are errors, with a
 * "did you mean" when a known key is close. docs/configuration.md lists
 * every setting.
 *
 * The loaded config is a plain struct, read directly; everything in it is
 * owned by the config and lives until tm_config_free(). Values resolved by
 * interpolation are secrets: they never appear in an error line (replaced
 * by "***"), and tm_config_redact() does the same for any text the caller
 * is about to print or log. */
#ifndef TM_CONNECTOR_CONFIG_H
#define TM_CONNECTOR_CONFIG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

/* The error lines of one load, in the order found, already redacted.
 * Start with TM_CONFIG_ERRORS_INIT (or zeroed); release with
 * tm_config_errors_free(). oom is set when memory ran out: a line could not
 * be stored, or the JSON parser itself ran out (no line then). */
typedef struct tm_config_errors {
    char **lines;
    size_t count;
    size_t cap;
    int oom;
} tm_config_errors;

#define TM_CONFIG_ERRORS_INIT                                                  \
    { NULL, 0, 0, 0 }

void tm_config_errors_free(tm_config_errors *errs);

/* Where a partition starts when the sink has no marker for it. */
typedef enum tm_start_policy {
    TM_START_EARLIEST = 0, /* the log start offset */
    TM_START_LATEST = 1    /* the last stable offset */
} tm_start_policy;

typedef enum tm_mapping_mode {
    TM_MAPPING_RAW = 1, /* fixed columns: key, value, headers, topic,
                           partition, offset, timestamp */
    TM_MAPPING_JSON = 2 /* columns taken from the JSON value by pointer */
} tm_mapping_mode;

/* $.mapping.format (json mode): how a record's value carries its row.
 * plain: the value is the row. connect: Kafka Connect's JsonConverter
 * envelope {"schema", "payload"}, the payload is the row. debezium: a
 * Debezium change event (in that envelope or bare), the row is "after"
 * ("before" for a delete). Both CDC formats read the flattened shape of
 * ExtractNewRecordState too (__deleted, __op). docs/configuration.md,
 * "Change data capture". */
typedef enum tm_record_format {
    TM_FORMAT_PLAIN = 0,
    TM_FORMAT_CONNECT = 1,
    TM_FORMAT_DEBEZIUM = 2
} tm_record_format;

/* One librdkafka property of $.kafka.properties. */
typedef struct tm_config_property {
    char *key;
    char *value;
} tm_config_property;

/* $.mapping.filter, parsed. A record is kept when the value at pointer
 * equals one of values (TM_FILTER_EQ has exactly one). Values are the
 * literal texts of the filter: a bare word, or the content of a
 * double-quoted string ("a, b" keeps its comma). */
typedef enum tm_filter_op {
    TM_FILTER_NONE = 0, /* no filter: every record is kept */
    TM_FILTER_EQ = 1,   /* "/pointer == value" */
    TM_FILTER_IN = 2    /* "/pointer in [a, b, c]" */
} tm_filter_op;

typedef struct tm_filter {
    tm_filter_op op;
    char *pointer; /* RFC 6901, syntax checked */
    char **values;
    size_t nvalues;
} tm_filter;

typedef struct tm_connector_config {
    char *file; /* the path it was loaded from */
    char *name; /* [A-Za-z0-9._-]+ */

    struct {
        char *bootstrap_servers;
        char **topics; /* NULL when topic_regex is used */
        size_t ntopics;
        char *topic_regex; /* NULL when topics is used */
        char *group_id;    /* default "tidemark-" + name */
        /* $.kafka.static_membership, default 1: the consumer joins with a
         * group.instance.id kept in the state directory (host/kafka/
         * member_id.h), unless $.kafka.properties names one. */
        int static_membership;
        tm_start_policy start;
        tm_config_property *properties; /* passed to librdkafka as given */
        size_t nproperties;
    } kafka;

    struct {
        int64_t max_records; /* default 10000 */
        int64_t max_bytes;   /* default 16 MiB */
        int64_t max_wait_ms; /* default 500 */
        /* How long one sink commit() may take before it gives up with
         * RETRY (the batch's deadline_ms); default 60000. */
        int64_t commit_timeout_ms;
    } batch;

    struct {
        char *plugin;     /* a name ("sqlite") or a path (contains '/') */
        json_t *settings; /* the plugin's own object ({} when absent); make
                             a tm_settings with tm_settings_new(settings,
                             TM_CONFIG_SETTINGS_PATH) */
    } sink;

    struct {
        tm_mapping_mode mode;
        /* Ready for tm_sink_config.columns (struct_size set, names owned
         * by the config). Raw mode: the seven fixed columns. */
        tm_column *columns;
        size_t ncolumns;
        char **pointers; /* json mode: pointers[i] is column i's RFC 6901
                            pointer; NULL in raw mode */
        tm_filter filter;
        tm_record_format format; /* json mode; plain in raw mode */
        /* A change-data-capture mapping without a column list: columns
         * NULL, ncolumns 0; each event's schema gives them
         * (convert/cdc_columns.h). */
        int from_schema;
    } mapping;

    struct {
        int enabled;         /* $.dedup present */
        char **key;          /* column names, each one of mapping.columns */
        size_t *key_columns; /* key[i] is mapping.columns[key_columns[i]] */
        size_t nkey;
    } dedup;

    struct {
        int sink;    /* store dead letters in the sink; default 1 */
        char *topic; /* also produce them to this topic; NULL: none */
        /* one delivery attempt's wait for the topic's confirmations;
         * default TM_DLQ_DELIVERY_TIMEOUT_MS */
        int64_t delivery_timeout_ms;
    } dead_letters;

    char *state_dir; /* NULL when not set */

    /* Resolved interpolation values (never printed). */
    char **secrets;
    size_t nsecrets;

    /* The file's JSON with every interpolation resolved (holds secrets:
     * never printed), to tell whether two loads are the same config
     * (runtime/reload_plan.h). */
    json_t *resolved;
} tm_connector_config;

/* The JSON path the plugin's settings sit at. */
#define TM_CONFIG_SETTINGS_PATH "$.sink.settings"

/* $.dead_letters.delivery_timeout_ms by default. */
#define TM_DLQ_DELIVERY_TIMEOUT_MS 30000

/* Loads and validates PATH. Returns the config when it is valid (errs
 * untouched); NULL otherwise, with every problem appended to errs (which
 * may be NULL). */
tm_connector_config *tm_config_load(const char *path, tm_config_errors *errs);

/* Same, from JSON text; file names the source in messages (may be NULL). */
tm_connector_config *tm_config_load_string(const char *text, const char *file,
                                           tm_config_errors *errs);

void tm_config_free(tm_connector_config *cfg);

/* Copies text into out (size bytes, always NUL-terminated when size > 0)
 * with every occurrence of a resolved secret replaced by "***" (the
 * longest secret first where they overlap). cfg may be NULL (plain copy).
 * Returns out. */
char *tm_config_redact(const tm_connector_config *cfg, const char *text,
                       char *out, size_t size);

/* Fills a tm_sink_config for the plugin: struct_size, connector name,
 * columns, flags (TM_CONFIG_RAW for raw mode, TM_CONFIG_DEDUP with dedup),
 * state_dir, and the given settings and host_ctx. The pointers are into cfg
 * and settings: valid while they are. */
void tm_config_sink_config(const tm_connector_config *cfg,
                           const tm_settings *settings, void *host_ctx,
                           tm_sink_config *out);

/* The pattern the consumer subscribes with for a $.kafka.topic_regex
 * (librdkafka anchors patterns; the config's is matched anywhere). Every
 * check of what a connector reads uses it. malloc'd; NULL out of memory. */
char *tm_config_subscription_pattern(const char *regex);

/* Whether cfg's consumer reads topic: 1 with why ("also $.kafka.topics[1]",
 * "matched by $.kafka.topic_regex") written, 0 not, -1 out of memory. */
int tm_config_reads_topic(const tm_connector_config *cfg, const char *topic,
                          char *why, size_t size);

/* The checks across the connectors one process runs (run and validate with
 * several configs): a dead letter must not go round a cycle of them (A's
 * dead letters read by B, B's by A), and no two share a consumer group.
 * Each problem is reported as "PATH: message" with the index of the config
 * it is about. Returns the number reported: 0 when they can run together. */
size_t tm_config_cross_check(const tm_connector_config *const *cfgs, size_t n,
                             void (*report)(void *ctx, size_t i,
                                            const char *line),
                             void *ctx);

#endif
