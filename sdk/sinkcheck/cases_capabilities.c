/* Case 9: dead letters, business-key duplicates and identity conflicts are
 * committed atomically with the batch: refused batches and crashes before
 * the commit leave none of them, and the counts move with the marker. Only
 * for sinks declaring TM_CAP_DEAD_LETTERS / TM_CAP_DEDUP; else SKIP. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cases.h"
#include "kit.h"

static const int64_t ZERO[KIT_NPARTS];

/* Refused with WANT (a gap on the last part), then killed at after_marker:
 * neither may leave a trace. Then the batch itself must apply. */
static void refuse_crash_apply(const kit_run *run, kit_fixture *fx, void **sink,
                               kit_batch *good, kit_batch *gap,
                               kit_result *res) {
    kit_state ref, now;
    char why[512];
    tm_error err;
    if (kit_state_read(run, *sink, &ref, res) != 0)
        return;
    if (kit_expect_commit(run, *sink, gap, TM_CONFLICT,
                          "the batch with a gap on one partition", res) == 0 &&
        kit_state_fresh(fx, &now, res) == 0) {
        if (kit_state_compare(&ref, &now, why, sizeof why) != 0)
            kit_fail(res, "a refused batch left effects: %s", why);
        kit_state_free(&now);
    }
    if (!KIT_FAILED(res)) {
        run->api->close(*sink);
        *sink = NULL;
        if (kit_commit_with_fault(fx, good, TM_FAULT_AFTER_MARKER, res) == 0 &&
            kit_state_fresh(fx, &now, res) == 0) {
            if (kit_state_compare(&ref, &now, why, sizeof why) != 0)
                kit_fail(res, "killed at after_marker, yet: %s", why);
            kit_state_free(&now);
        }
        if (!KIT_FAILED(res) && kit_open(fx, NULL, sink, &err) != TM_OK)
            kit_fail(res, "reopen: %s", err.message);
    }
    if (!KIT_FAILED(res))
        kit_expect_commit(run, *sink, good, TM_OK, "the batch", res);
    kit_state_free(&ref);
}

/* Expects exactly one item of KIND at OFFSET (reason when non-zero), or
 * none when kind is 0. */
static void expect_at(const kit_part_state *ps, int64_t offset,
                      tm_item_kind kind, tm_dl_reason reason, kit_result *res) {
    size_t rows = kit_part_count(ps, TM_ITEM_ROW, offset, 0);
    size_t dls = kit_part_count(ps, TM_ITEM_DEAD_LETTER, offset, reason);
    size_t any = rows + kit_part_count(ps, TM_ITEM_DEAD_LETTER, offset, 0);
    int ok = kind == TM_ITEM_ROW           ? rows == 1 && any == 1
             : kind == TM_ITEM_DEAD_LETTER ? dls == 1 && any == 1
                                           : any == 0;
    if (!ok && !KIT_FAILED(res))
        kit_fail(res,
                 "%s[%d] offset %" PRId64 ": %zu row(s), %zu dead "
                 "letter(s)%s; expected %s%s",
                 ps->marker.topic, ps->marker.partition, offset, rows,
                 any - rows, reason ? " of that reason" : "",
                 kind == TM_ITEM_ROW           ? "one row"
                 : kind == TM_ITEM_DEAD_LETTER ? "one dead letter "
                                               : "nothing",
                 kind == TM_ITEM_DEAD_LETTER ? tm_dl_reason_name(reason) : "");
}

static void expect_marker(const kit_part_state *ps, int64_t next, uint64_t rows,
                          uint64_t dls, uint64_t dups, kit_result *res) {
    const tm_marker *m = &ps->marker;
    if (!KIT_FAILED(res) && (m->next_offset != next || m->rows != rows ||
                             m->dead_letters != dls || m->duplicates != dups))
        kit_fail(res,
                 "%s[%d] marker: next_offset %" PRId64 " rows %" PRIu64
                 " dead letters %" PRIu64 " duplicates %" PRIu64
                 "; expected %" PRId64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64,
                 m->topic, m->partition, m->next_offset, m->rows,
                 m->dead_letters, m->duplicates, next, rows, dls, dups);
}

