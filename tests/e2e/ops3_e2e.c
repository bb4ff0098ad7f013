/* What a reload (SIGHUP, docs/operations.md, Reload) must carry along, end
 * to end against the real broker and SQLite, each one ctest test
 * e2e.ops3.<scenario>:
 *
 * - metrics_follow_reload: a connector added by a reload appears in the
 *   metrics textfile and on the loopback listener, one removed by a reload
 *   disappears from both (no stale series). The texts are judged by
 *   prometheus_client's own parser; that a connector runs is read from
 *   its store (its claim markers), that one stopped from the host's log
 *   of the reload being done; `tidemark status --format prometheus`
 *   shows the removed one, but not as RUNNING;
 * - run_cross_check: `tidemark run` refuses two connectors in one consumer
 *   group as `tidemark validate` does (exit 2, FILE: JSON-PATH, nothing
 *   started), and a reload adding such a config is refused and changes
 *   nothing (the running connector keeps its claim, the new one never
 *   claims);
 * - validate_dir: `tidemark validate DIR` checks the directory's *.json
 *   files as `run DIR` runs them (each, then together), by their paths;
 * - pause_rebalance: a paused host stays paused through the rebalances a
 *   second host of its group causes (joining, then leaving): it commits
 *   nothing (its markers in the store, Kafka's watermarks, the group's
 *   owners as the broker describes them); resumed, every record once.
 *
 * usage: ops3_e2e TIDEMARK_BIN PLUGIN_DIR SCENARIO, with TIDEMARK_VENV_PYTHON
 * the Python that has prometheus_client. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* One connector of a test: its config file conf/FILE.json, its topic, its
 * SQLite file. */
typedef struct conn {
    const char *file;
    char name[128];
    char topic[128];
    char db[4200];
} conn;

static void conn_init_parts(conn *c, const char *file, int partitions) {
    c->file = file;
    char base[64];
    snprintf(base, sizeof base, "ops3-%s", file);
    snprintf(c->name, sizeof c->name, "%s", h_name(base));
    snprintf(c->topic, sizeof c->topic, "%s", h_name(base));
    snprintf(c->db, sizeof c->db, "%s/%s.db", h_workdir(), file);
    h_create_topic(c->topic, partitions, NULL, NULL);
}

static void conn_init(conn *c, const char *file) {
    conn_init_parts(c, file, 1);
}

/* Written whole and renamed into place: a reload never reads half a file.
 * group: $.kafka.group_id, NULL for the default (the connector's name). */
static void write_conf(const conn *c, const char *group) {
    char grp[256] = "", text[9000];
    if (group)
        snprintf(grp, sizeof grp, "\"group_id\": \"%s\", ", group);
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "%s\"topics\": [\"%s\"], \"start\": \"earliest\"}, "
             "\"batch\": {\"max_records\": 20, \"max_wait_ms\": 100}, "
             "\"sink\": {\"plugin\": \"sqlite\", \"settings\": {\"path\": "
             "\"%s\", \"table\": \"t\"}}, \"state_dir\": \"%s/state\", "
             "\"mapping\": {\"mode\": \"json\", \"columns\": [{\"name\": "
             "\"id\", \"pointer\": \"/id\", \"type\": \"int\", \"required\": "
             "true}]}}\n",
             c->name, h_bootstrap(), grp, c->topic, c->db, h_workdir());
    char tmp[300], final[300];
    snprintf(tmp, sizeof tmp, "conf-tmp-%s.json", c->file);
    snprintf(final, sizeof final, "%s/conf/%s.json", h_workdir(), c->file);
    const char *path = h_write_file(tmp, text);
    H_CHECK(rename(path, final) == 0, "rename %s: %s", final, strerror(errno));
}

static void remove_conf(const conn *c) {
    char final[300];
    snprintf(final, sizeof final, "%s/conf/%s.json", h_workdir(), c->file);
    H_CHECK(unlink(final) == 0, "unlink %s: %s", final, strerror(errno));
}

