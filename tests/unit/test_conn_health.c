/* The state a running connector publishes (runtime/connector_status.c):
 * DEGRADED while it retries past a transient error, until a batch commits;
 * PAUSED with which partition, by whom and why; DEGRADED once a partition
 * stays paused past TM_PAUSED_DEGRADED_MS; DEGRADED while a partition is
 * stopped; FAILED with its reason and time. Read back from the status file the
 * tick wrote. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit/commit_loop.h"
#include "commit/part_stop.h"
#include "runtime/connector_state.h"
#include "status/status_file.h"
#include "status/status_json.h"
#include "status/status_pulse.h"

#include "check_main.h"

static tm_connector_config cfg;
static char dir[] = "/tmp/tm-conn-health-XXXXXX";
static tm_part part;

static void setup(tm_connector *c) {
    memset(&cfg, 0, sizeof cfg);
    cfg.name = "conn_health";
    memset(c, 0, sizeof *c);
    c->cfg = &cfg;
    c->state = TM_CONN_RUNNING;
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char why[256];
    c->status = tm_status_writer_open(dir, cfg.name, why, sizeof why);
    ck_assert_msg(c->status != NULL, "%s", why);
    c->pulse = tm_status_pulse_start(c->status, 1000, cfg.name);
    ck_assert_ptr_nonnull(c->pulse);
    memset(&part, 0, sizeof part);
    part.topic = "orders";
    part.partition = 3;
    part.high_watermark = -1;
}

/* Writes the status at once and reads the file back. */
static tm_status_snapshot tick(tm_connector *c) {
    tm_conn_status_tick(c, 1);
    char path[256];
    snprintf(path, sizeof path, "%s/%s/status.json", dir, cfg.name);
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    ck_assert_msg(doc != NULL, "%s: %s", path, je.text);
    tm_status_snapshot s;
    tm_status_partition *parts = NULL;
    char err[256];
    ck_assert_msg(tm_status_from_json(doc, &s, &parts, err, sizeof err) == 0,
                  "%s", err);
    free(parts);
    s.partitions = NULL;
    json_decref(doc);
    return s;
}

static void teardown(tm_connector *c) {
    tm_status_pulse_stop(c->pulse);
    tm_status_writer_close(c->status);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    strcpy(dir, "/tmp/tm-conn-health-XXXXXX");
}

START_TEST(test_retry_is_degraded_until_a_batch_commits) {
    static tm_connector c;
    setup(&c);
    ck_assert_int_eq(tick(&c).state, TM_CONN_RUNNING);
    tm_conn_error(&c, 0, "batch b-1: RETRY: disk full");
    tm_status_snapshot s = tick(&c);
    ck_assert_int_eq(s.state, TM_CONN_DEGRADED);
    ck_assert_str_eq(s.reason, "batch b-1: RETRY: disk full");
    ck_assert_int_eq(s.reason_since_ms, c.degraded_ms);
    int64_t since = c.degraded_ms;
    tm_conn_error(&c, 0, "batch b-1: RETRY: disk still full");
    s = tick(&c);
    ck_assert_int_eq(s.state, TM_CONN_DEGRADED);
    ck_assert_str_eq(s.reason, "batch b-1: RETRY: disk still full");
    ck_assert_int_eq(s.reason_since_ms, since); /* since the first one */
    c.totals.batches++;                         /* it committed */
    s = tick(&c);
    ck_assert_int_eq(s.state, TM_CONN_RUNNING);
    ck_assert_str_eq(s.reason, "");
    teardown(&c);
}
END_TEST

START_TEST(test_pause_then_degraded_past_the_threshold) {
    static tm_connector c;
    setup(&c);
    part.paused = 1;
    c.parts = &part;
    c.nparts = 1;
    tm_status_snapshot s = tick(&c);
    ck_assert_int_eq(s.state, TM_CONN_PAUSED);
    ck_assert_ptr_nonnull(strstr(s.reason, "orders [3] paused by this host"));
    ck_assert_ptr_nonnull(strstr(s.reason, "backpressure"));
    c.paused_ms -= TM_PAUSED_DEGRADED_MS; /* paused that much earlier */
    s = tick(&c);
    ck_assert_int_eq(s.state, TM_CONN_DEGRADED);
    ck_assert_ptr_nonnull(strstr(s.reason, "paused too long: orders [3]"));
    ck_assert_int_eq(s.reason_since_ms, c.paused_ms);
    part.paused = 0;
    part.fenced = 1;
    c.paused_ms = 0;
    s = tick(&c);
    ck_assert_int_eq(s.state, TM_CONN_PAUSED);
    ck_assert_ptr_nonnull(strstr(s.reason, "fenced"));
    part.fenced = 0;
    s = tick(&c);
    ck_assert_int_eq(s.state, TM_CONN_RUNNING);
    ck_assert_int_eq(c.paused_ms, 0);
    c.nparts = 0;
    teardown(&c);
}
END_TEST

