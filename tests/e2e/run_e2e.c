/* End-to-end tests of `tidemark run` against the real broker and the SQLite
 * sink: usage run_e2e TIDEMARK_BIN PLUGIN_DIR SCENARIO. Each scenario
 * states what it proves; every expected value is written here from what
 * the test produced, never read from the host's output. */
#include <errno.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* A connector config for the SQLite sink; extra is spliced in as further
 * top-level members (mapping, dedup, dead_letters, ...). */
static const char *sqlite_config(const char *file, const char *name,
                                 const char *topic, const char *db,
                                 const char *batch, const char *props,
                                 const char *extra) {
    static char text[8192];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\",\n"
             " \"kafka\": {\"bootstrap_servers\": \"%s\", \"topics\": "
             "[\"%s\"],\n"
             "           \"properties\": {%s}},\n"
             " \"batch\": {%s},\n"
             " \"sink\": {\"plugin\": \"sqlite\", \"settings\": {\"path\": "
             "\"%s\", \"table\": \"t\"}},\n"
             " \"state_dir\": \"%s/state-%s\",\n"
             " %s}\n",
             name, h_bootstrap(), topic, props ? props : "", batch, db,
             h_workdir(), file, extra);
    return h_write_file(file, text);
}

/* Every delivered offset is accounted for exactly once: rows plus dead
 * letters plus the marker's filtered and duplicate counts equal the data
 * records, with no (partition, offset) twice. */
static void check_no_dup(const char *db, int64_t want_rows) {
    int64_t rows = h_sqlf(db, "SELECT count(*) FROM t");
    int64_t distinct = h_sqlf(db, "SELECT count(*) FROM (SELECT DISTINCT "
                                  "_tm_partition, _tm_offset FROM t)");
    H_CHECK(rows == want_rows, "rows: %lld, expected %lld", (long long)rows,
            (long long)want_rows);
    H_CHECK(distinct == rows,
            "%lld rows but %lld distinct offsets: "
            "duplicates",
            (long long)rows, (long long)distinct);
}

/* The rows of each partition are exactly the records Kafka holds below the
 * sink's marker, each once, in a gap-free prefix of the log: the stored
 * (_tm_partition, _tm_offset) list, read in order from the database, equals
 * Kafka's own offsets (h_read_offsets) that are < the marker's next_offset.
 * Returns the number of rows checked. */
static int64_t check_prefix(const char *db, const char *connector,
                            const char *topic, int partitions) {
    sqlite3 *h = NULL;
    H_CHECK(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK,
            "open %s: %s", db, sqlite3_errmsg(h));
    sqlite3_busy_timeout(h, 5000);
    int64_t total = 0;
    for (int p = 0; p < partitions; p++) {
        int64_t *kafka = NULL;
        size_t nk = h_read_offsets(topic, p, &kafka);
        int64_t next = h_sqlf(db,
                              "SELECT next_offset FROM tidemark_markers WHERE "
                              "connector = '%s' AND topic = '%s' AND "
                              "\"partition\" = %d",
                              connector, topic, p);
        H_CHECK(next >= 0, "partition %d: no marker", p);
        sqlite3_stmt *st = NULL;
        H_CHECK(sqlite3_prepare_v2(h,
                                   "SELECT _tm_offset FROM t WHERE "
                                   "_tm_partition = ?1 ORDER BY _tm_offset",
                                   -1, &st, NULL) == SQLITE_OK,
                "prepare: %s", sqlite3_errmsg(h));
        sqlite3_bind_int(st, 1, p);
        size_t k = 0;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            int64_t off = sqlite3_column_int64(st, 0);
            H_CHECK(k < nk && kafka[k] < next && off == kafka[k],
                    "partition %d: stored offset %lld where Kafka's next "
                    "record below the marker %lld is %lld (a duplicate, a "
                    "gap or a row past the marker)",
                    p, (long long)off, (long long)next,
                    k < nk ? (long long)kafka[k] : -1LL);
            k++;
        }
        H_CHECK(rc == SQLITE_DONE, "read rows: %s", sqlite3_errmsg(h));
        sqlite3_finalize(st);
        H_CHECK(k == nk || kafka[k] >= next,
                "partition %d: Kafka's record at offset %lld is below the "
                "marker %lld but not stored (a gap)",
                p, (long long)kafka[k], (long long)next);
        total += (int64_t)k;
        free(kafka);
    }
    sqlite3_close(h);
    return total;
}

static const char *JSON_MAPPING =
    "\"mapping\": {\"mode\": \"json\", \"columns\": ["
    "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", "
    "\"required\": true},"
    "{\"name\": \"name\", \"pointer\": \"/name\", \"type\": \"text\"}]}";

/* Bad records end as dead letters with their reasons, at their offsets,
 * while the partition keeps moving; the group's offsets reach the end. */
static void scenario_bad_records(void) {
    const char *topic = h_name("bad");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("badrec"));
    h_create_topic(topic, 2, "max.message.bytes", "16777216");
    rd_kafka_t *p = h_producer(NULL, "16777216");
    h_produce_many(p, topic, 0, 0, 500, "{\"id\": %d, \"name\": \"n\"}");
    struct {
        const char *what, *reason;
        int64_t offset;
        size_t len;
    } bad[6] = {
        {"invalid JSON", "parse_error", 0, 0},
        {"binary garbage", "parse_error", 0, 0},
        {"a 10 MB value", "parse_error", 0, 10 * 1024 * 1024},
        {"missing field", "missing_field", 0, 0},
        {"wrong type", "type_mismatch", 0, 0},
        {"tombstone", "parse_error", 0, 0},
    };
    static const unsigned char garbage[] = {0xff, 0xfe, 0x00, 0x01, 0x80, 0xc3};
    char *big = malloc(bad[2].len);
    H_CHECK(big != NULL, "out of memory");
    memset(big, 'x', bad[2].len);
    bad[0].offset = h_produce(p, topic, 0, NULL, 0, "{\"id\": 1,", 9, 0, 0);
    bad[1].offset =
        h_produce(p, topic, 0, NULL, 0, garbage, sizeof garbage, 0, 0);
    bad[2].offset = h_produce(p, topic, 0, NULL, 0, big, bad[2].len, 0, 0);
    bad[3].offset =
        h_produce(p, topic, 0, NULL, 0, "{\"name\": \"x\"}", 13, 0, 0);
    bad[4].offset =
        h_produce(p, topic, 0, NULL, 0, "{\"id\": \"12\"}", 12, 0, 0);
    bad[5].offset = h_produce(p, topic, 0, "k", 1, NULL, 0, 0, 0);
    free(big);
    h_produce_many(p, topic, 0, 500, 500, "{\"id\": %d, \"name\": \"n\"}");
    h_produce_many(p, topic, 1, 1000, 300, "{\"id\": %d}");
    h_step("produced 1300 good and 6 bad records (10 MB one delivered)");

    const char *db = h_path("bad.db");
    const char *cfg = sqlite_config(
        "bad.json", name, topic, db,
        "\"max_records\": 200, \"max_wait_ms\": 100", NULL, JSON_MAPPING);
    pid_t pid = h_spawn(cfg, "bad.log");
    h_wait_caught_up(db, name, topic, 2, 60000);
    check_no_dup(db, 1300);
    H_CHECK(
        h_sqlf(db, "SELECT count(*) FROM tidemark_dead_letters") == 6,
        "dead letters: %lld, expected 6",
        (long long)h_sqlf(db, "SELECT count(*) FROM tidemark_dead_letters"));
    for (int i = 0; i < 6; i++) {
        int64_t n =
            h_sqlf(db,
                   "SELECT count(*) FROM tidemark_dead_letters WHERE "
                   "\"partition\"=0 AND \"offset\"=%lld AND reason='%s'",
                   (long long)bad[i].offset, bad[i].reason);
        H_CHECK(n == 1, "%s at offset %lld: no dead letter with reason %s",
                bad[i].what, (long long)bad[i].offset, bad[i].reason);
    }
    int64_t biglen = h_sqlf(db,
                            "SELECT length(value) FROM tidemark_dead_letters "
                            "WHERE \"offset\"=%lld",
                            (long long)bad[2].offset);
    H_CHECK(biglen == (int64_t)bad[2].len,
            "the 10 MB dead letter kept %lld bytes", (long long)biglen);
    H_CHECK(h_sqlf(db,
                   "SELECT count(*) FROM t WHERE _tm_partition=0 AND "
                   "_tm_offset > %lld",
                   (long long)bad[5].offset) == 500,
            "the partition did not keep moving past the bad records");
    /* Kafka's own view: the group's offsets reach the end too. */
    const char *group = NULL;
    char g[300];
    snprintf(g, sizeof g, "tidemark-%s", name);
    group = g;
    for (int part = 0; part < 2; part++) {
        int64_t lo, hi, got = -1;
        h_watermarks(topic, part, &lo, &hi);
        for (int tries = 0; tries < 50 && got != hi; tries++) {
            got = h_group_offset(group, topic, part);
            if (got != hi)
                h_sleep_ms(100);
        }
        H_CHECK(got == hi, "group offset of [%d]: %lld, high watermark %lld",
                part, (long long)got, (long long)hi);
    }
    h_stop_clean(pid);
    rd_kafka_destroy(p);
}

/* SIGTERM in the middle of a backlog: exit 0 within 10 s, and after a
 * restart every record is there exactly once. The SIGTERM is sent while
 * the host holds itself after its 10th commit (after_commit, stop; at most
 * 5 000 rows), then it is continued: mid-backlog whatever the machine's
 * speed (a SIGTERM timed by polling the rows could come after the host
 * drained the backlog). */
