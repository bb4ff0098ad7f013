/* The SQLite sink's internals, shared by its files (one concern each):
 *   sqlite_sink.c  the callback table, open, close, interrupt
 *   settings.c     the declared settings and the checks the table cannot say
 *   db.c           the connection: open, PRAGMAs, busy/progress handlers,
 *                  error mapping, reopen
 *   schema.c       SQL text (quoting), DDL, the table's shape check
 *   migrate.c      columns added to the helper tables of older versions
 *   fileid.c       the path still names the open files (moved, removed)
 *   markers.c      claim and read_markers, marker rows
 *   owners.c       which connectors write which table (shared_table)
 *   commit.c       one batch in one transaction
 *   keyset.c       business keys held in memory (dedup_keys "memory"),
 *                  on the shared set and digests of plugins/keyset
 *   scan.c         read-back of rows and dead letters
 *   validate.c     the read-only check of settings and table shape
 * Nothing here is exported: the plugin exports only tidemark_sink_entry. */
#ifndef TM_SQLITE_SINK_H
#define TM_SQLITE_SINK_H

#include <sqlite3.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <tidemark/columns.h>
#include <tidemark/sink.h>

#include "keyset.h"

/* Helper tables beside the target, all named with this prefix. */
#define SQ_MARKERS      "tidemark_markers"
#define SQ_DEAD_LETTERS "tidemark_dead_letters"
#define SQ_KEYS         "tidemark_keys"
#define SQ_OWNERS       "tidemark_table_owners"
#define SQ_KEY_BATCHES  "tidemark_key_batches"
#define SQ_KEYSETS      "tidemark_keysets"
/* Hidden columns of the target table: where each row came from, so that
 * scan (and tidemark verify) read offsets back from the effects. */
#define SQ_HIDDEN_PREFIX "_tm_"
#define SQ_NHIDDEN       4

/* The database file and its -wal and -shm, and a bound for their names
 * (SQLite's own unix VFS refuses longer paths). */
#define SQ_NFILES   3
#define SQ_PATH_MAX 4096

typedef enum sq_mode { SQ_APPEND = 0, SQ_UPSERT = 1 } sq_mode;

/* Filled by the host from SQ_SETTINGS (settings.c). Strings point into
 * the host's config, which lives until close() returns (sink.h,
 * settings_fill). */
typedef struct sq_settings {
    const char *path;
    const char *table;
    int create;
    int mode; /* sq_mode: the index in the table's allowed modes */
    int sync; /* the index of synchronous in its allowed values */
    const char *synchronous; /* "FULL", "NORMAL" or "OFF" (static) */
    int64_t busy_timeout_ms;
    int64_t retention_s; /* 0: keys are kept for ever */
    int shared_table;    /* other connectors may write the table too */
    int keys_rows;       /* dedup_keys: 0 "memory" (keyset.c), 1 "rows" */
} sq_settings;

/* Prepared statements, made once per connection and reused. */
typedef enum sq_stmt_id {
    SQ_INS_ROW,
    SQ_INS_DL,
    SQ_MK_GET,
    SQ_MK_CLAIM,
    SQ_MK_UPD,
    SQ_KEY_INS,
    SQ_KEY_GET,
    SQ_KEY_DEL,
    SQ_KEY_PRUNE,
    SQ_SCAN,
    SQ_DEL_ROW, /* change events' deletes: by the key columns */
    SQ_KS_GET,  /* keyset.c: the connector's tidemark_keysets row */
    SQ_KS_PUT,
    SQ_KB_INS, /* a batch's new keys, one row */
    SQ_KB_LOAD,
    SQ_KB_COUNT,
    SQ_KB_PRUNE,
    SQ_KEY_LOAD, /* the connector's tidemark_keys rows, into the set */
    SQ_KEY_PRUNE_RET,
    SQ_KEY_ANY, /* whether the connector has tidemark_keys rows */
    SQ_NSTMTS
} sq_stmt_id;

/* keyset.c: one key's digests, a set of them, and a batch's staged ones
 * (the shared part, plugins/keyset/keyset.h). */
typedef tk_key sq_key;
typedef tk_tab sq_keytab;
typedef tk_stage sq_keystage;

