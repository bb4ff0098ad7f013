/* Writes an iceberg-lite table through the plugin for judge_table.py,
 * which reads it with pyiceberg, pyarrow, DuckDB and fastavro and compares
 * with the rows it computes itself (the rule in ice_fixture.c):
 *   claim orders 0, 1, 2;
 *   batch 1: p0 [0,10) rows 0-7, dead letters 8 and 9; p1 [0,5) rows 0-4;
 *   batch 2: p2 [0,4) with no record (only the marker moves);
 *   batches 3-14: p1 [5+3k, 8+3k) (enough snapshots to merge manifests);
 *   batch 15: p0 [10, 30010), rolled into several Parquet files.
 * With --small (for the CLI test, table_cli.sh, whose expected outputs
 * are written by hand): claim orders 0, 1; p0 [0,4) rows 0-2 and a dead
 * letter at 3; p1 [0,2) rows 0-1; p0 [4,6) rows 4-5.
 * With --compression CODEC: the sink's "compression" setting (else its
 * default); with --partition SPEC its "partition" setting; with --catalog
 * URI the table is in that Iceberg SQL catalog as lake: cli.small. */
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

/* The --small table: three snapshots, one dead letter. */
static int write_small(void *sink, const tm_marker *m) {
    ice_fx_batch kb;
    int rc = 0;
    ice_fx_batch_init(&kb, "small-1");
    uint32_t r = ice_fx_range(&kb, 0, 0, 4, m[0].epoch);
    for (int64_t o = 0; o < 3; o++)
        ice_fx_record(&kb, r, o);
    ice_fx_dead_letter(&kb, r, 3);
    rc |= commit(sink, &kb);
    ice_fx_batch_init(&kb, "small-2");
    r = ice_fx_range(&kb, 1, 0, 2, m[1].epoch);
    for (int64_t o = 0; o < 2; o++)
        ice_fx_record(&kb, r, o);
    rc |= commit(sink, &kb);
    ice_fx_batch_init(&kb, "small-3");
    r = ice_fx_range(&kb, 0, 4, 6, m[0].epoch);
    for (int64_t o = 4; o < 6; o++)
        ice_fx_record(&kb, r, o);
    rc |= commit(sink, &kb);
    return rc;
}

int main(int argc, char **argv) {
    int small = 0, usage = argc < 2;
    const char *codec = NULL, *spec = NULL, *catalog = NULL;
    for (int i = 2; i < argc && !usage; i++) {
        if (strcmp(argv[i], "--small") == 0)
            small = 1;
        else if (strcmp(argv[i], "--compression") == 0 && i + 1 < argc)
            codec = argv[++i];
        else if (strcmp(argv[i], "--partition") == 0 && i + 1 < argc)
            spec = argv[++i];
        else if (strcmp(argv[i], "--catalog") == 0 && i + 1 < argc)
            catalog = argv[++i];
        else
            usage = 1;
    }
    if (usage) {
        fprintf(stderr,
                "usage: %s DIR [--small] [--compression CODEC] [--partition "
                "SPEC] [--catalog URI] (the table goes to DIR/table)\n",
                argv[0]);
        return 2;
    }
    char settings[2048], cat[1536] = "";
    if (catalog)
        snprintf(cat, sizeof cat,
                 ", \"catalog_uri\": \"%s\", \"catalog_name\": \"lake\", "
                 "\"catalog_namespace\": \"cli\", \"catalog_table\": "
                 "\"small\"",
                 catalog);
    snprintf(settings, sizeof settings,
             "{\"path\": \"$T\", \"target_file_size\": 65536%s%s%s%s%s%s%s}",
             codec ? ", \"compression\": \"" : "", codec ? codec : "",
             codec ? "\"" : "", spec ? ", \"partition\": \"" : "",
             spec ? spec : "", spec ? "\"" : "", cat);
    ice_fx fx;
    void *sink;
    tm_error err;
    tm_marker m[3];
    if (ice_fx_init(&fx, "\"target_file_size\": 65536") != 0)
        return 1;
    fx.config.connector = "judge";
    snprintf(fx.table, sizeof fx.table, "%s/table", argv[1]);
    if (ice_fx_settings(&fx, settings) != 0 ||
        ice_fx_open(&fx, &sink, &err) != TM_OK) {
        fprintf(stderr, "open: %s\n", err.message);
        return 1;
    }
    if (ice_fx_claim(sink, m, small ? 2 : 3, &err) != TM_OK) {
        fprintf(stderr, "claim: %s\n", err.message);
        return 1;
    }
    if (small) {
        int bad = write_small(sink, m);
        ice_api->close(sink);
        ice_fx_done(&fx, 0);
        return bad ? 1 : 0;
    }
    ice_fx_batch kb;
    int rc = 0;
    ice_fx_batch_init(&kb, "judge-1");
    uint32_t r0 = ice_fx_range(&kb, 0, 0, 10, m[0].epoch);
    uint32_t r1 = ice_fx_range(&kb, 1, 0, 5, m[1].epoch);
    for (int64_t o = 0; o < 8; o++)
        ice_fx_record(&kb, r0, o);
    ice_fx_dead_letter(&kb, r0, 8);
    ice_fx_dead_letter(&kb, r0, 9);
    for (int64_t o = 0; o < 5; o++)
        ice_fx_record(&kb, r1, o);
    rc |= commit(sink, &kb);
    ice_fx_batch_init(&kb, "judge-2");
    ice_fx_range(&kb, 2, 0, 4, m[2].epoch);
    rc |= commit(sink, &kb);
    for (int k = 0; k < 12; k++) {
        char id[32];
        snprintf(id, sizeof id, "judge-%d", k + 3);
        ice_fx_batch_init(&kb, id);
        uint32_t r = ice_fx_range(&kb, 1, 5 + 3 * k, 8 + 3 * k, m[1].epoch);
        for (int64_t o = 5 + 3 * k; o < 8 + 3 * k; o++)
            ice_fx_record(&kb, r, o);
        rc |= commit(sink, &kb);
    }
    ice_fx_batch_init(&kb, "judge-15");
    r0 = ice_fx_range(&kb, 0, 10, 30010, m[0].epoch);
    for (int64_t o = 10; o < 30010; o++)
        ice_fx_record(&kb, r0, o);
    rc |= commit(sink, &kb);
    ice_api->close(sink);
    ice_fx_done(&fx, 0); /* removes the fixture's own temp dir only */
    return rc ? 1 : 0;
}
