/* Cases of the commit protocol: claim, apply, already, conflict/fenced,
 * multi-partition atomicity, holes and empty ranges. Every verdict comes
 * from what read_markers and scan show afterwards. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cases.h"
#include "kit.h"

static const int64_t ZERO[KIT_NPARTS];

static void epochs_of(const tm_marker *m, int64_t *epoch) {
    for (int i = 0; i < KIT_NPARTS; i++)
        epoch[i] = m[i].epoch;
}

/* 1. claim creates markers at the given offsets and raises the epoch;
 * every claim raises it again; read_markers never does. */
void kit_case_claim(const kit_run *run, kit_result *res) {
    kit_fixture fx;
    void *sink = NULL;
    tm_error err;
    tm_marker before[KIT_NPARTS], c1[KIT_NPARTS], c2[KIT_NPARTS];
    tm_marker r1[KIT_NPARTS], r2[KIT_NPARTS], c3[KIT_NPARTS];
    const int64_t start[KIT_NPARTS] = {0, 100, 7};
    const int64_t other[KIT_NPARTS] = {5, 5, 5};
    if (kit_fixture_init(&fx, run, "claim", 0, res) != 0)
        return;
    tm_status rc = kit_open(&fx, NULL, &sink, &err);
    if (rc != TM_OK) {
        kit_fail(res, "open: %s: %s", tm_status_name(rc), err.message);
        goto out;
    }
    if ((rc = kit_read_markers(run, sink, before, &err)) != TM_OK) {
        kit_fail(res, "read_markers on an empty sink: %s: %s",
                 tm_status_name(rc), err.message);
        goto out;
    }
    for (int i = 0; i < KIT_NPARTS; i++)
        if (before[i].epoch != TM_NO_EPOCH ||
            before[i].next_offset != TM_NO_OFFSET) {
            kit_fail(res,
                     "empty sink: read_markers gave %s[%d] epoch %" PRId64
                     " next_offset %" PRId64 ", expected %d and %d",
                     before[i].topic, before[i].partition, before[i].epoch,
                     before[i].next_offset, TM_NO_EPOCH, TM_NO_OFFSET);
            goto out;
        }
    if ((rc = kit_claim(run, sink, c1, start, 0, &err)) != TM_OK) {
        kit_fail(res, "claim: %s: %s", tm_status_name(rc), err.message);
        goto out;
    }
    for (int i = 0; i < KIT_NPARTS; i++)
        if (c1[i].next_offset != start[i] || c1[i].epoch <= TM_NO_EPOCH) {
            kit_fail(res,
                     "claim on an empty sink gave %s[%d] next_offset %" PRId64
                     " epoch %" PRId64 ", expected %" PRId64
                     " and an epoch > 0",
                     c1[i].topic, c1[i].partition, c1[i].next_offset,
                     c1[i].epoch, start[i]);
            goto out;
        }
    /* Read twice: equal to the claim and to each other. */
    if ((rc = kit_read_markers(run, sink, r1, &err)) != TM_OK ||
        (rc = kit_read_markers(run, sink, r2, &err)) != TM_OK) {
        kit_fail(res, "read_markers: %s: %s", tm_status_name(rc), err.message);
        goto out;
    }
    for (int i = 0; i < KIT_NPARTS; i++)
        if (r1[i].epoch != c1[i].epoch || r2[i].epoch != c1[i].epoch ||
            r1[i].next_offset != start[i] || r2[i].next_offset != start[i]) {
            kit_fail(res,
                     "read_markers changed %s[%d]: claim gave epoch %" PRId64
                     ", reads gave %" PRId64 " then %" PRId64,
                     c1[i].topic, c1[i].partition, c1[i].epoch, r1[i].epoch,
                     r2[i].epoch);
            goto out;
        }
    /* A second claim (another owner): epoch up, an existing marker keeps
     * its offset whatever offset the claim offers. */
    if ((rc = kit_claim(run, sink, c2, other, 0, &err)) != TM_OK) {
        kit_fail(res, "second claim: %s: %s", tm_status_name(rc), err.message);
        goto out;
    }
    for (int i = 0; i < KIT_NPARTS; i++)
        if (c2[i].epoch <= c1[i].epoch || c2[i].next_offset != start[i]) {
            kit_fail(res,
                     "second claim gave %s[%d] epoch %" PRId64 " (was %" PRId64
                     ") next_offset %" PRId64 " (expected %" PRId64 " kept)",
                     c2[i].topic, c2[i].partition, c2[i].epoch, c1[i].epoch,
                     c2[i].next_offset, start[i]);
            goto out;
        }
    /* TM_CLAIM_RESET (offline offsets --reset-to) sets the offset too. */
    if ((rc = kit_claim(run, sink, c3, other, TM_CLAIM_RESET, &err)) != TM_OK) {
        kit_fail(res, "claim with TM_CLAIM_RESET: %s: %s", tm_status_name(rc),
                 err.message);
        goto out;
    }
    if ((rc = kit_read_markers(run, sink, r1, &err)) != TM_OK) {
        kit_fail(res, "read_markers: %s: %s", tm_status_name(rc), err.message);
        goto out;
    }
    for (int i = 0; i < KIT_NPARTS; i++)
        if (r1[i].epoch <= c2[i].epoch || r1[i].next_offset != other[i]) {
            kit_fail(
                res,
                "claim with TM_CLAIM_RESET: %s[%d] reads back epoch %" PRId64
                " (was %" PRId64 ") next_offset %" PRId64 " (expected %" PRId64
                ")",
                r1[i].topic, r1[i].partition, r1[i].epoch, c2[i].epoch,
                r1[i].next_offset, other[i]);
            goto out;
        }
out:
    kit_teardown(&fx, sink);
}

