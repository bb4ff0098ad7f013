/* Change events (TM_CONFIG_CDC, ABI 1.5), for a sink with TM_CAP_UPSERT |
 * TM_CAP_DELETE: upserts and deletes by the key column applied in offset
 * order within a batch (the last event of a key wins), a delete of a key
 * not stored is no error, each applied event counted in the marker's rows,
 * and the same batch again (ALREADY) does not bring a deleted row back.
 * The kit opens the sink with its settings plus "mode": "upsert" and the
 * first int column as the key. SKIP for a sink without both capabilities. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "kit.h"

/* Batch 1 on kit partition 0, offsets 0..5, then batch 2, offsets 6..8:
 * (key, op) per offset. Left: key 1 from offset 3, key 4 from offset 7. */
static const struct {
    int64_t key;
    uint32_t op;
} EVENTS[] = {
    {1, TM_OP_UPSERT}, {2, TM_OP_UPSERT}, {1, TM_OP_DELETE},
    {1, TM_OP_UPSERT}, {3, TM_OP_UPSERT}, {3, TM_OP_DELETE},
    {2, TM_OP_DELETE}, {4, TM_OP_UPSERT}, {9, TM_OP_DELETE},
};
static const int64_t LEFT[] = {3, 7};

static int build(kit_batch *kb, const kit_run *run, size_t key_col,
                 int64_t from, int64_t to, int64_t epoch) {
    kit_batch_init(kb, run);
    uint32_t r = kit_batch_range(kb, 0, from, to, epoch);
    for (int64_t o = from; o < to; o++)
        kit_batch_change(kb, r, o, key_col, EVENTS[o].key, EVENTS[o].op);
    return kit_batch_seal(kb);
}

/* The rows left are those of LEFT, once each; the marker at 9 with every
 * event counted as applied. */
static void check_state(const kit_fixture *fx, const char *when,
                        kit_result *res) {
    kit_state st;
    if (kit_state_fresh(fx, &st, res) != 0)
        return;
    const kit_part_state *p = &st.part[0];
    size_t nleft = sizeof LEFT / sizeof LEFT[0];
    if (kit_part_kind_total(p, TM_ITEM_ROW) != nleft)
        kit_fail(res, "%s: %zu rows stored, expected %zu (offsets 3 and 7)",
                 when, kit_part_kind_total(p, TM_ITEM_ROW), nleft);
    for (size_t i = 0; i < nleft && !KIT_FAILED(res); i++)
        if (kit_part_count(p, TM_ITEM_ROW, LEFT[i], 0) != 1)
            kit_fail(res,
                     "%s: no row from offset %" PRId64 " (key %" PRId64
                     "'s last event)",
                     when, LEFT[i], EVENTS[LEFT[i]].key);
    if (!KIT_FAILED(res) && (p->marker.next_offset != 9 || p->marker.rows != 9))
        kit_fail(res,
                 "%s: marker next_offset %" PRId64 ", rows %" PRIu64
                 "; expected 9 and 9 (every event applied)",
                 when, p->marker.next_offset, p->marker.rows);
    kit_state_free(&st);
}

static void run_case(const kit_run *keyed, kit_result *res) {
    json_t *settings = json_deep_copy(keyed->settings);
    if (!settings ||
        json_object_set_new(settings, "mode", json_string("upsert")) != 0) {
        json_decref(settings);
        kit_fail(res, "out of memory");
        return;
    }
    kit_fixture fx;
    int rc = kit_fixture_init_settings(&fx, keyed, "cdc", settings,
                                       TM_CONFIG_CDC, res);
    json_decref(settings);
    if (rc != 0)
        return;
    size_t key_col = 0;
    while (!keyed->columns[key_col].key)
        key_col++;
    void *sink = NULL;
    tm_error err;
    tm_marker m[KIT_NPARTS];
    static const int64_t zero[KIT_NPARTS];
    tm_status st = kit_open(&fx, NULL, &sink, &err);
    if (st != TM_OK) {
        kit_fail(res,
                 "open with \"mode\": \"upsert\" and TM_CONFIG_CDC: %s: %s",
                 tm_status_name(st), err.message);
        kit_fixture_done(&fx);
        return;
    }
    if ((st = kit_claim(keyed, sink, m, zero, 0, &err)) != TM_OK)
        kit_fail(res, "claim: %s: %s", tm_status_name(st), err.message);
    kit_batch b1, b2;
    int built = build(&b1, keyed, key_col, 0, 6, m[0].epoch) |
                build(&b2, keyed, key_col, 6, 9, m[0].epoch);
    if (!KIT_FAILED(res) && built != 0)
        kit_fail(res, "out of memory building the batches");
    if (!KIT_FAILED(res) &&
        kit_expect_commit(keyed, sink, &b1, TM_OK, "batch 0..5", res) == 0 &&
        kit_expect_commit(keyed, sink, &b2, TM_OK, "batch 6..8", res) == 0)
        check_state(&fx, "after both batches", res);
    if (!KIT_FAILED(res) && kit_expect_commit(keyed, sink, &b1, TM_ALREADY,
                                              "batch 0..5 again", res) == 0)
        check_state(&fx, "after batch 0..5 again", res);
    kit_batch_free(&b1);
    kit_batch_free(&b2);
    kit_teardown(&fx, sink);
}

void kit_case_cdc(const kit_run *run, kit_result *res) {
    const uint32_t need = TM_CAP_UPSERT | TM_CAP_DELETE;
    if ((run->api->capabilities & need) != need) {
        kit_skip(res, "the sink lacks TM_CAP_UPSERT | TM_CAP_DELETE");
        return;
    }
    size_t key = run->ncolumns;
    for (size_t c = 0; c < run->ncolumns && key == run->ncolumns; c++)
        if (run->columns[c].type == TM_TYPE_INT)
            key = c;
    if (key == run->ncolumns) {
        kit_skip(res, "no int column to key the rows by");
        return;
    }
    tm_column *cols = calloc(run->ncolumns, sizeof *cols);
    if (!cols) {
        kit_fail(res, "out of memory");
        return;
    }
    for (size_t c = 0; c < run->ncolumns; c++) {
        cols[c] = run->columns[c];
        cols[c].key = c == key;
        cols[c].required = c == key;
    }
    kit_run keyed = *run;
    keyed.columns = cols;
    run_case(&keyed, res);
    free(cols);
}
