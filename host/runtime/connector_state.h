/* The state of one running connector, shared by the rooms that drive it:
 * runtime/ (thread, lifecycle, status), kafka/ (consumer, rebalance),
 * commit/ (the connector core and its executors). One thread owns it: the
 * connector's own. librdkafka calls the rebalance callback from inside
 * rd_kafka_consumer_poll() on that same thread, so nothing here is
 * shared across threads except `stop` and `ctl`, and what the sink's
 * thread (runtime/sink_calls.h) reads for a call it was handed (`sink`,
 * and `rk` to wake the poll after it): the handover's lock orders both. */
#ifndef TM_CONNECTOR_STATE_H
#define TM_CONNECTOR_STATE_H

#include <librdkafka/rdkafka.h>
#include <stdatomic.h>
#include <stdint.h>

#include "config/connector_config.h"
#include "convert/batch_builder.h"
#include "runtime/restarts.h"
#include "runtime/sink_instance.h"
#include "services/log.h"
#include "status/status_model.h"

struct tm_dead_letter_producer;
struct tm_status_writer;
struct tm_status_pulse;

/* One partition the machine holds (commit/machine.h), as the host
 * reports it: the machine decides, this is its view for the status
 * (refreshed by tm_commit_sync_parts) and the host's own facts beside it
 * (the marker's counts, the dead letters delivered, a stop's words). */
typedef struct tm_part {
    char *topic;
    int32_t partition;
    /* The machine's view, refreshed before each status write. */
    int64_t epoch;          /* ours, from the claim */
    int64_t committed;      /* the marker's next_offset as last stored */
    int64_t high_watermark; /* last known, -1 unknown */
    int paused;             /* paused by the machine (retry backpressure) */
    int fenced;             /* another owner claimed it: paused until revoked,
                               or claimed again past a bound */
    int unclaimed;          /* assigned, its claim not through yet (a
                               transient error: retried by the machine) */
    /* Stopped at stop_at by a change it cannot apply safely
     * (commit/part_stop.h): nothing at or past stop_at is taken, and once
     * everything before it is, it is paused in librdkafka (stop_held). */
    int stopped, stop_held;
    int64_t stop_at;
    /* The host's own facts. */
    int64_t dlq_sent_to;  /* the dead letters below it are in the
                             dead-letter topic already (commit_batch.c) */
    tm_marker marker;     /* last read or claimed, for status counts */
    int deferral_said;    /* its claim deferred, said (commit/claim.c) */
    int64_t stop_wall_ms; /* wall, since when it is stopped */
    char stop_why[512];   /* the field and both types */
} tm_part;

