/* End-to-end tests of the connector core (start policy, exits, signals,
 * stops) against the real broker and the SQLite sink: usage hostcore_e2e
 * TIDEMARK_BIN PLUGIN_DIR SCENARIO. Every expected value comes from what
 * the test produced or from Kafka itself, never from the host's output. */
#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "hostcore_e2e.h"

const char *const JSON_MAPPING =
    "\"mapping\": {\"mode\": \"json\", \"columns\": ["
    "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", "
    "\"required\": true},"
    "{\"name\": \"name\", \"pointer\": \"/name\", \"type\": \"text\"}]}";

/* CreatePartitions: the topic grows to `total` partitions; then waits until
 * a fresh client's metadata shows them (a producer may then write there). */
static void grow_topic(const char *topic, int total) {
    rd_kafka_t *rk = h_producer(NULL, NULL);
    char err[512];
    rd_kafka_NewPartitions_t *np =
        rd_kafka_NewPartitions_new(topic, (size_t)total, err, sizeof err);
    H_CHECK(np, "NewPartitions %s: %s", topic, err);
    rd_kafka_queue_t *qu = rd_kafka_queue_new(rk);
    rd_kafka_CreatePartitions(rk, &np, 1, NULL, qu);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(qu, 30000);
    H_CHECK(ev, "CreatePartitions %s: no answer in 30 s", topic);
    size_t n = 0;
    const rd_kafka_topic_result_t **tr =
        rd_kafka_CreatePartitions_result_topics(
            rd_kafka_event_CreatePartitions_result(ev), &n);
    H_CHECK(!rd_kafka_event_error(ev) && n == 1 &&
                !rd_kafka_topic_result_error(tr[0]),
            "CreatePartitions %s: %s", topic,
            rd_kafka_event_error(ev) ? rd_kafka_event_error_string(ev)
            : n                      ? rd_kafka_topic_result_error_string(tr[0])
                                     : "no result");
    rd_kafka_event_destroy(ev);
    rd_kafka_NewPartitions_destroy(np);
    rd_kafka_queue_destroy(qu);
    int64_t t0 = h_now_ms();
    for (;;) {
        rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
        const struct rd_kafka_metadata *md = NULL;
        int cnt = -1;
        if (t && rd_kafka_metadata(rk, 0, t, &md, 5000) == 0) {
            cnt = md->topic_cnt == 1 ? md->topics[0].partition_cnt : -1;
            rd_kafka_metadata_destroy(md);
        }
        if (t)
            rd_kafka_topic_destroy(t);
        if (cnt == total)
            break;
        H_CHECK(h_now_ms() - t0 < 30000, "%s: %d partitions, expected %d",
                topic, cnt, total);
        h_sleep_ms(100);
    }
    rd_kafka_destroy(rk);
}

/* The offsets stored in the sink for one partition are exactly the
 * offsets Kafka holds from `from` on: each once, none missing, none
 * else. Returns how many. */
static int64_t check_exact(const char *db, const char *topic, int partition,
                           int64_t from) {
    int64_t *off = NULL;
    size_t n = h_read_offsets(topic, partition, &off);
    int64_t want = 0;
    for (size_t i = 0; i < n; i++) {
        if (off[i] < from)
            continue;
        want++;
        int64_t c = h_sqlf(db,
                           "SELECT count(*) FROM t WHERE _tm_topic='%s' AND "
                           "_tm_partition=%d AND _tm_offset=%lld",
                           topic, partition, (long long)off[i]);
        H_CHECK(c == 1, "%s [%d] offset %lld stored %lld times (expected 1)",
                topic, partition, (long long)off[i], (long long)c);
    }
    free(off);
    int64_t stored = h_sqlf(db,
                            "SELECT count(*) FROM t WHERE _tm_topic='%s' AND "
                            "_tm_partition=%d",
                            topic, partition);
    H_CHECK(stored == want,
            "%s [%d]: %lld rows stored, Kafka holds %lld records from "
            "offset %lld",
            topic, partition, (long long)stored, (long long)want,
            (long long)from);
    return want;
}

/* start=latest skips only what was in the logs when the connector first
 * started: partitions added to a topic and a topic created (matched by the
 * regex) while it runs are read from their beginning, and every record
 * produced after the start is stored exactly once. */
static void scenario_latest_grows(void) {
    char ta[256], tb[256], name[256], re[300];
    snprintf(ta, sizeof ta, "%s", h_name("hc-ga"));
    snprintf(tb, sizeof tb, "%s", h_name("hc-gb"));
    snprintf(name, sizeof name, "%s", h_name("hc-latest"));
    h_create_topic(ta, 2, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < 2; part++)
        h_produce_many(p, ta, part, 0, 30, "{\"id\": %d, \"name\": \"old\"}");
    const char *db = h_path("latest.db");
    /* "hc-ga-<run id>" and, later, "hc-gb-<run id>". */
    snprintf(re, sizeof re, "^hc-g[ab]%s$", ta + 5);
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": "
             "\"%s\", \"topic_regex\": \"%s\", \"start\": \"latest\", "
             "\"properties\": {\"topic.metadata.refresh.interval.ms\": "
             "\"1000\"}}, \"batch\": {\"max_wait_ms\": 100}, "
             "\"sink\": {\"plugin\": \"sqlite\", \"settings\": "
             "{\"path\": \"%s\", \"table\": \"t\"}}, \"state_dir\": "
             "\"%s/state\", %s}",
             name, h_bootstrap(), re, db, h_workdir(), JSON_MAPPING);
    const char *cfg = h_write_file("latest.json", text);
    pid_t pid = h_spawn(cfg, "latest.log");
    int64_t t0 = h_now_ms();
    while (h_sqlf(db, "SELECT count(*) FROM tidemark_markers") < 2) {
        H_CHECK(h_now_ms() - t0 < 60000, "the first partitions were not "
                                         "claimed within 60 s");
        h_sleep_ms(50);
    }
    for (int part = 0; part < 2; part++)
        H_CHECK(h_sqlf(db,
                       "SELECT next_offset FROM tidemark_markers WHERE "
                       "topic='%s' AND \"partition\"=%d",
                       ta, part) == 30,
                "start=latest: %s [%d] did not start at its end (30)", ta,
                part);
    h_step("first start: both partitions claimed at their end (30)");
    for (int part = 0; part < 2; part++)
        h_produce_many(p, ta, part, 100 * (part + 1), 50,
                       "{\"id\": %d, \"name\": \"new\"}");

    /* Grown while running: records go into the new partitions before the
     * host has seen them. The host is held (SIGSTOP) meanwhile: with only
     * its metadata refresh (a second) to race, a loaded machine let it
     * claim them first ("inconclusive" below, in CI under the
     * sanitizers). Held for seconds, far inside its session timeout. */
    H_CHECK(kill(pid, SIGSTOP) == 0, "SIGSTOP the host: %s", strerror(errno));
    grow_topic(ta, 4);
    rd_kafka_t *p2 = h_producer(NULL, NULL);
    for (int part = 2; part < 4; part++)
        h_produce_many(p2, ta, part, 1000 * part, 50,
                       "{\"id\": %d, \"name\": \"added\"}");
    h_create_topic(tb, 1, NULL, NULL);
    h_produce_many(p2, tb, 0, 5000, 60, "{\"id\": %d, \"name\": \"created\"}");
    H_CHECK(kill(pid, SIGCONT) == 0, "SIGCONT the host: %s", strerror(errno));
    /* Inconclusive unless the records were there before the host claimed
     * the new partitions: a claim after the records is the loss case. */
    int64_t claimed_new =
        h_sqlf(db,
               "SELECT count(*) FROM tidemark_markers WHERE "
               "(topic='%s' AND \"partition\">=2) OR topic='%s'",
               ta, tb);
    H_CHECK(claimed_new < 3,
            "inconclusive: the host claimed every new partition before the "
            "records were produced");
    h_step("grown to 4 partitions, 2 x 50 records; %s created, 60 records; "
           "%lld of the 3 new partitions claimed so far",
           tb, (long long)claimed_new);

    h_wait_caught_up(db, name, ta, 4, 90000);
    h_wait_caught_up(db, name, tb, 1, 90000);
    int64_t total = 0;
    for (int part = 0; part < 4; part++)
        total += check_exact(db, ta, part, part < 2 ? 30 : 0);
    total += check_exact(db, tb, 0, 0);
    H_CHECK(total == 2 * 50 + 2 * 50 + 60,
            "%lld records after the start stored, produced %d",
            (long long)total, 2 * 50 + 2 * 50 + 60);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t WHERE name='old'") == 0,
            "records from before the first start were read");
    h_step("every one of the %lld records produced after the start stored "
           "once",
           (long long)total);
    h_stop_clean(pid);
    rd_kafka_destroy(p2);
    rd_kafka_destroy(p);
}

