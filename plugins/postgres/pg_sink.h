/* The PostgreSQL sink's internals, shared by its files (one concern each):
 *   pg_sink.c   the callback table, open, close, interrupt, describe
 *   settings.c  reading and checking the settings
 *   conn.c      the connection: connect, reset, cancel object, error
 *               mapping (SQLSTATE -> what the host does next), SQL text
 *   schema.c    qualified names, DDL under an advisory lock, shape check
 *   pipeline.c  several statements in one round trip (pipeline mode)
 *   markers.c   claim and read_markers, marker rows
 *   owners.c    which connectors write the target table (claim)
 *   copy.c      rows with COPY (text format), upsert through staging
 *   jsonb_text.c  JSON text jsonb can hold (a NUL byte in a string)
 *   binarray.c  PostgreSQL's binary formats: arrays, COPY rows (keys.c)
 *   keys.c      the business keys of dedup, decided as a set (one row a
 *               key: "dedup_keys": "rows")
 *   keyset.c    the business keys held in memory ("dedup_keys": "memory",
 *               on the shared set and digests of plugins/keyset)
 *   commit.c    one batch in one transaction
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
#include <tidemark/columns.h>
#include <tidemark/sink.h>

#include "keyset.h"

/* Helper tables beside the target (same names as the SQLite sink), in the
 * configured schema. */
#define PG_MARKERS      "tidemark_markers"
#define PG_DEAD_LETTERS "tidemark_dead_letters"
#define PG_KEYS         "tidemark_keys"
#define PG_OWNERS       "tidemark_table_owners"
#define PG_KEYSETS      "tidemark_keysets"
#define PG_KEY_BATCHES  "tidemark_key_batches"
/* The trigger on tidemark_keys (and its function) refusing a connector's
 * keys there while they are held in memory (schema.c), and its SQLSTATE. */
#define PG_KEYS_GUARD      "tidemark_keys_held_in_memory"
#define PG_KEYS_GUARD_CODE "TMK01"
#define PG_HIDDEN_PREFIX   "_tm_"
#define PG_NHIDDEN         4
/* PostgreSQL keeps 63 bytes of a name (NAMEDATALEN - 1) and cuts longer
 * ones silently. */
#define PG_NAME_MAX 63

typedef enum pg_mode { PG_APPEND = 0, PG_UPSERT = 1 } pg_mode;

/* Filled by the host from PG_SETTINGS (settings.c). Strings point into
 * the host's config, which lives until close() returns (sink.h,
 * settings_fill). */
typedef struct pg_settings {
    const char *conninfo;
    const char *schema;
    const char *table;
    int create;
    int mode; /* pg_mode: the index in the table's allowed modes */
    int64_t connect_timeout_s;
    int64_t statement_timeout_ms;
    int64_t retention_s; /* 0: keys are kept for ever */
    int shared_table;    /* other connectors may write the table too */
    int keys_rows; /* "dedup_keys": 0 "memory", 1 "rows" (one row a key) */
} pg_settings;

typedef struct pg_buf {
    char *p;
    size_t len, cap;
    int oom;
} pg_buf;

