/* The iceberg-lite sink's background maintenance ("maintenance": true,
 * docs/iceberg-lite.md) under `tidemark run` with the real broker and real
 * files. Scenarios:
 *   bounded      the same steady load (records produced in rounds while
 *                the host runs) into two tables in an Iceberg SQL catalog
 *                (SQLite), maintenance off then on: the files in data/ and
 *                metadata/ (counted in the directories) stay under bounds
 *                derived from the settings and the load with it on, and
 *                exceed them with it off (else inconclusive). While the
 *                maintained table is written, compacted and vacuumed,
 *                pyiceberg (SqlCatalog) and DuckDB read it again and
 *                again: every read a set of distinct records that never
 *                shrinks (iceberg_catalog_judge.py --watch); at the end
 *                both read exactly the records Kafka holds, once each
 *   kill_in_maint  a file-system table: the host is SIGKILLed at the
 *                fault point maint_staged (a compaction's files and next
 *                metadata durable, not yet linked): restarted, it goes on
 *                (and compacts again), and pyiceberg reads every record
 *                once
 *   kill_in_maint_catalog  the same with the table in an Iceberg SQL
 *                catalog (SQLite): the kill lands before the row's swap;
 *                pyiceberg (SqlCatalog) and DuckDB read every record once
 *   zombie       host A stops at maint_staged; host B (same connector,
 *                maintenance off) takes the partitions after A's session
 *                times out, claims (a new epoch) and catches up; A is
 *                continued: its link loses, its fence refuses, and no
 *                metadata version on disk holds a compaction ("replace")
 *                snapshot; every record once
 *   shared_grace, shared_grace_3  two hosts of one connector, both
 *                maintaining, grace 0 / 3 s: host A stops at after_effects
 *                (files written, not linked) while B's vacuum runs; A's
 *                files must survive it and A's commit publish no version
 *                naming a missing file; every record once
 *   shared_floor the same with an age floor of 1 s, so B does delete A's
 *                in-flight files: A's check before its link finds them
 *                gone and writes the batch again; every record once */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static const char *py, *cat_judge, *fs_judge, *maint_judge;

static void need_python(void) {
    py = getenv("TIDEMARK_VENV_PYTHON");
    cat_judge = getenv("TIDEMARK_ICEBERG_CATALOG_JUDGE");
    fs_judge = getenv("TIDEMARK_ICEBERG_JUDGE");
    maint_judge = getenv("TIDEMARK_ICEBERG_MAINT_JUDGE");
    H_CHECK(py && *py && cat_judge && *cat_judge && fs_judge && *fs_judge &&
                maint_judge && *maint_judge,
            "TIDEMARK_VENV_PYTHON / TIDEMARK_ICEBERG_*JUDGE are not set "
            "(scripts/python-venv.sh)");
}

/* Regular files in DIR (the table's data/ or metadata/), as ls counts
 * them: not our counters. */
static size_t count_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The config of connector NAME writing TABLE (a catalog table when uri is
 * given) with the extra sink settings EXTRA. */
static const char *config(const char *file, const char *name, const char *topic,
                          const char *table, const char *uri, const char *ident,
                          const char *extra) {
    char cat[8192] = "";
    if (uri)
        snprintf(cat, sizeof cat,
                 ", \"catalog_uri\": \"%s\", \"catalog_name\": \"lake\", "
                 "\"catalog_namespace\": \"e2e\", \"catalog_table\": \"%s\"",
                 uri, ident);
    char text[20000];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": "
             "\"%s\", \"topics\": [\"%s\"], \"properties\": "
             "{\"session.timeout.ms\": \"6000\", "
             "\"heartbeat.interval.ms\": \"500\"}}, \"batch\": "
             "{\"max_records\": 50, \"max_wait_ms\": 1000}, \"sink\": "
             "{\"plugin\": \"iceberg_lite\", \"settings\": {\"path\": \"%s\", "
             "\"target_file_size\": 65536%s%s}}, \"state_dir\": "
             "\"%s/state-%s\", \"mapping\": {\"mode\": \"json\", "
             "\"columns\": [{\"name\": \"id\", \"pointer\": \"/id\", "
             "\"type\": \"int\", \"required\": true}, {\"name\": \"name\", "
             "\"pointer\": \"/name\", \"type\": \"text\"}]}}",
             name, h_bootstrap(), topic, table, cat, extra, h_workdir(), file);
    return h_write_file(file, text);
}