static const char *conf_dir(void) {
    static char dir[4200];
    snprintf(dir, sizeof dir, "%s/conf", h_workdir());
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        h_fail("mkdir %s: %s", dir, strerror(errno));
    return dir;
}

/* The connector's claim epoch in its store (-1: none yet): a connector
 * that claimed its partition runs. */
static int64_t epoch(const conn *c) {
    return h_sqlf(c->db,
                  "SELECT epoch FROM tidemark_markers WHERE connector = '%s' "
                  "AND topic = '%s' AND \"partition\" = 0",
                  c->name, c->topic);
}

static void fail_if_exited(pid_t pid, const char *log) {
    int st;
    if (pid > 0 && waitpid(pid, &st, WNOHANG) == pid) {
        h_dump_log(log);
        h_fail("the host exited (status %d)",
               WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
}

static void wait_log(pid_t pid, const char *log, const char *text,
                     int timeout_ms) {
    int64_t t0 = h_now_ms();
    while (!strstr(h_read_file(log), text)) {
        fail_if_exited(pid, log);
        if (h_now_ms() - t0 > timeout_ms) {
            h_dump_log(log);
            h_fail("no '%s' in %s within %d ms", text, log, timeout_ms);
        }
        h_sleep_ms(50);
    }
}

static void wait_claimed(pid_t pid, const conn *c, const char *log) {
    int64_t t0 = h_now_ms();
    while (epoch(c) <= 0) {
        fail_if_exited(pid, log);
        H_CHECK(h_now_ms() - t0 < 60000, "%s: no claim within 60 s", c->name);
        h_sleep_ms(100);
    }
}

/* ---- the metrics, as prometheus_client parses them ---- */

/* The samples of the work dir's file NAME labelled connector=CONNECTOR,
 * and whether one is tidemark_connector_state{state="RUNNING"} 1. A text
 * the parser refuses fails the test. */
static void samples(const char *name, const conn *c, int *count, int *running) {
    const char *py = getenv("TIDEMARK_VENV_PYTHON");
    H_CHECK(py && *py, "TIDEMARK_VENV_PYTHON is not set");
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "'%s' -c 'import sys\n"
             "from prometheus_client.parser import "
             "text_string_to_metric_families as parse\n"
             "n = r = 0\n"
             "for f in parse(open(sys.argv[1]).read()):\n"
             "    for s in f.samples:\n"
             "        if s.labels.get(\"connector\") != sys.argv[2]: continue\n"
             "        n += 1\n"
             "        if s.name == \"tidemark_connector_state\" and "
             "s.labels.get(\"state\") == \"RUNNING\" and s.value == 1: r = 1\n"
             "print(n, r)' '%s' '%s'",
             py, h_path(name), c->name);
    FILE *p = popen(cmd, "r");
    H_CHECK(p != NULL, "popen: %s", strerror(errno));
    int n = -1, r = -1;
    int got = fscanf(p, "%d %d", &n, &r);
    int st = pclose(p);
    H_CHECK(got == 2 && st == 0,
            "prometheus_client could not parse %s (status %d): %s", name, st,
            h_read_file(name));
    *count = n;
    *running = r;
}

/* A loopback port free now (the kernel's pick). */
static int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    H_CHECK(s >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    H_CHECK(bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
                getsockname(s, (struct sockaddr *)&a, &len) == 0,
            "bind: %s", strerror(errno));
    close(s);
    return ntohs(a.sin_port);
}

/* GET /metrics from 127.0.0.1:PORT into the work dir's file NAME (the
 * body only); fails unless the answer is 200. */
static void scrape(int port, const char *name) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    H_CHECK(s >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    H_CHECK(connect(s, (struct sockaddr *)&a, sizeof a) == 0,
            "connect to the listener: %s", strerror(errno));
    const char *req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    H_CHECK(write(s, req, strlen(req)) == (ssize_t)strlen(req),
            "sending the request");
    static char buf[1 << 20];
    size_t len = 0;
    ssize_t r;
    while (len + 1 < sizeof buf &&
           (r = read(s, buf + len, sizeof buf - len - 1)) > 0)
        len += (size_t)r;
    close(s);
    buf[len] = '\0';
    char *body = strstr(buf, "\r\n\r\n");
    H_CHECK(strncmp(buf, "HTTP/1.0 200", 12) == 0 ||
                strncmp(buf, "HTTP/1.1 200", 12) == 0,
            "the listener answered: %.200s", buf);
    H_CHECK(body != NULL, "no body in the answer");
    h_write_file(name, body + 4);
}

/* Waits (30 s at most: the textfile is written every second) until the
 * textfile and the listener both show C running (want 1) or show no
 * series of C at all (want 0). */
static void wait_metrics(pid_t pid, int port, const conn *c, int want) {
    int64_t t0 = h_now_ms();
    for (;;) {
        fail_if_exited(pid, "run.log");
        int fn, fr, ln, lr;
        /* Copied first: the parser reads one whole version of it. */
        h_write_file("file.prom", h_read_file("metrics.prom"));
        samples("file.prom", c, &fn, &fr);
        scrape(port, "listener.prom");
        samples("listener.prom", c, &ln, &lr);
        int ok = want ? fr == 1 && lr == 1 : fn == 0 && ln == 0;
        if (ok) {
            h_step("%s: textfile %d series, listener %d series%s", c->name, fn,
                   ln, want ? ", RUNNING in both" : "");
            return;
        }
        if (h_now_ms() - t0 > 30000) {
            h_dump_log("run.log");
            h_fail("%s: after 30 s the textfile has %d series (RUNNING: %d) "
                   "and the listener %d (RUNNING: %d); expected %s",
                   c->name, fn, fr, ln, lr,
                   want ? "RUNNING in both" : "no series in either");
        }
        h_sleep_ms(250);
    }
}

/* A process runs a config directory with the metrics textfile and the
 * listener; connector b is added by a reload, then a removed by another. */
static void scenario_metrics_follow_reload(void) {
    conn a, b;
    conn_init(&a, "a");
    conn_init(&b, "b");
    const char *dir = conf_dir();
    write_conf(&a, NULL);
    int port = free_port();
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    const char *args[] = {"--metrics-file",
                          h_path("metrics.prom"),
                          "--metrics-interval-s",
                          "1",
                          "--metrics-listen",
                          listen,
                          dir,
                          NULL};
    pid_t pid = h_spawn_many(args, "run.log", NULL);
    wait_claimed(pid, &a, "run.log");
    wait_metrics(pid, port, &a, 1);

    h_step("b added, SIGHUP");
    write_conf(&b, NULL);
    H_CHECK(kill(pid, SIGHUP) == 0, "kill: %s", strerror(errno));
    wait_log(pid, "run.log", "SIGHUP: reload 1 done", 60000);
    wait_claimed(pid, &b, "run.log");
    wait_metrics(pid, port, &b, 1);

    h_step("a removed, SIGHUP");
    remove_conf(&a);
    H_CHECK(kill(pid, SIGHUP) == 0, "kill: %s", strerror(errno));
    wait_log(pid, "run.log", "SIGHUP: reload 2 done", 60000);
    wait_metrics(pid, port, &a, 0);
    wait_metrics(pid, port, &b, 1);
    /* `tidemark status` reads every connector of the state directory:
     * the removed one is there, but not as RUNNING. */
    const char *sargs[] = {"status",   "--state-dir", h_path("state"),
                           "--format", "prometheus",  NULL};
    int rc = h_tidemark("status.prom", sargs);
    /* 2: a connector of the directory STOPPED. */
    H_CHECK(rc == 2, "tidemark status exits %d, expected 2: %s", rc,
            h_read_file("status.prom"));
    int an, ar, bn, br;
    samples("status.prom", &a, &an, &ar);
    samples("status.prom", &b, &bn, &br);
    H_CHECK(ar == 0 && br == 1,
            "status --format prometheus: removed %s RUNNING %d, %s RUNNING "
            "%d:\n%s",
            a.name, ar, b.name, br, h_read_file("status.prom"));
    h_step("status --format prometheus: %s not RUNNING, %s RUNNING", a.name,
           b.name);
    h_stop_clean(pid);
}

/* Two connectors in one consumer group: refused by run at start with
 * validate's own line, and refused by a reload that would add the second
 * one, which then changes nothing. */
static void scenario_run_cross_check(void) {
    conn a, b;
    conn_init(&a, "a");
    conn_init(&b, "b");
    const char *dir = conf_dir();
    char group[160];
    snprintf(group, sizeof group, "%s", h_name("ops3-shared"));
    write_conf(&a, group);
    write_conf(&b, group);

    const char *vargs[] = {"validate", "--", h_path("conf/a.json"),
                           h_path("conf/b.json"), NULL};
    int rc = h_tidemark("validate.out", vargs);
    const char *want = "b.json: $.kafka.group_id: expected a consumer group";
    H_CHECK(rc == 2 && strstr(h_read_file("validate.out"), want),
            "inconclusive: validate exits %d, expected 2 with '%s': %s", rc,
            want, h_read_file("validate.out"));

    h_step("run with both: refused at start");
    const char *args[] = {dir, NULL};
    pid_t pid = h_spawn_many(args, "start.log", NULL);
    int64_t took;
    int64_t t0 = h_now_ms();
    /* Until it exits (not reaped: h_stop takes its status) or 30 s. */
    for (;;) {
        siginfo_t info = {0};
        if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            info.si_pid == pid)
            break;
        if (h_now_ms() - t0 > 30000)
            break;
        h_sleep_ms(100);
    }
    int st = h_stop(pid, SIGTERM, 15000, &took);
    H_CHECK(st == 2 && strstr(h_read_file("start.log"), want),
            "run with two connectors in group %s: exit %d, expected 2 with "
            "'%s'; its output:\n%s",
            group, st, want, h_read_file("start.log"));
    H_CHECK(epoch(&a) < 0 && epoch(&b) < 0,
            "run refused the configs, yet a connector claimed (a %lld, b "
            "%lld)",
            (long long)epoch(&a), (long long)epoch(&b));

    h_step("run with a alone, then b added: the reload refused");
    remove_conf(&b);
    pid = h_spawn_many(args, "run.log", NULL);
    wait_claimed(pid, &a, "run.log");
    int64_t ea = epoch(&a);
    write_conf(&b, group);
    H_CHECK(kill(pid, SIGHUP) == 0, "kill: %s", strerror(errno));
    wait_log(pid, "run.log", "reload 1 refused", 30000);
    H_CHECK(strstr(h_read_file("run.log"), want),
            "the refused reload does not say '%s':\n%s", want,
            h_read_file("run.log"));
    /* The next reload is taken only after this one: its lines say the
     * first changed nothing before b is judged. */
    remove_conf(&b);
    H_CHECK(kill(pid, SIGHUP) == 0, "kill: %s", strerror(errno));
    wait_log(pid, "run.log", "SIGHUP: reload 2 done", 30000);
    H_CHECK(epoch(&b) < 0, "b claimed (epoch %lld) by a refused reload",
            (long long)epoch(&b));
    H_CHECK(epoch(&a) == ea, "a claimed again (epoch %lld, was %lld)",
            (long long)epoch(&a), (long long)ea);
    H_CHECK(!strstr(h_read_file("run.log"), "reload 1 done"),
            "the refused reload 1 acted:\n%s", h_read_file("run.log"));
    h_stop_clean(pid);
}

