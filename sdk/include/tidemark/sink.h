/*
 * tidemark/sink.h - the one public header of the tidemark sink SDK.
 *
 * A sink plugin is a shared object exporting exactly one function,
 * tidemark_sink_entry(), produced by TM_SINK_DEFINE(). The function returns a
 * static table of callbacks (tm_sink_api). Everything the plugin calls in the
 * host comes through the host services table (tm_host_api) handed to open()
 * and validate(), as SQLite hands extensions sqlite3_api_routines: a plugin
 * links against nothing of the host.
 *
 * The contract every sink keeps (docs/writing-a-sink.md says it in words):
 *   - a commit writes the batch's effects (rows, dead letters, business keys)
 *     and the advanced markers in ONE atomic step, or writes nothing;
 *   - before writing, it runs host->marker_check() on the markers it holds
 *     locked inside that step, and obeys its answer: a batch already applied
 *     gives TM_ALREADY with no effect.
 *
 * Versioning: TM_SINK_ABI_MAJOR changes break compatibility (host and plugin
 * must match). Minor versions only ever append fields at the end of structs;
 * a plugin whose minor is newer than the host's is refused. Every struct that
 * crosses the boundary starts with struct_size, set by whoever fills it; the
 * reader never reads past it. Arrays are walked with TM_ELEM(), whose stride
 * is the element's own struct_size, so an element grown in a later minor
 * version stays walkable by an older reader.
 *
 * Ownership: whoever allocates frees. The config handed to open(), its
 * settings and every string in them (those setting_string() returns and
 * those settings_fill() stores) stay valid until close() returns: keep the
 * pointers, copy nothing. Everything else the host hands over (the config
 * of validate() and its strings, a batch, markers, a topic name) is the
 * host's for that one call: the plugin copies what it keeps past it. The plugin
 * owns its instance from open() until close(). Nothing is freed across the
 * boundary. Error text goes into the caller-owned
 * tm_error (librdkafka's errstr convention). Plugins never call exit() or
 * abort() and never longjmp across the boundary.
 *
 * Threads: the entry function and the descriptor are pure. open() and close()
 * never run concurrently with anything on that instance. claim(),
 * read_markers(), scan() and commit() are serialised per instance by the host
 * (one connector thread: tidemark run makes every call of an instance on its
 * connector's sink thread). interrupt() may come from any thread. Different
 * instances may run on different threads at the same time.
 */
#ifndef TIDEMARK_SINK_H
#define TIDEMARK_SINK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TM_SINK_MAGIC     0x544D534Bu /* "TMSK" */
#define TM_SINK_ABI_MAJOR 1           /* host and plugin must match */
#define TM_SINK_ABI_MINOR 6           /* fields are only ever appended */

/* The name of the one symbol a plugin exports. */
#define TM_SINK_ENTRY_SYMBOL "tidemark_sink_entry"

#if defined(__GNUC__) || defined(__clang__)
#define TM_EXPORT            __attribute__((visibility("default")))
#define TM_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define TM_EXPORT
#define TM_PRINTF(fmt, args)
#endif

/* Element i of an array whose elements start with struct_size. */
#define TM_ELEM(type, base, i)                                                 \
    ((type *)(void *)((char *)(base) + (size_t)(i) * (base)->struct_size))
#define TM_CELEM(type, base, i)                                                \
    ((const type *)(const void *)((const char *)(base) +                       \
                                  (size_t)(i) * (base)->struct_size))

/* What the caller does next. Numbered once; the numbers are ABI. */
typedef enum tm_status {
    TM_OK = 0,       /* done; for marker_check: apply the batch */
    TM_ALREADY = 1,  /* this batch was applied before; nothing changed now */
    TM_RETRY = 2,    /* transient (connection lost, lock timeout, unknown
                        commit outcome): the host retries the same call */
    TM_FENCED = 3,   /* another owner claimed a partition since: the host
                        drops the batch and waits for the group to revoke */
    TM_CONFLICT = 4, /* the batch does not continue the marker (gap or
                        overlap): the host re-reads markers and rebuilds */
    TM_FATAL = 5,    /* cannot go on; the connector goes to FAILED */
    TM_INVALID = 6   /* bad settings or arguments; nothing was done */
} tm_status;

/* Caller-owned error buffer. Callees write a NUL-terminated message that
 * names what failed (key, partition, offsets), never a secret. */
#define TM_ERROR_MAX 512
typedef struct tm_error {
    uint32_t struct_size;
    char message[TM_ERROR_MAX];
} tm_error;

/* ---- Column schema the connector maps records to ------------------------ */

typedef enum tm_type {
    TM_TYPE_TEXT = 1,      /* UTF-8 text: v.s */
    TM_TYPE_INT = 2,       /* 64-bit signed: v.i */
    TM_TYPE_FLOAT = 3,     /* IEEE double: v.f */
    TM_TYPE_BOOL = 4,      /* 0 or 1: v.i */
    TM_TYPE_TIMESTAMP = 5, /* microseconds since 1970-01-01 UTC: v.i */
    TM_TYPE_JSON = 6,      /* JSON text, canonical form: v.s */
    TM_TYPE_BYTES = 7      /* opaque bytes (raw key/value): v.s */
} tm_type;

