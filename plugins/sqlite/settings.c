/* The sink's settings, read through the host so that every sink reports a
 * bad setting the same way (the host names the JSON path). Every refusal
 * names the key and, for enumerations, the allowed values. */
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "sqlite_sink.h"

static const char *const KNOWN[] = {"path",
                                    "table",
                                    "create",
                                    "mode",
                                    "synchronous",
                                    "busy_timeout_ms",
                                    "dedup_retention_s",
                                    "shared_table"};
#define NKNOWN (sizeof KNOWN / sizeof KNOWN[0])

/* A required non-empty string. */
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

/* An optional non-negative integer; *out keeps its default when absent. */
static tm_status nonneg_int(const tm_host_api *h, const tm_settings *set,
                            const char *key, int64_t max, int64_t *out,
                            tm_error *err) {
    int64_t v;
    int rc = h->setting_int(set, key, &v, err);
    if (rc < 0)
        return TM_INVALID;
    if (rc == 1) {
        if (v < 0 || v > max) {
            h->set_error(err,
                         "setting \"%s\": %lld is out of range (0 to %lld)",
                         key, (long long)v, (long long)max);
            return TM_INVALID;
        }
        *out = v;
    }
    return TM_OK;
}

/* Checks the column mapping: hidden column names are ours, upsert needs
 * key columns. */
static tm_status check_columns(const tm_host_api *h,
                               const tm_sink_config *config,
                               const sq_settings *out, tm_error *err) {
    size_t keys = 0;
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
    for (size_t i = 0; i < config->ncolumns; i++) {
        const tm_column *c = TM_CELEM(tm_column, config->columns, i);
        if (!c->name || !*c->name || !sq_type_sql(c->type)) {
            h->set_error(err, "column %zu: no name or an unknown type", i);
            return TM_INVALID;
        }
        if (strncasecmp(c->name, SQ_HIDDEN_PREFIX, strlen(SQ_HIDDEN_PREFIX)) ==
            0) {
            h->set_error(err,
                         "column \"%s\": names starting with \"%s\" are "
                         "the sink's own (hidden coordinate columns)",
                         c->name, SQ_HIDDEN_PREFIX);
            return TM_INVALID;
        }
        keys += c->key != 0;
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
    const tm_settings *set = config->settings;
    const char *mode = NULL, *sync = NULL;
    memset(out, 0, sizeof *out);
    out->create = 1;
    out->mode = SQ_APPEND;
    out->synchronous = "FULL";
    out->busy_timeout_ms = 5000;
    if (h->settings_check_keys(set, KNOWN, NKNOWN, err) != 0)
        return TM_INVALID;
    if (required_string(h, set, "path", "the SQLite database file", &out->path,
                        err) != TM_OK ||
        required_string(h, set, "table", "the target table's name", &out->table,
                        err) != TM_OK)
        return TM_INVALID;
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
    if (h->setting_bool(set, "create", &out->create, err) < 0 ||
        h->setting_bool(set, "shared_table", &out->shared_table, err) < 0 ||
        h->setting_string(set, "mode", &mode, err) < 0 ||
        h->setting_string(set, "synchronous", &sync, err) < 0)
        return TM_INVALID;
    if (mode && strcmp(mode, "upsert") == 0) {
        out->mode = SQ_UPSERT;
    } else if (mode && strcmp(mode, "append") != 0) {
        h->set_error(err,
                     "setting \"mode\": \"%.100s\" is not one of append, "
                     "upsert",
                     mode);
        return TM_INVALID;
    }
    if (sync) {
        static const char *const SYNC[] = {"FULL", "NORMAL", "OFF"};
        size_t k;
        for (k = 0; k < 3 && strcasecmp(sync, SYNC[k]) != 0; k++)
            ;
        if (k == 3) {
            h->set_error(err,
                         "setting \"synchronous\": \"%.100s\" is not one of "
                         "FULL, NORMAL, OFF",
                         sync);
            return TM_INVALID;
        }
        out->synchronous = SYNC[k];
    }
    if (nonneg_int(h, set, "busy_timeout_ms", INT32_MAX, &out->busy_timeout_ms,
                   err) != TM_OK ||
        nonneg_int(h, set, "dedup_retention_s", INT64_MAX / 1000,
                   &out->retention_s, err) != TM_OK)
        return TM_INVALID;
    if (out->retention_s == 0) {
        int64_t v;
        if (h->setting_int(set, "dedup_retention_s", &v, err) == 1) {
            h->set_error(err, "setting \"dedup_retention_s\": 0 would keep "
                              "no key at all; omit it to keep keys for ever");
            return TM_INVALID;
        }
    }
    return check_columns(h, config, out, err);
}
