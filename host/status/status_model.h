/* What `tidemark status` knows about one connector: the snapshot a running
 * host publishes (host/status/status_file.h writes it, status_read.h reads
 * it back). Plain data, no I/O. */
#ifndef TM_STATUS_MODEL_H
#define TM_STATUS_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef enum tm_conn_state {
    TM_CONN_STARTING = 0,
    TM_CONN_RUNNING,
    TM_CONN_PAUSED,
    TM_CONN_FAILED,
    TM_CONN_STOPPED,
    /* Running, but retrying past a transient error (a store or broker
     * unreachable, a lock, a topic not there yet), or a partition paused
     * longer than TM_PAUSED_DEGRADED_MS: it recovers by itself, and
     * `tidemark status` exits 3 for it (docs/operations.md, Health). */
    TM_CONN_DEGRADED
} tm_conn_state;

/* A partition paused longer than this makes its connector DEGRADED. */
#define TM_PAUSED_DEGRADED_MS 60000

/* The size of tm_status_snapshot.waiting_on. */
#define TM_STATUS_WAITING_MAX 512

/* One assigned partition as the host last saw it. */
typedef struct tm_status_partition {
    char topic[256];
    int32_t partition;
    int64_t next_offset, epoch; /* the sink's marker as last committed or
                                   claimed (TM_NO_OFFSET / TM_NO_EPOCH when
                                   absent) */
    int64_t high_watermark;     /* -1 unknown */
    uint64_t rows, dead_letters, filtered, duplicates; /* the marker's
                                                          cumulative counts */
    int paused;
    /* Stopped by a change the host cannot apply (docs/operations.md, "A
     * stopped partition"): at stopped_at, for stop_reason. */
    int stopped;
    int64_t stopped_at;
    char stop_reason[512];
} tm_status_partition;

typedef struct tm_status_snapshot {
    char connector[256], plugin[256], plugin_version[64], instance_id[64];
    long pid;
    tm_conn_state state;
    int64_t started_ms, updated_ms; /* wall clock, ms since the epoch */
    char last_batch_id[64];         /* "" when no batch was committed yet */
    int64_t last_batch_ms;
    uint64_t last_batch_records;
    const tm_status_partition *partitions; /* caller-owned */
    size_t npartitions;
    struct {
        uint64_t rows, dead_letters, filtered, duplicates, batches, fenced,
            conflicts, retries;
    } totals;              /* since this host started */
    char last_error[1024]; /* "" when none; already redacted by the caller */
    int64_t last_error_ms; /* 0 when none */
    /* Why the connector is DEGRADED, PAUSED or FAILED, and since when
     * (wall ms); "" and 0 in the other states. Redacted by the caller. */
    char reason[1024];
    int64_t reason_since_ms;
    /* What the connector's thread is waiting on (the dead-letter topic's
     * confirmations, the sink's commit), and since when (wall ms); "" and
     * 0 when it is not in such a wait. Written by the status pulse
     * (status_pulse.h) while that thread cannot write. Redacted by the
     * caller. waiting_until_ms: when the wait should be over at the
     * latest (wall ms; the deadline the host gave it), 0 when unknown: a
     * wait far past it is a stuck call (tm_status_overdue_ms). */
    char waiting_on[TM_STATUS_WAITING_MAX];
    int64_t waiting_since_ms;
    int64_t waiting_until_ms;
} tm_status_snapshot;

/* "STARTING", "RUNNING", "PAUSED", "FAILED", "STOPPED", "DEGRADED". */
const char *tm_conn_state_name(tm_conn_state state);

/* The state named NAME (as tm_conn_state_name gives it). 0, or -1 when
 * NAME is none of them. */
int tm_conn_state_parse(const char *name, tm_conn_state *out);

/* Lag of a partition: high watermark - next offset when both are known,
 * else -1. */
int64_t tm_status_lag(int64_t next_offset, int64_t high_watermark);

#endif