typedef struct tm_column {
    uint32_t struct_size;
    const char *name;
    tm_type type;
    uint8_t required; /* never null */
    uint8_t key;      /* part of the upsert key (mode upsert) */
} tm_column;

typedef struct tm_value {
    uint32_t struct_size;
    uint8_t is_null;
    union {
        int64_t i;
        double f;
        struct {
            const char *ptr; /* not NUL-terminated for BYTES */
            size_t len;
        } s;
    } v;
} tm_value;

/* Opaque: the sink's own settings, checked and read through
 * host->settings_fill() (declared settings) or host->setting_*(). */
typedef struct tm_settings tm_settings;

#define TM_CONFIG_DEDUP 0x1u /* records carry business keys to dedup */
#define TM_CONFIG_RAW   0x2u /* raw ("bronze") mapping */
/* ABI 1.5: a change-data-capture mapping: records carry tm_record.op
 * (upserts and deletes by the key columns); the sink keys its rows by the
 * columns with tm_column.key (its upsert mode) or refuses the config. */
#define TM_CONFIG_CDC 0x4u
/* ABI 1.6: with TM_CONFIG_CDC, columns from the events' schemas: the
 * config has no columns (ncolumns 0), each batch carries its own
 * (tm_batch.columns). Only for a sink with TM_CAP_SCHEMA_COLUMNS. */
#define TM_CONFIG_SCHEMA_COLUMNS 0x8u

typedef struct tm_sink_config {
    uint32_t struct_size;
    const char *connector; /* connector name; markers are per connector */
    const tm_settings *settings;
    const tm_column *columns; /* walk with TM_CELEM */
    size_t ncolumns;
    uint32_t flags;        /* TM_CONFIG_* */
    const char *state_dir; /* connector's local directory, may be NULL */
    void *host_ctx;        /* pass to host->log() */
} tm_sink_config;

/* ---- Markers ------------------------------------------------------------ */

#define TM_NO_EPOCH        0    /* marker absent (never claimed) */
#define TM_NO_OFFSET       (-1) /* next_offset of an absent marker */
#define TM_BATCH_ID_MAX    64   /* including the NUL */
#define TM_RECORD_HASH_MAX 65   /* lowercase hex SHA-256 and the NUL */

/* One per (connector, topic, partition). topic and partition are set by the
 * host (it owns the string); the sink fills the rest. */
typedef struct tm_marker {
    uint32_t struct_size;
    const char *topic;
    int32_t partition;
    int64_t next_offset; /* consumer position after the last applied batch */
    int64_t epoch;       /* fencing token of the current owner */
    char last_batch_id[TM_BATCH_ID_MAX];
    uint64_t rows, dead_letters, filtered, duplicates; /* cumulative */
    /* ---- ABI 1.1: the marker's lineage (appended) ----
     * The last record applied for the partition: its offset, Kafka
     * timestamp and record hash (tm_range.last_record_hash). At claim the
     * host reads that record back from Kafka: another record there means
     * the log is no longer the one the marker describes (the topic was
     * deleted and created again, or an unclean leader election truncated
     * it) and the partition is stopped, not resumed. The sink stores the
     * three with the marker, in the same atomic step; marker_advance()
     * sets them. An empty last_record_hash means none is kept (a new or
     * reset marker, a range that carried no record yet): no check. A
     * plugin built against ABI 1.0 never fills them (the host's markers
     * keep them empty, and marker_advance() leaves its own, smaller by
     * struct_size, alone): its partitions are not checked. */
    int64_t last_offset;       /* TM_NO_OFFSET when none is kept */
    int64_t last_timestamp_ms; /* -1 when the record had none */
    char last_record_hash[TM_RECORD_HASH_MAX];
} tm_marker;

/* The size of tm_marker at ABI 1.0, and whether m carries the lineage. */
#define TM_MARKER_SIZE_1_0 (offsetof(tm_marker, duplicates) + sizeof(uint64_t))
#define TM_MARKER_HAS_LINEAGE(m)                                               \
    ((m)->struct_size >=                                                       \
     offsetof(tm_marker, last_record_hash) + TM_RECORD_HASH_MAX)

/* claim() flags */
#define TM_CLAIM_RESET                                                         \
    0x1u /* also set next_offset to the given value                            \
            (offline `offsets --reset-to`) */

/* ---- Batches ------------------------------------------------------------ */

/* One partition's part of a batch: offsets [start_offset, end_offset).
 * Offsets are not dense; a range may carry no record at all and only move
 * the marker (holes left by transaction markers, compaction, filters). */