/* Waits until `tidemark verify` says the table holds all WANT records. */
static void wait_caught_up(const char *cfg, int want) {
    const char *args[] = {"verify", cfg, NULL};
    char text[64];
    snprintf(text, sizeof text, "kafka_records=%d ", want);
    int64_t t0 = h_now_ms();
    for (;;) {
        int rc = h_tidemark("verify.out", args);
        const char *out = h_read_file("verify.out");
        if (rc == 0 && strstr(out, text))
            return;
        H_CHECK(rc == 0 || rc == 2, "verify failed:\n%s", out);
        H_CHECK(h_now_ms() - t0 < 180000, "not caught up:\n%s", out);
        h_sleep_ms(300);
    }
}

/* [[partition, offset, id], ...] of what was produced (one idempotent
 * producer, no transactions: offsets are dense from 0), per partition n. */
static const char *expected(int n) {
    size_t size = (size_t)n * 2 * 40 + 16, len;
    char *text = malloc(size);
    H_CHECK(text != NULL, "out of memory");
    len = (size_t)snprintf(text, size, "[");
    for (int part = 0; part < 2; part++)
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(text + len, size - len, "%s[%d, %d, %d]",
                                    len > 1 ? "," : "", part, i,
                                    part * 100000 + i);
    snprintf(text + len, size - len, "]");
    const char *path = h_write_file("expected.json", text);
    free(text);
    return path;
}

static void judge_fs(const char *table, int n) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s %s %s %s > %s/judge.out 2>&1", py, fs_judge,
             table, expected(n), h_workdir());
    H_CHECK(system(cmd) == 0, "the reader's verdict:\n%s",
            h_read_file("judge.out"));
    h_step("%s", h_read_file("judge.out"));
}

/* ---- bounded ----------------------------------------------------------- */

/* The load: ROUNDS rounds, each PER_ROUND records to each of the two
 * partitions then a pause; batches of at most 50 records, cut early only
 * after a second without records (max_wait_ms), so at most
 * 2 * PER_ROUND / 50 commits per round and one more per second. */
#define ROUNDS     80
#define PER_ROUND  50
#define ROUND_MS   500
#define GRACE_S    5
#define MIN_AGE_S  1 /* one host: no other writer's files in flight */
#define VACUUM_S   1
#define MIN_FILES  8
#define KEEP_SNAPS 10
/* Commits per second at most (the load's rate over the batch size), and
 * the window in which a file may stay unreferenced before a vacuum
 * removes it: the age floor (a file younger is no candidate yet), the
 * grace period, a vacuum interval, a round. */
#define MAX_COMMITS_S (2 * PER_ROUND * 1000 / ROUND_MS / 50 + 1)
#define WINDOW_S      (MIN_AGE_S + GRACE_S + VACUUM_S + 1)
/* data/: the live files (fewer than MIN_FILES small ones plus the few
 * the compactions made: the whole load is a few targets of 64 KiB), those the
 * KEEP_SNAPS kept snapshots name (at most one new file per commit), and those
 * unreferenced within the window (one per commit, data or compaction). */
#define DATA_BOUND (MIN_FILES + 4 + KEEP_SNAPS + 2 * MAX_COMMITS_S * WINDOW_S)
/* metadata/: per commit at most a metadata file, a manifest list and a
 * manifest: those of the kept snapshots and of the metadata log (10), the
 * merged manifests they hold, those unreferenced within the window; plus
 * the catalog's mark, the hint and the floor. */