/* A SQLite connector config on one topic; plugin, extra sink settings and
 * Kafka properties spliced in as given. */
static const char *config(const char *file, const char *name, const char *topic,
                          const char *plugin, const char *settings_extra,
                          const char *props) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "\"topics\": [\"%s\"], \"properties\": {%s}}, \"batch\": "
             "{\"max_wait_ms\": 100}, \"sink\": {\"plugin\": \"%s\", "
             "\"settings\": {\"path\": \"%s/%s.db\", \"table\": \"t\"%s}}, "
             "\"state_dir\": \"%s/state\", %s}",
             name, h_bootstrap(), topic, props, plugin, h_workdir(), file,
             settings_extra, h_workdir(), JSON_MAPPING);
    char fname[300];
    snprintf(fname, sizeof fname, "%s.json", file);
    return h_write_file(fname, text);
}

/* A connector whose sink's marker is below its topic's log start: 20
 * records applied, the host stopped, 20 more produced and the log cut at
 * 30 (DeleteRecords, as retention would): its next claim FAILS for good
 * (records were lost before they were applied; the operator decides).
 * Returns the config's path. */
static const char *below_log_start(const char *file, const char *name) {
    char topic[256];
    snprintf(topic, sizeof topic, "%s", h_name(file));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 20, "{\"id\": %d}");
    const char *cfg = config(file, name, topic, "sqlite", "", "");
    char db[4200], log[300];
    snprintf(db, sizeof db, "%s/%s.db", h_workdir(), file);
    snprintf(log, sizeof log, "%s-setup.log", file);
    pid_t pid = h_spawn(cfg, log);
    h_wait_caught_up(db, name, topic, 1, 60000);
    H_CHECK(h_stop(pid, SIGTERM, 15000, NULL) == 0, "%s: setup stop", file);
    h_produce_many(p, topic, 0, 20, 20, "{\"id\": %d}");
    h_delete_records(topic, 0, 30);
    rd_kafka_destroy(p);
    return cfg;
}

/* What a config refuses never starts (`run` checks each config as
 * validate does: exit 2, the reason on stderr, no status file); a process
 * whose every connector FAILED while running exits 1 by itself (a service
 * manager restarts it) with FAILED and the reason in the status file; one
 * with a healthy connector beside a failed one keeps running. */
static void scenario_all_failed_exit(void) {
    char topic[256]; /* h_name's buffers are reused after 8 calls */
    snprintf(topic, sizeof topic, "%s", h_name("hc-fail"));
    h_create_topic(topic, 1, NULL, NULL);
    static const struct {
        const char *what, *plugin, *settings, *props, *reason;
    } cases[] = {
        {"unloadable plugin", "hc-no-such-plugin", "", "", "hc-no-such-plugin"},
        {"unknown sink setting", "sqlite", ", \"no_such_setting\": 1", "",
         "no_such_setting"},
        {"session.timeout.ms abc", "sqlite", "",
         "\"session.timeout.ms\": \"abc\"", "session.timeout.ms"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char file[64], name[256], log[64];
        snprintf(file, sizeof file, "fail%zu", i);
        snprintf(log, sizeof log, "fail%zu.log", i);
        snprintf(name, sizeof name, "%s", h_name(file));
        const char *cfg = config(file, name, topic, cases[i].plugin,
                                 cases[i].settings, cases[i].props);
        pid_t pid = h_spawn(cfg, log);
        int64_t took;
        int rc = h_stop(pid, 0, 30000, &took);
        H_CHECK(rc == 2, "%s: exit %d, expected 2 (an invalid config)",
                cases[i].what, rc);
        H_CHECK(strstr(h_read_file(log), cases[i].reason) != NULL,
                "%s: stderr does not name '%s': %s", cases[i].what,
                cases[i].reason, h_read_file(log));
        H_CHECK(h_status_text(name)[0] == '\0',
                "%s: refused at start, yet a status file: %s", cases[i].what,
                h_status_text(name));
        h_step("%s: refused at start, exit 2 after %lld ms", cases[i].what,
               (long long)took);
    }

    char gone[256];
    snprintf(gone, sizeof gone, "%s", h_name("hc-gone"));
    const char *cgone = below_log_start("gone", gone);
    pid_t pid = h_spawn(cgone, "gone.log");
    int64_t took;
    int rc = h_stop(pid, 0, 30000, &took);
    H_CHECK(rc == 1,
            "every connector FAILED while running: exit %d, "
            "expected 1",
            rc);
    const char *st = h_status_text(gone);
    H_CHECK(strstr(st, "\"FAILED\"") && strstr(st, "log start"),
            "the status file does not say FAILED with 'log start': %s", st);
    h_step("the only connector FAILED at its claim (marker below the log "
           "start): exit 1 after %lld ms, status FAILED",
           (long long)took);

    /* One FAILED beside one RUNNING: the process stays for the healthy
     * one, which reaches the end of its topic. */
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 20, "{\"id\": %d}");
    char good[256], bad[256];
    snprintf(good, sizeof good, "%s", h_name("hc-good"));
    snprintf(bad, sizeof bad, "%s", h_name("hc-bad"));
    const char *cg = config("good", good, topic, "sqlite", "", "");
    const char *cb = below_log_start("bad", bad);
    pid = h_spawn2(cg, cb, "mixed.log");
    char db[4200];
    snprintf(db, sizeof db, "%s/good.db", h_workdir());
    h_wait_caught_up(db, good, topic, 1, 60000);
    int64_t t0 = h_now_ms();
    while (!strstr(h_status_text(bad), "\"FAILED\"")) {
        H_CHECK(h_now_ms() - t0 < 30000, "the bad connector is not FAILED");
        h_sleep_ms(50);
    }
    H_CHECK(waitpid(pid, NULL, WNOHANG) == 0,
            "the process exited although a connector was healthy");
    rc = h_stop(pid, SIGTERM, 15000, &took);
    H_CHECK(rc == 1, "SIGTERM with a FAILED connector: exit %d, expected 1",
            rc);
    h_step("one healthy, one FAILED: kept running; SIGTERM: exit 1");
    rd_kafka_destroy(p);
}

