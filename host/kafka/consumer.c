#include "kafka/consumer.h"
#include "kafka/fetch_wake.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit/claim.h"
#include "commit/commit_loop.h"
#include "kafka/broker_watch.h"
#include "kafka/kafka_conf.h"
#include "kafka/member_id.h"
#include "kafka/subscription.h"
#include "services/clock.h"
#include "services/fault.h"
#include "services/log.h"
#include "status/status_file.h"
#include "services/thread_name.h"

/* How long the start waits for the metadata that fingerprints the
 * subscription; past it the subscription counts as changed. */
#define SUBSCRIPTION_TIMEOUT_MS 10000

/* The opaque of one consumer's callbacks. closing is set before that
 * consumer is closed on the watchdog's thread: from then on its callbacks
 * may run on that thread, beside the connector's thread (which may already
 * run the next consumer), and they touch nothing of the connector, not
 * even its config: only this link, which the close frees. */
struct tm_consumer_link {
    tm_connector *c;
    atomic_int closing;
    int assigned; /* this consumer had its first assignment */
    /* The connector's name, the link's own (allocated with it): librdkafka
     * logs from its threads at any time, and a line begun before the close
     * must not read a config freed since (a reload drops the connector's
     * config once its consumer is stopped). */
    char name[];
};

void tm_consumer_fatal(tm_connector *c) {
    if (c->consumer_fatal)
        return;
    char why[512];
    rd_kafka_fatal_error(c->rk, why, sizeof why);
    c->consumer_fatal = 1;
    tm_conn_error(c, 0,
                  "Kafka consumer fatal error: %s; the consumer is made "
                  "again and rejoins the group (the markers say where each "
                  "partition goes on)",
                  why);
}

void tm_consumer_rejoin_as_new(tm_connector *c) {
    if (c->consumer_fatal || !tm_member_id_wanted(c->cfg))
        return;
    const char *shown = NULL;
    int dir_fd = tm_status_writer_dir_fd(c->status, &shown);
    char why[1024];
    /* The fingerprint goes with the new id: the next start keeps it unless
     * the subscription changes again. */
    const char *fp = c->member_fp[0] ? c->member_fp : NULL;
    if (dir_fd < 0 ||
        tm_member_id_forget_subscription(dir_fd, shown, c->cfg->name, fp, why,
                                         sizeof why) != 0) {
        tm_conn_error(c, 1, "cannot replace the static member id: %s",
                      dir_fd < 0 ? "no state directory" : why);
        return;
    }
    c->consumer_fatal = 1;
    long ms = tm_kafka_session_timeout_ms(c->cfg);
    tm_log(TM_LOG_WARN, c->cfg->name,
           "the consumer is made again under a new static member id; the "
           "old member's partitions return after session.timeout.ms (%ld s)",
           ms > 0 ? (ms + 999) / 1000 : -1);
}

/* A topic created (or partitions added) between the start's fingerprint
 * and the subscription: the id was kept, so the group hands the old
 * assignment back and the new partitions would never be read. The first
 * assignment's own metadata shows it: the consumer is made again under a
 * new id, once per process. */
static void recheck_subscription(tm_connector *c, rd_kafka_t *rk) {
    if (!c->member_fp[0] || c->member_fp_changed)
        return;
    char now[TM_SUBSCRIPTION_HEX + 1], why[1024];
    if (tm_subscription_fingerprint_of(rk, c->cfg, SUBSCRIPTION_TIMEOUT_MS, now,
                                       sizeof now, why, sizeof why) != 0) {
        tm_log(TM_LOG_DEBUG, c->cfg->name,
               "subscription not checked after the first assignment: %s", why);
        return;
    }
    if (strcmp(now, c->member_fp) == 0)
        return;
    c->member_fp_changed = 1;
    snprintf(c->member_fp, sizeof c->member_fp, "%s", now);
    tm_log(TM_LOG_WARN, c->cfg->name,
           "the subscription changed while the consumer started (a matching "
           "topic or partition created)");
    tm_consumer_rejoin_as_new(c);
}

/* Whether the group runs the cooperative protocol. librdkafka has no
 * protocol (NULL) before the consumer joined the group, or after it left:
 * a consumer closed right after it subscribed is called back then. */
