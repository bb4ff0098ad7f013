/* The conformance kit's shared types: the run (plugin, config, options), a
 * fixture (one fresh sink instance with fresh state), batches the kit
 * builds itself, and read-back through read_markers and scan. */
#ifndef TM_SINKCHECK_KIT_H
#define TM_SINKCHECK_KIT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

#include "config/settings.h"
#include "services/buf.h"
#include "services/clock.h"
#include "services/host_services.h"

/* ---- the run ------------------------------------------------------------ */

typedef struct kit_run {
    const tm_sink_api *api;
    const char *plugin_path;
    json_t *settings;   /* template: "${tmpdir}" / "${case}" substituted */
    tm_column *columns; /* parsed from the config or the defaults */
    size_t ncolumns;
    char **column_names; /* owned strings behind columns[i].name */
    uint64_t seed;
    int kills; /* random kills of case random_kills */
} kit_run;

/* A case fills its verdict. SKIP never counts as passed. */
typedef enum kit_verdict { KIT_PASS, KIT_FAIL, KIT_SKIP } kit_verdict;

typedef struct kit_result {
    kit_verdict verdict;
    char reason[1024];
} kit_result;

typedef void (*kit_case_fn)(const kit_run *run, kit_result *res);

typedef struct kit_case {
    const char *name;
    kit_case_fn fn;
    const char *proves; /* one line for --list */
} kit_case;

