/* Stops, pauses and the control socket under stress, end to end against
 * the real broker and SQLite, each one ctest test e2e.stop_edges.<scenario>:
 *
 * - stop_before_join: a connector stopped after its subscription, before
 *   it joined its group (the consumer has no rebalance protocol yet),
 *   stops cleanly: the process exits 0 instead of crashing. The host holds
 *   itself at the fault point after_subscribe (SIGSTOP), is sent SIGTERM,
 *   then continued.
 * - paused_lag: a paused connector's status shows the lag of the records
 *   produced while it is paused (its high watermark follows Kafka's own,
 *   queried by the test, never below its next offset; before, librdkafka's
 *   watermark cache, not refreshed for a paused partition, showed lag 0),
 *   and its partition shows as paused.
 * - fifo_in_dir: a FIFO named *.json in a config directory is refused by
 *   `tidemark validate DIR` with a message naming it, at once (opening it
 *   would wait forever for a writer).
 *
 * usage: stop_edges_e2e TIDEMARK_BIN PLUGIN_DIR SCENARIO */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

typedef struct conn {
    char name[128];
    char topic[128];
    char db[4200];
    char path[4400];
} conn;

static void conn_make(conn *c, const char *base, int partitions) {
    char b[64];
    snprintf(b, sizeof b, "stop-edges-%s", base);
    snprintf(c->name, sizeof c->name, "%s", h_name(b));
    snprintf(c->topic, sizeof c->topic, "%s", h_name(b));
    snprintf(c->db, sizeof c->db, "%s/%s.db", h_workdir(), base);
    h_create_topic(c->topic, partitions, NULL, NULL);
    char text[9000], file[128];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "\"topics\": [\"%s\"], \"start\": \"earliest\", "
             "\"static_membership\": false}, "
             "\"batch\": {\"max_records\": 20, \"max_wait_ms\": 100}, "
             "\"sink\": {\"plugin\": \"sqlite\", \"settings\": {\"path\": "
             "\"%s\", \"table\": \"t\"}}, \"state_dir\": \"%s/state\", "
             "\"mapping\": {\"mode\": \"json\", \"columns\": [{\"name\": "
             "\"id\", \"pointer\": \"/id\", \"type\": \"int\", \"required\": "
             "true}]}}\n",
             c->name, h_bootstrap(), c->topic, c->db, h_workdir());
    snprintf(file, sizeof file, "%s.json", base);
    snprintf(c->path, sizeof c->path, "%s", h_write_file(file, text));
}

static void scenario_stop_before_join(void) {
    conn a;
    conn_make(&a, "a", 1);
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    const char *env[] = {"TIDEMARK_FAULT=after_subscribe",
                         "TIDEMARK_FAULT_ACTION=stop", fp.fd_env, NULL};
    pid_t pid = h_spawn_env(a.path, "stop.log", env);
    h_fault_wait(&fp, "after_subscribe", pid, 1);
    h_step("held after the subscription, before joining the group");
    H_CHECK(kill(pid, SIGTERM) == 0, "kill: %s", strerror(errno));
    H_CHECK(kill(pid, SIGCONT) == 0, "kill: %s", strerror(errno));
    int st = h_stop(pid, 0, 30000, NULL);
    if (st != 0)
        h_dump_log("stop.log");
    H_CHECK(st == 0, "the host exited with status %d, expected 0", st);
    H_CHECK(strstr(h_read_file("stop.log"), "stopped") != NULL,
            "no 'stopped' in the log");
    h_step("stopped before joining: exit 0");
}

/* The integer after "KEY": in the entry of partition PART of a status
 * file's text, or -2 when absent. */
static long long part_int(const char *text, int part, const char *key) {
    char k[64];
    snprintf(k, sizeof k, "\"partition\": %d,", part);
    const char *at = strstr(text, k);
    if (!at)
        return -2;
    snprintf(k, sizeof k, "\"%s\":", key);
    at = strstr(at, k);
    return at ? strtoll(at + strlen(k), NULL, 10) : -2;
}

/* Whether partition PART's entry says "paused": true. */
static int part_paused(const char *text, int part) {
    char k[64];
    snprintf(k, sizeof k, "\"partition\": %d,", part);
    const char *at = strstr(text, k);
    const char *pz = at ? strstr(at, "\"paused\":") : NULL;
    return pz && strncmp(pz + 9, " true", 5) == 0;
}

static const char *status_of(const char *sd, const conn *c) {
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s/status.json", sd, c->name);
    return h_read_file(rel);
}

/* Two hosts of one connector (one group, two state directories; dynamic
 * members: one that leaves hands its partitions over at once): host 1
 * paused, records produced, host 2 applies its share and leaves; host 1,
 * still paused, gets that share back. Its status must show, for every
 * partition, Kafka's own high watermark (queried by the test), the lag
 * of what waits, and the partition paused. */