/* keyset.c: the connector's business keys held in memory. */
typedef struct pg_keyset {
    tk_tab set;
    uint8_t seed[16];      /* SipHash key, from the connector's keysets row */
    int loaded;            /* set holds generation gen after pruned removals */
    int64_t gen, pruned;   /* pruned: every batch row up to it removed */
    int64_t legacy_pruned; /* removals of tidemark_keys rows (a counter) */
    int64_t legacy;        /* tidemark_keys rows loaded (pruned per key) */
    int64_t gen_floor;     /* the lowest generation a key was put with */
    size_t want; /* the keys a whole load means to hold (its message) */
    /* this transaction: */
    int locked;        /* holds the connector's keysets row */
    int fresh_row;     /* made the keysets row */
    tk_stage add;      /* the batch's new keys (rec: record, TK_DROPPED) */
    tk_stage del;      /* keys the batch's retention removed */
    int64_t newest_at; /* newest applied_at of add */
    int64_t prune_to;  /* the batch removed batch rows up to it (else 0) */
    int legacy_now;    /* the batch removed tidemark_keys rows */
    int64_t next_gen, next_pruned, next_legacy;
    tk_key *dig; /* the batch's records' digests (a == 0: no key) */
    size_t ndig;
    /* the set's slots and size when the batch decided: a rebuild always
     * grows the size, where the slots of two rebuilds may share an address
     * (the first table's block handed back for the second) */
    const tk_key *decided_slot;
    size_t decided_mask;
    /* the batch's writes of its keys, queued with the marker updates
     * (pg_keyset_stmts): their SQL and parameters live until the end */
    char *sql[2];
    uint8_t *blob;
    char par[7][32];
    const char *vals[2][7];
    int lens[7], fmts[7];
    size_t nstmts;
    uint64_t touched; /* the decisions' reads ahead, kept */
} pg_keyset;

typedef struct pg_sink {
    const tm_host_api *host;
    const tm_sink_config *config;
    pg_settings set;
    PGconn *conn;            /* NULL after a loss: the next call reconnects */
    PGcancel *cancel;        /* made at connect, for interrupt() */
    atomic_flag cancel_busy; /* guards cancel against interrupt() */
    atomic_int interrupted;  /* set by interrupt(), any thread */
    atomic_int in_call;      /* a call (claim, commit, ...) is in progress */
    int64_t deadline_ms;     /* of the call in progress, 0: none */
    /* Escaped names, made at connect (PQescapeIdentifier needs a conn). */
    char *q_schema, *q_table, *q_markers, *q_dls, *q_keys, *q_owners;
    char *q_keysets, *q_key_batches;
    char last_state[6]; /* SQLSTATE of the last pg_fail, "" if none */
    int prepared;       /* the marker statements are prepared on conn */
    int keys_prepared;  /* the business keys' probe (keys.c) too */
    int keys_resent;    /* the last batch's probe found keys stored before */
    /* Upsert (copy.c): probe the keys first (a direct COPY met a stored
     * key the sink had not written); the digests of the keys this sink
     * wrote, a hint which keys are stored (never what decides a row). */
    int upsert_probe;
    /* upsert: the table was found with other unique indexes, triggers or
     * rules (copy.c up_direct_allowed): every write staged from then on */
    int upsert_staged_only;
    int upsert_prepared; /* PG_STMT_UPSERT_DIRECT on this session */
    uint64_t *upsert_seen;
    size_t upsert_seen_n, upsert_seen_cap;
    /* TM_CONFIG_SCHEMA_COLUMNS: config points to own, a copy of the
     * host's config with the columns of the last batch; follow owns them
     * (names copied: the batch is the host's for one call) and says
     * whether the table fit them
     * (tidemark/columns.h, tm_columns_follow). */
    int schema_cols;
    tm_sink_config own;
    tm_columns_follow follow;
    pg_keyset ks; /* dedup_keys "memory" */
} pg_sink;

/* settings.c */
/* The declared settings (tm_sink_api.settings). */
extern const tm_setting PG_SETTINGS[];
tm_status pg_settings_load(const tm_host_api *host,
                           const tm_sink_config *config, pg_settings *out,
                           tm_error *err);
const char *pg_type_sql(tm_type t);

/* conn.c */
int64_t pg_now_ms(void);
void pg_buf_add(pg_buf *b, const char *s);
void pg_buf_addn(pg_buf *b, const char *s, size_t n);
void pg_buf_free(pg_buf *b);
/* The longest prefix of S of at most MAX bytes that does not end inside a
 * UTF-8 character: every detail the sink cuts is cut there ("%.*s"), as a
 * cut inside one is not UTF-8 and the database refuses to store it. */
