/* The sink's settings, read through the host so that every sink reports a
 * bad setting the same way (the host names the JSON path), and validate():
 * the same checks plus the table's shape, changing nothing. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ice_sink.h"

static const char *const KNOWN[] = {
    "path",           "create",       "target_file_size", "fsync",
    "keep_snapshots", "shared_table", "compression"};
#define NKNOWN (sizeof KNOWN / sizeof KNOWN[0])

/* Files below this would make a table of many tiny files; above, one batch
 * is held in memory per file anyway. */
#define MIN_FILE_SIZE (64 * 1024)
#define MAX_FILE_SIZE (INT64_C(1) << 34)
/* Snapshots kept by each commit (older ones expired, see maint_expire.c):
 * the metadata file is rewritten whole by every commit, so its size is
 * the commit's cost. 0 keeps them all. */
#define DEFAULT_KEEP_SNAPSHOTS 100
#define MAX_KEEP_SNAPSHOTS     1000000

tm_status ice_settings_load(const tm_host_api *h, const tm_sink_config *config,
                            ice_settings *out, tm_error *err) {
    const tm_settings *set = config->settings;
    memset(out, 0, sizeof *out);
    out->create = 1;
    out->fsync = 1;
    out->target_file_size = INT64_C(128) << 20; /* Iceberg's default */
    out->keep_snapshots = DEFAULT_KEEP_SNAPSHOTS;
    out->compression = PQ_CODEC_DEFAULT;
    if (h->settings_check_keys(set, KNOWN, NKNOWN, err) != 0)
        return TM_INVALID;
    int rc = h->setting_string(set, "path", &out->path, err);
    if (rc < 0)
        return TM_INVALID;
    if (rc == 0 || !out->path || !*out->path) {
        h->set_error(err, "setting \"path\": required: the table's "
                          "directory on the local file system");
        return TM_INVALID;
    }
    if (h->setting_bool(set, "create", &out->create, err) < 0 ||
        h->setting_bool(set, "fsync", &out->fsync, err) < 0 ||
        h->setting_bool(set, "shared_table", &out->shared_table, err) < 0 ||
        h->setting_int(set, "target_file_size", &out->target_file_size, err) <
            0 ||
        h->setting_int(set, "keep_snapshots", &out->keep_snapshots, err) < 0)
        return TM_INVALID;
    const char *codec = NULL;
    rc = h->setting_string(set, "compression", &codec, err);
    if (rc < 0)
        return TM_INVALID;
    if (rc == 1 && pq_codec_parse(codec, &out->compression) != 0) {
        h->set_error(err,
                     "setting \"compression\" (%s.compression): \"%s\" is "
                     "not a codec of this sink (expected %s)",
                     ICE_SETTINGS_PATH, codec, PQ_CODEC_NAMES);
        return TM_INVALID;
    }
    if (out->keep_snapshots < 0 || out->keep_snapshots > MAX_KEEP_SNAPSHOTS) {
        h->set_error(err,
                     "setting \"keep_snapshots\": %lld is out of range (0 "
                     "keeps every snapshot, else 1 to %d)",
                     (long long)out->keep_snapshots, MAX_KEEP_SNAPSHOTS);
        return TM_INVALID;
    }
    if (out->target_file_size < MIN_FILE_SIZE ||
        out->target_file_size > MAX_FILE_SIZE) {
        h->set_error(err,
                     "setting \"target_file_size\": %lld is out of range "
                     "(%d to %lld bytes)",
                     (long long)out->target_file_size, MIN_FILE_SIZE,
                     (long long)MAX_FILE_SIZE);
        return TM_INVALID;
    }
    if (config->flags & TM_CONFIG_DEDUP) {
        /* The host refuses this first; a caller that does not still gets
         * a clear answer instead of silently missing duplicates. */
        h->set_error(err, "dedup: the iceberg_lite sink has no business-key "
                          "dedup (no TM_CAP_DEDUP); remove $.dedup");
        return TM_INVALID;
    }
    if (config->ncolumns == 0) {
        h->set_error(err, "the mapping has no columns");
        return TM_INVALID;
    }
    for (size_t i = 0; i < config->ncolumns; i++) {
        const tm_column *c = TM_CELEM(tm_column, config->columns, i);
        if (!c->name || !*c->name || c->type < TM_TYPE_TEXT ||
            c->type > TM_TYPE_BYTES) {
            h->set_error(err, "column %zu: no name or an unknown type", i);
            return TM_INVALID;
        }
        if (strncmp(c->name, ICE_HIDDEN_PREFIX, strlen(ICE_HIDDEN_PREFIX)) ==
            0) {
            h->set_error(err,
                         "column \"%s\": names starting with \"%s\" are the "
                         "sink's own (hidden coordinate columns)",
                         c->name, ICE_HIDDEN_PREFIX);
            return TM_INVALID;
        }
    }
    return TM_OK;
}

tm_status ice_path_refused(const tm_host_api *h, const ice_settings *set,
                           int rc, const char *why, tm_error *err) {
    if (rc == ICE_PATH_MISSING)
        h->set_error(err,
                     "setting \"path\": %s does not exist and \"create\" "
                     "is false",
                     set->path);
    else if (rc == ICE_PATH_NO_TABLE)
        h->set_error(err,
                     "setting \"path\": %s holds no Iceberg table and "
                     "\"create\" is false",
                     set->path);
    else
        h->set_error(err, "setting \"path\": %s", why);
    return TM_INVALID;
}

tm_status ice_validate(const tm_host_api *host, const tm_sink_config *config,
                       tm_error *err) {
    ice_sink s = {.host = host, .config = config};
    tm_status r = ice_settings_load(host, config, &s.set, err);
    if (r != TM_OK)
        return r;
    char why[512];
    /* What open checks first, the same function (it changes nothing). */
    int rc = ice_table_check_path(s.set.path, s.set.create, why, sizeof why);
    if (rc != 0)
        return ice_path_refused(host, &s.set, rc, why, err);
    if (access(s.set.path, F_OK) != 0)
        return TM_OK; /* open() creates the table */
    rc = ice_table_init(&s.table, s.set.path, 0, s.set.fsync, why, sizeof why);
    if (rc != 0)
        return ice_path_refused(host, &s.set, rc, why, err);
    rc = ice_table_refresh(&s.table, why, sizeof why);
    if (rc < 0) {
        r = ice_path_refused(host, &s.set, rc, why, err);
    } else if (rc == 1 && !s.set.create) {
        r = ice_path_refused(host, &s.set, ICE_PATH_NO_TABLE, why, err);
    } else if (rc == 0) {
        r = ice_schema_build(&s, err);
        if (r == TM_OK)
            r = ice_schema_check(&s, err);
        if (r == TM_OK)
            r = ice_check_owner(&s, TM_INVALID, err);
        ice_schema_free(&s);
    }
    ice_table_free(&s.table);
    return r;
}
