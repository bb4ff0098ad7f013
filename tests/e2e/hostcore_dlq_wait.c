/* A batch whose attempt waits long for the dead-letter topic and then for
 * the sink's commit: the consumer is still polled within
 * max.poll.interval.ms (else librdkafka takes the member out of its group:
 * MAXPOLL, a rebalance, a static member fenced), and the status file is
 * rewritten at least every second all along, saying what the connector
 * waits on. The dead-letter topic is slow through a broker quota on the
 * host's producer (client_quota.h), the commit through a write lock the
 * test holds on the SQLite file. The truth: librdkafka's own log lines,
 * Kafka's timestamps of the dead letters, the sink's markers and rows. */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client_quota.h"
#include "harness.h"
#include "hostcore_e2e.h"

#define DL_BYTES   100000
#define DL_RATE    51200.0
#define GOOD       10
#define STALE_MS   2000 /* operations.md: rewritten at least every second */
#define LOOK_MS    100  /* how often the test reads the status file */
#define SAMPLE_MS  8000 /* how long it reads it during the wait */
#define MAXPOLL_MS 20000

typedef struct wait_case {
    char topic[256], dlq[256], name[256], client[300], db[1024], log[64];
    int ndl;
} wait_case;

/* The connector over GOOD + NDL + GOOD records, one batch, its dead
 * letters to their own topic (Kafka's append time on each), through a
 * producer the broker holds to DL_RATE. PROPS, BATCH, DL_PROPS, SINK: more
 * members of $.kafka.properties, $.batch, $.dead_letters and the sink's
 * settings, each after a comma ("" none). */
static const char *wait_case_config(wait_case *w, const char *prefix, int ndl,
                                    const char *props, const char *batch,
                                    const char *dl_props, const char *sink) {
    h_dl_setup(prefix, w->topic, w->dlq, w->name, sizeof w->topic,
               "message.timestamp.type", "LogAppendTime");
    snprintf(w->client, sizeof w->client, "tidemark-%s", w->name);
    snprintf(w->db, sizeof w->db, "%s", h_path("wait.db"));
    snprintf(w->log, sizeof w->log, "%s.log", prefix);
    w->ndl = ndl;
    h_client_quota(w->client, DL_RATE);
    slow_dl_records(w->topic, GOOD, ndl, DL_BYTES);
    char text[8192];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "\"topics\": [\"%s\"], \"properties\": {\"session.timeout.ms\": "
             "\"6000\", \"heartbeat.interval.ms\": \"500\"%s}}, "
             "\"batch\": {\"max_records\": %d, \"max_wait_ms\": 5000%s}, "
             "\"sink\": {\"plugin\": \"sqlite\", \"settings\": {\"path\": "
             "\"%s\", \"table\": \"t\"%s}}, \"dead_letters\": {\"sink\": true, "
             "\"topic\": \"%s\"%s}, \"state_dir\": \"%s/state\", %s}",
             w->name, h_bootstrap(), w->topic, props, 2 * GOOD + ndl, batch,
             w->db, sink, w->dlq, dl_props, h_workdir(), JSON_MAPPING);
    char file[300];
    snprintf(file, sizeof file, "%s.json", prefix);
    return h_write_file(file, text);
}

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The status file's age (now less its updated_ms, wall ms) and, into ON,
 * what it says the connector waits on ("" nothing). -1 without a file. */
static int64_t status_look(const wait_case *w, char *on, size_t size) {
    const char *st = h_status_text(w->name);
    on[0] = '\0';
    const char *at = strstr(st, "\"updated_ms\": ");
    if (!at)
        return -1;
    int64_t updated = strtoll(at + strlen("\"updated_ms\": "), NULL, 10);
    const char *wait = strstr(st, "\"waiting\": {");
    const char *text = wait ? strstr(wait, "\"on\": \"") : NULL;
    if (text) {
        text += strlen("\"on\": \"");
        size_t len = strcspn(text, "\"");
        snprintf(on, size, "%.*s", (int)(len < size ? len : size - 1), text);
    }
    return wall_ms() - updated;
}

/* Dead letters in the topic now. */
static int64_t dl_count(const wait_case *w) {
    int64_t lo, hi;
    h_watermarks(w->dlq, 0, &lo, &hi);
    return hi - lo;
}

static int64_t marker(const wait_case *w) {
    return h_sqlf(w->db,
                  "SELECT next_offset FROM tidemark_markers WHERE "
                  "topic='%s' AND \"partition\"=0",
                  w->topic);
}

