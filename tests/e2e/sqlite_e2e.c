/* End-to-end scenarios of the SQLite sink's owner: `tidemark verify` after
 * the operations the docs describe, and the database's directory removed
 * under a running host, against the real broker and the real binary. Each
 * scenario is one ctest test, e2e.sqlite.<scenario>. Every verdict is checked
 * against the database's rows and Kafka's records. */
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* A dynamic member (static membership off): the scenarios stop the host
 * and reset at once, which needs an empty group; a static member would
 * stay in it for the session timeout (docs/operations.md). */
static const char *config(const char *file, const char *name, const char *topic,
                          const char *db, const char *extra) {
    static char text[16384];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\",\n"
             " \"kafka\": {\"bootstrap_servers\": \"%s\", \"topics\": "
             "[\"%s\"], \"start\": \"earliest\", \"static_membership\": "
             "false},\n"
             " \"batch\": {\"max_records\": 20, \"max_wait_ms\": 100},\n"
             " \"sink\": {\"plugin\": \"sqlite\", \"settings\": {\"path\": "
             "\"%s\", \"table\": \"t\"}},\n"
             " \"state_dir\": \"%s/state-%s\",\n"
             " \"mapping\": {\"mode\": \"json\", \"columns\": ["
             "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", "
             "\"required\": true},"
             "{\"name\": \"name\", \"pointer\": \"/name\", \"type\": "
             "\"text\"}]}%s}\n",
             name, h_bootstrap(), topic, db, h_workdir(), file, extra);
    return h_write_file(file, text);
}

static const char *path_in_workdir(const char *name) {
    static char p[4096];
    snprintf(p, sizeof p, "%s/%s", h_workdir(), name);
    return p;
}

static void expect_contains(const char *what, const char *text,
                            const char *needle) {
    H_CHECK(strstr(text, needle) != NULL, "%s: \"%s\" not in:\n%s", what,
            needle, text);
}

/* docs/operations.md: `offsets --reset-to` an earlier offset on a dedup
 * connector replays records whose keys are stored: they are counted as
 * duplicates, no row is added. verify must then pass (every offset is
 * stored once), although the marker counted the replayed records again. */
static void scenario_reset_verify(void) {
    const char *topic = h_name("sqlite-rv");
    char name[256], spec[512];
    snprintf(name, sizeof name, "%s", h_name("sqlite-rv"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 200, "{\"id\": %d, \"name\": \"n\"}");
    /* offset 200: not JSON, a dead letter (parse_error) */
    H_CHECK(h_produce(p, topic, 0, NULL, 0, "{not json", 9, NULL, NULL) == 200,
            "inconclusive: the bad record is not at offset 200");
    const char *db = path_in_workdir("rv.db");
    const char *cfg =
        config("rv.json", name, topic, db, ", \"dedup\": {\"key\": [\"id\"]}");
    pid_t pid = h_spawn(cfg, "rv.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    h_stop_clean(pid);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 200,
            "rows before the reset");
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM tidemark_dead_letters") == 1,
            "inconclusive: dead letters before the reset");

    snprintf(spec, sizeof spec, "%s:0=50", topic);
    const char *reset[] = {"offsets", cfg, "--reset-to", spec, NULL};
    int rc = h_tidemark("reset.out", reset);
    H_CHECK(rc == 0, "offsets --reset-to: exit %d\n%s", rc,
            h_read_file("reset.out"));
    H_CHECK(h_sqlf(db,
                   "SELECT next_offset FROM tidemark_markers WHERE connector = "
                   "'%s'",
                   name) == 50,
            "inconclusive: the marker was not moved back to 50");
    pid = h_spawn(cfg, "rv.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    h_stop_clean(pid);
    /* the truth: every offset once, the replayed 151 counted (150 stored
     * keys and the dead letter already stored), no row, no second dead
     * letter, the marker's dead letters the stored ones */
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 200 &&
                h_sqlf(db, "SELECT count(DISTINCT _tm_offset) FROM t") == 200,
            "rows after the replay: %lld",
            (long long)h_sqlf(db, "SELECT count(*) FROM t"));
    H_CHECK(
        h_sqlf(db, "SELECT count(*) FROM tidemark_dead_letters") == 1,
        "dead letters after the replay: %lld, want 1",
        (long long)h_sqlf(db, "SELECT count(*) FROM tidemark_dead_letters"));
    H_CHECK(
        h_sqlf(db,
               "SELECT dead_letters FROM tidemark_markers WHERE connector = "
               "'%s'",
               name) == 1,
        "the marker counts %lld dead letters, 1 is stored",
        (long long)h_sqlf(db,
                          "SELECT dead_letters FROM tidemark_markers WHERE "
                          "connector = '%s'",
                          name));
    H_CHECK(h_sqlf(db,
                   "SELECT duplicates FROM tidemark_markers WHERE connector = "
                   "'%s'",
                   name) == 151,
            "inconclusive: the marker counted %lld duplicates, not the 151 "
            "replayed records",
            (long long)h_sqlf(db,
                              "SELECT duplicates FROM tidemark_markers WHERE "
                              "connector = '%s'",
                              name));
    const char *args[] = {"verify", cfg, NULL};
    rc = h_tidemark("verify.out", args);
    const char *out = h_read_file("verify.out");
    H_CHECK(rc == 0, "verify after a reset: exit %d\n%s", rc, out);
    expect_contains("verify", out, "kafka_records=201 rows=200");
    expect_contains("verify", out, "dead_letters=1");
    expect_contains("verify", out, "replayed=151");
    expect_contains("verify", out, "result=OK");
    rd_kafka_destroy(p);
}

