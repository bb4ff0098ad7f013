/* Columns from each batch (TM_CONFIG_CDC | TM_CONFIG_SCHEMA_COLUMNS, ABI
 * 1.6), for a sink with TM_CAP_SCHEMA_COLUMNS: opened without columns, the
 * sink makes its table from the first batch's tm_batch.columns; a later
 * batch with a column more adds it in its own commit (the rows before it
 * read null in it, the rows after it carry it); a batch whose column has
 * another type, or is optional where the table's is required, is refused
 * with TM_FATAL and nothing committed; and so again from a sink opened
 * afresh (a restart), which knows the columns only from the table itself
 * (also a column joining the key, and one renamed in case only: "Note"
 * for the table's "note"),
 * while a batch of the table's own columns still goes in there. The kit's
 * own columns, not the config's: "id" (int, the key, required), "n" (int),
 * "r" (text, required), then "note" (text). The changed type is int to
 * timestamp, which a store whose column types are coarser than the SDK's
 * (SQLite's INTEGER affinity) must still tell apart. Settings: the run's
 * plus "mode": "upsert", as case cdc. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "kit.h"

enum { NCOLS_MAX = 4 };

/* The column lists the batches carry. */
#define COL(n, t, k, r)                                                        \
    {                                                                          \
        .struct_size = sizeof(tm_column), .name = (n), .type = (t),            \
        .required = (r), .key = (k)                                            \
    }
static const tm_column FIRST[] = {COL("id", TM_TYPE_INT, 1, 1),
                                  COL("n", TM_TYPE_INT, 0, 0),
                                  COL("r", TM_TYPE_TEXT, 0, 1)};
static const tm_column ADDED[] = {
    COL("id", TM_TYPE_INT, 1, 1), COL("n", TM_TYPE_INT, 0, 0),
    COL("r", TM_TYPE_TEXT, 0, 1), COL("note", TM_TYPE_TEXT, 0, 0)};
static const tm_column RETYPED[] = {
    COL("id", TM_TYPE_INT, 1, 1), COL("n", TM_TYPE_TIMESTAMP, 0, 0),
    COL("r", TM_TYPE_TEXT, 0, 1), COL("note", TM_TYPE_TEXT, 0, 0)};
static const tm_column OPTIONAL[] = {
    COL("id", TM_TYPE_INT, 1, 1), COL("n", TM_TYPE_INT, 0, 0),
    COL("r", TM_TYPE_TEXT, 0, 0), COL("note", TM_TYPE_TEXT, 0, 0)};
static const tm_column REKEYED[] = {
    COL("id", TM_TYPE_INT, 1, 1), COL("n", TM_TYPE_INT, 1, 1),
    COL("r", TM_TYPE_TEXT, 0, 1), COL("note", TM_TYPE_TEXT, 0, 0)};
/* "note" renamed in case only: the table's "note" is not this column. */
static const tm_column RECASED[] = {
    COL("id", TM_TYPE_INT, 1, 1), COL("n", TM_TYPE_INT, 0, 0),
    COL("r", TM_TYPE_TEXT, 0, 1), COL("Note", TM_TYPE_TEXT, 0, 0)};
#define NCOLS(a) (sizeof(a) / sizeof((a)[0]))

/* A kit_run whose columns are COLS (for the values the kit generates and
 * for reading them back). */
static kit_run with_columns(const kit_run *run, const tm_column *cols,
                            size_t n) {
    kit_run r = *run;
    r.columns = (tm_column *)(uintptr_t)cols;
    r.ncolumns = n;
    return r;
}

/* Upserts of keys from+1 .. to on kit partition 0 at offsets [from, to),
 * carrying columns COLS. 0, or -1 out of memory. */
static int build(kit_batch *kb, const kit_run *cols_run, int64_t from,
                 int64_t to, int64_t epoch) {
    kit_batch_init(kb, cols_run);
    uint32_t r = kit_batch_range(kb, 0, from, to, epoch);
    for (int64_t o = from; o < to; o++)
        kit_batch_change(kb, r, o, 0, o + 1, TM_OP_UPSERT);
    int rc = kit_batch_seal(kb);
    kb->b.columns = cols_run->columns;
    kb->b.ncolumns = cols_run->ncolumns;
    return rc;
}

/* The text a row of batch KB at OFFSET reads back as under the columns of
 * AS (the batch's values, null in the columns added after it). */