/* status_fresh_during_slow_dlq: while the batch waits for a dead-letter
 * topic that takes a minute (30 dead letters of 100 KB at 50 KB/s; each
 * attempt waits 30 s), the status file is never older than STALE_MS, and
 * it says what the connector waits on. Failed before the fix: the file
 * was not rewritten during the wait (`updated_ms` 29 s old, RUNNING, no
 * error). */
void scenario_status_fresh_during_slow_dlq(void) {
    wait_case w;
    const char *cfg = wait_case_config(&w, "hc-dlqfresh", 30, "", "", "", "");
    pid_t pid = h_spawn(cfg, w.log);
    int64_t t0 = h_now_ms();
    while (dl_count(&w) == 0) {
        H_CHECK(h_now_ms() - t0 < 90000 && waitpid(pid, NULL, WNOHANG) == 0,
                "inconclusive: no dead letter in %s 90 s after the start:\n%s",
                w.dlq, h_read_file(w.log));
        h_sleep_ms(LOOK_MS);
    }
    int64_t worst = 0, seen_waiting = 0;
    char on[512], named[512] = "";
    for (t0 = h_now_ms(); h_now_ms() - t0 < SAMPLE_MS; h_sleep_ms(LOOK_MS)) {
        int64_t age = status_look(&w, on, sizeof on);
        H_CHECK(age >= 0, "no status file: %s", h_status_text(w.name));
        if (age > worst)
            worst = age;
        if (strstr(on, "the dead-letter topic")) {
            seen_waiting++;
            snprintf(named, sizeof named, "%s", on);
        }
    }
    /* `tidemark status` shows the wait too. */
    const char *status[] = {"status", "--state-dir", h_path("state"), w.name,
                            NULL};
    int rc = h_tidemark("status.out", status);
    const char *out = h_read_file("status.out");
    const char *line = strstr(out, "\n  waiting     since ");
    int64_t in_topic = dl_count(&w);
    H_CHECK(in_topic < w.ndl && marker(&w) <= 0,
            "inconclusive: the delivery was over during the %d ms the "
            "status was read (%lld of %d dead letters in the topic, marker "
            "%lld)",
            SAMPLE_MS, (long long)in_topic, w.ndl, (long long)marker(&w));
    H_CHECK(worst <= STALE_MS,
            "the status file was %lld ms old during the wait for the "
            "dead-letter topic (expected at most %d): %s",
            (long long)worst, STALE_MS, h_status_text(w.name));
    H_CHECK(seen_waiting > 0 && strstr(named, w.dlq),
            "the status never said the connector waits on the dead-letter "
            "topic %s: %s",
            w.dlq, h_status_text(w.name));
    H_CHECK(rc == 0 && line && strstr(line, "the dead-letter topic"),
            "`tidemark status` (exit %d) does not show the wait:\n%s", rc, out);
    h_step("status at most %lld ms old over %d ms of the wait (%lld of %d "
           "dead letters in the topic): waiting on \"%s\"",
           (long long)worst, SAMPLE_MS, (long long)in_topic, w.ndl, named);
    h_stop_clean(pid);
    h_client_quota(w.client, -1);
}

/* The first log line of LOG naming librdkafka's maximum poll interval, a
 * group the member left or a consumer made again; NULL when none. */
static const char *group_trouble(const char *log) {
    static const char *const marks[] = {"maximum poll interval",
                                        "MAXPOLL",
                                        "leaving group",
                                        "consumer fenced",
                                        "consumer made again",
                                        "revoked at",
                                        "lost at"};
    const char *first = NULL;
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
        const char *at = strstr(log, marks[i]);
        if (at && (!first || at < first))
            first = at;
    }
    if (!first)
        return NULL;
    while (first > log && first[-1] != '\n')
        first--;
    return first;
}

/* LOG has no sign of a consumer that was not polled in time. */
static void check_polled(const char *log) {
    const char *trouble = group_trouble(log);
    H_CHECK(!trouble,
            "the consumer was not polled within max.poll.interval.ms (%d) "
            "while the batch waited for the dead-letter topic and its "
            "commit: %.300s\nlog:\n%s",
            MAXPOLL_MS, trouble ? trouble : "", log);
}

