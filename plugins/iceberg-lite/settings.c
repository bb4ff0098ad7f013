/* The sink's settings, declared as a table: the host checks the keys,
 * types, bounds and allowed values and fills ice_settings, so that every
 * sink reports a bad setting the same way (naming the JSON path); the
 * mapping is checked here. And validate(): the same checks plus the
 * table's shape, changing nothing. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <tidemark/columns.h>

#include "catalog.h"
#include "ice_sink.h"
#include "maint.h"

/* Files below this would make a table of many tiny files; above, one batch
 * is held in memory per file anyway. */
#define MIN_FILE_SIZE (64 * 1024)
#define MAX_FILE_SIZE (INT64_C(1) << 34)
/* Snapshots kept by each commit (older ones expired, see maint_expire.c):
 * the metadata file is rewritten whole by every commit, so its size is
 * the commit's cost. 0 keeps them all. */
#define DEFAULT_KEEP_SNAPSHOTS 100
#define MAX_KEEP_SNAPSHOTS     1000000
/* The partition setting's longest text. */
#define ICE_PARTITION_TEXT_MAX 4096

/* A catalog URI's longest text (a file path, or a connection URI). */
#define ICE_CATALOG_URI_MAX 4096

/* The codecs "compression" takes, by the names pq_codec_parse() knows;
 * zstd first: the index of the default (PQ_CODEC_DEFAULT). */
static const char *const CODECS[] = {"zstd", "snappy", "none", NULL};

const tm_setting ICE_SETTINGS[] = {
    TM_SETTING_STRING("path", ice_settings, path, TM_SETTING_REQUIRED, NULL, 1,
                      0, "the table's directory on the local file system"),
    TM_SETTING_BOOL("create", ice_settings, create, 1,
                    "create the table when the directory holds none"),
    TM_SETTING_INT("target_file_size", ice_settings, target_file_size, 0,
                   INT64_C(128) << 20, MIN_FILE_SIZE, MAX_FILE_SIZE,
                   "bytes per Parquet data file before a batch rolls to the "
                   "next"),
    TM_SETTING_BOOL("fsync", ice_settings, fsync, 1,
                    "false weakens the durability of committed batches"),
    TM_SETTING_INT("keep_snapshots", ice_settings, keep_snapshots, 0,
                   DEFAULT_KEEP_SNAPSHOTS, 0, MAX_KEEP_SNAPSHOTS,
                   "snapshots kept in the metadata (0 keeps all)"),
    TM_SETTING_ENUM("compression", ice_settings, codec, 0, CODECS, 0,
                    "the Parquet pages' codec"),
    TM_SETTING_STRING("partition", ice_settings, partition, 0, "", 0,
                      ICE_PARTITION_TEXT_MAX,
                      "the partition spec: \"transform(column), ...\" "
                      "(identity, bucket[N], truncate[W], year, month, day, "
                      "hour); \"\" unpartitioned"),
    TM_SETTING_BOOL("shared_table", ice_settings, shared_table, 0,
                    "true: other connectors write this table too (else a "
                    "table holding another connector's markers is "
                    "refused)"),
    TM_SETTING_STRING("catalog_uri", ice_settings, catalog_uri, 0, "", 0,
                      ICE_CATALOG_URI_MAX,
                      "an Iceberg SQL catalog holding the table, "
                      "\"sqlite:///FILE\" as pyiceberg's SqlCatalog takes it; "
                      "\"\" none (versions are v<N>.metadata.json files)"),
    TM_SETTING_STRING("catalog_name", ice_settings, catalog_name, 0, "", 0,
                      ICE_CATALOG_NAME_MAX,
                      "the catalog's name (its rows' catalog_name)"),
    TM_SETTING_STRING("catalog_namespace", ice_settings, catalog_namespace, 0,
                      "", 0, ICE_CATALOG_NAME_MAX,
                      "the table's namespace in the catalog (levels joined "
                      "by '.')"),
    TM_SETTING_STRING("catalog_table", ice_settings, catalog_table, 0, "", 0,
                      ICE_CATALOG_NAME_MAX, "the table's name in the catalog"),
    TM_SETTING_INT("catalog_lock_timeout_ms", ice_settings,
                   catalog_lock_timeout_ms, 0, ICE_CATALOG_LOCK_TIMEOUT_MS,
                   ICE_CATALOG_LOCK_TIMEOUT_MIN_MS,
                   ICE_CATALOG_LOCK_TIMEOUT_MAX_MS,
                   "PostgreSQL catalog: the longest a statement (the "
                   "commit's swap) waits on a lock or at all before the "
                   "batch is retried; bounded so that a waiting swap cannot "
                   "outlive vacuum's age floor"),
    TM_SETTING_BOOL("maintenance", ice_settings, maintenance, 0,
                    "true: compact small files and vacuum unreferenced ones "
                    "between batches, each step its own commit "
                    "(docs/iceberg-lite.md, \"Background maintenance\")"),
    TM_SETTING_INT("maintenance_min_files", ice_settings, maint_min_files, 0,
                   16, 2, 100000,
                   "files smaller than half of target_file_size that start "
                   "a compaction"),
    TM_SETTING_INT("maintenance_grace_seconds", ice_settings, maint_grace_s, 0,
                   600, 0, 86400,
                   "how long a file stays after this process first found "
                   "no version naming it (a reader of an older version "
                   "reads on that long)"),
    TM_SETTING_INT("maintenance_min_age_seconds", ice_settings, maint_min_age_s,
                   0, ICE_VACUUM_MIN_AGE_S, 0, 86400,
                   "vacuum never deletes a file written less than this long "
                   "ago (another host's commit in flight: a writer publishes "
                   "nothing older than 240 s); below the default only with "
                   "one writer"),
    TM_SETTING_INT("maintenance_vacuum_interval_seconds", ice_settings,
                   maint_vacuum_every_s, 0, 300, 0, 86400,
                   "seconds between two vacuums of the connector (0: after "
                   "every batch that did not compact)"),
    TM_SETTING_END,
};