/* ---- pause across a rebalance: two hosts in one group ---- */

#define NP 4

static int64_t next_offset(const conn *c, int part) {
    return h_sqlf(c->db,
                  "SELECT next_offset FROM tidemark_markers WHERE connector = "
                  "'%s' AND topic = '%s' AND \"partition\" = %d",
                  c->name, c->topic, part);
}

static int64_t high(const conn *c, int part) {
    int64_t lo, hi;
    h_watermarks(c->topic, part, &lo, &hi);
    return hi;
}

/* Waits until the markers of the partitions in mask (bit p: partition p)
 * are at Kafka's high watermark. */
static void wait_caught_up_mask(pid_t pid, const char *log, const conn *c,
                                unsigned mask) {
    int64_t t0 = h_now_ms();
    for (int part = 0; part < NP; part++) {
        if (!(mask & (1u << part)))
            continue;
        int64_t hi = high(c, part);
        while (next_offset(c, part) != hi) {
            fail_if_exited(pid, log);
            H_CHECK(h_now_ms() - t0 < 60000,
                    "%s [%d]: marker at %lld, high watermark %lld", c->name,
                    part, (long long)next_offset(c, part), (long long)hi);
            h_sleep_ms(100);
        }
    }
}

/* The group.instance.id the host of state directory SD joins with. */
static void instance_of(const char *sd, const conn *c, char *out, size_t size) {
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s/member.id", sd, c->name);
    const char *t = h_read_file(rel);
    H_CHECK(sscanf(t, "%159s", out) == 1 && size > 0,
            "no member id in %s: '%s'", rel, t);
}