/* `tidemark run CONFIG` with stderr and stdout into a pipe (its read end
 * returned in *rfd) and the log level at debug: a line per commit. */
static pid_t spawn_piped(const char *cfg, int *rfd) {
    int fds[2];
    H_CHECK(pipe(fds) == 0, "pipe failed");
    pid_t pid = fork();
    H_CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        setenv("TIDEMARK_LOG_LEVEL", "debug", 1);
        const char *bin = getenv("HC_TIDEMARK_BIN");
        execl(bin, bin, "run", cfg, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    *rfd = fds[0];
    return pid;
}

static void wait_log_text(const char *log, const char *text, int timeout_ms) {
    int64_t t0 = h_now_ms();
    while (!strstr(h_read_file(log), text)) {
        H_CHECK(h_now_ms() - t0 < timeout_ms, "no '%s' in %s within %d ms",
                text, log, timeout_ms);
        h_sleep_ms(50);
    }
}

/* Waits until the marker of topic [0] reaches the high watermark while the
 * host lives; a host that dies meanwhile fails the test with how it died. */
static void wait_caught_up_alive(pid_t pid, const char *db, const char *name,
                                 const char *topic) {
    int64_t t0 = h_now_ms();
    for (;;) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            h_fail("the host died: %s %d",
                   WIFSIGNALED(st) ? "killed by signal" : "exit status",
                   WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        int64_t lo, hi;
        h_watermarks(topic, 0, &lo, &hi);
        if (h_sqlf(db,
                   "SELECT next_offset FROM tidemark_markers WHERE "
                   "connector='%s' AND topic='%s'",
                   name, topic) == hi)
            return;
        H_CHECK(h_now_ms() - t0 < 30000, "%s [0] not caught up in 30 s", topic);
        h_sleep_ms(50);
    }
}

/* A log reader that goes away (`tidemark run ... 2>&1 | head -1`) must not
 * kill the host: writes get EPIPE and it goes on. SIGHUP and SIGUSR1 are
 * logged and change nothing. Each proven by records applied after it. */
static void scenario_signals(void) {
    const char *topic = h_name("hc-sig");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("hc-sig"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    const char *cfg = config("sig", name, topic, "sqlite", "", "");
    char db[4200];
    snprintf(db, sizeof db, "%s/sig.db", h_workdir());

    int rfd;
    pid_t pid = spawn_piped(cfg, &rfd);
    char c;
    while (read(rfd, &c, 1) == 1 && c != '\n')
        ; /* the first line, as head -1 reads it */
    close(rfd);
    h_produce_many(p, topic, 0, 0, 50, "{\"id\": %d}");
    wait_caught_up_alive(pid, db, name, topic);
    /* Inconclusive unless lines were written after the reader left: at
     * debug every commit logs one. */
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 50, "rows: expected 50");
    H_CHECK(waitpid(pid, NULL, WNOHANG) == 0,
            "the host exited after its log reader closed");
    h_stop_clean(pid);
    h_step("log pipe closed: 50 records applied after, exit 0 on SIGTERM");

    pid = h_spawn(cfg, "sig.log");
    static const struct {
        int sig;
        const char *name;
    } sigs[] = {{SIGHUP, "SIGHUP"}, {SIGUSR1, "SIGUSR1"}};
    for (int i = 0; i < 2; i++) {
        wait_log_text("sig.log", "claimed:", 30000);
        kill(pid, sigs[i].sig);
        h_produce_many(p, topic, 0, 100 * (i + 1), 10, "{\"id\": %d}");
        wait_caught_up_alive(pid, db, name, topic);
        wait_log_text("sig.log", sigs[i].name, 10000);
        H_CHECK(waitpid(pid, NULL, WNOHANG) == 0, "%s ended the host",
                sigs[i].name);
        h_step("%s: logged, 10 more records applied", sigs[i].name);
    }
    h_stop_clean(pid);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 70 &&
                h_sqlf(db, "SELECT count(DISTINCT _tm_offset) FROM t") == 70,
            "rows: expected 70 distinct offsets");
    rd_kafka_destroy(p);
}

/* SIGTERM while the claim waits for a SQLite write lock the test holds
 * (busy_timeout_ms 60000): the stop interrupts the sink, exits 0 within
 * the documented 10 s, and the status file says STOPPED, not FAILED;
 * nothing moved, and a restart without the lock applies everything once. */
/* The config written as FILE.json by config(), made a dynamic member
 * ($.kafka.static_membership false): for a scenario that reads "the
 * restarted host was given the partition" off the group description,
 * which a static member's id, outliving its host's stop, cannot tell. */
static const char *dynamic_member(const char *file) {
    char fname[300], text[8192];
    snprintf(fname, sizeof fname, "%s.json", file);
    const char *was = h_read_file(fname);
    const char *at = strstr(was, "\"properties\"");
    H_CHECK(at != NULL, "%s: no properties to put the setting before", fname);
    snprintf(text, sizeof text, "%.*s\"static_membership\": false, %s",
             (int)(at - was), was, at);
    return h_write_file(fname, text);
}