typedef struct tm_range {
    uint32_t struct_size;
    const char *topic;
    int32_t partition;
    int64_t start_offset;
    int64_t end_offset;
    int64_t epoch;
    uint64_t filtered;   /* records the host filtered out */
    uint64_t duplicates; /* in-batch duplicate keys the host collapsed */
    /* ---- ABI 1.1 (appended): set by the host ----
     * The last record of the range the batch carries (a row's record or a
     * dead letter, the highest offset): what marker_advance() keeps as the
     * marker's lineage. last_offset is TM_NO_OFFSET when the range carries
     * none (then the marker keeps the lineage it had). The hash is the
     * lowercase hex SHA-256 of the record's key and value, each as a
     * presence byte ('k'/'K', 'v'/'V' for null), its length (8 bytes,
     * big-endian) and its bytes. */
    int64_t last_offset;
    int64_t last_timestamp_ms;
    char last_record_hash[TM_RECORD_HASH_MAX];
} tm_range;

typedef struct tm_record {
    uint32_t struct_size;
    uint32_t range; /* index into tm_batch.ranges */
    int64_t offset;
    int64_t timestamp_ms; /* Kafka timestamp, -1 if none */
    const void *key;      /* NULL: null key */
    size_t key_len;
    const void *value; /* NULL: tombstone */
    size_t value_len;
    const char *headers_json; /* JSON array of [name, value] or NULL */
    const tm_value *values;   /* config ncolumns values, walk with TM_CELEM */
    /* Business identity (TM_CONFIG_DEDUP): the canonical key and the hash
     * of the canonical mapped columns; NULL without dedup. Same key and
     * same hash as a stored key: a duplicate (count it, write no row);
     * same key, different hash: a dead letter TM_DL_IDENTITY_CONFLICT. */
    const char *identity;
    const char *identity_hash;
    /* ---- ABI 1.5 (appended): set by the host ----
     * What the record does to the row its key columns name: TM_OP_UPSERT
     * (insert, or replace the row of that key) or TM_OP_DELETE (delete the
     * row of that key; only the key columns' values are set, the others
     * null). Only a change-data-capture mapping ($.mapping.format
     * "debezium" or "connect", TM_CONFIG_CDC) makes deletes, and only
     * for a sink with TM_CAP_UPSERT | TM_CAP_DELETE. The sink applies a
     * batch's records in offset order: each key's row ends as its last
     * event leaves it, a refused event is a dead letter without effect
     * (a set-based sink may collapse a key to its last event, judging
     * events one at a time only when the table refuses the write:
     * docs/writing-a-sink.md); the host sends every event, so a key may
     * come several times in a batch (the kit's case "cdc"). Read it
     * through TM_RECORD_OP. */
    uint32_t op;
} tm_record;

#define TM_OP_UPSERT 0u /* the default: a row (mode append or upsert) */
#define TM_OP_DELETE 1u /* delete the row of the record's key columns */

/* The op of a record of a host of any minor version (older: upsert). */
#define TM_RECORD_OP(r)                                                        \
    ((r)->struct_size >= offsetof(tm_record, op) + sizeof(uint32_t)            \
         ? (r)->op                                                             \
         : TM_OP_UPSERT)

typedef enum tm_dl_reason {
    TM_DL_PARSE_ERROR = 1,       /* value is not valid JSON */
    TM_DL_MISSING_FIELD = 2,     /* a required column is absent */
    TM_DL_TYPE_MISMATCH = 3,     /* a column does not convert to its type */
    TM_DL_IDENTITY_CONFLICT = 4, /* business key applied with other payload */
    TM_DL_REJECTED = 5,          /* the sink refused the row (constraint) */
    TM_DL_NULL_KEY = 6,          /* upsert: a key column is null or missing */
    /* ---- ABI 1.5 (appended) ---- */
    TM_DL_ENVELOPE = 7, /* a change event's envelope is malformed */
    TM_DL_SCHEMA_MISMATCH =
        8 /* the event's schema disagrees with its payload */
} tm_dl_reason;
#define TM_DL_REASON_LAST                                                      \
    TM_DL_SCHEMA_MISMATCH /* the highest reason of this SDK */

typedef struct tm_dead_letter {
    uint32_t struct_size;
    uint32_t range;
    int64_t offset;
    int64_t timestamp_ms;
    tm_dl_reason reason;
    const char *detail; /* human-readable, e.g. "/id: expected int" */
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
    const char *headers_json;
} tm_dead_letter;

