/* A connector's calls into its sink instance, every one made on the
 * connector's sink thread (runtime/sink_worker.h), one at a time: the
 * plugin sees one thread, serialised calls (sink.h, "Threads"), while the
 * connector's thread polls and converts the next batch during a commit
 * (docs/architecture.md, "The pipeline"). Without that thread (it could
 * not be made) each call runs on the caller's. */
#ifndef TM_SINK_CALLS_H
#define TM_SINK_CALLS_H

#include "runtime/connector_state.h"

/* Starts the sink thread (before the sink is opened); ends it (after the
 * sink is closed, a commit out waited for). */
void tm_sink_calls_start(tm_connector *c);
void tm_sink_calls_end(tm_connector *c);

/* Waits for the commit out, if any (its job kept for
 * tm_sink_commit_done): the sink is idle after. */
void tm_sink_settle(tm_connector *c);

/* The calls, waiting for their answer (and for a commit out, first). */
tm_status tm_sink_open(tm_connector *c, char *why, size_t whysize);
void tm_sink_close(tm_connector *c);
tm_status tm_sink_claim(tm_connector *c, tm_marker *markers, size_t n,
                        tm_error *err);
tm_status tm_sink_read_markers(tm_connector *c, tm_marker *markers, size_t n,
                               tm_error *err);

/* A commit handed over: fn(job) runs on the sink thread while the caller
 * goes on; 0, or -1 when it cannot be handed over (then the caller runs it
 * itself). */
int tm_sink_commit_start(tm_connector *c, void (*fn)(void *), void *job);
/* A commit is out (handed over, its job not taken back). */
int tm_sink_commit_out(tm_connector *c);
/* The job of the commit out once it is done, waiting at most ms for it
 * (0: just looks); NULL when none is done. */
void *tm_sink_commit_done(tm_connector *c, int64_t ms);

#endif
