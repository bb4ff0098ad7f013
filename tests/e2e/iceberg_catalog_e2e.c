/* `tidemark run` into an iceberg-lite table registered in an Iceberg SQL
 * catalog (a SQLite file), read by readers that are not ours while the
 * connector writes: pyiceberg's SqlCatalog loads the table by namespace and
 * name, DuckDB reads the Parquet files of the snapshot the catalog row
 * names (iceberg_catalog_judge.py). Scenarios:
 *   readers_while_writing     the catalog in a SQLite file beside the table:
 *                             a host stopped mid-stream (fault point
 *                             after_commit, 3rd hit) shows a consistent part
 *                             of the records; killed, restarted and stopped
 *                             again (5th hit) more of them but not all; then,
 *                             while it catches up, a reader reads again and
 *                             again (each read a set of distinct records that
 *                             never shrinks); at the end the readers see
 *                             exactly the published records, once each
 *   readers_while_writing_pg  the same with the catalog in PostgreSQL (a
 *                             schema of the run's own, dropped after a pass;
 *                             pyiceberg through psycopg2) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define COUNT 6000 /* two partitions of 3000 */

static const char *py, *judge;
static char uri[4300];

/* The judge's count of the table's rows now ("--count"): pyiceberg and
 * DuckDB agree on it, or the test fails. */
static long reader_count(void) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "%s %s --count %s lake e2e.orders > %s/count.out 2>&1", py, judge,
             uri, h_workdir());
    H_CHECK(system(cmd) == 0, "the readers failed:\n%s",
            h_read_file("count.out"));
    return strtol(h_read_file("count.out"), NULL, 10);
}

/* The value of KEY in TIDEMARK_PG_CONNINFO ("host=... port=..."), into
 * out; fails the test when it is not there. */
static void conninfo_value(const char *key, char *out, size_t size) {
    const char *ci = getenv("TIDEMARK_PG_CONNINFO");
    H_CHECK(ci && *ci, "TIDEMARK_PG_CONNINFO is not set (. scripts/env.sh)");
    size_t n = strlen(key);
    for (const char *p = ci; *p;) {
        p += strspn(p, " ");
        size_t len = strcspn(p, " ");
        if (len > n && strncmp(p, key, n) == 0 && p[n] == '=') {
            snprintf(out, size, "%.*s", (int)(len - n - 1), p + n + 1);
            return;
        }
        p += len;
    }
    h_fail("no %s= in TIDEMARK_PG_CONNINFO", key);
}

/* A schema of this run's own on the server, and the catalog URI (as
 * SQLAlchemy spells it, for the sink and pyiceberg alike) whose
 * search_path is that schema. */
static void use_pg_catalog(char *schema, size_t size) {
    char host[256], port[32], db[256], user[256];
    conninfo_value("host", host, sizeof host);
    conninfo_value("port", port, sizeof port);
    conninfo_value("dbname", db, sizeof db);
    conninfo_value("user", user, sizeof user);
    snprintf(schema, size, "%s", h_name("icecat"));
    for (char *c = schema; *c; c++)
        if (*c == '-')
            *c = '_';
    h_pg_int("CREATE SCHEMA \"%s\"", schema);
    H_CHECK(h_pg_int("SELECT count(*) FROM pg_namespace WHERE nspname = '%s'",
                     schema) == 1,
            "could not create schema %s", schema);
    snprintf(uri, sizeof uri,
             "postgresql+psycopg2://%s@%s:%s/%s?options=-csearch_path%%3D%s",
             user, host, port, db, schema);
}