/* Sets a FAIL (the first reason wins: it is the cause, the rest follow). */
void kit_fail(kit_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void kit_skip(kit_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define KIT_FAILED(res) ((res)->verdict != KIT_PASS)
/* Where the settings sit in the kit's config file (--config): the JSON
 * path the host's messages about them name. */
#define KIT_SETTINGS_PATH "$.settings"

/* The partitions every case uses (the same topic twice and a second one). */
#define KIT_NPARTS 3
extern const char *const kit_part_topic[KIT_NPARTS];
extern const int32_t kit_part_partition[KIT_NPARTS];

/* ---- fixtures: fresh state per case ------------------------------------ */

typedef struct kit_fixture {
    const kit_run *run;
    char tmpdir[256]; /* fresh empty directory, removed by kit_fixture_done */
    char case_id[96]; /* unique per fixture: [a-z0-9_] */
    char connector[128]; /* "sinkcheck_" + case_id */
    tm_settings *settings;
    tm_log_context logctx; /* host_ctx: names in every plugin log line */
    tm_sink_config config; /* points into this struct: never move it */
} kit_fixture;

/* Creates the temp dir and the settings for case NAME. 0 or -1 (res set). */
int kit_fixture_init(kit_fixture *fx, const kit_run *run, const char *name,
                     uint32_t config_flags, kit_result *res);
/* As init, but with settings from a caller-made JSON object (case
 * bad_settings); takes no reference to obj beyond the call. */
int kit_fixture_init_settings(kit_fixture *fx, const kit_run *run,
                              const char *name, json_t *settings_template,
                              uint32_t config_flags, kit_result *res);
void kit_fixture_done(kit_fixture *fx);
/* Removes PATH and everything below it (CONTENTS_ONLY: keeps PATH itself,
 * empty). 0, or -1 when something stayed (each is named on stderr). */
int kit_remove_tree(const char *path, int contents_only);

/* Opens a fresh instance with the real host services (or HOST if not
 * NULL). Returns the status; *sink NULL unless TM_OK. */
tm_status kit_open(const kit_fixture *fx, const tm_host_api *host, void **sink,
                   tm_error *err);

/* ---- markers ------------------------------------------------------------ */

/* Fills m[KIT_NPARTS] with topic/partition and next_offset = start[i]. */
void kit_markers_init(tm_marker *m, const int64_t *start);
tm_status kit_claim(const kit_run *run, void *sink, tm_marker *m,
                    const int64_t *start, uint32_t flags, tm_error *err);
tm_status kit_read_markers(const kit_run *run, void *sink, tm_marker *m,
                           tm_error *err);

/* ---- batches ------------------------------------------------------------ */

typedef struct kit_batch {
    tm_batch b;
    tm_range ranges[KIT_NPARTS];
    tm_record *records;
    size_t cap_records;
    tm_dead_letter *dls;
    size_t cap_dls;
    struct kit_arena *arena; /* strings and values the batch points at */
    const kit_run *run;
    char batch_id[TM_BATCH_ID_MAX];
    int oom;
} kit_batch;

void kit_batch_init(kit_batch *kb, const kit_run *run);
/* Adds a range for kit partition PART; returns its index. */
uint32_t kit_batch_range(kit_batch *kb, int part, int64_t start, int64_t end,
                         int64_t epoch);
/* Adds a record at OFFSET in range R with generated column values; identity
 * and hash may be NULL. */
void kit_batch_record(kit_batch *kb, uint32_t r, int64_t offset,
                      const char *identity, const char *hash);
/* Adds a change event (TM_CONFIG_CDC) at OFFSET: the record of
 * kit_batch_record with column KEY_COL set to KEY and tm_record.op OP; a
 * delete's other columns are null. */
void kit_batch_change(kit_batch *kb, uint32_t r, int64_t offset, size_t key_col,
                      int64_t key, uint32_t op);
/* Adds a host-made dead letter. */
void kit_batch_dead_letter(kit_batch *kb, uint32_t r, int64_t offset,
                           tm_dl_reason reason, const char *detail);
/* Finalises pointers (after the last add). -1 on allocation failure. */
int kit_batch_seal(kit_batch *kb);
void kit_batch_free(kit_batch *kb);
/* A contiguous batch: for each part with len[i] > 0 (or force_empty), a
 * range [start[i], start[i]+len[i]) with a record at every offset. */
int kit_batch_dense(kit_batch *kb, const kit_run *run, const int64_t *start,
                    const int64_t *len, const int64_t *epoch);

/* ---- read-back ---------------------------------------------------------- */

typedef struct kit_item {
    tm_item_kind kind;
    int64_t offset;
    tm_dl_reason reason;
    char identity[128]; /* "" when NULL */
    char *values;       /* rows: kit_values_text of the item's values, or NULL
                           when it carries none (ABI < 1.2, or not given back) */
} kit_item;

typedef struct kit_part_state {
    tm_marker marker;
    kit_item *items;
    size_t nitems;
} kit_part_state;

typedef struct kit_state {
    kit_part_state part[KIT_NPARTS];
} kit_state;

/* Reads markers and scans every kit partition. -1 with res set. */
int kit_state_read(const kit_run *run, void *sink, kit_state *st,
                   kit_result *res);
void kit_state_free(kit_state *st);
/* 0 when equal; else -1 with what differs in buf. */
int kit_state_compare(const kit_state *a, const kit_state *b, char *buf,
                      size_t size);
/* Checks that part P holds exactly rows at offsets [from, to) once each
 * and nothing else of kind ROW; -1 with buf. */
int kit_part_rows_dense(const kit_part_state *p, int64_t from, int64_t to,
                        char *buf, size_t size);
/* Counts items of KIND (and REASON when non-zero) at OFFSET in part P. */
size_t kit_part_count(const kit_part_state *p, tm_item_kind kind,
                      int64_t offset, tm_dl_reason reason);
size_t kit_part_kind_total(const kit_part_state *p, tm_item_kind kind);

/* The values of a row as comparable text (typed by the run's columns):
 * malloc'd, NULL on allocation failure. */
char *kit_values_text(const kit_run *run, const tm_value *values, size_t n);

/* Reads state into st from a freshly opened instance (open, read, close). */
int kit_state_fresh(const kit_fixture *fx, kit_state *st, kit_result *res);

/* ---- case set-up ------------------------------------------------------- */

/* Fixture + open + claim of every kit partition at start[] (NULL: all 0).
 * 0, or -1 with res set and everything released. */
int kit_setup(kit_fixture *fx, const kit_run *run, const char *name,
              uint32_t config_flags, const int64_t *start, void **sink,
              tm_marker *m, kit_result *res);
void kit_teardown(kit_fixture *fx, void *sink);
/* Commits a sealed batch: the status, with the message in err. */
tm_status kit_commit(const kit_run *run, void *sink, const kit_batch *kb,
                     tm_error *err);
/* Commits and expects WANT; else FAIL naming WHAT. 0 when as expected. */
int kit_expect_commit(const kit_run *run, void *sink, const kit_batch *kb,
                      tm_status want, const char *what, kit_result *res);

/* ---- crash helpers ------------------------------------------------------ */

/* Forks a child that opens a fresh instance and commits KB with
 * TIDEMARK_FAULT=point, TIDEMARK_FAULT_FD on a pipe. 0 when the child wrote
 * the point's name and died by SIGKILL; -1 with res set otherwise. */
int kit_commit_with_fault(const kit_fixture *fx, const kit_batch *kb,
                          const char *point, kit_result *res);

/* Deterministic PRNG (splitmix64) for the seeded parts. */
uint64_t kit_rand(uint64_t *state);

/* The cases. */
extern const kit_case kit_cases[];
extern const size_t kit_ncases;

#endif
