#include "status/status_pulse.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "services/clock.h"
#include "services/log.h"
#include "services/thread_name.h"

/* How often the thread looks at the age of the last write: a rewrite
 * comes at most this long after the period. */
#define LOOK_MS 100

struct tm_status_pulse {
    tm_status_writer *w;
    int64_t period_ms;
    pthread_mutex_t mu; /* everything below, and the writes through w */
    tm_status_snapshot last;
    tm_status_partition *parts; /* last.partitions, ours */
    int have_last;
    int64_t written_ms; /* monotonic, the last write */
    char waiting_on[TM_STATUS_WAITING_MAX];
    int64_t waiting_since_ms, waiting_until_ms;
    tm_warn_state warned; /* the writes' failures, under mu */
    atomic_int done;
    pthread_t thread;
    int running;
};

/* Under p->mu: the snapshot kept, with the wait, written now. A failure
 * is logged here, once until it changes, whichever thread wrote. */
static int write_locked(tm_status_pulse *p, char *errstr, size_t errsize) {
    snprintf(p->last.waiting_on, sizeof p->last.waiting_on, "%s",
             p->waiting_on);
    p->last.waiting_since_ms = p->waiting_on[0] ? p->waiting_since_ms : 0;
    p->last.waiting_until_ms = p->waiting_on[0] ? p->waiting_until_ms : 0;
    p->written_ms = tm_clock_mono_ms();
    int rc = tm_status_writer_write(p->w, &p->last, errstr, errsize);
    tm_warn_once(&p->warned, p->last.connector, "status",
                 rc != 0 ? errstr : NULL);
    return rc;
}

static void sleep_look(void) {
    struct timespec ts = {0, LOOK_MS * 1000000L};
    nanosleep(&ts, NULL);
}

static void *pulse_main(void *arg) {
    tm_thread_name("tm:status");
    tm_status_pulse *p = arg;
    while (!atomic_load(&p->done)) {
        sleep_look();
        pthread_mutex_lock(&p->mu);
        if (p->have_last &&
            tm_clock_mono_ms() - p->written_ms >= p->period_ms) {
            /* The connector's thread is busy: the same snapshot, fresh. */
            p->last.updated_ms = tm_clock_wall_ms();
            char why[512];
            write_locked(p, why, sizeof why); /* a failure is logged */
        }
        pthread_mutex_unlock(&p->mu);
    }
    return NULL;
}

tm_status_pulse *tm_status_pulse_start(tm_status_writer *w, int64_t period_ms,
                                       const char *who) {
    tm_status_pulse *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->w = w;
    p->period_ms = period_ms;
    atomic_init(&p->done, 0);
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        return NULL;
    }
    p->running = pthread_create(&p->thread, NULL, pulse_main, p) == 0;
    if (!p->running)
        tm_log(TM_LOG_WARN, who,
               "cannot start the status pulse: the status file is not "
               "rewritten while a commit waits");
    return p;
}

int tm_status_pulse_write(tm_status_pulse *p, const tm_status_snapshot *s,
                          char *errstr, size_t errsize) {
    tm_status_partition *parts = NULL;
    if (s->npartitions) {
        parts = malloc(s->npartitions * sizeof *parts);
        if (!parts) {
            snprintf(errstr, errsize, "out of memory");
            return -1;
        }
        memcpy(parts, s->partitions, s->npartitions * sizeof *parts);
    }
    pthread_mutex_lock(&p->mu);
    free(p->parts);
    p->parts = parts;
    p->last = *s;
    p->last.partitions = parts;
    p->have_last = 1;
    int rc = write_locked(p, errstr, errsize);
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void tm_status_pulse_waiting(tm_status_pulse *p, const char *on,
                             int64_t wall_ms, int64_t until_wall_ms) {
    pthread_mutex_lock(&p->mu);
    snprintf(p->waiting_on, sizeof p->waiting_on, "%s", on ? on : "");
    p->waiting_since_ms = wall_ms;
    p->waiting_until_ms = until_wall_ms;
    pthread_mutex_unlock(&p->mu);
}

void tm_status_pulse_stop(tm_status_pulse *p) {
    if (!p)
        return;
    if (p->running) {
        atomic_store(&p->done, 1);
        pthread_join(p->thread, NULL);
    }
    pthread_mutex_destroy(&p->mu);
    free(p->parts);
    free(p);
}
