#include "runtime/connector.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "commit/backoff.h"
#include "commit/claim.h"
#include "commit/commit_internal.h"
#include "commit/commit_loop.h"
#include "commit/part_stop.h"
#include "control/control_server.h"
#include "control/pause_file.h"
#include "kafka/consumer.h"
#include "kafka/consumer_ops.h"
#include "kafka/dead_letter_producer.h"
#include "kafka/kafka_conf.h"
#include "kafka/member_id.h"
#include "metrics/metrics_registry.h"
#include "runtime/connector_state.h"
#include "runtime/sink_calls.h"
#include "services/clock.h"
#include "services/log.h"
#include "services/redact.h"
#include "status/status_file.h"
#include "status/status_pulse.h"
#include "services/thread_name.h"

/* The connector's names for the host's one clock (services/clock.h). */
int64_t tm_now_ms(void) {
    return tm_clock_mono_ms();
}

int64_t tm_wall_ms(void) {
    return tm_clock_wall_ms();
}

tm_part *tm_conn_part(tm_connector *c, const char *topic, int32_t partition) {
    for (size_t i = 0; i < c->nparts; i++)
        if (c->parts[i].partition == partition &&
            strcmp(c->parts[i].topic, topic) == 0)
            return &c->parts[i];
    return NULL;
}

/* The message whole, on the heap: it is redacted before it is cut to
 * last_error's size, so a secret straddling the cut is still recognised
 * (a cut made first would leave its first bytes). NULL when memory ran
 * out. */
static char *format_whole(const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    char *raw = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (raw)
        vsnprintf(raw, (size_t)len + 1, fmt, again);
    va_end(again);
    return raw;
}

/* What a FAILED connector's consumer means to its group: a dynamic member
 * leaves at once; a static one (kafka/member_id.h) does not leave, and the
 * broker keeps its partitions assigned to it, read by no one, until it
 * times the member out. */
static void failed_group_note(const tm_connector_config *cfg, char *out,
                              size_t size) {
    /* Static: the host's id (member_id.h), or the user's own. */
    int is_static = tm_member_id_wanted(cfg);
    for (size_t i = 0; i < cfg->kafka.nproperties; i++)
        is_static |=
            strcmp(cfg->kafka.properties[i].key, "group.instance.id") == 0;
    if (!is_static) {
        snprintf(out, size, "its consumer leaves the group");
        return;
    }
    long ms = tm_kafka_session_timeout_ms(cfg);
    char wait[96] = "session.timeout.ms";
    if (ms > 0)
        snprintf(wait, sizeof wait, "session.timeout.ms (%ld s)",
                 (ms + 999) / 1000);
    snprintf(out, size,
             "its consumer is a static group member, which stays in the "
             "group holding its partitions, read by no host, until the "
             "broker times it out after %s",
             wait);
}

void tm_conn_error(tm_connector *c, int fail, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *raw = format_whole(fmt, ap);
    va_end(ap);
    /* The text may come cut from elsewhere (a database's message), and is
     * cut here to last_error's size: a trailing start of a secret goes. */
    tm_redact_list((const char *const *)c->cfg->secrets, c->cfg->nsecrets,
                   raw ? raw : "(out of memory formatting the error)",
                   TM_REDACT_MAYBE_CUT, c->last_error, sizeof c->last_error);
    free(raw);
    c->last_error_ms = tm_wall_ms();
    c->error_seq++;
    tm_metrics_error(c->metrics);
    if (!fail) {
        if (!c->degraded_ms)
            c->degraded_ms = c->last_error_ms;
        c->degraded_batches = c->totals.batches;
    }
    if (fail && c->state != TM_CONN_FAILED) {
        c->state = TM_CONN_FAILED;
        c->failed_ms = c->last_error_ms;
        if (c->ctl)
            atomic_store(&c->ctl->failed, 1);
        char group[256];
        failed_group_note(c->cfg, group, sizeof group);
        tm_log(TM_LOG_ERROR, c->cfg->name,
               "FAILED: %s (the connector stays FAILED until the process is "
               "stopped or a reload (SIGHUP) starts it again; `tidemark "
               "status` shows it; %s)",
               c->last_error, group);
        tm_conn_status_tick(c, 1);
    } else {
        tm_log(fail ? TM_LOG_ERROR : TM_LOG_WARN, c->cfg->name, "%s",
               c->last_error);
    }
}