/* The catalog settings across each other: all four or none, each as the
 * catalog's columns hold it. */
static tm_status check_catalog(const tm_host_api *h, const ice_settings *set,
                               tm_error *err) {
    const char *keys[] = {"catalog_name", "catalog_namespace", "catalog_table"};
    const char *vals[] = {set->catalog_name, set->catalog_namespace,
                          set->catalog_table};
    for (size_t i = 0; i < 3; i++) {
        if (!*set->catalog_uri && *vals[i]) {
            h->set_error(err,
                         "$.sink.settings.%s: given without "
                         "$.sink.settings.catalog_uri (the catalog holding "
                         "the table)",
                         keys[i]);
            return TM_INVALID;
        }
        if (*set->catalog_uri && !*vals[i]) {
            h->set_error(err,
                         "$.sink.settings.%s: required with "
                         "$.sink.settings.catalog_uri",
                         keys[i]);
            return TM_INVALID;
        }
    }
    if (!*set->catalog_uri)
        return TM_OK;
    char why[512];
    const char *key;
    ice_catalog_ref ref = {set->catalog_uri, set->catalog_name,
                           set->catalog_namespace, set->catalog_table,
                           (int)set->catalog_lock_timeout_ms};
    if (ice_catalog_check_ref(&ref, &key, why, sizeof why) != 0) {
        h->set_error(err, "$.sink.settings.%s: %s", key, why);
        return TM_INVALID;
    }
    return TM_OK;
}

tm_status ice_settings_catalog(const tm_host_api *h, const ice_settings *set,
                               ice_table *t, int create, tm_error *err) {
    char why[1024];
    if (!*set->catalog_uri)
        return TM_OK;
    ice_catalog_ref ref = {set->catalog_uri, set->catalog_name,
                           set->catalog_namespace, set->catalog_table,
                           (int)set->catalog_lock_timeout_ms};
    if (ice_table_use_catalog(t, &ref, create, why, sizeof why) != 0) {
        h->set_error(err, "$.sink.settings.catalog_uri: %s", why);
        return TM_INVALID;
    }
    return TM_OK;
}