static void scenario_stop_blocked_claim(void) {
    const char *topic = h_name("hc-stop");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("hc-stop"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 30, "{\"id\": %d}");
    const char *cfg =
        config("stop", name, topic, "sqlite", ", \"busy_timeout_ms\": 60000",
               "\"session.timeout.ms\": \"6000\", "
               "\"heartbeat.interval.ms\": \"500\"");
    cfg = dynamic_member("stop");
    char db[4200];
    snprintf(db, sizeof db, "%s/stop.db", h_workdir());
    pid_t pid = h_spawn(cfg, "stop.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    h_stop_clean(pid);
    int64_t epoch0 = h_sqlf(db, "SELECT epoch FROM tidemark_markers");
    h_produce_many(p, topic, 0, 100, 20, "{\"id\": %d}");

    sqlite3 *lock = NULL;
    H_CHECK(sqlite3_open(db, &lock) == SQLITE_OK &&
                sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL) ==
                    SQLITE_OK,
            "cannot take the write lock: %s", sqlite3_errmsg(lock));
    pid = h_spawn(cfg, "stop.log");
    /* The group gave it the partition: its assign callback is claiming,
     * and the claim waits for the lock (the epoch has not moved). */
    int64_t t0 = h_now_ms();
    char owners[1][H_OWNER_MAX];
    char group[300];
    snprintf(group, sizeof group, "tidemark-%s", name);
    for (;;) {
        owners[0][0] = '\0';
        if (h_group_owners(group, topic, 1, owners) > 0 && owners[0][0])
            break;
        H_CHECK(h_now_ms() - t0 < 60000,
                "inconclusive: the partition was never assigned");
        h_sleep_ms(100);
    }
    H_CHECK(h_sqlf(db, "SELECT epoch FROM tidemark_markers") == epoch0,
            "inconclusive: the claim went through despite the lock");
    int64_t took;
    int rc = h_stop(pid, SIGTERM, 12000, &took);
    H_CHECK(strstr(h_read_file("stop.log"), "claim of 1 partition(s)"),
            "inconclusive: the log does not show the claim in progress");
    H_CHECK(rc == 0, "SIGTERM during a blocked claim: exit %d, expected 0", rc);
    char rel[1024];
    snprintf(rel, sizeof rel, "state/%s/status.json", name);
    const char *st = h_read_file(rel);
    H_CHECK(strstr(st, "\"state\": \"STOPPED\""),
            "the status file does not say STOPPED: %s", st);
    H_CHECK(h_sqlf(db, "SELECT epoch FROM tidemark_markers") == epoch0 &&
                h_sqlf(db, "SELECT next_offset FROM tidemark_markers") == 30,
            "the marker moved while the lock was held");
    h_step("SIGTERM during the blocked claim: exit 0 after %lld ms, STOPPED",
           (long long)took);
    sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(lock);

    pid = h_spawn(cfg, "stop.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    h_stop_clean(pid);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 50 &&
                h_sqlf(db, "SELECT count(DISTINCT _tm_offset) FROM t") == 50,
            "rows: expected 50 distinct offsets");
    rd_kafka_destroy(p);
}

static char proc_state(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' ? rp[2] : '?';
}

/* The status file lists the claimed partitions as soon as they are
 * claimed: the host stops itself (SIGSTOP, fault point before_begin) in
 * its first commit, well within a second of the claim, and the file must
 * already show the partition with its claimed epoch. */
static void scenario_status_on_assign(void) {
    const char *topic = h_name("hc-asg");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("hc-asg"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 10, "{\"id\": %d}");
    const char *cfg = config("asg", name, topic, "sqlite", "", "");
    const char *env[] = {"TIDEMARK_FAULT=before_begin",
                         "TIDEMARK_FAULT_ACTION=stop", NULL};
    pid_t pid = h_spawn_env(cfg, "asg.log", env);
    int64_t t0 = h_now_ms();
    while (proc_state(pid) != 'T') {
        H_CHECK(h_now_ms() - t0 < 60000,
                "inconclusive: the host never stopped at before_begin");
        h_sleep_ms(20);
    }
    char rel[1024], want[512];
    snprintf(rel, sizeof rel, "state/%s/status.json", name);
    const char *st = h_read_file(rel);
    snprintf(want, sizeof want, "\"topic\": \"%s\"", topic);
    int listed = strstr(st, want) && strstr(st, "\"epoch\": 1");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    H_CHECK(listed,
            "the status file does not list the claimed partition (epoch 1) "
            "at the first commit: %s",
            st);
    h_step("claimed partition in the status file before the first commit");
    rd_kafka_destroy(p);
}

/* Waits until `pid` exits by itself (within timeout_ms): its status, or
 * -1 when it still runs (it is killed then). */
static int wait_exit(pid_t pid, int timeout_ms) {
    int64_t t0 = h_now_ms();
    for (;;) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (h_now_ms() - t0 >= timeout_ms) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return -1;
        }
        h_sleep_ms(50);
    }
}

/* The sink loses its marker of a partition under a running host (the
 * markers deleted; with wipe_rows the rows too, as a restore from a
 * backup that predates the partition leaves it): the next commit is
 * refused, and the host must never create a marker again from its own
 * memory (its committed offset): records below it would be lost for good.
 * The connector goes FAILED naming the way out, applies nothing more, and
 * the process, whose only connector it is, exits 1. Returns the config. */
static const char *marker_lost(const char *file, const char *topic,
                               const char *name, int wipe_rows) {
    char db[4200], log[300];
    snprintf(db, sizeof db, "%s/%s.db", h_workdir(), file);
    snprintf(log, sizeof log, "%s.log", file);
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 30, "{\"id\": %d}");
    const char *cfg = config(file, name, topic, "sqlite", "",
                             "\"session.timeout.ms\": \"6000\", "
                             "\"heartbeat.interval.ms\": \"500\"");
    pid_t pid = h_spawn(cfg, log);
    h_wait_caught_up(db, name, topic, 1, 60000);
    sqlite3 *w = NULL;
    H_CHECK(sqlite3_open(db, &w) == SQLITE_OK &&
                sqlite3_busy_timeout(w, 10000) == SQLITE_OK &&
                sqlite3_exec(w,
                             wipe_rows ? "BEGIN; DELETE FROM t; DELETE FROM "
                                         "tidemark_markers; COMMIT"
                                       : "DELETE FROM tidemark_markers",
                             NULL, NULL, NULL) == SQLITE_OK,
            "cannot wipe the sink: %s", sqlite3_errmsg(w));
    sqlite3_close(w);
    h_step("%s under the running host",
           wipe_rows ? "rows and markers wiped" : "markers deleted");
    h_produce_many(p, topic, 0, 100, 20, "{\"id\": %d}");
    rd_kafka_destroy(p);
    /* The old behaviour re-claimed after twice the session timeout (12 s):
     * 60 s without an exit is a host that goes on. */
    int rc = wait_exit(pid, 60000);
    int64_t rows = h_sqlf(db, "SELECT count(*) FROM t");
    int64_t markers = h_sqlf(db, "SELECT count(*) FROM tidemark_markers");
    H_CHECK(
        rows == (wipe_rows ? 0 : 30) && markers == 0,
        "applied after the marker was lost: %lld rows (offsets %lld..%lld), "
        "%lld marker(s) at %lld; the host %s",
        (long long)rows, (long long)h_sqlf(db, "SELECT min(_tm_offset) FROM t"),
        (long long)h_sqlf(db, "SELECT max(_tm_offset) FROM t"),
        (long long)markers,
        (long long)h_sqlf(db, "SELECT max(next_offset) FROM tidemark_markers"),
        rc < 0 ? "ran on for 60 s (killed)" : "exited");
    const char *st = h_status_text(name);
    H_CHECK(strstr(st, "\"state\": \"FAILED\"") &&
                strstr(st, "holds no marker") &&
                strstr(st, "offsets CONFIG --reset-to"),
            "the status file does not say FAILED for the lost marker: %s", st);
    H_CHECK(!strstr(h_read_file(log), "another host claimed it"),
            "the log blames another host for a missing marker");
    H_CHECK(rc == 1,
            "the host exited %d, expected 1 (its only connector "
            "FAILED)",
            rc);
    h_step("FAILED naming the reset, nothing applied, exit 1");
    return cfg;
}

