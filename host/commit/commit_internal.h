/* Shared by the commit loop (commit_loop.c: the events, the dispatch of
 * actions) and its executors (claim.c: CLAIM and READ_MARKERS;
 * commit_batch.c: DLQ_SEND and SINK_COMMIT). The machine
 * (commit/machine.h) decides; these do what it says and answer. */
#ifndef TM_COMMIT_INTERNAL_H
#define TM_COMMIT_INTERNAL_H

#include "commit/machine.h"
#include "kafka/consumer_ops.h"
#include "runtime/connector_state.h"

/* An executor's answer: the event it feeds the machine once every action
 * of the step is done, with the storage the event points at; and what to
 * report once the machine took it (hook, before the actions of that
 * step run). */
typedef struct tm_answer tm_answer;
typedef void (*tm_answer_hook)(tm_connector *c, const tm_answer *a,
                               const tm_machine_action *acts, size_t nacts);
struct tm_answer {
    tm_machine_event ev;
    tm_machine_tp *tps;  /* owned, ev.parts */
    tm_marker *markers;  /* owned, ev.markers */
    int64_t *low, *high; /* owned */
    char **strs;         /* owned strings the above point at */
    size_t nstrs;
    char why[1024]; /* ev.why when set */
    tm_answer_hook hook;
    int64_t *was_epoch; /* SINK_ANSWER: each range's epoch before it */
    int quiet; /* CLAIMED RETRY: a claim given up for a stop, not deferred
                  by an error: not said as one */
};

/* A fresh answer of kind KIND, nothing owned yet. */
void tm_answer_init(tm_answer *a, tm_machine_event_kind kind);
/* A copy of S the answer owns; NULL when memory ran out. */
const char *tm_answer_keep(tm_answer *a, const char *s);
/* Room for N markers (and, with bounds, their log bounds), zeroed, each
 * with its struct_size; -1 when memory ran out. */
int tm_answer_markers(tm_answer *a, size_t n, int bounds);
void tm_answer_free(tm_answer *a);

/* Feeds EV to the machine (now_ms set here) and executes its actions; the
 * answers they make are fed in turn. hook, when given, runs after the
 * step and before its actions (it sees them). */
void tm_commit_feed(tm_connector *c, tm_machine_event *ev, tm_answer_hook hook,
                    const tm_answer *a);

/* The partition's entry, made when there is none (before its ASSIGNED).
 * NULL when memory ran out. */
tm_part *tm_commit_part_add(tm_connector *c, const char *topic,
                            int32_t partition);

/* Inside the rebalance callback (claims get their patience there). */
int tm_commit_in_rebalance(const tm_connector *c);

/* The builder holding the machine's batch ID (opened for a new id when
 * open is set: reset, named); NULL when none (or both are in use). */
tm_batch_builder *tm_commit_builder(tm_connector *c, uint64_t id, int open);
/* The id the sink sees of the machine's batch ID ("" unknown). */
const char *tm_commit_batch_name(tm_connector *c, uint64_t id);

/* Executors of one step's actions of a kind (claim.c, commit_batch.c):
 * each fills its answer. */
void tm_claim_exec(tm_connector *c, const tm_machine_action *const *acts,
                   size_t n, tm_answer *out);
void tm_read_markers_exec(tm_connector *c, const tm_machine_action *const *acts,
                          size_t n, tm_answer *out);
void tm_dlq_send_exec(tm_connector *c, const tm_machine_action *act,
                      tm_answer *out);
/* 1 when answered (out), 0 when the commit was handed to the sink's
 * thread: its answer comes with tm_sink_commit_answer once it is done
 * (runtime/sink_calls.h, tm_sink_commit_done). */
int tm_sink_commit_exec(tm_connector *c, const tm_machine_action *act,
                        tm_answer *out);
void tm_sink_commit_answer(tm_connector *c, void *job, tm_answer *out);

/* What the commit loop was asked, for the log: "stopping", "pausing"
 * (`tidemark pause`) or "pausing, taken back since" (resumed before the
 * loop settled its batch). */
const char *tm_stop_kind(const tm_connector *c);

/* Serves the consumer for ms milliseconds without taking records (the
 * group must not evict us while paused): rebalances are served (a claim
 * made, a revoke fed), consumer errors count as when running. Returns
 * early at a stop. */
void tm_commit_serve(tm_connector *c, int64_t ms);

#endif