static char *expected(const kit_run *as, const kit_batch *kb, int64_t offset) {
    tm_value vals[NCOLS_MAX];
    const tm_record *rec = NULL;
    for (size_t i = 0; i < kb->b.nrecords && !rec; i++)
        if (kb->records[i].offset == offset)
            rec = &kb->records[i];
    for (size_t c = 0; c < as->ncolumns && c < NCOLS_MAX; c++)
        vals[c] =
            c < kb->b.ncolumns && rec
                ? *TM_CELEM(tm_value, rec->values, c)
                : (tm_value){.struct_size = sizeof(tm_value), .is_null = 1};
    return kit_values_text(as, vals, as->ncolumns);
}

/* Every row of batches B1 and B2 (offsets [0, 6)) reads back with its
 * values, "note" null in B1's: read on the committing instance SINK,
 * whose columns are those of B2 (a sink opened afresh knows none until a
 * batch brings them, and gives rows back without values). */
static void check_added(const kit_run *as, void *sink, const kit_batch *b1,
                        const kit_batch *b2, kit_result *res) {
    kit_state st;
    if (kit_state_read(as, sink, &st, res) != 0)
        return;
    const kit_part_state *p = &st.part[0];
    char why[256];
    if (kit_part_rows_dense(p, 0, 6, why, sizeof why) != 0)
        kit_fail(res, "after the batch adding \"note\": %s", why);
    for (size_t i = 0; i < p->nitems && !KIT_FAILED(res); i++) {
        const kit_item *it = &p->items[i];
        if (it->kind != TM_ITEM_ROW)
            continue;
        char *want = expected(as, it->offset < 3 ? b1 : b2, it->offset);
        if (!want)
            kit_fail(res, "out of memory");
        else if (!it->values)
            kit_fail(res,
                     "offset %" PRId64 ": scan gave no values (the case "
                     "reads the added column back through them)",
                     it->offset);
        else if (strcmp(it->values, want) != 0)
            kit_fail(res,
                     "offset %" PRId64 ": stored %s, expected %s (\"note\" "
                     "null before the batch that added it, set after)",
                     it->offset, it->values, want);
        free(want);
    }
    kit_state_free(&st);
}

/* Nothing of a refused batch is stored: from a fresh instance, the marker
 * of kit partition 0 still at NEXT and exactly the rows [0, NEXT). */
static void check_unchanged(const kit_fixture *fx, int64_t next,
                            const char *when, kit_result *res) {
    kit_state st;
    if (kit_state_fresh(fx, &st, res) != 0)
        return;
    char why[256];
    const kit_part_state *p = &st.part[0];
    if (p->marker.next_offset != next)
        kit_fail(res, "%s: marker next_offset %" PRId64 ", expected %" PRId64,
                 when, p->marker.next_offset, next);
    else if (kit_part_rows_dense(p, 0, next, why, sizeof why) != 0)
        kit_fail(res, "%s: %s", when, why);
    kit_state_free(&st);
}

/* Commits KB expecting TM_FATAL (a refused change), then checks that
 * nothing of it was stored. */
static void expect_refused(const kit_fixture *fx, void *sink,
                           const kit_batch *kb, int64_t next, const char *what,
                           kit_result *res) {
    if (KIT_FAILED(res))
        return;
    tm_error err;
    tm_status st = kit_commit(fx->run, sink, kb, &err);
    if (st != TM_FATAL)
        kit_fail(res,
                 "%s: commit returned %s, expected FATAL (the table's column "
                 "does not fit: the sink must refuse the batch)%s%s",
                 what, tm_status_name(st), err.message[0] ? ": " : "",
                 err.message);
    else
        check_unchanged(fx, next, what, res);
}

/* Opens a fresh instance (a restart) and claims kit partition 0 at 0 (the
 * marker is kept); *epoch is the claimed epoch. */
static void *reopen(const kit_fixture *fx, int64_t *epoch, kit_result *res) {
    static const int64_t zero[KIT_NPARTS];
    tm_marker m[KIT_NPARTS];
    tm_error err;
    void *sink = NULL;
    tm_status st = kit_open(fx, NULL, &sink, &err);
    if (st != TM_OK) {
        kit_fail(res, "open again: %s: %s", tm_status_name(st), err.message);
        return NULL;
    }
    if ((st = kit_claim(fx->run, sink, m, zero, 0, &err)) != TM_OK) {
        kit_fail(res, "claim after the reopen: %s: %s", tm_status_name(st),
                 err.message);
        fx->run->api->close(sink);
        return NULL;
    }
    *epoch = m[0].epoch;
    return sink;
}

