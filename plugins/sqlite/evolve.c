/* Columns from the events' schemas (TM_CONFIG_SCHEMA_COLUMNS, ABI 1.6):
 * the sink is opened without columns and each batch brings its own. The
 * first batch with columns creates the table, a later one with more adds
 * them, all in the batch's transaction (docs/sinks/sqlite.md). The rest of
 * the sink reads s->config, which points to a copy of the host's config
 * holding the batch's columns (the SDK's tidemark/columns.h keeps them). */
#include <string.h>
#include <tidemark/columns.h>

#include "sqlite_sink.h"

void sq_evolve_free(sq_sink *s) {
    tm_columns_free(&s->follow.cols);
    s->own.columns = NULL;
    s->own.ncolumns = 0;
}

tm_status sq_evolve(sq_sink *s, const tm_batch *b, tm_error *err) {
    if (!s->schema_cols)
        return TM_OK;
    char why[256];
    int go = tm_columns_follow_begin(&s->follow, b, SQ_HIDDEN_PREFIX,
                                     sq_type_sql, why, sizeof why);
    if (go < 0)
        s->host->set_error(err, "batch %s: %s", b->batch_id, why);
    if (go <= 0)
        return go == 0 ? TM_OK : go == -1 ? TM_FATAL : TM_RETRY;
    s->own.columns = s->follow.cols.cols;
    s->own.ncolumns = s->follow.cols.n;
    tm_status r = sq_schema_evolve(s, err);
    tm_columns_follow_end(&s->follow, r == TM_OK);
    return r;
}
