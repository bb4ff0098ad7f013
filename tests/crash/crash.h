/* The crash suite: the exactly-once proof of `tidemark run` against the real
 * broker, for every built-in sink (SQLite and PostgreSQL with both
 * connectors; iceberg-lite, which has no dedup, with the raw one). Each
 * scenario kills, tampers or restarts something at an awkward moment, then
 * judges the sink's own tables against the records Kafka itself holds;
 * never against the host's counters or logs. Expectations are computed
 * from what the scenario produced. A fault that did not land where meant
 * fails the scenario as "inconclusive". */
#ifndef TM_CRASH_H
#define TM_CRASH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

/* ---- the sink abstraction (sink.c) ---------------------------------- */

typedef enum { CS_SQLITE, CS_POSTGRES, CS_ICEBERG } cs_kind;

typedef struct crash_sink {
    cs_kind kind;
    const char *name; /* "sqlite", "postgres" or "iceberg_lite" */
    int dedup;        /* has business-key dedup: runs the "dedup" connector */
    char db[4096];    /* SQLite: the database file; iceberg-lite: the folder
                         of its table folders */
    char schema[128]; /* PostgreSQL: this run's schema */
    int catalog;      /* iceberg-lite with its tables in an Iceberg SQL
                         catalog (db/catalog.db): sink "iceberg_catalog" */
} crash_sink;

/* Picks the sink by name; fails on an unknown one. */
void cs_init(crash_sink *s, const char *name, const char *scenario);
/* The "sink" member of a connector config for one target table. */
const char *cs_sink_json(const crash_sink *s, const char *table);
/* One integer from the sink's database: NULL is 0, an error (a table not
 * there yet) is -1. Same SQL for every sink: iceberg-lite's tables are
 * read by pyiceberg and queried with DuckDB (iceberg_observer.py), its
 * markers and dead letters shown as the tables tidemark_markers and
 * tidemark_dead_letters of the SQL sinks. */