typedef struct tm_batch {
    uint32_t struct_size;
    const char *connector;
    const char *batch_id;   /* unique per connector across hosts */
    int64_t deadline_ms;    /* CLOCK_MONOTONIC ms; long calls give up with
                               TM_RETRY past it (0 or less: no deadline).
                               Once the store's own commit has started
                               (COMMIT sent, the rename made) the call is
                               not given up for it: an outcome known is
                               worth the wait */
    const tm_range *ranges; /* walk with TM_CELEM */
    size_t nranges;
    const tm_record *records; /* in offset order per partition */
    size_t nrecords;
    const tm_dead_letter *dead_letters; /* made by the host */
    size_t ndead_letters;
    /* ---- ABI 1.6 (appended): set by the host ----
     * With TM_CONFIG_SCHEMA_COLUMNS, the columns of this batch, taken
     * from its events' schemas (walk with TM_CELEM): every record's
     * values follow them. A batch's columns are those of the batch before
     * it in this process with the new ones appended (new ones are never
     * required); a column the events no longer carry stays, null. The
     * sink makes the table have them in the commit's atomic step: created
     * at the first batch, a new column added in the transaction of the
     * batch that first carries it; a column the table has with another
     * declared type (or another key), or NOT NULL where the batch's is
     * optional, is refused with TM_FATAL, naming the table, the column
     * and both types, nothing committed: compared with the table itself,
     * so that a refusal holds after a restart (tidemark/columns.h). NULL
     * and 0 otherwise: the config's columns. Read through
     * TM_BATCH_COLUMNS. */
    const tm_column *columns;
    size_t ncolumns;
} tm_batch;

/* The columns of a batch b of a host of any minor version for config c:
 * the batch's own (TM_CONFIG_SCHEMA_COLUMNS), else the config's. The
 * count is TM_BATCH_NCOLUMNS. */
#define TM_BATCH_HAS_COLUMNS(b)                                                \
    ((b)->struct_size >= offsetof(tm_batch, ncolumns) + sizeof(size_t) &&      \
     (b)->columns != NULL)
#define TM_BATCH_COLUMNS(b, c)                                                 \
    (TM_BATCH_HAS_COLUMNS(b) ? (b)->columns : (c)->columns)
#define TM_BATCH_NCOLUMNS(b, c)                                                \
    (TM_BATCH_HAS_COLUMNS(b) ? (b)->ncolumns : (c)->ncolumns)

/* ---- Read-back (scan) --------------------------------------------------- */

typedef enum tm_item_kind {
    TM_ITEM_ROW = 1,
    TM_ITEM_DEAD_LETTER = 2
} tm_item_kind;

typedef struct tm_scan_item {
    uint32_t struct_size;
    tm_item_kind kind;
    const char *topic;
    int32_t partition;
    int64_t offset;
    const char *identity; /* business key, or NULL */
    tm_dl_reason reason;  /* dead letters only */
    const char *detail;   /* dead letters only, may be NULL */
    /* ---- ABI 1.2 (appended) ----
     * Rows: the stored column values, nvalues of them in the config's
     * column order, as tm_record.values gave them (walk with TM_CELEM);
     * NULL and 0 when the sink does not give them back (then nobody can
     * check what it stored: the kit's case "values" says SKIP) or the
     * reader does not want them (TM_HOST_SCAN_WANTS_VALUES). The plugin's
     * for the emit call only, as the rest of the item. */
    const tm_value *values;
    size_t nvalues;
} tm_scan_item;

/* Whether an item (of a plugin of any minor version) carries values. */
#define TM_SCAN_ITEM_HAS_VALUES(it)                                            \
    ((it)->struct_size >= offsetof(tm_scan_item, nvalues) + sizeof(size_t) &&  \
     (it)->values != NULL)

/* ---- Declared settings (ABI 1.3) ---------------------------------------- */

/* A plugin may declare its settings as a table instead of reading them one
 * by one: each descriptor names a key of the connector's "sink.settings",
 * its type, whether it is required, its default and bounds, and where in a
 * struct of the plugin's own the host stores the value. The plugin hands
 * the table in tm_sink_api.settings (for `tidemark plugins`, which prints
 * the settings' JSON schema built from it) and to host->settings_fill() in
 * open() and validate(), which checks every key and fills the struct.
 *
 * What the host checks: every key of the object is declared (else
 * "$.sink.settings.KEY: unknown setting (did you mean ...)"), every
 * required one is there, every value has its type, integers and string
 * lengths are within [min, max], enumerations are one of the allowed
 * strings, strings hold no NUL. Errors name the JSON path and say what was
 * expected and what was found, the same words as the rest of the config.
 * What the plugin still checks itself, after the fill: anything across
 * fields (mode "upsert" needs key columns), anything about the world (the
 * path is a directory, the server is reachable), and any rule the table
 * cannot say.
 *
 * The table is an array of tm_setting ended by an entry whose name is NULL
 * (TM_SETTING_END); build the entries with the TM_SETTING_* macros, which
 * also check at compile time that the field has the type the host writes.
 * It is static and read-only: the host may read it at any time from any
 * thread. */
typedef enum tm_setting_type {
    TM_SET_STRING = 1, /* const char *: NUL-free UTF-8 text; min/max bound
                          its length in bytes (max 0: no bound) */
    TM_SET_INT = 2,    /* int64_t within [min, max] (a JSON integer) */
    TM_SET_BOOL = 3,   /* int: 0 or 1 (a JSON boolean) */
    TM_SET_ENUM = 4    /* int: the index in allowed[] of the string given */
} tm_setting_type;