/* Kafka's append times of the first and the last dead letter (ms). */
static void dl_span(const wait_case *w, int64_t *first, int64_t *last) {
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    char err[512];
    H_CHECK(rd_kafka_conf_set(c, "bootstrap.servers", h_bootstrap(), err,
                              sizeof err) == RD_KAFKA_CONF_OK &&
                rd_kafka_conf_set(c, "group.id", h_name("hc-dlqspan"), err,
                                  sizeof err) == RD_KAFKA_CONF_OK,
            "consumer config: %s", err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    H_CHECK(rk, "consumer: %s", err);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, w->dlq, 0)->offset =
        RD_KAFKA_OFFSET_BEGINNING;
    H_CHECK(rd_kafka_assign(rk, l) == RD_KAFKA_RESP_ERR_NO_ERROR, "assign");
    rd_kafka_topic_partition_list_destroy(l);
    int64_t n = dl_count(w), seen = 0, deadline = h_now_ms() + 60000;
    *first = *last = -1;
    while (seen < n && h_now_ms() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        if (!m)
            continue;
        rd_kafka_timestamp_type_t type;
        int64_t ts = rd_kafka_message_timestamp(m, &type);
        H_CHECK(!m->err && type == RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME,
                "dead letter %lld: %s, timestamp type %d", (long long)m->offset,
                rd_kafka_message_errstr(m), (int)type);
        if (*first < 0)
            *first = ts;
        *last = ts;
        seen++;
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    H_CHECK(seen == n, "read %lld of %lld dead letters", (long long)seen,
            (long long)n);
}

/* maxpoll_dlq_then_commit: the review's reproduction, scaled down:
 * max.poll.interval.ms 20 s, an attempt's dead-letter wait and its commit
 * 18 s each. The dead letters take seconds to be confirmed (a quota), and
 * the commit then waits for a write lock the test holds until the sink
 * gave up at its deadline. Neither librdkafka's MAXPOLL nor a rebalance
 * may follow; the status stays fresh, naming the commit it waits on; once
 * the lock goes, the batch commits. Failed before the fix: after the
 * dead letters, the commit's 18 s passed the 20 s without a poll:
 * "Application maximum poll interval (20000ms) exceeded", the static
 * member fenced, its consumer made again. */
void scenario_maxpoll_dlq_then_commit(void) {
    wait_case w;
    char props[128];
    snprintf(props, sizeof props, ", \"max.poll.interval.ms\": \"%d\"",
             MAXPOLL_MS);
    const char *cfg = wait_case_config(
        &w, "hc-maxpoll", 15, props, ", \"commit_timeout_ms\": 18000",
        ", \"delivery_timeout_ms\": 18000", ", \"busy_timeout_ms\": 60000");
    pid_t pid = h_spawn(cfg, w.log);
    /* Claimed (its marker written), then the file locked before the
     * dead letters are all confirmed: the commit after them waits. */
    int64_t t0 = h_now_ms();
    while (h_sqlf(w.db,
                  "SELECT count(*) FROM tidemark_markers WHERE topic='%s' "
                  "AND epoch > 0",
                  w.topic) != 1) {
        H_CHECK(h_now_ms() - t0 < 60000 && waitpid(pid, NULL, WNOHANG) == 0,
                "inconclusive: no claim 60 s after the start:\n%s",
                h_read_file(w.log));
        h_sleep_ms(50);
    }
    sqlite3 *lock = NULL;
    H_CHECK(sqlite3_open(w.db, &lock) == SQLITE_OK &&
                sqlite3_busy_timeout(lock, 10000) == SQLITE_OK &&
                sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL) ==
                    SQLITE_OK,
            "cannot take the write lock: %s", sqlite3_errmsg(lock));
    int64_t at_lock = dl_count(&w);
    H_CHECK(at_lock < w.ndl && marker(&w) <= 0,
            "inconclusive: %lld of %d dead letters confirmed (marker %lld) "
            "before the test held the lock",
            (long long)at_lock, w.ndl, (long long)marker(&w));
    /* Until the sink gives up its commit at the deadline: the status read
     * all along. */
    int64_t worst = 0;
    int commit_named = 0;
    char on[512];
    const char *log = "";
    for (t0 = h_now_ms(); !strstr(log, "database is locked");
         h_sleep_ms(LOOK_MS)) {
        H_CHECK(h_now_ms() - t0 < 180000 && waitpid(pid, NULL, WNOHANG) == 0,
                "inconclusive: no commit gave up on the lock in 180 s (%lld "
                "of %d dead letters in the topic):\n%s",
                (long long)dl_count(&w), w.ndl, h_read_file(w.log));
        int64_t age = status_look(&w, on, sizeof on);
        if (age > worst)
            worst = age;
        commit_named |= strstr(on, "the sink's commit of batch") != NULL;
        log = h_read_file(w.log);
    }
    sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(lock);
    int64_t first, last;
    dl_span(&w, &first, &last);
    /* The fault where intended: the dead letters took longer than the
     * poll interval leaves beside an 18 s commit. */
    H_CHECK(last - first > MAXPOLL_MS - 18000,
            "inconclusive: the %d dead letters were appended within %lld "
            "ms (expected longer than %d: a slow topic)",
            w.ndl, (long long)(last - first), MAXPOLL_MS - 18000);
    check_polled(log);
    t0 = h_now_ms();
    while (marker(&w) != 2 * GOOD + w.ndl) {
        H_CHECK(h_now_ms() - t0 < 120000,
                "the batch did not commit 120 s after the lock went "
                "(marker %lld); status: %s\nlog:\n%s",
                (long long)marker(&w), h_status_text(w.name),
                h_read_file(w.log));
        h_sleep_ms(200);
    }
    /* Before the stop: a consumer closing has its partitions revoked. */
    log = h_read_file(w.log);
    h_stop_clean(pid);
    h_client_quota(w.client, -1);
    check_polled(log);
    H_CHECK(worst <= STALE_MS && commit_named,
            "the status file was %lld ms old at worst (expected at most "
            "%d), %s named the sink's commit it waited on",
            (long long)worst, STALE_MS, commit_named ? "and" : "never");
    H_CHECK(h_sqlf(w.db, "SELECT count(DISTINCT _tm_offset) FROM t") ==
                    2 * GOOD &&
                h_sqlf(w.db, "SELECT count(DISTINCT \"offset\") FROM "
                             "tidemark_dead_letters") == w.ndl,
            "the sink does not hold each of %d rows and %d dead letters",
            2 * GOOD, w.ndl);
    h_step("dead letters appended over %lld ms, a commit held to its "
           "deadline: no MAXPOLL, no rebalance; status at most %lld ms old",
           (long long)(last - first), (long long)worst);
}