/* Markers deleted under the running host (nothing else holds the
 * partition): FAILED, never re-created at the host's own offset. */
static void scenario_fenced_reclaim(void) {
    char topic[256], name[256];
    snprintf(topic, sizeof topic, "%s", h_name("hc-fen"));
    snprintf(name, sizeof name, "%s", h_name("hc-fen"));
    marker_lost("fen", topic, name, 0);
}

/* Rows and markers wiped on a running host (a restore from a backup that
 * predates the partition): nothing is lost. The connector FAILED; after
 * the operator's reset to 0 a restart applies every record exactly once. */
static void scenario_restore_wiped(void) {
    char topic[256], name[256], spec[300], db[4200];
    snprintf(topic, sizeof topic, "%s", h_name("hc-rst"));
    snprintf(name, sizeof name, "%s", h_name("hc-rst"));
    snprintf(db, sizeof db, "%s/rst.db", h_workdir());
    const char *cfg = marker_lost("rst", topic, name, 1);
    /* The FAILED host was a static member: the group empties once the
     * session timeout (6 s) expired, as docs/operations.md tells the
     * operator to wait before a reset. */
    char group[300];
    snprintf(group, sizeof group, "tidemark-%s", name);
    int64_t t0 = h_now_ms();
    while (h_group_owners(group, topic, 0, NULL) != 0) {
        H_CHECK(h_now_ms() - t0 < 30000,
                "group %s still has a member 30 s after the host exited",
                group);
        h_sleep_ms(200);
    }
    snprintf(spec, sizeof spec, "%s:0=0", topic);
    const char *reset[] = {"offsets", cfg, "--reset-to", spec, NULL};
    int rc = h_tidemark("reset.out", reset);
    H_CHECK(rc == 0, "offsets --reset-to: exit %d\n%s", rc,
            h_read_file("reset.out"));
    pid_t pid = h_spawn(cfg, "rst2.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    h_stop_clean(pid);
    int64_t n = check_exact(db, topic, 0, 0);
    H_CHECK(n == 50, "%lld records in Kafka, produced 50", (long long)n);
    h_step("after the reset: all 50 records applied once");
}

/* How many times `text` occurs in the work dir's file `name`. */
static int count_text(const char *name, const char *text) {
    int n = 0;
    for (const char *at = h_read_file(name); (at = strstr(at, text)); at++)
        n++;
    return n;
}

/* Config of connector `name` in group `group` with its own state dir (two
 * hosts of one connector on this machine), the sink file shared. */
static const char *group_config(const char *file, const char *name,
                                const char *group, const char *topic,
                                const char *dbfile) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "\"topics\": [\"%s\"], \"group_id\": \"%s\", \"properties\": "
             "{\"session.timeout.ms\": \"6000\", \"heartbeat.interval.ms\": "
             "\"500\"}}, \"batch\": {\"max_wait_ms\": 100}, \"sink\": "
             "{\"plugin\": \"sqlite\", \"settings\": {\"path\": \"%s/%s\", "
             "\"table\": \"t\"}}, \"state_dir\": \"%s/state-%s\", %s}",
             name, h_bootstrap(), topic, group, h_workdir(), dbfile,
             h_workdir(), file, JSON_MAPPING);
    char fname[300];
    snprintf(fname, sizeof fname, "%s.json", file);
    return h_write_file(fname, text);
}

/* Hosts a failing check must not leave running (h_fail exits). */
static pid_t live_hosts[2];

static void kill_live_hosts(void) {
    for (size_t i = 0; i < 2; i++)
        if (live_hosts[i] > 0) {
            kill(live_hosts[i], SIGKILL);
            waitpid(live_hosts[i], NULL, 0);
        }
}

/* Two live hosts of one connector in different consumer groups (a renamed
 * group, a rolling deploy) on one sink: the second's claim fences the
 * first, whose group never revokes. Past the bound the fenced one finds
 * the marker still moving and must not claim it back (that fenced the
 * other in turn, for ever, each dropping the other's batches): it says
 * "another live writer" (DEGRADED), at every further bound, and never
 * claims again; every record is stored exactly once. */
static void scenario_two_groups(void) {
    char topic[256], name[256], ga[300], gb[300];
    snprintf(topic, sizeof topic, "%s", h_name("hc-2g"));
    snprintf(name, sizeof name, "%s", h_name("hc-2g"));
    snprintf(ga, sizeof ga, "%s-a", name);
    snprintf(gb, sizeof gb, "%s-b", name);
    char db[4200];
    snprintf(db, sizeof db, "%s/2g.db", h_workdir());
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 30, "{\"id\": %d}");
    const char *cfg_a = group_config("2ga", name, ga, topic, "2g.db");
    H_CHECK(atexit(kill_live_hosts) == 0, "atexit failed");
    pid_t a = h_spawn(cfg_a, "2ga.log");
    live_hosts[0] = a;
    h_wait_caught_up(db, name, topic, 1, 60000);
    const char *cfg_b = group_config("2gb", name, gb, topic, "2g.db");
    pid_t b = h_spawn(cfg_b, "2gb.log");
    live_hosts[1] = b;
    /* Records keep coming, so whoever holds the partition keeps
     * committing; until the fenced host has looked twice (two bounds). */
    const char *live = "another live writer";
    int id = 100;
    int64_t t0 = h_now_ms();
    while (count_text("2ga.log", live) + count_text("2gb.log", live) < 2) {
        H_CHECK(h_now_ms() - t0 < 90000,
                "no host said '%s' twice in 90 s: A fenced %d, B fenced %d, "
                "claimed again by A %d, by B %d",
                live, count_text("2ga.log", "fenced: epoch"),
                count_text("2gb.log", "fenced: epoch"),
                count_text("2ga.log", "claiming it again"),
                count_text("2gb.log", "claiming it again"));
        h_produce_many(p, topic, 0, id++, 1, "{\"id\": %d}");
        h_sleep_ms(100);
    }
    int fenced = count_text("2ga.log", "fenced: epoch") +
                 count_text("2gb.log", "fenced: epoch");
    H_CHECK(fenced >= 1, "inconclusive: neither host was fenced");
    int again = count_text("2ga.log", "claiming it again") +
                count_text("2gb.log", "claiming it again");
    H_CHECK(again == 0, "a fenced host claimed the partition back %d time(s)",
            again);
    h_step("the fenced host left the live writer alone (%d fence(s), said "
           "'%s' at two bounds)",
           fenced, live);
    char rel[1024];
    snprintf(rel, sizeof rel, "state-%s/%s/status.json",
             count_text("2ga.log", live) ? "2ga" : "2gb", name);
    const char *st = h_read_file(rel);
    H_CHECK(strstr(st, "\"state\": \"DEGRADED\"") && strstr(st, live),
            "the fenced host's status does not say DEGRADED for the other "
            "writer: %s",
            st);
    h_wait_caught_up(db, name, topic, 1, 60000);
    int rc_b = h_stop(b, SIGTERM, 15000, NULL);
    int rc_a = h_stop(a, SIGTERM, 15000, NULL);
    live_hosts[0] = live_hosts[1] = 0;
    H_CHECK(rc_a == 0 && rc_b == 0,
            "exits: A %d, B %d (expected 0: DEGRADED "
            "is not FAILED)",
            rc_a, rc_b);
    int64_t n = check_exact(db, topic, 0, 0);
    H_CHECK(n == 30 + (id - 100), "%lld records in Kafka, produced %d",
            (long long)n, 30 + (id - 100));
    h_step("all %lld records stored exactly once", (long long)n);
    rd_kafka_destroy(p);
}

