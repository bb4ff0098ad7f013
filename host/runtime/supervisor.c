#include "runtime/supervisor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/connector_state.h"
#include "runtime/reload_plan.h"
#include "services/log.h"
#include "services/thread_name.h"

/* One connector's thread. Heap-allocated and never moved: the thread holds
 * its address. */
typedef struct job {
    tm_connector_config *cfg;
    /* Set by a reload: started with this config once the thread returned
     * (NULL: not restarting). */
    tm_connector_config *next_cfg;
    int removing;          /* removed by a reload: forgotten once returned */
    int relaunch;          /* `tidemark restart`: started again, same config */
    int64_t stop_asked_ms; /* monotonic, when a reload stopped it */
    int stuck_logged;
    const tm_run_options *opt;
    const atomic_int *all_stop; /* the process's stop */
    tm_run_ctl ctl;             /* its stop, pause, failed, restart */
    atomic_int done;            /* tm_connector_run returned */
    tm_run_result result;
    pthread_t thread;
    int started; /* thread running or to be joined */
} job;

struct tm_supervisor {
    const tm_run_options *opt;
    const atomic_int *all_stop;
    /* Held to change jobs (by the run loop's thread, the only writer) and
     * by tm_sup_stop_all from the signal thread. */
    pthread_mutex_t lock;
    job **jobs;
    size_t n, cap;
    unsigned reload_seq; /* the reload being applied, 0 none */
};

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void *job_main(void *arg) {
    tm_thread_name("tm:connector");
    job *j = arg;
    j->result = tm_connector_run(j->cfg, j->opt, &j->ctl);
    atomic_store(&j->done, 1);
    return NULL;
}

tm_supervisor *tm_sup_new(const tm_run_options *opt,
                          const atomic_int *all_stop) {
    tm_supervisor *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        return NULL;
    }
    s->opt = opt;
    s->all_stop = all_stop;
    return s;
}

/* Under the supervisor's lock: a stop of the whole process is either seen
 * here or sets this job's flags after. */
static int job_launch(job *j) {
    tm_run_ctl_init(&j->ctl);
    if (atomic_load(j->all_stop))
        tm_run_ctl_stop(&j->ctl);
    atomic_store(&j->done, 0);
    j->result = TM_RUN_STOPPED;
    j->stop_asked_ms = 0;
    j->stuck_logged = 0;
    j->started = pthread_create(&j->thread, NULL, job_main, j) == 0;
    if (!j->started)
        tm_log(TM_LOG_ERROR, j->cfg->name, "cannot start a thread");
    return j->started ? 0 : -1;
}

static int start_locked(tm_supervisor *s, tm_connector_config *cfg) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        job **v = realloc(s->jobs, cap * sizeof *v);
        if (!v) {
            tm_log(TM_LOG_ERROR, cfg->name, "out of memory");
            tm_config_free(cfg);
            return -1;
        }
        s->jobs = v;
        s->cap = cap;
    }
    job *j = calloc(1, sizeof *j);
    if (!j) {
        tm_log(TM_LOG_ERROR, cfg->name, "out of memory");
        tm_config_free(cfg);
        return -1;
    }
    j->cfg = cfg;
    j->opt = s->opt;
    j->all_stop = s->all_stop;
    atomic_init(&j->done, 0);
    s->jobs[s->n++] = j; /* kept when the thread fails: counted as down */
    return job_launch(j);
}

int tm_sup_start(tm_supervisor *s, tm_connector_config *cfg) {
    pthread_mutex_lock(&s->lock);
    int rc = start_locked(s, cfg);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static int job_down(const job *j) {
    return !j->started || atomic_load(&j->ctl.failed) || atomic_load(&j->done);
}

static job *find(const tm_supervisor *s, const char *name) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->jobs[i]->cfg->name, name) == 0)
            return s->jobs[i];
    return NULL;
}

const tm_connector_config *tm_sup_config(const tm_supervisor *s,
                                         const char *name) {
    const job *j = find(s, name);
    return j ? j->cfg : NULL;
}

int tm_sup_is_down(const tm_supervisor *s, const char *name) {
    const job *j = find(s, name);
    return !j || job_down(j);
}

/* Stopped exactly as SIGTERM stops it (the same flag the connector
 * watches): its batch finished or abandoned, its consumer closed. */
static void job_stop(job *j) {
    tm_run_ctl_stop(&j->ctl);
    j->stop_asked_ms = tm_now_ms();
}

