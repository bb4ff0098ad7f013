/* The connector core as a pure state machine: events in, actions out.
 *
 * It owns the partitions' states and the batches (one being built, at most
 * one at the sink) and encodes today's commit protocol (docs/exactly-once.md,
 * docs/architecture.md): claim on assignment, seek to the marker, batch,
 * the dead-letter topic delivered before the sink commit, the sink commit,
 * group offsets after it, and what each answer of the sink means. It calls
 * nothing: no librdkafka, no sink, no clock (time comes in the events), no
 * log, no thread. The host runs it (docs/architecture.md, "The connector
 * core as a state machine"):
 *  - event sources: kafka/consumer.c's rebalance callback (ASSIGNED
 *    through commit/claim.c's guard against foreign topics, REVOKED, LOST;
 *    LOST too when the consumer is made again, runtime/connector.c);
 *    commit/commit_loop.c (RECORD with the message's size, PARTITION_END,
 *    TIMER when tm_machine_due_ms says and now and then, STOP with the
 *    stop's deadline, GO_ON after a pause); the executors' answers
 *    (CLAIMED, MARKERS_READ from commit/claim.c; TAKEN, RECORD_STOP,
 *    SEEK_FAILED from commit/commit_loop.c; DLQ_SENT, SINK_ANSWER from
 *    commit/commit_batch.c), each fed once every action of its step is
 *    done, a TAKE's first.
 *  - action executors: CLAIM, READ_MARKERS in commit/claim.c (start
 *    policy, watermarks, the sink's claim, lineage); START into the
 *    assignment the rebalance callback hands librdkafka; PAUSE, RESUME,
 *    SEEK, COMMIT_OFFSETS through kafka/consumer_ops.h; RANGE, TAKE,
 *    EXTEND, DROP_BATCH into the batch's own builder (one per batch);
 *    DLQ_SEND, SINK_COMMIT in commit/commit_batch.c (the commit on the
 *    sink's thread, runtime/sink_calls.h, while the connector's thread
 *    builds the next batch: the pipeline); WRITE_STATUS,
 *    DEGRADE, FAIL through the status and tm_conn_error.
 *  - what the sink answered is reported by the executor that sent
 *    SINK_ANSWER: RETRY, FENCED and CONFLICT with the sink's message
 *    (DEGRADED), the totals and the metrics; the machine's own DEGRADE
 *    and FAIL carry its reasons only.
 *  - the status facts the machine decides: a TAKE's flows (records read
 *    again after a RETRY are no sign of recovery: tm_conn_recovered only
 *    when set); a stopped partition's stop_at and held (tm_machine_part),
 *    which keep the connector DEGRADED.
 * It models too: a RETRY at or past the commit deadline drops the batch
 * and caps the next ones at half its records, doubling back after each
 * commit in under a third of the deadline (test e2e.hostcore.deadline_split);
 * a partition stopped by the converter (RECORD_STOP; tests
 * e2e.cdc_partition_stop.*).
 */
#ifndef TM_MACHINE_H
#define TM_MACHINE_H

#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

typedef struct tm_machine tm_machine;

/* START's offset for a partition assigned unclaimed: the log's end, so that
 * none of its records is fetched before its claim. */
#define TM_MACHINE_LOG_END (-1)

typedef struct tm_machine_config {
    int64_t max_records;   /* a batch is due at this many messages */
    int64_t max_bytes;     /* ... or at this many bytes */
    int64_t max_wait_ms;   /* ... or this long after it opened */
    int dead_letter_topic; /* dead letters go to a topic before the commit */
    int64_t commit_deadline_ms; /* one commit() call's deadline */
    int64_t stop_grace_ms;      /* the batch in flight's time once stopping */
    int64_t fenced_bound_ms;    /* a fenced partition waits this for its
                                   revoke, then its marker is read again */
    int max_conflicts_in_row;   /* CONFLICT this many times in a row fails */
    int64_t retry_base_ms, retry_max_ms; /* RETRY's backoff */
    int64_t claim_base_ms, claim_max_ms; /* a deferred claim's backoff */
    uint64_t seed;                       /* the backoffs' jitter */
} tm_machine_config;

/* The defaults of today's host ($.batch, commit_batch.c, connector.c). */
void tm_machine_config_defaults(tm_machine_config *cfg);