static void scenario_sigterm_backlog(void) {
    const char *topic = h_name("backlog");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("backlog"));
    h_create_topic(topic, 3, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < 3; part++)
        h_produce_many(p, topic, part, part * 40000, 40000,
                       "{\"id\": %d, \"name\": \"some payload text\"}");
    h_step("produced 120000 records");
    const char *db = h_path("backlog.db");
    const char *cfg = sqlite_config("backlog.json", name, topic, db,
                                    "\"max_records\": 500", NULL, JSON_MAPPING);
    pid_t pid = h_spawn_held(cfg, "backlog.log", "after_commit", 10);
    H_CHECK(kill(pid, SIGTERM) == 0, "SIGTERM: %s", strerror(errno));
    int64_t took;
    int rc = h_stop(pid, SIGCONT, 10000, &took);
    H_CHECK(rc == 0, "tidemark exited %d after SIGTERM (expected 0)", rc);
    h_step("SIGTERM at the 10th commit: exit 0 after %lld ms", (long long)took);
    int64_t rows = h_sqlf(db, "SELECT count(*) FROM t");
    H_CHECK(rows < 120000,
            "inconclusive: the backlog was done (%lld rows) "
            "before SIGTERM",
            (long long)rows);
    h_step("stopped mid-backlog at %lld rows", (long long)rows);
    H_CHECK(check_prefix(db, name, topic, 3) == rows,
            "the prefix check saw another row count than %lld",
            (long long)rows);
    h_step("at the stop: each partition's rows are Kafka's offsets below "
           "its marker, each once, no gap");
    pid = h_spawn(cfg, "backlog.log");
    h_wait_caught_up(db, name, topic, 3, 120000);
    check_no_dup(db, 120000);
    H_CHECK(check_prefix(db, name, topic, 3) == 120000,
            "after the restart: not all 120000 records in the prefix");
    H_CHECK(h_sqlf(db, "SELECT count(DISTINCT id) FROM t") == 120000,
            "ids: not 120000 distinct");
    h_stop_clean(pid);
    rd_kafka_destroy(p);
}

/* A transactional producer with aborted transactions: no aborted record
 * lands, and the marker reaches the high watermark (past the control
 * records) so that lag is 0. */
/* One transaction of 50 records to partition 0, aborted when t % 3 == 1
 * (its records written to the log before the abort, so that they really
 * sit between committed ones); returns the records it committed. */
static int produce_txn(rd_kafka_t *p, const char *topic, int t) {
    rd_kafka_error_t *e = rd_kafka_begin_transaction(p);
    H_CHECK(!e, "begin_transaction: %s", rd_kafka_error_string(e));
    char fmt[128];
    snprintf(fmt, sizeof fmt, "{\"id\": %%d, \"name\": \"txn%d\"}", t);
    for (int i = 0; i < 50; i++) {
        char val[128];
        snprintf(val, sizeof val, fmt, t * 100 + i);
        rd_kafka_resp_err_t err = rd_kafka_producev(
            p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
            RD_KAFKA_V_VALUE(val, strlen(val)),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        H_CHECK(!err, "produce: %s", rd_kafka_err2str(err));
    }
    int abort = t % 3 == 1;
    H_CHECK(rd_kafka_flush(p, 30000) == 0, "flush: not delivered");
    e = abort ? rd_kafka_abort_transaction(p, 30000)
              : rd_kafka_commit_transaction(p, 30000);
    H_CHECK(!e, "%s: %s", abort ? "abort" : "commit", rd_kafka_error_string(e));
    return abort ? 0 : 50;
}

static void scenario_transactions(void) {
    const char *topic = h_name("txn");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("txn"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(h_name("txn-producer"), NULL);
    int committed = 0;
    for (int t = 0; t < 9; t++)
        committed += produce_txn(p, topic, t);
    int64_t lo, hi;
    /* 450 records and 9 control records. The last transaction's marker is
     * written by the coordinator after commit_transaction returns, so the
     * high watermark may lag it a moment (seen under load: 408). */
    int64_t until = h_now_ms() + 30000;
    do {
        h_watermarks(topic, 0, &lo, &hi);
        if (hi == 459)
            break;
        h_sleep_ms(100);
    } while (h_now_ms() < until);
    H_CHECK(hi == 459,
            "inconclusive: high watermark %lld, expected 459 "
            "(450 records + 9 transaction markers)",
            (long long)hi);
    const char *db = h_path("txn.db");
    const char *cfg = sqlite_config("txn.json", name, topic, db,
                                    "\"max_records\": 40", NULL, JSON_MAPPING);
    pid_t pid = h_spawn(cfg, "txn.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    check_no_dup(db, committed);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t WHERE name IN ('txn1', 'txn4', "
                       "'txn7')") == 0,
            "records of aborted transactions landed");
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM tidemark_dead_letters") == 0,
            "unexpected dead letters");
    h_stop_clean(pid);
    rd_kafka_destroy(p);
}

/* `tidemark run CFG` once it claimed (a marker row in DB). */
/* The host (ENV added to its environment, NULL for none), once it claimed
 * a partition. */
static pid_t spawn_claimed_env(const char *cfg, const char *log, const char *db,
                               const char *const *env) {
    pid_t pid = h_spawn_env(cfg, log, env);
    int64_t t0 = h_now_ms();
    while (h_sqlf(db, "SELECT count(*) FROM tidemark_markers") < 1) {
        H_CHECK(h_now_ms() - t0 < 30000, "inconclusive: never claimed");
        h_sleep_ms(50);
    }
    return pid;
}

static pid_t spawn_claimed(const char *cfg, const char *log, const char *db) {
    return spawn_claimed_env(cfg, log, db, NULL);
}

/* Transaction markers and aborted records at the ends of batches that are
 * dropped and read again: each transaction is written while the test holds
 * the database's write lock past the commit's deadline, so the batch at the
 * sink answers RETRY (cut in half at its deadline) and the batch built
 * behind it, which may end in the empty range that carries the marker over
 * a transaction's control record, is dropped and read again after a seek.
 * At the end the marker must still reach the high watermark (the control
 * record carried again), with every committed record once and no aborted
 * one. */
static void scenario_transactions_reread(void) {
    char topic[256], name[256];
    snprintf(topic, sizeof topic, "%s", h_name("txnre"));
    snprintf(name, sizeof name, "%s", topic);
    const char *db = h_path("txnre.db");
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(h_name("txnre-producer"), NULL);
    const char *cfg = sqlite_config(
        "txnre.json", name, topic, db,
        "\"max_records\": 20, \"commit_timeout_ms\": 1000", NULL, JSON_MAPPING);
    pid_t pid = spawn_claimed(cfg, "txnre.log", db);
    int committed = 0;
    for (int t = 0; t < 9; t++) {
        sqlite3 *lock = NULL;
        H_CHECK(sqlite3_open(db, &lock) == SQLITE_OK &&
                    sqlite3_busy_timeout(lock, 10000) == SQLITE_OK &&
                    sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL) ==
                        SQLITE_OK,
                "cannot take the write lock: %s", sqlite3_errmsg(lock));
        committed += produce_txn(p, topic, t);
        h_sleep_ms(t % 2 ? 1300 : 2300);
        sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(lock);
        h_sleep_ms(t % 3 ? 150 : 600);
    }
    const char *log = h_read_file("txnre.log");
    H_CHECK(strstr(log, "RETRY") != NULL,
            "inconclusive: no commit answered RETRY under the lock");
    int64_t lo, hi;
    h_watermarks(topic, 0, &lo, &hi);
    h_step("high watermark %lld (450 records, 9 control records)",
           (long long)hi);
    h_wait_caught_up(db, name, topic, 1, 60000);
    check_no_dup(db, committed);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t WHERE name IN ('txn1', 'txn4', "
                       "'txn7')") == 0,
            "records of aborted transactions landed");
    h_stop_clean(pid);
    rd_kafka_destroy(p);
}

/* A sink whose every commit takes most of the poll budget, and keeps to its
 * deadline: max.poll.interval.ms 10 s (each commit's deadline at most 8 s
 * from the consumer's last poll), and each commit of the SQLite sink held
 * 5 s before its transaction (the fault action slow-from: a sleep, as long
 * on a loaded machine as on an idle one), after which it checks its
 * deadline at the first row and gives up past it. A commit fits its
 * deadline when it starts right after a poll. With the pipeline the next
 * batch is due while one commits; before reads were held meanwhile
 * (HOLD_READS) the consumer was not polled from then on, and the next
 * commit started with 5 s of its 8 s spent: every other batch answered
 * RETRY. Counted: the commits given up at their deadline (RETRY); none is
 * expected of a sink that fits its deadline. */
static void scenario_slow_sink_deadline(void) {
    char topic[256], name[256], db[4096];
    snprintf(topic, sizeof topic, "%s", h_name("slowdl"));
    snprintf(name, sizeof name, "%s", topic);
    snprintf(db, sizeof db, "%s", h_path("slowdl.db"));
    h_create_topic(topic, 1, NULL, NULL);
    const char *props = "\"session.timeout.ms\": \"6000\", "
                        "\"heartbeat.interval.ms\": \"500\", "
                        "\"max.poll.interval.ms\": \"10000\"";
    const char *cfg = sqlite_config("slowdl.json", name, topic, db,
                                    "\"max_records\": 50", props, JSON_MAPPING);
    /* The claim and the first commits are not slowed: from the 2nd hit. */
    static const char *const env[] = {
        "TIDEMARK_FAULT=before_begin", "TIDEMARK_FAULT_ACTION=slow-from",
        "TIDEMARK_FAULT_HIT=2", "TIDEMARK_FAULT_SLEEP_MS=5000", NULL};
    pid_t pid = h_spawn_env(cfg, "slowdl.log", env);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 400, "{\"id\": %d, \"name\": \"slow\"}");
    int64_t t0 = h_now_ms();
    while (h_sqlf(db, "SELECT coalesce(max(next_offset), 0) FROM "
                      "tidemark_markers") < 400 &&
           h_now_ms() - t0 < 150000)
        h_sleep_ms(200);
    int64_t took = h_now_ms() - t0;
    const char *log = h_read_file("slowdl.log");
    /* The reports themselves ("batch ID: RETRY: ..."), not the recovery
     * lines that quote the last of them. */
    int retries = 0;
    for (const char *at = log; (at = strstr(at, "msg=\"batch ")); at++) {
        const char *end = strchr(at, '\n'), *r = strstr(at, ": RETRY: ");
        retries += r && (!end || r < end);
    }
    int64_t rows = h_sqlf(db, "SELECT count(*) FROM t");
    h_step("%lld rows in %lld ms (batches of 50), %d commits answered RETRY",
           (long long)rows, (long long)took, retries);
    H_CHECK(rows == 400, "inconclusive: %lld rows in %lld ms", (long long)rows,
            (long long)took);
    /* Eight batches at least, all but the first slowed. */
    H_CHECK(took >= 7 * 5000,
            "inconclusive: 400 rows in %lld ms: the commits were not slowed",
            (long long)took);
    H_CHECK(retries == 0,
            "%d commits answered RETRY with a sink whose commits take 5 s of "
            "an 8 s budget",
            retries);
    h_stop_clean(pid);
    rd_kafka_destroy(p);
}

