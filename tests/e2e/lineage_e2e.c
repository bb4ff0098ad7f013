/* End-to-end scenarios of the marker's lineage (docs/exactly-once.md): a
 * log that is no longer the one the sink's marker describes is never
 * resumed silently. Each scenario is one ctest test, e2e.lineage.<scenario>,
 * checked against the database's rows and markers and Kafka's records. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* A dynamic member (static membership off): each scenario stops the host
 * and resets at once, which needs an empty group; a static member would
 * stay in it for the session timeout (docs/operations.md). */
static const char *config(const char *file, const char *name, const char *topic,
                          const char *db) {
    static char text[16384];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\",\n"
             " \"kafka\": {\"bootstrap_servers\": \"%s\", \"topics\": "
             "[\"%s\"], \"start\": \"earliest\", \"static_membership\": "
             "false},\n"
             " \"batch\": {\"max_records\": 50, \"max_wait_ms\": 100},\n"
             " \"sink\": {\"plugin\": \"sqlite\", \"settings\": {\"path\": "
             "\"%s\", \"table\": \"t\"}},\n"
             " \"state_dir\": \"%s/state-%s\",\n"
             " \"mapping\": {\"mode\": \"json\", \"columns\": ["
             "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", "
             "\"required\": true}]}}\n",
             name, h_bootstrap(), topic, db, h_workdir(), file);
    return h_write_file(file, text);
}

static rd_kafka_t *admin_client(void) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", h_bootstrap(), err,
                          sizeof err) != RD_KAFKA_CONF_OK)
        h_fail("bootstrap.servers: %s", err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk)
        h_fail("admin client: %s", err);
    return rk;
}

/* The result of one admin call on one topic: its error code, or the
 * request's own (create: 1 partition; else delete). */
static rd_kafka_resp_err_t topic_admin(const char *topic, int create, char *msg,
                                       size_t msgsize) {
    char err[512];
    rd_kafka_t *rk = admin_client();
    rd_kafka_queue_t *qu = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opt =
        rd_kafka_AdminOptions_new(rk, create ? RD_KAFKA_ADMIN_OP_CREATETOPICS
                                             : RD_KAFKA_ADMIN_OP_DELETETOPICS);
    rd_kafka_AdminOptions_set_operation_timeout(opt, 20000, err, sizeof err);
    rd_kafka_NewTopic_t *nt = NULL;
    rd_kafka_DeleteTopic_t *dt = NULL;
    if (create) {
        nt = rd_kafka_NewTopic_new(topic, 1, 1, err, sizeof err);
        if (!nt)
            h_fail("NewTopic %s: %s", topic, err);
        rd_kafka_CreateTopics(rk, &nt, 1, opt, qu);
    } else {
        dt = rd_kafka_DeleteTopic_new(topic);
        rd_kafka_DeleteTopics(rk, &dt, 1, opt, qu);
    }
    rd_kafka_event_t *ev = rd_kafka_queue_poll(qu, 30000);
    if (!ev)
        h_fail("%s %s: no answer in 30 s",
               create ? "CreateTopics" : "DeleteTopics", topic);
    size_t n = 0;
    const rd_kafka_topic_result_t **tr =
        create ? rd_kafka_CreateTopics_result_topics(
                     rd_kafka_event_CreateTopics_result(ev), &n)
               : rd_kafka_DeleteTopics_result_topics(
                     rd_kafka_event_DeleteTopics_result(ev), &n);
    rd_kafka_resp_err_t e = rd_kafka_event_error(ev);
    const char *s = e ? rd_kafka_event_error_string(ev) : "";
    if (!e && n == 1) {
        e = rd_kafka_topic_result_error(tr[0]);
        s = e ? rd_kafka_topic_result_error_string(tr[0]) : "";
    } else if (!e) {
        e = RD_KAFKA_RESP_ERR__FAIL;
        s = "no result";
    }
    snprintf(msg, msgsize, "%s", s ? s : "");
    rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opt);
    if (nt)
        rd_kafka_NewTopic_destroy(nt);
    if (dt)
        rd_kafka_DeleteTopic_destroy(dt);
    rd_kafka_queue_destroy(qu);
    rd_kafka_destroy(rk);
    return e;
}

