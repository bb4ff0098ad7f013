/* Case lineage: the marker's lineage (ABI 1.1: the last applied record's
 * offset, timestamp and hash) round-trips through commit, read_markers and
 * claim, and a reset claim forgets it. Plugins built against ABI 1.0 have
 * no such fields, and a sink may keep none: SKIP (never a pass). */
#include <inttypes.h>
#include <string.h>

#include "cases.h"

/* 0 when every marker of got keeps exactly want[i]'s lineage (want NULL:
 * none); else FAIL naming WHEN. */
static int expect_lineage(const tm_marker *got, const tm_range *want,
                          const char *when, kit_result *res) {
    for (int p = 0; p < KIT_NPARTS; p++) {
        const tm_marker *m = &got[p];
        int64_t off = want ? want[p].last_offset : TM_NO_OFFSET;
        const char *hash = want ? want[p].last_record_hash : "";
        int same = m->last_record_hash[0] || want
                       ? m->last_offset == off &&
                             strcmp(m->last_record_hash, hash) == 0 &&
                             (!want ||
                              m->last_timestamp_ms == want[p].last_timestamp_ms)
                       : 1;
        if (!same) {
            kit_fail(res,
                     "%s: %s[%d] keeps lineage offset %" PRId64
                     " timestamp %" PRId64 " hash '%.16s'; expected offset "
                     "%" PRId64 " hash '%.16s'",
                     when, m->topic, m->partition, m->last_offset,
                     m->last_timestamp_ms, m->last_record_hash, off, hash);
            return -1;
        }
    }
    return 0;
}

void kit_case_lineage(const kit_run *run, kit_result *res) {
    if (run->api->abi_minor < 1) {
        kit_skip(res,
                 "built against ABI %u.%u: its markers keep no lineage "
                 "(the host checks none at claim)",
                 (unsigned)run->api->abi_major, (unsigned)run->api->abi_minor);
        return;
    }
    kit_fixture fx;
    void *sink = NULL;
    tm_error err;
    tm_marker m[KIT_NPARTS], r[KIT_NPARTS];
    tm_range want[KIT_NPARTS];
    kit_batch kb, holes;
    memset(&kb, 0, sizeof kb);
    memset(&holes, 0, sizeof holes);
    if (kit_setup(&fx, run, "lineage", 0, NULL, &sink, m, res) != 0)
        return;
    if (expect_lineage(m, NULL, "a new marker", res) != 0)
        goto out;
    /* Five offsets per partition; the last a dead letter when the sink
     * stores them (the lineage is the last record delivered, whatever
     * became of it). */
    kit_batch_init(&kb, run);
    for (int p = 0; p < KIT_NPARTS; p++) {
        uint32_t g = kit_batch_range(&kb, p, 0, 5, m[p].epoch);
        for (int64_t o = 0; o < 5; o++)
            if (o == 4 && p == 1 &&
                (run->api->capabilities & TM_CAP_DEAD_LETTERS))
                kit_batch_dead_letter(&kb, g, o, TM_DL_PARSE_ERROR,
                                      "sinkcheck: not json");
            else
                kit_batch_record(&kb, g, o, NULL, NULL);
    }
    if (kit_batch_seal(&kb) != 0) {
        kit_fail(res, "out of memory building the batch");
        goto out;
    }
    memcpy(want, kb.ranges, sizeof want);
    for (int p = 0; p < KIT_NPARTS; p++)
        if (want[p].last_offset != 4 || !want[p].last_record_hash[0]) {
            kit_fail(res,
                     "inconclusive: the batch's range %d carries no "
                     "lineage of offset 4",
                     p);
            goto out;
        }
    if (kit_expect_commit(run, sink, &kb, TM_OK, "the batch", res) != 0)
        goto out;
    tm_status rc = kit_read_markers(run, sink, r, &err);
    if (rc != TM_OK) {
        kit_fail(res, "read_markers: %s: %s", tm_status_name(rc), err.message);
        goto out;
    }
    int kept = 0;
    for (int p = 0; p < KIT_NPARTS; p++)
        kept |= r[p].last_record_hash[0] != '\0';
    if (!kept) {
        /* Allowed (the fields are optional to keep) but not a pass. */
        kit_skip(res, "the sink keeps no lineage in its markers: the host "
                      "cannot tell a replaced log at claim");
        goto out;
    }
    if (expect_lineage(r, want, "read_markers after a commit", res) != 0)
        goto out;
    /* Ranges without a record only move the marker: the lineage stays. */
    kit_batch_init(&holes, run);
    for (int p = 0; p < KIT_NPARTS; p++)
        kit_batch_range(&holes, p, 5, 9, m[p].epoch);
    if (kit_batch_seal(&holes) != 0 ||
        kit_expect_commit(run, sink, &holes, TM_OK, "empty ranges", res) != 0)
        goto out;
    if ((rc = kit_read_markers(run, sink, r, &err)) != TM_OK) {
        kit_fail(res, "read_markers: %s: %s", tm_status_name(rc), err.message);
        goto out;
    }
    if (r[0].next_offset != 9) {
        kit_fail(res, "inconclusive: empty ranges left next_offset %" PRId64,
                 r[0].next_offset);
        goto out;
    }
    if (expect_lineage(r, want, "after empty ranges", res) != 0)
        goto out;
    /* Another owner's claim carries it; a reset claim forgets it. */
    if ((rc = kit_claim(run, sink, r, NULL, 0, &err)) != TM_OK) {
        kit_fail(res, "claim: %s: %s", tm_status_name(rc), err.message);
        goto out;
    }
    if (expect_lineage(r, want, "claim", res) != 0)
        goto out;
    const int64_t back[KIT_NPARTS] = {2, 2, 2};
    if ((rc = kit_claim(run, sink, r, back, TM_CLAIM_RESET, &err)) != TM_OK) {
        kit_fail(res, "claim with TM_CLAIM_RESET: %s: %s", tm_status_name(rc),
                 err.message);
        goto out;
    }
    if (expect_lineage(r, NULL, "claim with TM_CLAIM_RESET", res) != 0)
        goto out;
    if ((rc = kit_read_markers(run, sink, r, &err)) != TM_OK) {
        kit_fail(res, "read_markers: %s: %s", tm_status_name(rc), err.message);
        goto out;
    }
    expect_lineage(r, NULL, "read_markers after a reset", res);
out:
    kit_batch_free(&kb);
    kit_batch_free(&holes);
    kit_teardown(&fx, sink);
}