/* A compacted topic whose cleaner removed records after the sink stored
 * them: verify reads the topic's cleanup.policy and reports them as
 * compacted since stored, not as a failure. The cleaner may remove records
 * only once the sink stored every one: the topic is made with a
 * compaction lag of an hour, lowered to 0 after the host caught up (the
 * host merely started first raced the cleaner: with the host started 5 s
 * late, "inconclusive: 21 rows stored, not all 60 records"). */
static void scenario_compacted_verify(void) {
    char topic[256], name[256];
    snprintf(topic, sizeof topic, "%s", h_name("sqlite-cv"));
    snprintf(name, sizeof name, "%s", h_name("sqlite-cv"));
    /* The compaction lag, an hour while the host stores the records. */
    const char *tcfg[] = {"cleanup.policy",
                          "compact",
                          "segment.ms",
                          "100",
                          "min.cleanable.dirty.ratio",
                          "0.01",
                          "min.compaction.lag.ms",
                          "3600000",
                          "delete.retention.ms",
                          "100",
                          NULL};
    h_create_topic_cfg(topic, 1, tcfg);
    const char *db = path_in_workdir("cv.db");
    const char *cfg = config("cv.json", name, topic, db, "");
    pid_t pid = h_spawn(cfg, "cv.log");
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int r = 0; r < 6; r++) {
        for (int k = 0; k < 10; k++) {
            char key[32], val[128];
            snprintf(key, sizeof key, "key-%d", k);
            int len = snprintf(val, sizeof val,
                               "{\"id\": %d, \"name\": \"round %d\"}", k, r);
            h_produce_async(p, topic, 0, key, val, (size_t)len);
        }
        h_flush(p);
        h_sleep_ms(150);
    }
    h_wait_caught_up(db, name, topic, 1, 60000);
    h_stop_clean(pid);
    int64_t rows = h_sqlf(db, "SELECT count(*) FROM t");
    H_CHECK(rows == 60, "inconclusive: %lld rows stored, not all 60 records",
            (long long)rows);
    /* The same configs (AlterConfigs sets the whole set), no lag now. */
    for (size_t i = 0; tcfg[i]; i += 2)
        if (strcmp(tcfg[i], "min.compaction.lag.ms") == 0)
            tcfg[i + 1] = "0";
    h_alter_topic_cfg(topic, tcfg);
    /* wait until the cleaner removed some and the count is stable */
    int64_t t0 = h_now_ms(), present = -1;
    int same = 0;
    for (;;) {
        int64_t *offs = NULL;
        int64_t now = (int64_t)h_read_offsets(topic, 0, &offs);
        free(offs);
        same = now == present ? same + 1 : 0;
        present = now;
        if (now < rows && same == 3)
            break;
        H_CHECK(h_now_ms() - t0 < 120000,
                "inconclusive: no compaction after 120 s (%lld records, "
                "%lld rows)",
                (long long)now, (long long)rows);
        h_sleep_ms(2000);
    }
    h_step("%lld rows stored, %lld records left in Kafka", (long long)rows,
           (long long)present);
    const char *args[] = {"verify", cfg, NULL};
    int rc = h_tidemark("verify.out", args);
    const char *out = h_read_file("verify.out");
    H_CHECK(rc == 0, "verify of a compacted topic: exit %d\n%s", rc, out);
    char want[128];
    snprintf(want, sizeof want, "compacted=%lld", (long long)(rows - present));
    expect_contains("verify", out, want);
    expect_contains("verify", out, "compacted since stored");
    expect_contains("verify", out, "result=OK");
    rd_kafka_destroy(p);
}

