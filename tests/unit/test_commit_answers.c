/* The commit loop's executors (host/commit/commit_loop.c) answer what they
 * did, and the answers of one step are fed to the connector core once every
 * action of it is done. An answer's reason may live in the answer itself
 * (its why buffer): the answers of a step must keep it where it is while
 * more are added, or the core reads a reason that moved.
 *
 * One step here answers five times: a TIMER that reads a fenced
 * partition's marker (the sink refuses with FATAL), seeks three
 * partitions (asked inside the rebalance callback: each answers
 * SEEK_FAILED) and sends a batch due by its age to the sink. No broker, no
 * plugin: the sink is a table of functions here, the machine is driven to that
 * state directly. */
#include <check.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_main.h"
#include "commit/commit_internal.h"
#include "commit/commit_loop.h"
#include "commit/machine.h"
#include "runtime/connector_state.h"

#define READ_REFUSED "the store refused the read (test)"

static tm_status refuse_read(void *sink, tm_marker *markers, size_t n,
                             tm_error *err) {
    (void)sink;
    (void)markers;
    (void)n;
    snprintf(err->message, sizeof err->message, "%s", READ_REFUSED);
    return TM_FATAL;
}

/* One step of the machine alone; its TAKE answered at once. */
static void step(tm_machine *m, tm_machine_event *ev) {
    const tm_machine_action *a;
    size_t n;
    char err[256];
    ev->now_ms = tm_now_ms();
    ck_assert_msg(tm_machine_step(m, ev, &a, &n, err, sizeof err) == 0, "%s",
                  err);
    for (size_t i = 0; i < n; i++)
        if (a[i].kind == TM_ACT_TAKE) {
            tm_machine_event t = {0};
            t.kind = TM_EV_TAKEN;
            t.status = TM_OK;
            t.batch = a[i].batch;
            t.topic = ev->topic;
            t.partition = ev->partition;
            t.offset = ev->offset;
            step(m, &t);
            return;
        }
}

/* A record of 10 bytes at OFFSET of TOPIC:0, at no time read yet. */
static tm_machine_event record_at(const char *topic, int64_t offset) {
    tm_machine_event ev = {0};
    ev.kind = TM_EV_RECORD;
    ev.topic = topic;
    ev.offset = offset;
    ev.bytes = 10;
    return ev;
}

static void group(tm_machine *m, tm_machine_event_kind kind, const char *topic,
                  int32_t partition) {
    tm_machine_tp tp = {topic, partition};
    tm_machine_event ev = {0};
    ev.kind = kind;
    ev.parts = &tp;
    ev.nparts = 1;
    step(m, &ev);
}

static void claimed(tm_machine *m, const char *topic, int32_t partition) {
    tm_marker mk = {0};
    mk.struct_size = sizeof mk;
    mk.topic = topic;
    mk.partition = partition;
    mk.epoch = 3;
    mk.next_offset = 10;
    int64_t low = 0, high = 100;
    tm_machine_event ev = {0};
    ev.kind = TM_EV_CLAIMED;
    ev.status = TM_OK;
    ev.markers = &mk;
    ev.nmarkers = 1;
    ev.low = &low;
    ev.high = &high;
    step(m, &ev);
}

static void running(tm_machine *m, const char *topic, int32_t partition) {
    group(m, TM_EV_ASSIGNED, topic, partition);
    claimed(m, topic, partition);
}

/* A record of topic:0 at 10, cut, then the sink's answer (one marker read
 * again, of epoch `epoch`, for FENCED). */
static void batch_answered(tm_machine *m, const char *topic, tm_status st,
                           int64_t epoch) {
    tm_machine_event ev = {0};
    ev.kind = TM_EV_RECORD;
    ev.topic = topic;
    ev.offset = 10;
    ev.bytes = 10;
    step(m, &ev);
    memset(&ev, 0, sizeof ev);
    ev.kind = TM_EV_BATCH_DUE;
    step(m, &ev);
    tm_machine_batch_view out;
    tm_machine_batch(m, 1, &out);
    ck_assert_int_eq(out.phase, TM_BATCH_AT_SINK);
    tm_marker mk = {0};
    mk.struct_size = sizeof mk;
    mk.topic = topic;
    mk.epoch = epoch;
    mk.next_offset = 10;
    memset(&ev, 0, sizeof ev);
    ev.kind = TM_EV_SINK_ANSWER;
    ev.batch = out.id;
    ev.status = st;
    ev.markers = &mk;
    ev.nmarkers = st == TM_FENCED;
    ev.markers_read = st == TM_FENCED;
    step(m, &ev);
}