size_t pg_utf8_prefix(const char *s, size_t max);
/* S with every byte that is not part of valid UTF-8 replaced by '?'
 * (malloc'd; NULL when out of memory): a dead letter's detail may come cut
 * by the host, and its INSERT must not fail for its encoding. */
char *pg_utf8_valid(const char *s);
/* Adds PQescapeIdentifier(name); sets oom on failure. */
void pg_buf_ident(pg_sink *s, pg_buf *b, const char *name);
/* Connects (application_name = connector, timeouts), makes the cancel
 * object and the escaped names. TM_OK, TM_RETRY (unreachable). */
tm_status pg_connect(pg_sink *s, tm_error *err);
/* The session's idle_in_transaction_session_timeout (conn.c):
 * statement_timeout_ms, at least PG_IDLE_MIN_MS. */
#define PG_IDLE_MIN_MS 10000
int64_t pg_idle_timeout_ms(const pg_sink *s);
void pg_disconnect(pg_sink *s);
/* A connection that works, reconnecting after a loss. */
tm_status pg_ready(pg_sink *s, tm_error *err);
/* A call's entry (before anything it does: an interrupt() from then on
 * counts), its deadline once connected (0: none), and its end (the
 * interrupt is cleared). */
void pg_call_enter(pg_sink *s);
void pg_call_begin(pg_sink *s, int64_t deadline_ms);
void pg_call_end(pg_sink *s);
int pg_should_stop(pg_sink *s);
/* TM_RETRY naming STEP when interrupt() was called, else TM_OK: checked
 * before every statement is sent. */
tm_status pg_if_interrupted(pg_sink *s, const char *step, tm_error *err);
/* What a SQLSTATE means (conn.c's table): in a record's own write
 * (IN_RECORD: its row or its business key) or in any other statement. */
typedef enum pg_err_class {
    PG_ERR_FATAL = 0, /* schema, privileges, anything unknown */
    PG_ERR_RETRY,     /* connection, resources, locks, cancel */
    PG_ERR_ROW        /* the record's content: a dead letter */
} pg_err_class;
pg_err_class pg_state_class(const char *state, int in_record);
/* Maps a failed result (res may be NULL) of STEP: connection gone ->
 * disconnect, TM_RETRY; else by pg_state_class(state, 0): RETRY ->
 * TM_RETRY, else TM_FATAL (s->last_state keeps the SQLSTATE, for the
 * callers that write a record). The message names the step and the
 * server's message. Clears res. */
tm_status pg_fail(pg_sink *s, PGresult *res, const char *step, tm_error *err);
/* pg_query of the statement prepared as NAME (pg_prepare). */
PGresult *pg_query_prepared(pg_sink *s, const char *name, int n,
                            const char *const *vals, const int *lens,
                            const int *formats, int want_tuples,
                            const char *step, tm_status *r, tm_error *err);
/* Prepares SQL (NULL: out of memory) as NAME with N parameters, their
 * types those the SQL casts them to; TM_OK or pg_fail's answer. */
tm_status pg_prepare(pg_sink *s, const char *name, const char *sql, int n,
                     const char *step, tm_error *err);
/* Runs SQL without parameters; TM_OK or pg_fail's answer. */
tm_status pg_exec(pg_sink *s, const char *sql, const char *step, tm_error *err);
/* PQexecParams with text parameters (NULL: SQL null); the result, or NULL
 * with err set and *r the status. Expects tuples when want_tuples. */
PGresult *pg_query(pg_sink *s, const char *sql, int n, const char *const *vals,
                   const int *lens, const int *formats, int want_tuples,
                   const char *step, tm_status *r, tm_error *err);
/* pg_query of a statement that returns tuples, its results in PostgreSQL's
 * binary format (a bytea's bytes as they are). */
PGresult *pg_query_binary(pg_sink *s, const char *sql, int n,
                          const char *const *vals, const int *lens,
                          const int *formats, const char *step, tm_status *r,
                          tm_error *err);