/* The partitions (mask) the group gives to member INST, once the group
 * has MEMBERS members and every partition an owner. */
static unsigned owned_by(const char *group, const conn *c, int members,
                         const char *inst) {
    char owners[NP][H_OWNER_MAX];
    int64_t t0 = h_now_ms();
    for (;;) {
        int n = h_group_owners(group, c->topic, NP, owners);
        int all = n == members;
        for (int part = 0; part < NP; part++)
            all = all && owners[part][0];
        if (all) {
            unsigned mask = 0;
            for (int part = 0; part < NP; part++)
                if (strcmp(owners[part], inst) == 0)
                    mask |= 1u << part;
            return mask;
        }
        H_CHECK(h_now_ms() - t0 < 60000,
                "group %s: not %d members owning every partition in 60 s "
                "(%d members)",
                group, members, n);
        h_sleep_ms(200);
    }
}

static void wait_paused(pid_t pid, const char *sd, const conn *c) {
    char rel[512];
    snprintf(rel, sizeof rel, "%s/%s/status.json", sd, c->name);
    int64_t t0 = h_now_ms();
    while (!strstr(h_read_file(rel), "\"state\": \"PAUSED\"")) {
        fail_if_exited(pid, "run1.log");
        H_CHECK(h_now_ms() - t0 < 60000, "%s not PAUSED in 60 s: %s", c->name,
                h_read_file(rel));
        h_sleep_ms(100);
    }
}

