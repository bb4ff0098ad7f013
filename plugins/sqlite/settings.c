/* The sink's settings, declared as a table: the host checks the keys,
 * types, bounds and allowed values and fills sq_settings, so that every
 * sink reports a bad setting the same way (naming the JSON path). What
 * the table cannot say is checked here: the path is a file's, the mapping
 * suits the table. */
#include <stdint.h>
#include <string.h>
#include <tidemark/columns.h>
#include <sys/stat.h>

#include "sqlite_sink.h"

/* The order of MODES is sq_mode's. */
static const char *const MODES[] = {"append", "upsert", NULL};
static const char *const SYNCS[] = {"FULL", "NORMAL", "OFF", NULL};
/* The order of KEY_STORES is sq_settings.keys_rows's. */
static const char *const KEY_STORES[] = {"memory", "rows", NULL};

const tm_setting SQ_SETTINGS[] = {
    TM_SETTING_STRING("path", sq_settings, path, TM_SETTING_REQUIRED, NULL, 1,
                      0, "the SQLite database file"),
    TM_SETTING_STRING("table", sq_settings, table, TM_SETTING_REQUIRED, NULL, 1,
                      0, "the target table's name"),
    TM_SETTING_BOOL("create", sq_settings, create, 1,
                    "create the table (and the database) when missing"),
    TM_SETTING_ENUM("mode", sq_settings, mode, 0, MODES, SQ_APPEND,
                    "append rows, or replace them by the key columns"),
    TM_SETTING_ENUM("synchronous", sq_settings, sync, TM_SETTING_ICASE, SYNCS,
                    0,
                    "anything but FULL weakens the durability of committed "
                    "batches"),
    TM_SETTING_INT("busy_timeout_ms", sq_settings, busy_timeout_ms, 0, 5000, 0,
                   INT32_MAX, "how long a commit or claim waits for a lock"),
    TM_SETTING_INT("dedup_retention_s", sq_settings, retention_s,
                   TM_SETTING_NO_DEFAULT, 0, 1, INT64_MAX / 1000,
                   "forget business keys this long after their record "
                   "timestamp; absent: keep for ever"),
    TM_SETTING_ENUM("dedup_keys", sq_settings, keys_rows, 0, KEY_STORES, 0,
                    "business keys held in memory (one packed row of "
                    "digests per batch), or one row per key"),
    TM_SETTING_BOOL("shared_table", sq_settings, shared_table, 0,
                    "other connectors write the table too (each of them must "
                    "say so)"),
    TM_SETTING_END,
};

/* Checks the column mapping: hidden column names are ours, upsert needs
 * key columns. */
static tm_status check_columns(const tm_host_api *h,
                               const tm_sink_config *config,
                               const sq_settings *out, tm_error *err) {
    size_t keys = 0;
    if (config->flags & TM_CONFIG_SCHEMA_COLUMNS) {
        /* each batch brings them (evolve.c); change events need upsert */
        if (out->mode != SQ_UPSERT) {
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
    int limit = sq_column_limit();
    if (limit < 0) {
        h->set_error(err, "cannot read SQLite's column limit (out of memory?)");
        return TM_INVALID;
    }
    if (limit <= SQ_NHIDDEN || config->ncolumns > (size_t)limit - SQ_NHIDDEN) {
        /* Counted before anything else looks at the columns: the table
         * could never be created or written. */
        h->set_error(err,
                     "the mapping has %zu columns; with the sink's %d hidden "
                     "ones that is above the %d columns an SQLite table may "
                     "have (SQLITE_MAX_COLUMN of SQLite %s): at most %d "
                     "mapped columns",
                     config->ncolumns, SQ_NHIDDEN, limit, sqlite3_libversion(),
                     limit - SQ_NHIDDEN);
        return TM_INVALID;
    }
    char why[256];
    if (!tm_columns_makeable(config->columns, config->ncolumns,
                             SQ_HIDDEN_PREFIX, sq_type_sql, why, sizeof why)) {
        h->set_error(err, "%s", why);
        return TM_INVALID;
    }
    for (size_t i = 0; i < config->ncolumns; i++)
        keys += TM_CELEM(tm_column, config->columns, i)->key != 0;
    if ((config->flags & TM_CONFIG_CDC) && out->mode != SQ_UPSERT) {
        h->set_error(err, "setting \"mode\": a change-data-capture mapping "
                          "($.mapping.format) needs \"upsert\": its events "
                          "replace and delete rows by their key");
        return TM_INVALID;
    }
    if (out->mode == SQ_UPSERT && keys == 0) {
        h->set_error(err,
                     "setting \"mode\": \"upsert\" needs key columns "
                     "(\"key\": true on at least one column); none has it");
        return TM_INVALID;
    }
    return TM_OK;
}

tm_status sq_settings_load(const tm_host_api *h, const tm_sink_config *config,
                           sq_settings *out, tm_error *err) {
    /* Keys, types, bounds and allowed values: the host, from the table. */
    if (h->settings_fill(config->settings, SQ_SETTINGS, out, sizeof *out,
                         err) != 0)
        return TM_INVALID;
    out->synchronous = SYNCS[out->sync];
    /* The sink checks before every commit that the path still names the
     * open file (fileid.c): it must be a file's path, not a URI (SQLite
     * may open it, the check could never find it) nor a directory (it can
     * never be opened: a setting to fix, not a store to wait for). */
    struct stat st;
    if (strncmp(out->path, "file:", 5) == 0) {
        h->set_error(err,
                     "setting \"path\": \"%.200s\" is an SQLite URI; give "
                     "the database file's path",
                     out->path);
        return TM_INVALID;
    }
    if (stat(out->path, &st) == 0 && S_ISDIR(st.st_mode)) {
        h->set_error(err,
                     "setting \"path\": %.200s is a directory; expected the "
                     "database file (a name inside it)",
                     out->path);
        return TM_INVALID;
    }
    return check_columns(h, config, out, err);
}