static void scenario_paused_lag(void) {
    enum { NP = 2 };
    conn a;
    conn_make(&a, "p", NP);
    rd_kafka_t *prod = h_producer(NULL, NULL);
    for (int part = 0; part < NP; part++)
        h_produce_many(prod, a.topic, part, 0, 10, "{\"id\": %d}");
    const char *args1[] = {"--state-dir", h_path("s1"), a.path, NULL};
    pid_t h1 = h_spawn_many(args1, "run1.log", NULL);
    h_wait_caught_up(a.db, a.name, a.topic, NP, 60000);
    const char *args2[] = {"--state-dir", h_path("s2"), a.path, NULL};
    pid_t h2 = h_spawn_many(args2, "run2.log", NULL);
    char group[200], owners[NP][H_OWNER_MAX];
    snprintf(group, sizeof group, "tidemark-%s", a.name);
    int64_t t0 = h_now_ms();
    while (h_group_owners(group, a.topic, NP, owners) != 2 || !owners[0][0] ||
           !owners[1][0] || strcmp(owners[0], owners[1]) == 0) {
        H_CHECK(h_now_ms() - t0 < 60000,
                "inconclusive: no share of the partitions for each host");
        h_sleep_ms(200);
    }
    h_step("two hosts, one partition each");
    const char *pargs[] = {"pause", "--state-dir", h_path("s1"), a.name, NULL};
    int rc = h_tidemark("pause.out", pargs);
    H_CHECK(rc == 0, "pause: exit %d, %s", rc, h_read_file("pause.out"));
    t0 = h_now_ms();
    while (!strstr(status_of("s1", &a), "\"state\": \"PAUSED\"")) {
        H_CHECK(h_now_ms() - t0 < 30000, "host 1 not PAUSED within 30 s");
        h_sleep_ms(100);
    }
    const int n = 25;
    for (int part = 0; part < NP; part++)
        h_produce_many(prod, a.topic, part, 10, n, "{\"id\": %d}");
    /* Host 2 applies its share: its partition's marker reaches Kafka's
     * high watermark. */
    int64_t hi[NP], lo;
    for (int part = 0; part < NP; part++)
        h_watermarks(a.topic, part, &lo, &hi[part]);
    t0 = h_now_ms();
    for (;;) {
        int applied = 0;
        for (int part = 0; part < NP; part++)
            if (h_sqlf(a.db,
                       "SELECT next_offset FROM tidemark_markers WHERE "
                       "topic = '%s' AND \"partition\" = %d",
                       a.topic, part) == hi[part])
                applied++;
        if (applied == 1)
            break;
        H_CHECK(applied == 0 && h_now_ms() - t0 < 60000,
                "inconclusive: %d partitions applied by host 2 (expected 1)",
                applied);
        h_sleep_ms(100);
    }
    h_stop_clean(h2);
    h_step("host 1 paused; %d records produced a partition; host 2 applied "
           "its share and left",
           n);
    /* Host 1 gets every partition back (claimed, paused); its status,
     * written every second, must then show Kafka's truth. */
    t0 = h_now_ms();
    for (;;) {
        const char *st = status_of("s1", &a);
        int good = 0;
        char seen[1024] = "";
        for (int part = 0; part < NP; part++) {
            long long next = part_int(st, part, "next_offset");
            long long hwm = part_int(st, part, "high_watermark");
            int paused = part_paused(st, part);
            size_t len = strlen(seen);
            snprintf(seen + len, sizeof seen - len,
                     " [%d] next %lld hwm %lld (Kafka %lld) paused %d;", part,
                     next, hwm, (long long)hi[part], paused);
            if (hwm == hi[part] && next <= hwm && paused)
                good++;
        }
        if (good == NP) {
            h_step("host 1's status:%s", seen);
            break;
        }
        if (h_now_ms() - t0 > 20000) {
            h_dump_log("run1.log");
            h_fail("host 1's status 20 s after host 2 left:%s", seen);
        }
        h_sleep_ms(200);
    }
    rd_kafka_destroy(prod);
    h_stop_clean(h1);
}

static const char *tidemark_bin;

static void scenario_fifo_in_dir(void) {
    conn a;
    conn_make(&a, "f", 1);
    char dir[4300], fifo[4400], cfg[4400], out[4400];
    snprintf(dir, sizeof dir, "%s/fifo-conf", h_workdir());
    H_CHECK(mkdir(dir, 0700) == 0, "mkdir: %s", strerror(errno));
    snprintf(cfg, sizeof cfg, "%s/a.json", dir);
    H_CHECK(rename(a.path, cfg) == 0, "rename: %s", strerror(errno));
    snprintf(fifo, sizeof fifo, "%s/b.json", dir);
    H_CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
    snprintf(out, sizeof out, "%s/validate.out", h_workdir());
    pid_t pid = fork();
    H_CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (!freopen(out, "w", stdout) || dup2(fileno(stdout), 2) < 0)
            _exit(127);
        execl(tidemark_bin, tidemark_bin, "validate", dir, (char *)NULL);
        _exit(127);
    }
    int64_t t0 = h_now_ms();
    int st = 0;
    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (h_now_ms() - t0 > 10000) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            h_fail("`tidemark validate DIR` with a FIFO b.json in DIR still "
                   "running after 10 s: %s",
                   h_read_file("validate.out"));
        }
        h_sleep_ms(50);
    }
    const char *text = h_read_file("validate.out");
    H_CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 0,
            "validate exited %d with a FIFO in DIR: %s",
            WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), text);
    H_CHECK(strstr(text, "b.json") && strstr(text, "not a regular file"),
            "no message naming the FIFO: %s", text);
    h_step("refused at once, exit %d: %s", WEXITSTATUS(st), text);
}

static const h_scenario SCENARIOS[] = {
    {"stop_before_join", scenario_stop_before_join},
    {"paused_lag", scenario_paused_lag},
    {"fifo_in_dir", scenario_fifo_in_dir},
};

int main(int argc, char **argv) {
    if (argc == 4)
        tidemark_bin = argv[1];
    return h_main(argc, argv, "stop_edges_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
