/* A fatal error of the dead-letter producer (librdkafka's idempotent
 * producer: rd_kafka_fatal_error() set, every later produce refused),
 * raised by the host's failure point dlq.fatal (services/fault.h) before
 * a batch's dead letters are produced. The producer must be made again and
 * the batch go on; a producer that keeps failing fatally ends in FAILED
 * naming its error, never a connector that answers RETRY for ever. The
 * truth: the sink's markers, the dead-letter topic read from Kafka. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "hostcore_e2e.h"

#define GOOD 5 /* good records before the two malformed ones, and after */
#define ALL  (2 * GOOD + 2)

typedef struct fatal_dlq {
    char topic[256], dlq[256], name[256], db[1024], log[64];
    h_fault_pipe fp;
} fatal_dlq;

/* The connector over ALL records (two malformed at GOOD, GOOD + 1), one
 * batch, its dead letters to their own topic; started with the failure
 * point dlq.fatal under ACTION (fail: once; fail-from: every time), and
 * seen reaching it. */
static pid_t fatal_dlq_start(fatal_dlq *s, const char *prefix,
                             const char *action) {
    h_dl_setup(prefix, s->topic, s->dlq, s->name, sizeof s->topic, NULL, NULL);
    snprintf(s->db, sizeof s->db, "%s", h_path("fatal.db"));
    snprintf(s->log, sizeof s->log, "fatal.log");
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, s->topic, 0, 0, GOOD, "{\"id\": %d}");
    h_produce_many(p, s->topic, 0, GOOD, 2, "not json %d");
    h_produce_many(p, s->topic, 0, GOOD + 2, GOOD, "{\"id\": %d}");
    rd_kafka_destroy(p);
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "\"topics\": [\"%s\"]}, \"batch\": {\"max_records\": %d, "
             "\"max_wait_ms\": 60000}, \"sink\": {\"plugin\": \"sqlite\", "
             "\"settings\": {\"path\": \"%s\", \"table\": \"t\"}}, "
             "\"dead_letters\": {\"sink\": true, \"topic\": \"%s\"}, "
             "\"state_dir\": \"%s/state\", %s}",
             s->name, h_bootstrap(), s->topic, ALL, s->db, s->dlq, h_workdir(),
             JSON_MAPPING);
    const char *cfg = h_write_file("fatal.json", text);
    h_fault_pipe_open(&s->fp);
    char act[64];
    snprintf(act, sizeof act, "TIDEMARK_FAULT_ACTION=%s", action);
    const char *env[] = {"TIDEMARK_FAULT=dlq.fatal", act, s->fp.fd_env, NULL};
    pid_t pid = h_spawn_env(cfg, s->log, env);
    h_fault_wait(&s->fp, "dlq.fatal", pid, 0);
    return pid;
}

static int64_t marker(const fatal_dlq *s) {
    return h_sqlf(s->db,
                  "SELECT next_offset FROM tidemark_markers WHERE "
                  "topic='%s' AND \"partition\"=0",
                  s->topic);
}

/* dlq_fatal_remade: one fatal error. The producer is made again and the
 * batch commits: the marker reaches the end, the topic has each of the
 * two dead letters exactly once (the fatal error came before any was
 * produced). Failed before the fix: the producer was never made again,
 * the batch answered RETRY for ever. */
