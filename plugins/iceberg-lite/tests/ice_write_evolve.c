/* Writes an evolved iceberg-lite table through the plugin for
 * judge_evolve.py (pyiceberg, pyarrow, DuckDB and fastavro read it):
 *   mapping v1 (id, body, amount, flag, at): claim orders 0, 1; batch 1:
 *   p0 [0,10), p1 [0,6); batch 2: p0 [10,20); close;
 *   mapping v2 (v1 plus doc and raw, optional): claim again; batch 3:
 *   p0 [20,30), p1 [6,12); batch 4: p1 [12,15).
 * Values follow the fixture's rule (ice_fixture.c). With --partition SPEC
 * the sink's "partition" setting. --v1-only: batches 1 and 2 only;
 * --resume-v1: batches 3 and 4 only, with mapping v1 (the judge has made
 * the table's id an Iceberg int and amount a float meanwhile: the
 * mapping's int and float widen them). The table goes to DIR/table. */
#include <stdio.h>
#include <string.h>

#include "ice_fixture.h"

static int commit(void *sink, ice_fx_batch *kb) {
    tm_error err = {sizeof err, ""};
    ice_fx_seal(kb);
    tm_status rc = ice_api->commit(sink, &kb->b, &err);
    if (rc != TM_OK)
        fprintf(stderr, "commit %s: %s: %s\n", kb->id, tm_status_name(rc),
                err.message);
    ice_fx_batch_free(kb);
    return rc == TM_OK ? 0 : -1;
}

/* One batch of rows [s0, e0) in p0 and [s1, e1) in p1 (empty: none). */
static int batch(void *sink, const tm_marker *m, const char *id, int64_t s0,
                 int64_t e0, int64_t s1, int64_t e1) {
    ice_fx_batch kb;
    ice_fx_batch_init(&kb, id);
    if (e0 > s0) {
        uint32_t r = ice_fx_range(&kb, 0, s0, e0, m[0].epoch);
        for (int64_t o = s0; o < e0; o++)
            ice_fx_record(&kb, r, o);
    }
    if (e1 > s1) {
        uint32_t r = ice_fx_range(&kb, 1, s1, e1, m[1].epoch);
        for (int64_t o = s1; o < e1; o++)
            ice_fx_record(&kb, r, o);
    }
    return commit(sink, &kb);
}

static void *open_claim(ice_fx *fx, tm_marker *m) {
    void *sink;
    tm_error err;
    if (ice_fx_open(fx, &sink, &err) != TM_OK) {
        fprintf(stderr, "open: %s\n", err.message);
        return NULL;
    }
    if (ice_fx_claim(sink, m, 2, &err) != TM_OK) {
        fprintf(stderr, "claim: %s\n", err.message);
        ice_api->close(sink);
        return NULL;
    }
    return sink;
}

int main(int argc, char **argv) {
    const char *spec = NULL;
    int usage = argc < 2, v1_only = 0, resume_v1 = 0;
    for (int i = 2; i < argc && !usage; i++) {
        if (strcmp(argv[i], "--partition") == 0 && i + 1 < argc)
            spec = argv[++i];
        else if (strcmp(argv[i], "--v1-only") == 0)
            v1_only = 1;
        else if (strcmp(argv[i], "--resume-v1") == 0)
            resume_v1 = 1;
        else
            usage = 1;
    }
    if (usage) {
        fprintf(stderr,
                "usage: %s DIR [--partition SPEC] [--v1-only | "
                "--resume-v1]\n",
                argv[0]);
        return 2;
    }
    char settings[1024];
    snprintf(settings, sizeof settings, "{\"path\": \"$T\"%s%s%s}",
             spec ? ", \"partition\": \"" : "", spec ? spec : "",
             spec ? "\"" : "");
    ice_fx fx;
    tm_marker m[2];
    if (ice_fx_init(&fx, "") != 0)
        return 1;
    fx.config.connector = "judge";
    snprintf(fx.table, sizeof fx.table, "%s/table", argv[1]);
    if (ice_fx_settings(&fx, settings) != 0)
        return 1;
    size_t all = fx.config.ncolumns;
    fx.config.ncolumns = 5; /* mapping v1: without doc and raw */
    void *sink;
    int rc = 0;
    if (!resume_v1) {
        if (!(sink = open_claim(&fx, m)))
            return 1;
        rc |= batch(sink, m, "evolve-1", 0, 10, 0, 6);
        rc |= batch(sink, m, "evolve-2", 10, 20, 0, 0);
        ice_api->close(sink);
        if (v1_only) {
            ice_fx_done(&fx, 0);
            return rc ? 1 : 0;
        }
        fx.config.ncolumns = all; /* mapping v2 */
    }
    if (!(sink = open_claim(&fx, m)))
        return 1;
    rc |= batch(sink, m, "evolve-3", 20, 30, 6, 12);
    rc |= batch(sink, m, "evolve-4", 0, 0, 12, 15);
    ice_api->close(sink);
    ice_fx_done(&fx, 0); /* removes the fixture's own temp dir only */
    return rc ? 1 : 0;
}