void tm_conn_recovered(tm_connector *c, const char *what) {
    /* A stopped partition (commit/part_stop.h) waits for the operator.
     * Partitions still waiting for their claim, or held outside the
     * subscription (commit/claim.c): not recovered yet. */
    size_t nstopped;
    if (!c->degraded_ms || c->any_unclaimed || c->foreign_held ||
        tm_part_stop_first(c, &nstopped))
        return;
    tm_log(TM_LOG_INFO, c->cfg->name,
           "recovered (%s) after %" PRId64 " s of retries; the last error: %s",
           what, (tm_wall_ms() - c->degraded_ms) / 1000, c->last_error);
    c->degraded_ms = 0;
}

void tm_conn_log(const tm_connector *c, tm_log_level level, const char *topic,
                 int32_t partition, const char *batch_id, const char *fmt,
                 ...) {
    tm_log_fields f = {c->cfg->name, c->sink.api ? c->sink.api->name : NULL,
                       topic, topic ? partition : -1, batch_id};
    va_list ap;
    va_start(ap, fmt);
    tm_log_fields_v(level, &f, fmt, ap);
    va_end(ap);
}

static void sleep_ms(int64_t ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Random per process start: batch ids of two hosts never collide, and a
 * restarted host does not reuse its old ids. */
static void make_instance_id(char *out, size_t size) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        r = (uint64_t)tm_wall_ms() ^ ((uint64_t)getpid() << 32);
    snprintf(out, size, "%016" PRIx64, r);
}

/* Opening retries while the store is unreachable (a database still
 * starting is not a reason to fail); bad settings fail at once. */
static int open_sink(tm_connector *c) {
    tm_backoff b;
    tm_backoff_init(&b, 500, 30000, (uint64_t)tm_now_ms());
    while (!atomic_load(&c->ctl->stop)) {
        char why[1024];
        tm_status st = tm_sink_open(c, why, sizeof why);
        if (st == TM_OK)
            return 0;
        if (st != TM_RETRY) {
            tm_conn_error(c, 1, "%s", why);
            return -1;
        }
        c->totals.retries++;
        tm_conn_error(c, 0, "%s; retrying", why);
        int64_t until = tm_now_ms() + tm_backoff_next(&b);
        while (!atomic_load(&c->ctl->stop) && tm_now_ms() < until) {
            tm_conn_status_tick(c, 0);
            sleep_ms(100);
        }
    }
    return -1;
}

/* The stop watch: sets the stop's deadline the moment the stop comes
 * (commit/commit_loop.h: the batch in flight has TM_STOP_GRACE_MS from
 * then, whatever it is doing), and from then on interrupts the sink's
 * blocking call (sink.h: interrupt() from any thread, a call in progress
 * gives up with RETRY): a claim at once, anything else (the batch in
 * flight) once the deadline is past. Repeated, because a sink clears the
 * flag at the start of each call. Runs while the sink is open. */
typedef struct stop_watch {
    tm_connector *c;
    atomic_int done;
    pthread_t thread;
    int running;
} stop_watch;

static void *stop_watch_main(void *arg) {
    tm_thread_name("tm:stop-watch");
    stop_watch *w = arg;
    tm_connector *c = w->c;
    while (!atomic_load(&w->done)) {
        if (atomic_load(&c->ctl->stop)) {
            /* Not over for the instant loop_stop lags the stop
             * (tm_run_ctl): no deadline yet. */
            if (c->sink.api->interrupt &&
                (atomic_load(&c->in_claim) || tm_stop_grace_over(c)))
                c->sink.api->interrupt(c->sink.sink);
        }
        sleep_ms(50);
    }
    return NULL;
}