/* SQL: pg_index row I is a unique, non-partial index on exactly the key
 * columns ($2: their names joined by chr(1), $3: how many), the index
 * ON CONFLICT (keys) infers. Shared by open's check (schema.c) and
 * upsert's direct write (copy.c), which must agree on which index it is. */
#define PG_KEY_INDEX_SQL                                                       \
    "(i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL AND "         \
    "i.indnkeyatts = $3::int AND (SELECT count(*) FROM pg_attribute a "        \
    "WHERE a.attrelid = i.indrelid AND a.attnum = ANY "                        \
    "((i.indkey::int2[])[0:i.indnkeyatts - 1]) AND a.attname = ANY "           \
    "(string_to_array($2, chr(1)))) = $3::int)"
/* The key columns' names joined by chr(1) into NAMES (pg_buf_free it), the
 * count into N: the parameters $2 and $3 of PG_KEY_INDEX_SQL. */
void pg_key_names(const pg_sink *s, pg_buf *names, char n[16]);
/* ROLLBACK if a transaction is open; never fails loudly. */
void pg_rollback(pg_sink *s);

/* pipeline.c: begin, send statements (flush to put the queued ones on the
 * wire early), end: one Sync, every result read, pipeline mode left. */
typedef struct pg_stmt {
    const char *name; /* a prepared statement, or NULL: sql */
    const char *sql;
    int n;                     /* parameters, */
    const char *const *vals;   /* as text (NULL: SQL null) */
    const int *lens, *formats; /* NULL: every parameter text */
    int want_tuples;
    const char *step; /* names the statement in errors */
    PGresult *res;    /* set by pg_pipe_end on TM_OK; PQclear it */
    int sync_after;   /* pg_pipe_sync was called after it */
} pg_stmt;
tm_status pg_pipe_begin(pg_sink *s, const char *step, tm_error *err);
tm_status pg_pipe_send(pg_sink *s, const pg_stmt *st, tm_error *err);
/* A Sync after the statements sent so far, without waiting for their
 * results: the server runs them and then waits as "idle in transaction",
 * so that idle_in_transaction_session_timeout ends a session stopped
 * there (without it, mid-pipeline, it waits for the next message for
 * ever). Mark the last statement sent sync_after. */
tm_status pg_pipe_sync(pg_sink *s, const char *step, tm_error *err);
/* TM_OK with every st[i].res set; else pg_fail's answer for the first
 * statement that failed (the server skipped those after it) and no res.
 * A connection that cannot be brought back to idle is dropped (RETRY). */
tm_status pg_pipe_end(pg_sink *s, pg_stmt *st, size_t n, tm_error *err);
/* After a failure to queue: the session is dropped (the server rolls back
 * its transaction); R, the failure's status, mapped to RETRY or FATAL. */
tm_status pg_pipe_abort(pg_sink *s, tm_status r);

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
/* Reads the marker of (topic, partition), not locking it. */
tm_status pg_marker_get(pg_sink *s, const char *topic, int32_t partition,
                        tm_marker *m, tm_error *err);
/* The parameters of the marker statements, as text: the SELECT takes
 * v[0..2] (connector, topic, partition), the UPDATE all ten. The UPDATE
 * fails on the server unless it updated exactly one row. */
/* The marker UPDATE's parameters: the key, the counts and the lineage. */
#define PG_MARKER_NPARAMS 13
typedef struct pg_marker_params {
    char part[16], next[32], epoch[32], rows[32], dls[32], filt[32], dups[32];
    char last[32], last_ts[32];
    const char *v[PG_MARKER_NPARAMS];
} pg_marker_params;
/* The marker SELECT (in b; NULL when out of memory). */
const char *pg_marker_select_sql(pg_sink *s, pg_buf *b, int for_update);
/* Prepares the commit's marker statements once per session (named
 * PG_STMT_LOCK and PG_STMT_UPDATE): parsing and planning them for every
 * batch costs about as much as the round trips the pipelines save. */