#define META_BOUND                                                             \
    (3 * (KEEP_SNAPS + 10) + 20 + 3 * 2 * MAX_COMMITS_S * WINDOW_S + 3)

typedef struct run_counts {
    size_t data, meta;
} run_counts;

/* One run of the load into table IDENT with the maintenance settings
 * MAINT; with watch, a reader reads the table again and again meanwhile.
 * The directory's counts at the end, when the host caught up. */
static run_counts run_load(const char *uri, const char *ident,
                           const char *maint, int watch) {
    char topic[256], name[256], table[4096], file[64];
    snprintf(topic, sizeof topic, "%s", h_name(ident));
    snprintf(name, sizeof name, "%s", topic);
    snprintf(table, sizeof table, "%s/%s", h_workdir(), ident);
    snprintf(file, sizeof file, "%s.json", ident);
    h_create_topic(topic, 2, NULL, NULL);
    const char *cfg = config(file, name, topic, table, uri, ident, maint);
    char log[64];
    snprintf(log, sizeof log, "%s.log", ident);
    pid_t pid = h_spawn(cfg, log);
    rd_kafka_t *p = h_producer(NULL, NULL);
    pid_t watcher = -1;
    char watch_out[64];
    snprintf(watch_out, sizeof watch_out, "watch-%s.out", ident);
    for (int r = 0; r < ROUNDS; r++) {
        for (int part = 0; part < 2; part++)
            h_produce_many(p, topic, part, part * 100000 + r * PER_ROUND,
                           PER_ROUND, "{\"id\": %d, \"name\": \"ice\"}");
        if (watch && r == 2) {
            /* From the third round on, a reader reads while the host
             * writes, compacts and vacuums. */
            char cmd[16384];
            snprintf(cmd, sizeof cmd,
                     "exec %s %s --watch %s lake e2e.%s %d > %s/%s 2>&1", py,
                     cat_judge, uri, ident, 2 * ROUNDS * PER_ROUND, h_workdir(),
                     watch_out);
            watcher = fork();
            H_CHECK(watcher >= 0, "fork");
            if (watcher == 0) {
                execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
                _exit(127);
            }
        }
        h_sleep_ms(ROUND_MS); /* the pace of the load, not a sync */
    }
    wait_caught_up(cfg, 2 * ROUNDS * PER_ROUND);
    run_counts c;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/data", table);
    c.data = count_dir(dir);
    snprintf(dir, sizeof dir, "%s/metadata", table);
    c.meta = count_dir(dir);
    if (watcher > 0) {
        int status;
        H_CHECK(waitpid(watcher, &status, 0) == watcher && WIFEXITED(status) &&
                    WEXITSTATUS(status) == 0,
                "the reader reading while the host wrote:\n%s",
                h_read_file(watch_out));
        const char *w = h_read_file(watch_out);
        const char *last = strstr(w, " reads, ");
        while (last && last > w && last[-1] != '\n')
            last--;
        h_step("the reader that read during the run: %s", last ? last : w);
    }
    h_stop_clean(pid);
    rd_kafka_destroy(p);
    return c;
}