static int cooperative_protocol(rd_kafka_t *rk) {
    const char *protocol = rd_kafka_rebalance_protocol(rk);
    return protocol && strcmp(protocol, "COOPERATIVE") == 0;
}

/* The claim of an assignment (commit/claim.h): each partition's offset set
 * where it starts. 0 claimed, -1 not (FAILED or stopping). */
static int claim(tm_connector *c, rd_kafka_topic_partition_list_t *parts) {
    size_t n;
    tm_kafka_tp *v = tm_kafka_tps_of_list(parts, &n);
    if (!v && parts->cnt > 0) {
        tm_conn_error(c, 1, "claim: out of memory");
        return -1;
    }
    int rc = tm_claim_assigned(c, v, n);
    for (size_t i = 0; i < n; i++)
        parts->elems[i].offset = v[i].offset;
    free(v);
    return rc;
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque) {
    struct tm_consumer_link *link = opaque;
    tm_connector *c = link->c;
    if (atomic_load(&link->closing)) {
        /* Leaving the group: complete whatever the group asks, take
         * nothing (no records are processed any more), touch nothing of
         * the connector. The partitions stay listed for the last status. */
        int coop = cooperative_protocol(rk);
        int assign = err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
        if (assign)
            link->assigned = 1; /* a SyncGroup answered (close_and_free) */
        rd_kafka_error_t *e = NULL;
        if (coop)
            e = assign ? rd_kafka_incremental_assign(rk, parts)
                       : rd_kafka_incremental_unassign(rk, parts);
        else
            rd_kafka_assign(rk, assign ? parts : NULL);
        if (e)
            rd_kafka_error_destroy(e);
        return;
    }
    int cooperative = cooperative_protocol(rk);
    rd_kafka_error_t *aerr = NULL;
    rd_kafka_resp_err_t rerr = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        if (!link->assigned) {
            link->assigned = 1;
            recheck_subscription(c, rk);
        }
        int claimed = c->state != TM_CONN_FAILED && claim(c, parts) == 0;
        if (!claimed && c->state == TM_CONN_FAILED)
            tm_log(TM_LOG_ERROR, c->cfg->name,
                   "assignment of %d partition(s) not claimed: %s", parts->cnt,
                   c->last_error);
        /* Assign anyway, to complete the group protocol; a connector that
         * claimed nothing (FAILED or stopping) never takes records of
         * these partitions and leaves the group next. */
        if (!claimed)
            for (int i = 0; i < parts->cnt; i++)
                parts->elems[i].offset = RD_KAFKA_OFFSET_END;
        if (cooperative)
            aerr = rd_kafka_incremental_assign(rk, parts);
        else
            rerr = rd_kafka_assign(rk, parts);
    } else {
        int lost = rd_kafka_assignment_lost(rk);
        size_t n;
        tm_kafka_tp *v = tm_kafka_tps_of_list(parts, &n);
        if (!v && parts->cnt > 0)
            tm_conn_error(c, 1, "rebalance: out of memory");
        else
            tm_commit_on_revoke(c, v, n, lost);
        free(v);
        if (cooperative)
            aerr = rd_kafka_incremental_unassign(rk, parts);
        else
            rerr = rd_kafka_assign(rk, NULL);
    }
    if (aerr) {
        tm_conn_error(c, 1, "rebalance: %s", rd_kafka_error_string(aerr));
        rd_kafka_error_destroy(aerr);
    } else if (rerr) {
        tm_conn_error(c, 1, "rebalance: %s", rd_kafka_err2str(rerr));
    }
}