/* How long the status file says the connector has waited in the sink's
 * commit (now less its waiting.since_ms), -1 when it waits on nothing of
 * the kind. The file is rewritten meanwhile (the status pulse), at most
 * STATUS_FRESH_MS old. */
#define STATUS_FRESH_MS 2000
static int64_t commit_waited_ms(const char *connector) {
    const char *st = h_status_text(connector);
    const char *at = strstr(st, "\"updated_ms\": ");
    const char *on = strstr(st, "\"on\": \"the sink's commit of batch");
    const char *since = on ? strstr(on, "\"since_ms\": ") : NULL;
    if (!at || !since)
        return -1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    int64_t age = now - strtoll(at + strlen("\"updated_ms\": "), NULL, 10);
    H_CHECK(age <= STATUS_FRESH_MS,
            "the status file is %lld ms old while the commit waits "
            "(expected at most %d): %s",
            (long long)age, STATUS_FRESH_MS, st);
    return now - strtoll(since + strlen("\"since_ms\": "), NULL, 10);
}

/* SIGTERM while a commit waits for a SQLite write lock the test holds
 * (busy_timeout_ms 60000): the batch gets its 5 s, then the sink is
 * interrupted; exit 0 within the documented 10 s, STOPPED, the marker
 * untouched, and a restart applies everything once. */
static void scenario_stop_blocked_commit(void) {
    const char *topic = h_name("hc-stc");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("hc-stc"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 30, "{\"id\": %d}");
    const char *cfg = config("stc", name, topic, "sqlite",
                             ", \"busy_timeout_ms\": 60000", "");
    char db[4200];
    snprintf(db, sizeof db, "%s/stc.db", h_workdir());
    pid_t pid = h_spawn(cfg, "stc.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    sqlite3 *lock = NULL;
    H_CHECK(sqlite3_open(db, &lock) == SQLITE_OK &&
                sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL) ==
                    SQLITE_OK,
            "cannot take the write lock: %s", sqlite3_errmsg(lock));
    h_produce_many(p, topic, 0, 100, 20, "{\"id\": %d}");
    /* The status file, fresh, says the commit has waited 3 s. */
    int64_t t0 = h_now_ms();
    while (commit_waited_ms(name) < 3000) {
        H_CHECK(h_now_ms() - t0 < 30000,
                "inconclusive: the host never blocked in its commit");
        h_sleep_ms(100);
    }
    int64_t took;
    int rc = h_stop(pid, SIGTERM, 12000, &took);
    H_CHECK(rc == 0, "SIGTERM during a blocked commit: exit %d, expected 0",
            rc);
    const char *st = h_status_text(name);
    H_CHECK(strstr(st, "\"state\": \"STOPPED\""),
            "the status file does not say STOPPED: %s", st);
    H_CHECK(h_sqlf(db, "SELECT next_offset FROM tidemark_markers") == 30,
            "the marker moved while the lock was held");
    h_step("SIGTERM during the blocked commit: exit 0 after %lld ms, STOPPED",
           (long long)took);
    sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(lock);
    pid = h_spawn(cfg, "stc.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    h_stop_clean(pid);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 50 &&
                h_sqlf(db, "SELECT count(DISTINCT _tm_offset) FROM t") == 50,
            "rows: expected 50 distinct offsets");
    rd_kafka_destroy(p);
}

/* A batch the sink cannot commit within its deadline is not retried whole
 * for ever: the host cuts it in half until a batch fits, then grows the
 * batches again. Here a trigger refuses every row after 1 ms, so the
 * PostgreSQL sink halves each write down to single rows (about 2n
 * attempts for n rows), and 1000 records take seconds against a 500 ms
 * deadline. Every record ends as one dead letter `rejected`; the markers
 * reach the end of the log. The log must show a deadline passed (else the
 * test proves nothing: inconclusive). */
static void scenario_deadline_split(void) {
    char topic[256], table[256], name[256];
    snprintf(topic, sizeof topic, "%s", h_name("hc-deadline"));
    snprintf(table, sizeof table, "%s", h_name("hc_deadline"));
    snprintf(name, sizeof name, "%s", h_name("hc-deadline"));
    h_create_topic(topic, 1, NULL, NULL);
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "\"topics\": [\"%s\"]}, \"batch\": {\"max_records\": 1000, "
             "\"max_wait_ms\": 1000, \"commit_timeout_ms\": 500}, "
             "\"sink\": {\"plugin\": \"postgres\", \"settings\": "
             "{\"conninfo\": \"${env:TIDEMARK_PG_CONNINFO}\", "
             "\"table\": \"%s\"}}, \"state_dir\": \"%s/state\", %s}",
             name, h_bootstrap(), topic, table, h_workdir(), JSON_MAPPING);
    const char *cfg = h_write_file("deadline.json", text);
    const char *marker = "SELECT next_offset FROM tidemark_markers WHERE "
                         "connector = '%s' AND topic = '%s'";
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 1, "{\"id\": %d}");
    pid_t pid = h_spawn(cfg, "deadline-1.log");
    int64_t t0 = h_now_ms();
    while (h_pg_int(marker, name, topic) != 1) {
        H_CHECK(h_now_ms() - t0 < 60000, "inconclusive: first record not "
                                         "committed in 60 s");
        h_sleep_ms(100);
    }
    h_stop_clean(pid);
    h_pg_int("CREATE FUNCTION \"%s_refuse\"() RETURNS trigger LANGUAGE "
             "plpgsql AS $$BEGIN PERFORM pg_sleep(0.001); RAISE EXCEPTION "
             "'refused by the test'; END$$",
             table);
    h_pg_int("CREATE TRIGGER \"%s_refuse\" BEFORE INSERT ON \"%s\" FOR EACH "
             "ROW EXECUTE FUNCTION \"%s_refuse\"()",
             table, table, table);
    H_CHECK(h_pg_int("SELECT count(*) FROM pg_trigger WHERE tgname = "
                     "'%s_refuse'",
                     table) == 1,
            "inconclusive: the refusing trigger is not there");
    h_produce_many(p, topic, 0, 1, 1000, "{\"id\": %d}");
    rd_kafka_destroy(p);
    h_step("1000 records a trigger refuses, commit deadline 500 ms");
    pid = h_spawn(cfg, "deadline-2.log");
    t0 = h_now_ms();
    while (h_pg_int(marker, name, topic) != 1001) {
        H_CHECK(h_now_ms() - t0 < 150000,
                "markers at %lld of 1001 after 150 s (the batch retried "
                "whole past its deadline?)",
                (long long)h_pg_int(marker, name, topic));
        h_sleep_ms(200);
    }
    h_stop_clean(pid);
    H_CHECK(strstr(h_read_file("deadline-2.log"), "past its deadline"),
            "inconclusive: no batch passed its deadline (deadline-2.log)");
    /* Records read again after each cut are no sign the sink recovered:
     * only a committed batch is (the status stays DEGRADED until then). */
    const char *flow =
        strstr(h_read_file("deadline-2.log"), "recovered (records flow)");
    H_CHECK(!flow,
            "the status said recovered while the sink refused "
            "every batch: %.200s",
            flow ? flow : "");
    int64_t rows = h_pg_int("SELECT count(*) FROM \"%s\"", table);
    int64_t dls = h_pg_int("SELECT count(*) FROM tidemark_dead_letters WHERE "
                           "connector = '%s' AND reason = 'rejected'",
                           name);
    int64_t dl_offsets = h_pg_int(
        "SELECT count(DISTINCT \"offset\") FROM tidemark_dead_letters WHERE "
        "connector = '%s' AND \"offset\" BETWEEN 1 AND 1000",
        name);
    H_CHECK(rows == 1 && dls == 1000 && dl_offsets == 1000,
            "%lld rows (expected 1), %lld dead letters rejected over %lld "
            "offsets (expected 1000 each)",
            (long long)rows, (long long)dls, (long long)dl_offsets);
    h_step("every refused record one dead letter, markers at the end");
    h_pg_int("DROP TABLE \"%s\"", table);
    h_pg_int("DROP FUNCTION \"%s_refuse\"()", table);
}

