/* Scenario 5, the boundary proved by watching it break: start policy
 * earliest, the markers deleted while the effects stay. Without dedup
 * (the raw connector) every record already applied is applied again: the
 * test asserts the duplicates DO appear and counts them against what it
 * computed. With dedup (the JSON connector) no business key is stored
 * twice, and the known ids sent again with another payload become dead
 * letters identity_conflict; its dead letters, which have no business
 * key, are not written again: a sink with dedup does not store a second
 * dead letter for an offset that has one, it counts the record read again
 * as a duplicate instead. */
#include "crash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void scenario_boundary(const char *sink) {
    crash_env e;
    ce_init(&e, sink, "boundary", 3);
    crash_conf c = {"\"max_records\": 200, \"max_wait_ms\": 100", NULL, "a",
                    NULL};
    ce_configs(&e, &c);
    int64_t sample = ce_env_int("TIDEMARK_CRASH_SAMPLE", 400);
    ce_events(&e, 0, sample * 5, 0, 0, NULL, NULL);
    ce_events(&e, 0, sample, 0, 0, NULL, NULL); /* resends */
    ce_violations(&e, 25);
    pid_t pid = ce_spawn(&e, "run.log", NULL);
    ce_wait_caught_up(&e, 120000);
    ce_stop(pid);
    crash_figures f;
    ce_judge(&e, &f); /* exact before the markers go */
    int64_t applied = e.sent, violations = e.violations;
    int64_t dedup_dl_before = f.dead_letters;

    const char *conns[] = {e.raw, e.dedup};
    int64_t gone = cs_forget_markers(&e.sink, conns, e.nconn);
    H_CHECK(gone == e.nconn * e.partitions,
            "inconclusive: %lld markers deleted, expected %d", (long long)gone,
            e.nconn * e.partitions);
    int64_t left = cs_int(&e.sink, "SELECT count(*) FROM tidemark_markers");
    H_CHECK(left == 0,
            "inconclusive: %lld markers read back after the "
            "deletion",
            (long long)left);
    int64_t nconf = e.sink.dedup ? sample / 4 : 0;
    ce_conflicts(&e, 0, (int)nconf);
    ce_events(&e, e.next_id, sample, 1, 0, NULL, NULL);
    h_step("markers deleted (%lld), effects kept; %lld conflicting payloads "
           "and %lld new events produced",
           (long long)gone, (long long)nconf, (long long)sample);

    pid = ce_spawn(&e, "run.log", NULL);
    ce_wait_caught_up(&e, 120000);
    ce_stop(pid);
    const crash_sink *s = &e.sink;
    int64_t kafka = 0;
    for (int p = 0; p < e.partitions; p++) {
        int64_t *k = NULL;
        kafka += (int64_t)h_read_offsets(e.topic, p, &k);
        free(k);
    }
    int64_t raw_rows = cs_int(s, "SELECT count(*) FROM raw_t");
    int64_t raw_distinct = cs_int(s, "SELECT count(*) FROM (SELECT DISTINCT "
                                     "_tm_partition, _tm_offset FROM raw_t) x");
    int64_t dups = raw_rows - raw_distinct;
    H_CHECK(kafka == e.sent, "Kafka holds %lld, sent %lld", (long long)kafka,
            (long long)e.sent);
    H_CHECK(raw_distinct == kafka, "raw: %lld distinct offsets of %lld (gap)",
            (long long)raw_distinct, (long long)kafka);
    H_CHECK(dups == applied,
            "raw without markers: %lld duplicate rows, expected %lld (every "
            "record applied before the markers were lost)",
            (long long)dups, (long long)applied);
    int64_t twice = cs_int(s, "SELECT count(*) FROM (SELECT _tm_partition, "
                              "_tm_offset FROM raw_t GROUP BY _tm_partition, "
                              "_tm_offset HAVING count(*) = 2) x");
    H_CHECK(twice == applied, "raw: %lld offsets stored twice, expected %lld",
            (long long)twice, (long long)applied);

    int64_t rows = 0, ids = 0, conf = 0, dl = 0, counted = 0;
    if (e.sink.dedup) {
        rows = cs_int(s, "SELECT count(*) FROM dedup_t");
        ids = cs_int(s, "SELECT count(DISTINCT id) FROM dedup_t");
        conf = cs_int(s,
                      "SELECT count(*) FROM tidemark_dead_letters WHERE "
                      "connector = '%s' AND reason = 'identity_conflict'",
                      e.dedup);
        dl = cs_int(s,
                    "SELECT count(*) FROM tidemark_dead_letters WHERE "
                    "connector = '%s'",
                    e.dedup);
        counted = cs_int(s,
                         "SELECT sum(duplicates) FROM tidemark_markers "
                         "WHERE connector = '%s'",
                         e.dedup);
        H_CHECK(rows == e.unique_ids && ids == rows,
                "dedup: %lld rows, %lld distinct ids, %lld unique ids sent: a "
                "business key stored twice",
                (long long)rows, (long long)ids, (long long)e.unique_ids);
        H_CHECK(conf == nconf, "dedup: %lld identity_conflict, expected %lld",
                (long long)conf, (long long)nconf);
        /* the same dead letter already stored for an offset is not written
         * again: the violations read again are duplicates */
        H_CHECK(dl == dedup_dl_before + nconf,
                "dedup: %lld dead letters, expected %lld before + %lld "
                "conflicts (the %lld violations read again not written "
                "again)",
                (long long)dl, (long long)dedup_dl_before, (long long)nconf,
                (long long)violations);
        /* The new markers count every event read again as a duplicate,
         * the violations too. */
        H_CHECK(counted == applied,
                "dedup: %lld duplicates counted by the new markers, expected "
                "%lld",
                (long long)counted, (long long)applied);
    }

    /* tidemark verify must see the boundary break too. */
    char vline[512];
    const char *vargs[] = {"verify", e.raw_cfg, NULL};
    int vrc = h_tidemark("verify-raw.out", vargs);
    H_CHECK(vrc == 1,
            "tidemark verify of the raw connector: exit %d, expected 1 "
            "(duplicates)\n%s",
            vrc, h_read_file("verify-raw.out"));
    snprintf(vline, sizeof vline, "tidemark verify exit 1 on raw");
    char dedup_said[512] = "no dedup connector (the sink has no dedup)";
    if (e.sink.dedup)
        snprintf(dedup_said, sizeof dedup_said,
                 "dedup %lld rows = %lld distinct ids, %lld duplicates "
                 "counted, %lld identity_conflict of %lld conflicting "
                 "payloads, dead letters %lld -> %lld (violations %s)",
                 (long long)rows, (long long)ids, (long long)counted,
                 (long long)conf, (long long)nconf, (long long)dedup_dl_before,
                 (long long)dl, "counted as duplicates");
    ce_summary(&e, NULL,
               "markers deleted after %lld records applied: raw %lld rows, "
               "%lld distinct offsets, %lld duplicates (expected %lld); %s; %s",
               (long long)applied, (long long)raw_rows, (long long)raw_distinct,
               (long long)dups, (long long)applied, dedup_said, vline);
}