/* The batch of cases 2 and 3: five offsets per partition, offset 3 a dead
 * letter when the sink stores them. */
static int contiguous_batch(kit_batch *kb, const kit_run *run,
                            const tm_marker *m) {
    kit_batch_init(kb, run);
    for (int p = 0; p < KIT_NPARTS; p++) {
        uint32_t r = kit_batch_range(kb, p, 0, 5, m[p].epoch);
        for (int64_t o = 0; o < 5; o++) {
            if (o == 3 && (run->api->capabilities & TM_CAP_DEAD_LETTERS))
                kit_batch_dead_letter(kb, r, o, TM_DL_PARSE_ERROR,
                                      "sinkcheck: not json");
            else
                kit_batch_record(kb, r, o, NULL, NULL);
        }
    }
    return kit_batch_seal(kb);
}

/* What the contiguous batch must leave: rows, dead letters and markers. */
static void check_contiguous(const kit_run *run, const kit_state *st,
                             const tm_marker *m, const char *batch_id,
                             kit_result *res) {
    int dl = (run->api->capabilities & TM_CAP_DEAD_LETTERS) != 0;
    for (int p = 0; p < KIT_NPARTS && !KIT_FAILED(res); p++) {
        const kit_part_state *ps = &st->part[p];
        for (int64_t o = 0; o < 5; o++) {
            size_t rows = kit_part_count(ps, TM_ITEM_ROW, o, 0);
            size_t dls =
                kit_part_count(ps, TM_ITEM_DEAD_LETTER, o, TM_DL_PARSE_ERROR);
            int want_dl = dl && o == 3;
            if (rows != (size_t)!want_dl || dls != (size_t)want_dl) {
                kit_fail(res,
                         "%s[%d] offset %" PRId64 ": %zu row(s), %zu "
                         "dead letter(s); expected %s",
                         ps->marker.topic, ps->marker.partition, o, rows, dls,
                         want_dl ? "one dead letter" : "one row");
                return;
            }
        }
        if (ps->nitems != 5) {
            kit_fail(res, "%s[%d]: %zu items stored, expected 5",
                     ps->marker.topic, ps->marker.partition, ps->nitems);
            return;
        }
        const tm_marker *s = &ps->marker;
        if (s->next_offset != 5 || s->epoch != m[p].epoch ||
            s->rows != (uint64_t)(dl ? 4 : 5) ||
            s->dead_letters != (uint64_t)dl ||
            strcmp(s->last_batch_id, batch_id) != 0)
            kit_fail(res,
                     "%s[%d] marker: next_offset %" PRId64 " epoch %" PRId64
                     " rows %" PRIu64 " dead letters %" PRIu64
                     " last batch '%s'; expected 5, %" PRId64 ", %d, %d, '%s'",
                     s->topic, s->partition, s->next_offset, s->epoch, s->rows,
                     s->dead_letters, s->last_batch_id, m[p].epoch, dl ? 4 : 5,
                     dl, batch_id);
    }
}