static void scenario_bounded(void) {
    need_python();
    char uri[4300];
    snprintf(uri, sizeof uri, "sqlite:///%s/catalog.db", h_workdir());
    char maint[512];
    snprintf(maint, sizeof maint,
             ", \"keep_snapshots\": %d, \"maintenance\": true, "
             "\"maintenance_min_files\": %d, \"maintenance_grace_seconds\": "
             "%d, \"maintenance_min_age_seconds\": %d, "
             "\"maintenance_vacuum_interval_seconds\": %d",
             KEEP_SNAPS, MIN_FILES, GRACE_S, MIN_AGE_S, VACUUM_S);
    char plain[128];
    snprintf(plain, sizeof plain, ", \"keep_snapshots\": %d", KEEP_SNAPS);
    run_counts off = run_load(uri, "plain", plain, 0);
    h_step("maintenance off: %zu files in data/, %zu in metadata/", off.data,
           off.meta);
    run_counts on = run_load(uri, "kept", maint, 1);
    h_step("maintenance on: %zu files in data/, %zu in metadata/ (bounds %d "
           "and %d)",
           on.data, on.meta, DATA_BOUND, META_BOUND);
    H_CHECK(off.data > DATA_BOUND && off.meta > META_BOUND,
            "inconclusive: without maintenance the load left %zu data and "
            "%zu metadata files, not above the bounds %d and %d",
            off.data, off.meta, DATA_BOUND, META_BOUND);
    H_CHECK(on.data <= DATA_BOUND && on.meta <= META_BOUND,
            "with maintenance: %zu data files (bound %d), %zu metadata files "
            "(bound %d)",
            on.data, DATA_BOUND, on.meta, META_BOUND);
    H_CHECK(strstr(h_read_file("kept.log"), "maintenance: vacuum removed"),
            "inconclusive: the maintained run never vacuumed:\n%s",
            h_read_file("kept.log"));
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s %s %s lake e2e.kept %s > %s/judge.out 2>&1",
             py, cat_judge, uri, expected(ROUNDS * PER_ROUND), h_workdir());
    H_CHECK(system(cmd) == 0, "the readers' verdict:\n%s",
            h_read_file("judge.out"));
    h_step("%s", h_read_file("judge.out"));
}

/* ---- kill_in_maint, zombie -------------------------------------------- */

#define COUNT 3000 /* per partition */

static const char *produce_all(const char *base) {
    static char topic[256];
    snprintf(topic, sizeof topic, "%s", h_name(base));
    h_create_topic(topic, 2, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < 2; part++)
        h_produce_many(p, topic, part, part * 100000, COUNT,
                       "{\"id\": %d, \"name\": \"ice\"}");
    rd_kafka_destroy(p);
    return topic;
}

#define FS_MAINT                                                               \
    ", \"maintenance\": true, \"maintenance_min_files\": 8, "                  \
    "\"maintenance_grace_seconds\": 0, "                                       \
    "\"maintenance_vacuum_interval_seconds\": 0"

/* With uri, the table is in that catalog as e2e.killed. */
static void kill_in_maint(const char *uri) {
    need_python();
    const char *topic = produce_all("icemaint-kill");
    char name[256], table[4096];
    snprintf(name, sizeof name, "%s", h_name("icemaint-kill"));
    snprintf(table, sizeof table, "%s/table", h_workdir());
    const char *cfg =
        config("kill.json", name, topic, table, uri, "killed", FS_MAINT);
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    const char *env[] = {"TIDEMARK_FAULT=maint_staged", fp.fd_env, NULL};
    pid_t pid = h_spawn_env(cfg, "kill.log", env);
    /* Inconclusive unless the host reached a maintenance commit's stage. */
    h_fault_wait(&fp, "maint_staged", pid, 0);
    int rc = h_stop(pid, SIGKILL, 10000, NULL);
    H_CHECK(rc == 128 + SIGKILL, "the host was not killed at maint_staged");
    h_step("killed inside a maintenance commit (maint_staged)");
    pid = h_spawn(cfg, "kill2.log");
    wait_caught_up(cfg, 2 * COUNT);
    h_stop_clean(pid);
    H_CHECK(strstr(h_read_file("kill2.log"), "maintenance: after batch"),
            "the restarted host never compacted:\n%s",
            h_read_file("kill2.log"));
    h_step("restarted: caught up and compacted again");
    if (!uri) {
        judge_fs(table, COUNT);
        return;
    }
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s %s %s lake e2e.killed %s > %s/judge.out 2>&1",
             py, cat_judge, uri, expected(COUNT), h_workdir());
    H_CHECK(system(cmd) == 0, "the readers' verdict:\n%s",
            h_read_file("judge.out"));
    h_step("%s", h_read_file("judge.out"));
}

