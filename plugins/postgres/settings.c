/* The sink's settings, declared as a table: the host checks the keys,
 * types, bounds and allowed values and fills pg_settings, so that every
 * sink reports a bad setting the same way (naming the JSON path). What
 * the table cannot say is checked here: the connection string parses, the
 * mapping suits the table. */
#include <stdint.h>
#include <string.h>
#include <tidemark/columns.h>

#include "pg_sink.h"

/* The order of MODES is pg_mode's. */
static const char *const MODES[] = {"append", "upsert", NULL};
/* The order of KEY_STORES is pg_settings.keys_rows's. */
static const char *const KEY_STORES[] = {"memory", "rows", NULL};

/* Names longer than PG_NAME_MAX bytes would be cut by the server, so two
 * settings could name one table while the owners registry, keyed by the
 * setting, sees two: the bound refuses them. */
const tm_setting PG_SETTINGS[] = {
    TM_SETTING_STRING("conninfo", pg_settings, conninfo, TM_SETTING_REQUIRED,
                      NULL, 1, 0,
                      "a libpq connection string (keywords or URI)"),
    TM_SETTING_STRING("schema", pg_settings, schema, 0, "public", 1,
                      PG_NAME_MAX, "the target table's schema"),
    TM_SETTING_STRING("table", pg_settings, table, TM_SETTING_REQUIRED, NULL, 1,
                      PG_NAME_MAX, "the target table's name"),
    TM_SETTING_BOOL("create", pg_settings, create, 1,
                    "create the table when missing"),
    TM_SETTING_ENUM("mode", pg_settings, mode, 0, MODES, PG_APPEND,
                    "append rows, or replace them by the key columns"),
    TM_SETTING_INT("connect_timeout_s", pg_settings, connect_timeout_s, 0, 10,
                   1, 3600, "how long a connection attempt may take"),
    TM_SETTING_INT("statement_timeout_ms", pg_settings, statement_timeout_ms, 0,
                   30000, 0, INT32_MAX,
                   "the server's statement_timeout; 0: none"),
    TM_SETTING_INT("dedup_retention_s", pg_settings, retention_s,
                   TM_SETTING_NO_DEFAULT, 0, 1, INT64_MAX / 1000,
                   "forget business keys this long after their record "
                   "timestamp; absent: keep for ever"),
    TM_SETTING_ENUM("dedup_keys", pg_settings, keys_rows, 0, KEY_STORES, 0,
                    "business keys held in memory (one packed row of "
                    "digests per batch), or one row per key"),
    TM_SETTING_BOOL("shared_table", pg_settings, shared_table, 0,
                    "other connectors write the table too (each of them must "
                    "say so)"),
    TM_SETTING_END,
};

const char *pg_type_sql(tm_type t) {
    switch (t) {
    case TM_TYPE_TEXT: return "text";
    case TM_TYPE_INT: return "bigint";
    case TM_TYPE_FLOAT: return "double precision";
    case TM_TYPE_BOOL: return "boolean";
    case TM_TYPE_TIMESTAMP: return "timestamp with time zone";
    case TM_TYPE_JSON: return "jsonb";
    case TM_TYPE_BYTES: return "bytea";
    }
    return NULL;
}

static tm_status check_columns(const tm_host_api *h,
                               const tm_sink_config *config,
                               const pg_settings *out, tm_error *err) {
    size_t keys = 0;
    if (config->flags & TM_CONFIG_SCHEMA_COLUMNS) {
        /* each batch brings them (evolve.c); change events need upsert */
        if (out->mode != PG_UPSERT) {
            h->set_error(err, "setting \"mode\": a change-data-capture "
                              "mapping ($.mapping.format) needs \"upsert\": "
                              "its events replace and delete rows by their "
                              "key");
            return TM_INVALID;
        }
        return TM_OK;
    }
    if (config->ncolumns == 0) {
        h->set_error(err, "the mapping has no columns");
        return TM_INVALID;
    }
    char why[256];
    if (!tm_columns_makeable(config->columns, config->ncolumns,
                             PG_HIDDEN_PREFIX, pg_type_sql, why, sizeof why)) {
        h->set_error(err, "%s", why);
        return TM_INVALID;
    }
    for (size_t i = 0; i < config->ncolumns; i++)
        keys += TM_CELEM(tm_column, config->columns, i)->key != 0;
    if ((config->flags & TM_CONFIG_CDC) && out->mode != PG_UPSERT) {
        h->set_error(err, "setting \"mode\": a change-data-capture mapping "
                          "($.mapping.format) needs \"upsert\": its events "
                          "replace and delete rows by their key");
        return TM_INVALID;
    }
    if (out->mode == PG_UPSERT && keys == 0) {
        h->set_error(err,
                     "setting \"mode\": \"upsert\" needs key columns "
                     "(\"key\": true on at least one column); none has it");
        return TM_INVALID;
    }
    return TM_OK;
}

tm_status pg_settings_load(const tm_host_api *h, const tm_sink_config *config,
                           pg_settings *out, tm_error *err) {
    /* Keys, types, bounds and allowed values: the host, from the table. */
    if (h->settings_fill(config->settings, PG_SETTINGS, out, sizeof *out,
                         err) != 0)
        return TM_INVALID;
    /* The connection string must parse; libpq's message names the bad part
     * (never a password). */
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(out->conninfo, &perr);
    if (!opts) {
        size_t n = perr ? strlen(perr) : 0;
        while (n && (perr[n - 1] == '\n' || perr[n - 1] == ' '))
            perr[--n] = '\0';
        const char *why = perr ? perr : "out of memory";
        h->set_error(err,
                     "setting \"conninfo\": not a libpq connection "
                     "string: %.*s",
                     (int)pg_utf8_prefix(why, 300), why);
        PQfreemem(perr);
        return TM_INVALID;
    }
    PQconninfoFree(opts);
    return check_columns(h, config, out, err);
}
