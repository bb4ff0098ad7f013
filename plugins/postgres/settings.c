/* The sink's settings, read through the host so that every sink reports a
 * bad setting the same way. Every refusal names the key. */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "pg_sink.h"

static const char *const KNOWN[] = {"conninfo",
                                    "schema",
                                    "table",
                                    "create",
                                    "mode",
                                    "connect_timeout_s",
                                    "statement_timeout_ms",
                                    "dedup_retention_s",
                                    "shared_table"};
#define NKNOWN (sizeof KNOWN / sizeof KNOWN[0])

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

static tm_status required_string(const tm_host_api *h, const tm_settings *set,
                                 const char *key, const char *what,
                                 const char **out, tm_error *err) {
    int rc = h->setting_string(set, key, out, err);
    if (rc < 0)
        return TM_INVALID;
    if (rc == 0 || !*out || !**out) {
        h->set_error(err, "setting \"%s\": required: %s", key, what);
        return TM_INVALID;
    }
    return TM_OK;
}

static tm_status int_in(const tm_host_api *h, const tm_settings *set,
                        const char *key, int64_t min, int64_t max, int64_t *out,
                        tm_error *err) {
    int64_t v;
    int rc = h->setting_int(set, key, &v, err);
    if (rc < 0)
        return TM_INVALID;
    if (rc == 1) {
        if (v < min || v > max) {
            h->set_error(err,
                         "setting \"%s\": %lld is out of range (%lld to %lld)",
                         key, (long long)v, (long long)min, (long long)max);
            return TM_INVALID;
        }
        *out = v;
    }
    return TM_OK;
}

static tm_status check_columns(const tm_host_api *h,
                               const tm_sink_config *config,
                               const pg_settings *out, tm_error *err) {
    size_t keys = 0;
    if (config->ncolumns == 0) {
        h->set_error(err, "the mapping has no columns");
        return TM_INVALID;
    }
    for (size_t i = 0; i < config->ncolumns; i++) {
        const tm_column *c = TM_CELEM(tm_column, config->columns, i);
        if (!c->name || !*c->name || !pg_type_sql(c->type)) {
            h->set_error(err, "column %zu: no name or an unknown type", i);
            return TM_INVALID;
        }
        if (strncasecmp(c->name, PG_HIDDEN_PREFIX, strlen(PG_HIDDEN_PREFIX)) ==
            0) {
            h->set_error(err,
                         "column \"%s\": names starting with \"%s\" are "
                         "the sink's own (hidden coordinate columns)",
                         c->name, PG_HIDDEN_PREFIX);
            return TM_INVALID;
        }
        keys += c->key != 0;
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
    const tm_settings *set = config->settings;
    const char *mode = NULL;
    memset(out, 0, sizeof *out);
    out->schema = "public";
    out->create = 1;
    out->mode = PG_APPEND;
    out->connect_timeout_s = 10;
    out->statement_timeout_ms = 30000;
    if (h->settings_check_keys(set, KNOWN, NKNOWN, err) != 0)
        return TM_INVALID;
    if (required_string(h, set, "conninfo",
                        "a libpq connection string (keywords or URI)",
                        &out->conninfo, err) != TM_OK ||
        required_string(h, set, "table", "the target table's name", &out->table,
                        err) != TM_OK)
        return TM_INVALID;
    int rc = h->setting_string(set, "schema", &out->schema, err);
    if (rc < 0)
        return TM_INVALID;
    if (rc == 1 && (!out->schema || !*out->schema)) {
        h->set_error(err, "setting \"schema\": must not be empty");
        return TM_INVALID;
    }
    /* A longer name would be cut by the server, so two settings could name
     * one table while the owners registry, keyed by the setting, sees two. */
    if (strlen(out->table) > PG_NAME_MAX || strlen(out->schema) > PG_NAME_MAX) {
        int t = strlen(out->table) > PG_NAME_MAX;
        h->set_error(err,
                     "setting \"%s\": %zu bytes; PostgreSQL names hold at "
                     "most %d bytes (longer ones are cut)",
                     t ? "table" : "schema",
                     strlen(t ? out->table : out->schema), PG_NAME_MAX);
        return TM_INVALID;
    }
    if (h->setting_bool(set, "create", &out->create, err) < 0 ||
        h->setting_bool(set, "shared_table", &out->shared_table, err) < 0 ||
        h->setting_string(set, "mode", &mode, err) < 0)
        return TM_INVALID;
    if (mode && strcmp(mode, "upsert") == 0) {
        out->mode = PG_UPSERT;
    } else if (mode && strcmp(mode, "append") != 0) {
        h->set_error(err,
                     "setting \"mode\": \"%.*s\" is not one of append, "
                     "upsert",
                     (int)pg_utf8_prefix(mode, 100), mode);
        return TM_INVALID;
    }
    if (int_in(h, set, "connect_timeout_s", 1, 3600, &out->connect_timeout_s,
               err) != TM_OK ||
        int_in(h, set, "statement_timeout_ms", 0, INT32_MAX,
               &out->statement_timeout_ms, err) != TM_OK ||
        int_in(h, set, "dedup_retention_s", 1, INT64_MAX / 1000,
               &out->retention_s, err) != TM_OK)
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
