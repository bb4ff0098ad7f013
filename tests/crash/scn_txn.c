/* Scenario 7, offsets with holes: a topic written by a transactional
 * producer that aborts every third transaction, and a compacted topic
 * (small segments, so the log cleaner really removes records: the test
 * sees fewer records than offsets, else inconclusive), both read by the
 * raw connector, killed with SIGKILL once on the way (at its own fault
 * point after_commit, so mid-backlog by construction). Verdict per
 * partition: the stored offsets are exactly the records Kafka holds
 * (read_committed), no aborted offset landed, and every marker reached its
 * high watermark: the holes are accounted for. */
#include "crash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TXNS    12
#define PER_TXN 40

static int64_t produce_txns(crash_env *e, int64_t *aborted, int *naborted) {
    rd_kafka_t *p = h_producer(h_name("txn-producer"), NULL);
    static int64_t offs[TXNS * PER_TXN];
    int64_t committed = 0;
    *naborted = 0;
    for (int t = 0; t < TXNS; t++) {
        rd_kafka_error_t *err = rd_kafka_begin_transaction(p);
        H_CHECK(!err, "begin_transaction: %s", rd_kafka_error_string(err));
        int abort = t % 3 == 1;
        for (int i = 0; i < PER_TXN; i++) {
            char val[128];
            int len = snprintf(
                val, sizeof val, "{\"id\": %d, \"loop\": %d, \"body\": \"%s\"}",
                t * PER_TXN + i, t, abort ? "aborted" : "committed");
            int64_t *o = &offs[t * PER_TXN + i];
            *o = -1;
            rd_kafka_resp_err_t r = rd_kafka_producev(
                p, RD_KAFKA_V_TOPIC(e->topic), RD_KAFKA_V_PARTITION(0),
                RD_KAFKA_V_VALUE(val, (size_t)len),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(o),
                RD_KAFKA_V_END);
            H_CHECK(!r, "produce: %s", rd_kafka_err2str(r));
        }
        /* In the log before the abort: aborted records sit between the
         * committed ones, with offsets of their own. */
        H_CHECK(rd_kafka_flush(p, 30000) == 0, "flush: not delivered");
        for (int i = 0; i < PER_TXN; i++) {
            int64_t o = offs[t * PER_TXN + i];
            H_CHECK(o >= 0, "transactional record not delivered");
            if (abort)
                aborted[(*naborted)++] = o;
        }
        err = abort ? rd_kafka_abort_transaction(p, 30000)
                    : rd_kafka_commit_transaction(p, 30000);
        H_CHECK(!err, "%s: %s", abort ? "abort" : "commit",
                rd_kafka_error_string(err));
        committed += abort ? 0 : PER_TXN;
    }
    rd_kafka_destroy(p);
    return committed;
}

/* Keyed records in rounds (each round a new segment after segment.ms),
 * then waits until the cleaner removed some and the count stayed the same
 * for 6 s (scripts/kafka.sh makes the cleaner look every second): records
 * removed after the host read them would be stored in the sink but no
 * longer in Kafka, and the verdict would call them phantoms. */
static int64_t produce_compacted(crash_env *e, int rounds, int keys) {
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < keys; k++) {
            char key[32], val[128];
            snprintf(key, sizeof key, "key-%d", k);
            int len =
                snprintf(val, sizeof val,
                         "{\"id\": %d, \"loop\": %d, \"body\": \"v\"}", k, r);
            h_produce_async(e->producer, e->topic2, k % 2, key, val,
                            (size_t)len);
        }
        h_flush(e->producer);
        h_sleep_ms(150);
    }
    int64_t t0 = h_now_ms(), present = -1, offsets = 0;
    int same = 0;
    for (;;) {
        int64_t now = 0;
        offsets = 0;
        for (int p = 0; p < 2; p++) {
            int64_t lo, hi, *k = NULL;
            h_watermarks(e->topic2, p, &lo, &hi);
            offsets += hi - lo;
            now += (int64_t)h_read_offsets(e->topic2, p, &k);
            free(k);
        }
        same = now == present ? same + 1 : 0;
        if (now < offsets && same == 3)
            break; /* compacted, and stable over the last 6 s */
        H_CHECK(h_now_ms() - t0 < 120000,
                "inconclusive: no compaction after 120 s (%lld records in "
                "%lld offsets)",
                (long long)now, (long long)offsets);
        present = now;
        h_sleep_ms(2000);
    }
    h_step("compacted topic: %lld records left in %lld offsets",
           (long long)present, (long long)offsets);
    return present;
}