/* Filter and business-key dedup: filtered records are counted, a resend of
 * the same event (a new Kafka message) is a duplicate, inside one batch and
 * across batches, and the same key with another payload is a dead letter
 * identity_conflict. */
static void scenario_filter_dedup(void) {
    const char *topic = h_name("dedup");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("dedup"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    static const char *const first[] = {
        "{\"type\": \"edit\", \"k\": \"a\", \"v\": 1}", /* row */
        "{\"type\": \"new\", \"k\": \"b\", \"v\": 1}",  /* row */
        "{\"type\": \"log\", \"k\": \"c\", \"v\": 1}",  /* filtered */
        "{\"type\": \"edit\", \"k\": \"a\", \"v\": 1}", /* dup in batch */
        "{\"type\": \"new\", \"k\": \"b\", \"v\": 2}",  /* conflict */
        "{\"v\": 3}",                                   /* filtered */
    };
    for (size_t i = 0; i < sizeof first / sizeof first[0]; i++)
        h_produce(p, topic, 0, NULL, 0, first[i], strlen(first[i]), 0, 0);
    const char *db = h_path("dedup.db");
    const char *cfg = sqlite_config(
        "dedup.json", name, topic, db,
        "\"max_records\": 100, \"max_wait_ms\": 300", NULL,
        "\"mapping\": {\"mode\": \"json\", \"filter\": \"/type in [edit, "
        "new]\", \"columns\": ["
        "{\"name\": \"k\", \"pointer\": \"/k\", \"type\": \"text\", "
        "\"required\": true},"
        "{\"name\": \"v\", \"pointer\": \"/v\", \"type\": \"int\"}]},"
        "\"dedup\": {\"key\": [\"k\"]}");
    pid_t pid = h_spawn(cfg, "dedup.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    /* Across batches: the same events again, in a later batch. */
    h_produce(p, topic, 0, NULL, 0, first[0], strlen(first[0]), 0, 0);
    h_produce(p, topic, 0, NULL, 0, first[4], strlen(first[4]), 0, 0);
    h_wait_caught_up(db, name, topic, 1, 60000);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 2, "rows: %lld, expected 2",
            (long long)h_sqlf(db, "SELECT count(*) FROM t"));
    H_CHECK(h_sqlf(db, "SELECT v FROM t WHERE k='b'") == 1,
            "the first payload of key b did not win");
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM tidemark_dead_letters WHERE "
                       "reason='identity_conflict'") == 2,
            "identity conflicts: %lld, expected 2 (one in the batch, one "
            "against the stored key)",
            (long long)h_sqlf(db, "SELECT count(*) FROM tidemark_dead_letters "
                                  "WHERE reason='identity_conflict'"));
    H_CHECK(h_sqlf(db, "SELECT filtered FROM tidemark_markers") == 2,
            "filtered count: %lld, expected 2",
            (long long)h_sqlf(db, "SELECT filtered FROM tidemark_markers"));
    H_CHECK(h_sqlf(db, "SELECT duplicates FROM tidemark_markers") == 2,
            "duplicates: %lld, expected 2 (one in the batch, one across)",
            (long long)h_sqlf(db, "SELECT duplicates FROM tidemark_markers"));
    h_stop_clean(pid);
    rd_kafka_destroy(p);
}

