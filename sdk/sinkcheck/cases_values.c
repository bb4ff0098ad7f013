/* The stored column values: a batch of rows with every column's value
 * generated from the offset, read back through scan, must give back
 * exactly the values the kit sent (tm_scan_item.values, ABI 1.2). SKIP when
 * the sink's items carry no values; a sink giving values for some rows
 * only fails. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "kit.h"

/* What the kit sent for PART at OFFSET, as text; NULL if none. */
static char *sent(const kit_run *run, const kit_batch *kb, int part,
                  int64_t offset) {
    for (size_t i = 0; i < kb->b.nrecords; i++) {
        const tm_record *r = TM_CELEM(tm_record, kb->b.records, i);
        const tm_range *g = TM_CELEM(tm_range, kb->b.ranges, r->range);
        if (r->offset == offset && g->partition == kit_part_partition[part] &&
            strcmp(g->topic, kit_part_topic[part]) == 0)
            return kit_values_text(run, r->values, run->ncolumns);
    }
    return NULL;
}

static void compare(const kit_run *run, const kit_batch *kb,
                    const kit_state *st, kit_result *res) {
    size_t with = 0, without = 0;
    for (int p = 0; p < KIT_NPARTS && !KIT_FAILED(res); p++)
        for (size_t k = 0; k < st->part[p].nitems && !KIT_FAILED(res); k++) {
            const kit_item *it = &st->part[p].items[k];
            if (it->kind != TM_ITEM_ROW)
                continue;
            if (!it->values) {
                without++;
                continue;
            }
            with++;
            char *want = sent(run, kb, p, it->offset);
            if (!want)
                kit_fail(res,
                         "out of memory, or no row sent at %s[%d] %" PRId64,
                         kit_part_topic[p], kit_part_partition[p], it->offset);
            else if (strcmp(want, it->values) != 0)
                kit_fail(res,
                         "%s[%d] offset %" PRId64
                         ": scan gave back %.300s; the kit sent %.300s",
                         kit_part_topic[p], kit_part_partition[p], it->offset,
                         it->values, want);
            free(want);
        }
    if (KIT_FAILED(res))
        return;
    if (with && without)
        kit_fail(res, "%zu rows came back with values and %zu without", with,
                 without);
    else if (!with && without)
        kit_skip(res, "scan gives rows back without their values "
                      "(tm_scan_item.values, ABI 1.2)");
    else if (!with)
        kit_fail(res, "inconclusive: no row came back");
}

void kit_case_values(const kit_run *run, kit_result *res) {
    kit_fixture fx;
    void *sink;
    tm_marker m[KIT_NPARTS];
    kit_batch kb;
    kit_state st;
    const int64_t zero[] = {0, 0, 0}, five[] = {5, 5, 5};
    int64_t e[KIT_NPARTS];
    if (kit_setup(&fx, run, "values", 0, zero, &sink, m, res) != 0)
        return;
    for (int p = 0; p < KIT_NPARTS; p++)
        e[p] = m[p].epoch;
    if (kit_batch_dense(&kb, run, zero, five, e) != 0)
        kit_fail(res, "out of memory building the batch");
    else if (kit_expect_commit(run, sink, &kb, TM_OK, "batch", res) == 0 &&
             kit_state_fresh(&fx, &st, res) == 0) {
        compare(run, &kb, &st, res);
        kit_state_free(&st);
    }
    kit_batch_free(&kb);
    kit_teardown(&fx, sink);
}