typedef enum tm_machine_event_kind {
    /* parts/nparts: newly assigned by the group. */
    TM_EV_ASSIGNED,
    /* parts/nparts: taken away by the group (REVOKED) or lost (LOST:
     * every batch is given up, whatever its partitions). */
    TM_EV_REVOKED,
    TM_EV_LOST,
    /* The answer to the CLAIM actions of one step: markers/nmarkers name
     * the partitions; low/high their log bounds (for OK). status: TM_OK
     * claimed; TM_RETRY deferred (a transient error outlasted the
     * patience); anything else FAILED (message in `why`). */
    TM_EV_CLAIMED,
    /* The answer to READ_MARKERS: markers/nmarkers; status TM_OK, TM_RETRY
     * (read again later), else FAILED. */
    TM_EV_MARKERS_READ,
    /* One record: topic, partition, offset, bytes (its size). */
    TM_EV_RECORD,
    /* The consumer's position at the partition's end: offset. */
    TM_EV_PARTITION_END,
    /* The open batch is due now (a stop finishing it, a test). */
    TM_EV_BATCH_DUE,
    /* The answer to a TAKE (batch, topic, partition, offset), before any
     * other event: TAKEN with status TM_OK, converted (a batch it made due
     * is cut now), else the builder failed (FAILED, why); RECORD_STOP, the
     * converter refused it with STOP (a change it cannot apply safely, why
     * its words): the partition stops there (docs/operations.md, "A
     * stopped partition"), the batch is read again without it. */
    TM_EV_TAKEN,
    TM_EV_RECORD_STOP,
    /* batch: the dead letters of it were delivered (status TM_OK), or not
     * (anything else, why): like a sink's RETRY. */
    TM_EV_DLQ_SENT,
    /* batch: the sink's answer to SINK_COMMIT (status, why); for FENCED and
     * CONFLICT the markers read again (markers/nmarkers, one per range,
     * markers_read 0 when read_markers failed). */
    TM_EV_SINK_ANSWER,
    /* topic, partition: the SEEK did not happen; asked again. */
    TM_EV_SEEK_FAILED,
    /* Time passed (now_ms): batch age, retry and claim backoffs, fenced
     * bounds. */
    TM_EV_TIMER,
    /* Stopping: the batch in flight gets stop_grace_ms from now_ms, or
     * until offset when that is earlier (the stop's deadline, the stop
     * seen before now; 0: none); why names the stop for the reasons
     * ("stopping", "pausing"; NULL: "stopping"). A batch waiting to retry
     * is tried again at once. */
    TM_EV_STOP,
    /* The stop was a pause and is over: records are taken and claims
     * retried again, and every running partition is read again from where
     * its next batch starts (what was fetched meanwhile was not taken). */
    TM_EV_GO_ON,
    /* The consumer must be polled while the next batch, due, waits for the
     * one at the sink (the poll rule: the next one's commit must find its
     * budget whole): every running partition is paused until the one at the
     * sink settles, and read again from where the next batch ends (what was
     * fetched meanwhile is not taken). Nothing without a batch at the sink. */
    TM_EV_HOLD_READS
} tm_machine_event_kind;

typedef struct tm_machine_tp {
    const char *topic;
    int32_t partition;
} tm_machine_tp;

/* One event; the fields its kind names (above), the rest zero. now_ms is
 * monotonic and never goes back. */
typedef struct tm_machine_event {
    tm_machine_event_kind kind;
    int64_t now_ms;
    const tm_machine_tp *parts;
    size_t nparts;
    const tm_marker *markers;
    size_t nmarkers;
    const int64_t *low, *high;
    tm_status status;
    int markers_read;
    uint64_t batch;
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t bytes;
    const char *why;
} tm_machine_event;

typedef enum tm_machine_action_kind {
    TM_ACT_CLAIM,          /* part; offset: where a partition without a marker
                              starts (TM_NO_OFFSET: the start policy's) */
    TM_ACT_READ_MARKERS,   /* part: read its marker, no claim */
    TM_ACT_START,          /* part; offset: its position in the assignment
                              (TM_MACHINE_LOG_END: the log's end) */
    TM_ACT_PAUSE,          /* part */
    TM_ACT_RESUME,         /* part */
    TM_ACT_SEEK,           /* part; offset */
    TM_ACT_RANGE,          /* batch, range, part: a range opens at offset with
                              epoch */
    TM_ACT_TAKE,           /* batch, range, part, offset: convert the record of
                              this event into the range, answer TAKEN or
                              RECORD_STOP; flows: a sign of recovery for the
                              status (no RETRY since the last commit or
                              claim) */
    TM_ACT_EXTEND,         /* batch, range, part: the range ends at offset
                              without a record (partition end) */
    TM_ACT_DLQ_SEND,       /* batch: produce its dead letters, flush, answer
                              DLQ_SENT */
    TM_ACT_SINK_COMMIT,    /* batch; offset: the call's deadline (now_ms
                              based); answer SINK_ANSWER */
    TM_ACT_COMMIT_OFFSETS, /* part, offset: group offset (for lag tools) */
    TM_ACT_DROP_BATCH,     /* batch: given up, its builder reset; why */
    TM_ACT_WRITE_STATUS,   /* the status file now */
    TM_ACT_DEGRADE,        /* a transient error: why */
    TM_ACT_FAIL            /* the connector FAILED: why (part when one) */
} tm_machine_action_kind;

