/* The iceberg-lite sink: the callback table, open, close, interrupt
 * (docs/iceberg-lite.md): append-only,
 * optionally partitioned Apache Iceberg v2 tables on the local file system that
 * pyiceberg, pyarrow and DuckDB read; the current snapshot's summary
 * carries the markers; a commit is the atomic creation of the next metadata
 * version. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ice_sink.h"

/* Creates v1 when the directory holds no table yet (another writer
 * creating it at the same time is fine: link() lets one of us win). */
static tm_status create_table(ice_sink *s, tm_error *err) {
    char why[512], tmp[4096];
    json_t *meta = ice_meta_initial(&s->table, s->fields, (int64_t)s->ncols,
                                    s->spec_fields);
    if (!meta) {
        s->host->set_error(err, "out of memory (table metadata)");
        return TM_FATAL;
    }
    int rc = ice_meta_stage(&s->table, meta, tmp, why, sizeof why);
    if (rc == 0)
        rc = ice_meta_link(&s->table, meta, tmp, why, sizeof why);
    json_decref(meta);
    if (rc < 0) {
        s->host->set_error(err, "creating the table in %s: %s", s->set.path,
                           why);
        return TM_RETRY;
    }
    if (rc == 0 && ice_table_write_hint(&s->table, why, sizeof why) != 0)
        s->host->log(s->config->host_ctx, TM_LOG_WARN,
                     "version-hint.text not written: %s", why);
    return ice_refresh(s, err);
}

static tm_status open_table(ice_sink *s, tm_error *err) {
    char why[512];
    /* A table to create (no metadata/ yet): refused before its
     * directories are made. */
    char meta_dir[4200];
    snprintf(meta_dir, sizeof meta_dir, "%s/metadata", s->set.path);
    if (s->set.create && access(meta_dir, F_OK) != 0 &&
        ice_path_uri_check(s->host, s->set.path, err) != TM_OK)
        return TM_INVALID;
    int rc = ice_table_init(&s->table, s->set.path, s->set.create, s->set.fsync,
                            why, sizeof why);
    if (rc != 0)
        return ice_path_refused(s->host, &s->set, rc, why, err);
    tm_status r =
        ice_settings_catalog(s->host, &s->set, &s->table, s->set.create, err);
    if (r != TM_OK)
        return r;
    rc = ice_table_refresh(&s->table, why, sizeof why);
    if (rc < 0) {
        s->host->set_error(err, "setting \"%s\": %s",
                           s->table.cat ? "catalog_uri" : "path", why);
        return TM_FATAL;
    }
    if (rc == 1 && !s->set.create)
        return ice_path_refused(s->host, &s->set, ICE_PATH_NO_TABLE, why, err);
    if (rc == 1 && ice_path_uri_check(s->host, s->table.root, err) != TM_OK)
        return TM_INVALID;
    r = rc == 1 ? create_table(s, err) : TM_OK;
    if (r == TM_OK)
        r = ice_schema_check(s, err);
    if (r == TM_OK)
        r = ice_partition_check(s, err);
    return r == TM_OK ? ice_check_owner(s, TM_INVALID, err) : r;
}

static void ice_close(void *sink) {
    ice_sink *s = sink;
    if (!s)
        return;
    ice_table_free(&s->table);
    ice_auto_free(s);
    ice_partition_free(s);
    ice_schema_free(s);
    free(s);
}

static tm_status ice_open(const tm_host_api *host, const tm_sink_config *config,
                          void **sink, tm_error *err) {
    ice_settings set;
    tm_status r = ice_settings_load(host, config, &set, err);
    if (r != TM_OK)
        return r;
    ice_sink *s = calloc(1, sizeof *s);
    if (!s) {
        host->set_error(err, "out of memory");
        return TM_FATAL;
    }
    s->host = host;
    s->config = config;
    s->set = set;
    atomic_init(&s->interrupted, 0);
    r = ice_schema_build(s, err);
    if (r == TM_OK)
        r = ice_partition_build(s, err);
    if (r == TM_OK)
        r = open_table(s, err);
    if (r == TM_OK)
        ice_auto_init(s);
    if (r != TM_OK) {
        ice_close(s);
        return r;
    }
    if (!set.fsync)
        host->log(config->host_ctx, TM_LOG_WARN,
                  "fsync=false: an OS crash or power loss may lose or "
                  "corrupt batches already reported committed "
                  "(docs/iceberg-lite.md)");
    *sink = s;
    return TM_OK;
}

/* Any thread, never blocks: the commit looks at the flag between steps. */
static void ice_interrupt(void *sink) {
    ice_sink *s = sink;
    atomic_store(&s->interrupted, 1);
}

TM_SINK_DEFINE(.name = "iceberg_lite", .version = "1.0.0",
               .capabilities = TM_CAP_DEAD_LETTERS, .open = ice_open,
               .claim = ice_claim, .read_markers = ice_read_markers,
               .commit = ice_commit, .close = ice_close,
               .validate = ice_validate, .scan = ice_scan,
               .interrupt = ice_interrupt, .settings = ICE_SETTINGS)