/* 9a. dead letters made by the host, stored with the batch. */
void kit_case_dead_letters(const kit_run *run, kit_result *res) {
    kit_fixture fx;
    void *sink;
    tm_marker m[KIT_NPARTS];
    kit_batch good, gap;
    kit_state st;
    if (!(run->api->capabilities & TM_CAP_DEAD_LETTERS)) {
        kit_skip(res, "capability not declared (TM_CAP_DEAD_LETTERS)");
        return;
    }
    if (kit_setup(&fx, run, "dead_letters", 0, ZERO, &sink, m, res) != 0)
        return;
    /* p0 [0,4): row, parse_error, row, type_mismatch; p1 [0,2): missing
     * field, row. gap: the same plus p2 [1,2) (a gap). */
    for (int v = 0; v < 2; v++) {
        kit_batch *kb = v ? &gap : &good;
        kit_batch_init(kb, run);
        uint32_t r0 = kit_batch_range(kb, 0, 0, 4, m[0].epoch);
        uint32_t r1 = kit_batch_range(kb, 1, 0, 2, m[1].epoch);
        kit_batch_record(kb, r0, 0, NULL, NULL);
        kit_batch_dead_letter(kb, r0, 1, TM_DL_PARSE_ERROR, "not json");
        kit_batch_record(kb, r0, 2, NULL, NULL);
        kit_batch_dead_letter(kb, r0, 3, TM_DL_TYPE_MISMATCH, "/id: text");
        kit_batch_dead_letter(kb, r1, 0, TM_DL_MISSING_FIELD, "/id");
        kit_batch_record(kb, r1, 1, NULL, NULL);
        if (v)
            kit_batch_range(kb, 2, 1, 2, m[2].epoch);
    }
    if (kit_batch_seal(&good) != 0 || kit_batch_seal(&gap) != 0)
        kit_fail(res, "out of memory building the batches");
    else
        refuse_crash_apply(run, &fx, &sink, &good, &gap, res);
    if (!KIT_FAILED(res) && kit_state_fresh(&fx, &st, res) == 0) {
        expect_at(&st.part[0], 0, TM_ITEM_ROW, 0, res);
        expect_at(&st.part[0], 1, TM_ITEM_DEAD_LETTER, TM_DL_PARSE_ERROR, res);
        expect_at(&st.part[0], 2, TM_ITEM_ROW, 0, res);
        expect_at(&st.part[0], 3, TM_ITEM_DEAD_LETTER, TM_DL_TYPE_MISMATCH,
                  res);
        expect_at(&st.part[1], 0, TM_ITEM_DEAD_LETTER, TM_DL_MISSING_FIELD,
                  res);
        expect_at(&st.part[1], 1, TM_ITEM_ROW, 0, res);
        expect_marker(&st.part[0], 4, 2, 2, 0, res);
        expect_marker(&st.part[1], 2, 1, 1, 0, res);
        kit_state_free(&st);
    }
    kit_batch_free(&good);
    kit_batch_free(&gap);
    kit_teardown(&fx, sink);
}

/* 9b. business keys: a key applied before with the same hash is a counted
 * duplicate (across batches and partitions), with another hash a dead
 * letter identity_conflict. */