/* Raw ("bronze") mode: key, value, headers and Kafka metadata as they are. */
static void scenario_raw(void) {
    const char *topic = h_name("raw");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("raw"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    static const unsigned char bin[] = {0x00, 0xff, 0x10};
    int64_t o1 =
        h_produce(p, topic, 0, "k1", 2, bin, sizeof bin, "trace", "abc");
    int64_t o2 = h_produce(p, topic, 0, NULL, 0, NULL, 0, NULL, NULL);
    const char *db = h_path("raw.db");
    const char *cfg =
        sqlite_config("raw.json", name, topic, db, "\"max_wait_ms\": 100", NULL,
                      "\"mapping\": {\"mode\": \"raw\"}");
    pid_t pid = h_spawn(cfg, "raw.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 2, "rows: expected 2");
    H_CHECK(
        h_sqlf(db,
               "SELECT count(*) FROM t WHERE \"offset\"=%lld AND key=X'6B31' "
               "AND value=X'00FF10' AND headers='[[\"trace\",\"abc\"]]'",
               (long long)o1) == 1,
        "record 1 not stored as it was (key k1, value 00ff10, header "
        "trace=abc)");
    H_CHECK(h_sqlf(db,
                   "SELECT count(*) FROM t WHERE \"offset\"=%lld AND key IS "
                   "NULL AND value IS NULL AND headers IS NULL",
                   (long long)o2) == 1,
            "the tombstone is not a row with null key, value and headers");
    h_stop_clean(pid);
    rd_kafka_destroy(p);
}

/* Scaling out, with the range (eager) assignor: a second host joins the
 * group mid-stream, then the first is killed with SIGKILL mid-batch; the
 * survivor takes every partition over from the sink's markers. Nothing is
 * lost or applied twice. */
/* Starts a host and waits until table t holds at least rows rows. */
static pid_t spawn_until_rows(const char *cfg, const char *log, const char *db,
                              int64_t rows) {
    pid_t pid = h_spawn(cfg, log);
    int64_t t0 = h_now_ms();
    while (h_sqlf(db, "SELECT count(*) FROM t") < rows) {
        H_CHECK(h_now_ms() - t0 < 60000, "%s: the host makes no progress", log);
        h_sleep_ms(20);
    }
    return pid;
}

static void scenario_two_hosts(void) {
    const char *topic = h_name("scale");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("scale"));
    h_create_topic(topic, 4, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < 4; part++)
        h_produce_many(p, topic, part, part * 1000000, 60000,
                       "{\"id\": %d, \"name\": \"first wave\"}");
    const char *db = h_path("scale.db");
    const char *props = "\"partition.assignment.strategy\": \"range\", "
                        "\"session.timeout.ms\": \"6000\", "
                        "\"heartbeat.interval.ms\": \"500\"";
    const char *cfg_a = sqlite_config(
        "a.json", name, topic, db, "\"max_records\": 300", props, JSON_MAPPING);
    const char *cfg_b = sqlite_config(
        "b.json", name, topic, db, "\"max_records\": 300", props, JSON_MAPPING);
    pid_t a = spawn_until_rows(cfg_a, "a.log", db, 3000);
    pid_t b = h_spawn(cfg_b, "b.log");
    for (int part = 0; part < 4; part++)
        h_produce_many(p, topic, part, part * 1000000 + 60000, 20000,
                       "{\"id\": %d, \"name\": \"second wave\"}");
    /* Host B owns partitions once their epoch moved past A's first claim. */
    int64_t t0 = h_now_ms();
    while (h_sqlf(db, "SELECT max(epoch) FROM tidemark_markers") < 2) {
        H_CHECK(h_now_ms() - t0 < 60000,
                "inconclusive: host B never claimed a partition");
        h_sleep_ms(50);
    }
    int64_t before = h_sqlf(db, "SELECT count(*) FROM t");
    H_CHECK(before < 320000, "inconclusive: all applied before the kill");
    /* The epochs as they were at the kill: B's join already raised them
     * (min(epoch) >= 2 held before the kill), so only a rise past these
     * proves the partitions were claimed again after it. */
    int64_t epoch_at_kill[4];
    for (int part = 0; part < 4; part++)
        epoch_at_kill[part] = h_sqlf(
            db, "SELECT epoch FROM tidemark_markers WHERE \"partition\" = %d",
            part);
    int rc = h_stop(a, SIGKILL, 5000, NULL);
    H_CHECK(rc == 128 + SIGKILL, "host A was not killed (exit %d)", rc);
    h_step("killed host A at %lld rows, epochs %lld %lld %lld %lld",
           (long long)before, (long long)epoch_at_kill[0],
           (long long)epoch_at_kill[1], (long long)epoch_at_kill[2],
           (long long)epoch_at_kill[3]);
    h_wait_caught_up(db, name, topic, 4, 120000);
    check_no_dup(db, 320000);
    H_CHECK(h_sqlf(db, "SELECT count(DISTINCT id) FROM t") == 320000,
            "ids: not 320000 distinct");
    /* range is an eager assignor: when A's session ends, B gives up all
     * four partitions and is assigned all four again, so every one of them
     * is claimed anew, A's among them. */
    for (int part = 0; part < 4; part++) {
        int64_t e = h_sqlf(db,
                           "SELECT epoch FROM tidemark_markers WHERE "
                           "\"partition\" = %d",
                           part);
        H_CHECK(e > epoch_at_kill[part],
                "partition %d was never claimed again after the kill (epoch "
                "%lld, %lld at the kill)",
                part, (long long)e, (long long)epoch_at_kill[part]);
    }
    h_stop_clean(b);
    rd_kafka_destroy(p);
}

/* Every record Kafka holds in TOPIC [PART] is a row of t once, none
 * other: the rows counted, against Kafka's own offsets. */
static int64_t check_exactly_once(const char *db, const char *topic, int part) {
    int64_t *kafka = NULL;
    size_t nk = h_read_offsets(topic, part, &kafka);
    int64_t rows = h_sqlf(db,
                          "SELECT count(*) FROM t WHERE _tm_topic = '%s' AND "
                          "_tm_partition = %d",
                          topic, part);
    int64_t distinct =
        h_sqlf(db,
               "SELECT count(*) FROM (SELECT DISTINCT _tm_offset FROM t "
               "WHERE _tm_topic = '%s' AND _tm_partition = %d)",
               topic, part);
    int64_t lo = h_sqlf(db,
                        "SELECT min(_tm_offset) FROM t WHERE _tm_topic = "
                        "'%s' AND _tm_partition = %d",
                        topic, part);
    int64_t hi = h_sqlf(db,
                        "SELECT max(_tm_offset) FROM t WHERE _tm_topic = "
                        "'%s' AND _tm_partition = %d",
                        topic, part);
    H_CHECK(nk > 0, "%s [%d]: Kafka holds no record", topic, part);
    H_CHECK(rows == (int64_t)nk && distinct == rows && lo == kafka[0] &&
                hi == kafka[nk - 1],
            "%s [%d]: %lld rows, %lld distinct offsets %lld..%lld; Kafka "
            "holds %zu records %lld..%lld (lost or duplicated records)",
            topic, part, (long long)rows, (long long)distinct, (long long)lo,
            (long long)hi, nk, (long long)kafka[0], (long long)kafka[nk - 1]);
    free(kafka);
    return rows;
}

/* The pipeline under rebalances: two topics whose partitions share their
 * numbers, small batches (so that a batch is nearly always at the sink while
 * the next is built), the cooperative assignor (partitions revoked one by
 * one while the others run on), host B joining and leaving again and again,
 * and host A reloaded (its batch settings changed, SIGHUP) in between. At the
 * end every record of every partition is in the table exactly once, in a
 * gap-free prefix below each marker, and every marker is at the log's end. */
static void scenario_rebalance_churn(void) {
    char tx[128], ty[128], name[256], topics[300];
    snprintf(tx, sizeof tx, "%s", h_name("churnx"));
    snprintf(ty, sizeof ty, "%s", h_name("churny"));
    snprintf(name, sizeof name, "%s", h_name("churn"));
    /* Two names in the config's topics list. */
    snprintf(topics, sizeof topics, "%s\", \"%s", tx, ty);
    const int parts = 4, per = 80000;
    h_create_topic(tx, parts, NULL, NULL);
    h_create_topic(ty, parts, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < parts; part++) {
        h_produce_many(p, tx, part, part * 1000000, per / 2,
                       "{\"id\": %d, \"name\": \"x\"}");
        h_produce_many(p, ty, part, 500000000 + part * 1000000, per / 2,
                       "{\"id\": %d, \"name\": \"y\"}");
    }
    char db[4096], state_a[4096];
    snprintf(db, sizeof db, "%s", h_path("churn.db"));
    snprintf(state_a, sizeof state_a, "%s", h_path("state-a.json"));
    const char *props =
        "\"partition.assignment.strategy\": \"cooperative-sticky\", "
        "\"session.timeout.ms\": \"6000\", \"heartbeat.interval.ms\": \"300\"";
    char cfg_b[4096];
    snprintf(cfg_b, sizeof cfg_b, "%s",
             sqlite_config("b.json", name, topics, db, "\"max_records\": 200",
                           props, JSON_MAPPING));
    char cfg_a_path[4096];
    snprintf(cfg_a_path, sizeof cfg_a_path, "%s",
             sqlite_config("a.json", name, topics, db, "\"max_records\": 150",
                           props, JSON_MAPPING));
    pid_t a = spawn_until_rows(cfg_a_path, "a.log", db, 2000);
    int reloads = 0, joins = 0, pauses = 0;
    for (int round = 0; round < 4; round++) {
        pid_t b = h_spawn(cfg_b, "b.log");
        h_sleep_ms(1500 + 300 * round);
        joins++;
        /* A paused by an operator and resumed while batches flow: the
         * batch out settles, what was fetched meanwhile is read again. */
        const char *pause[] = {"pause", "--state-dir", h_path("state-a.json"),
                               name, NULL};
        const char *resume[] = {"resume", "--state-dir", h_path("state-a.json"),
                                name, NULL};
        H_CHECK(h_tidemark("pause.out", pause) == 0, "tidemark pause: %s",
                h_read_file("pause.out"));
        h_sleep_ms(200 + 100 * round);
        H_CHECK(h_tidemark("resume.out", resume) == 0, "tidemark resume: %s",
                h_read_file("resume.out"));
        pauses++;
        /* A reloaded while B is in the group: its connector stops (the
         * batch at the sink settled) and starts again with new settings. */
        sqlite_config("a.json", name, topics, db,
                      round % 2 ? "\"max_records\": 150"
                                : "\"max_records\": 170",
                      props, JSON_MAPPING);
        H_CHECK(kill(a, SIGHUP) == 0, "kill: %s", strerror(errno));
        reloads++;
        for (int part = 0; part < parts; part++) {
            h_produce_many(p, tx, part, part * 1000000 + per / 2 + round * 100,
                           100, "{\"id\": %d, \"name\": \"x2\"}");
            h_produce_many(p, ty, part,
                           500000000 + part * 1000000 + per / 2 + round * 100,
                           100, "{\"id\": %d, \"name\": \"y2\"}");
        }
        h_sleep_ms(700);
        h_stop_clean(b);
    }
    h_step("%d joins and leaves of host B, %d pauses and %d reloads of host A",
           joins, pauses, reloads);
    for (int part = 0; part < parts; part++) {
        h_produce_many(p, tx, part, part * 1000000 + per, 1000,
                       "{\"id\": %d, \"name\": \"x3\"}");
        h_produce_many(p, ty, part, 500000000 + part * 1000000 + per, 1000,
                       "{\"id\": %d, \"name\": \"y3\"}");
    }
    h_wait_caught_up(db, name, tx, parts, 120000);
    h_wait_caught_up(db, name, ty, parts, 120000);
    const char *tps[2] = {tx, ty};
    int64_t total = 0;
    for (int k = 0; k < 2; k++)
        for (int part = 0; part < parts; part++)
            total += check_exactly_once(db, tps[k], part);
    h_step("%lld rows, each record of %d partitions exactly once",
           (long long)total, 2 * parts);
    h_stop_clean(a);
    rd_kafka_destroy(p);
}

/* Reads held while the next batch waits for a slow commit (HOLD_READS: a
 * max.poll.interval.ms that leaves a commit no time to spare holds them
 * whenever the next batch is due) meet what moves partitions and positions
 * under them: a second host joining and leaving (partitions revoked and
 * assigned while paused), an operator's pause and resume, and a reload.
 * Every record of every partition must be a row once, against Kafka's
 * own offsets. */
static void scenario_held_reads_churn(void) {
    char topic[256], name[256], db[4096], cfg_b[4096];
    snprintf(topic, sizeof topic, "%s", h_name("holdchurn"));
    snprintf(name, sizeof name, "%s", topic);
    snprintf(db, sizeof db, "%s", h_path("holdchurn.db"));
    const int parts = 4, per = 250;
    h_create_topic(topic, parts, NULL, NULL);
    const char *props =
        "\"partition.assignment.strategy\": \"cooperative-sticky\", "
        "\"session.timeout.ms\": \"6000\", \"heartbeat.interval.ms\": "
        "\"300\", \"max.poll.interval.ms\": \"10000\"";
    snprintf(cfg_b, sizeof cfg_b, "%s",
             sqlite_config("hb.json", name, topic, db, "\"max_records\": 40",
                           props, JSON_MAPPING));
    /* A's librdkafka says each pause (HOLD_READS' evidence, below). */
    char props_a[1024];
    snprintf(props_a, sizeof props_a, "%s, \"debug\": \"topic\"", props);
    const char *cfg_a =
        sqlite_config("ha.json", name, topic, db, "\"max_records\": 50",
                      props_a, JSON_MAPPING);
    /* Each of A's commits held 600 ms before its transaction (a sleep: as
     * long under a sanitizer or a loaded machine as on an idle one), so that
     * the next batch is due while one commits and far from its deadline. */
    const char *env_a[] = {
        "TIDEMARK_LOG_LEVEL=debug", "TIDEMARK_FAULT=before_begin",
        "TIDEMARK_FAULT_ACTION=slow-from", "TIDEMARK_FAULT_SLEEP_MS=600", NULL};
    pid_t a = spawn_claimed_env(cfg_a, "ha.log", db, env_a);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < parts; part++)
        h_produce_many(p, topic, part, part * 1000000, per,
                       "{\"id\": %d, \"name\": \"h\"}");
    int64_t t0 = h_now_ms();
    while (h_sqlf(db, "SELECT count(*) FROM t") < 100) {
        H_CHECK(h_now_ms() - t0 < 60000, "inconclusive: no rows");
        h_sleep_ms(50);
    }
    const char *pause[] = {"pause", "--state-dir", h_path("state-ha.json"),
                           name, NULL};
    const char *resume[] = {"resume", "--state-dir", h_path("state-ha.json"),
                            name, NULL};
    for (int round = 0; round < 3; round++) {
        pid_t b = h_spawn(cfg_b, "hb.log");
        h_sleep_ms(1500 + 300 * round);
        H_CHECK(h_tidemark("pause.out", pause) == 0, "tidemark pause: %s",
                h_read_file("pause.out"));
        h_sleep_ms(300);
        H_CHECK(h_tidemark("resume.out", resume) == 0, "tidemark resume: %s",
                h_read_file("resume.out"));
        sqlite_config("ha.json", name, topic, db,
                      round % 2 ? "\"max_records\": 50" : "\"max_records\": 45",
                      props_a, JSON_MAPPING);
        H_CHECK(kill(a, SIGHUP) == 0, "kill: %s", strerror(errno));
        for (int part = 0; part < parts; part++)
            h_produce_many(p, topic, part, part * 1000000 + per + round * 50,
                           50, "{\"id\": %d, \"name\": \"h2\"}");
        h_sleep_ms(1000);
        h_stop_clean(b);
    }
    int64_t before = h_sqlf(db, "SELECT count(*) FROM t");
    H_CHECK(before < parts * (per + 150),
            "inconclusive: caught up before the churn ended (%lld rows)",
            (long long)before);
    h_wait_caught_up(db, name, topic, parts, 180000);
    /* Paused with no RETRY (whose backpressure also pauses): held. */
    const char *log = h_read_file("ha.log");
    int pauses = 0;
    for (const char *at = log; (at = strstr(at, "]: Pause ")); at++)
        pauses++;
    H_CHECK(pauses > 0 && !strstr(log, ": RETRY: "),
            "inconclusive: %d partition pauses in host A's log, %s RETRY",
            pauses, strstr(log, ": RETRY: ") ? "a" : "no");
    int64_t total = 0;
    for (int part = 0; part < parts; part++)
        total += check_exactly_once(db, topic, part);
    h_step("%lld rows (%lld when the churn ended, %d partition pauses), "
           "each record of %d partitions exactly once",
           (long long)total, (long long)before, pauses, parts);
    h_stop_clean(a);
    rd_kafka_destroy(p);
}