#define TM_SETTING_REQUIRED 0x1u /* absent (or null) is an error */
#define TM_SETTING_ICASE    0x2u /* ENUM: matched ignoring ASCII case */
#define TM_SETTING_NO_DEFAULT                                                  \
    0x4u /* INT: absent leaves the field 0, a value the bounds refuse, so      \
            that the plugin tells "not set" from any value given */

typedef struct tm_setting {
    uint32_t struct_size; /* sizeof(tm_setting); 0 in the end entry */
    const char *name;     /* the key; NULL ends the table */
    tm_setting_type type;
    uint32_t flags;  /* TM_SETTING_* */
    size_t offset;   /* offsetof(the plugin's struct, the field) */
    int64_t min;     /* INT: the smallest value; STRING: shortest length */
    int64_t max;     /* INT: the largest; STRING: longest length, 0: any */
    int64_t def_int; /* the default of an INT or BOOL; of an ENUM, the
                        index of the default in allowed[] */
    const char *def_string;     /* the default of a STRING, or NULL */
    const char *const *allowed; /* ENUM: the strings, NULL-terminated */
    const char *description;    /* one line, for `tidemark plugins` */
} tm_setting;

/* Compile-time check that FIELD of ST has type T (adds 0). */
#define TM_SETTING_FIELD_(st, field, T)                                        \
    (offsetof(st, field) + 0 * sizeof((T *){&((st *)0)->field}))

/* A string, required (flags TM_SETTING_REQUIRED, then DEF is NULL) or with
 * a default (DEF, or NULL for none); length in [MINLEN, MAXLEN] bytes. */
#define TM_SETTING_STRING(key, st, field, flags_, def, minlen, maxlen, desc)   \
    {                                                                          \
        .struct_size = sizeof(tm_setting), .name = (key),                      \
        .type = TM_SET_STRING, .flags = (flags_),                              \
        .offset = TM_SETTING_FIELD_(st, field, const char *), .min = (minlen), \
        .max = (maxlen), .def_string = (def), .description = (desc)            \
    }
/* An integer within [MIN, MAX], DEF when absent. */
#define TM_SETTING_INT(key, st, field, flags_, def, min_, max_, desc)          \
    {                                                                          \
        .struct_size = sizeof(tm_setting), .name = (key), .type = TM_SET_INT,  \
        .flags = (flags_), .offset = TM_SETTING_FIELD_(st, field, int64_t),    \
        .min = (min_), .max = (max_), .def_int = (def), .description = (desc)  \
    }
/* A boolean, DEF (0 or 1) when absent. */
#define TM_SETTING_BOOL(key, st, field, def, desc)                             \
    {                                                                          \
        .struct_size = sizeof(tm_setting), .name = (key), .type = TM_SET_BOOL, \
        .offset = TM_SETTING_FIELD_(st, field, int), .def_int = (def),         \
        .description = (desc)                                                  \
    }
/* One of ALLOWED (a NULL-terminated array of strings); the field gets its
 * index, DEF (an index) when absent. */
#define TM_SETTING_ENUM(key, st, field, flags_, allowed_, def, desc)           \
    {                                                                          \
        .struct_size = sizeof(tm_setting), .name = (key), .type = TM_SET_ENUM, \
        .flags = (flags_), .offset = TM_SETTING_FIELD_(st, field, int),        \
        .def_int = (def), .allowed = (allowed_), .description = (desc)         \
    }
#define TM_SETTING_END                                                         \
    { 0 }

/* ---- Host services ------------------------------------------------------ */

typedef enum tm_log_level {
    TM_LOG_ERROR = 3,
    TM_LOG_WARN = 4,
    TM_LOG_INFO = 6,
    TM_LOG_DEBUG = 7
} tm_log_level;

/* Crash point names for host->fault(). */
#define TM_FAULT_BEFORE_BEGIN  "before_begin"
#define TM_FAULT_AFTER_EFFECTS "after_effects"
#define TM_FAULT_AFTER_MARKER  "after_marker"
#define TM_FAULT_AFTER_COMMIT  "after_commit"