typedef struct tm_connector {
    const tm_connector_config *cfg;
    tm_sink_instance sink;
    /* The sink's own thread: every call of the instance is made there
     * (runtime/sink_calls.h); a commit's job done while the connector's
     * thread made another call, kept for the commit loop. */
    struct tm_sink_worker *sink_worker;
    void *sink_done;
    rd_kafka_t *rk;
    /* The opaque of c->rk's callbacks (kafka/consumer.c): one per consumer
     * made, so that a consumer being closed on the watchdog's thread while
     * the next one runs never touches the connector. */
    struct tm_consumer_link *link;
    /* Wakes c->rk's fetcher once the queue drained (kafka/fetch_wake.h);
     * NULL without one. Freed before c->rk is closed. */
    struct tm_fetch_wake *fetch_wake;
    struct tm_dead_letter_producer *dlq; /* NULL without $.dead_letters.topic */
    /* What the commit loop watches: a stop, or a pause
     * (tm_run_ctl.loop_stop). */
    const atomic_int *stop;
    /* The real stop, the pause, and `failed`, set the moment the
     * connector goes FAILED (tm_conn_error), not once it has unwound: a
     * reload that comes in between must already see it down
     * (runtime/connector.h, runtime/supervisor.c). NULL: nobody watches. */
    struct tm_run_ctl *ctl;
    char conn_dir[4400]; /* STATE_DIR/CONNECTOR, for messages */
    int dir_fd;          /* its descriptor (the status writer's) */
    /* Paused by an operator (`tidemark pause`): who, and since when (wall
     * ms); paused_since_ms 0 when not paused. */
    char paused_by[160];
    int64_t paused_since_ms;
    char pause_file_error[512]; /* its file malformed: why, else "" */
    /* While paused librdkafka fetches nothing, so its cached watermarks go
     * stale: the status asks the broker (runtime/connector_status.c),
     * every few seconds (wm_queried_ms, monotonic), a bounded time each,
     * from partition wm_next on. */
    int64_t wm_queried_ms;
    size_t wm_next;
    /* Inside the sink's claim(): a stop interrupts it at once, a commit
     * only past its grace (runtime/connector.c, the stop watch). */
    atomic_int in_claim;
    /* Monotonic ms when *stop (a stop or a pause) was first seen, by the
     * stop watch or the connector's thread, 0 before: the one deadline of
     * the batch in flight is TM_STOP_GRACE_MS from then, never later
     * (commit/commit_loop.h, tm_stop_deadline_ms). */
    _Atomic int64_t stop_seen_ms;
    /* librdkafka raised a fatal error (seen: a static member fenced by its
     * own rejoin after a broker restart): the consumer is made again. */
    int consumer_fatal;
    /* The guard (commit/claim.c) made the consumer again under a new
     * member id for partitions outside the subscription: never twice. */
    int foreign_rejoined;
    /* Partitions outside the subscription this consumer holds unclaimed
     * (after that one rejoin): DEGRADED until the consumer is made again,
     * whatever else recovers. */
    int foreign_held;
    /* The subscription's fingerprint the static member id was kept or
     * made with at the consumer's start (kafka/subscription.h; "" when
     * unknown or no generated id), and whether a consumer's first
     * assignment already found it changed since (checked once per
     * process: kafka/consumer.c). */
    char member_fp[32];
    int member_fp_changed;
    tm_restarts consumer_restarts; /* the consumer made again */
    tm_restarts dlq_restarts;      /* the dead-letter producer made again */
    /* Kafka's reachability (kafka/broker_watch.c): monotonic and wall ms
     * since librdkafka's statistics last showed no broker UP (0 while one
     * is), the error_seq of the DEGRADED it caused (0 none), and
     * librdkafka's last transient error. */
    int64_t kafka_down_ms, kafka_down_wall_ms;
    uint64_t kafka_error_seq;
    char kafka_why[512];
    /* The DEGRADED Kafka's replaced (another cause, still true: a topic
     * not created yet), restored when Kafka answers again; degraded_ms 0
     * when the connector was healthy. */
    char kafka_prev_error[1024];
    int64_t kafka_prev_error_ms, kafka_prev_degraded_ms;

    tm_part *parts;
    size_t nparts, cap;
    /* The sink has a marker of this connector: `start: latest` is spent
     * (commit/claim.c). Never reset: markers are not deleted by the host. */
    int claimed_before;
    int any_unclaimed; /* some part waits for its claim (the view) */

    /* The connector core (commit/machine.h): events in, actions out; the
     * commit loop (commit/commit_loop.c) feeds it and executes what it
     * says. */
    struct tm_machine *m;
    /* A STOP was fed for the stop or pause the loop last saw: a pause
     * ends with GO_ON when the loop runs again. */
    int machine_stopped;
    /* One builder per batch the machine has: the one being built and the
     * one at the sink (bb_batch: its machine id, 0 free; bb_id: the id the
     * sink sees). */
    tm_batch_builder *bb[2];
    uint64_t bb_batch[2];
    char bb_id[2][TM_BATCH_ID_MAX];
    char instance_id[24]; /* random per process start */
    /* The batch last handed to the sink, for messages. */
    char batch_id[TM_BATCH_ID_MAX];
    /* What the loop is in the middle of (commit/commit_loop.c): the
     * record being fed (its TAKE converts it), and the assignment the
     * rebalance callback claims (its START actions set where each
     * partition starts; pauses and resumes wait for the loop). */
    struct tm_commit_now *now;

    /* Monotonic ms of the consumer's last poll (commit/commit_loop.c): an
     * attempt's waits end in time for the next (commit_batch.c). */
    int64_t polled_ms;
    int poll_cut_warned; /* those waits were cut: said once */

    tm_conn_state state;
    char last_error[1024];
    int64_t last_error_ms;
    uint64_t error_seq; /* tm_conn_error calls so far: which error is last */
    /* The health model (docs/operations.md, Health). Wall ms since the
     * connector has been retrying past transient errors (every error that
     * does not fail it), 0 while healthy: a claim, a committed batch or a
     * record taken ends it (not a record after a RETRY: the machine's TAKE
     * says which flow).
     * degraded_batches: totals.batches at the last such error. */
    int64_t degraded_ms;
    uint64_t degraded_batches;
    int64_t failed_ms; /* wall, when it went FAILED */
    int64_t paused_ms; /* wall, since some partition is paused; 0 none */
    int64_t started_ms;
    char last_batch_id[TM_BATCH_ID_MAX];
    int64_t last_batch_ms;
    uint64_t last_batch_records;
    struct {
        uint64_t rows, dead_letters, filtered, duplicates, batches, fenced,
            conflicts, retries;
    } totals;

    struct tm_metrics_conn *metrics; /* metrics/metrics_registry.h */
    tm_warn_state metrics_warned;    /* the metrics file's write failures */
    struct tm_status_writer *status;
    /* Writes status.json for this thread, and again by itself while this
     * thread waits in a step of a commit (status/status_pulse.h). */
    struct tm_status_pulse *pulse;
    int64_t status_written_ms; /* monotonic */
    int markers_dirty;         /* re-read marker counts for the status */
} tm_connector;

