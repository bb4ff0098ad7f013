/* Read-back for the kit and `tidemark verify`: a partition's rows (offset
 * from the hidden _tm_offset column) and dead letters, in offset order, in
 * one SELECT (one snapshot). Read-only. */
#include <string.h>

#include "sqlite_sink.h"

tm_status sq_scan(void *sink, const char *topic, int32_t partition,
                  void *emit_ctx, tm_error *err) {
    sq_sink *s = sink;
    tm_status r = sq_db_ready(s, err);
    if (r != TM_OK)
        return r;
    sq_call_begin(s, 0);
    if ((r = sq_owner_scan_check(s, topic, partition, err)) != TM_OK)
        return r;
    sqlite3_stmt *st = s->stmt[SQ_SCAN];
    int rc = sqlite3_bind_text(st, 1, s->config->connector, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, topic, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(st, 3, partition);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int dl = sqlite3_column_int(st, 1) == 2;
        tm_scan_item it = {
            .struct_size = sizeof it,
            .kind = dl ? TM_ITEM_DEAD_LETTER : TM_ITEM_ROW,
            .topic = topic,
            .partition = partition,
            .offset = sqlite3_column_int64(st, 0),
            .identity = (const char *)sqlite3_column_text(st, 2),
            .reason = dl ? tm_dl_reason_from_name(
                               (const char *)sqlite3_column_text(st, 3))
                         : (tm_dl_reason)0,
            .detail = dl ? (const char *)sqlite3_column_text(st, 4) : NULL,
        };
        rc = SQLITE_OK;
        if (s->host->emit(emit_ctx, &it) != 0)
            break; /* the reader has seen enough */
    }
    sq_reuse(st);
    if (rc != SQLITE_OK && rc != SQLITE_DONE)
        return sq_fail(s, rc, "scan", err);
    return TM_OK;
}