/* Waits until the host's log holds text; fails naming what was awaited. */
static void wait_log(const char *log, const char *text, int timeout_ms) {
    int64_t t0 = h_now_ms();
    while (!strstr(h_read_file(log), text)) {
        H_CHECK(h_now_ms() - t0 < timeout_ms,
                "inconclusive: %s never said \"%s\" in %d ms", log, text,
                timeout_ms);
        h_sleep_ms(50);
    }
}

/* A fatal consumer error under a running host: a second process with the
 * same group.instance.id takes the static member's place, and the broker
 * fences host A (librdkafka: "Static consumer fenced", a fatal error, the
 * consumer finished for good; seen after a broker restart too). B is
 * killed at once; A must make a new consumer, rejoin, claim again and
 * catch up alone: exactly once, against the database.
 * Both hosts hold themselves at the fault point before_begin (stop; no
 * lock held there), so that the fence meets A mid-backlog whatever the
 * machine's speed: A at its 11th batch (at most 2 000 rows applied), B at
 * its first, after its join and its claim; then A goes on and meets the
 * fence. B's join used to race A's drain of the backlog: with B started
 * 3 s late, 4 of 10 runs were inconclusive ("all applied when A was
 * fenced", or A never fenced). The session timeout (30 s) outlasts A's
 * hold, so that B's join, not the end of A's session, replaces A. */
static void scenario_static_fenced(void) {
    const char *topic = h_name("static");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("static"));
    h_create_topic(topic, 2, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < 2; part++)
        h_produce_many(p, topic, part, part * 1000000, 100000,
                       "{\"id\": %d, \"name\": \"first wave\"}");
    const char *db = h_path("static.db");
    char props[512];
    snprintf(props, sizeof props,
             "\"group.instance.id\": \"%s-x\", \"session.timeout.ms\": "
             "\"30000\", \"heartbeat.interval.ms\": \"500\"",
             name);
    const char *cfg_a = sqlite_config(
        "a.json", name, topic, db, "\"max_records\": 200", props, JSON_MAPPING);
    const char *cfg_b = sqlite_config(
        "b.json", name, topic, db, "\"max_records\": 200", props, JSON_MAPPING);
    pid_t a = h_spawn_held(cfg_a, "a.log", "before_begin", 11);
    int64_t held = h_sqlf(db, "SELECT count(*) FROM t");
    pid_t b = h_spawn_held(cfg_b, "b.log", "before_begin", 1);
    H_CHECK(kill(a, SIGCONT) == 0, "SIGCONT A: %s", strerror(errno));
    wait_log("a.log", "Kafka consumer fatal error", 60000);
    int rc = h_stop(b, SIGKILL, 5000, NULL);
    H_CHECK(rc == 128 + SIGKILL, "host B was not killed (exit %d)", rc);
    int64_t at = h_sqlf(db, "SELECT count(*) FROM t");
    H_CHECK(at < 200000, "inconclusive: all applied when A was fenced");
    h_step("host A held at %lld rows, fenced by B's join (same "
           "group.instance.id, B held before its first batch) at %lld rows; "
           "B killed",
           (long long)held, (long long)at);
    wait_log("a.log", "consumer made again after a fatal error", 60000);
    for (int part = 0; part < 2; part++)
        h_produce_many(p, topic, part, part * 1000000 + 100000, 5000,
                       "{\"id\": %d, \"name\": \"second wave\"}");
    h_wait_caught_up(db, name, topic, 2, 120000);
    check_no_dup(db, 210000);
    H_CHECK(h_sqlf(db, "SELECT count(DISTINCT id) FROM t") == 210000,
            "ids: not 210000 distinct");
    H_CHECK(!strstr(h_read_file("a.log"), "FAILED"),
            "host A went FAILED instead of making a new consumer");
    h_stop_clean(a);
    rd_kafka_destroy(p);
}

static const char *header(rd_kafka_message_t *m, const char *name, char *out,
                          size_t size) {
    rd_kafka_headers_t *h = NULL;
    const void *v = NULL;
    size_t len = 0;
    if (rd_kafka_message_headers(m, &h) ||
        rd_kafka_header_get_last(h, name, &v, &len) || !v)
        return NULL;
    snprintf(out, size, "%.*s", (int)len, (const char *)v);
    return out;
}

/* Dead letters also to a Kafka topic: delivered before the sink commit,
 * with Kafka Connect's error headers naming the source record. */
static void scenario_dead_letter_topic(void) {
    const char *topic = h_name("src");
    char name[256], dlq[256];
    snprintf(name, sizeof name, "%s", h_name("dlq"));
    snprintf(dlq, sizeof dlq, "%s", h_name("dlq-topic"));
    h_create_topic(topic, 1, NULL, NULL);
    h_create_topic(dlq, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 10, "{\"id\": %d}");
    int64_t bad = h_produce(p, topic, 0, "key7", 4, "{oops", 5, 0, 0);
    h_produce_many(p, topic, 0, 10, 10, "{\"id\": %d}");
    const char *db = h_path("dlq.db");
    char extra[1024];
    snprintf(extra, sizeof extra,
             "%s, \"dead_letters\": {\"sink\": true, \"topic\": \"%s\"}",
             JSON_MAPPING, dlq);
    const char *cfg = sqlite_config("dlq.json", name, topic, db,
                                    "\"max_wait_ms\": 100", NULL, extra);
    pid_t pid = h_spawn(cfg, "dlq.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    check_no_dup(db, 20);
    H_CHECK(h_sqlf(db,
                   "SELECT count(*) FROM tidemark_dead_letters WHERE "
                   "\"offset\"=%lld",
                   (long long)bad) == 1,
            "the dead letter is not in the sink as well");
    h_stop_clean(pid);

    rd_kafka_conf_t *c = rd_kafka_conf_new();
    char err[512];
    rd_kafka_conf_set(c, "bootstrap.servers", h_bootstrap(), err, sizeof err);
    rd_kafka_conf_set(c, "group.id", h_name("dlq-reader"), err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    H_CHECK(rk != NULL, "consumer: %s", err);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, dlq, 0)->offset = 0;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_message_t *m = NULL;
    int64_t t0 = h_now_ms();
    while (h_now_ms() - t0 < 20000) {
        m = rd_kafka_consumer_poll(rk, 500);
        if (m && !m->err)
            break;
        if (m)
            rd_kafka_message_destroy(m);
        m = NULL;
    }
    H_CHECK(m != NULL, "no record on the dead-letter topic %s", dlq);
    char v[256], want_off[32];
    snprintf(want_off, sizeof want_off, "%lld", (long long)bad);
    H_CHECK(m->len == 5 && memcmp(m->payload, "{oops", 5) == 0,
            "dead-letter value is not the original");
    H_CHECK(m->key_len == 4 && memcmp(m->key, "key7", 4) == 0,
            "dead-letter key is not the original");
    H_CHECK(header(m, "__connect.errors.topic", v, sizeof v) &&
                strcmp(v, topic) == 0,
            "header __connect.errors.topic");
    H_CHECK(header(m, "__connect.errors.partition", v, sizeof v) &&
                strcmp(v, "0") == 0,
            "header __connect.errors.partition");
    H_CHECK(header(m, "__connect.errors.offset", v, sizeof v) &&
                strcmp(v, want_off) == 0,
            "header __connect.errors.offset: %s, expected %s",
            header(m, "__connect.errors.offset", v, sizeof v) ? v : "(none)",
            want_off);
    H_CHECK(header(m, "tidemark.reason", v, sizeof v) &&
                strcmp(v, "parse_error") == 0,
            "header tidemark.reason");
    rd_kafka_message_destroy(m);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    rd_kafka_destroy(p);
}

/* start=latest: a partition without a marker starts at the end; what was
 * there before is not read. A pattern subscription finds both topics. */
static void scenario_latest_and_regex(void) {
    char t1[256], t2[256], name[256], re[300];
    snprintf(t1, sizeof t1, "%s", h_name("rx-a"));
    snprintf(t2, sizeof t2, "%s", h_name("rx-b"));
    snprintf(name, sizeof name, "%s", h_name("latest"));
    h_create_topic(t1, 1, NULL, NULL);
    h_create_topic(t2, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, t1, 0, 0, 7, "{\"id\": %d, \"name\": \"old\"}");
    h_produce_many(p, t2, 0, 0, 3, "{\"id\": %d, \"name\": \"old\"}");
    const char *db = h_path("latest.db");
    /* The suffix after "rx-a"/"rx-b" is this run's id: match both. */
    snprintf(re, sizeof re, "^rx-[ab]%s$", t1 + 4);
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
        H_CHECK(h_now_ms() - t0 < 60000,
                "the pattern did not claim both topics");
        h_sleep_ms(50);
    }
    H_CHECK(h_sqlf(db,
                   "SELECT next_offset FROM tidemark_markers WHERE "
                   "topic='%s'",
                   t1) == 7,
            "start=latest: %s did not start at its end (7)", t1);
    h_produce_many(p, t1, 0, 100, 4, "{\"id\": %d, \"name\": \"new\"}");
    h_produce_many(p, t2, 0, 200, 2, "{\"id\": %d, \"name\": \"new\"}");
    h_wait_caught_up(db, name, t1, 1, 60000);
    h_wait_caught_up(db, name, t2, 1, 60000);
    check_no_dup(db, 6);
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t WHERE name='old'") == 0,
            "records from before the start were read");
    h_stop_clean(pid);
    rd_kafka_destroy(p);
}

