/* A PostgreSQL catalog statement's cancel, bounded (catalog_pg.c).
 *
 * libpq 15's PQcancel is a blocking connect, send and wait for the server
 * to close the connection: a server, or a proxy before it, that accepts
 * the cancel's connection and never answers held the caller for good, and
 * a full listen backlog for the connection's tcp_user_timeout. So the
 * cancel runs on a detached thread that owns its PGcancel, and the caller
 * waits for it until a deadline only; a thread still blocked then is left
 * to end whenever the server lets it (it frees what it owns), and the
 * caller treats the cancel as not delivered. Plugins are never unloaded
 * (the host's loader), so a late thread always has its code. At most
 * CANCELS_MAX such threads live at once: past that, a cancel is not
 * attempted (as one not delivered), so a hung server cannot pile them up
 * without end. */
#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "catalog_backend.h"

#define CANCELS_MAX 8

/* Cancels in flight, this process. */
static atomic_int live_cancels;

/* Shared by the caller and the thread; the last of the two to let go
 * frees it. */
typedef struct cancel_job {
    PGcancel *cancel;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done; /* PQcancel returned */
    int sent; /* ... with 1: the server took the request */
    int refs;
} cancel_job;

static void job_release(cancel_job *j) {
    pthread_mutex_lock(&j->mu);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&j->mu);
    if (!last)
        return;
    PQfreeCancel(j->cancel);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void *cancel_main(void *arg) {
    cancel_job *j = arg;
    char err[256];
    int sent = PQcancel(j->cancel, err, sizeof err);
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    j->sent = sent;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    job_release(j);
    atomic_fetch_sub(&live_cancels, 1);
    return NULL;
}

/* A new job owning CANCEL, its condition variable on CLOCK_MONOTONIC (as
 * ice_mono_ms); NULL out of memory (CANCEL freed). */
static cancel_job *job_new(PGcancel *cancel) {
    cancel_job *j = calloc(1, sizeof *j);
    pthread_condattr_t ca;
    if (!j || pthread_condattr_init(&ca) != 0) {
        free(j);
        PQfreeCancel(cancel);
        return NULL;
    }
    int ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
             pthread_cond_init(&j->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok || pthread_mutex_init(&j->mu, NULL) != 0) {
        if (ok)
            pthread_cond_destroy(&j->cv);
        free(j);
        PQfreeCancel(cancel);
        return NULL;
    }
    j->cancel = cancel;
    j->refs = 2; /* the caller's and the thread's */
    return j;
}

/* Starts J's thread, detached: 0, or -1 (J then the caller's alone). */
static int job_start(cancel_job *j) {
    if (atomic_fetch_add(&live_cancels, 1) >= CANCELS_MAX) {
        atomic_fetch_sub(&live_cancels, 1);
        return -1;
    }
    pthread_attr_t at;
    pthread_t th;
    int ok = pthread_attr_init(&at) == 0;
    if (ok) {
        ok = pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) == 0 &&
             pthread_create(&th, &at, cancel_main, j) == 0;
        pthread_attr_destroy(&at);
    }
    if (!ok)
        atomic_fetch_sub(&live_cancels, 1);
    return ok ? 0 : -1;
}

int ice_pg_cancel_until(void *cancel, int64_t deadline) {
    if (!cancel)
        return 0;
    cancel_job *j = job_new(cancel);
    if (!j)
        return 0;
    if (job_start(j) != 0) {
        j->refs = 1;
        job_release(j);
        return 0;
    }
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        struct timespec ts = {.tv_sec = deadline / 1000,
                              .tv_nsec = (long)(deadline % 1000) * 1000000L};
        if (ice_mono_ms() >= deadline ||
            pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT)
            break;
    }
    int sent = j->done && j->sent;
    pthread_mutex_unlock(&j->mu);
    job_release(j);
    return sent;
}