/* 2. a contiguous batch -> OK; rows, dead letters and markers visible
 * together (and nothing before). */
void kit_case_contiguous(const kit_run *run, kit_result *res) {
    kit_fixture fx;
    void *sink;
    tm_marker m[KIT_NPARTS];
    kit_batch kb;
    kit_state before, after;
    if (kit_setup(&fx, run, "contiguous", 0, ZERO, &sink, m, res) != 0)
        return;
    if (contiguous_batch(&kb, run, m) != 0) {
        kit_fail(res, "out of memory building the batch");
    } else if (kit_state_read(run, sink, &before, res) == 0) {
        for (int p = 0; p < KIT_NPARTS; p++)
            if (before.part[p].nitems != 0 && !KIT_FAILED(res))
                kit_fail(res, "claimed sink already holds %zu item(s)",
                         before.part[p].nitems);
        kit_state_free(&before);
        if (!KIT_FAILED(res) &&
            kit_expect_commit(run, sink, &kb, TM_OK, "contiguous batch", res) ==
                0 &&
            kit_state_fresh(&fx, &after, res) == 0) {
            check_contiguous(run, &after, m, kb.batch_id, res);
            kit_state_free(&after);
        }
    }
    kit_batch_free(&kb);
    kit_teardown(&fx, sink);
}

/* 3. the same batch again -> ALREADY, nothing changes. */
void kit_case_already(const kit_run *run, kit_result *res) {
    kit_fixture fx;
    void *sink;
    tm_marker m[KIT_NPARTS];
    kit_batch kb;
    kit_state s1, s2;
    char why[512];
    if (kit_setup(&fx, run, "already", 0, ZERO, &sink, m, res) != 0)
        return;
    if (contiguous_batch(&kb, run, m) != 0)
        kit_fail(res, "out of memory building the batch");
    else if (kit_expect_commit(run, sink, &kb, TM_OK, "first commit", res) ==
                 0 &&
             kit_state_read(run, sink, &s1, res) == 0) {
        if (kit_expect_commit(run, sink, &kb, TM_ALREADY, "same batch again",
                              res) == 0 &&
            kit_expect_commit(run, sink, &kb, TM_ALREADY, "third time", res) ==
                0 &&
            kit_state_fresh(&fx, &s2, res) == 0) {
            if (kit_state_compare(&s1, &s2, why, sizeof why) != 0)
                kit_fail(res, "ALREADY changed the sink: %s", why);
            kit_state_free(&s2);
        }
        kit_state_free(&s1);
    }
    kit_batch_free(&kb);
    kit_teardown(&fx, sink);
}