size_t tm_sup_configs(const tm_supervisor *s, tm_connector_config **out,
                      size_t max) {
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        const job *j = s->jobs[i];
        if (j->removing)
            continue;
        if (k < max)
            out[k] = j->next_cfg ? j->next_cfg : j->cfg;
        k++;
    }
    return k;
}

int tm_sup_reload(tm_supervisor *s, unsigned seq, tm_connector_config **cfgs,
                  size_t n) {
    int rc = -1;
    size_t nrun = s->n;
    tm_reload_entry *run = calloc(nrun ? nrun : 1, sizeof *run);
    tm_reload_entry *next = calloc(n ? n : 1, sizeof *next);
    tm_reload_action *run_action = calloc(nrun ? nrun : 1, sizeof *run_action);
    tm_reload_action *next_action = calloc(n ? n : 1, sizeof *next_action);
    long *run_next = calloc(nrun ? nrun : 1, sizeof *run_next);
    if (!run || !next || !run_action || !next_action || !run_next) {
        tm_log(TM_LOG_ERROR, NULL,
               "SIGHUP: reload %u refused: out of memory; every connector "
               "runs unchanged",
               seq);
        for (size_t k = 0; k < n; k++)
            tm_config_free(cfgs[k]);
        goto out;
    }
    for (size_t i = 0; i < nrun; i++)
        run[i] = (tm_reload_entry){s->jobs[i]->cfg, job_down(s->jobs[i])};
    for (size_t k = 0; k < n; k++)
        next[k] = (tm_reload_entry){cfgs[k], 0};
    tm_reload_plan(run, nrun, next, n, run_action, run_next, next_action);
    size_t kept = 0, restarted = 0, added = 0, removed = 0;
    for (size_t i = 0; i < nrun; i++) {
        job *j = s->jobs[i];
        switch (run_action[i]) {
        case TM_RELOAD_KEEP:
            kept++;
            tm_config_free(cfgs[run_next[i]]);
            break;
        case TM_RELOAD_RESTART:
            restarted++;
            tm_log(TM_LOG_INFO, j->cfg->name, "reload %u: %s: restarting", seq,
                   run[i].down ? "down (FAILED or never started)"
                               : "config changed");
            j->next_cfg = cfgs[run_next[i]];
            job_stop(j);
            break;
        default:
            removed++;
            tm_log(TM_LOG_INFO, j->cfg->name,
                   "reload %u: no config of this name any more: stopping", seq);
            j->removing = 1;
            job_stop(j);
            break;
        }
    }
    for (size_t k = 0; k < n; k++) {
        if (next_action[k] != TM_RELOAD_START)
            continue;
        added++;
        tm_log(TM_LOG_INFO, cfgs[k]->name, "reload %u: new config: starting",
               seq);
        tm_sup_start(s, cfgs[k]);
    }
    tm_log(TM_LOG_INFO, NULL,
           "SIGHUP: reload %u: %zu unchanged, %zu restarting, %zu added, %zu "
           "removed",
           seq, kept, restarted, added, removed);
    s->reload_seq = seq;
    tm_sup_tick(s); /* "done" at once when nothing has to stop */
    rc = 0;
out:
    free(run);
    free(next);
    free(run_action);
    free(next_action);
    free(run_next);
    return rc;
}

static int in_transition(const job *j) {
    return j->next_cfg || j->removing || j->relaunch;
}

int tm_sup_busy(const tm_supervisor *s) {
    for (size_t i = 0; i < s->n; i++)
        if (in_transition(s->jobs[i]))
            return 1;
    return 0;
}

/* A connector a reload stopped that has not returned after the stop's
 * limit: its sink does not return even when interrupted. The reload waits
 * for it (its lock and its sink are still in use); said once. */
static void note_stuck(job *j) {
    if (j->stuck_logged || tm_now_ms() - j->stop_asked_ms < 10000)
        return;
    j->stuck_logged = 1;
    tm_log(TM_LOG_WARN, j->cfg->name,
           "stopped by a reload, it did not stop within 10 s: its sink does "
           "not return from a call even when interrupted; the reload waits "
           "for it (SIGTERM still ends the process within 10 s)");
}