/* A paused host keeps its pause through the rebalances a second member of
 * its group causes: it commits nothing on the partitions it keeps while
 * the other applies its own; when the other leaves and every partition
 * comes to the paused host, they stay paused too (markers still, records
 * waiting); resumed, every record is applied once. */
static void scenario_pause_rebalance(void) {
    conn a;
    conn_init_parts(&a, "a", NP);
    const char *dir = conf_dir();
    write_conf(&a, NULL);
    char group[200];
    snprintf(group, sizeof group, "tidemark-%s", a.name);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < NP; part++)
        h_produce_many(p, a.topic, part, 0, 20, "{\"id\": %d}");
    const char *args1[] = {"--state-dir", h_path("s1"), dir, NULL};
    pid_t h1 = h_spawn_many(args1, "run1.log", NULL);
    wait_caught_up_mask(h1, "run1.log", &a, (1u << NP) - 1);
    char inst1[H_OWNER_MAX], inst2[H_OWNER_MAX];
    instance_of("s1", &a, inst1, sizeof inst1);

    const char *pargs[] = {"pause", "--state-dir", h_path("s1"), a.name, NULL};
    int rc = h_tidemark("pause.out", pargs);
    H_CHECK(rc == 0, "pause: exit %d: %s", rc, h_read_file("pause.out"));
    wait_paused(h1, "s1", &a);
    for (int part = 0; part < NP; part++)
        h_produce_many(p, a.topic, part, 20, 20, "{\"id\": %d}");
    h_step("host 1 paused at 20 records a partition; 20 more produced");

    const char *args2[] = {"--state-dir", h_path("s2"), dir, NULL};
    pid_t h2 = h_spawn_many(args2, "run2.log", NULL);
    unsigned m1 = 0;
    /* The member ids are known once host 2 joined. */
    int64_t t0 = h_now_ms();
    while (!strstr(h_read_file("run2.log"), "static group member")) {
        fail_if_exited(h2, "run2.log");
        H_CHECK(h_now_ms() - t0 < 60000, "host 2 never joined");
        h_sleep_ms(100);
    }
    instance_of("s2", &a, inst2, sizeof inst2);
    unsigned m2;
    for (;;) {
        m1 = owned_by(group, &a, 2, inst1);
        m2 = owned_by(group, &a, 2, inst2);
        /* A cooperative rebalance moves partitions in two steps. */
        if ((m1 | m2) == (1u << NP) - 1 && !(m1 & m2) && m1 && m2)
            break;
        H_CHECK(h_now_ms() - t0 < 60000,
                "inconclusive: after 60 s the group gives host 1 %#x and "
                "host 2 %#x, not both a share",
                m1, m2);
        h_sleep_ms(200);
    }
    wait_caught_up_mask(h2, "run2.log", &a, m2);
    h_step("host 2 joined: it applied its partitions %#x; host 1 keeps %#x", m2,
           m1);
    /* A non-event over a span of time (many batches' max_wait_ms): the
     * paused host commits nothing on what it kept. */
    h_sleep_ms(3000);
    for (int part = 0; part < NP; part++)
        if (m1 & (1u << part))
            H_CHECK(next_offset(&a, part) == 20 && high(&a, part) == 40,
                    "[%d] kept by the paused host 1: marker %lld, expected "
                    "20 (high watermark %lld)",
                    part, (long long)next_offset(&a, part),
                    (long long)high(&a, part));
    h_step("3 s later host 1 committed nothing on %#x", m1);

    h_stop_clean(h2);
    /* A static member's partitions come back after the session timeout. */
    H_CHECK(owned_by(group, &a, 1, inst1) == (1u << NP) - 1,
            "host 1 does not own every partition after host 2 left");
    int64_t before[NP];
    for (int part = 0; part < NP; part++) {
        before[part] = next_offset(&a, part);
        h_produce_many(p, a.topic, part, 40, 20, "{\"id\": %d}");
    }
    h_step("host 2 left: host 1 owns every partition; 20 more produced");
    h_sleep_ms(3000);
    for (int part = 0; part < NP; part++) {
        int64_t now = next_offset(&a, part);
        H_CHECK(now == before[part] && now < high(&a, part),
                "[%d] assigned to the paused host 1 by the rebalance: marker "
                "%lld, was %lld (high watermark %lld): committed while paused",
                part, (long long)now, (long long)before[part],
                (long long)high(&a, part));
    }
    wait_paused(h1, "s1", &a); /* at once: it still is */
    h_step("3 s later host 1 committed nothing on any partition, PAUSED");

    const char *rargs[] = {"resume", "--state-dir", h_path("s1"), a.name, NULL};
    rc = h_tidemark("resume.out", rargs);
    H_CHECK(rc == 0, "resume: exit %d: %s", rc, h_read_file("resume.out"));
    wait_caught_up_mask(h1, "run1.log", &a, (1u << NP) - 1);
    h_stop_clean(h1);
    rd_kafka_destroy(p);
    for (int part = 0; part < NP; part++) {
        int64_t rows = h_sqlf(
            a.db, "SELECT count(*) FROM t WHERE _tm_partition = %d", part);
        int64_t distinct = h_sqlf(a.db,
                                  "SELECT count(DISTINCT _tm_offset) FROM t "
                                  "WHERE _tm_partition = %d AND _tm_offset "
                                  "BETWEEN 0 AND 59",
                                  part);
        H_CHECK(rows == 60 && distinct == 60,
                "[%d] %lld rows, %lld distinct offsets 0..59: expected 60",
                part, (long long)rows, (long long)distinct);
    }
    h_step("resumed: 60 records a partition, each applied once");
}