typedef struct tm_host_api {
    uint32_t struct_size;
    uint16_t abi_major, abi_minor;

    /* The marker check, the one implementation of the commit protocol's
     * step 4. stored[i] is the sink's marker for batch->ranges[i], read
     * inside the commit's transaction with the markers locked (walk with
     * TM_CELEM; absent: epoch TM_NO_EPOCH). Returns TM_OK (apply every
     * range), TM_ALREADY (every range already applied: write nothing),
     * TM_FENCED or TM_CONFLICT (roll back, write nothing) with a message
     * naming the partition and the offsets; TM_INVALID (roll back, write
     * nothing) for a malformed batch, a record or dead letter naming a
     * range it does not have or lying outside it, so that sinks may index
     * ranges by tm_record.range without checking. Pure; any thread. */
    tm_status (*marker_check)(const tm_batch *batch, const tm_marker *stored,
                              tm_error *err);

    /* Advances a stored marker past batch->ranges[range] after applying it:
     * next_offset = end_offset, epoch kept, last_batch_id = batch id, and
     * counts += the host's filtered/duplicates plus the sink's own rows,
     * dead letters and duplicates for that range; with ABI 1.1 markers
     * (TM_MARKER_HAS_LINEAGE) also the lineage, from the range's last
     * record when it carries one. Pure; any thread. */
    void (*marker_advance)(tm_marker *stored, const tm_batch *batch,
                           size_t range, uint64_t rows, uint64_t dead_letters,
                           uint64_t duplicates);

    /* Settings of the sink (the connector's "sink.settings" object).
     * Return 1 found (out set), 0 absent (out untouched), -1 wrong type
     * (err names the JSON path, what was expected and what was found). The
     * returned strings live as long as the config: until close() for the
     * config of open(), for the call for the config of validate(). */
    int (*setting_string)(const tm_settings *s, const char *key,
                          const char **out, tm_error *err);
    int (*setting_int)(const tm_settings *s, const char *key, int64_t *out,
                       tm_error *err);
    int (*setting_bool)(const tm_settings *s, const char *key, int *out,
                        tm_error *err);
    /* 0 when every key of the settings is in known[0..n); -1 otherwise,
     * with err naming the path of the first unknown key and the closest
     * known one ("did you mean"). */
    int (*settings_check_keys)(const tm_settings *s, const char *const *known,
                               size_t n, tm_error *err);

    /* Formats a message into err (printf-style). The one error formatter. */
    void (*set_error)(tm_error *err, const char *fmt, ...) TM_PRINTF(2, 3);

    /* Logs with the host's context (connector, plugin) added. */
    void (*log)(void *host_ctx, tm_log_level level, const char *fmt, ...)
        TM_PRINTF(3, 4);

    /* Crash point: plugins call it at each TM_FAULT_* point of a commit.
     * Returns at once unless TIDEMARK_FAULT names the point; then it writes
     * the name to TIDEMARK_FAULT_FD and kills (or stops) the process. */
    void (*fault)(const char *point);

    /* Read-back: scan() calls it once per stored row and dead letter.
     * Returns 0 to go on, non-zero to stop the scan (scan returns TM_OK). */
    int (*emit)(void *emit_ctx, const tm_scan_item *item);

    /* ---- ABI 1.3 (appended) ---- */

    /* Declared settings: checks the settings against TABLE (see
     * tm_setting) and fills the plugin's struct OUT of OUT_SIZE bytes:
     * zeroed first, then every default, then every value given. 0, or -1
     * with err naming the JSON path of the first bad key, what was
     * expected and what was found ("$.sink.settings.mode: expected one of
     * \"append\" or \"upsert\", found string \"merge\""); OUT is then
     * unspecified. A table that is wrong itself (a field past OUT_SIZE, a
     * default out of its bounds) is -1 naming the entry. Strings stored in
     * OUT point into the config (defaults into the table) and live as long
     * as the config: until close() returns for the config of open(), until
     * validate() returns for the config of validate(). Pure; any thread.
     * A plugin of ABI 1.3 may rely on it: the loader refuses a plugin
     * newer than the host. */
    int (*settings_fill)(const tm_settings *s, const tm_setting *table,
                         void *out, size_t out_size, tm_error *err);

    /* ---- ABI 1.4 (appended) ---- */

    /* Whether the reader of this scan (its emit_ctx) wants the rows'
     * values: 1 yes (the kit's case "values"), 0 no (`tidemark verify`
     * looks at offsets and business keys only). When 0, scan() gives
     * every row without values and should not read or hold them (a data
     * file's columns, a partition's cells). Read it through
     * TM_HOST_SCAN_WANTS_VALUES: a host older than 1.4 has no such field
     * and always wants them. Pure; any thread. */
    int (*scan_wants_values)(void *emit_ctx);
} tm_host_api;

/* Whether HOST (of any minor version) wants the values of the scan whose
 * emit context is EMIT_CTX (see scan_wants_values). */
#define TM_HOST_SCAN_WANTS_VALUES(host, emit_ctx)                              \
    ((host)->struct_size <                                                     \
         offsetof(tm_host_api, scan_wants_values) + sizeof(void *) ||          \
     !(host)->scan_wants_values || (host)->scan_wants_values(emit_ctx))

/* ---- The sink's callback table ------------------------------------------ */

/* Capabilities. The host refuses a connector config that needs one the
 * plugin lacks: "dedup" needs TM_CAP_DEDUP, and "dead_letters.sink", true
 * by default, needs TM_CAP_DEAD_LETTERS (without it every config must say
 * "dead_letters": {"sink": false, "topic": ...}). TM_CAP_UPSERT is only
 * advertised (`tidemark plugins`): the sink's own settings choose upsert,
 * keyed by the columns with tm_column.key, and the host requires nothing. */
