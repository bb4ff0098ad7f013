/* Shared by the SQLite sink's fault tests: the plugin loaded as the host
 * loads it, a temporary database, settings from JSON text, dense batches
 * over one or two partitions, and exactly-once checks through scan() and
 * through libsqlite3 directly. Nothing here asserts (the two-writer test
 * calls it from forked children): every function returns a status and
 * fills WHY on failure. */
#ifndef TM_SQLITE_TEST_FIXTURE_H
#define TM_SQLITE_TEST_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

#include "config/settings.h"
#include "services/clock.h"

#define FX_WHY_MAX   512
#define FX_MAX_PARTS 2
#define FX_MAX_RECS  16

extern const tm_sink_api *fx_api;
extern char fx_dir[256], fx_db_path[512];

/* Loads the plugin once per process. 0, or -1 with WHY. */
int fx_load_plugin(char *why, size_t size);
/* A fresh temporary directory with fx_db_path inside (not created). */
int fx_tmpdir(char *why, size_t size);
/* Removes the temporary directory and everything in it. */
void fx_rmdir(void);

/* The connector "unit", columns id INT (key) and body TEXT, and the
 * settings {"path": fx_db_path, "table": "t"} plus EXTRA (JSON members
 * without braces, e.g. "\"synchronous\": \"FULL\"", or NULL). */
typedef struct fx_conf {
    tm_settings *settings;
    tm_sink_config config;
} fx_conf;
int fx_conf_init(fx_conf *c, const char *extra, char *why, size_t size);
void fx_conf_done(fx_conf *c);

/* Opens an instance: TM_OK with *sink, or the status with WHY. */
tm_status fx_open(fx_conf *c, void **sink, char *why, size_t size);

/* Claims partitions 0..n-1 of topic "t" at next_offset 0; markers filled. */
tm_status fx_claim(void *sink, tm_marker *m, size_t n, char *why, size_t size);
/* Reads markers of partitions 0..n-1 of topic "t". */
tm_status fx_read(void *sink, tm_marker *m, size_t n, char *why, size_t size);

/* Partitions 0..nparts-1 of topic "t", each the range [start, end) with
 * one record per offset (id = partition * 1000000 + offset, body BODY,
 * which the caller keeps alive), epoch epochs[p]. */
typedef struct fx_batch {
    tm_batch b;
    tm_range ranges[FX_MAX_PARTS];
    tm_record records[FX_MAX_RECS];
    tm_value values[FX_MAX_RECS][2];
    char id[TM_BATCH_ID_MAX];
} fx_batch;
int fx_batch_make(fx_batch *bt, const char *id, size_t nparts, int64_t start,
                  int64_t end, const int64_t *epochs, const char *body);

/* commit() with a fresh error buffer. */
tm_status fx_commit(void *sink, fx_batch *bt, tm_error *err);

/* Through scan(): partition P holds exactly one row per offset of
 * [0, end), no other row and no dead letter. 0, or -1 with WHY. */
int fx_scan_exactly_once(void *sink, int32_t partition, int64_t end, char *why,
                         size_t size);

/* One integer from SQL run on fx_db_path with a connection of our own.
 * SQLITE_OK with *out, or the SQLite error with WHY. */
int fx_sql_int(const char *sql, int64_t *out, char *why, size_t size);
/* The same for one text value (NULL reads "(null)"). */
int fx_sql_text(const char *sql, char *out, size_t out_size, char *why,
                size_t size);

/* Through libsqlite3 directly: table t holds exactly one row per offset of
 * [0, end) of partition P and nothing beyond. 0, or -1 with WHY. */
int fx_sql_exactly_once(int32_t partition, int64_t end, char *why, size_t size);

#endif