/* `tidemark validate DIR` checks the directory's *.json files as `run
 * DIR` would run them: each one, then together; a directory without any
 * is refused. */
static void scenario_validate_dir(void) {
    conn a, b;
    conn_init(&a, "a");
    conn_init(&b, "b");
    const char *dir = conf_dir();
    write_conf(&a, NULL);
    write_conf(&b, NULL);
    /* Not configs of the directory: neither is read. */
    h_write_file("conf/.hidden.json", "{not json");
    h_write_file("conf/notes.txt", "{not json");
    const char *args[] = {"validate", dir, NULL};
    int rc = h_tidemark("ok.out", args);
    const char *out = h_read_file("ok.out");
    char want_a[300], want_b[300];
    snprintf(want_a, sizeof want_a, "%s/a.json: OK (connector \"%s\"", dir,
             a.name);
    snprintf(want_b, sizeof want_b, "%s/b.json: OK (connector \"%s\"", dir,
             b.name);
    H_CHECK(rc == 0 && strstr(out, want_a) && strstr(out, want_b),
            "validate %s: exit %d, expected 0 with '%s' and '%s':\n%s", dir, rc,
            want_a, want_b, out);
    h_step("the directory's two configs valid, the others not read");

    char group[160];
    snprintf(group, sizeof group, "%s", h_name("ops3-shared"));
    write_conf(&a, group);
    write_conf(&b, group);
    rc = h_tidemark("group.out", args);
    out = h_read_file("group.out");
    char want[400];
    snprintf(want, sizeof want,
             "%s/b.json: $.kafka.group_id: expected a consumer group", dir);
    H_CHECK(rc == 2 && strstr(out, want),
            "validate %s with one group twice: exit %d, expected 2 with "
            "'%s':\n%s",
            dir, rc, want, out);
    h_step("one group twice in the directory: refused");

    h_write_file("conf/b.json", "{\"name\": 1}");
    rc = h_tidemark("bad.out", args);
    out = h_read_file("bad.out");
    snprintf(want, sizeof want, "%s/b.json: $.name: expected", dir);
    H_CHECK(rc == 2 && strstr(out, want),
            "validate %s with a bad file: exit %d, expected 2 with "
            "'%s':\n%s",
            dir, rc, want, out);
    h_step("a bad file of the directory: refused by its path");

    remove_conf(&a);
    remove_conf(&b);
    rc = h_tidemark("empty.out", args);
    out = h_read_file("empty.out");
    snprintf(want, sizeof want, "%s: the directory holds no *.json config",
             dir);
    H_CHECK(rc == 2 && strstr(out, want),
            "validate of a directory without configs: exit %d, expected 2 "
            "with '%s':\n%s",
            rc, want, out);
    h_step("a directory without *.json: refused");
}

static const h_scenario SCENARIOS[] = {
    {"metrics_follow_reload", scenario_metrics_follow_reload},
    {"run_cross_check", scenario_run_cross_check},
    {"validate_dir", scenario_validate_dir},
    {"pause_rebalance", scenario_pause_rebalance},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "ops3_e2e", SCENARIOS, H_NSCENARIOS(SCENARIOS));
}
