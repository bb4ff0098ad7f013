/* The SQLite sink: the callback table, open, close, interrupt.
 * (docs/sinks/sqlite.md): WAL, BEGIN IMMEDIATE, prepared
 * statements, synchronous=FULL by default (durability is part of the
 * claim), marker, key and dead-letter tables beside the target. */
#include <stdlib.h>
#include <string.h>

#include "sqlite_sink.h"

static tm_status sq_open(const tm_host_api *host, const tm_sink_config *config,
                         void **sink, tm_error *err) {
    sq_settings set;
    tm_status r = sq_settings_load(host, config, &set, err);
    if (r != TM_OK)
        return r;
    sq_sink *s = calloc(1, sizeof *s);
    if (!s) {
        host->set_error(err, "out of memory");
        return TM_FATAL;
    }
    s->host = host;
    s->config = config;
    s->set = set;
    if (config->flags & TM_CONFIG_SCHEMA_COLUMNS) {
        /* no columns until the first batch brings them (evolve.c) */
        s->schema_cols = 1;
        s->own = *config;
        s->own.columns = NULL;
        s->own.ncolumns = 0;
        s->config = &s->own;
    }
    atomic_init(&s->interrupted, 0);
    atomic_flag_clear(&s->db_busy);
    if ((r = sq_db_open(s, 0, err)) == TM_OK &&
        (r = sq_schema_create(s, err)) == TM_OK &&
        (r = sq_migrate(s, err)) == TM_OK) {
        int exists = 0;
        if (s->schema_cols) {
            /* the table is checked against each batch's columns */
        } else if ((r = sq_table_exists(s, &exists, err)) == TM_OK && !exists) {
            host->set_error(err,
                            "setting \"table\": no table \"%s\" in %s and "
                            "\"create\" is false",
                            set.table, set.path);
            r = TM_INVALID;
        } else if (r == TM_OK) {
            r = sq_shape_check(s, err);
        }
    }
    if (r == TM_OK)
        r = sq_prepare_all(s, err);
    if (r != TM_OK) {
        sq_db_close(s);
        free(s);
        return r;
    }
    if (strcmp(set.synchronous, "FULL") != 0)
        host->log(config->host_ctx, TM_LOG_WARN,
                  "synchronous=%s: an OS crash or power loss may undo "
                  "batches already reported committed (docs/sinks/sqlite.md, "
                  "Durability); FULL keeps them",
                  set.synchronous);
    *sink = s;
    return TM_OK;
}

static void sq_close(void *sink) {
    sq_sink *s = sink;
    if (!s)
        return;
    sq_db_close(s);
    sq_evolve_free(s);
    sq_keys_free(s);
    free(s);
}

/* Any thread, never blocks: the flag makes the progress and busy handlers
 * give up; sqlite3_interrupt stops a statement in progress. */
static void sq_interrupt(void *sink) {
    sq_sink *s = sink;
    atomic_store(&s->interrupted, 1);
    if (atomic_flag_test_and_set(&s->db_busy))
        return; /* a reopen is swapping the handle: the flag will do */
    if (s->db)
        sqlite3_interrupt(s->db);
    atomic_flag_clear(&s->db_busy);
}

TM_SINK_DEFINE(.name = "sqlite", .version = "1.0.0",
               .capabilities = TM_CAP_DEDUP | TM_CAP_DEAD_LETTERS |
                               TM_CAP_DELETE | TM_CAP_UPSERT |
                               TM_CAP_SCHEMA_COLUMNS,
               .open = sq_open, .claim = sq_claim,
               .read_markers = sq_read_markers, .commit = sq_commit,
               .close = sq_close, .validate = sq_validate, .scan = sq_scan,
               .interrupt = sq_interrupt, .settings = SQ_SETTINGS)