static void scenario_readers_while_writing(void) {
    py = getenv("TIDEMARK_VENV_PYTHON");
    judge = getenv("TIDEMARK_ICEBERG_CATALOG_JUDGE");
    H_CHECK(py && *py && judge && *judge,
            "TIDEMARK_VENV_PYTHON / TIDEMARK_ICEBERG_CATALOG_JUDGE are not "
            "set (scripts/python-venv.sh)");
    const char *topic = h_name("icecat");
    char name[256], table[4096];
    snprintf(name, sizeof name, "%s", h_name("icecat"));
    snprintf(table, sizeof table, "%s/table", h_workdir());
    if (!uri[0])
        snprintf(uri, sizeof uri, "sqlite:///%s/catalog.db", h_workdir());
    h_create_topic(topic, 2, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < 2; part++)
        h_produce_many(p, topic, part, part * 100000, COUNT / 2,
                       "{\"id\": %d, \"name\": \"ice\"}");
    char text[16384];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": "
             "\"%s\", \"topics\": [\"%s\"], \"properties\": "
             "{\"session.timeout.ms\": \"6000\", "
             "\"heartbeat.interval.ms\": \"500\"}}, \"batch\": "
             "{\"max_records\": 200}, \"sink\": {\"plugin\": "
             "\"iceberg_lite\", \"settings\": {\"path\": \"%s\", "
             "\"catalog_uri\": \"%s\", \"catalog_name\": \"lake\", "
             "\"catalog_namespace\": \"e2e\", \"catalog_table\": "
             "\"orders\"}}, \"state_dir\": \"%s/state\", \"mapping\": "
             "{\"mode\": \"json\", \"columns\": [{\"name\": \"id\", "
             "\"pointer\": \"/id\", \"type\": \"int\", \"required\": true}, "
             "{\"name\": \"name\", \"pointer\": \"/name\", \"type\": "
             "\"text\"}]}}",
             name, h_bootstrap(), topic, table, uri, h_workdir());
    const char *cfg = h_write_file("icecat.json", text);
    /* Stopped right after its third commit, whatever its speed: the
     * readers must then see some of the records but not all, else the
     * run is inconclusive. */
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    const char *env[] = {"TIDEMARK_FAULT=after_commit",
                         "TIDEMARK_FAULT_ACTION=stop", "TIDEMARK_FAULT_HIT=3",
                         fp.fd_env, NULL};
    pid_t pid = h_spawn_env(cfg, "icecat.log", env);
    h_fault_wait(&fp, "after_commit", pid, 1);
    long at_stop = reader_count();
    H_CHECK(at_stop > 0 && at_stop < COUNT,
            "inconclusive: the readers saw %ld rows mid-stream, not between "
            "0 and %d",
            at_stop, COUNT);
    h_step("stopped after the third commit: pyiceberg (SqlCatalog) and "
           "DuckDB read %ld of %d rows",
           at_stop, COUNT);
    int rc = h_stop(pid, SIGKILL, 5000, NULL);
    H_CHECK(rc == 128 + SIGKILL, "the host was not killed");
    /* Restarted (the catalog row is the truth after the kill), stopped
     * again at its fifth commit: more rows, not all. */
    h_fault_pipe fp2;
    h_fault_pipe_open(&fp2);
    const char *env2[] = {"TIDEMARK_FAULT=after_commit",
                          "TIDEMARK_FAULT_ACTION=stop", "TIDEMARK_FAULT_HIT=5",
                          fp2.fd_env, NULL};
    pid = h_spawn_env(cfg, "icecat.log", env2);
    h_fault_wait(&fp2, "after_commit", pid, 1);
    long again = reader_count();
    H_CHECK(again > at_stop && again < COUNT,
            "inconclusive: the readers saw %ld rows at the second stop, not "
            "between %ld and %d",
            again, at_stop, COUNT);
    h_step("restarted, stopped after five more commits: the readers read "
           "%ld rows",
           again);
    /* A reader reading again and again while the host goes on. */
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "exec %s %s --watch %s lake e2e.orders %d > %s/watch.out 2>&1", py,
             judge, uri, COUNT, h_workdir());
    pid_t watcher = fork();
    H_CHECK(watcher >= 0, "fork");
    if (watcher == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    /* Its first read is of the stopped host's rows; from then on it
     * reads while the host writes. */
    int64_t t0 = h_now_ms();
    while (!strstr(h_read_file("watch.out"), "read ")) {
        H_CHECK(h_now_ms() - t0 < 60000, "the reader never read:\n%s",
                h_read_file("watch.out"));
        h_sleep_ms(50);
    }
    H_CHECK(kill(pid, SIGCONT) == 0, "SIGCONT the host");
    const char *args[] = {"verify", cfg, NULL};
    char want[64];
    snprintf(want, sizeof want, "kafka_records=%d ", COUNT);
    t0 = h_now_ms();
    for (;;) {
        rc = h_tidemark("verify.out", args);
        const char *out = h_read_file("verify.out");
        if (rc == 0 && strstr(out, want))
            break;
        H_CHECK(rc == 0 || rc == 2, "verify failed:\n%s", out);
        H_CHECK(h_now_ms() - t0 < 180000, "not caught up:\n%s", out);
        h_sleep_ms(300);
    }
    int status;
    H_CHECK(waitpid(watcher, &status, 0) == watcher && WIFEXITED(status) &&
                WEXITSTATUS(status) == 0,
            "the reader reading while the host wrote:\n%s",
            h_read_file("watch.out"));
    const char *watched = h_read_file("watch.out");
    const char *last_line = strstr(watched, " reads, ");
    while (last_line && last_line > watched && last_line[-1] != '\n')
        last_line--;
    h_step("caught up; the reader that read meanwhile: %s",
           last_line ? last_line : watched);
    h_stop_clean(pid);
    /* The expected rows, from what was produced (offsets are dense: one
     * idempotent producer, no transactions). */
    char *expected = malloc(1 << 20);
    H_CHECK(expected != NULL, "out of memory");
    size_t n = (size_t)snprintf(expected, 8, "[");
    for (int part = 0; part < 2; part++)
        for (int i = 0; i < COUNT / 2; i++)
            n += (size_t)snprintf(expected + n, 64, "%s[%d, %d, %d]",
                                  n > 1 ? "," : "", part, i, part * 100000 + i);
    snprintf(expected + n, 4, "]");
    const char *exp_path = h_write_file("expected.json", expected);
    free(expected);
    snprintf(cmd, sizeof cmd, "%s %s %s lake e2e.orders %s > %s/judge.out 2>&1",
             py, judge, uri, exp_path, h_workdir());
    H_CHECK(system(cmd) == 0, "the readers' verdict:\n%s",
            h_read_file("judge.out"));
    h_step("%s", h_read_file("judge.out"));
    rd_kafka_destroy(p);
}

/* The same readers against a catalog in PostgreSQL (a schema of its own). */
static void scenario_readers_while_writing_pg(void) {
    char schema[256] = "";
    use_pg_catalog(schema, sizeof schema);
    scenario_readers_while_writing();
    h_pg_int("DROP SCHEMA \"%s\" CASCADE", schema);
}

int main(int argc, char **argv) {
    static const h_scenario list[] = {
        {"readers_while_writing", scenario_readers_while_writing},
        {"readers_while_writing_pg", scenario_readers_while_writing_pg},
    };
    return h_main(argc, argv, "iceberg_catalog_e2e", list, H_NSCENARIOS(list));
}
