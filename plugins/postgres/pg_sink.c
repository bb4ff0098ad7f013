/* The PostgreSQL sink: the callback table, open, close, interrupt
 * (docs/sinks/postgres.md): one transaction per batch; marker rows locked FOR
 * UPDATE; rows written with COPY; append or upsert by key columns; keys
 * inserted with ON CONFLICT and compared after; DDL at start under an advisory
 * lock; identifiers escaped by libpq; an unknown commit outcome is settled by
 * the check. */
#include <stdlib.h>
#include <string.h>

#include "pg_sink.h"

static void free_names(pg_sink *s) {
    PQfreemem(s->q_schema);
    free(s->q_table);
    free(s->q_markers);
    free(s->q_dls);
    free(s->q_keys);
    free(s->q_owners);
    free(s->q_keysets);
    free(s->q_key_batches);
    s->q_schema = s->q_table = s->q_markers = s->q_dls = s->q_keys = NULL;
    s->q_owners = s->q_keysets = s->q_key_batches = NULL;
}

static tm_status pg_open(const tm_host_api *host, const tm_sink_config *config,
                         void **sink, tm_error *err) {
    pg_settings set;
    tm_status r = pg_settings_load(host, config, &set, err);
    if (r != TM_OK)
        return r;
    pg_sink *s = calloc(1, sizeof *s);
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
    atomic_init(&s->in_call, 0);
    atomic_flag_clear(&s->cancel_busy);
    if ((r = pg_connect(s, err)) == TM_OK &&
        (r = pg_schema_create(s, err)) == TM_OK) {
        int exists = 0;
        if (s->schema_cols) {
            /* the table is checked against each batch's columns */
            r = pg_owner_check(s, err);
        } else if ((r = pg_table_exists(s, &exists, err)) == TM_OK && !exists) {
            host->set_error(err,
                            "setting \"table\": no table %s and \"create\" "
                            "is false",
                            s->q_table);
            r = TM_INVALID;
        } else if (r == TM_OK && (r = pg_shape_check(s, err)) == TM_OK) {
            r = pg_owner_check(s, err);
        }
    }
    if (r != TM_OK) {
        pg_disconnect(s);
        free_names(s);
        free(s);
        return r;
    }
    *sink = s;
    return TM_OK;
}

static void pg_close(void *sink) {
    pg_sink *s = sink;
    if (!s)
        return;
    pg_disconnect(s);
    pg_evolve_free(s);
    pg_keyset_free(s);
    free_names(s);
    free(s->upsert_seen);
    free(s);
}

/* Any thread: the flag makes the call give up (its loops, and no
 * statement is sent after it); PQcancel (made for this, thread-safe) stops
 * a statement in progress, which then fails with SQLSTATE 57014 and the
 * call returns TM_RETRY. */
static void pg_interrupt(void *sink) {
    pg_sink *s = sink;
    if (!atomic_load(&s->in_call))
        return; /* no call in progress: nothing to give up */
    atomic_store(&s->interrupted, 1);
    if (atomic_flag_test_and_set(&s->cancel_busy))
        return; /* a reconnect is swapping it: the flag will do */
    if (s->cancel) {
        char buf[256];
        (void)PQcancel(s->cancel, buf, sizeof buf);
    }
    atomic_flag_clear(&s->cancel_busy);
}

/* Every call that talks to the server ends its interrupt (pg_call_end). */
static tm_status call_claim(void *sink, tm_marker *markers, size_t n,
                            uint32_t flags, tm_error *err) {
    pg_call_enter(sink);
    tm_status r = pg_claim(sink, markers, n, flags, err);
    pg_call_end(sink);
    return r;
}

static tm_status call_read_markers(void *sink, tm_marker *markers, size_t n,
                                   tm_error *err) {
    pg_call_enter(sink);
    tm_status r = pg_read_markers(sink, markers, n, err);
    pg_call_end(sink);
    return r;
}

static tm_status call_commit(void *sink, const tm_batch *batch, tm_error *err) {
    pg_call_enter(sink);
    tm_status r = pg_commit(sink, batch, err);
    pg_call_end(sink);
    return r;
}

static tm_status call_scan(void *sink, const char *topic, int32_t partition,
                           void *emit_ctx, tm_error *err) {
    pg_call_enter(sink);
    tm_status r = pg_scan(sink, topic, partition, emit_ctx, err);
    pg_call_end(sink);
    return r;
}

TM_SINK_DEFINE(.name = "postgres", .version = "0.1.0",
               .capabilities = TM_CAP_DEDUP | TM_CAP_DEAD_LETTERS |
                               TM_CAP_DELETE | TM_CAP_UPSERT |
                               TM_CAP_SCHEMA_COLUMNS,
               .open = pg_open, .claim = call_claim,
               .read_markers = call_read_markers, .commit = call_commit,
               .close = pg_close, .validate = pg_validate, .scan = call_scan,
               .interrupt = pg_interrupt, .settings = PG_SETTINGS)