static void wait_markers(crash_env *e, const char *topic, int parts) {
    int64_t want = 0, t0 = h_now_ms();
    for (int p = 0; p < parts; p++) {
        int64_t lo, hi;
        h_watermarks(topic, p, &lo, &hi);
        want += hi;
    }
    for (;;) {
        int64_t at = cs_int(&e->sink,
                            "SELECT sum(next_offset) FROM tidemark_markers "
                            "WHERE connector = '%s' AND topic = '%s'",
                            e->raw, topic);
        if (at == want)
            return;
        H_CHECK(h_now_ms() - t0 < 120000,
                "%s: markers at %lld, high watermarks %lld after 120 s", topic,
                (long long)at, (long long)want);
        h_sleep_ms(100);
    }
}

static int64_t judge_topic(crash_env *e, const char *topic, int parts,
                           int64_t *holes) {
    int64_t records = 0;
    *holes = 0;
    for (int p = 0; p < parts; p++) {
        int64_t lo, hi, *k = NULL, *s = NULL;
        h_watermarks(topic, p, &lo, &hi);
        size_t nk = h_read_offsets(topic, p, &k);
        size_t ns = cs_list(&e->sink, &s,
                            "SELECT _tm_offset FROM raw_t WHERE _tm_topic = "
                            "'%s' AND _tm_partition = %d ORDER BY 1",
                            topic, p);
        ce_same_offsets(topic, p, k, nk, s, ns);
        records += (int64_t)nk;
        *holes += hi - lo - (int64_t)nk;
        free(k);
        free(s);
    }
    return records;
}

void scenario_txn_compact(const char *sink) {
    crash_env e;
    ce_init(&e, sink, "txn_compact", 1);
    snprintf(e.topic2, sizeof e.topic2, "%s", h_name("compacted"));
    const char *cfg[] = {"cleanup.policy",
                         "compact",
                         "segment.ms",
                         "100",
                         "min.cleanable.dirty.ratio",
                         "0.01",
                         "min.compaction.lag.ms",
                         "0",
                         "delete.retention.ms",
                         "100",
                         NULL};
    h_create_topic_cfg(e.topic2, 2, cfg);
    crash_conf c = {"\"max_records\": 20, \"max_wait_ms\": 50", NULL, "a",
                    NULL};
    ce_configs(&e, &c);
    int64_t aborted[TXNS * PER_TXN];
    int naborted = 0;
    int64_t committed = produce_txns(&e, aborted, &naborted);
    int64_t kept = produce_compacted(&e, 12, 40);
    const char *raw_only[] = {e.raw_cfg, NULL};
    /* The kill is at the host's own fault point, its 7th commit (at most 7
     * batches of 20 records of the 400 committed), where it holds itself:
     * a kill timed from outside came after the last commit once (CI: "400
     * of 400 rows at the kill"), the host having read the whole backlog
     * between two polls. */
    int64_t total = committed + kept;
    ce_held held;
    ce_spawn_held(&held, raw_only, "run.log", 7);
    int64_t rows = ce_kill_held(&e, &held, total);
    pid_t pid = ce_spawn_cfgs(raw_only, "run.log", NULL);
    wait_markers(&e, e.topic, 1);
    wait_markers(&e, e.topic2, 2);
    int64_t txn_holes, cmp_holes;
    int64_t txn_rec = judge_topic(&e, e.topic, 1, &txn_holes);
    int64_t cmp_rec = judge_topic(&e, e.topic2, 2, &cmp_holes);
    H_CHECK(txn_rec == committed,
            "transactional topic: %lld records read, "
            "%lld committed",
            (long long)txn_rec, (long long)committed);
    int64_t landed = 0;
    for (int i = 0; i < naborted; i++)
        landed += cs_int(&e.sink,
                         "SELECT count(*) FROM raw_t WHERE _tm_topic = '%s' "
                         "AND _tm_offset = %lld",
                         e.topic, (long long)aborted[i]);
    H_CHECK(landed == 0, "%lld aborted records landed", (long long)landed);
    H_CHECK(txn_holes > 0 && cmp_holes > 0,
            "inconclusive: holes %lld (transactional), %lld (compacted)",
            (long long)txn_holes, (long long)cmp_holes);
    ce_stop(pid);
    ce_verify_cli(&e, e.raw_cfg);
    ce_summary(&e, NULL,
               "SIGKILL at %lld of %lld rows; transactional: %lld committed "
               "records stored of %lld offsets, %d aborted (0 landed), %lld "
               "holes (aborted + control records); compacted: %lld records "
               "stored, %lld holes; markers at the high watermarks; 0 "
               "duplicates, 0 gaps",
               (long long)rows, (long long)total, (long long)txn_rec,
               (long long)(txn_rec + txn_holes), naborted, (long long)txn_holes,
               (long long)cmp_rec, (long long)cmp_holes);
}