static void stop_watch_start(stop_watch *w, tm_connector *c) {
    w->c = c;
    atomic_init(&w->done, 0);
    w->running = pthread_create(&w->thread, NULL, stop_watch_main, w) == 0;
    if (!w->running)
        tm_log(TM_LOG_WARN, c->cfg->name,
               "cannot start the stop watch: a stop waits for the sink's "
               "own timeouts");
}

static void stop_watch_end(stop_watch *w) {
    if (!w->running)
        return;
    atomic_store(&w->done, 1);
    pthread_join(w->thread, NULL);
    w->running = 0;
}

/* A FAILED connector keeps its status (and its lock) until the process is
 * told to stop, so that `tidemark status` shows FAILED, not STOPPED; the
 * process stops by itself when all its connectors are down (cmd_run.c). */
static void wait_failed(tm_connector *c) {
    atomic_store(&c->ctl->failed, 1);
    while (!atomic_load(&c->ctl->stop)) {
        tm_conn_status_tick(c, 0);
        sleep_ms(200);
    }
}

/* After a fatal consumer error, or an assignment outside the subscription
 * (tm_consumer_rejoin_as_new: the next consumer joins under a new static
 * member id): the old consumer closed (its callbacks
 * touch nothing of c any more), the partitions forgotten, a new consumer
 * subscribed; the group's assignment claims them again from the markers,
 * as at start. Four fatal errors in a row, each within a minute of the
 * last, end in FAILED: something keeps killing the consumer (two hosts
 * with one group.instance.id, say). 0, or -1 when FAILED. */
