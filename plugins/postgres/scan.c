/* Read-back for the kit and `tidemark verify`: a partition's rows (offset
 * from the hidden _tm_offset column) and dead letters, in offset order, in
 * one SELECT (one snapshot). Read-only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_sink.h"

tm_status pg_scan(void *sink, const char *topic, int32_t partition,
                  void *emit_ctx, tm_error *err) {
    pg_sink *s = sink;
    tm_status r = pg_ready(s, err);
    if (r != TM_OK)
        return r;
    pg_call_begin(s, 0);
    pg_buf b = {0};
    pg_buf_add(&b, "SELECT _tm_offset, 1, _tm_identity, NULL, NULL FROM ");
    pg_buf_add(&b, s->q_table);
    pg_buf_add(&b, " WHERE _tm_topic = $2 AND _tm_partition = $3::int UNION "
                   "ALL SELECT \"offset\", 2, NULL, reason, detail FROM ");
    pg_buf_add(&b, s->q_dls);
    pg_buf_add(&b, " WHERE connector = $1 AND topic = $2 AND \"partition\" = "
                   "$3::int ORDER BY 1, 2");
    char part[16];
    snprintf(part, sizeof part, "%d", (int)partition);
    const char *v[3] = {s->config->connector, topic, part};
    PGresult *res =
        b.oom ? NULL : pg_query(s, b.p, 3, v, NULL, NULL, 1, "scan", &r, err);
    pg_buf_free(&b);
    if (!res)
        return r == TM_OK || r == TM_RETRY ? (b.oom ? TM_FATAL : r) : TM_FATAL;
    for (int i = 0; i < PQntuples(res); i++) {
        int dl = strcmp(PQgetvalue(res, i, 1), "2") == 0;
        tm_scan_item it = {
            .struct_size = sizeof it,
            .kind = dl ? TM_ITEM_DEAD_LETTER : TM_ITEM_ROW,
            .topic = topic,
            .partition = partition,
            .offset = strtoll(PQgetvalue(res, i, 0), NULL, 10),
            .identity = PQgetisnull(res, i, 2) ? NULL : PQgetvalue(res, i, 2),
            .reason = dl ? tm_dl_reason_from_name(PQgetvalue(res, i, 3))
                         : (tm_dl_reason)0,
            .detail =
                dl && !PQgetisnull(res, i, 4) ? PQgetvalue(res, i, 4) : NULL,
        };
        if (s->host->emit(emit_ctx, &it) != 0)
            break;
    }
    PQclear(res);
    return TM_OK;
}
