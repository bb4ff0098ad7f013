/* A stop (SIGTERM) or a pause (`tidemark pause`) while the dead-letter
 * topic is slow: the broker throttles the host's producer (a quota on its
 * client id, client_quota.h), so its deliveries succeed, late. The batch
 * in flight has the stop's 5 s grace (docs/operations.md, Signals), no
 * less and no more, whatever part of the delivery it is in; then the next
 * run redoes it exactly once. The truth: Kafka's own offsets and headers
 * of the dead-letter topic, the sink's rows and markers. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client_quota.h"
#include "harness.h"
#include "hostcore_e2e.h"

/* SLOW_DL records of ~100 KB that are not JSON, between SLOW_GOOD good
 * records before and SLOW_GOOD after: one batch (max_records) with SLOW_DL
 * dead letters, 3 MB, which a producer held to SLOW_RATE needs about a
 * minute to deliver (the first MB goes at once, then the broker throttles
 * it for seconds at a time). */
#define SLOW_GOOD     10
#define SLOW_DL       30
#define SLOW_ALL      (2 * SLOW_GOOD + SLOW_DL)
#define SLOW_DL_BYTES 100000
#define SLOW_RATE     51200.0

/* The grace a stop gives the batch in flight, and the margin either side
 * the host's polling (50-100 ms) and a loaded machine need. */
#define GRACE_MS       5000
#define GRACE_SLACK_MS 1000

typedef struct slow_dlq {
    char topic[256], dlq[256], name[256], client[300], cfg[4096], db[1024];
    char log[64];       /* the host's log file in the work dir */
    int64_t hi_base;    /* the topic's end before the delivery under test */
    int64_t hi_at_stop; /* its end when the stop or pause was asked */
} slow_dlq;

/* ---- the dead-letter topic, read from Kafka -------------------------- */

static int dl_header(rd_kafka_message_t *m, const char *name, char *out,
                     size_t size) {
    rd_kafka_headers_t *h = NULL;
    const void *v = NULL;
    size_t len = 0;
    if (rd_kafka_message_headers(m, &h) ||
        rd_kafka_header_get_last(h, name, &v, &len) || !v || len >= size)
        return 0;
    memcpy(out, v, len);
    out[len] = '\0';
    return 1;
}

/* A consumer of partition 0 of TOPIC from offset FROM. */
static rd_kafka_t *reader(const char *topic, int64_t from) {
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    char err[512];
    H_CHECK(rd_kafka_conf_set(c, "bootstrap.servers", h_bootstrap(), err,
                              sizeof err) == RD_KAFKA_CONF_OK &&
                rd_kafka_conf_set(c, "group.id", h_name("hc-dl-reader"), err,
                                  sizeof err) == RD_KAFKA_CONF_OK,
            "consumer config: %s", err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    H_CHECK(rk, "consumer: %s", err);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, 0)->offset = from;
    H_CHECK(rd_kafka_assign(rk, l) == RD_KAFKA_RESP_ERR_NO_ERROR, "assign %s",
            topic);
    rd_kafka_topic_partition_list_destroy(l);
    return rk;
}

/* The next message of R (within the time left until DEADLINE, h_now_ms),
 * which must be the one at offset AT, into *OUT. 0 when none came. */
static int next_dead_letter(rd_kafka_t *r, int64_t at, int64_t deadline,
                            dl_seen *out) {
    while (h_now_ms() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(r, 200);
        if (!m)
            continue;
        H_CHECK(!m->err, "reading dead letters: %s",
                rd_kafka_message_errstr(m));
        char off[32];
        H_CHECK(m->offset == at &&
                    dl_header(m, "__connect.errors.offset", off, sizeof off) &&
                    dl_header(m, "tidemark.batch_id", out->batch,
                              sizeof out->batch),
                "dead letter at offset %lld (expected %lld): without the "
                "offset and batch headers, or not the next",
                (long long)m->offset, (long long)at);
        out->src_offset = strtoll(off, NULL, 10);
        rd_kafka_message_destroy(m);
        return 1;
    }
    return 0;
}

dl_seen *read_dead_letters(const char *topic, size_t *n) {
    int64_t lo, hi;
    h_watermarks(topic, 0, &lo, &hi);
    *n = (size_t)(hi - lo);
    dl_seen *v = calloc(*n ? *n : 1, sizeof *v);
    H_CHECK(v, "out of memory");
    rd_kafka_t *r = reader(topic, lo);
    int64_t deadline = h_now_ms() + 60000;
    for (size_t i = 0; i < *n; i++)
        H_CHECK(next_dead_letter(r, lo + (int64_t)i, deadline, &v[i]),
                "%s: %zu of %zu messages in 60 s", topic, i, *n);
    rd_kafka_consumer_close(r);
    rd_kafka_destroy(r);
    return v;
}