/* given_up_dlq_not_left_queued: a batch given up during a slow delivery
 * (here by `tidemark pause`): the dead letters still queued for the topic
 * are discarded at once (tm_dlq_forget), not left to go on to the topic
 * while the connector is paused. Its producer sends one dead letter per
 * request and one request at a time (batch.num.messages and
 * max.in.flight.requests.per.connection 1), so at most one was on its way
 * when the batch was given up. Once PAUSED the quota is lifted: what was
 * left queued would reach the topic within seconds; over NOT_MORE_MS at
 * most that one does. Before this test, a host that forgot nothing after
 * a given-up batch passed every test. */
#define NOT_MORE_MS 8000
void scenario_given_up_dlq_not_left_queued(void) {
    wait_case w;
    const char *cfg =
        wait_case_config(&w, "hc-dlqleft", 30,
                         ", \"batch.num.messages\": \"1\", "
                         "\"max.in.flight.requests.per.connection\": \"1\"",
                         "", "", "");
    pid_t pid = h_spawn(cfg, w.log);
    int64_t t0 = h_now_ms();
    while (dl_count(&w) == 0) {
        H_CHECK(h_now_ms() - t0 < 90000 && waitpid(pid, NULL, WNOHANG) == 0,
                "inconclusive: no dead letter in %s 90 s after the start:\n%s",
                w.dlq, h_read_file(w.log));
        h_sleep_ms(LOOK_MS);
    }
    const char *pause[] = {"pause", "--state-dir", h_path("state"), w.name,
                           NULL};
    H_CHECK(h_tidemark("pause.out", pause) == 0, "tidemark pause: %s",
            h_read_file("pause.out"));
    t0 = h_now_ms();
    while (!strstr(h_status_text(w.name), "\"state\": \"PAUSED\"")) {
        H_CHECK(h_now_ms() - t0 < 30000 && waitpid(pid, NULL, WNOHANG) == 0,
                "not PAUSED 30 s after the pause: %s", h_status_text(w.name));
        h_sleep_ms(LOOK_MS);
    }
    int64_t at_pause = dl_count(&w);
    const char *log = h_read_file(w.log);
    H_CHECK(strstr(log, "batch dropped (giving up retries while pausing)") &&
                at_pause < w.ndl - 2 && marker(&w) <= 0,
            "inconclusive: the batch was not given up part way through its "
            "delivery (%lld of %d dead letters in the topic, marker "
            "%lld):\n%s",
            (long long)at_pause, w.ndl, (long long)marker(&w), log);
    h_client_quota(w.client, -1);
    int64_t most = at_pause;
    for (t0 = h_now_ms(); h_now_ms() - t0 < NOT_MORE_MS; h_sleep_ms(LOOK_MS))
        most = dl_count(&w);
    H_CHECK(most <= at_pause + 1,
            "the given-up batch's dead letters went on to %s while the "
            "connector was paused: %lld when PAUSED, %lld %d ms after the "
            "quota was lifted (expected at most one more: the one on its "
            "way)",
            w.dlq, (long long)at_pause, (long long)most, NOT_MORE_MS);
    h_stop_clean(pid);
    h_step("given up with %lld of %d dead letters in the topic; %lld after "
           "%d ms paused without the quota",
           (long long)at_pause, w.ndl, (long long)most, NOT_MORE_MS);
}