static int64_t group_offset_settled(const char *group, const char *topic,
                                    int64_t want) {
    int64_t got = -1;
    for (int tries = 0; tries < 100 && got != want; tries++) {
        got = h_group_offset(group, topic, 0);
        if (got != want)
            h_sleep_ms(100);
    }
    return got;
}

/* Files of the database removed while the host runs: SQLite would go on
 * committing into the unlinked files and the group's offsets would advance
 * over rows nobody can find again. The sink must refuse the commit and,
 * as a removed file never comes back, fail the connector (FATAL: the
 * process exits 1 by itself, not PAUSED and retrying for ever), so the
 * group offset stays where the last batch that reached the real file left
 * it. SUFFIXES: which files go; WITH_DIR: the directory too. When the
 * directory stays, what the connection held is rescued into a new file
 * beside the database, named in the log: it holds every row. */
static void removed_files(const char *tag, const char *const *suffixes,
                          size_t n, int with_dir) {
    const char *topic = h_name(tag);
    char name[256], group[300], dir[4096], db[4200], f[4300], cfg_name[64];
    snprintf(name, sizeof name, "%s", h_name(tag));
    snprintf(group, sizeof group, "tidemark-%s", name);
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 100, "{\"id\": %d, \"name\": \"n\"}");
    snprintf(dir, sizeof dir, "%s/dbdir-%s", h_workdir(), tag);
    H_CHECK(mkdir(dir, 0700) == 0, "mkdir %s", dir);
    snprintf(db, sizeof db, "%s/dr.db", dir);
    snprintf(cfg_name, sizeof cfg_name, "%s.json", tag);
    const char *cfg = config(cfg_name, name, topic, db, "");
    pid_t pid = h_spawn(cfg, "dr.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    int64_t got = group_offset_settled(group, topic, 100);
    H_CHECK(got == 100, "group offset %lld before the removal, want 100",
            (long long)got);

    for (size_t i = 0; i < n; i++) {
        snprintf(f, sizeof f, "%s%s", db, suffixes[i]);
        H_CHECK(unlink(f) == 0 && access(f, F_OK) != 0,
                "inconclusive: unlink %s", f);
    }
    if (with_dir)
        H_CHECK(rmdir(dir) == 0 && access(dir, F_OK) != 0,
                "inconclusive: %s is still there", dir);
    h_produce_many(p, topic, 0, 100, 50, "{\"id\": %d, \"name\": \"n\"}");
    /* The host tries those 50, is refused, and the connector fails. */
    const char *needle = "was removed while running";
    int64_t t0 = h_now_ms();
    while (!strstr(h_read_file("dr.log"), needle) || h_proc_state(pid) != 'Z') {
        H_CHECK(h_now_ms() - t0 < 30000,
                "the host did not fail on the removed database in 30 s "
                "(group offset now %lld)",
                (long long)h_group_offset(group, topic, 0));
        h_sleep_ms(100);
    }
    int rc = h_stop(pid, SIGTERM, 15000, NULL);
    H_CHECK(rc == 1, "exit %d after the connector failed, want 1", rc);
    got = h_group_offset(group, topic, 0);
    H_CHECK(got == 100,
            "group offset %lld after the removal: batches committed into "
            "the unlinked file",
            (long long)got);
    const char *log = h_read_file("dr.log");
    const char *at = strstr(log, "rescued into \\\"");
    if (with_dir) {
        expect_contains("the log", log, "/proc/");
    } else {
        H_CHECK(at != NULL, "no rescue in the log:\n%s", log);
        at += strlen("rescued into \\\"");
        const char *end = strstr(at, "\\\"");
        H_CHECK(end != NULL && end - at < 4000, "rescue name unterminated");
        snprintf(f, sizeof f, "%.*s", (int)(end - at), at);
        int64_t rows = h_sqlf(f, "SELECT count(*) FROM t");
        H_CHECK(rows == 100, "the rescue %s holds %lld rows, want 100", f,
                (long long)rows);
    }
    rd_kafka_destroy(p);
}

