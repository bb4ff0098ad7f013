/* The machine's state, shared by machine.c (the step, the group's events),
 * machine_batch.c (the batches and the sink's answers) and machine_part.c
 * (the partition table and what a marker means for one partition). Nothing
 * here calls out of the process. */
#ifndef TM_MACHINE_INTERNAL_H
#define TM_MACHINE_INTERNAL_H

#include "commit/backoff.h"
#include "commit/machine.h"

typedef struct mpart {
    char *topic; /* owned: ranges and actions point at it */
    int32_t partition;
    tm_machine_part_state state;
    int64_t epoch, committed, next_expected, high_watermark;
    int paused;          /* by RETRY's backpressure */
    int needs_seek;      /* records dropped: SEEK once it may run */
    int deferred;        /* claim deferred: assigned at the log's end */
    int claiming;        /* a CLAIM of it is out */
    int from_assignment; /* that CLAIM came from ASSIGNED: START answers it */
    int reading;         /* a READ_MARKERS of it is out */
    int reclaiming;      /* the CLAIM out is a fenced partition's re-claim */
    int64_t read_epoch;  /* the epoch READ_MARKERS found before it */
    int64_t fenced_ms;   /* when fenced, or its marker last seen moving */
    tm_marker fenced_marker;
    /* Stopped at stop_at by the converter (RECORD_STOP): nothing at or
     * past it is taken; held once read up to it and paused there. */
    int stopped, held;
    int64_t stop_at;
} mpart;

typedef struct mrange {
    const char *topic; /* the part's own string */
    int32_t partition;
    int64_t start, end, epoch;
} mrange;

typedef struct mbatch {
    tm_machine_batch_phase phase;
    uint64_t id;
    mrange *ranges;
    size_t nranges, cap;
    int64_t messages, bytes, opened_ms;
    int abandoned;    /* a part of it revoked or lost while out */
    int dlq_sent;     /* its dead letters are on the topic */
    int paused_parts; /* RETRY paused the running parts */
    int due_asked;    /* BATCH_DUE or STOP: cut as soon as the sink is free */
    int64_t retry_at;
    int64_t sent_ms, deadline_ms; /* its last SINK_COMMIT: when, until when */
} mbatch;

struct tm_machine {
    tm_machine_config cfg;
    mpart *parts;
    size_t nparts, cap;
    mbatch building, at_sink; /* the pipeline: one of each at most */
    uint64_t seq;
    int conflicts_in_row;
    /* Records a batch may hold after a RETRY at the commit deadline cut
     * one in half; 0: max_records. */
    int64_t batch_cap;
    /* The sink answered RETRY since the last commit or claim: records read
     * again are no sign of recovery (TAKE's flows). */
    int sink_degraded;
    /* A TAKE out, to be answered (TAKEN or RECORD_STOP) by the next event:
     * its partition (the part's own string) and offset. */
    int take_out;
    const char *take_topic;
    int32_t take_partition;
    int64_t take_offset;
    int failed;
    int stopping;
    int64_t give_up_ms; /* stopping: the batch out is given up past it */
    char stop_why[32];  /* STOP's why: "stopping", "pausing" */
    int64_t now_ms;
    tm_backoff retry_backoff, claim_backoff;
    int64_t claim_retry_ms;
    /* This step's actions and the strings they point at (freed at the
     * next step). */
    tm_machine_action *acts;
    size_t nacts, acap;
    char **strs;
    size_t nstrs, scap;
    int oom;
    tm_machine_action oom_fail; /* the one action left when memory ran out */
};

/* machine.c */
/* A new action, zeroed but its kind; NULL (and m->oom) when memory ran
 * out. */
tm_machine_action *tm_m_push(tm_machine *m, tm_machine_action_kind kind);
/* Emits an action naming p (or none). */
void tm_m_emit(tm_machine *m, tm_machine_action_kind kind, const mpart *p,
               int64_t offset, const char *why);
/* strdup through malloc itself, so that a test can make it fail. */
char *tm_m_strdup(const char *s);
/* A copy of why kept until the next step; NULL (and m->oom) when memory
 * ran out. */
const char *tm_m_keep(tm_machine *m, const char *why);
/* FAILED, with why (and the part when one is named). */
void tm_m_fail(tm_machine *m, const mpart *p, const char *why);

/* machine_batch.c */
/* Closes a batch without committing it (the one built behind the batch at
 * the sink goes with it); its partitions are read again. */
void tm_m_drop(tm_machine *m, mbatch *b, const char *why);
/* Hands the batch being built to the sink when it is due (forced: now) and
 * the sink is free. */
void tm_m_cut(tm_machine *m, int forced);
/* The batch being built is due (records, bytes, age, a stop, asked). */
int tm_m_due(const tm_machine *m);
/* The batch at the sink is settled, applied or not. */
void tm_m_settle(tm_machine *m, int applied);
void tm_m_hold_reads(tm_machine *m);
void tm_m_record(tm_machine *m, const tm_machine_event *ev);
void tm_m_partition_end(tm_machine *m, const tm_machine_event *ev);
void tm_m_taken(tm_machine *m, const tm_machine_event *ev);
void tm_m_record_stop(tm_machine *m, const tm_machine_event *ev);
void tm_m_dlq_sent(tm_machine *m, const tm_machine_event *ev);
void tm_m_answer(tm_machine *m, const tm_machine_event *ev);
/* FAILED (by the host) with the batch at the sink, which applied it:
 * its partitions committed to its ends, no action. */
void tm_m_applied_failed(tm_machine *m, const tm_machine_event *ev);
void tm_m_batch_timer(tm_machine *m);

/* machine_part.c */
mpart *tm_m_part(const tm_machine *m, const char *topic, int32_t partition);
mpart *tm_m_part_add(tm_machine *m, const char *topic, int32_t partition);
void tm_m_part_remove(tm_machine *m, mpart *p);
void tm_m_parts_free(tm_machine *m);
/* Owned for group offsets and batches: claimed, not fenced, not revoked. */
int tm_m_part_owned(const mpart *p);
/* The partitions' markers after a claim: running at them (0), or -1 when
 * the connector FAILED (a marker outside the log, a re-claim that found no
 * marker of its own). */
int tm_m_parts_claimed(tm_machine *m, const tm_machine_event *ev);
/* A deferred claim: the partitions wait unclaimed (or stay fenced). */
void tm_m_parts_deferred(tm_machine *m, const tm_machine_event *ev);
/* The partition of a batch's range, when it is still the claim the range
 * was built under (the same epoch): one revoked, or lost, and claimed again
 * while the batch was out is another claim, which the batch must not
 * touch. */
mpart *tm_m_part_of(const tm_machine *m, const mrange *r);
/* After FENCED or CONFLICT: what the markers read again (mk[i] of the
 * batch's range i) say of each partition. */
void tm_m_parts_reread(tm_machine *m, const mbatch *b, const tm_marker *mk,
                       size_t n);
/* READ_MARKERS answered for fenced partitions. */
void tm_m_parts_fenced_read(tm_machine *m, const tm_machine_event *ev);
/* SEEKs of every running partition that needs one and may run. */
void tm_m_parts_flush_seeks(tm_machine *m);
/* RETRY's backpressure: pause (1) or resume (0) the running partitions
 * (not one held at its stop: that pause is the stop's). */
void tm_m_parts_pause_all(tm_machine *m, int pause);
/* Forgets the partitions revoked or lost while a batch was out. */
void tm_m_parts_release(tm_machine *m);
/* TIMER: deferred claims and fenced bounds that are due. */
void tm_m_parts_timer(tm_machine *m);

#endif