typedef struct sq_keyset {
    sq_keytab set;
    uint8_t seed[16]; /* SipHash key, from the connector's keysets row */
    int loaded;       /* set reflects generation gen, counter pruned */
    int fresh_row;    /* this transaction made the keysets row */
    int64_t gen, pruned;
    int64_t legacy;    /* tidemark_keys rows loaded (pruned per key) */
    sq_keystage add;   /* this batch's new keys */
    sq_keystage del;   /* keys this batch's retention removed */
    int64_t newest_at; /* newest applied_at of add */
    int pruned_now;    /* this batch removed keys */
    int64_t next_gen, next_pruned;
    sq_key *dig;      /* the batch's records' digests (a == 0: no key) */
    size_t last_pos;  /* the last sq_keys_decide's empty slot */
    uint64_t touched; /* sq_keys_prepare's reads, kept */
    const char *why;  /* what sq_keys_sync refused, or NULL */
    int why_retry;    /* ... and it may pass (TM_RETRY, not TM_FATAL) */
    char why_buf[TM_ERROR_MAX];
    size_t ndig;
} sq_keyset;

typedef struct sq_sink {
    const tm_host_api *host;
    const tm_sink_config *config;
    sq_settings set;
    sqlite3 *db; /* NULL after a failed reopen: the next call reopens */
    sqlite3_stmt *stmt[SQ_NSTMTS];
    atomic_int interrupted;  /* set by interrupt(), any thread */
    atomic_flag db_busy;     /* guards db against interrupt() during reopen */
    int64_t deadline_ms;     /* of the call in progress, 0: none */
    int64_t busy_started_ms; /* first busy callback of the current wait */
    int busy_pinned; /* busy_started_ms set by a caller's own wait (db.c) */
    /* The files the connection opened (the database, -wal, -shm; stat of
     * their paths right after the open): SQLite in WAL mode goes on
     * writing into unlinked files, so each commit checks that the paths
     * still name them (fileid.c). */
    dev_t file_dev[SQ_NFILES];
    ino_t file_ino[SQ_NFILES];
    int removed; /* a file was found removed: rescued once, FATAL since */
    /* TM_CONFIG_SCHEMA_COLUMNS: config points to own, a copy of the
     * host's config with the columns of the last batch; follow owns them
     * (names copied: the batch is the host's for one call) and says
     * whether the table and the target statements fit them
     * (tidemark/columns.h, tm_columns_follow). */
    int schema_cols;
    /* A table whose INTEGER PRIMARY KEY, declared NOT NULL, is mapped
     * column null_key_col (the key in upsert; any column in append, as
     * in the table of an upsert connector): SQLite's message refusing a
     * null there, which the sink gives itself (the rowid would take the
     * next number); "" otherwise (sq_shape_check). */
    char null_key_detail[TM_ERROR_MAX];
    size_t null_key_col;
    tm_sink_config own;
    tm_columns_follow follow;
    sq_keyset keys; /* dedup_keys "memory" */
} sq_sink;

/* settings.c */
/* The declared settings (tm_sink_api.settings). */
extern const tm_setting SQ_SETTINGS[];
tm_status sq_settings_load(const tm_host_api *host,
                           const tm_sink_config *config, sq_settings *out,
                           tm_error *err);

/* db.c */
int64_t sq_now_ms(void);
/* The wall clock (CLOCK_REALTIME), milliseconds since 1970. */
int64_t sq_wall_ms(void);
/* Opens s->db (read-write-create, or read-only) with the PRAGMAs and the
 * handlers. TM_OK, TM_RETRY (cannot open, read-only, I/O), TM_FATAL (not
 * a database, corrupt), TM_INVALID (WAL refused). */
tm_status sq_db_open(sq_sink *s, int readonly, tm_error *err);
/* How many columns a table of this libsqlite3 may have (and an INSERT
 * bind): SQLITE_LIMIT_COLUMN, or the parameter limit if lower; -1 when
 * it cannot be read. */
int sq_column_limit(void);
/* Finalizes the statements and closes the connection. */
void sq_db_close(sq_sink *s);
/* Close, open, prepare: after an unknown COMMIT outcome. */
tm_status sq_db_reopen(sq_sink *s, tm_error *err);
/* Makes sure a connection with prepared statements exists. */
tm_status sq_db_ready(sq_sink *s, tm_error *err);
/* Starts a call: clears the interrupt flag, sets the deadline. */
void sq_call_begin(sq_sink *s, int64_t deadline_ms);
/* 1 when the call in progress should give up (interrupt, deadline). */
int sq_should_stop(sq_sink *s);
/* The class of an SQLite result code (the table in db.c): TM_RETRY for
 * what passes (busy, locked, interrupted, full, I/O, read-only, cannot
 * open), TM_FATAL for the rest (not a database, corrupt, ...). */