void slow_dl_records(const char *topic, int good, int dl, size_t dl_bytes) {
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, good, "{\"id\": %d}");
    char *big = malloc(dl_bytes);
    H_CHECK(big && dl_bytes > 32, "out of memory");
    memset(big, 'x', dl_bytes);
    for (int i = 0; i < dl; i++) {
        int n = snprintf(big, 32, "not json %d ", i);
        big[n] = 'x';
        h_produce(p, topic, 0, NULL, 0, big, dl_bytes, NULL, NULL);
    }
    free(big);
    h_produce_many(p, topic, 0, good + dl, good, "{\"id\": %d}");
    rd_kafka_destroy(p);
}

/* ---- the scenario's steps -------------------------------------------- */

/* Waits until the topic has a dead letter past s->hi_base of a batch other
 * than NOT_BATCH ("" none): a delivery under way. Then checks it is not
 * over (the topic does not have all SLOW_DL past hi_base). */
static void wait_delivering(slow_dlq *s, const char *not_batch) {
    rd_kafka_t *r = reader(s->dlq, s->hi_base);
    int64_t deadline = h_now_ms() + 90000, at = s->hi_base;
    dl_seen d = {0, ""};
    while (next_dead_letter(r, at, deadline, &d) &&
           strcmp(d.batch, not_batch) == 0)
        at++;
    rd_kafka_consumer_close(r);
    rd_kafka_destroy(r);
    int64_t lo, hi;
    h_watermarks(s->dlq, 0, &lo, &hi);
    H_CHECK(d.batch[0] && strcmp(d.batch, not_batch) != 0 &&
                hi - s->hi_base < SLOW_DL,
            "inconclusive: %lld dead letters in %s past %lld after 90 s "
            "(expected some of a new batch, not all %d: a delivery under "
            "way)",
            (long long)(hi - s->hi_base), s->dlq, (long long)s->hi_base,
            SLOW_DL);
}

/* The connector, its dead-letter producer (client id tidemark-NAME, the
 * host's: kafka/kafka_conf.c) held to SLOW_RATE; PROPS: its
 * $.kafka.properties members ("" none), DL_PROPS: more members of its
 * $.dead_letters, each after a comma ("" none). Spawned, and seen
 * delivering its first batch's dead letters. */
static pid_t slow_dlq_start(slow_dlq *s, const char *prefix, const char *props,
                            const char *dl_props) {
    h_dl_setup(prefix, s->topic, s->dlq, s->name, sizeof s->topic, NULL, NULL);
    snprintf(s->client, sizeof s->client, "tidemark-%s", s->name);
    snprintf(s->db, sizeof s->db, "%s", h_path("slow.db"));
    snprintf(s->log, sizeof s->log, "slow-1.log");
    s->hi_base = s->hi_at_stop = 0;
    h_client_quota(s->client, SLOW_RATE);
    slow_dl_records(s->topic, SLOW_GOOD, SLOW_DL, SLOW_DL_BYTES);
    char text[8192];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "\"topics\": [\"%s\"], \"properties\": {%s}}, "
             "\"batch\": {\"max_records\": %d, \"max_wait_ms\": 120000}, "
             "\"sink\": {\"plugin\": \"sqlite\", \"settings\": {\"path\": "
             "\"%s\", \"table\": \"t\"}}, \"dead_letters\": {\"sink\": true, "
             "\"topic\": \"%s\"%s}, \"state_dir\": \"%s/state\", %s}",
             s->name, h_bootstrap(), s->topic, props, SLOW_ALL, s->db, s->dlq,
             dl_props, h_workdir(), JSON_MAPPING);
    snprintf(s->cfg, sizeof s->cfg, "%s", h_write_file("slow.json", text));
    pid_t pid = h_spawn(s->cfg, s->log);
    wait_delivering(s, "");
    return pid;
}

/* The stop (or pause) whose log line is ASKED came during the current
 * delivery: the topic did not have all of it. Without SINCE, the
 * delivery is also the batch's first: no RETRY is logged before ASKED.
 * With it (a log line), ASKED is looked for after SINCE, and the delivery
 * may be a retry (after a resume, the broker may hold the producer past
 * the delivery's 30 s before the test sees it under way). Else
 * inconclusive. */