/* Deletes the topic and creates it again with one partition, empty:
 * the create is retried while the broker still removes the old one. */
static void recreate_topic(const char *topic) {
    char msg[512];
    rd_kafka_resp_err_t e = topic_admin(topic, 0, msg, sizeof msg);
    H_CHECK(!e, "DeleteTopics %s: %s", topic, msg);
    int64_t t0 = h_now_ms();
    while ((e = topic_admin(topic, 1, msg, sizeof msg)) ==
           RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        H_CHECK(h_now_ms() - t0 < 60000,
                "%s still there 60 s after it was deleted", topic);
        h_sleep_ms(500);
    }
    H_CHECK(!e, "CreateTopics %s: %s", topic, msg);
}

/* Waits for the host to exit by itself, or for the marker to reach `at`
 * (the host resumed and applied): whichever comes first. Returns the exit
 * status, or -1 when it still runs (then it is stopped here). */
static int exit_or_marker(pid_t pid, const char *db, const char *name,
                          int64_t at) {
    int64_t t0 = h_now_ms();
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (h_sqlf(db,
                   "SELECT next_offset FROM tidemark_markers WHERE connector "
                   "= '%s'",
                   name) >= at) {
            h_step("the marker reached %lld: the host resumed", (long long)at);
            h_stop(pid, SIGTERM, 15000, NULL);
            return -1;
        }
        H_CHECK(h_now_ms() - t0 < 120000,
                "neither an exit nor the marker at %lld in 120 s",
                (long long)at);
        h_sleep_ms(100);
    }
}

/* The issue: 200 records applied, the topic deleted and created again with
 * MORE records than the marker (250). The marker (200) is inside the new
 * log, so the watermarks cannot tell; the record the marker last applied
 * (offset 199) is not the one the new log holds there. The host must stop
 * with the reason and the reset command, storing nothing of the new log;
 * after `offsets --reset-to` it goes on from the offset the operator gave. */