void kit_case_dedup(const kit_run *run, kit_result *res) {
    kit_fixture fx;
    void *sink;
    tm_marker m[KIT_NPARTS];
    kit_batch first, good, gap;
    kit_state st;
    int dl = (run->api->capabilities & TM_CAP_DEAD_LETTERS) != 0;
    if (!(run->api->capabilities & TM_CAP_DEDUP)) {
        kit_skip(res, "capability not declared (TM_CAP_DEDUP)");
        return;
    }
    if (kit_setup(&fx, run, "dedup", TM_CONFIG_DEDUP, ZERO, &sink, m, res))
        return;
    kit_batch_init(&first, run);
    uint32_t f0 = kit_batch_range(&first, 0, 0, 4, m[0].epoch);
    const char *keys[] = {"order-a", "order-b", "order-c", "order-d"};
    const char *hashes[] = {"hash-a", "hash-b", "hash-c", "hash-d"};
    for (int o = 0; o < 4; o++)
        kit_batch_record(&first, f0, o, keys[o], hashes[o]);
    /* p0 [4,8): b again (duplicate), c with another payload (conflict, if
     * the sink stores dead letters), a new key e, d again; p1 [0,2): a
     * again from another partition (duplicate), a new key f. */
    for (int v = 0; v < 2; v++) {
        kit_batch *kb = v ? &gap : &good;
        kit_batch_init(kb, run);
        uint32_t r0 = kit_batch_range(kb, 0, 4, 8, m[0].epoch);
        uint32_t r1 = kit_batch_range(kb, 1, 0, 2, m[1].epoch);
        kit_batch_record(kb, r0, 4, "order-b", "hash-b");
        if (dl)
            kit_batch_record(kb, r0, 5, "order-c", "hash-OTHER");
        kit_batch_record(kb, r0, 6, "order-e", "hash-e");
        kit_batch_record(kb, r0, 7, "order-d", "hash-d");
        kit_batch_record(kb, r1, 0, "order-a", "hash-a");
        kit_batch_record(kb, r1, 1, "order-f", "hash-f");
        if (v)
            kit_batch_range(kb, 2, 1, 2, m[2].epoch);
    }
    if (kit_batch_seal(&first) != 0 || kit_batch_seal(&good) != 0 ||
        kit_batch_seal(&gap) != 0)
        kit_fail(res, "out of memory building the batches");
    else if (kit_expect_commit(run, sink, &first, TM_OK, "the first batch",
                               res) == 0)
        refuse_crash_apply(run, &fx, &sink, &good, &gap, res);
    if (!KIT_FAILED(res))
        kit_expect_commit(run, sink, &good, TM_ALREADY, "the batch again", res);
    if (!KIT_FAILED(res) && kit_state_fresh(&fx, &st, res) == 0) {
        for (int o = 0; o < 4; o++)
            expect_at(&st.part[0], o, TM_ITEM_ROW, 0, res);
        expect_at(&st.part[0], 4, 0, 0, res);
        if (dl)
            expect_at(&st.part[0], 5, TM_ITEM_DEAD_LETTER,
                      TM_DL_IDENTITY_CONFLICT, res);
        expect_at(&st.part[0], 6, TM_ITEM_ROW, 0, res);
        expect_at(&st.part[0], 7, 0, 0, res);
        expect_at(&st.part[1], 0, 0, 0, res);
        expect_at(&st.part[1], 1, TM_ITEM_ROW, 0, res);
        expect_marker(&st.part[0], 8, 5, (uint64_t)dl, 2, res);
        expect_marker(&st.part[1], 2, 1, 0, 1, res);
        for (size_t k = 0; k < st.part[0].nitems && !KIT_FAILED(res); k++) {
            const kit_item *it = &st.part[0].items[k];
            if (it->kind == TM_ITEM_ROW && it->offset < 4 &&
                strcmp(it->identity, keys[it->offset]) != 0)
                kit_fail(res,
                         "row at offset %" PRId64 " reads back identity"
                         " '%s', expected '%s'",
                         it->offset, it->identity, keys[it->offset]);
        }
        kit_state_free(&st);
    }
    kit_batch_free(&first);
    kit_batch_free(&good);
    kit_batch_free(&gap);
    kit_teardown(&fx, sink);
}