/* dlq_refused_not_cut (from the review of the cut). The dead-letter topic
 * refuses a dead letter (its max.message.bytes is below the dead letter's
 * size: a permanent refusal; a broker outage answers the same way after
 * the producer's 30 s flush). The sink's commit() is then never called,
 * and the batch's deadline_ms is still the builder's 0, so cut_in_half()
 * takes `now >= 0` for "used up its whole deadline": the batch is dropped
 * and halved at once, again and again, logged "past its deadline", while
 * the configured commit_timeout_ms (60 s) never ran. Expected: no batch is
 * said to have passed a deadline within 20 s of a 60 s deadline. Failed
 * before the fix (batches halved down to 3 records in 7 s). */
static int rv_count(const char *s, const char *what) {
    int n = 0;
    for (const char *q = s; (q = strstr(q, what)) != NULL; q++)
        n++;
    return n;
}

/* A connector (its config written as rv-dlq.json, its log rv-dlq.log)
 * whose dead-letter topic refuses the one dead letter of its first batch
 * (the topic's max.message.bytes is 1000, the record 1499 bytes): started,
 * and seen refusing. *T0 gets the start. */
static pid_t dlq_refusing(const char *prefix, int64_t *t0) {
    char topic[256], dlq[256], name[256], dlqp[256];
    snprintf(dlqp, sizeof dlqp, "%s-dl", prefix);
    snprintf(topic, sizeof topic, "%s", h_name(prefix));
    snprintf(dlq, sizeof dlq, "%s", h_name(dlqp));
    snprintf(name, sizeof name, "%s", h_name(prefix));
    h_create_topic(topic, 1, NULL, NULL);
    h_create_topic(dlq, 1, "max.message.bytes", "1000");
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "\"topics\": [\"%s\"]}, \"batch\": {\"max_records\": 1000, "
             "\"max_wait_ms\": 1000, \"commit_timeout_ms\": 60000}, "
             "\"sink\": {\"plugin\": \"sqlite\", \"settings\": {\"path\": "
             "\"%s/rv.db\", \"table\": \"t\"}}, \"dead_letters\": "
             "{\"sink\": true, \"topic\": \"%s\"}, \"state_dir\": "
             "\"%s/state\", %s}",
             name, h_bootstrap(), topic, h_workdir(), dlq, h_workdir(),
             JSON_MAPPING);
    const char *cfg = h_write_file("rv-dlq.json", text);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 100, "{\"id\": %d}");
    char big[1500];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    h_produce(p, topic, 0, NULL, 0, big, strlen(big), NULL, NULL);
    rd_kafka_destroy(p);
    pid_t pid = h_spawn(cfg, "rv-dlq.log");
    *t0 = h_now_ms();
    while (h_now_ms() - *t0 < 20000 &&
           !strstr(h_read_file("rv-dlq.log"), "dead-letter topic"))
        h_sleep_ms(200);
    H_CHECK(strstr(h_read_file("rv-dlq.log"), "dead-letter topic"),
            "inconclusive: the dead-letter topic never refused:\n%s",
            h_read_file("rv-dlq.log"));
    return pid;
}

static void scenario_dlq_refused_not_cut(void) {
    int64_t t0;
    pid_t pid = dlq_refusing("rv-dlqref", &t0);
    h_sleep_ms(5000);
    h_stop_clean(pid);
    int64_t took = h_now_ms() - t0;
    const char *log = h_read_file("rv-dlq.log");
    const char *cut = strstr(log, "past its deadline");
    if (cut) {
        const char *from = cut;
        while (from > log && from[-1] != '\n')
            from--;
        const char *to = strchr(cut, '\n');
        H_CHECK(0,
                "%lld ms after start, with a 60000 ms commit deadline and "
                "commit() never called, the log says: %.*s (%d lines "
                "'batch dropped (past its deadline')",
                (long long)took, (int)(to ? to - from : 300), from,
                rv_count(log, "batch dropped (past its deadline"));
    }
    h_step("no batch said to pass its deadline");
}

int64_t log_line_ms(const char *log, const char *needle) {
    const char *at = strstr(log, needle);
    if (!at)
        return -1;
    while (at > log && at[-1] != '\n')
        at--;
    int h, m, sec, ms;
    if (sscanf(at, "ts=%*d-%*d-%*dT%d:%d:%d.%dZ", &h, &m, &sec, &ms) != 4)
        return -1;
    return ((int64_t)h * 3600 + m * 60 + sec) * 1000 + ms;
}

int64_t day_ms_between(int64_t a, int64_t b) {
    return b >= a ? b - a : b + 86400000 - a;
}

/* stop_during_dlq_retry: SIGTERM while the dead-letter topic refuses the
 * batch's dead letter. operations.md: the batch in flight is committed if
 * that takes less than 5 s, else abandoned. The refusal is for good, so
 * the batch is abandoned within the 5 s (a second of margin for the one
 * delivery attempt then under way), and the process exits 0 by itself,
 * not by the 10-second watch that blames a sink which never got the
 * batch. */
