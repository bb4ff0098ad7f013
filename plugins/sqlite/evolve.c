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
    tm_columns_free(&s->cols);
    s->own.columns = NULL;
    s->own.ncolumns = 0;
}

tm_status sq_evolve(sq_sink *s, const tm_batch *b, tm_error *err) {
    if (!s->schema_cols || !TM_BATCH_HAS_COLUMNS(b) || b->ncolumns == 0)
        return TM_OK;
    /* Fitted already: to every batch of these columns, or (2) to their
     * deletes-only batches (a delete needs no NOT NULL column; another
     * DDL each time would lock the table for nothing). */
    if (s->schema_ready && (s->schema_ready == 1 || tm_batch_deletes_only(b)) &&
        tm_columns_same(&s->cols, b->columns, b->ncolumns))
        return TM_OK;
    char why[256];
    if (!tm_columns_makeable(b->columns, b->ncolumns, SQ_HIDDEN_PREFIX,
                             sq_type_sql, why, sizeof why)) {
        s->host->set_error(err, "batch %s: %s", b->batch_id, why);
        return TM_FATAL;
    }
    if (tm_columns_copy(&s->cols, b->columns, b->ncolumns) != 0) {
        s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
        return TM_RETRY;
    }
    s->own.columns = s->cols.cols;
    s->own.ncolumns = s->cols.n;
    s->deletes_only = tm_batch_deletes_only(b);
    /* Until this batch commits, the table may not have them: a rollback
     * takes the DDL back too, and the next commit does it again. */
    s->schema_ready = 0;
    tm_status r = sq_schema_evolve(s, err);
    /* A deletes-only batch was let lack a NOT NULL column: only the next
     * deletes-only batches of the same columns skip the check (2). */
    s->schema_ready = r != TM_OK ? 0 : s->deletes_only ? 2 : 1;
    s->deletes_only = 0;
    return r;
}
