/* libFuzzer target: any bytes as a table's v1.metadata.json, loaded the
 * way every table operation loads it (ice_table_refresh), then read by
 * what reads it without opening other files: the current and parent
 * snapshots, the schema as Parquet columns and as text, the markers kept
 * in snapshot summaries, and the next version built on top of it (the
 * metadata log, a new snapshot id, the markers carried). The table lives
 * in a private temp directory; no file the metadata names is opened. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_tmp.h"
#include "maint.h"
#include "marker_keys.h"
#include "table_meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char root[512], file[512];
    if (!root[0]) {
        fuzz_mkdir("table");
        fuzz_mkdir("table/metadata");
        fuzz_path(root, sizeof root, "table");
        fuzz_path(file, sizeof file, "table/metadata/v1.metadata.json");
    }
    fuzz_write(file, data, size);
    char why[512];
    ice_table t;
    if (ice_table_init(&t, root, 0, 0, why, sizeof why) != 0)
        abort(); /* the directory is there */
    if (ice_table_refresh(&t, why, sizeof why) != 0) {
        ice_table_free(&t);
        return 0;
    }
    json_t *cur = ice_meta_current_snapshot(t.meta);
    if (cur)
        (void)ice_meta_snapshot(t.meta,
                                ice_json_int(cur, "parent-snapshot-id", -1));
    pq_column_def *cols;
    size_t ncols;
    if (ice_schema_columns(t.meta, &cols, &ncols, why, sizeof why) == 0)
        free(cols);
    free(ice_schema_text(t.meta));
    tm_marker m = {.struct_size = sizeof m, .topic = "t", .partition = 0};
    ice_marker_get(t.meta, ICE_MARKER_PREFIX "fz/t/0.", &m);
    json_t *next = ice_meta_next(&t);
    json_t *summary = json_object();
    if (next && summary && ice_markers_carry(t.meta, summary) == 0) {
        int64_t id = ice_new_snapshot_id(t.meta);
        int64_t parent = cur ? ice_json_int(cur, "snapshot-id", -1) : -1;
        int64_t seq = ice_json_int(t.meta, "last-sequence-number", 0);
        (void)ice_meta_add_snapshot(next, id, parent, seq + 1,
                                    "file:///nonexistent/snap.avro", summary);
        summary = NULL; /* stolen */
    }
    json_decref(summary);
    json_decref(next);
    ice_table_free(&t);
    return 0;
}