#define TM_CAP_DEDUP        0x1u /* business-key dedup (tm_record.identity) */
#define TM_CAP_DEAD_LETTERS 0x2u /* stores dead letters with the batch */
#define TM_CAP_UPSERT       0x4u /* replaces rows by key columns (upsert) */
/* ABI 1.5: deletes rows by key columns (tm_record.op TM_OP_DELETE) in the
 * commit's atomic step; a delete of a key not stored is no error. A
 * change-data-capture mapping needs TM_CAP_UPSERT | TM_CAP_DELETE and the
 * sink's upsert mode. */
#define TM_CAP_DELETE 0x8u
/* ABI 1.6: takes each batch's columns (tm_batch.columns) under
 * TM_CONFIG_SCHEMA_COLUMNS: creates the target table at the first batch
 * and adds the columns a later batch brings, in the commit's atomic step.
 * A mapping without a column list needs it; a sink without it is refused
 * that mapping, so no field is ever dropped silently. */
#define TM_CAP_SCHEMA_COLUMNS 0x10u

typedef struct tm_sink_api {
    uint32_t magic;                /* TM_SINK_MAGIC */
    uint16_t abi_major, abi_minor; /* TM_SINK_ABI_* of the plugin's build */
    uint32_t struct_size;          /* sizeof(tm_sink_api) of that build */
    const char *name, *version;
    uint32_t capabilities; /* TM_CAP_* */

    /* Creates an instance from the config; *sink is the plugin's handle.
     * @locality the connector's thread (or the kit's), before anything else
     *           on this instance.
     * @blocks   may connect and create tables (bounded by its own timeouts).
     * @owns     host and config outlive the instance (until close returns);
     *           copy nothing, keep the pointers. *sink is the plugin's.
     * @returns  TM_OK; TM_INVALID for unknown, missing or invalid settings,
     *           naming the key; TM_RETRY when the store is unreachable;
     *           TM_FATAL otherwise. On failure *sink is not used. */
    tm_status (*open)(const tm_host_api *host, const tm_sink_config *config,
                      void **sink, tm_error *err);

    /* Claims partitions for this host. In ONE atomic step the sink creates
     * each missing marker at the given next_offset (with TM_CLAIM_RESET it
     * also sets next_offset on existing ones and clears their lineage:
     * last_offset TM_NO_OFFSET, empty hash), raises every given
     * partition's epoch by one, and fills the markers with what it stored
     * (with the lineage when TM_MARKER_HAS_LINEAGE).
     * @locality the connector's thread, only from the consumer group's
     *           assign callback (and offline `offsets --reset-to`).
     * @blocks   on the store's locks, bounded by the sink's own lock
     *           timeout (a setting of the sink): claim has no deadline;
     *           interrupt() may ask it to give up (TM_RETRY).
     * @owns     markers: the host's array (walk with TM_ELEM); topic is the
     *           host's, every other field is written by the sink.
     * @returns  TM_OK, TM_RETRY (nothing changed), TM_FATAL. */
    tm_status (*claim)(void *sink, tm_marker *markers, size_t n, uint32_t flags,
                       tm_error *err);

    /* Reads markers without claiming: never raises an epoch, never writes.
     * Absent markers get epoch TM_NO_EPOCH and next_offset TM_NO_OFFSET.
     * @locality the connector's thread (after CONFLICT) or a CLI command
     *           (status, verify, offsets), serialised per instance.
     * @blocks   briefly on the store; must not wait for a writer's lock.
     * @owns     as claim.
     * @returns  TM_OK, TM_RETRY, TM_FATAL. */
    tm_status (*read_markers)(void *sink, tm_marker *markers, size_t n,
                              tm_error *err);

    /* Applies a batch atomically (see the top of this file): lock the
     * markers, host->marker_check(), effects, host->marker_advance(),
     * commit, calling host->fault() at the four TM_FAULT_* points.
     * @locality the connector's thread, serialised per instance.
     * @blocks   on the store; gives up with TM_RETRY past batch->deadline_ms
     *           or when interrupted, but not once the store's commit itself
     *           has started (see tm_batch.deadline_ms).
     * @owns     the batch and all it points to are the host's for the call.
     * @returns  TM_OK; the marker check's TM_ALREADY / TM_FENCED /
     *           TM_CONFLICT / TM_INVALID with nothing written; TM_RETRY
     * (transient, or outcome unknown: the host sends the same batch again and
     * the check settles it); TM_FATAL. */
    tm_status (*commit)(void *sink, const tm_batch *batch, tm_error *err);

    /* Releases everything of the instance, which is not used again.
     * @locality any thread, never concurrent with anything on the instance.
     * @blocks   may close connections. */
    void (*close)(void *sink);

    /* ---- optional (NULL when absent); appended only ---- */

    /* Checks settings, connectivity, privileges and table shape without
     * changing anything; refuses configs the sink cannot keep (e.g. dedup
     * without TM_CAP_DEDUP).
     * @locality any thread (`tidemark validate`); no instance exists.
     * @owns     host and config are the host's for the call only: copy
     *           what you keep.
     * @returns  TM_OK, TM_INVALID (a shape mismatch prints both shapes),
     *           TM_RETRY (unreachable). */
    tm_status (*validate)(const tm_host_api *host, const tm_sink_config *config,
                          tm_error *err);

    /* Emits every stored row and dead letter of one partition through
     * host->emit(emit_ctx, item), in offset order; stops early when emit
     * returns non-zero; rows with their stored values (ABI 1.2) when the
     * reader wants them (TM_HOST_SCAN_WANTS_VALUES, ABI 1.4). Read-only.
     * @locality as read_markers. @owns items are the plugin's for the emit
     * call only. @returns TM_OK, TM_RETRY, TM_FATAL. */
    tm_status (*scan)(void *sink, const char *topic, int32_t partition,
                      void *emit_ctx, tm_error *err);

    /* Asks a call in progress on the instance to give up soon (that call
     * returns TM_RETRY). @locality any thread, concurrently with the call;
     * must not block or free anything. */
    void (*interrupt)(void *sink);

    /* The settings schema as static JSON text. @locality any thread; pure.
     * A plugin that declares its settings (below) leaves it NULL: the host
     * builds the schema from the table. */
    const char *(*describe)(void);

    /* ---- ABI 1.3 (appended) ---- */

    /* The declared settings (see tm_setting), or NULL: the loader checks
     * the table, and `tidemark plugins` shows the settings' schema built
     * from it. The host reads it only from a plugin whose struct_size has
     * it (TM_SINK_API_HAS_SETTINGS): a plugin of ABI 1.0 to 1.2 reads its
     * settings with setting_*() and still loads. */
    const tm_setting *settings;
} tm_sink_api;