static void check_during_delivery(const slow_dlq *s, const char *log,
                                  const char *since, const char *asked) {
    const char *from = since ? strstr(log, since) : log;
    const char *asked_at = from ? strstr(from, asked) : NULL;
    H_CHECK(asked_at, "inconclusive: no '%s' line%s%s in the log:\n%s", asked,
            since ? " after " : "", since ? since : "", log);
    const char *retry_at = since ? NULL : strstr(log, "dead-letter topic");
    H_CHECK((!retry_at || retry_at > asked_at) &&
                s->hi_at_stop - s->hi_base < SLOW_DL,
            "inconclusive: '%s' did not come during %s delivery (%lld of "
            "%d in the topic; a RETRY before: %s)",
            asked, since ? "a" : "the batch's first",
            (long long)(s->hi_at_stop - s->hi_base), SLOW_DL,
            retry_at && retry_at < asked_at ? "yes" : "no");
}

/* From the log line ASKED to the line DROPPED, the batch had its grace, no
 * less and no more: between GRACE_MS - GRACE_SLACK_MS and GRACE_MS +
 * GRACE_SLACK_MS. Returns the time. */
static int64_t check_grace(const char *log, const char *asked,
                           const char *dropped) {
    int64_t a = log_line_ms(log, asked), d = log_line_ms(log, dropped);
    int64_t after = a >= 0 && d >= 0 ? day_ms_between(a, d) : -1;
    H_CHECK(after >= GRACE_MS - GRACE_SLACK_MS &&
                after <= GRACE_MS + GRACE_SLACK_MS,
            "'%s' %lld ms after '%s' (-1: never), expected %d ms, give or "
            "take %d:\n%s",
            dropped, (long long)after, asked, GRACE_MS, GRACE_SLACK_MS, log);
    return after;
}

static void check_marker_still(const slow_dlq *s) {
    H_CHECK(h_sqlf(s->db,
                   "SELECT next_offset FROM tidemark_markers WHERE "
                   "topic='%s' AND \"partition\"=0",
                   s->topic) == 0,
            "the marker moved although the batch was given up");
}

/* SIGTERM now (SINCE: as for check_during_delivery): the batch whose dead
 * letters are being delivered is given up after its grace, the process
 * exits 0 by itself within the 10 s operations.md promises, and the sink
 * has nothing of the batch. */
static void slow_dlq_stop(slow_dlq *s, pid_t pid, const char *since) {
    int64_t lo;
    h_watermarks(s->dlq, 0, &lo, &s->hi_at_stop);
    int64_t took;
    int rc = h_stop(pid, SIGTERM, 30000, &took);
    const char *log = h_read_file(s->log);
    check_during_delivery(s, log, since, "SIGTERM: stopping");
    H_CHECK(!strstr(log, "did not stop within") && rc == 0 && took <= 10000,
            "SIGTERM during a delivery to a slow dead-letter topic: exit %d "
            "after %lld ms (expected 0 within 10000), the 10-second watch "
            "%s:\n%s",
            rc, (long long)took,
            strstr(log, "did not stop within") ? "fired" : "did not fire", log);
    int64_t after =
        check_grace(log, "SIGTERM: stopping",
                    "batch dropped (giving up retries while stopping)");
    check_marker_still(s);
    h_step("given up %lld ms after SIGTERM (%lld of %d dead letters of the "
           "delivery in the topic then); exit 0 after %lld ms",
           (long long)after, (long long)(s->hi_at_stop - s->hi_base), SLOW_DL,
           (long long)took);
}

/* The prefix of the batch ids of the run whose log is LOG ("<instance>-"):
 * a batch id is the run's instance id and a sequence number. */
static void run_batch_prefix(const char *log, char *out, size_t size) {
    static const char key[] = "starting (instance ";
    const char *at = strstr(log, key);
    H_CHECK(at, "inconclusive: no '%s' line in the redo's log:\n%s", key, log);
    at += sizeof key - 1;
    size_t len = strcspn(at, ",");
    H_CHECK(len > 0 && len + 2 <= size,
            "inconclusive: no instance id in the redo's log:\n%s", log);
    memcpy(out, at, len);
    out[len] = '-';
    out[len + 1] = '\0';
}