static void log_cb(const rd_kafka_t *rk, int level, const char *fac,
                   const char *buf) {
    const struct tm_consumer_link *link = rd_kafka_opaque(rk);
    tm_log(tm_kafka_log_level(level, fac), link ? link->name : NULL,
           "librdkafka %s: %s", fac, buf);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason,
                     void *opaque) {
    struct tm_consumer_link *link = opaque;
    if (atomic_load(&link->closing))
        return;
    tm_connector *c = link->c;
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        (void)rk; /* not closing, so rk is c->rk */
        tm_consumer_fatal(c);
        return;
    }
    /* Transient (brokers down, timeouts): librdkafka retries by itself;
     * kept as the reason should no broker come back (broker_watch.c). */
    tm_broker_watch_error(c, rd_kafka_err2name((rd_kafka_resp_err_t)err),
                          reason);
    tm_log(TM_LOG_WARN, c->cfg->name, "Kafka: %s: %s",
           rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

static int stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque) {
    (void)rk;
    struct tm_consumer_link *link = opaque;
    if (!atomic_load(&link->closing))
        tm_broker_watch_stats(link->c, json, len);
    return 0; /* librdkafka frees json */
}

/* The statistics broker_watch.c reads, at the config's interval when it
 * sets one, else at TM_KAFKA_STATS_INTERVAL. */
static int want_stats(rd_kafka_conf_t *conf, char *errstr, size_t errsize) {
    char v[32];
    size_t size = sizeof v;
    if (rd_kafka_conf_get(conf, "statistics.interval.ms", v, &size) ==
            RD_KAFKA_CONF_OK &&
        strcmp(v, "0") != 0)
        return 0;
    if (rd_kafka_conf_set(conf, "statistics.interval.ms",
                          TM_KAFKA_STATS_INTERVAL, errstr,
                          errsize) != RD_KAFKA_CONF_OK)
        return -1;
    return 0;
}

/* Rejoin as the member this connector was, so that its partitions come
 * back at once after a crash, unless the subscription changed since that
 * member joined: then as a new member (host/kafka/member_id.h). */
static int static_member(tm_connector *c, rd_kafka_conf_t *conf, char *errstr,
                         size_t errsize) {
    const tm_connector_config *cfg = c->cfg;
    if (!tm_member_id_wanted(cfg))
        return 0;
    char fp[TM_SUBSCRIPTION_HEX + 1], why[1024] = "";
    int known = tm_subscription_fingerprint(cfg, SUBSCRIPTION_TIMEOUT_MS, fp,
                                            sizeof fp, why, sizeof why) == 0;
    const char *shown = NULL;
    int dir_fd = tm_status_writer_dir_fd(c->status, &shown);
    char member[300];
    int rotated = 0;
    if (tm_member_id_apply(conf, cfg, dir_fd, shown, known ? fp : NULL, member,
                           sizeof member, &rotated, errstr, errsize) != 0)
        return -1;
    snprintf(c->member_fp, sizeof c->member_fp, "%s", known ? fp : "");
    if (rotated) {
        long ms = tm_kafka_session_timeout_ms(cfg);
        char since[1200] = "subscription changed since the last run";
        if (!known)
            snprintf(since, sizeof since,
                     "subscription unknown (%s), so taken as changed", why);
        tm_log(TM_LOG_WARN, cfg->name,
               "%s: new static member id; the old member's partitions "
               "return after session.timeout.ms (%ld s)",
               since, ms > 0 ? (ms + 999) / 1000 : -1);
    }
    tm_log(TM_LOG_INFO, cfg->name,
           "static group member %s (%s/" TM_MEMBER_ID_FILE ")", member, shown);
    return 0;
}

/* A pattern subscription never takes Kafka's internal topics
 * (__consumer_offsets, __transaction_state), whatever the pattern says:
 * librdkafka ignores the topics topic.blacklist matches, as if they did
 * not exist. A topic.blacklist of the config's own is extended with the
 * same pattern (the list is comma-separated), never replaced: the claim's
 * guard refuses `__` topics whatever the blacklist says. */
static int skip_internal_topics(const tm_connector_config *cfg,
                                rd_kafka_conf_t *conf, char *errstr,
                                size_t errsize) {
    if (!cfg->kafka.topic_regex)
        return 0;
    char v[2048] = "", why[256];
    size_t size = sizeof v;
    rd_kafka_conf_res_t got =
        rd_kafka_conf_get(conf, "topic.blacklist", v, &size);
    if (got == RD_KAFKA_CONF_OK && size > sizeof v) {
        snprintf(errstr, errsize,
                 "topic.blacklist: longer than %zu bytes, which this host "
                 "cannot extend with ^__.*",
                 sizeof v - 8);
        return -1;
    }
    char value[sizeof v + 8];
    if (got == RD_KAFKA_CONF_OK && v[0] != '\0')
        snprintf(value, sizeof value, "%s,^__.*", v);
    else
        snprintf(value, sizeof value, "^__.*");
    if (rd_kafka_conf_set(conf, "topic.blacklist", value, why, sizeof why) !=
        RD_KAFKA_CONF_OK) {
        snprintf(errstr, errsize, "topic.blacklist: %s", why);
        return -1;
    }
    return 0;
}