tm_status sq_status_of(int rc);
/* 1 when a statement refused a row for its content (constraint, datatype
 * mismatch): the record is a dead letter, the batch goes on. */
int sq_refused_content(int rc);
/* sq_status_of(rc) with a message naming the step and sqlite3_errmsg. */
tm_status sq_fail(sq_sink *s, int rc, const char *step, tm_error *err);
/* Runs SQL without results (BEGIN, COMMIT, DDL). SQLite result code. */
int sq_exec(sq_sink *s, const char *sql);
/* Rolls back if a transaction is open (never fails loudly: the caller is
 * already reporting the first error). */
void sq_rollback(sq_sink *s);
/* sqlite3_reset + sqlite3_clear_bindings. */
void sq_reuse(sqlite3_stmt *st);

/* schema.c */
typedef struct sq_buf {
    char *p;
    size_t len, cap;
    int oom;
} sq_buf;
void sq_buf_add(sq_buf *b, const char *s);
void sq_buf_ident(sq_buf *b, const char *name); /* "na""me" */
void sq_buf_free(sq_buf *b);
/* The declared type the sink writes for T (NULL: no such type), and
 * back: the type a declaration the sink wrote stands for (0 for any other
 * declaration, a table made by hand, say). */
const char *sq_type_sql(tm_type t);
tm_type sq_type_of_decl(const char *decl);
/* Creates missing helper tables (and the target table when create). */
tm_status sq_schema_create(sq_sink *s, tm_error *err);
/* *exists: whether the target table exists. TM_OK, or sq_fail's class. */
tm_status sq_table_exists(sq_sink *s, int *exists, tm_error *err);
/* Checks the table's shape against the mapping (and, for upsert, a unique
 * index on the key columns). TM_OK, TM_INVALID with both shapes. */
tm_status sq_shape_check(sq_sink *s, tm_error *err);
/* Prepares every statement of s->stmt. */
tm_status sq_prepare_all(sq_sink *s, tm_error *err);
/* Columns from the events' schemas and none known yet: s->stmt[SQ_SCAN]
 * reads the rows without values (the dead letters alone when there is no
 * table yet). */
tm_status sq_prepare_bare_scan(sq_sink *s, tm_error *err);
/* In the commit's transaction, for the columns of s->config (taken from
 * a batch): creates the table if missing and adds the columns it lacks
 * (setting "create"), checks its shape (a mismatch is TM_FATAL naming the
 * column and both types) and prepares the target statements again. */
tm_status sq_schema_evolve(sq_sink *s, tm_error *err);

/* evolve.c */
/* Columns from the events' schemas: makes the table fit the batch's
 * columns, in the commit's transaction (before its rows). TM_OK when
 * there is nothing to do. */
tm_status sq_evolve(sq_sink *s, const tm_batch *b, tm_error *err);
/* Frees the copied columns. */
void sq_evolve_free(sq_sink *s);

/* fileid.c */
/* Right after the open: records which files the path and its -wal and
 * -shm name (a read opens the latter two). TM_OK, or TM_RETRY. */
tm_status sq_fileid_record(sq_sink *s, tm_error *err);
/* TM_OK when the path and its -wal and -shm still name the files the
 * connection opened; TM_RETRY naming the file when one was moved away or
 * replaced (it may come back); TM_FATAL when one was removed (no name
 * left: it never comes back), after rescuing the connection's data into
 * a new file named in the message. Rolls back an open transaction then. */
tm_status sq_db_same_file(sq_sink *s, tm_error *err);

/* migrate.c */
/* Adds the columns newer versions need to existing helper tables (after
 * sq_schema_create). TM_OK, or sq_fail's class. */
tm_status sq_migrate(sq_sink *s, tm_error *err);

/* markers.c */
tm_status sq_claim(void *sink, tm_marker *markers, size_t n, uint32_t flags,
                   tm_error *err);
tm_status sq_read_markers(void *sink, tm_marker *markers, size_t n,
                          tm_error *err);