static void scenario_db_dir_removed(void) {
    static const char *const all[] = {"", "-wal", "-shm"};
    removed_files("sqlite-dr", all, 3, 1);
}

/* Only the -wal file removed: the database file is still at its path, but
 * the commits would go into the unlinked WAL (status RUNNING meanwhile)
 * and vanish with the process. */
static void scenario_wal_removed(void) {
    static const char *const wal[] = {"-wal"};
    removed_files("sqlite-wr", wal, 1, 0);
}

/* verify's "replayed" note took any surplus of the marker's filtered and
 * duplicate counts over what it found absent. A connector without dedup
 * has no business keys, so its sink can count no duplicate: a marker that
 * counts some over-counts (or hides records), and verify must fail it,
 * not call it a replay. */
static void scenario_verify_duplicates_without_dedup(void) {
    const char *topic = h_name("sqlite-vd");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("sqlite-vd"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 20, "{\"id\": %d, \"name\": \"n\"}");
    const char *db = path_in_workdir("vd.db");
    const char *cfg = config("vd.json", name, topic, db, "");
    pid_t pid = h_spawn(cfg, "vd.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    h_stop_clean(pid);
    const char *args[] = {"verify", cfg, NULL};
    int rc = h_tidemark("vd-before.out", args);
    H_CHECK(rc == 0, "inconclusive: verify before the change: exit %d\n%s", rc,
            h_read_file("vd-before.out"));
    char sql[512];
    snprintf(sql, sizeof sql,
             "UPDATE tidemark_markers SET duplicates = 3 WHERE connector = "
             "'%s'",
             name);
    sqlite3 *h = NULL;
    H_CHECK(sqlite3_open(db, &h) == SQLITE_OK &&
                sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK,
            "inconclusive: %s: %s", sql, sqlite3_errmsg(h));
    sqlite3_close(h);
    H_CHECK(h_sqlf(db,
                   "SELECT duplicates FROM tidemark_markers WHERE connector = "
                   "'%s'",
                   name) == 3,
            "inconclusive: the marker was not changed");
    rc = h_tidemark("vd.out", args);
    const char *out = h_read_file("vd.out");
    H_CHECK(rc == 1,
            "verify of a marker counting duplicates without dedup: "
            "exit %d, want 1\n%s",
            rc, out);
    expect_contains("verify", out, "without dedup");
    rd_kafka_destroy(p);
}

static const h_scenario SCENARIOS[] = {
    {"reset_verify", scenario_reset_verify},
    {"compacted_verify", scenario_compacted_verify},
    {"db_dir_removed", scenario_db_dir_removed},
    {"wal_removed", scenario_wal_removed},
    {"verify_duplicates_without_dedup",
     scenario_verify_duplicates_without_dedup},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "sqlite_e2e", SCENARIOS, H_NSCENARIOS(SCENARIOS));
}