void tm_sup_tick(tm_supervisor *s) {
    pthread_mutex_lock(&s->lock);
    size_t i = 0;
    while (i < s->n) {
        job *j = s->jobs[i];
        /* `tidemark restart` (its control socket): stopped as SIGTERM
         * stops it, then started again with the same config; a FAILED one
         * is how an operator recovers it in place. */
        if (j->started && !in_transition(j) &&
            atomic_exchange(&j->ctl.restart, 0)) {
            tm_log(TM_LOG_INFO, j->cfg->name,
                   "restart asked: stopping, then starting again");
            j->relaunch = 1;
            job_stop(j);
        }
        if (!in_transition(j)) {
            i++;
            continue;
        }
        if (j->started && !atomic_load(&j->done)) {
            note_stuck(j);
            i++;
            continue;
        }
        if (j->started)
            pthread_join(j->thread, NULL);
        j->started = 0;
        if (j->relaunch && !j->next_cfg && !j->removing) {
            j->relaunch = 0;
            job_launch(j);
            i++;
            continue;
        }
        j->relaunch = 0; /* a reload's new config wins */
        tm_config_free(j->cfg);
        j->cfg = NULL;
        if (j->removing) {
            free(j);
            memmove(&s->jobs[i], &s->jobs[i + 1],
                    (s->n - i - 1) * sizeof *s->jobs);
            s->n--;
            continue;
        }
        j->cfg = j->next_cfg;
        j->next_cfg = NULL;
        job_launch(j);
        i++;
    }
    pthread_mutex_unlock(&s->lock);
    if (s->reload_seq && !tm_sup_busy(s)) {
        tm_log(TM_LOG_INFO, NULL, "SIGHUP: reload %u done", s->reload_seq);
        s->reload_seq = 0;
    }
}

int tm_sup_all_down(const tm_supervisor *s, size_t *failed) {
    size_t down = 0, live = 0;
    *failed = 0;
    for (size_t i = 0; i < s->n; i++) {
        const job *j = s->jobs[i];
        if (j->removing)
            continue; /* on its way out: neither up nor down */
        live++;
        if (j->next_cfg || j->relaunch)
            continue; /* to be started again */
        *failed += atomic_load(&j->ctl.failed) != 0;
        down += job_down(j);
    }
    return down == live;
}

void tm_sup_stop_all(tm_supervisor *s) {
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->n; i++)
        tm_run_ctl_stop(&s->jobs[i]->ctl);
    pthread_mutex_unlock(&s->lock);
}

void tm_sup_stop_all_hook(void *s) {
    tm_sup_stop_all(s);
}

/* The exit status of the process: rc_before, or 1 when a connector (not
 * one a reload removed) FAILED or could not start. */
int tm_sup_finish(tm_supervisor *s, int rc_before) {
    long waited = 0;
    for (;;) {
        size_t stuck = 0;
        for (size_t i = 0; i < s->n; i++)
            stuck += s->jobs[i]->started && !atomic_load(&s->jobs[i]->done);
        if (stuck == 0)
            break;
        if (waited >= TM_SUP_STOP_LIMIT_MS) {
            /* Some connector is still inside its sink: the process exits
             * without it (its thread still uses the sink and the
             * consumer, nothing may be torn down under it). As safe as a
             * second signal: every sink commit is atomic and the markers
             * say where to go on; the host lock goes with the process, so
             * `tidemark status` says STOPPED; the group times the member
             * out. */
            int rc = rc_before;
            for (size_t i = 0; i < s->n; i++) {
                const job *j = s->jobs[i];
                if (!j->started || in_transition(j))
                    continue;
                if (atomic_load(&j->done)) {
                    rc |= j->result != TM_RUN_STOPPED;
                    continue;
                }
                rc |= atomic_load(&j->ctl.failed) != 0;
                tm_log(TM_LOG_ERROR, j->cfg->name,
                       "did not stop within 10 s: its sink does not return "
                       "from a call even when interrupted; exiting without it "
                       "(its batch in flight is abandoned: safe, the markers "
                       "did not move)");
            }
            fflush(stdout);
            fflush(stderr);
            _exit(rc ? 1 : 0);
        }
        sleep_ms(50);
        waited += 50;
    }
    int rc = rc_before;
    for (size_t i = 0; i < s->n; i++) {
        job *j = s->jobs[i];
        if (j->started) {
            pthread_join(j->thread, NULL);
            j->started = 0;
            /* One a reload was replacing (FAILED, say) is not counted. */
            if (!in_transition(j) && j->result != TM_RUN_STOPPED)
                rc = 1;
        } else if (!in_transition(j)) {
            rc = 1; /* its thread could not start */
        }
    }
    return rc;
}

void tm_sup_free(tm_supervisor *s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        tm_config_free(s->jobs[i]->cfg);
        tm_config_free(s->jobs[i]->next_cfg);
        free(s->jobs[i]);
    }
    free(s->jobs);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
