/* The sink's own thread of a connector (issue 15's pipeline): one job at
 * a time, a sink commit, while the connector's thread polls and converts
 * the next batch. The connector's thread hands a job over, goes on, and
 * takes its result back once it is done; it calls nothing of the sink
 * meanwhile, so the sink's calls stay serialised per instance
 * (docs/writing-a-sink.md, threads): the handover's lock orders them. */
#ifndef TM_SINK_WORKER_H
#define TM_SINK_WORKER_H

#include <stdint.h>

typedef struct tm_sink_worker tm_sink_worker;

/* Starts the thread. wake(wake_arg), when given, is called on it after
 * each job (to wake the connector's thread from its poll). NULL when the
 * thread cannot be made: the caller runs its jobs itself. */
tm_sink_worker *tm_sink_worker_start(void (*wake)(void *), void *wake_arg);

/* Hands fn(arg) over. 0, or -1 when a job is out already. */
int tm_sink_worker_submit(tm_sink_worker *w, void (*fn)(void *), void *arg);

/* A job is out (handed over, not taken back yet). */
int tm_sink_worker_busy(tm_sink_worker *w);

/* Waits at most ms for the job out to be done (0: just looks). 1 when it
 * is (or none is out), 0 not yet. */
int tm_sink_worker_wait(tm_sink_worker *w, int64_t ms);

/* The job out, once done: taken back, its arg returned; NULL when none is
 * done. */
void *tm_sink_worker_take(tm_sink_worker *w);

/* Waits for the job out, then ends the thread. */
void tm_sink_worker_stop(tm_sink_worker *w);

#endif