/* Commits a one-range-per-part batch and expects WANT with no change. */
static void expect_refused(const kit_run *run, const kit_fixture *fx,
                           void *sink, const int64_t *start, const int64_t *end,
                           const int64_t *epoch, tm_status want,
                           const char *what, const kit_state *ref,
                           kit_result *res) {
    kit_batch kb;
    kit_state now;
    char why[512];
    kit_batch_init(&kb, run);
    for (int p = 0; p < KIT_NPARTS; p++) {
        uint32_t r = kit_batch_range(&kb, p, start[p], end[p], epoch[p]);
        for (int64_t o = start[p]; o < end[p]; o++)
            kit_batch_record(&kb, r, o, NULL, NULL);
    }
    if (kit_batch_seal(&kb) != 0)
        kit_fail(res, "out of memory building the batch");
    else if (kit_expect_commit(run, sink, &kb, want, what, res) == 0 &&
             kit_state_fresh(fx, &now, res) == 0) {
        if (kit_state_compare(ref, &now, why, sizeof why) != 0)
            kit_fail(res, "%s: refused with %s but wrote: %s", what,
                     tm_status_name(want), why);
        kit_state_free(&now);
    }
    kit_batch_free(&kb);
}

/* Shared start of cases 4 and 5: every part applied to offset 5. */
static int applied_to_5(const kit_run *run, kit_fixture *fx, const char *name,
                        void **sink, tm_marker *m, kit_state *ref,
                        kit_result *res) {
    kit_batch kb;
    const int64_t len[KIT_NPARTS] = {5, 5, 5};
    int64_t epoch[KIT_NPARTS];
    if (kit_setup(fx, run, name, 0, ZERO, sink, m, res) != 0)
        return -1;
    epochs_of(m, epoch);
    int rc = kit_batch_dense(&kb, run, ZERO, len, epoch);
    if (rc != 0)
        kit_fail(res, "out of memory building the batch");
    else
        rc = kit_expect_commit(run, *sink, &kb, TM_OK, "first batch", res);
    kit_batch_free(&kb);
    if (rc == 0)
        rc = kit_state_read(run, *sink, ref, res);
    if (rc != 0)
        kit_teardown(fx, *sink);
    return rc;
}

/* 4. a gap, an overlap, an older epoch -> CONFLICT / FENCED, nothing
 * written. The fencing is real: a second instance claims in between. */
void kit_case_conflict_fenced(const kit_run *run, kit_result *res) {
    kit_fixture fx;
    void *sink, *other = NULL;
    tm_marker m[KIT_NPARTS], m2[KIT_NPARTS];
    kit_state ref, ref2;
    tm_error err;
    int64_t e[KIT_NPARTS];
    const int64_t s5[] = {5, 5, 5}, e8[] = {8, 8, 8};
    const int64_t s6[] = {6, 6, 6}, s3[] = {3, 3, 3};
    if (applied_to_5(run, &fx, "conflict", &sink, m, &ref, res) != 0)
        return;
    epochs_of(m, e);
    expect_refused(run, &fx, sink, s6, e8, e, TM_CONFLICT, "gap [6,8)", &ref,
                   res);
    if (!KIT_FAILED(res))
        expect_refused(run, &fx, sink, s3, e8, e, TM_CONFLICT, "overlap [3,8)",
                       &ref, res);
    if (KIT_FAILED(res))
        goto out;
    /* Another owner claims: this instance's epoch is now older. */
    tm_status rc = kit_open(&fx, NULL, &other, &err);
    if (rc == TM_OK)
        rc = kit_claim(run, other, m2, s5, 0, &err);
    if (rc != TM_OK) {
        kit_fail(res, "second owner: open/claim: %s: %s", tm_status_name(rc),
                 err.message);
        goto out;
    }
    if (kit_state_read(run, sink, &ref2, res) != 0)
        goto out;
    expect_refused(run, &fx, sink, s5, e8, e, TM_FENCED,
                   "older epoch after another claim", &ref2, res);
    kit_state_free(&ref2);
out:
    if (other)
        run->api->close(other);
    kit_state_free(&ref);
    kit_teardown(&fx, sink);
}