/* A connector running with the commit loop's state and the host's
 * machine; no consumer, no builder: its sink a table of functions. */
static tm_connector_config cfg;
static tm_connector c;
static atomic_int stop;
static tm_sink_api api;

typedef tm_status (*read_fn)(void *sink, tm_marker *markers, size_t n,
                             tm_error *err);

static void connector_start(const char *name, read_fn read) {
    static char named[32];
    snprintf(named, sizeof named, "%s", name);
    memset(&cfg, 0, sizeof cfg);
    cfg.name = named;
    cfg.batch.max_records = 100;
    cfg.batch.max_bytes = 1 << 20;
    cfg.batch.max_wait_ms = 60000;
    cfg.batch.commit_timeout_ms = 60000;
    memset(&c, 0, sizeof c);
    c.cfg = &cfg;
    c.state = TM_CONN_RUNNING;
    atomic_init(&stop, 0);
    c.stop = &stop;
    memset(&api, 0, sizeof api);
    api.name = name;
    api.read_markers = read;
    c.sink.api = &api;
    char err[256];
    ck_assert_msg(tm_commit_start(&c, err, sizeof err) == 0, "%s", err);
}

START_TEST(test_answer_reasons_survive_more_answers) {
    connector_start("answers", refuse_read);
    char err[256];
    /* The host's machine, but with no wait for a fenced partition's bound
     * or a retry's backoff beyond a millisecond. */
    tm_machine_config mc;
    tm_machine_config_defaults(&mc);
    mc.fenced_bound_ms = 0;
    mc.retry_base_ms = 1;
    mc.retry_max_ms = 1;
    mc.max_wait_ms = 50; /* g:0's batch, due at the step below */
    tm_machine_free(c.m);
    c.m = tm_machine_new(&mc, err, sizeof err);
    ck_assert_msg(c.m != NULL, "%s", err);
    tm_machine *m = c.m;

    /* f:0 fenced by its batch's answer. (No batch waiting out a RETRY
     * beside it: its backpressure pauses every partition, those claimed
     * while it waits too, and a paused partition asks no seek.) */
    running(m, "f", 0);
    batch_answered(m, "f", TM_FENCED, 4);
    /* g:0's record in a batch that is due by its age at the step: its
     * commit is executed after the read, so the answers grow once the
     * read's is among them (it was a batch waiting out a RETRY before
     * claims made while one waits were paused too). */
    running(m, "g", 0);
    tm_machine_event rec = record_at("g", 10);
    step(m, &rec);
    /* a:0, b:0, c:0 claimed since, each with a seek asked again. */
    static const char *const seeking[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++)
        running(m, seeking[i], 0);
    /* (in a row: any other step would ask them again) */
    for (int i = 0; i < 3; i++) {
        tm_machine_event ev = {0};
        ev.kind = TM_EV_SEEK_FAILED;
        ev.topic = seeking[i];
        ev.offset = 10;
        step(m, &ev);
    }
    tm_machine_part_view v;
    tm_machine_part(m, "f", 0, &v);
    ck_assert_int_eq(v.state, TM_PART_FENCED);
    tm_machine_batch_view building;
    tm_machine_batch(m, 0, &building);
    ck_assert_msg(building.phase == TM_BATCH_BUILDING && !building.due,
                  "inconclusive: g:0's batch is not being built");
    struct timespec age = {0, 60 * 1000000L}; /* past max_wait_ms */
    nanosleep(&age, NULL);
    for (int i = 0; i < 3; i++) {
        tm_machine_part(m, seeking[i], 0, &v);
        ck_assert_msg(v.state == TM_PART_RUNNING && v.needs_seek && !v.paused,
                      "inconclusive: %s:0 has no seek to ask", seeking[i]);
    }

    /* The step: inside the rebalance callback, so that the seeks answer
     * SEEK_FAILED without a consumer. */
    tm_kafka_tp none;
    tm_commit_assigning(&c, &none, 0);
    tm_machine_event timer = {0};
    timer.kind = TM_EV_TIMER;
    tm_commit_feed(&c, &timer, NULL, NULL);
    tm_commit_assigning(&c, NULL, 0);

    /* The read's refusal is what FAILED the connector, word for word. */
    ck_assert(tm_machine_failed(m));
    ck_assert_int_eq(c.state, TM_CONN_FAILED);
    ck_assert_msg(strstr(c.last_error, READ_REFUSED) != NULL,
                  "inconclusive: the connector failed for another reason: %s",
                  c.last_error);
    tm_commit_end(&c);
    free(c.parts);
}
END_TEST

