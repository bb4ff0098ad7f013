#include "runtime/sink_calls.h"

#include <stdlib.h>

#include "kafka/consumer_ops.h"
#include "runtime/sink_worker.h"

/* On the sink thread after each job: the connector's thread may be in its
 * poll, waiting for the commit's answer. */
static void wake(void *arg) {
    tm_connector *c = arg;
    tm_kafka_wake(c->rk);
}

void tm_sink_calls_start(tm_connector *c) {
    c->sink_worker = tm_sink_worker_start(wake, c);
}

void tm_sink_calls_end(tm_connector *c) {
    tm_sink_worker_stop(c->sink_worker);
    c->sink_worker = NULL;
    free(c->sink_done);
    c->sink_done = NULL;
}

void tm_sink_settle(tm_connector *c) {
    tm_sink_worker *w = c->sink_worker;
    if (!w || !tm_sink_worker_busy(w))
        return;
    while (!tm_sink_worker_wait(w, 1000))
        ;
    c->sink_done = tm_sink_worker_take(w);
}

/* fn(arg) on the sink thread, waited for. A commit out is waited for
 * first, its job kept for the commit loop (tm_sink_commit_done). */
static void call(tm_connector *c, void (*fn)(void *), void *arg) {
    tm_sink_worker *w = c->sink_worker;
    if (!w) {
        fn(arg);
        return;
    }
    tm_sink_settle(c);
    if (tm_sink_worker_submit(w, fn, arg) != 0) {
        fn(arg);
        return;
    }
    while (!tm_sink_worker_wait(w, 1000))
        ;
    (void)tm_sink_worker_take(w);
}

/* One call's arguments and its answer (st). */
typedef struct sink_call {
    tm_connector *c;
    tm_status st;
    tm_marker *markers;
    size_t n;
    tm_error *err;
    char *why;
    size_t whysize;
} sink_call;

static void do_open(void *p) {
    sink_call *k = p;
    k->st = tm_sink_instance_open(&k->c->sink, k->why, k->whysize);
}

static void do_close(void *p) {
    sink_call *k = p;
    tm_sink_instance_close(&k->c->sink);
}

static void do_claim(void *p) {
    sink_call *k = p;
    k->st = k->c->sink.api->claim(k->c->sink.sink, k->markers, k->n, 0, k->err);
}

static void do_read(void *p) {
    sink_call *k = p;
    k->st =
        k->c->sink.api->read_markers(k->c->sink.sink, k->markers, k->n, k->err);
}

tm_status tm_sink_open(tm_connector *c, char *why, size_t whysize) {
    sink_call k = {c, TM_FATAL, NULL, 0, NULL, why, whysize};
    call(c, do_open, &k);
    return k.st;
}

void tm_sink_close(tm_connector *c) {
    sink_call k = {c, TM_OK, NULL, 0, NULL, NULL, 0};
    call(c, do_close, &k);
}

tm_status tm_sink_claim(tm_connector *c, tm_marker *markers, size_t n,
                        tm_error *err) {
    sink_call k = {c, TM_FATAL, markers, n, err, NULL, 0};
    call(c, do_claim, &k);
    return k.st;
}

tm_status tm_sink_read_markers(tm_connector *c, tm_marker *markers, size_t n,
                               tm_error *err) {
    sink_call k = {c, TM_FATAL, markers, n, err, NULL, 0};
    call(c, do_read, &k);
    return k.st;
}

int tm_sink_commit_start(tm_connector *c, void (*fn)(void *), void *job) {
    tm_sink_worker *w = c->sink_worker;
    if (!w || c->sink_done || tm_sink_worker_busy(w))
        return -1;
    return tm_sink_worker_submit(w, fn, job);
}

int tm_sink_commit_out(tm_connector *c) {
    return c->sink_done ||
           (c->sink_worker && tm_sink_worker_busy(c->sink_worker));
}

void *tm_sink_commit_done(tm_connector *c, int64_t ms) {
    if (c->sink_done) {
        void *job = c->sink_done;
        c->sink_done = NULL;
        return job;
    }
    if (!c->sink_worker || !tm_sink_worker_busy(c->sink_worker) ||
        !tm_sink_worker_wait(c->sink_worker, ms))
        return NULL;
    return tm_sink_worker_take(c->sink_worker);
}