/* Reads the stored marker of (topic, partition) into *m (absent: epoch
 * TM_NO_EPOCH, next_offset TM_NO_OFFSET). SQLite result code. */
int sq_marker_get(sq_sink *s, const char *topic, int32_t partition,
                  tm_marker *m);
/* Writes *m back. SQLite result code; SQLITE_NOTFOUND if no row. */
int sq_marker_put(sq_sink *s, const tm_marker *m);

/* owners.c */
/* Inside the claim's transaction: refuses (TM_FATAL naming the table, the
 * other connector and the setting) a table another connector writes
 * unless both say shared_table, then records this connector as a writer
 * of the table; refuses (TM_FATAL) a partition of MARKERS (N of them) on
 * which another connector of the shared table holds a marker. */
tm_status sq_owner_register(sq_sink *s, const tm_marker *markers, size_t n,
                            tm_error *err);
/* Before a scan of (topic, partition): TM_OK unless the table is shared
 * and another connector holds a marker there too (TM_FATAL naming it:
 * the rows do not say which connector wrote them). */
tm_status sq_owner_scan_check(sq_sink *s, const char *topic, int32_t partition,
                              tm_error *err);

/* keyset.c (docs/sinks/sqlite.md, Business keys held in memory) */
/* Inside a write transaction: brings the set up to the connector's
 * tidemark_keysets row (made, with a new seed, when missing) and newest
 * batch row, clears the staged changes. SQLite result code (CORRUPT:
 * batch rows without the connector's row, whose seed they need, or a seed
 * that fails its seed_check). */
int sq_keys_sync(sq_sink *s);
/* Before a claim's write lock: a set not loaded yet (or that another
 * process's removals made stale) is loaded in a read transaction (WAL:
 * other writers go on meanwhile), so that the claim's sq_keys_sync only
 * follows what came since. SQLite result code (the claim's sync tries
 * again and reports). */
int sq_keys_preload(sq_sink *s);
/* sq_fail, or what sq_keys_sync refused: TM_FATAL (batch rows without
 * their seed, a seed that fails its check), TM_RETRY (the keys do not fit
 * in memory). */
tm_status sq_keys_fail(sq_sink *s, int rc, const char *step, tm_error *err);
/* The digests of every keyed record of B (after sq_keys_sync). */
int sq_keys_prepare(sq_sink *s, const tm_batch *b);
/* Record J of the N prepared: 0 new, 1 duplicate, 2 conflict; *key its
 * digests, *earlier the record index of a key first staged in this batch
 * (-1: a stored key). */
int sq_keys_decide(sq_sink *s, size_t j, size_t n, sq_key *key,
                   int32_t *earlier);
/* A new key whose row was written. */
int sq_keys_stage(sq_sink *s, sq_key key, int32_t rec, int64_t applied_at);
/* Removes the expired key batches (and old per-key rows): both clocks. */
int sq_keys_prune(sq_sink *s, int64_t horizon, int64_t wall_horizon);
/* Writes the batch's row of new keys (generation: the newest after this
 * batch's removals, plus one) and, after removals, the connector's
 * keysets row (pruned + 1). */
int sq_keys_write(sq_sink *s, int64_t wall_ms);
/* After COMMIT returned SQLITE_OK: the staged changes into the set. */
void sq_keys_committed(sq_sink *s);
/* Rolled back or unknown: the set as it was. */
void sq_keys_abort(sq_sink *s);
void sq_keys_free(sq_sink *s);
/* *allowed: 0 when the connector's keys are held as batches (a keysets
 * row): "rows" would not see them. SQLite result code. */
int sq_keys_rows_allowed(sq_sink *s, int *allowed);
/* The check value stored beside SEED in tidemark_keysets.seed_check. */
int64_t sq_keys_seed_check(const uint8_t seed[16]);
/* In a write transaction with "dedup_keys": "rows": TM_FATAL naming the
 * setting when the connector's keys are held as batches. */
tm_status sq_keys_rows_check(sq_sink *s, tm_error *err);

/* commit.c */
tm_status sq_commit(void *sink, const tm_batch *batch, tm_error *err);

/* scan.c */
tm_status sq_scan(void *sink, const char *topic, int32_t partition,
                  void *emit_ctx, tm_error *err);

/* validate.c */
tm_status sq_validate(const tm_host_api *host, const tm_sink_config *config,
                      tm_error *err);

#endif