#define PG_STMT_LOCK   "tm_marker_lock"
#define PG_STMT_UPDATE "tm_marker_update"
/* upsert: whether the table may take the direct write (copy.c) */
#define PG_STMT_UPSERT_DIRECT "tm_upsert_direct"
tm_status pg_marker_prepare(pg_sink *s, tm_error *err);
void pg_marker_params_of(pg_sink *s, const tm_marker *m, pg_marker_params *p);
/* Fills *m from a marker SELECT's result; 0 (absent) when it has no row. */
int pg_marker_fill(tm_marker *m, PGresult *res);

/* owners.c: inside the claim's transaction, registers this connector as a
 * writer of the target table; TM_FATAL naming the other connector and the
 * setting when another one writes it and "shared_table" is not true in
 * both. */
tm_status pg_owner_register(pg_sink *s, tm_error *err);
/* The same read, earlier and without registering (open, validate): the
 * refusal is TM_INVALID there. */
tm_status pg_owner_check(pg_sink *s, tm_error *err);

/* copy.c: the batch's records J in [from, to) with write[j] set as rows,
 * in one COPY; LEAD (NULL: none) is SQL without values sent in the same
 * round trip just before it (SAVEPOINT ...). */
typedef struct pg_rows {
    const tm_batch *b;
    const unsigned char *write;
    size_t from, to;
} pg_rows;
tm_status pg_copy_rows(pg_sink *s, const pg_rows *rows, const char *lead,
                       tm_error *err);
/* The COPY protocol: LEAD (NULL: none) and COPY (a COPY ... FROM STDIN)
 * sent as one simple query, up to the server's CopyInResponse; then, once
 * the data is put, its end (ERRMSG not NULL: abandoned with that message)
 * and the server's answer, a failure named STEP. */
tm_status pg_copy_start(pg_sink *s, const char *lead, const char *copy,
                        tm_error *err);
tm_status pg_copy_finish(pg_sink *s, const char *errmsg, const char *step,
                         tm_error *err);
/* Upsert: COPY into a staging table, then INSERT ... ON CONFLICT. */
tm_status pg_upsert_rows(pg_sink *s, const pg_rows *rows, const char *lead,
                         tm_error *err);

/* jsonb_text.c: JSON text P[0..N) with every string value holding the
 * escape \u0000 (which jsonb refuses) replaced by {"base64": "..."} of its
 * bytes, into OUT: 1 if anything was replaced, 0 if P is fine as it is
 * (OUT untouched). */
int pg_jsonb_text(const char *p, size_t n, pg_buf *out);

/* keys.c: the business keys of dedup (docs/sinks/postgres.md, step 3). */
/* When a business key counts as applied by the data: the record's Kafka
 * timestamp, or WALL_MS (the commit's wall clock) without one. */
int64_t pg_applied_at(const tm_record *r, int64_t wall_ms);
/* One record's key, stored when new: 0 new (write the row), 1 duplicate,
 * 2 conflict (DETAIL filled); -1 on failure with *st set. */
int pg_key_one(pg_sink *s, const tm_record *r, const tm_range *g,
               int64_t wall_ms, char *detail, size_t size, tm_status *st,
               tm_error *err);
/* What pg_keys_decide found, per record of the batch. */
typedef struct pg_key_set {
    unsigned char *outcome; /* 0 new or not keyed, 1 duplicate, 2 conflict */
    char **detail;          /* a conflict's detail (NULL until one) */
} pg_key_set;
/* The keys of the records with KEYED[j] set, decided as a set in one
 * statement, with pg_key_one's outcomes offset for offset (in-batch
 * repeats against the batch's first occurrence). OUT->outcome (nrecords,
 * zeroed) is the caller's. A key the database refuses for its content
 * fails the statement (s->last_state): pg_key_one finds the record. */
tm_status pg_keys_decide(pg_sink *s, const tm_batch *b,
                         const unsigned char *keyed, int64_t wall_ms,
                         pg_key_set *out, tm_error *err);