static void scenario_kill_in_maint(void) {
    kill_in_maint(NULL);
}

static void scenario_kill_in_maint_catalog(void) {
    char uri[4300];
    snprintf(uri, sizeof uri, "sqlite:///%s/catalog.db", h_workdir());
    kill_in_maint(uri);
}

static void scenario_zombie(void) {
    need_python();
    const char *topic = produce_all("icemaint-zombie");
    char name[256], table[4096];
    snprintf(name, sizeof name, "%s", h_name("icemaint-zombie"));
    snprintf(table, sizeof table, "%s/table", h_workdir());
    /* keep_snapshots high and no vacuum by B: every version published
     * stays on disk for the check below. */
    const char *cfg_a =
        config("a.json", name, topic, table, NULL, NULL,
               ", \"keep_snapshots\": 100000, \"maintenance\": true, "
               "\"maintenance_min_files\": 8, "
               "\"maintenance_grace_seconds\": 86400");
    const char *cfg_b = config("b.json", name, topic, table, NULL, NULL,
                               ", \"keep_snapshots\": 100000");
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    const char *env[] = {"TIDEMARK_FAULT=maint_staged",
                         "TIDEMARK_FAULT_ACTION=stop", fp.fd_env, NULL};
    pid_t a = h_spawn_env(cfg_a, "a.log", env);
    h_fault_wait(&fp, "maint_staged", a, 1);
    h_step("host A stopped inside its first maintenance commit");
    pid_t b = h_spawn(cfg_b, "b.log");
    wait_caught_up(cfg_b, 2 * COUNT);
    h_step("host B took over (a new epoch) and caught up");
    H_CHECK(kill(a, SIGCONT) == 0, "SIGCONT host A");
    const char *want = "not this connector's to maintain now";
    int64_t t0 = h_now_ms();
    while (!strstr(h_read_file("a.log"), want)) {
        H_CHECK(h_now_ms() - t0 < 60000,
                "host A, continued, never refused its maintenance commit:\n%s",
                h_read_file("a.log"));
        h_sleep_ms(100);
    }
    h_step("host A, continued: its maintenance commit was refused (fenced)");
    h_stop(a, SIGKILL, 10000, NULL);
    h_stop_clean(b);
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s %s --replace-snapshots %s > %s/ops.out 2>&1",
             py, maint_judge, table, h_workdir());
    H_CHECK(system(cmd) == 0, "%s", h_read_file("ops.out"));
    H_CHECK(strncmp(h_read_file("ops.out"), "0 ", 2) == 0,
            "a compaction was published: %s", h_read_file("ops.out"));
    h_step("%s", h_read_file("ops.out"));
    judge_fs(table, COUNT);
}

/* ---- shared_grace, shared_floor ----------------------------------------
 * Two hosts of ONE connector (the normal scale-out: a consumer group, one
 * partition each) write one file-system table, both with maintenance on,
 * a vacuum after every batch and the given grace. Host A stops (SIGSTOP,
 * well inside the session timeout: a stall, not a death) at after_effects:
 * its batch's data file and manifests are written, not yet published. A
 * file planted in data/ with an old mtime (an orphan of an hour ago) shows
 * when B's vacuum ran with A's in-flight files on disk: once it is gone, a
 * vacuum of B listed data/ after A's files were written and, with a grace,
 * had found both unreferenced for the grace period (A's first). A is
 * continued: it is still the owner (no rebalance), its link loses to B's
 * versions, and it commits on top of them. Expected: no published version
 * names a missing file (tidemark verify), every record read once by
 * pyiceberg. With extra settings (shared_floor) B deletes A's in-flight
 * files on purpose: A's check before its link must find them gone and
 * write the batch again. */
typedef struct shared_case {
    int grace;          /* maintenance_grace_seconds of both hosts */
    const char *extra;  /* more sink settings of both hosts */
    int64_t stall_ms;   /* A stays stopped at least this long first */
    const char *expect; /* in A's log after it continued, or NULL */
} shared_case;