/* A number from a status file ("key": N), or -1: the fault tests use the
 * host's own counters only as proof that the fault happened, never as the
 * result. */
static int64_t status_number(const char *state_dir, const char *connector,
                             const char *key) {
    char path[8192], pat[128];
    snprintf(path, sizeof path, "%s/%s/status.json", state_dir, connector);
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *at = strstr(buf, pat);
    return at ? strtoll(at + strlen(pat), NULL, 10) : -1;
}

/* RETRY with backpressure: the test holds SQLite's write lock past the
 * sink's busy timeout; commits return RETRY and are retried (the marker
 * stays put meanwhile); once the lock is gone everything lands once. */
static void scenario_retry_locked(void) {
    const char *topic = h_name("retry");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("retry"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 100, "{\"id\": %d}");
    const char *db = h_path("retry.db");
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": "
             "\"%s\", \"topics\": [\"%s\"], \"properties\": "
             "{\"session.timeout.ms\": \"6000\", "
             "\"heartbeat.interval.ms\": \"500\"}}, \"batch\": "
             "{\"max_wait_ms\": 100}, \"sink\": {\"plugin\": \"sqlite\", "
             "\"settings\": {\"path\": \"%s\", \"table\": \"t\", "
             "\"busy_timeout_ms\": 100}}, \"state_dir\": \"%s/state\", %s}",
             name, h_bootstrap(), topic, db, h_workdir(), JSON_MAPPING);
    const char *cfg = h_write_file("retry.json", text);
    char state[4096];
    snprintf(state, sizeof state, "%s/state", h_workdir());
    pid_t pid = h_spawn(cfg, "retry.log");
    h_wait_caught_up(db, name, topic, 1, 60000);

    sqlite3 *lock = NULL;
    H_CHECK(sqlite3_open(db, &lock) == SQLITE_OK &&
                sqlite3_exec(lock, "BEGIN IMMEDIATE", NULL, NULL, NULL) ==
                    SQLITE_OK,
            "cannot take the write lock: %s", sqlite3_errmsg(lock));
    int64_t retries0 = status_number(state, name, "retries");
    h_produce_many(p, topic, 0, 100, 200, "{\"id\": %d}");
    int64_t t0 = h_now_ms();
    while (status_number(state, name, "retries") < retries0 + 3) {
        H_CHECK(h_now_ms() - t0 < 30000,
                "inconclusive: no RETRY seen while the lock was held");
        h_sleep_ms(100);
    }
    H_CHECK(h_sqlf(db, "SELECT next_offset FROM tidemark_markers") == 100,
            "the marker moved while the sink could not write");
    h_step("%lld retries while locked",
           (long long)(status_number(state, name, "retries") - retries0));

    /* A first SIGTERM cannot finish the batch while the lock is held (it
     * tries for 5 s); a second one exits at once, and that is safe. */
    kill(pid, SIGTERM);
    h_sleep_ms(500);
    H_CHECK(waitpid(pid, NULL, WNOHANG) == 0,
            "inconclusive: the host exited on the first SIGTERM although "
            "its batch could not be committed");
    int64_t took;
    int rc = h_stop(pid, SIGTERM, 2000, &took);
    H_CHECK(rc == 128 + SIGTERM, "second SIGTERM: exit %d, expected %d", rc,
            128 + SIGTERM);
    h_step("second SIGTERM: exit %d after %lld ms", rc, (long long)took);
    H_CHECK(h_sqlf(db, "SELECT next_offset FROM tidemark_markers") == 100,
            "the marker moved although nothing could be written");
    sqlite3_exec(lock, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(lock);
    pid = h_spawn(cfg, "retry.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    check_no_dup(db, 300);
    h_stop_clean(pid);
    rd_kafka_destroy(p);
}

/* One process, two connectors (each on its own thread, with its own
 * consumer and sink): both complete, neither sees the other's records. */
static void scenario_two_connectors(void) {
    char t1[256], t2[256], n1[256], n2[256];
    snprintf(t1, sizeof t1, "%s", h_name("two-a"));
    snprintf(t2, sizeof t2, "%s", h_name("two-b"));
    snprintf(n1, sizeof n1, "%s", h_name("conn-a"));
    snprintf(n2, sizeof n2, "%s", h_name("conn-b"));
    h_create_topic(t1, 2, NULL, NULL);
    h_create_topic(t2, 3, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < 2; part++)
        h_produce_many(p, t1, part, part * 1000, 700, "{\"id\": %d}");
    for (int part = 0; part < 3; part++)
        h_produce_many(p, t2, part, part * 1000, 300, "{\"id\": %d}");
    const char *db1 = h_path("two-a.db"), *db2 = h_path("two-b.db");
    const char *c1 = sqlite_config("two-a.json", n1, t1, db1,
                                   "\"max_records\": 100", NULL, JSON_MAPPING);
    const char *c2 = sqlite_config("two-b.json", n2, t2, db2,
                                   "\"max_records\": 100", NULL, JSON_MAPPING);
    pid_t pid = h_spawn2(c1, c2, "two.log");
    h_wait_caught_up(db1, n1, t1, 2, 60000);
    h_wait_caught_up(db2, n2, t2, 3, 60000);
    check_no_dup(db1, 1400);
    check_no_dup(db2, 900);
    h_stop_clean(pid);
    rd_kafka_destroy(p);
}

/* The zombie: host A stops itself inside a commit (fault point
 * before_begin, action stop), the group gives its partitions to host B,
 * which claims them (raising the epochs) and applies everything. When A
 * resumes, its batch is FENCED: nothing of it lands, and A never claims
 * outside a rebalance. Finally both share the work with nothing doubled. */
static void scenario_zombie(void) {
    const char *topic = h_name("zombie");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("zombie"));
    h_create_topic(topic, 2, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < 2; part++)
        h_produce_many(p, topic, part, part * 10000, 2000, "{\"id\": %d}");
    const char *db = h_path("zombie.db");
    const char *props = "\"session.timeout.ms\": \"6000\", "
                        "\"heartbeat.interval.ms\": \"500\"";
    const char *cfg_a =
        sqlite_config("za.json", name, topic, db, "\"max_records\": 100", props,
                      JSON_MAPPING);
    const char *cfg_b =
        sqlite_config("zb.json", name, topic, db, "\"max_records\": 100", props,
                      JSON_MAPPING);
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    const char *env[] = {"TIDEMARK_FAULT=before_begin",
                         "TIDEMARK_FAULT_ACTION=stop", "TIDEMARK_FAULT_HIT=5",
                         fp.fd_env, NULL};
    pid_t a = h_spawn_env(cfg_a, "za.log", env);
    h_fault_wait(&fp, "before_begin", a, 1);
    int64_t applied_by_a = h_sqlf(db, "SELECT count(*) FROM t");
    h_step("host A stopped inside a commit after %lld rows",
           (long long)applied_by_a);

    pid_t b = h_spawn(cfg_b, "zb.log");
    h_wait_caught_up(db, name, topic, 2, 60000);
    check_no_dup(db, 4000);
    H_CHECK(h_sqlf(db, "SELECT min(epoch) FROM tidemark_markers") >= 2,
            "inconclusive: host B did not claim every partition");

    kill(a, SIGCONT);
    char state_a[4096];
    snprintf(state_a, sizeof state_a, "%s/state-za.json", h_workdir());
    int64_t t0 = h_now_ms();
    while (status_number(state_a, name, "fenced") < 1) {
        H_CHECK(h_now_ms() - t0 < 30000,
                "host A's in-flight batch was not FENCED after it resumed");
        h_sleep_ms(100);
    }
    h_step("host A resumed and its batch was fenced");
    check_no_dup(db, 4000);
    for (int part = 0; part < 2; part++)
        h_produce_many(p, topic, part, part * 10000 + 2000, 500,
                       "{\"id\": %d}");
    h_wait_caught_up(db, name, topic, 2, 60000);
    check_no_dup(db, 5000);
    H_CHECK(h_sqlf(db, "SELECT count(DISTINCT id) FROM t") == 5000,
            "ids: not 5000 distinct");
    h_stop_clean(a);
    h_stop_clean(b);
    rd_kafka_destroy(p);
}

static void expect_contains(const char *what, const char *text,
                            const char *needle) {
    H_CHECK(strstr(text, needle) != NULL, "%s: \"%s\" not in:\n%s", what,
            needle, text);
}

/* `tidemark status` on a live, a killed and a failed host (the failure: a
 * marker below the log start offset, records deleted before they were
 * applied), with the exit codes a health check relies on. */