/* The quota lifted, the next run redoes the batch: the sink has every good
 * record once and every dead letter once, the markers reach the end, and
 * the topic (from Kafka) holds GIVEN_UP batches, each dead letter at most
 * once in each, and the redo's batch with each of the SLOW_DL exactly once.
 * In any order: a given-up attempt's dead letters already sent when it was
 * discarded may still land, and a dead process's requests the broker held
 * back (the quota throttles them) can land after the redo's own (seen
 * under ThreadSanitizer: the given-up batch's letters at offsets 0-8 and
 * again at 39, behind the redo's). Nor can a given-up batch be told by
 * how many of its letters landed: those on their way may all arrive.
 * That the stop came during the delivery is checked when it came
 * (check_during_delivery). */
static void slow_dlq_redo(slow_dlq *s, int given_up) {
    h_client_quota(s->client, -1);
    snprintf(s->log, sizeof s->log, "slow-redo.log");
    pid_t pid = h_spawn(s->cfg, s->log);
    h_wait_caught_up(s->db, s->name, s->topic, 1, 60000);
    h_stop_clean(pid);
    char redo[64];
    run_batch_prefix(h_read_file(s->log), redo, sizeof redo);
    int64_t rows = h_sqlf(s->db, "SELECT count(*) FROM t");
    H_CHECK(rows == 2 * SLOW_GOOD &&
                h_sqlf(s->db,
                       "SELECT count(DISTINCT _tm_offset) FROM t WHERE "
                       "_tm_offset < %d OR _tm_offset >= %d",
                       SLOW_GOOD, SLOW_GOOD + SLOW_DL) == 2 * SLOW_GOOD,
            "rows: %lld, expected each of the %d good records once",
            (long long)rows, 2 * SLOW_GOOD);
    int64_t dls = h_sqlf(s->db, "SELECT count(*) FROM tidemark_dead_letters");
    H_CHECK(dls == SLOW_DL &&
                h_sqlf(s->db,
                       "SELECT count(DISTINCT \"offset\") FROM "
                       "tidemark_dead_letters WHERE \"offset\" >= %d AND "
                       "\"offset\" < %d",
                       SLOW_GOOD, SLOW_GOOD + SLOW_DL) == SLOW_DL,
            "the sink's dead letters: %lld, expected each of %d once",
            (long long)dls, SLOW_DL);
    size_t n;
    dl_seen *v = read_dead_letters(s->dlq, &n);
    /* count[b][k]: source offset SLOW_GOOD + k in batch b. */
    char batch[8][64];
    int count[8][SLOW_DL] = {{0}}, nbatch = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t k = v[i].src_offset - SLOW_GOOD;
        H_CHECK(k >= 0 && k < SLOW_DL,
                "%s offset %zu: a dead letter of source offset %lld, not of a "
                "malformed record",
                s->dlq, i, (long long)v[i].src_offset);
        int b = 0;
        while (b < nbatch && strcmp(batch[b], v[i].batch) != 0)
            b++;
        if (b == nbatch) {
            H_CHECK(nbatch < 8, "%s offset %zu: more than 8 batches", s->dlq,
                    i);
            snprintf(batch[nbatch++], sizeof batch[0], "%s", v[i].batch);
        }
        count[b][k]++;
    }
    free(v);
    int redone = 0;
    for (int b = 0; b < nbatch; b++) {
        int is_redo = strncmp(batch[b], redo, strlen(redo)) == 0;
        redone += is_redo;
        for (int k = 0; k < SLOW_DL; k++)
            H_CHECK(count[b][k] >= is_redo && count[b][k] <= 1,
                    "source offset %d: %d time(s) in batch %s (%s: expected "
                    "%s)",
                    SLOW_GOOD + k, count[b][k], batch[b],
                    is_redo ? "the redo" : "given up",
                    is_redo ? "once" : "at most once");
    }
    H_CHECK(redone == 1 && nbatch - redone == given_up,
            "%d batch(es) of the redo (ids %s...) and %d others in the "
            "dead-letter topic, expected 1 and %d given up",
            redone, redo, nbatch - redone, given_up);
    h_step("redone: %d rows and %d dead letters once in the sink; the topic: "
           "%d batch(es) given up part way, and the redo's %d once each",
           2 * SLOW_GOOD, SLOW_DL, given_up, SLOW_DL);
}

/* ---- the scenarios ---------------------------------------------------- */

/* stop_during_slow_dlq: SIGTERM while the dead-letter topic takes a
 * batch's dead letters for the first time. Failed before the fix: the
 * delivery waited out its 30 s, the 10-second watch ended the process. */