/* The step's actions, checked before they are executed: a FAILED
 * connector's machine asks nothing of the sink or the group. */
static int steps_seen;
static void nothing_asked(tm_connector *conn, const tm_answer *a,
                          const tm_machine_action *acts, size_t n) {
    (void)conn;
    (void)a;
    steps_seen++;
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(acts[i].kind != TM_ACT_SINK_COMMIT &&
                          acts[i].kind != TM_ACT_COMMIT_OFFSETS,
                      "a FAILED connector's batch answer asked %s",
                      tm_machine_action_name(acts[i].kind));
}

/* A connector FAILED by the host itself (an executor, the consumer's
 * error, the rebalance: not by the machine) while batch 1 is at the sink
 * and batch 2 is due behind it: batch 1's answer hands nothing more to
 * the sink. (The machine used to learn of the failure only from its own
 * FAIL, and answered batch 1's OK with batch 2's SINK_COMMIT.) */
/* Connector NAME FAILED by the host (the consumer's error) while batch 1
 * (g:0 at 10) is at the sink and batch 2 is due behind it: batch 1. */
static tm_machine_batch_view failed_with_a_batch_at_the_sink(const char *name) {
    connector_start(name, NULL);
    tm_machine *m = c.m;
    running(m, "g", 0);
    tm_machine_event ev = {0};
    for (int64_t off = 10; off < 12; off++) { /* batch 1, then batch 2 */
        ev = record_at("g", off);
        step(m, &ev);
        memset(&ev, 0, sizeof ev);
        ev.kind = TM_EV_BATCH_DUE;
        step(m, &ev);
    }
    tm_machine_batch_view out, next;
    tm_machine_batch(m, 1, &out);
    tm_machine_batch(m, 0, &next);
    ck_assert_msg(out.phase == TM_BATCH_AT_SINK && next.due,
                  "inconclusive: no batch at the sink with one due behind");

    tm_conn_error(&c, 1, "the consumer's log moved (test)");
    ck_assert_int_eq(c.state, TM_CONN_FAILED);
    return out;
}

/* The sink's answer of batch OUT, fed as the commit loop collects it. */
static void sink_answered(const tm_machine_batch_view *out, tm_status st,
                          tm_answer_hook hook) {
    tm_answer a;
    tm_answer_init(&a, TM_EV_SINK_ANSWER);
    a.ev.batch = out->id;
    a.ev.status = st;
    tm_commit_feed(&c, &a.ev, hook, &a);
    tm_answer_free(&a);
}

START_TEST(test_failed_by_the_host_hands_nothing_more_to_the_sink) {
    tm_machine_batch_view out = failed_with_a_batch_at_the_sink("failed");
    steps_seen = 0;
    sink_answered(&out, TM_OK, nothing_asked);
    ck_assert_int_eq(steps_seen, 1);
    ck_assert(tm_machine_failed(c.m));
    ck_assert_msg(strstr(c.last_error, "(test)") != NULL, "%s", c.last_error);
    tm_commit_end(&c);
    free(c.parts);
}
END_TEST

/* ... and the batch the sink applied all the same is applied in the
 * machine's view, which the status shows as each partition's next_offset
 * ("the sink's marker as last committed", docs/operations.md). */