static int restart_consumer(tm_connector *c) {
    tm_consumer_stop(c, 5000);
    /* Lost with the consumer: the machine forgets them (and any batch). */
    tm_commit_sync_parts(c);
    tm_kafka_tp *all = calloc(c->nparts ? c->nparts : 1, sizeof *all);
    if (!all) {
        tm_conn_error(c, 1, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < c->nparts; i++)
        all[i] =
            (tm_kafka_tp){c->parts[i].topic, c->parts[i].partition, 0, NULL};
    tm_commit_on_revoke(c, all, c->nparts, 1);
    free(all);
    c->markers_dirty = 1;
    int in_row = tm_restarts_admit(c, &c->consumer_restarts,
                                   "the Kafka consumer", c->last_error);
    if (in_row < 0)
        return -1;
    c->consumer_fatal = 0;
    char why[1024];
    if (tm_consumer_start(c, why, sizeof why) != 0) {
        tm_conn_error(c, 1, "%s", why);
        return -1;
    }
    tm_log(TM_LOG_INFO, c->cfg->name,
           "consumer made again after a fatal error (%d in a row); joining "
           "group %s",
           in_row, c->cfg->kafka.group_id);
    tm_conn_status_tick(c, 1);
    return 0;
}

/* The pause its file keeps (control/pause_file.h): a connector paused
 * before a restart of it or of the process starts paused. */
static void load_pause(tm_connector *c) {
    char why[512];
    int r = tm_pause_file_read(c->dir_fd, c->conn_dir, c->paused_by,
                               sizeof c->paused_by, &c->paused_since_ms, why,
                               sizeof why);
    if (r < 0)
        tm_log(TM_LOG_WARN, c->cfg->name, "pause file: %s", why);
    if (r == 1 && !atomic_load(&c->ctl->pause)) {
        atomic_store(&c->ctl->pause, 1);
        atomic_store(&c->ctl->loop_stop, 1);
        tm_log(TM_LOG_INFO, c->cfg->name,
               "paused by %s (kept in %s/%s): starting paused; `tidemark "
               "resume` goes on",
               c->paused_by, c->conn_dir, TM_PAUSE_FILE);
    }
}

/* Pauses every partition librdkafka assigned to this consumer (one
 * assigned during the pause included: the rebalance callback claims it,
 * nothing fetches it; a claim a stop gave up is deferred, and the machine
 * claims it once it goes on). */
static void pause_assigned(tm_connector *c) {
    tm_kafka_tp *l = NULL;
    size_t n = 0;
    char why[256];
    if (tm_kafka_assignment(c->rk, &l, &n, why, sizeof why) != 0)
        return;
    if (n > 0)
        (void)tm_kafka_set_paused(c->rk, l, n, 1, why, sizeof why);
    tm_kafka_tps_free(l, n);
}

/* Resumes what the machine does not hold paused (fenced, unclaimed,
 * backpressure: it resumes those when their time comes; a stopped
 * partition waits for the operator, commit/part_stop.h). Every partition
 * seeks back to where its next batch starts when the machine goes on
 * (GO_ON): what was fetched before the pause was not taken. */
static void resume_assigned(tm_connector *c) {
    tm_commit_sync_parts(c);
    tm_kafka_tp *l = calloc(c->nparts + 1, sizeof *l);
    if (!l)
        return;
    size_t n = 0;
    for (size_t i = 0; i < c->nparts; i++) {
        tm_part *p = &c->parts[i];
        if (!p->fenced && !p->paused && !p->unclaimed && !p->stop_held)
            l[n++] = (tm_kafka_tp){p->topic, p->partition, 0, NULL};
    }
    char why[256];
    (void)tm_kafka_set_paused(c->rk, l, n, 0, why, sizeof why);
    free(l);
}

/* Clears loop_stop, then sets it again when a stop (or, with
 * with_pause, a pause) is asked: only the connector clears it, and a stop
 * that came in between is not lost (tm_run_ctl). The pause that set it
 * settled its batch: the next stop or pause gets a deadline of its own
 * (also when the pause was taken back before it was seen here). */
static void settle_loop_stop(tm_connector *c, int with_pause) {
    tm_stop_deadline_reset(c);
    atomic_store(&c->ctl->loop_stop, 0);
    if (atomic_load(&c->ctl->stop) ||
        (with_pause && atomic_load(&c->ctl->pause)))
        atomic_store(&c->ctl->loop_stop, 1);
}

/* Paused by an operator: no batch handed to the sink, every assigned
 * partition paused in librdkafka, and the consumer still polled every
 * 100 ms, so that the group keeps the member and its partitions
 * (heartbeats, max.poll.interval.ms) and a rebalance is served. Returns
 * when resumed, stopped, FAILED or the consumer failed. */
static void paused_wait(tm_connector *c) {
    char why[512];
    c->pause_file_error[0] = '\0';
    int r = tm_pause_file_read(c->dir_fd, c->conn_dir, c->paused_by,
                               sizeof c->paused_by, &c->paused_since_ms, why,
                               sizeof why);
    if (r != 1) {
        snprintf(c->paused_by, sizeof c->paused_by, "unknown");
        c->paused_since_ms = tm_wall_ms();
    } else if (why[0]) {
        /* Malformed: kept paused, said so in the log and the status. */
        tm_log(TM_LOG_WARN, c->cfg->name, "pause file: %s", why);
        snprintf(c->pause_file_error, sizeof c->pause_file_error, "%s", why);
    }
    if (!c->paused_since_ms)
        c->paused_since_ms = tm_wall_ms();
    tm_log(TM_LOG_INFO, c->cfg->name,
           "paused by %s: nothing is committed until `tidemark resume`; its "
           "partitions stay assigned, paused",
           c->paused_by);
    settle_loop_stop(c, 0); /* not stopping: claims made now hold */
    pause_assigned(c);
    tm_conn_status_tick(c, 1);
    while (atomic_load(&c->ctl->pause) && !atomic_load(&c->ctl->stop) &&
           !c->consumer_fatal && c->state != TM_CONN_FAILED) {
        /* Not stopping: a partition assigned now is claimed (the claim
         * would give it up as work a stop interrupts), then paused. */
        settle_loop_stop(c, 0);
        /* Polled: a record fetched before the pause took is read again
         * after it, and a consumer error counts (health, FAILED, a fatal
         * one) as when running. */
        tm_commit_serve(c, 100);
        pause_assigned(c);
    }
    c->paused_since_ms = 0;
    if (atomic_load(&c->ctl->stop) || c->state == TM_CONN_FAILED ||
        c->consumer_fatal)
        return;
    resume_assigned(c);
    tm_log(TM_LOG_INFO, c->cfg->name, "resumed");
    tm_conn_status_tick(c, 1);
}

/* The commit loop until the connector stops or fails: again after a
 * fatal consumer error (a new consumer) and after a pause. */
static void run_commit_loop(tm_connector *c) {
    for (;;) {
        tm_commit_loop_run(c);
        if (atomic_load(&c->ctl->stop) || c->state == TM_CONN_FAILED)
            return;
        if (c->consumer_fatal) {
            if (restart_consumer(c) != 0)
                return;
            continue;
        }
        if (atomic_load(&c->ctl->pause))
            paused_wait(c);
        if (c->consumer_fatal || c->state == TM_CONN_FAILED)
            continue; /* handled above, on the next turn */
        settle_loop_stop(c, 1);
    }
}

void tm_run_ctl_init(tm_run_ctl *ctl) {
    atomic_store(&ctl->stop, 0);
    atomic_store(&ctl->pause, 0);
    atomic_store(&ctl->loop_stop, 0);
    atomic_store(&ctl->failed, 0);
    atomic_store(&ctl->restart, 0);
}

void tm_run_ctl_stop(tm_run_ctl *ctl) {
    atomic_store(&ctl->stop, 1);
    atomic_store(&ctl->loop_stop, 1);
}

void tm_run_state_dir(const tm_connector_config *cfg, const tm_run_options *opt,
                      char *out, size_t size) {
    if (opt->state_dir)
        snprintf(out, size, "%s", opt->state_dir);
    else if (cfg->state_dir)
        snprintf(out, size, "%s", cfg->state_dir);
    else
        tm_status_default_dir(out, size);
}

tm_run_result tm_connector_run(const tm_connector_config *cfg,
                               const tm_run_options *opt, tm_run_ctl *ctl) {
    tm_connector *c = calloc(1, sizeof *c);
    if (!c) {
        tm_log(TM_LOG_ERROR, cfg->name, "out of memory");
        return TM_RUN_FAILED;
    }
    c->cfg = cfg;
    c->ctl = ctl;
    /* The commit loop (host/commit) stops for a pause as for a stop: its
     * batch in flight finished or abandoned; run_commit_loop tells them
     * apart. */
    c->stop = &ctl->loop_stop;
    c->state = TM_CONN_STARTING;
    c->started_ms = tm_wall_ms();
    c->metrics = tm_metrics_conn_get(cfg->name); /* NULL: not counted */
    make_instance_id(c->instance_id, sizeof c->instance_id);
    atomic_init(&c->in_claim, 0);
    atomic_init(&c->stop_seen_ms, 0);
    stop_watch watch = {0};

    char dir[4096], why[1024];
    tm_run_state_dir(cfg, opt, dir, sizeof dir);
    c->status = tm_status_writer_open(dir, cfg->name, why, sizeof why);
    if (!c->status) {
        tm_log(TM_LOG_ERROR, cfg->name, "cannot start: %s", why);
        free(c);
        return TM_RUN_REFUSED;
    }
    /* Its own thread rewrites the file while this one waits in a commit. */
    c->pulse = tm_status_pulse_start(c->status, TM_STATUS_PERIOD_MS, cfg->name);
    if (!c->pulse) {
        tm_log(TM_LOG_ERROR, cfg->name, "cannot start: out of memory");
        tm_status_writer_close(c->status);
        free(c);
        return TM_RUN_REFUSED;
    }
    tm_log(TM_LOG_INFO, cfg->name, "starting (instance %s, state in %s/%s)",
           c->instance_id, dir, cfg->name);
    /* The host lock is ours now: so is the control socket. */
    const char *shown = NULL;
    c->dir_fd = tm_status_writer_dir_fd(c->status, &shown);
    snprintf(c->conn_dir, sizeof c->conn_dir, "%s", shown ? shown : "");
    tm_control_server *control = tm_control_start(
        c->dir_fd, c->conn_dir, cfg->name, ctl, why, sizeof why);
    if (!control)
        tm_log(TM_LOG_WARN, cfg->name,
               "%s: `tidemark pause|resume|restart` cannot reach this "
               "connector",
               why);
    load_pause(c);

    if (tm_sink_instance_load(&c->sink, cfg, opt->plugin_dirs,
                              opt->nplugin_dirs, why, sizeof why) != 0) {
        tm_conn_error(c, 1, "%s", why);
        goto failed;
    }
    c->bb[0] = tm_bb_new(cfg);
    if (!c->bb[0]) {
        tm_conn_error(c, 1, "out of memory");
        goto failed;
    }
    tm_sink_calls_start(c);
    if (open_sink(c) != 0)
        goto failed;
    tm_conn_recovered(c, "the sink is open");
    stop_watch_start(&watch, c);
    if (cfg->dead_letters.topic) {
        c->dlq = tm_dlq_new(cfg, why, sizeof why);
        if (!c->dlq) {
            tm_conn_error(c, 1, "$.dead_letters.topic: %s", why);
            goto failed;
        }
    }
    if (tm_consumer_start(c, why, sizeof why) != 0) {
        tm_conn_error(c, 1, "%s", why);
        goto failed;
    }
    if (tm_commit_start(c, why, sizeof why) != 0) {
        tm_conn_error(c, 1, "connector core: %s", why);
        goto failed;
    }
    c->state = TM_CONN_RUNNING;
    tm_log(TM_LOG_INFO, cfg->name, "running: plugin %s %s, group %s",
           c->sink.api->name, c->sink.api->version ? c->sink.api->version : "",
           cfg->kafka.group_id);
    tm_conn_status_tick(c, 1);
    run_commit_loop(c);
    /* Close the consumer: a dynamic member leaves the group at once; a
     * static one (the default, kafka/member_id.h) stops heartbeating, so
     * the group hands its partitions over after session.timeout.ms, or to
     * this host again at once when it restarts. */
    tm_consumer_stop(c, 5000);

failed:
    stop_watch_end(&watch);
    /* Work a stop interrupted (a claim or an open given up) is a clean
     * stop: only FAILED is a failure. */
    tm_run_result result =
        c->state == TM_CONN_FAILED ? TM_RUN_FAILED : TM_RUN_STOPPED;
    if (c->rk)
        tm_consumer_stop(c, 5000);
    if (c->state == TM_CONN_FAILED)
        wait_failed(c);
    else
        c->state = TM_CONN_STOPPED;
    tm_dlq_free(c->dlq);
    tm_conn_status_tick(c, 1);
    tm_sink_close(c); /* on its thread, as every call */
    tm_sink_calls_end(c);
    tm_bb_free(c->bb[1]); /* beside bb[0], whose converter it borrows */
    tm_bb_free(c->bb[0]);
    tm_commit_end(c);
    for (size_t i = 0; i < c->nparts; i++)
        free(c->parts[i].topic);
    free(c->parts);
    tm_control_stop(control); /* before the lock goes with the writer */
    tm_status_pulse_stop(c->pulse);
    tm_status_writer_close(c->status);
    tm_log(TM_LOG_INFO, cfg->name, "%s",
           result == TM_RUN_STOPPED ? "stopped" : "stopped after FAILED");
    /* A close left behind calls back with its own link, never with c
     * (kafka/consumer.c): c can go. */
    free(c);
    return result;
}