void scenario_stop_during_slow_dlq(void) {
    slow_dlq s;
    pid_t pid = slow_dlq_start(&s, "hc-slowdl", "", "");
    slow_dlq_stop(&s, pid, NULL);
    slow_dlq_redo(&s, 1);
}

/* stop_during_dlq_queue_full: the same with the producer's queue held to
 * one message (queue.buffering.max.messages), so that the stop finds the
 * host still producing, waiting for room (QUEUE_FULL), not flushing: with
 * one message queued at a time, two not in the topic yet means one not
 * produced yet. */
void scenario_stop_during_dlq_queue_full(void) {
    slow_dlq s;
    pid_t pid = slow_dlq_start(&s, "hc-fulldl",
                               "\"queue.buffering.max.messages\": \"1\"", "");
    slow_dlq_stop(&s, pid, NULL);
    H_CHECK(s.hi_at_stop < SLOW_DL - 1,
            "inconclusive: %lld of %d dead letters in the topic when the "
            "stop came: all were produced already",
            (long long)s.hi_at_stop, SLOW_DL);
    slow_dlq_redo(&s, 1);
}

/* pause_during_slow_dlq: `tidemark pause` during the first delivery gives
 * the batch the same grace, and says it pauses (not "stopping"); the
 * connector is then PAUSED. Resumed, the batch is delivered again (still
 * slowly), and a SIGTERM during that delivery gives it a grace of its own,
 * not what was left of the pause's. */
void scenario_pause_during_slow_dlq(void) {
    slow_dlq s;
    pid_t pid = slow_dlq_start(&s, "hc-pausedl", "", "");
    int64_t lo;
    h_watermarks(s.dlq, 0, &lo, &s.hi_at_stop);
    const char *pause[] = {"pause", "--state-dir", h_path("state"), s.name,
                           NULL};
    H_CHECK(h_tidemark("pause.out", pause) == 0, "tidemark pause: %s",
            h_read_file("pause.out"));
    int64_t t0 = h_now_ms();
    while (!strstr(h_status_text(s.name), "\"state\": \"PAUSED\"")) {
        H_CHECK(h_now_ms() - t0 < 30000 && waitpid(pid, NULL, WNOHANG) == 0,
                "not PAUSED 30 s after the pause: %s", h_status_text(s.name));
        h_sleep_ms(100);
    }
    const char *log = h_read_file(s.log);
    check_during_delivery(&s, log, NULL, "control: pause asked");
    int64_t after =
        check_grace(log, "control: pause asked",
                    "batch dropped (giving up retries while pausing)");
    H_CHECK(!strstr(log, "while stopping") && !strstr(log, "(stopping)"),
            "a pause logged as a stop:\n%s", log);
    check_marker_still(&s);
    h_step("paused: given up %lld ms after the pause, PAUSED",
           (long long)after);

    /* The given-up batch's dead letters: those the topic took. */
    size_t n;
    dl_seen *v = read_dead_letters(s.dlq, &n);
    H_CHECK(n > 0, "the dead-letter topic is empty after the pause");
    char paused_batch[64];
    snprintf(paused_batch, sizeof paused_batch, "%s", v[0].batch);
    free(v);
    s.hi_base = (int64_t)n;
    const char *resume[] = {"resume", "--state-dir", h_path("state"), s.name,
                            NULL};
    H_CHECK(h_tidemark("resume.out", resume) == 0, "tidemark resume: %s",
            h_read_file("resume.out"));
    wait_delivering(&s, paused_batch);
    slow_dlq_stop(&s, pid, "control: resume asked");
    slow_dlq_redo(&s, 2);
}

/* slow_dlq_commits: a dead-letter topic slow enough that the batch's dead
 * letters take longer than one attempt's wait (30 s, the default
 * $.dead_letters.delivery_timeout_ms) to be confirmed, but never failing:
 * the batch still commits, and the topic (read from Kafka) has each dead
 * letter exactly once, in that one batch. Each attempt goes on from what
 * the last one left: those confirmed are not produced again, those on
 * their way are waited for. Failed before the fix: every attempt produced
 * all SLOW_DL again and never saw them all confirmed within its wait; the
 * batch never committed and the topic filled with copies. DL_PROPS: as
 * for slow_dlq_start; the scenario's state into *PS. */