START_TEST(test_failed_by_the_host_shows_the_batch_the_sink_applied) {
    tm_machine_batch_view out = failed_with_a_batch_at_the_sink("applied");
    tm_range r;
    ck_assert_int_eq(tm_machine_batch_range(c.m, 1, 0, &r), 0);
    tm_machine_part_view v;
    tm_machine_part(c.m, "g", 0, &v);
    ck_assert_msg(v.committed < r.end_offset,
                  "inconclusive: batch 1 moves nothing (%" PRId64 ")",
                  v.committed);
    sink_answered(&out, TM_OK, NULL);
    tm_machine_part(c.m, "g", 0, &v);
    ck_assert_msg(v.committed == r.end_offset,
                  "the sink applied g:0 up to %" PRId64
                  ", a FAILED connector shows %" PRId64,
                  r.end_offset, v.committed);
    tm_commit_end(&c);
    free(c.parts);
}
END_TEST

/* A record's event carries the time of the poll that brought it. A stop
 * (SIGTERM, a pause) that comes after that poll is seen before the
 * record's step, its STOP at the time it is seen: the record's step then
 * must not go back in time, or the machine refuses it as malformed and
 * the connector is FAILED by its own stop. */
START_TEST(test_a_record_polled_before_the_stop_is_not_refused) {
    connector_start("stopped", NULL);
    tm_machine *m = c.m;
    running(m, "g", 0);
    int64_t polled = tm_now_ms(); /* the poll's clock read */
    struct timespec ms2 = {0, 2 * 1000000L};
    nanosleep(&ms2, NULL);
    atomic_store(&stop, 1); /* the stop watch, meanwhile */
    ck_assert_msg(tm_now_ms() > polled,
                  "inconclusive: the clock did not move past the poll");
    tm_machine_event ev = record_at("g", 10);
    ev.now_ms = polled;
    tm_commit_feed(&c, &ev, NULL, NULL);
    ck_assert_msg(c.machine_stopped,
                  "inconclusive: the stop was not seen before the record");
    ck_assert_msg(c.state != TM_CONN_FAILED && !tm_machine_failed(m),
                  "a record polled before the stop FAILED the connector: %s",
                  c.last_error);
    tm_commit_end(&c);
    free(c.parts);
}
END_TEST

/* A connector FAILED by an executor of the step that TAKEs a record (a
 * range's builder out of memory): the TAKE is answered all the same, and
 * the machine, FAILED by the host before that answer, must not keep the
 * TAKE out, or the revoke of the consumer's close is refused as malformed
 * and its refusal replaces the reason the connector FAILED for. */
static void fail_before_the_take(tm_connector *conn, const tm_answer *a,
                                 const tm_machine_action *acts, size_t n) {
    (void)a;
    int takes = 0;
    for (size_t i = 0; i < n; i++)
        takes |= acts[i].kind == TM_ACT_TAKE;
    ck_assert_msg(takes, "inconclusive: the record's step asked no TAKE");
    tm_conn_error(conn, 1, "the builder ran out of memory (test)");
}

START_TEST(test_failed_during_a_take_keeps_its_reason_at_the_revoke) {
    connector_start("taking", NULL);
    tm_machine *m = c.m;
    running(m, "g", 0);
    tm_machine_event ev = record_at("g", 10);
    tm_commit_feed(&c, &ev, fail_before_the_take, NULL);
    ck_assert_msg(
        c.state == TM_CONN_FAILED && strstr(c.last_error, "(test)") != NULL,
        "inconclusive: not FAILED by the step's executor: %s", c.last_error);
    tm_kafka_tp tp = {"g", 0, 0, NULL};
    tm_commit_on_revoke(&c, &tp, 1, 1);
    ck_assert_msg(strstr(c.last_error, "(test)") != NULL,
                  "the revoke replaced the reason of a FAILED connector: %s",
                  c.last_error);
    tm_commit_end(&c);
    free(c.parts);
}
END_TEST

int main(void) {
    Suite *s = suite_create("commit_answers");
    TCase *tc = tcase_create("commit_answers");
    tcase_add_test(tc, test_answer_reasons_survive_more_answers);
    tcase_add_test(tc, test_failed_by_the_host_hands_nothing_more_to_the_sink);
    tcase_add_test(tc,
                   test_failed_by_the_host_shows_the_batch_the_sink_applied);
    tcase_add_test(tc, test_a_record_polled_before_the_stop_is_not_refused);
    tcase_add_test(tc,
                   test_failed_during_a_take_keeps_its_reason_at_the_revoke);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