/* The size of tm_sink_api at ABI 1.0: the loader refuses anything smaller. */
#define TM_SINK_API_SIZE_1_0 (offsetof(tm_sink_api, describe) + sizeof(void *))
/* Whether a plugin's table (of any minor version) has the settings field. */
#define TM_SINK_API_HAS_SETTINGS(api)                                          \
    ((api)->struct_size >= offsetof(tm_sink_api, settings) + sizeof(void *))

typedef const tm_sink_api *(*tm_sink_entry_fn)(void);

/* Defines the plugin's one exported function. Use once per plugin:
 *   TM_SINK_DEFINE(.name = "mysink", .version = "1.0.0",
 *                  .open = my_open, .claim = my_claim, ...,
 *                  .settings = MY_SETTINGS)
 * magic, ABI version and struct_size are filled in, so none is forgotten. */
#define TM_SINK_DEFINE(...)                                                    \
    TM_EXPORT const tm_sink_api *tidemark_sink_entry(void);                    \
    TM_EXPORT const tm_sink_api *tidemark_sink_entry(void) {                   \
        static const tm_sink_api tm_sink_api_table_ = {                        \
            .magic = TM_SINK_MAGIC,                                            \
            .abi_major = TM_SINK_ABI_MAJOR,                                    \
            .abi_minor = TM_SINK_ABI_MINOR,                                    \
            .struct_size = (uint32_t)sizeof(tm_sink_api),                      \
            __VA_ARGS__};                                                      \
        return &tm_sink_api_table_;                                            \
    }

/* The reason's name as stored in dead-letter tables ("identity_conflict"). */
static inline const char *tm_dl_reason_name(tm_dl_reason r) {
    switch (r) {
    case TM_DL_PARSE_ERROR: return "parse_error";
    case TM_DL_MISSING_FIELD: return "missing_field";
    case TM_DL_TYPE_MISMATCH: return "type_mismatch";
    case TM_DL_IDENTITY_CONFLICT: return "identity_conflict";
    case TM_DL_REJECTED: return "rejected";
    case TM_DL_NULL_KEY: return "null_key";
    case TM_DL_ENVELOPE: return "envelope";
    case TM_DL_SCHEMA_MISMATCH: return "schema_mismatch";
    }
    return "unknown";
}

/* The reason a stored name stands for; a name this SDK does not know
 * (written by someone else) is still a dead letter: TM_DL_REJECTED. */
static inline tm_dl_reason tm_dl_reason_from_name(const char *name) {
    for (int r = TM_DL_PARSE_ERROR; name && r <= TM_DL_REASON_LAST; r++) {
        const char *n = tm_dl_reason_name((tm_dl_reason)r);
        size_t i = 0;
        while (n[i] && n[i] == name[i])
            i++;
        if (!n[i] && !name[i])
            return (tm_dl_reason)r;
    }
    return TM_DL_REJECTED;
}

static inline const char *tm_status_name(tm_status s) {
    switch (s) {
    case TM_OK: return "OK";
    case TM_ALREADY: return "ALREADY";
    case TM_RETRY: return "RETRY";
    case TM_FENCED: return "FENCED";
    case TM_CONFLICT: return "CONFLICT";
    case TM_FATAL: return "FATAL";
    case TM_INVALID: return "INVALID";
    }
    return "UNKNOWN";
}

#ifdef __cplusplus
}
#endif
#endif /* TIDEMARK_SINK_H */
