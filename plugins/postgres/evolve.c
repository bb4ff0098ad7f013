/* Columns from the events' schemas (TM_CONFIG_SCHEMA_COLUMNS, ABI 1.6):
 * the sink is opened without columns and each batch brings its own. The
 * first batch with columns creates the table, a later one with more adds
 * them, all in the batch's transaction (docs/sinks/postgres.md). The
 * SQLite sink does the same in its own evolve.c (a plugin links no other
 * plugin's code). The rest of
 * the sink reads s->config, which points to a copy of the host's config
 * holding the batch's columns. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pg_sink.h"

void pg_evolve_free(pg_sink *s) {
    tm_column *cols = (tm_column *)(uintptr_t)s->own.columns;
    for (size_t i = 0; cols && i < s->own.ncolumns; i++)
        free((char *)(uintptr_t)cols[i].name);
    free(cols);
    s->own.columns = NULL;
    s->own.ncolumns = 0;
}

/* Whether the batch's columns are the ones copied, name for name. */
static int same_columns(const pg_sink *s, const tm_batch *b) {
    if (b->ncolumns != s->own.ncolumns)
        return 0;
    for (size_t i = 0; i < b->ncolumns; i++) {
        const tm_column *a = TM_CELEM(tm_column, b->columns, i);
        const tm_column *o = &s->own.columns[i];
        if (strcmp(a->name, o->name) != 0 || a->type != o->type ||
            a->key != o->key || a->required != o->required)
            return 0;
    }
    return 1;
}

/* Copies the batch's columns into s->own. 0, or -1 OOM (own unchanged). */
static int copy_columns(pg_sink *s, const tm_batch *b) {
    tm_column *cols = calloc(b->ncolumns, sizeof *cols);
    size_t i = 0;
    for (; cols && i < b->ncolumns; i++) {
        const tm_column *a = TM_CELEM(tm_column, b->columns, i);
        cols[i] = (tm_column){.struct_size = sizeof *cols,
                              .name = strdup(a->name),
                              .type = a->type,
                              .required = a->required,
                              .key = a->key};
        if (!cols[i].name)
            break;
    }
    if (!cols || i < b->ncolumns) {
        for (size_t k = 0; cols && k < i; k++)
            free((char *)(uintptr_t)cols[k].name);
        free(cols);
        return -1;
    }
    pg_evolve_free(s);
    s->own.columns = cols;
    s->own.ncolumns = b->ncolumns;
    return 0;
}

tm_status pg_evolve(pg_sink *s, const tm_batch *b, tm_error *err) {
    if (!s->schema_cols || !TM_BATCH_HAS_COLUMNS(b) || b->ncolumns == 0)
        return TM_OK;
    if (s->schema_ready && same_columns(s, b))
        return TM_OK;
    for (size_t i = 0; i < b->ncolumns; i++) {
        const tm_column *a = TM_CELEM(tm_column, b->columns, i);
        if (!a->name || !*a->name || !pg_type_sql(a->type) ||
            strncasecmp(a->name, PG_HIDDEN_PREFIX, strlen(PG_HIDDEN_PREFIX)) ==
                0) {
            s->host->set_error(err,
                               "batch %s: column %zu (\"%s\"): no name, an "
                               "unknown type, or a name starting with "
                               "\"%s\" (the sink's own)",
                               b->batch_id, i, a->name ? a->name : "",
                               PG_HIDDEN_PREFIX);
            return TM_FATAL;
        }
    }
    if (copy_columns(s, b) != 0) {
        s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
        return TM_RETRY;
    }
    /* Until this batch commits, the table may not have them: a rollback
     * takes the DDL back too, and the next commit does it again. */
    s->schema_ready = 0;
    /* The session's staging table (copy.c) has the old columns: made
     * again at the next write. Inside the transaction, so a rollback
     * keeps it as the table is. */
    tm_status r = pg_exec(s, "DROP TABLE IF EXISTS pg_temp.tm_stage",
                          "dropping the staging table", err);
    if (r == TM_OK)
        r = pg_schema_evolve(s, err);
    s->schema_ready = r == TM_OK;
    return r;
}