static void run_case(const kit_run *bare, kit_fixture *fx, kit_result *res) {
    kit_run first = with_columns(bare, FIRST, NCOLS(FIRST));
    kit_run added = with_columns(bare, ADDED, NCOLS(ADDED));
    kit_run retyped = with_columns(bare, RETYPED, NCOLS(RETYPED));
    kit_run optional = with_columns(bare, OPTIONAL, NCOLS(OPTIONAL));
    kit_run rekeyed = with_columns(bare, REKEYED, NCOLS(REKEYED));
    kit_run recased = with_columns(bare, RECASED, NCOLS(RECASED));
    int64_t epoch = 0;
    void *sink = reopen(fx, &epoch, res);
    if (!sink)
        return;
    kit_batch b1, b2, b3, b4, b5, b6, b7;
    int built = build(&b1, &first, 0, 3, epoch) |
                build(&b2, &added, 3, 6, epoch) |
                build(&b3, &retyped, 6, 8, epoch);
    if (built != 0)
        kit_fail(res, "out of memory building the batches");
    if (!KIT_FAILED(res) &&
        kit_expect_commit(bare, sink, &b1, TM_OK,
                          "the first batch (its columns make the table)",
                          res) == 0 &&
        kit_expect_commit(bare, sink, &b2, TM_OK,
                          "the batch adding column \"note\"", res) == 0)
        check_added(&added, sink, &b1, &b2, res);
    expect_refused(fx, sink, &b3, 6,
                   "column \"n\" changed from int to "
                   "timestamp",
                   res);
    bare->api->close(sink);
    kit_batch_free(&b3);
    sink = KIT_FAILED(res) ? NULL : reopen(fx, &epoch, res);
    if (!sink) {
        kit_batch_free(&b1);
        kit_batch_free(&b2);
        return;
    }
    built =
        build(&b3, &retyped, 6, 8, epoch) | build(&b4, &optional, 6, 8, epoch) |
        build(&b5, &added, 6, 8, epoch) | build(&b6, &rekeyed, 6, 8, epoch) |
        build(&b7, &recased, 6, 8, epoch);
    if (built != 0)
        kit_fail(res, "out of memory building the batches");
    expect_refused(fx, sink, &b3, 6,
                   "reopened: column \"n\" changed from int to timestamp", res);
    bare->api->close(sink);
    sink = KIT_FAILED(res) ? NULL : reopen(fx, &epoch, res);
    if (sink) {
        /* the batches again with the new epoch */
        b4.ranges[0].epoch = b5.ranges[0].epoch = epoch;
        expect_refused(fx, sink, &b4, 6,
                       "reopened: required column \"r\" made optional", res);
        bare->api->close(sink);
    }
    sink = KIT_FAILED(res) ? NULL : reopen(fx, &epoch, res);
    if (sink) {
        b6.ranges[0].epoch = epoch;
        expect_refused(fx, sink, &b6, 6,
                       "reopened: column \"n\" joined the key", res);
        bare->api->close(sink);
    }
    sink = KIT_FAILED(res) ? NULL : reopen(fx, &epoch, res);
    if (sink) {
        b7.ranges[0].epoch = epoch;
        expect_refused(fx, sink, &b7, 6,
                       "reopened: column \"note\" renamed \"Note\" (in case "
                       "only)",
                       res);
        bare->api->close(sink);
    }
    sink = KIT_FAILED(res) ? NULL : reopen(fx, &epoch, res);
    if (sink) {
        b5.ranges[0].epoch = epoch;
        if (kit_expect_commit(bare, sink, &b5, TM_OK,
                              "reopened: a batch of the table's own columns",
                              res) == 0)
            check_unchanged(fx, 8, "after the batch of the table's columns",
                            res);
        bare->api->close(sink);
    }
    kit_batch_free(&b1);
    kit_batch_free(&b2);
    kit_batch_free(&b3);
    kit_batch_free(&b4);
    kit_batch_free(&b5);
    kit_batch_free(&b6);
    kit_batch_free(&b7);
}

void kit_case_schema_columns(const kit_run *run, kit_result *res) {
    if (!(run->api->capabilities & TM_CAP_SCHEMA_COLUMNS)) {
        kit_skip(res, "the sink lacks TM_CAP_SCHEMA_COLUMNS");
        return;
    }
    json_t *settings = json_deep_copy(run->settings);
    if (!settings ||
        json_object_set_new(settings, "mode", json_string("upsert")) != 0) {
        json_decref(settings);
        kit_fail(res, "out of memory");
        return;
    }
    /* opened without columns: each batch brings its own */
    kit_run bare = with_columns(run, NULL, 0);
    kit_fixture fx;
    int rc = kit_fixture_init_settings(&fx, &bare, "schema_columns", settings,
                                       TM_CONFIG_CDC | TM_CONFIG_SCHEMA_COLUMNS,
                                       res);
    json_decref(settings);
    if (rc != 0)
        return;
    run_case(&bare, &fx, res);
    kit_fixture_done(&fx);
}