static void slow_dlq_commits(slow_dlq *ps, const char *prefix,
                             const char *dl_props) {
    slow_dlq s;
    pid_t pid = slow_dlq_start(&s, prefix, "", dl_props);
    int64_t t0 = h_now_ms();
    while (h_sqlf(s.db,
                  "SELECT coalesce(max(next_offset), 0) FROM "
                  "tidemark_markers WHERE topic='%s' AND \"partition\"=0",
                  s.topic) != SLOW_ALL) {
        int64_t lo, hi;
        h_watermarks(s.dlq, 0, &lo, &hi);
        H_CHECK(h_now_ms() - t0 < 200000,
                "the batch is not committed 200 s into the delivery of its "
                "%d dead letters to a slow topic (%lld messages in %s); "
                "status: %s\nlog:\n%s",
                SLOW_DL, (long long)(hi - lo), s.dlq, h_status_text(s.name),
                h_read_file(s.log));
        h_sleep_ms(500);
    }
    int64_t took = h_now_ms() - t0;
    h_stop_clean(pid);
    h_client_quota(s.client, -1);
    const char *log = h_read_file(s.log);
    H_CHECK(strstr(log, "confirmed when the wait ended"),
            "inconclusive: no attempt's wait ended before its dead letters "
            "were confirmed (the topic was not slow enough):\n%s",
            log);
    size_t n;
    dl_seen *v = read_dead_letters(s.dlq, &n);
    int count[SLOW_DL] = {0};
    for (size_t i = 0; i < n; i++) {
        int64_t k = v[i].src_offset - SLOW_GOOD;
        H_CHECK(k >= 0 && k < SLOW_DL && strcmp(v[i].batch, v[0].batch) == 0,
                "%s offset %zu: source offset %lld of batch %s (expected a "
                "malformed record's, of batch %s)",
                s.dlq, i, (long long)v[i].src_offset, v[i].batch, v[0].batch);
        count[k]++;
    }
    free(v);
    for (int k = 0; k < SLOW_DL; k++)
        H_CHECK(count[k] == 1,
                "source offset %d: %d time(s) in %s (%zu messages), "
                "expected once",
                SLOW_GOOD + k, count[k], s.dlq, n);
    H_CHECK(h_sqlf(s.db, "SELECT count(*) FROM t") == 2 * SLOW_GOOD &&
                h_sqlf(s.db, "SELECT count(DISTINCT \"offset\") FROM "
                             "tidemark_dead_letters") == SLOW_DL,
            "the sink does not hold each of %d rows and %d dead letters",
            2 * SLOW_GOOD, SLOW_DL);
    h_step("committed %lld ms into the slow delivery; each of %d dead "
           "letters once in the topic",
           (long long)took, SLOW_DL);
    *ps = s;
}

void scenario_slow_dlq_commits(void) {
    slow_dlq s;
    slow_dlq_commits(&s, "hc-slowok", "");
}

/* The time of day of the N-th (from 1) log line containing NEEDLE, -1
 * when there are fewer. */
static int64_t nth_line_ms(const char *log, const char *needle, int n) {
    const char *at = log;
    for (int i = 1; i < n && at; i++) {
        at = strstr(at, needle);
        at = at ? strchr(at, '\n') : NULL;
    }
    return at ? log_line_ms(at, needle) : -1;
}

/* slow_dlq_commits_short: the same with
 * $.dead_letters.delivery_timeout_ms 5000: the attempts end after 5 s
 * each (the first two RETRYs of the delivery less than 10 s apart; 30 s
 * by default), and each goes on from the last across several of them. */
void scenario_slow_dlq_commits_short(void) {
    slow_dlq s;
    slow_dlq_commits(&s, "hc-slowok5", ", \"delivery_timeout_ms\": 5000");
    const char *log = h_read_file(s.log),
               *ended = "confirmed when the wait ended";
    int64_t first = nth_line_ms(log, ended, 1),
            second = nth_line_ms(log, ended, 2),
            third = nth_line_ms(log, ended, 3);
    int64_t gap =
        first >= 0 && second >= 0 ? day_ms_between(first, second) : -1;
    H_CHECK(third >= 0 && gap >= 4000 && gap < 10000,
            "with delivery_timeout_ms 5000: the first two waits that ended "
            "%lld ms apart (-1: fewer than two), %s third (expected at "
            "least three attempts, 5 s and a backoff apart):\n%s",
            (long long)gap, third >= 0 ? "a" : "no", log);
    h_step("attempts 5 s apart (the first two RETRYs %lld ms apart)",
           (long long)gap);
}