void scenario_dlq_fatal_remade(void) {
    fatal_dlq s;
    pid_t pid = fatal_dlq_start(&s, "hc-dlfatal", "fail");
    int64_t t0 = h_now_ms();
    while (marker(&s) != ALL) {
        H_CHECK(h_now_ms() - t0 < 30000,
                "30 s after one fatal error of the dead-letter producer, "
                "the marker is at %lld of %d; status: %s\nlog:\n%s",
                (long long)marker(&s), ALL, h_status_text(s.name),
                h_read_file(s.log));
        h_sleep_ms(200);
    }
    const char *log = h_read_file(s.log);
    H_CHECK(strstr(log, "dead-letter producer made again after a fatal "
                        "error"),
            "the log does not say the producer was made again:\n%s", log);
    /* The RETRY the fatal error caused says why (the status file, written
     * once a second, may never have shown that RETRY: the batch commits
     * at its next attempt, a backoff of 100 ms later). */
    H_CHECK(strstr(log, "RETRY: dead-letter topic: ") &&
                strstr(log, "(the producer's fatal error: "
                            "OUT_OF_ORDER_SEQUENCE_NUMBER: "),
            "the RETRY does not name the producer's fatal error:\n%s", log);
    h_stop_clean(pid);
    size_t n;
    dl_seen *v = read_dead_letters(s.dlq, &n);
    int seen[2] = {0, 0};
    for (size_t i = 0; i < n; i++) {
        int64_t k = v[i].src_offset - GOOD;
        H_CHECK(k == 0 || k == 1,
                "%s offset %zu: dead letter of source offset %lld", s.dlq, i,
                (long long)v[i].src_offset);
        seen[k]++;
    }
    free(v);
    H_CHECK(n == 2 && seen[0] == 1 && seen[1] == 1,
            "%s holds %zu dead letters (offset %d: %d, %d: %d), expected "
            "each once",
            s.dlq, n, GOOD, seen[0], GOOD + 1, seen[1]);
    h_step("made again after the fatal error: marker at %d, each dead "
           "letter once in %s",
           ALL, s.dlq);
}

/* dlq_fatal_failed: a fatal error at every attempt. The connector ends
 * FAILED within a minute, its reason naming the dead-letter producer's
 * fatal error; nothing committed; the process exits 1 (its only connector
 * FAILED). Failed before the fix: DEGRADED, RETRY for ever. */
void scenario_dlq_fatal_failed(void) {
    fatal_dlq s;
    pid_t pid = fatal_dlq_start(&s, "hc-dlfatal4", "fail-from");
    int64_t t0 = h_now_ms();
    while (!strstr(h_status_text(s.name), "\"state\": \"FAILED\"")) {
        H_CHECK(h_now_ms() - t0 < 60000,
                "not FAILED 60 s after the dead-letter producer's first of "
                "fatal errors at every attempt; status: %s\nlog:\n%s",
                h_status_text(s.name), h_read_file(s.log));
        h_sleep_ms(200);
    }
    const char *st = h_status_text(s.name);
    H_CHECK(strstr(st, "dead-letter producer failed fatally") &&
                strstr(st, "injected at the failure point dlq.fatal"),
            "FAILED without naming the producer's fatal error: %s", st);
    H_CHECK(marker(&s) == 0, "the marker moved: %lld", (long long)marker(&s));
    /* Its only connector FAILED, the process exits 1 by itself. */
    int status = 0;
    pid_t done = 0;
    for (t0 = h_now_ms(); done == 0 && h_now_ms() - t0 < 15000; h_sleep_ms(100))
        done = waitpid(pid, &status, WNOHANG);
    H_CHECK(done == pid && WIFEXITED(status) && WEXITSTATUS(status) == 1,
            "the host of a FAILED connector did not exit 1 by itself:\n%s",
            h_read_file(s.log));
    /* The batch stops at the FAILED: no RETRY after it, and the reason its
     * last status file keeps is still the FAILED's (a RETRY after it would
     * have taken its place as the last error). */
    const char *log = h_read_file(s.log);
    const char *failed_at = strstr(log, "FAILED: ");
    H_CHECK(failed_at && !strstr(failed_at, "RETRY"),
            "a RETRY after the connector went FAILED:\n%s", log);
    st = h_status_text(s.name);
    H_CHECK(strstr(st, "\"state\": \"FAILED\"") &&
                strstr(st, "dead-letter producer failed fatally") &&
                !strstr(st, "RETRY"),
            "the last status of the FAILED connector does not keep its "
            "reason: %s",
            st);
    h_step("FAILED, the reason naming the producer's fatal error");
}