static void shared_hosts(const shared_case *sc) {
    need_python();
    char topic[256], name[256], table[4096];
    snprintf(topic, sizeof topic, "%s", h_name("icevac-shared"));
    snprintf(name, sizeof name, "%s", topic);
    snprintf(table, sizeof table, "%s/table", h_workdir());
    h_create_topic(topic, 2, NULL, NULL);
    const char *cfgs[2];
    for (int k = 0; k < 2; k++) {
        char text[20000], file[32];
        snprintf(file, sizeof file, "%c.json", 'a' + k);
        snprintf(text, sizeof text,
                 "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": "
                 "\"%s\", \"topics\": [\"%s\"], \"properties\": "
                 "{\"session.timeout.ms\": \"45000\", "
                 "\"heartbeat.interval.ms\": \"1000\"}}, \"batch\": "
                 "{\"max_records\": 50, \"max_wait_ms\": 500}, \"sink\": "
                 "{\"plugin\": \"iceberg_lite\", \"settings\": {\"path\": "
                 "\"%s\", \"maintenance\": true, \"maintenance_min_files\": "
                 "100000, \"maintenance_grace_seconds\": %d, "
                 "\"maintenance_vacuum_interval_seconds\": 0%s}}, "
                 "\"state_dir\": \"%s/state-%c\", \"mapping\": {\"mode\": "
                 "\"json\", \"columns\": [{\"name\": \"id\", \"pointer\": "
                 "\"/id\", \"type\": \"int\", \"required\": true}, "
                 "{\"name\": \"name\", \"pointer\": \"/name\", \"type\": "
                 "\"text\"}]}}",
                 name, h_bootstrap(), topic, table, sc->grace, sc->extra,
                 h_workdir(), 'a' + k);
        cfgs[k] = h_write_file(file, text);
    }
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    const char *env[] = {"TIDEMARK_FAULT=after_effects",
                         "TIDEMARK_FAULT_ACTION=stop", fp.fd_env, NULL};
    pid_t a = h_spawn_env(cfgs[0], "a.log", env);
    int64_t t0 = h_now_ms();
    while (!strstr(h_read_file("a.log"), "claimed:")) {
        H_CHECK(h_now_ms() - t0 < 60000, "inconclusive: A never claimed");
        h_sleep_ms(100);
    }
    pid_t b = h_spawn(cfgs[1], "b.log");
    /* One partition each (the group's own description). */
    char group[300];
    snprintf(group, sizeof group, "tidemark-%s", name);
    t0 = h_now_ms();
    for (;;) {
        char owners[2][H_OWNER_MAX];
        if (h_group_owners(group, topic, 2, owners) == 2 && owners[0][0] &&
            owners[1][0] && strcmp(owners[0], owners[1]) != 0)
            break;
        H_CHECK(h_now_ms() - t0 < 60000,
                "inconclusive: the two hosts never held one partition each");
        h_sleep_ms(200);
    }
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < 2; part++)
        h_produce_many(p, topic, part, part * 100000, 10,
                       "{\"id\": %d, \"name\": \"ice\"}");
    h_fault_wait(&fp, "after_effects", a, 1);
    h_step("host A stopped at after_effects (its files written, unpublished)");
    int64_t stopped = h_now_ms();
    int n = 10;
    /* B's partition gets a record each second: a batch, then a vacuum. */
    while (h_now_ms() - stopped < sc->stall_ms) {
        for (int part = 0; part < 2; part++)
            h_produce_many(p, topic, part, part * 100000 + n, 1,
                           "{\"id\": %d, \"name\": \"ice\"}");
        n++;
        h_sleep_ms(1000);
    }
    char planted[4200];
    snprintf(planted, sizeof planted, "%s/data/planted-orphan.parquet", table);
    FILE *f = fopen(planted, "w");
    H_CHECK(f && fputs("orphan", f) >= 0 && fclose(f) == 0, "plant %s",
            planted);
    struct timespec old[2] = {{.tv_sec = time(NULL) - 3600},
                              {.tv_sec = time(NULL) - 3600}};
    H_CHECK(utimensat(AT_FDCWD, planted, old, 0) == 0, "utimensat %s", planted);
    t0 = h_now_ms();
    while (access(planted, F_OK) == 0) {
        H_CHECK(
            h_now_ms() - t0 < 60000,
            "inconclusive: B's vacuum never removed the planted orphan:\n%s",
            h_read_file("b.log"));
        for (int part = 0; part < 2; part++)
            h_produce_many(p, topic, part, part * 100000 + n, 1,
                           "{\"id\": %d, \"name\": \"ice\"}");
        n++;
        h_sleep_ms(1000);
    }
    H_CHECK(h_proc_state(a) == 'T', "inconclusive: A is no longer stopped");
    h_step("host B vacuumed while A was stopped (%d s of A's stall)",
           (int)((h_now_ms() - stopped) / 1000));
    H_CHECK(kill(a, SIGCONT) == 0, "SIGCONT host A");
    rd_kafka_destroy(p);
    /* verify (tidemark's own reader) until caught up; a data file the
     * table names but the directory lacks is the finding. */
    const char *args[] = {"verify", cfgs[1], NULL};
    char want[64];
    snprintf(want, sizeof want, "kafka_records=%d ", 2 * n);
    t0 = h_now_ms();
    for (;;) {
        int rc = h_tidemark("verify.out", args);
        const char *out = h_read_file("verify.out");
        H_CHECK(!strstr(out, "is missing"),
                "a published snapshot names a file B's vacuum deleted:\n%s",
                out);
        if (rc == 0 && strstr(out, want))
            break;
        H_CHECK(h_now_ms() - t0 < 120000, "not caught up:\n%s", out);
        h_sleep_ms(500);
    }
    h_stop_clean(a);
    h_stop_clean(b);
    H_CHECK(!strstr(h_read_file("a.log"), "fenced"),
            "inconclusive: A was fenced (a rebalance happened)");
    if (sc->expect)
        H_CHECK(strstr(h_read_file("a.log"), sc->expect),
                "inconclusive: A never found its files gone (\"%s\"):\n%s",
                sc->expect, h_read_file("a.log"));
    judge_fs(table, n);
}

