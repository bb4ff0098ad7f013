/* Columns from the events' schemas (TM_CONFIG_SCHEMA_COLUMNS, ABI 1.6):
 * the sink is opened without columns and each batch brings its own. The
 * first batch with columns creates the table, a later one with more adds
 * them, all in the batch's transaction (docs/sinks/postgres.md). The rest
 * of the sink reads s->config, which points to a copy of the host's config
 * holding the batch's columns (the SDK's tidemark/columns.h keeps them). */
#include <string.h>
#include <tidemark/columns.h>

#include "pg_sink.h"

void pg_evolve_free(pg_sink *s) {
    tm_columns_free(&s->follow.cols);
    s->own.columns = NULL;
    s->own.ncolumns = 0;
}

tm_status pg_evolve(pg_sink *s, const tm_batch *b, tm_error *err) {
    if (!s->schema_cols)
        return TM_OK;
    char why[256];
    int go = tm_columns_follow_begin(&s->follow, b, PG_HIDDEN_PREFIX,
                                     pg_type_sql, why, sizeof why);
    if (go < 0)
        s->host->set_error(err, "batch %s: %s", b->batch_id, why);
    if (go <= 0)
        return go == 0 ? TM_OK : go == -1 ? TM_FATAL : TM_RETRY;
    s->own.columns = s->follow.cols.cols;
    s->own.ncolumns = s->follow.cols.n;
    /* The session's staging table (copy.c) has the old columns: made
     * again at the next write. Inside the transaction, so a rollback
     * keeps it as the table is. */
    tm_status r = pg_exec(s, "DROP TABLE IF EXISTS pg_temp.tm_stage",
                          "dropping the staging table", err);
    if (r == TM_OK)
        r = pg_schema_evolve(s, err);
    tm_columns_follow_end(&s->follow, r == TM_OK);
    return r;
}