/* 5. one partition conflicting (or fenced) -> nothing written for any. */
void kit_case_multi_partition(const kit_run *run, kit_result *res) {
    kit_fixture fx;
    void *sink;
    tm_marker m[KIT_NPARTS];
    kit_state ref;
    int64_t e[KIT_NPARTS];
    const int64_t s_gap[] = {5, 5, 6}, e8[] = {8, 8, 8};
    const int64_t s5[] = {5, 5, 5};
    if (applied_to_5(run, &fx, "multi_partition", &sink, m, &ref, res) != 0)
        return;
    epochs_of(m, e);
    expect_refused(run, &fx, sink, s_gap, e8, e, TM_CONFLICT,
                   "two good partitions and one gap", &ref, res);
    int64_t fenced[KIT_NPARTS] = {e[0], e[1] - 1, e[2]};
    if (!KIT_FAILED(res))
        expect_refused(run, &fx, sink, s5, e8, fenced, TM_FENCED,
                       "two good partitions and one older epoch", &ref, res);
    kit_state_free(&ref);
    kit_teardown(&fx, sink);
}

/* 6. offsets with holes (transaction markers) and empty ranges that only
 * move a marker. */
void kit_case_holes(const kit_run *run, kit_result *res) {
    kit_fixture fx;
    void *sink;
    tm_marker m[KIT_NPARTS];
    kit_batch kb, empty;
    kit_state st;
    static const int64_t holes[] = {0, 3, 7};
    if (kit_setup(&fx, run, "holes", 0, ZERO, &sink, m, res) != 0)
        return;
    kit_batch_init(&kb, run);
    for (int p = 0; p < KIT_NPARTS; p++) {
        uint32_t r = kit_batch_range(&kb, p, 0, 10, m[p].epoch);
        kb.ranges[r].filtered = 2; /* the host filtered two of the rest */
        for (int k = 0; k < 3; k++)
            kit_batch_record(&kb, r, holes[k], NULL, NULL);
    }
    kit_batch_init(&empty, run);
    for (int p = 0; p < KIT_NPARTS; p++)
        kit_batch_range(&empty, p, 10, 15, m[p].epoch);
    if (kit_batch_seal(&kb) != 0 || kit_batch_seal(&empty) != 0) {
        kit_fail(res, "out of memory building the batch");
    } else if (kit_expect_commit(run, sink, &kb, TM_OK,
                                 "[0,10) with rows at "
                                 "0, 3, 7",
                                 res) == 0 &&
               kit_expect_commit(run, sink, &empty, TM_OK,
                                 "empty range "
                                 "[10,15)",
                                 res) == 0 &&
               kit_state_fresh(&fx, &st, res) == 0) {
        for (int p = 0; p < KIT_NPARTS && !KIT_FAILED(res); p++) {
            const kit_part_state *ps = &st.part[p];
            if (ps->marker.next_offset != 15 || ps->marker.rows != 3 ||
                ps->marker.filtered != 2 ||
                strcmp(ps->marker.last_batch_id, empty.batch_id) != 0)
                kit_fail(res,
                         "%s[%d] marker: next_offset %" PRId64 " rows %" PRIu64
                         " filtered %" PRIu64
                         " last batch '%s'; expected 15, 3, 2, '%s'",
                         ps->marker.topic, ps->marker.partition,
                         ps->marker.next_offset, ps->marker.rows,
                         ps->marker.filtered, ps->marker.last_batch_id,
                         empty.batch_id);
            else if (ps->nitems != 3)
                kit_fail(res, "%s[%d]: %zu items, expected rows at 0, 3, 7",
                         ps->marker.topic, ps->marker.partition, ps->nitems);
            for (int k = 0; k < 3 && !KIT_FAILED(res); k++)
                if (kit_part_count(ps, TM_ITEM_ROW, holes[k], 0) != 1)
                    kit_fail(res, "%s[%d]: no single row at offset %" PRId64,
                             ps->marker.topic, ps->marker.partition, holes[k]);
        }
        kit_state_free(&st);
    }
    kit_batch_free(&kb);
    kit_batch_free(&empty);
    kit_teardown(&fx, sink);
}