typedef struct tm_machine_action {
    tm_machine_action_kind kind;
    const char *topic; /* the part, NULL when none; valid until the next
                          step (the machine's own copy) */
    int32_t partition;
    int64_t offset;
    int64_t epoch;
    uint64_t batch;
    uint32_t range;
    int flows;       /* TAKE: records flow again (see TM_ACT_TAKE) */
    const char *why; /* valid until the next step */
} tm_machine_action;

/* NULL with errstr on bad settings or out of memory. */
tm_machine *tm_machine_new(const tm_machine_config *cfg, char *errstr,
                           size_t errsize);
void tm_machine_free(tm_machine *m);

/* Feeds one event. 0 with *actions (*nactions of them, in the order to
 * execute them, valid until the next step or free). -1 with errstr when
 * the event is malformed (the machine unchanged) or memory ran out (then
 * the machine is FAILED and the actions so far, ending in FAIL, are
 * still returned). */
int tm_machine_step(tm_machine *m, const tm_machine_event *ev,
                    const tm_machine_action **actions, size_t *nactions,
                    char *errstr, size_t errsize);

/* ---- Looking inside (status, tests) ------------------------------------ */

typedef enum tm_machine_part_state {
    TM_PART_ABSENT,   /* not assigned */
    TM_PART_CLAIMING, /* assigned, claim asked or deferred */
    TM_PART_RUNNING,
    TM_PART_FENCED,   /* another owner claimed it: paused until revoked */
    TM_PART_REVOKING, /* revoked while a batch of it is at the sink */
    TM_PART_LOST      /* lost while a batch of it is at the sink */
} tm_machine_part_state;

typedef struct tm_machine_part_view {
    tm_machine_part_state state;
    int64_t epoch;
    int64_t committed;     /* the marker's next_offset as last known */
    int64_t next_expected; /* the next offset a batch accepts */
    int64_t high_watermark;
    int paused;     /* paused by RETRY's backpressure */
    int needs_seek; /* records dropped: a SEEK is due once it may run */
    int deferred;   /* CLAIMING after a deferred claim */
    int stopped;    /* stopped at stop_at by RECORD_STOP */
    int64_t stop_at;
    int held; /* stopped, read up to stop_at, and paused there */
} tm_machine_part_view;

void tm_machine_part(const tm_machine *m, const char *topic, int32_t partition,
                     tm_machine_part_view *out);

typedef enum tm_machine_batch_phase {
    TM_BATCH_NONE,
    TM_BATCH_BUILDING,
    TM_BATCH_DLQ,       /* DLQ_SEND out, awaiting DLQ_SENT */
    TM_BATCH_AT_SINK,   /* SINK_COMMIT out, awaiting SINK_ANSWER */
    TM_BATCH_RETRY_WAIT /* RETRY answered, the next attempt at retry_at */
} tm_machine_batch_phase;

typedef struct tm_machine_batch_view {
    tm_machine_batch_phase phase;
    uint64_t id;
    size_t nranges;
    int64_t messages;
    int abandoned; /* a partition of it was revoked or lost at the sink */
    int due;       /* the one being built is due: cut once the sink is free */
    int reads_paused; /* at the sink: every partition paused until it settles */
} tm_machine_batch_view;

/* which 0: the batch being built; 1: the one at the sink. */
void tm_machine_batch(const tm_machine *m, int which,
                      tm_machine_batch_view *out);

/* One range of a batch (which as above): its partition and bounds. */
int tm_machine_batch_range(const tm_machine *m, int which, size_t i,
                           tm_range *out);

int tm_machine_failed(const tm_machine *m);
/* The host failed the connector itself (an executor, the consumer, the
 * rebalance): the machine is FAILED from now on as after its own FAIL
 * (nothing more happens but leaving the group), without an action; a
 * TAKE out is still answered (TAKEN or RECORD_STOP), and the batch at the
 * sink applied when its answer says so (no action either). */
void tm_machine_host_failed(tm_machine *m);

/* The earliest now_ms at which a TIMER moves a batch (the one being built
 * due by age while the sink is free, the next attempt after RETRY's
 * backoff); INT64_MAX when
 * none waits on time. Claims and fenced bounds are not counted: a TIMER
 * now and then serves them. */
int64_t tm_machine_due_ms(const tm_machine *m);

const char *tm_machine_event_name(tm_machine_event_kind k);
const char *tm_machine_action_name(tm_machine_action_kind k);
const char *tm_machine_part_state_name(tm_machine_part_state s);

#endif