int64_t cs_int(const crash_sink *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The rows of a table as its metadata counts them (iceberg-lite: the
 * current snapshot's total-records; the SQL sinks: count(*)); -1 when the
 * table is not there yet. */
int64_t cs_quick_count(const crash_sink *s, const char *table);
/* A column of integers, in the query's order; returns the count, *out
 * malloc'd (the caller frees it). Fails the test on an error. */
size_t cs_list(const crash_sink *s, int64_t **out, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Deletes the markers of these connectors, the effects kept (the boundary
 * scenario); returns how many were deleted. Fails on an error. */
int64_t cs_forget_markers(const crash_sink *s, const char *const *connectors,
                          int n);
/* Drops what the run made (PostgreSQL: its schema), after a pass. */
void cs_cleanup(const crash_sink *s);

/* ---- the workload (workload.c) -------------------------------------- */

/* The two connectors of the write-up on one topic: "raw" (every record a
 * row, like bronze) and "dedup" (JSON, dedup on the event id, like
 * silver). */
typedef struct crash_env {
    crash_sink sink;
    const char *scenario;
    char topic[256];
    int partitions;
    char topic2[256];          /* a second topic of the connectors, or "" */
    char raw[256], dedup[256]; /* connector names */
    /* dedup_cfg is "" for a sink without dedup (iceberg-lite): the raw
     * connector alone runs, and the spawners skip an empty config. */
    char raw_cfg[4096], dedup_cfg[4096];
    int nconn; /* connectors run: 2, or 1 (raw) without dedup */
    /* What the scenario produced (the expectations). */
    int64_t sent;       /* Kafka messages produced */
    int64_t unique_ids; /* distinct event ids among the valid events */
    int64_t resends;    /* valid events sent again with a known id */
    int64_t conflicts;  /* a known id with another payload */
    int64_t violations; /* malformed records (dead letters in dedup) */
    int64_t next_id;    /* the next unused event id */
    rd_kafka_t *producer;
    int64_t t0_ms;
} crash_env;

typedef struct crash_conf {
    const char *batch;    /* the "batch" object's members */
    const char *props;    /* extra $.kafka.properties members, or NULL */
    const char *instance; /* group.instance.id suffix, or NULL */
    const char *state;    /* state dir name, or NULL for "state" */
} crash_conf;

void ce_init(crash_env *e, const char *sink, const char *scenario,
             int partitions);
/* Writes both connectors' configs (again, with other settings). */
void ce_configs(crash_env *e, const crash_conf *c);
/* Valid events ids [first, first+n), round-robin over the partitions,
 * loop number loop; ts_ms 0: the producer's clock. New ids count as
 * unique, known ids as resends. Returns the offsets in *offs if given
 * (n entries, malloc'd). */
void ce_events(crash_env *e, int64_t first, int64_t n, int loop, int64_t ts_ms,
               int64_t **offs, int32_t **parts);
/* n contract violations (invalid JSON, a missing id, a wrong type). */
void ce_violations(crash_env *e, int n);
/* n events with known ids (from first) and a changed payload. */
void ce_conflicts(crash_env *e, int64_t first, int n);
/* The write-up's backlog: loops x sample events, loop 0 again, and the
 * violations. Sizes from TIDEMARK_CRASH_LOOPS / _SAMPLE / _VIOLATIONS. */
void ce_writeup_backlog(crash_env *e);
/* The messages ce_writeup_backlog produces. */
int64_t ce_writeup_backlog_size(void);
int64_t ce_env_int(const char *name, int64_t dflt);

/* ---- the host and the judge (judge.c) ------------------------------- */

/* `tidemark run` with both connectors (env may be NULL). */
pid_t ce_spawn(crash_env *e, const char *log, const char *const *env);
/* `tidemark run CONFIGS...` (empty strings skipped); every host started
 * so is SIGKILLed when the test exits (a failed check included). */
pid_t ce_spawn_cfgs(const char *const *cfgs, const char *log,
                    const char *const *env);
/* SIGKILL, and the proof it died by it. */
void ce_kill(pid_t pid);
/* SIGTERM, exit 0 expected. */
void ce_stop(pid_t pid);
/* The raw table's rows (a count by the sink's observer: a scan for
 * iceberg-lite). */
int64_t ce_raw_rows(const crash_env *e);
/* The same, as quickly as the sink allows, for the loops that wait for
 * progress before a kill: iceberg-lite answers from the current snapshot's
 * total-records (Iceberg's own summary field) instead of a scan. Never a
 * verdict: what was committed at a kill is counted with ce_raw_rows. */
int64_t ce_raw_progress(const crash_env *e);
/* A host that holds itself still right after its hit-th commit (the
 * fault point after_commit with TIDEMARK_FAULT_ACTION=stop; the hits
 * counted over every connector of the process), so that a kill lands
 * mid-backlog whatever the host's speed: a kill timed by polling the rows
 * came after the last commit when the host drained the backlog between
 * two polls of a test that did not get the CPU. */
typedef struct ce_held {
    pid_t pid;
    h_fault_pipe fp;
} ce_held;
/* `tidemark run CFGS...` (empty strings skipped) armed so. */
void ce_spawn_held(ce_held *h, const char *const *cfgs, const char *log,
                   int hit);
/* The hit at which a host of e's connectors (batches of at most
 * max_records records) has committed about rows raw rows: the hits are
 * shared by e->nconn connectors, so the raw rows at that hit are at most
 * e->nconn * rows. At least 1. */
int ce_hit_for_rows(const crash_env *e, int64_t rows, int max_records);
/* 1 once the held host stopped at its point (seen stopped). */
int ce_held_stopped(const ce_held *h);
/* Waits for the point's name (else inconclusive) and the stop. */
void ce_wait_held(ce_held *h);
/* Waits for the point's name (else inconclusive) and the stop, SIGKILLs
 * the host there; returns the raw rows committed then, guarded: 0 < rows <
 * total (else inconclusive). */
int64_t ce_kill_held(crash_env *e, ce_held *h, int64_t total);
/* For a held host killed before its point: SIGKILL (proven) and the pipe
 * closed. */
void ce_kill_unheld(ce_held *h);
/* Waits until both connectors' markers reach every high watermark. */
void ce_wait_caught_up(crash_env *e, int timeout_ms);
/* The verdict, from the sink's tables and Kafka's records: raw rows ==
 * Kafka messages == distinct offsets (the same offsets per partition);
 * dedup rows == unique ids == distinct ids; dead letters == violations +
 * conflicts; every record of the dedup connector accounted for once.
 * Fills the figures into out (for the summary line). */
typedef struct crash_figures {
    int64_t kafka, raw_rows, raw_distinct, dedup_rows, dedup_ids, dups,
        dead_letters, conflicts;
} crash_figures;
void ce_judge(crash_env *e, crash_figures *out);
/* One partition's stored offsets (sorted) against Kafka's: fails naming
 * the first offset stored twice, missing, or not a record Kafka holds. */
void ce_same_offsets(const char *what, int p, const int64_t *k, size_t nk,
                     const int64_t *s, size_t ns);
/* Also asks `tidemark verify` when it exists (exit 0 required). */
void ce_verify_cli(crash_env *e, const char *cfg);
/* The summary line of a scenario, and PASS. */
void ce_summary(crash_env *e, const crash_figures *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- the scenarios -------------------------------------------------- */

void scenario_writeup(const char *sink);
void scenario_kills(const char *sink);
void scenario_faults(const char *sink);
void scenario_group_offsets(const char *sink);
void scenario_boundary(const char *sink);
void scenario_scale(const char *sink);
void scenario_txn_compact(const char *sink);
void scenario_broker_restart(const char *sink);
void scenario_pg_restart(const char *sink);
void scenario_zombie(const char *sink);

#endif