/* A partition waiting for its claim keeps the connector DEGRADED even
 * when records of others flow. */
START_TEST(test_unclaimed_keeps_degraded) {
    static tm_connector c;
    setup(&c);
    part.unclaimed = 1;
    c.parts = &part;
    c.nparts = 1;
    c.any_unclaimed = 1;
    tm_conn_error(&c, 0, "claim of 1 partition(s): RETRY: database is locked");
    tm_conn_recovered(&c, "records flow");
    tm_status_snapshot s = tick(&c);
    ck_assert_int_eq(s.state, TM_CONN_DEGRADED);
    ck_assert_ptr_nonnull(strstr(s.reason, "database is locked"));
    part.unclaimed = 0;
    c.any_unclaimed = 0;
    tm_conn_recovered(&c, "claimed");
    ck_assert_int_eq(tick(&c).state, TM_CONN_RUNNING);
    c.nparts = 0;
    teardown(&c);
}
END_TEST

/* A partition stopped by a change the host cannot apply keeps the
 * connector DEGRADED, whatever else recovers, naming it, its offset and
 * why; the partition reads back as stopped. Until the stop ends. */
START_TEST(test_stopped_partition_keeps_degraded) {
    static tm_connector c;
    setup(&c);
    c.parts = &part;
    c.nparts = 1;
    tm_part_stop_clear(&part);
    part.stopped = 1;
    part.stop_at = 812;
    part.stop_wall_ms = 1700000000000;
    snprintf(part.stop_why, sizeof part.stop_why,
             "field price changed type: the target column is float (from "
             "double), the event's schema says int (int32)");
    tm_conn_error(&c, 0, "orders [3] stopped at offset 812: ...");
    tm_conn_recovered(&c, "records flow");
    c.totals.batches++; /* another partition committed */
    tm_conn_status_tick(&c, 1);
    char path[256];
    snprintf(path, sizeof path, "%s/%s/status.json", dir, cfg.name);
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    ck_assert_msg(doc != NULL, "%s: %s", path, je.text);
    tm_status_snapshot s;
    tm_status_partition *parts = NULL;
    char err[256];
    ck_assert_msg(tm_status_from_json(doc, &s, &parts, err, sizeof err) == 0,
                  "%s", err);
    json_decref(doc);
    ck_assert_int_eq(s.state, TM_CONN_DEGRADED);
    ck_assert_str_eq(s.reason,
                     "orders [3] stopped at offset 812: field price changed "
                     "type: the target column is float (from double), the "
                     "event's schema says int (int32); the other partitions "
                     "go on");
    ck_assert_int_eq(s.reason_since_ms, 1700000000000);
    ck_assert_uint_eq(s.npartitions, 1);
    ck_assert_int_eq(parts[0].stopped, 1);
    ck_assert_int_eq(parts[0].paused, 1);
    ck_assert_int_eq(parts[0].stopped_at, 812);
    ck_assert_str_eq(parts[0].stop_reason, part.stop_why);
    free(parts);
    /* an operator's pause does not hide the stop: still DEGRADED (so
     * `tidemark status` does not exit 0), the stop named first */
    c.paused_since_ms = 1700000001000;
    snprintf(c.paused_by, sizeof c.paused_by, "pid 42");
    tm_status_snapshot ps = tick(&c);
    ck_assert_int_eq(ps.state, TM_CONN_DEGRADED);
    ck_assert_msg(strstr(ps.reason, "stopped at offset 812") &&
                      strstr(ps.reason, "paused by pid 42"),
                  "%s", ps.reason);
    c.paused_since_ms = 0;
    tm_part_stop_clear(&part); /* revoked and claimed again */
    c.totals.batches++;
    ck_assert_int_eq(tick(&c).state, TM_CONN_RUNNING);
    c.nparts = 0;
    teardown(&c);
}
END_TEST

START_TEST(test_failed_has_reason_and_time) {
    static tm_connector c;
    setup(&c);
    tm_conn_error(&c, 1, "batch b-2: FATAL: column \"x\" does not exist");
    tm_status_snapshot s = tick(&c);
    ck_assert_int_eq(s.state, TM_CONN_FAILED);
    ck_assert_str_eq(s.reason, "batch b-2: FATAL: column \"x\" does not exist");
    ck_assert_int_eq(s.reason_since_ms, c.failed_ms);
    ck_assert_int_ne(c.failed_ms, 0);
    teardown(&c);
}
END_TEST

int main(void) {
    Suite *s = suite_create("conn_health");
    TCase *tc = tcase_create("conn_health");
    tcase_add_test(tc, test_retry_is_degraded_until_a_batch_commits);
    tcase_add_test(tc, test_pause_then_degraded_past_the_threshold);
    tcase_add_test(tc, test_unclaimed_keeps_degraded);
    tcase_add_test(tc, test_stopped_partition_keeps_degraded);
    tcase_add_test(tc, test_failed_has_reason_and_time);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
