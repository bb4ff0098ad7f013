/* Stops, pauses and the control socket under stress, end to end against
 * the real broker and SQLite, each one ctest test e2e.rv18fix.<scenario>:
 *
 * - stop_before_join: a connector stopped after its subscription, before
 *   it joined its group (the consumer has no rebalance protocol yet),
 *   stops cleanly: the process exits 0 instead of crashing. The host holds
 *   itself at the fault point after_subscribe (SIGSTOP), is sent SIGTERM,
 *   then continued.
 *
 * usage: rv18fix_e2e TIDEMARK_BIN PLUGIN_DIR SCENARIO */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    snprintf(b, sizeof b, "rv18fix-%s", base);
    snprintf(c->name, sizeof c->name, "%s", h_name(b));
    snprintf(c->topic, sizeof c->topic, "%s", h_name(b));
    snprintf(c->db, sizeof c->db, "%s/%s.db", h_workdir(), base);
    h_create_topic(c->topic, partitions, NULL, NULL);
    char text[9000], file[128];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "\"topics\": [\"%s\"], \"start\": \"earliest\"}, "
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

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr,
                "usage: rv18fix_e2e TIDEMARK_BIN PLUGIN_DIR SCENARIO\n");
        return 2;
    }
    static const struct {
        const char *name;
        void (*fn)(void);
    } scenarios[] = {
        {"stop_before_join", scenario_stop_before_join},
    };
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        if (strcmp(scenarios[i].name, argv[3]) == 0) {
            h_init(argv[1], argv[2], argv[3]);
            scenarios[i].fn();
            h_step("PASS");
            return 0;
        }
    fprintf(stderr, "rv18fix_e2e: unknown scenario %s\n", argv[3]);
    return 2;
}