static void scenario_status_states(void) {
    const char *topic = h_name("st");
    char name[256], state[4096];
    snprintf(name, sizeof name, "%s", h_name("st"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 100, "{\"id\": %d}");
    const char *db = h_path("st.db");
    /* A short session: the killed host's membership must lapse before
     * the restarted one is given the partition. */
    const char *cfg = sqlite_config(
        "st.json", name, topic, db, "\"max_wait_ms\": 100",
        "\"session.timeout.ms\": \"6000\", \"heartbeat.interval.ms\": \"500\"",
        JSON_MAPPING);
    snprintf(state, sizeof state, "%s/state-st.json", h_workdir());
    const char *status_args[] = {"status", "--state-dir", state, name, NULL};

    pid_t pid = h_spawn(cfg, "st.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    /* The status file is written every second: waited for until it names
     * the partition (a fixed 1.5 s assumed the writer on time). */
    char status_rel[1024];
    snprintf(status_rel, sizeof status_rel, "state-st.json/%s/status.json",
             name);
    int64_t t_st = h_now_ms();
    while (!strstr(h_read_file(status_rel), topic)) {
        H_CHECK(h_now_ms() - t_st < 60000,
                "the status file does not name %s 60 s after the catch-up: "
                "%s",
                topic, h_read_file(status_rel));
        h_sleep_ms(100);
    }
    int rc = h_tidemark("status-live.out", status_args);
    const char *out = h_read_file("status-live.out");
    H_CHECK(rc == 0, "status of a live host: exit %d, expected 0\n%s", rc, out);
    expect_contains("live host", out, "RUNNING");
    expect_contains("live host: its partition", out, topic);

    rc = h_stop(pid, SIGKILL, 5000, NULL);
    H_CHECK(rc == 128 + SIGKILL, "the host was not killed");
    rc = h_tidemark("status-killed.out", status_args);
    out = h_read_file("status-killed.out");
    H_CHECK(rc == 2, "status of a killed host: exit %d, expected 2\n%s", rc,
            out);
    expect_contains("killed host", out, "STOPPED");

    /* Records 100..199 arrive, and 100..149 are deleted before the host
     * comes back: its marker (100) is below the log start (150). */
    h_produce_many(p, topic, 0, 100, 100, "{\"id\": %d}");
    h_delete_records(topic, 0, 150);
    int64_t lo, hi;
    h_watermarks(topic, 0, &lo, &hi);
    H_CHECK(lo == 150, "inconclusive: log start %lld after DeleteRecords",
            (long long)lo);
    pid = h_spawn(cfg, "st-failed.log");
    int64_t t0 = h_now_ms();
    for (;;) {
        rc = h_tidemark("status-failed.out", status_args);
        out = h_read_file("status-failed.out");
        if (strstr(out, "FAILED"))
            break;
        H_CHECK(h_now_ms() - t0 < 30000, "the host did not go FAILED:\n%s",
                out);
        h_sleep_ms(200);
    }
    H_CHECK(rc == 2, "status of a failed host: exit %d, expected 2", rc);
    expect_contains("failed host", out, "below the log start offset 150");
    H_CHECK(h_sqlf(db, "SELECT next_offset FROM tidemark_markers") == 100,
            "the marker moved although the connector failed");
    H_CHECK(h_sqlf(db, "SELECT count(*) FROM t") == 100,
            "rows were written although the connector failed");
    int64_t took;
    rc = h_stop(pid, SIGTERM, 10000, &took);
    H_CHECK(rc == 1, "a failed host exits %d on SIGTERM, expected 1", rc);
    rd_kafka_destroy(p);
}

/* CONFLICT: the marker is moved under a running host (here by hand, as a
 * stray writer would); its next batch no longer continues the marker, the
 * sink refuses it whole, and the host re-reads the markers, seeks there and
 * goes on from the marker, never writing over the gap. */
static void scenario_conflict(void) {
    const char *topic = h_name("cf");
    char name[256], state[4096];
    snprintf(name, sizeof name, "%s", h_name("cf"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 100, "{\"id\": %d}");
    const char *db = h_path("cf.db");
    const char *cfg = sqlite_config("cf.json", name, topic, db,
                                    "\"max_wait_ms\": 300", NULL, JSON_MAPPING);
    snprintf(state, sizeof state, "%s/state-cf.json", h_workdir());
    pid_t pid = h_spawn(cfg, "cf.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    sqlite3 *w = NULL;
    H_CHECK(sqlite3_open(db, &w) == SQLITE_OK, "open %s", db);
    sqlite3_busy_timeout(w, 5000);
    H_CHECK(sqlite3_exec(w, "UPDATE tidemark_markers SET next_offset = 150",
                         NULL, NULL, NULL) == SQLITE_OK,
            "cannot move the marker: %s", sqlite3_errmsg(w));
    sqlite3_close(w);
    h_produce_many(p, topic, 0, 100, 100, "{\"id\": %d}");
    h_wait_caught_up(db, name, topic, 1, 60000);
    H_CHECK(status_number(state, name, "conflicts") >= 1,
            "inconclusive: no CONFLICT was answered");
    check_no_dup(db, 150);
    H_CHECK(h_sqlf(db,
                   "SELECT count(*) FROM t WHERE _tm_offset BETWEEN 100 AND "
                   "149") == 0,
            "records behind the moved marker were written");
    H_CHECK(h_sqlf(db,
                   "SELECT count(*) FROM t WHERE _tm_offset BETWEEN 150 AND "
                   "199") == 50,
            "records after the moved marker are missing");
    h_stop_clean(pid);
    rd_kafka_destroy(p);
}

static void pg_wait_caught_up(const char *connector, const char *topic,
                              int partitions, int timeout_ms) {
    int64_t t0 = h_now_ms();
    int64_t want = 0;
    for (int part = 0; part < partitions; part++) {
        int64_t lo, hi;
        h_watermarks(topic, part, &lo, &hi);
        want += hi;
    }
    for (;;) {
        int64_t at =
            h_pg_int("SELECT sum(next_offset) FROM tidemark_markers WHERE "
                     "connector = '%s' AND topic = '%s'",
                     connector, topic);
        if (at == want)
            return;
        H_CHECK(h_now_ms() - t0 < timeout_ms,
                "markers at %lld of %lld after %d ms", (long long)at,
                (long long)want, timeout_ms);
        h_sleep_ms(100);
    }
}

/* The PostgreSQL sink under `tidemark run`: dedup on the event id, resends
 * and malformed records, a SIGKILL mid-backlog, a restart; checked in the
 * database: every record once, every resend a duplicate, every malformed
 * record a dead letter. */
static void scenario_postgres_sigkill(void) {
    const char *topic = h_name("pgk");
    char name[256], table[256];
    snprintf(name, sizeof name, "%s", h_name("pgk"));
    snprintf(table, sizeof table, "e2e_%s", h_name("pgk") + 4);
    h_create_topic(topic, 3, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < 3; part++)
        h_produce_many(p, topic, part, part * 100000, 10000,
                       "{\"id\": %d, \"name\": \"pg\"}");
    h_produce_many(p, topic, 0, 0, 300, "{\"id\": %d, \"name\": \"pg\"}");
    h_produce(p, topic, 1, NULL, 0, "{broken", 7, 0, 0);
    h_produce(p, topic, 2, NULL, 0, "{\"name\": \"no id\"}", 17, 0, 0);
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": "
             "\"%s\", \"topics\": [\"%s\"], \"properties\": "
             "{\"session.timeout.ms\": \"6000\", "
             "\"heartbeat.interval.ms\": \"500\"}}, \"batch\": "
             "{\"max_records\": 500}, \"sink\": {\"plugin\": "
             "\"postgres\", \"settings\": {\"conninfo\": "
             "\"${env:TIDEMARK_PG_CONNINFO}\", \"table\": \"%s\"}}, "
             "\"state_dir\": \"%s/state\", %s, \"dedup\": {\"key\": "
             "[\"id\"]}}",
             name, h_bootstrap(), topic, table, h_workdir(), JSON_MAPPING);
    const char *cfg = h_write_file("pgk.json", text);
    /* Killed while it holds itself after its 6th commit (after_commit,
     * stop; at most 3 000 rows): mid-backlog whatever the machine's speed,
     * where a kill timed by polling the rows could come after the end. */
    pid_t pid = h_spawn_held(cfg, "pgk.log", "after_commit", 6);
    int rc = h_stop(pid, SIGKILL, 5000, NULL);
    H_CHECK(rc == 128 + SIGKILL, "the host was not killed");
    int64_t rows = h_pg_int("SELECT count(*) FROM \"%s\"", table);
    H_CHECK(rows > 0 && rows < 30000,
            "inconclusive: %lld rows at the kill (want 0 < rows < 30000)",
            (long long)rows);
    h_step("SIGKILL at %lld rows", (long long)rows);
    pid = h_spawn(cfg, "pgk.log");
    pg_wait_caught_up(name, topic, 3, 120000);
    rows = h_pg_int("SELECT count(*) FROM \"%s\"", table);
    H_CHECK(rows == 30000, "rows: %lld, expected 30000", (long long)rows);
    H_CHECK(h_pg_int("SELECT count(*) FROM (SELECT DISTINCT _tm_partition, "
                     "_tm_offset FROM \"%s\") x",
                     table) == 30000,
            "a (partition, offset) stored twice");
    H_CHECK(h_pg_int("SELECT count(DISTINCT id) FROM \"%s\"", table) == 30000,
            "ids: not 30000 distinct");
    H_CHECK(h_pg_int("SELECT sum(duplicates) FROM tidemark_markers WHERE "
                     "connector = '%s'",
                     name) == 300,
            "duplicates: %lld, expected the 300 resends",
            (long long)h_pg_int("SELECT sum(duplicates) FROM tidemark_markers "
                                "WHERE connector = '%s'",
                                name));
    H_CHECK(
        h_pg_int("SELECT count(*) FROM tidemark_dead_letters WHERE connector "
                 "= '%s'",
                 name) == 2,
        "dead letters: expected the 2 malformed records");
    h_stop_clean(pid);
    const char *args[] = {"verify", cfg, NULL};
    rc = h_tidemark("verify.out", args);
    H_CHECK(rc == 0, "tidemark verify: exit %d\n%s", rc,
            h_read_file("verify.out"));
    rd_kafka_destroy(p);
}

static void sql_exec(const char *db, const char *sql) {
    sqlite3 *h = NULL;
    H_CHECK(sqlite3_open(db, &h) == SQLITE_OK, "open %s", db);
    sqlite3_busy_timeout(h, 5000);
    char *msg = NULL;
    H_CHECK(sqlite3_exec(h, sql, NULL, NULL, &msg) == SQLITE_OK, "%s: %s", sql,
            msg ? msg : sqlite3_errmsg(h));
    sqlite3_close(h);
}

/* `tidemark verify` is itself tested by mutation: on a finished sink it
 * passes; with one row stored twice, one row deleted, or one dead letter
 * deleted (each in its own copy of the database) it fails, naming the
 * partition and the offset. */
static void scenario_verify_mutations(void) {
    const char *topic = h_name("vm");
    char name[256];
    snprintf(name, sizeof name, "%s", h_name("vm"));
    h_create_topic(topic, 2, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 100, "{\"id\": %d}");
    int64_t bad = h_produce(p, topic, 0, NULL, 0, "{oops", 5, 0, 0);
    h_produce_many(p, topic, 0, 100, 100, "{\"id\": %d}");
    h_produce_many(p, topic, 1, 1000, 100, "{\"id\": %d}");
    const char *db = h_path("vm.db");
    const char *cfg = sqlite_config("vm.json", name, topic, db,
                                    "\"max_wait_ms\": 100", NULL, JSON_MAPPING);
    pid_t pid = h_spawn(cfg, "vm.log");
    h_wait_caught_up(db, name, topic, 2, 60000);
    h_stop_clean(pid);

    const char *args[] = {"verify", cfg, NULL};
    int rc = h_tidemark("verify-ok.out", args);
    const char *out = h_read_file("verify-ok.out");
    H_CHECK(rc == 0, "verify of an intact sink: exit %d\n%s", rc, out);
    expect_contains("intact sink", out,
                    "kafka_records=301 rows=300 "
                    "dead_letters=1");
    expect_contains("intact sink", out, "result=OK");

    struct {
        const char *what, *sql_fmt, *expect_fmt;
        int64_t part, offset;
    } mut[] = {
        {"a row stored twice",
         "INSERT INTO t SELECT * FROM t WHERE _tm_partition=%lld AND "
         "_tm_offset=%lld",
         "[%lld] offset %lld: stored 2 times", 0, 17},
        {"a row deleted",
         "DELETE FROM t WHERE _tm_partition=%lld AND _tm_offset=%lld",
         "[%lld] offset %lld: in Kafka, below the marker, but not in the sink",
         1, 42},
        {"a dead letter deleted",
         "DELETE FROM tidemark_dead_letters WHERE \"partition\"=%lld AND "
         "\"offset\"=%lld",
         "[%lld] offset %lld: in Kafka, below the marker, but not in the sink",
         0, bad},
    };
    for (int i = 0; i < 3; i++) {
        char copy[64], file[64], outname[64], sql[512], want[256];
        snprintf(copy, sizeof copy, "vm-%d.db", i);
        snprintf(file, sizeof file, "vm-%d.json", i);
        snprintf(outname, sizeof outname, "verify-%d.out", i);
        const char *copy_path = h_path(copy);
        snprintf(sql, sizeof sql, "VACUUM INTO '%s'", copy_path);
        sql_exec(db, sql);
        snprintf(sql, sizeof sql, mut[i].sql_fmt, (long long)mut[i].part,
                 (long long)mut[i].offset);
        sql_exec(copy_path, sql);
        const char *mcfg =
            sqlite_config(file, name, topic, copy_path, "\"max_wait_ms\": 100",
                          NULL, JSON_MAPPING);
        const char *margs[] = {"verify", mcfg, NULL};
        rc = h_tidemark(outname, margs);
        out = h_read_file(outname);
        H_CHECK(rc == 1, "verify with %s: exit %d, expected 1\n%s", mut[i].what,
                rc, out);
        snprintf(want, sizeof want, mut[i].expect_fmt, (long long)mut[i].part,
                 (long long)mut[i].offset);
        expect_contains(mut[i].what, out, want);
        expect_contains(mut[i].what, out, "result=FAIL");
        h_step("verify caught %s: %s", mut[i].what, want);
    }
    rd_kafka_destroy(p);
}

/* The iceberg-lite sink under `tidemark run`, through a SIGKILL and a
 * restart: verify passes, and pyiceberg (not our code) reads exactly the
 * records published to Kafka, each once. */
static void scenario_iceberg_run(void) {
    const char *py = getenv("TIDEMARK_VENV_PYTHON");
    H_CHECK(py && *py,
            "TIDEMARK_VENV_PYTHON is not set (scripts/python-venv.sh)");
    const char *topic = h_name("ice");
    char name[256], table[4096];
    snprintf(name, sizeof name, "%s", h_name("ice"));
    snprintf(table, sizeof table, "%s/table", h_workdir());
    h_create_topic(topic, 2, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    char *expected = malloc(1 << 20);
    H_CHECK(expected != NULL, "out of memory");
    size_t n = (size_t)snprintf(expected, 8, "[");
    int count = 6000;
    for (int part = 0; part < 2; part++)
        h_produce_many(p, topic, part, part * 100000, 3000,
                       "{\"id\": %d, \"name\": \"ice\"}");
    /* A malformed record after them: a dead letter at offset 3000. */
    h_produce(p, topic, 0, NULL, 0, "{oops", 5, 0, 0);
    char text[16384];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\", \"kafka\": {\"bootstrap_servers\": "
             "\"%s\", \"topics\": [\"%s\"], \"properties\": "
             "{\"session.timeout.ms\": \"6000\", "
             "\"heartbeat.interval.ms\": \"500\"}}, \"batch\": "
             "{\"max_records\": 200}, \"sink\": {\"plugin\": "
             "\"iceberg_lite\", \"settings\": {\"path\": \"%s\"}}, "
             "\"state_dir\": \"%s/state\", %s}",
             name, h_bootstrap(), topic, table, h_workdir(), JSON_MAPPING);
    const char *cfg = h_write_file("ice.json", text);
    /* The host stops itself right after its third commit (fault point
     * after_commit, action stop: before the group's offsets are
     * committed), so the kill lands mid-stream whatever the host's speed;
     * the point's name is read back and pyiceberg must then see some of the
     * records but not all, else the run is inconclusive. */
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    const char *env[] = {"TIDEMARK_FAULT=after_commit",
                         "TIDEMARK_FAULT_ACTION=stop", "TIDEMARK_FAULT_HIT=3",
                         fp.fd_env, NULL};
    pid_t pid = h_spawn_env(cfg, "ice.log", env);
    h_fault_wait(&fp, "after_commit", pid, 1);
    int rc = h_stop(pid, SIGKILL, 5000, NULL);
    H_CHECK(rc == 128 + SIGKILL, "the host was not killed");
    char count_cmd[8192];
    snprintf(count_cmd, sizeof count_cmd,
             "%s %s --count %s > %s/count.out 2>&1", py,
             getenv("TIDEMARK_ICEBERG_JUDGE"), table, h_workdir());
    H_CHECK(system(count_cmd) == 0, "pyiceberg count failed:\n%s",
            h_read_file("count.out"));
    long at_kill = strtol(h_read_file("count.out"), NULL, 10);
    H_CHECK(at_kill > 0 && at_kill < count,
            "inconclusive: pyiceberg read %ld rows at the kill, not between "
            "0 and %d",
            at_kill, count);
    h_step("killed after the third commit with %ld of %d rows in the table "
           "(pyiceberg)",
           at_kill, count);
    pid = h_spawn(cfg, "ice.log");
    /* Caught up when verify (Kafka against the table, up to the markers)
     * counts every record. */
    const char *args[] = {"verify", cfg, NULL};
    char want[64];
    snprintf(want, sizeof want, "kafka_records=%d ", count + 1);
    int64_t t0 = h_now_ms();
    for (;;) {
        rc = h_tidemark("verify.out", args);
        const char *out = h_read_file("verify.out");
        if (rc == 0 && strstr(out, want))
            break;
        H_CHECK(rc == 0 || rc == 2, "verify failed:\n%s", out);
        H_CHECK(h_now_ms() - t0 < 120000, "not caught up:\n%s", out);
        h_sleep_ms(300);
    }
    h_stop_clean(pid);
    /* The expected rows, from what was produced (offsets are dense here:
     * one idempotent producer, no transactions). */
    for (int part = 0; part < 2; part++)
        for (int i = 0; i < 3000; i++)
            n += (size_t)snprintf(expected + n, 64, "%s[%d, %d, %d]",
                                  n > 1 ? "," : "", part, i, part * 100000 + i);
    snprintf(expected + n, 4, "]");
    const char *exp_path = h_write_file("expected.json", expected);
    free(expected);
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s %s %s %s > %s/judge.out 2>&1", py,
             getenv("TIDEMARK_ICEBERG_JUDGE"), table, exp_path, h_workdir());
    rc = system(cmd);
    H_CHECK(rc == 0, "pyiceberg judge failed:\n%s", h_read_file("judge.out"));
    h_step("%s", h_read_file("judge.out"));
    rd_kafka_destroy(p);
}

static const h_scenario SCENARIOS[] = {
    {"bad_records", scenario_bad_records},
    {"sigterm_backlog", scenario_sigterm_backlog},
    {"transactions", scenario_transactions},
    {"filter_dedup", scenario_filter_dedup},
    {"raw", scenario_raw},
    {"two_hosts", scenario_two_hosts},
    {"slow_sink_deadline", scenario_slow_sink_deadline},
    {"held_reads_churn", scenario_held_reads_churn},
    {"transactions_reread", scenario_transactions_reread},
    {"rebalance_churn", scenario_rebalance_churn},
    {"static_fenced", scenario_static_fenced},
    {"dead_letter_topic", scenario_dead_letter_topic},
    {"latest_and_regex", scenario_latest_and_regex},
    {"retry_locked", scenario_retry_locked},
    {"zombie", scenario_zombie},
    {"status_states", scenario_status_states},
    {"conflict", scenario_conflict},
    {"two_connectors", scenario_two_connectors},
    {"postgres_sigkill", scenario_postgres_sigkill},
    {"verify_mutations", scenario_verify_mutations},
    {"iceberg_run", scenario_iceberg_run},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "run_e2e", SCENARIOS, H_NSCENARIOS(SCENARIOS));
}
