#include "runtime/sink_worker.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "services/clock.h"
#include "services/thread_name.h"

struct tm_sink_worker {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a job handed over, done, or the end */
    void (*wake)(void *);
    void *wake_arg;
    void (*fn)(void *);
    void *arg;
    int out;  /* handed over, not taken back */
    int done; /* ... and done */
    int end;
};

static void *worker_main(void *p) {
    tm_thread_name("tm:sink");
    tm_sink_worker *w = p;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->end && !(w->out && !w->done))
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->out && !w->done) {
            void (*fn)(void *) = w->fn;
            void *arg = w->arg;
            pthread_mutex_unlock(&w->mu);
            fn(arg);
            pthread_mutex_lock(&w->mu);
            w->done = 1;
            pthread_cond_broadcast(&w->cv);
            if (w->wake)
                w->wake(w->wake_arg);
            continue;
        }
        if (w->end)
            break;
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

tm_sink_worker *tm_sink_worker_start(void (*wake)(void *), void *wake_arg) {
    tm_sink_worker *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->wake = wake;
    w->wake_arg = wake_arg;
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        free(w);
        return NULL;
    }
    /* Its waits run on the monotonic clock. */
    if (tm_cond_init_mono(&w->cv) != 0) {
        pthread_mutex_destroy(&w->mu);
        free(w);
        return NULL;
    }
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return NULL;
    }
    return w;
}

int tm_sink_worker_submit(tm_sink_worker *w, void (*fn)(void *), void *arg) {
    pthread_mutex_lock(&w->mu);
    int rc = -1;
    if (!w->out) {
        w->fn = fn;
        w->arg = arg;
        w->out = 1;
        w->done = 0;
        pthread_cond_broadcast(&w->cv);
        rc = 0;
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int tm_sink_worker_busy(tm_sink_worker *w) {
    pthread_mutex_lock(&w->mu);
    int out = w->out;
    pthread_mutex_unlock(&w->mu);
    return out;
}

int tm_sink_worker_wait(tm_sink_worker *w, int64_t ms) {
    /* No clock read for a look (ms 0): the commit loop looks once per
     * record. */
    struct timespec until = {0, 0};
    if (ms > 0)
        until = tm_clock_mono_after(ms);
    pthread_mutex_lock(&w->mu);
    int rc = 0;
    while (w->out && !w->done && ms > 0 && rc == 0)
        rc = pthread_cond_timedwait(&w->cv, &w->mu, &until);
    int done = !w->out || w->done;
    pthread_mutex_unlock(&w->mu);
    return done;
}

void *tm_sink_worker_take(tm_sink_worker *w) {
    pthread_mutex_lock(&w->mu);
    void *arg = NULL;
    if (w->out && w->done) {
        arg = w->arg;
        w->out = w->done = 0;
        w->fn = NULL;
        w->arg = NULL;
    }
    pthread_mutex_unlock(&w->mu);
    return arg;
}

void tm_sink_worker_stop(tm_sink_worker *w) {
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    while (w->out && !w->done)
        pthread_cond_wait(&w->cv, &w->mu);
    w->end = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
