/* The PostgreSQL sink's internals, shared by its files (one concern each):
 *   pg_sink.c   the callback table, open, close, interrupt, describe
 *   settings.c  reading and checking the settings
 *   conn.c      the connection: connect, reset, cancel object, error
 *               mapping (SQLSTATE -> what the host does next), SQL text
 *   schema.c    qualified names, DDL under an advisory lock, shape check
 *   markers.c   claim and read_markers, marker rows
 *   commit.c    one batch in one transaction (COPY for rows)
 *   scan.c      read-back of rows and dead letters
 *   validate.c  the read-only check of settings, connection and table
 * Nothing here is exported: the plugin exports only tidemark_sink_entry.
 * Identifiers are escaped by PQescapeIdentifier; values are parameters or
 * COPY data, never spliced into SQL. */
#ifndef TM_PG_SINK_H
#define TM_PG_SINK_H

#include <libpq-fe.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

/* Helper tables beside the target (same names as the SQLite sink), in the
 * configured schema. */
#define PG_MARKERS       "tidemark_markers"
#define PG_DEAD_LETTERS  "tidemark_dead_letters"
#define PG_KEYS          "tidemark_keys"
#define PG_HIDDEN_PREFIX "_tm_"
#define PG_NHIDDEN       4

typedef enum pg_mode { PG_APPEND = 0, PG_UPSERT = 1 } pg_mode;

typedef struct pg_settings {
    /* Strings point into the host's config, which outlives the instance. */
    const char *conninfo;
    const char *schema;
    const char *table;
    int create;
    pg_mode mode;
    int64_t connect_timeout_s;
    int64_t statement_timeout_ms;
    int64_t retention_s; /* 0: keys are kept for ever */
} pg_settings;

typedef struct pg_buf {
    char *p;
    size_t len, cap;
    int oom;
} pg_buf;

typedef struct pg_sink {
    const tm_host_api *host;
    const tm_sink_config *config;
    pg_settings set;
    PGconn *conn;            /* NULL after a loss: the next call reconnects */
    PGcancel *cancel;        /* made at connect, for interrupt() */
    atomic_flag cancel_busy; /* guards cancel against interrupt() */
    atomic_int interrupted;  /* set by interrupt(), any thread */
    int64_t deadline_ms;     /* of the call in progress, 0: none */
    /* Escaped names, made at connect (PQescapeIdentifier needs a conn). */
    char *q_schema, *q_table, *q_markers, *q_dls, *q_keys;
    char last_state[6]; /* SQLSTATE of the last pg_fail, "" if none */
} pg_sink;

/* settings.c */
tm_status pg_settings_load(const tm_host_api *host,
                           const tm_sink_config *config, pg_settings *out,
                           tm_error *err);
const char *pg_type_sql(tm_type t);

/* conn.c */
int64_t pg_now_ms(void);
void pg_buf_add(pg_buf *b, const char *s);
void pg_buf_addn(pg_buf *b, const char *s, size_t n);
void pg_buf_free(pg_buf *b);
/* Adds PQescapeIdentifier(name); sets oom on failure. */
void pg_buf_ident(pg_sink *s, pg_buf *b, const char *name);
/* Connects (application_name = connector, timeouts), makes the cancel
 * object and the escaped names. TM_OK, TM_RETRY (unreachable). */
tm_status pg_connect(pg_sink *s, tm_error *err);
void pg_disconnect(pg_sink *s);
/* A connection that works, reconnecting after a loss. */
tm_status pg_ready(pg_sink *s, tm_error *err);
void pg_call_begin(pg_sink *s, int64_t deadline_ms);
int pg_should_stop(pg_sink *s);
/* Maps a failed result (res may be NULL) of STEP: connection gone ->
 * disconnect, TM_RETRY; 40P01/40001/55P03/57014/23505 -> TM_RETRY; else
 * TM_FATAL. The message names the step and the server's message. Clears
 * res. */
tm_status pg_fail(pg_sink *s, PGresult *res, const char *step, tm_error *err);
/* Runs SQL without parameters; TM_OK or pg_fail's answer. */
tm_status pg_exec(pg_sink *s, const char *sql, const char *step, tm_error *err);
/* PQexecParams with text parameters (NULL: SQL null); the result, or NULL
 * with err set and *r the status. Expects tuples when want_tuples. */
PGresult *pg_query(pg_sink *s, const char *sql, int n, const char *const *vals,
                   const int *lens, const int *formats, int want_tuples,
                   const char *step, tm_status *r, tm_error *err);
/* ROLLBACK if a transaction is open; never fails loudly. */
void pg_rollback(pg_sink *s);

/* schema.c */
tm_status pg_schema_create(pg_sink *s, tm_error *err);
/* *exists: whether the target table exists. */
tm_status pg_table_exists(pg_sink *s, int *exists, tm_error *err);
/* TM_OK, TM_INVALID with both shapes. */
tm_status pg_shape_check(pg_sink *s, tm_error *err);

/* markers.c */
tm_status pg_claim(void *sink, tm_marker *markers, size_t n, uint32_t flags,
                   tm_error *err);
tm_status pg_read_markers(void *sink, tm_marker *markers, size_t n,
                          tm_error *err);
/* Reads (optionally FOR UPDATE) the marker of (topic, partition). */
tm_status pg_marker_get(pg_sink *s, const char *topic, int32_t partition,
                        int for_update, tm_marker *m, tm_error *err);
/* Writes *m back; TM_FATAL if no row. */
tm_status pg_marker_put(pg_sink *s, const tm_marker *m, tm_error *err);

/* commit.c */
tm_status pg_commit(void *sink, const tm_batch *batch, tm_error *err);

/* scan.c */
tm_status pg_scan(void *sink, const char *topic, int32_t partition,
                  void *emit_ctx, tm_error *err);

/* validate.c */
tm_status pg_validate(const tm_host_api *host, const tm_sink_config *config,
                      tm_error *err);

#endif