/* How long the batch in flight may take to commit once a stop is asked
 * (docs/operations.md, Signals); past it the sink is interrupted. */
#define TM_STOP_GRACE_MS 5000

/* The status file is rewritten at least this often (docs/operations.md),
 * by the status pulse while the connector's thread waits. */
#define TM_STATUS_PERIOD_MS 1000

/* Monotonic and wall clocks in milliseconds. */
int64_t tm_now_ms(void);
int64_t tm_wall_ms(void);

/* The partition, or NULL when it is not assigned to us. */
tm_part *tm_conn_part(tm_connector *c, const char *topic, int32_t partition);

/* Records an error for the status (redacted) and logs it; FAILED when
 * fail is set, else DEGRADED (a transient error the host retries past)
 * until tm_conn_recovered. */
void tm_conn_error(tm_connector *c, int fail, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The connector made progress (what: "claimed", "records flow", ...): no
 * longer DEGRADED, unless a partition still waits for its claim. Logged
 * once when it was. */
void tm_conn_recovered(tm_connector *c, const char *what);

/* Re-reads the sink's markers of the assigned partitions when a commit
 * moved them (markers_dirty), adding what the sink counted to the totals
 * (runtime/connector_status.c). */
void tm_conn_refresh_markers(tm_connector *c);

/* This thread waits on what FMT says (NULL: no more), from now until
 * UNTIL_MS (monotonic, tm_now_ms; the end the host gave the wait) at the
 * latest: the status file shows it, rewritten meanwhile, and a wait far
 * past its end as overdue (runtime/connector_status.c). */
void tm_conn_waiting(tm_connector *c, int64_t until_ms, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A log line with the connector, its plugin and, when given (topic non-NULL,
 * batch_id non-NULL), the partition and the batch as fields. */
void tm_conn_log(const tm_connector *c, tm_log_level level, const char *topic,
                 int32_t partition, const char *batch_id, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

#endif