static void scenario_stop_during_dlq_retry(void) {
    int64_t t0;
    pid_t pid = dlq_refusing("rv-dlqstop", &t0);
    h_sleep_ms(1000);
    int64_t took;
    int rc = h_stop(pid, SIGTERM, 15000, &took);
    const char *log = h_read_file("rv-dlq.log");
    int64_t term = log_line_ms(log, "SIGTERM: stopping");
    int64_t drop =
        log_line_ms(log, "batch dropped (giving up retries while stopping)");
    H_CHECK(term >= 0, "inconclusive: no SIGTERM line in the log:\n%s", log);
    int64_t after = drop >= 0 ? day_ms_between(term, drop) : -1;
    H_CHECK(!strstr(log, "did not stop within") && after >= 0 &&
                after <= 6000 && rc == 0,
            "SIGTERM during the dead-letter topic's refusals: exit %d after "
            "%lld ms; batch abandoned %lld ms after the signal (-1: never); "
            "the 10-second watch %s:\n%s",
            rc, (long long)took, (long long)after,
            strstr(log, "did not stop within") ? "fired" : "did not fire", log);
    h_step("abandoned %lld ms after SIGTERM; exit 0 after %lld ms",
           (long long)after, (long long)took);
}

/* deadline_split_dlq_once (from the review of the cut). deadline_split with a
 * dead-letter topic and 100 malformed records among the 1000: each cut
 * drops a batch whose dead letters were already produced to the topic
 * (dlq_sent), and the rebuilt half produces them again, so the topic holds
 * each early dead letter once per halving (and its offsets go backwards).
 * Expected: the topic holds 100 dead letters (its high watermark, read
 * from Kafka). Failed before the fix (287 messages for 100). */
static void scenario_deadline_split_dlq_once(void) {
    char topic[256], table[256], name[256], dlq[256];
    snprintf(topic, sizeof topic, "%s", h_name("rv-dldup"));
    snprintf(dlq, sizeof dlq, "%s", h_name("rv-dldup-dl"));
    snprintf(table, sizeof table, "%s", h_name("rv_dldup"));
    snprintf(name, sizeof name, "%s", h_name("rv-dldup"));
    h_create_topic(topic, 1, NULL, NULL);
    h_create_topic(dlq, 1, NULL, NULL);
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": \"%s\", "
             "\"topics\": [\"%s\"]}, \"batch\": {\"max_records\": 1000, "
             "\"max_wait_ms\": 1000, \"commit_timeout_ms\": 500}, "
             "\"sink\": {\"plugin\": \"postgres\", \"settings\": "
             "{\"conninfo\": \"${env:TIDEMARK_PG_CONNINFO}\", "
             "\"table\": \"%s\"}}, \"dead_letters\": {\"sink\": true, "
             "\"topic\": \"%s\"}, \"state_dir\": \"%s/state\", %s}",
             name, h_bootstrap(), topic, table, dlq, h_workdir(), JSON_MAPPING);
    const char *cfg = h_write_file("rv-dldup.json", text);
    const char *marker = "SELECT next_offset FROM tidemark_markers WHERE "
                         "connector = '%s' AND topic = '%s'";
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 1, "{\"id\": %d}");
    pid_t pid = h_spawn(cfg, "rv-dldup-1.log");
    int64_t t0 = h_now_ms();
    while (h_pg_int(marker, name, topic) != 1) {
        H_CHECK(h_now_ms() - t0 < 60000, "inconclusive: first record");
        h_sleep_ms(100);
    }
    h_stop_clean(pid);
    h_pg_int("CREATE FUNCTION \"%s_refuse\"() RETURNS trigger LANGUAGE "
             "plpgsql AS $$BEGIN PERFORM pg_sleep(0.001); RAISE EXCEPTION "
             "'refused by the test'; END$$",
             table);
    h_pg_int("CREATE TRIGGER \"%s_refuse\" BEFORE INSERT ON \"%s\" FOR EACH "
             "ROW EXECUTE FUNCTION \"%s_refuse\"()",
             table, table, table);
    for (int i = 1; i <= 1000; i++) {
        char v[64];
        int n = i % 10 == 0 ? snprintf(v, sizeof v, "not json %d", i)
                            : snprintf(v, sizeof v, "{\"id\": %d}", i);
        h_produce(p, topic, 0, NULL, 0, v, (size_t)n, NULL, NULL);
    }
    rd_kafka_destroy(p);
    pid = h_spawn(cfg, "rv-dldup-2.log");
    t0 = h_now_ms();
    while (h_pg_int(marker, name, topic) != 1001) {
        H_CHECK(h_now_ms() - t0 < 150000, "markers at %lld of 1001",
                (long long)h_pg_int(marker, name, topic));
        h_sleep_ms(200);
    }
    h_stop_clean(pid);
    H_CHECK(strstr(h_read_file("rv-dldup-2.log"), "past its deadline"),
            "inconclusive: no batch passed its deadline");
    int64_t lo, hi;
    h_watermarks(dlq, 0, &lo, &hi);
    int64_t stored = h_pg_int("SELECT count(*) FROM tidemark_dead_letters "
                              "WHERE connector = '%s' AND reason <> "
                              "'rejected'",
                              name);
    h_pg_int("DROP TABLE \"%s\"", table);
    h_pg_int("DROP FUNCTION \"%s_refuse\"()", table);
    H_CHECK(hi - lo == 100,
            "the dead-letter topic holds %lld messages for 100 malformed "
            "records (the sink stored %lld host dead letters; %d cuts)",
            (long long)(hi - lo), (long long)stored,
            rv_count(h_read_file("rv-dldup-2.log"), "past its deadline"));
    h_step("100 dead letters in the topic");
}

static const h_scenario SCENARIOS[] = {
    {"latest_grows", scenario_latest_grows},
    {"all_failed_exit", scenario_all_failed_exit},
    {"signals", scenario_signals},
    {"stop_blocked_claim", scenario_stop_blocked_claim},
    {"stop_blocked_commit", scenario_stop_blocked_commit},
    {"status_on_assign", scenario_status_on_assign},
    {"fenced_reclaim", scenario_fenced_reclaim},
    {"restore_wiped", scenario_restore_wiped},
    {"deadline_split", scenario_deadline_split},
    {"dlq_refused_not_cut", scenario_dlq_refused_not_cut},
    {"deadline_split_dlq_once", scenario_deadline_split_dlq_once},
    {"stop_during_dlq_retry", scenario_stop_during_dlq_retry},
    {"stop_during_slow_dlq", scenario_stop_during_slow_dlq},
    {"stop_during_dlq_queue_full", scenario_stop_during_dlq_queue_full},
    {"pause_during_slow_dlq", scenario_pause_during_slow_dlq},
    {"two_groups", scenario_two_groups},
    {"dlq_fatal_remade", scenario_dlq_fatal_remade},
    {"dlq_fatal_failed", scenario_dlq_fatal_failed},
    {"slow_dlq_commits", scenario_slow_dlq_commits},
    {"slow_dlq_commits_short", scenario_slow_dlq_commits_short},
    {"status_fresh_during_slow_dlq", scenario_status_fresh_during_slow_dlq},
    {"maxpoll_dlq_then_commit", scenario_maxpoll_dlq_then_commit},
    {"given_up_dlq_not_left_queued", scenario_given_up_dlq_not_left_queued},
};

int main(int argc, char **argv) {
    if (argc == 4)
        setenv("HC_TIDEMARK_BIN", argv[1], 1);
    return h_main(argc, argv, "hostcore_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