int tm_consumer_start(tm_connector *c, char *errstr, size_t errsize) {
    const tm_connector_config *cfg = c->cfg;
    rd_kafka_conf_t *conf =
        tm_kafka_conf_new(cfg, TM_KAFKA_CONSUMER, errstr, errsize);
    if (!conf)
        return -1;
    if (skip_internal_topics(cfg, conf, errstr, errsize) != 0) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    if (static_member(c, conf, errstr, errsize) != 0) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    if (want_stats(conf, errstr, errsize) != 0) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    size_t name_len = strlen(cfg->name) + 1;
    struct tm_consumer_link *link = calloc(1, sizeof *link + name_len);
    if (!link) {
        rd_kafka_conf_destroy(conf);
        snprintf(errstr, errsize, "out of memory");
        return -1;
    }
    link->c = c;
    memcpy(link->name, cfg->name, name_len);
    c->foreign_held = 0; /* held by the consumer before this one */
    rd_kafka_conf_set_opaque(conf, link);
    rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
    rd_kafka_conf_set_log_cb(conf, log_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    rd_kafka_conf_set_stats_cb(conf, stats_cb);
    char why[512];
    c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof why);
    if (!c->rk) {
        rd_kafka_conf_destroy(conf);
        free(link);
        snprintf(errstr, errsize, "cannot create the consumer: %s", why);
        return -1;
    }
    c->link = link;
    rd_kafka_poll_set_consumer(c->rk);
    size_t n = cfg->kafka.topic_regex ? 1 : cfg->kafka.ntopics;
    rd_kafka_topic_partition_list_t *subs =
        rd_kafka_topic_partition_list_new((int)n);
    char *pattern = NULL;
    if (!subs)
        goto oom;
    if (cfg->kafka.topic_regex) {
        pattern = tm_config_subscription_pattern(cfg->kafka.topic_regex);
        if (!pattern)
            goto oom;
        rd_kafka_topic_partition_list_add(subs, pattern, RD_KAFKA_PARTITION_UA);
    } else {
        for (size_t i = 0; i < n; i++)
            rd_kafka_topic_partition_list_add(subs, cfg->kafka.topics[i],
                                              RD_KAFKA_PARTITION_UA);
    }
    /* A test holds the start here to change the cluster between the
     * fingerprint and the subscription. */
    tm_fault("before_subscribe");
    rd_kafka_resp_err_t err = rd_kafka_subscribe(c->rk, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    free(pattern);
    /* A test stops the connector here: subscribed, not yet in the group
     * (no rebalance protocol yet). */
    if (!err)
        tm_fault("after_subscribe");
    if (err) {
        snprintf(errstr, errsize, "cannot subscribe: %s",
                 rd_kafka_err2str(err));
        rd_kafka_destroy(c->rk);
        c->rk = NULL;
        free(c->link);
        c->link = NULL;
        return -1;
    }
    /* Without it the consumer runs as before: it only saves the fetcher's
     * wait (kafka/fetch_wake.h). */
    c->fetch_wake = tm_fetch_wake_new(c->rk);
    return 0;
oom:
    if (subs)
        rd_kafka_topic_partition_list_destroy(subs);
    snprintf(errstr, errsize, "out of memory");
    rd_kafka_destroy(c->rk);
    c->rk = NULL;
    free(c->link);
    c->link = NULL;
    return -1;
}

typedef struct close_job {
    rd_kafka_t *rk;
    /* Joined first: its request may wait on a silent broker up to
     * socket.timeout.ms, whatever its own timeout (librdkafka 2.0.2). */
    tm_fetch_wake *wake;
    struct tm_consumer_link *link; /* freed once rk is destroyed */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int abandoned; /* the waiter gave up: the closing thread frees the job */
} close_job;

/* librdkafka 2.0.2 asserts in rd_kafka_destroy, aborting the process, when
 * the cooperative-sticky assignor was chosen (a JoinGroup answered) but the
 * consumer never had a SyncGroup answer, whose assignment makes the
 * assignor's state (fixed in librdkafka 2.3.0). The protocol is read
 * just before the close (after it librdkafka no longer says): a JoinGroup
 * answered in the moment between the two is the one case left.
 * protocol: NULL when it could not be read (taken as chosen). */
static int destroy_would_abort(const char *protocol,
                               const struct tm_consumer_link *link) {
    return !link->assigned &&
           (!protocol || strcmp(protocol, "COOPERATIVE") == 0);
}

/* Closes the consumer (leaving the group), then destroys it and frees its
 * link, no callback coming after the destroy; a handle whose destroy would
 * abort is left behind with its link instead, as a close past its
 * watchdog is (its threads live on; the process does). */
static void close_and_free(rd_kafka_t *rk, struct tm_consumer_link *link) {
    const char *protocol = rd_kafka_rebalance_protocol(rk);
    rd_kafka_consumer_close(rk);
    if (destroy_would_abort(protocol, link)) {
        tm_log(TM_LOG_WARN, link->name,
               "consumer closed between its group join and its first "
               "assignment: left behind, not destroyed (librdkafka before "
               "2.3.0 aborts the process destroying it)");
        return;
    }
    rd_kafka_destroy(rk);
    free(link);
}

static void *close_thread(void *arg) {
    tm_thread_name("tm:close");
    close_job *j = arg;
    tm_fetch_wake_free(j->wake);
    close_and_free(j->rk, j->link);
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    int abandoned = j->abandoned;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (abandoned) {
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
        free(j);
    }
    return NULL;
}

void tm_consumer_stop(tm_connector *c, int timeout_ms) {
    if (!c->rk)
        return;
    /* Its thread asks c->rk: joined before the close, within the
     * watchdog's time (close_thread). */
    if (tm_fetch_wake_count(c->fetch_wake) > 0)
        tm_log(TM_LOG_INFO, c->cfg->name,
               "consumer: the fetcher was woken %lld times after the queue "
               "drained",
               (long long)tm_fetch_wake_count(c->fetch_wake));
    tm_fetch_wake *wake = c->fetch_wake;
    c->fetch_wake = NULL;
    close_job *j = calloc(1, sizeof *j);
    pthread_t th;
    struct tm_consumer_link *link = c->link;
    atomic_store(&link->closing, 1);
    c->link = NULL;
    int mu_ok = j && pthread_mutex_init(&j->mu, NULL) == 0;
    /* The watchdog's wait runs on the monotonic clock: a step of the wall
     * clock would abandon the close at once or hang the stop for the
     * step's length. */
    if (mu_ok && tm_cond_init_mono(&j->cv) != 0) {
        pthread_mutex_destroy(&j->mu);
        mu_ok = 0;
    }
    if (!mu_ok) {
        free(j);
        tm_fetch_wake_free(wake);
        close_and_free(c->rk, link); /* no watchdog: close inline */
        c->rk = NULL;
        return;
    }
    j->rk = c->rk;
    j->wake = wake;
    j->link = link;
    c->rk = NULL;
    if (pthread_create(&th, NULL, close_thread, j) != 0) {
        tm_fetch_wake_free(wake);
        close_and_free(j->rk, link);
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
        free(j);
        return;
    }
    pthread_detach(th);
    struct timespec until = tm_clock_mono_after(timeout_ms);
    pthread_mutex_lock(&j->mu);
    int rc = 0;
    while (!j->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&j->cv, &j->mu, &until);
    int done = j->done;
    if (!done)
        j->abandoned = 1;
    pthread_mutex_unlock(&j->mu);
    if (done) {
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
        free(j);
    } else {
        tm_log(TM_LOG_WARN, c->cfg->name,
               "consumer close did not finish within %d ms; leaving it "
               "behind (the group will time this member out)",
               timeout_ms);
    }
}