static void scenario_recreated_topic(void) {
    const char *topic = h_name("lineage-rt");
    char name[256], spec[512];
    snprintf(name, sizeof name, "%s", h_name("lineage-rt"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 200, "{\"id\": %d}");
    rd_kafka_destroy(p);
    char db[4200];
    snprintf(db, sizeof db, "%s/rt.db", h_workdir());
    const char *cfg = config("rt.json", name, topic, db);
    pid_t pid = h_spawn(cfg, "rt.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    int rc = h_stop(pid, SIGTERM, 15000, NULL);
    H_CHECK(rc == 0, "first run: exit %d", rc);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 200,
            "rows after the first run");

    h_step("deleting and creating %s again", topic);
    recreate_topic(topic);
    p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 1000, 250, "{\"id\": %d}");
    rd_kafka_destroy(p);
    int64_t lo, hi;
    h_watermarks(topic, 0, &lo, &hi);
    H_CHECK(lo == 0 && hi == 250,
            "inconclusive: the new log is [%lld, %lld), not [0, 250)",
            (long long)lo, (long long)hi);

    pid = h_spawn(cfg, "rt2.log");
    rc = exit_or_marker(pid, db, name, 250);
    int64_t rows = h_sqlf(db, "SELECT count(*) FROM t"),
            new_rows = h_sqlf(db, "SELECT count(*) FROM t WHERE id >= 1000");
    H_CHECK(rows == 200 && new_rows == 0,
            "the new log was applied silently: %lld rows, %lld of the new "
            "log (exit %d)",
            (long long)rows, (long long)new_rows, rc);
    H_CHECK(h_sqlf(db,
                   "SELECT next_offset FROM tidemark_markers WHERE connector "
                   "= '%s'",
                   name) == 200,
            "the marker moved");
    const char *log = h_read_file("rt2.log");
    H_CHECK(strstr(log, "not the one the sink's marker") &&
                strstr(log, "offsets --reset-to"),
            "no reason naming the reset command in the log:\n%s", log);
    H_CHECK(rc > 0, "the host exited %d, not as FAILED", rc);

    h_step("reset to 0: the operator's decision");
    snprintf(spec, sizeof spec, "%s:0=0", topic);
    const char *reset[] = {"offsets", cfg, "--reset-to", spec, NULL};
    rc = h_tidemark("reset.out", reset);
    H_CHECK(rc == 0, "offsets --reset-to: exit %d\n%s", rc,
            h_read_file("reset.out"));
    pid = h_spawn(cfg, "rt3.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    rc = h_stop(pid, SIGTERM, 15000, NULL);
    H_CHECK(rc == 0, "after the reset: exit %d", rc);
    new_rows = h_sqlf(db, "SELECT count(*) FROM t WHERE id >= 1000");
    H_CHECK(new_rows == 250, "%lld rows of the new log after the reset",
            (long long)new_rows);
}

/* The same log is resumed: a restart after more records reads the marker's
 * record back, finds it, goes on. Then the records up to the marker are
 * deleted (the log start moves past the record the marker kept, as
 * retention would): it cannot be checked, which is accepted and logged,
 * and the host goes on; every record is stored once. */
static void scenario_kept_and_gone(void) {
    const char *topic = h_name("lineage-kg");
    char name[256], db[4200];
    snprintf(name, sizeof name, "%s", h_name("lineage-kg"));
    snprintf(db, sizeof db, "%s/kg.db", h_workdir());
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 100, "{\"id\": %d}");
    const char *cfg = config("kg.json", name, topic, db);
    pid_t pid = h_spawn(cfg, "kg1.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    H_CHECK(h_stop(pid, SIGTERM, 15000, NULL) == 0, "first run's exit");
    H_CHECK(h_sqlf(db,
                   "SELECT last_offset FROM tidemark_markers WHERE connector "
                   "= '%s'",
                   name) == 99,
            "inconclusive: the marker keeps no lineage of offset 99");

    h_produce_many(p, topic, 0, 100, 20, "{\"id\": %d}");
    pid = h_spawn(cfg, "kg2.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    H_CHECK(h_stop(pid, SIGTERM, 15000, NULL) == 0, "second run's exit");
    const char *log = h_read_file("kg2.log");
    H_CHECK(!strstr(log, "not the one") && !strstr(log, "lineage not checked"),
            "the same log was not recognised:\n%s", log);

    h_delete_records(topic, 0, 120);
    int64_t lo, hi;
    h_watermarks(topic, 0, &lo, &hi);
    H_CHECK(lo == 120 && hi == 120, "inconclusive: the log is [%lld, %lld)",
            (long long)lo, (long long)hi);
    h_produce_many(p, topic, 0, 120, 10, "{\"id\": %d}");
    pid = h_spawn(cfg, "kg3.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    H_CHECK(h_stop(pid, SIGTERM, 15000, NULL) == 0, "third run's exit");
    log = h_read_file("kg3.log");
    H_CHECK(strstr(log, "lineage not checked") != NULL,
            "no note that the marker's record is gone:\n%s", log);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 130 &&
                h_sqlf(db, "SELECT count(DISTINCT _tm_offset) FROM t") == 130,
            "rows: %lld, not every offset once",
            (long long)h_sqlf(db, "SELECT count(*) FROM t"));
    rd_kafka_destroy(p);
}

static const h_scenario SCENARIOS[] = {
    {"recreated_topic", scenario_recreated_topic},
    {"kept_and_gone", scenario_kept_and_gone},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "lineage_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