/* The defaults: B's vacuum leaves files younger than the age floor, so
 * A's in-flight ones stay, with no grace (0) or a short one (3 s). */
static void scenario_shared_grace(void) {
    shared_case sc = {.grace = 0, .extra = "", .stall_ms = 0};
    shared_hosts(&sc);
}

static void scenario_shared_grace_3(void) {
    shared_case sc = {.grace = 3, .extra = "", .stall_ms = 4000};
    shared_hosts(&sc);
}

/* An age floor of 1 s (unsafe with two hosts: that is the point): B
 * deletes A's in-flight files while A is stopped for 3 s; A's check before
 * its link finds them gone and it writes the batch again. */
static void scenario_shared_floor(void) {
    shared_case sc = {.grace = 0,
                      .extra = ", \"maintenance_min_age_seconds\": 1",
                      .stall_ms = 3000,
                      .expect = "written again"};
    shared_hosts(&sc);
}

int main(int argc, char **argv) {
    static const h_scenario SCENARIOS[] = {
        {"bounded", scenario_bounded},
        {"kill_in_maint", scenario_kill_in_maint},
        {"kill_in_maint_catalog", scenario_kill_in_maint_catalog},
        {"zombie", scenario_zombie},
        {"shared_grace", scenario_shared_grace},
        {"shared_grace_3", scenario_shared_grace_3},
        {"shared_floor", scenario_shared_floor},
    };
    return h_main(argc, argv, "iceberg_maint_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