tm_status ice_settings_load(const tm_host_api *h, const tm_sink_config *config,
                            ice_settings *out, tm_error *err) {
    /* Keys, types, bounds and allowed values: the host, from the table. */
    if (h->settings_fill(config->settings, ICE_SETTINGS, out, sizeof *out,
                         err) != 0)
        return TM_INVALID;
    if (pq_codec_parse(CODECS[out->codec], &out->compression) != 0) {
        h->set_error(err, "compression \"%s\": not a codec of pq_codec.c",
                     CODECS[out->codec]);
        return TM_FATAL;
    }
    if (config->flags & TM_CONFIG_DEDUP) {
        /* The host refuses this first; a caller that does not still gets
         * a clear answer instead of silently missing duplicates. */
        h->set_error(err, "dedup: the iceberg_lite sink has no business-key "
                          "dedup (no TM_CAP_DEDUP); remove $.dedup");
        return TM_INVALID;
    }
    if (check_catalog(h, out, err) != TM_OK)
        return TM_INVALID;
    if (out->maintenance && out->keep_snapshots == 0) {
        /* Every snapshot kept names every file ever written: nothing
         * would ever become unreferenced, so nothing could be removed. */
        h->set_error(err, "$.sink.settings.keep_snapshots: 0 (keep every "
                          "snapshot) with \"maintenance\": true: nothing "
                          "would ever be vacuumed; keep a number of them");
        return TM_INVALID;
    }
    if (config->ncolumns == 0) {
        h->set_error(err, "the mapping has no columns");
        return TM_INVALID;
    }
    /* Any type the SDK names: every one has an Iceberg type. The prefix in
     * any case, as the other sinks: DuckDB matches names without case. */
    char why[256];
    if (!tm_columns_makeable(config->columns, config->ncolumns,
                             ICE_HIDDEN_PREFIX, tm_type_name, why,
                             sizeof why)) {
        h->set_error(err, "%s", why);
        return TM_INVALID;
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
    else if (rc == ICE_PATH_NO_TABLE && *set->catalog_uri)
        h->set_error(err,
                     "setting \"catalog_table\": catalog \"%s\" has no "
                     "table %s.%s and \"create\" is false",
                     set->catalog_name, set->catalog_namespace,
                     set->catalog_table);
    else if (rc == ICE_PATH_NO_TABLE)
        h->set_error(err,
                     "setting \"path\": %s holds no Iceberg table and "
                     "\"create\" is false",
                     set->path);
    else
        h->set_error(err, "setting \"path\": %s", why);
    return TM_INVALID;
}

tm_status ice_path_uri_check(const tm_host_api *h, const char *path,
                             tm_error *err) {
    char why[512];
    if (ice_table_uri_safe(path, why, sizeof why) == 0)
        return TM_OK;
    h->set_error(err, "$.sink.settings.path: %s", why);
    return TM_INVALID;
}

/* What open checks of the table, changing nothing. */
static tm_status validate_table(ice_sink *s, tm_error *err) {
    const tm_host_api *host = s->host;
    char why[512];
    /* What open checks first, the same function (it changes nothing). */
    int rc = ice_table_check_path(s->set.path, s->set.create, why, sizeof why);
    if (rc != 0)
        return ice_path_refused(host, &s->set, rc, why, err);
    if (access(s->set.path, F_OK) != 0) /* open() creates the table */
        return ice_path_uri_check(host, s->set.path, err);
    rc = ice_table_init(&s->table, s->set.path, 0, s->set.fsync, why,
                        sizeof why);
    if (rc != 0)
        return ice_path_refused(host, &s->set, rc, why, err);
    /* The catalog opened without create: one not there yet has no row. */
    tm_status r = ice_settings_catalog(host, &s->set, &s->table, 0, err);
    if (r != TM_OK) {
        ice_table_free(&s->table);
        return r;
    }
    rc = ice_table_refresh(&s->table, why, sizeof why);
    if (rc < 0) {
        r = ice_path_refused(host, &s->set, rc, why, err);
    } else if (rc == 1 && !s->set.create) {
        r = ice_path_refused(host, &s->set, ICE_PATH_NO_TABLE, why, err);
    } else if (rc == 1) {
        r = ice_path_uri_check(host, s->table.root, err);
    } else if (rc == 0) {
        r = ice_schema_check(s, err);
        if (r == TM_OK)
            r = ice_partition_check(s, err);
        if (r == TM_OK)
            r = ice_check_owner(s, TM_INVALID, err);
    }
    ice_table_free(&s->table);
    return r;
}

tm_status ice_validate(const tm_host_api *host, const tm_sink_config *config,
                       tm_error *err) {
    ice_sink s = {.host = host, .config = config};
    tm_status r = ice_settings_load(host, config, &s.set, err);
    if (r != TM_OK)
        return r;
    /* The mapping's schema and the partition setting against it, whether
     * or not the table exists yet. */
    r = ice_schema_build(&s, err);
    if (r == TM_OK)
        r = ice_partition_build(&s, err);
    if (r == TM_OK)
        r = validate_table(&s, err);
    ice_partition_free(&s);
    ice_schema_free(&s);
    return r;
}