/* Frees OUT's details and outcome. */
void pg_key_set_free(pg_key_set *out, size_t nrecords);
/* Records OUTCOME (1 or 2) of record J in OUT, with DETAIL for a conflict
 * (2). TM_OK, or TM_RETRY when out of memory. */
tm_status pg_key_put(pg_sink *s, const tm_batch *b, size_t j, int outcome,
                     const char *detail, pg_key_set *out, tm_error *err);
/* The detail of an identity_conflict against a first occurrence. */
void pg_key_conflict_detail(char *detail, size_t size, const char *identity,
                            const char *topic, const char *partition,
                            const char *offset, const char *was,
                            const char *now);

/* keyset.c: the business keys held in memory ("dedup_keys": "memory",
 * docs/sinks/postgres.md, "Business keys held in memory"). */
/* 1 when the sink holds its keys in memory (dedup on, "memory"). */
int pg_keyset_on(const pg_sink *s);
/* At claim, after its transaction: the connector's keysets row made when
 * missing, the set loaded when it is not current (its own read-only
 * snapshot). With "rows": TM_FATAL when the connector has a keysets row. */
tm_status pg_keyset_claim(pg_sink *s, tm_error *err);
/* In the commit's transaction, first: the connector's row locked and the
 * set brought up to it (LOCK_FIRST, or the set not loaded); else nothing. */
tm_status pg_keyset_begin(pg_sink *s, int lock_first, tm_error *err);
/* The retention's removals: the connector's batch rows (and old per-key
 * rows) applied before both horizons deleted, their keys staged as removed
 * for this batch's decisions. */
tm_status pg_keyset_prune(pg_sink *s, int64_t horizon, int64_t wall_horizon,
                          tm_error *err);
/* The keyed records' outcomes (KEYED[j]), as pg_keys_decide gives them,
 * from the set, the batch's removals and its earlier records; new keys
 * staged. */
tm_status pg_keyset_decide(pg_sink *s, const tm_batch *b,
                           const unsigned char *keyed, int64_t wall_ms,
                           pg_key_set *out, tm_error *err);
/* A staged key whose row the table refused: not stored. */
void pg_keyset_drop(pg_sink *s, const tm_record *r);
/* Last in the transaction's effects: the connector's row locked if it was
 * not (the decisions checked against what other hosts committed since the
 * set was current: *REDO set, TM_RETRY, when they must be made again with
 * the row locked first), and the statements that write the batch's row of
 * new keys and move the connector's row made ready. */
tm_status pg_keyset_finish(pg_sink *s, const tm_batch *b, int64_t wall_ms,
                           int *redo, tm_error *err);
/* Those statements (0 to 2, into OUT), sent in the pipeline of the marker
 * updates and COMMIT: no round trip of their own. */
size_t pg_keyset_stmts(pg_sink *s, pg_stmt *out);
/* After COMMIT succeeded: the batch's changes into the set. */
void pg_keyset_committed(pg_sink *s);
/* After a rollback (or an unknown outcome): the set as it was. */
void pg_keyset_abort(pg_sink *s);
void pg_keyset_free(pg_sink *s);

/* commit.c */
tm_status pg_commit(void *sink, const tm_batch *batch, tm_error *err);

/* scan.c */
tm_status pg_scan(void *sink, const char *topic, int32_t partition,
                  void *emit_ctx, tm_error *err);

/* validate.c */
tm_status pg_validate(const tm_host_api *host, const tm_sink_config *config,
                      tm_error *err);

/* evolve.c */
/* Columns from the events' schemas: in the commit's transaction, after
 * the marker check, makes the table fit the batch's columns (created,
 * columns added, with "create"; a mismatch TM_FATAL). TM_OK when there is
 * nothing to do. */
tm_status pg_evolve(pg_sink *s, const tm_batch *b, tm_error *err);
void pg_evolve_free(pg_sink *s);
/* schema.c: the table made or completed for s->config's columns and
 * checked against them, in the caller's transaction. */
tm_status pg_schema_evolve(pg_sink *s, tm_error *err);

#endif
