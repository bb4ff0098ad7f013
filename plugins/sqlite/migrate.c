/* Migrations of the helper tables the sink created in older versions: a
 * column added later is added to an existing table at open, in its own
 * write transaction, once (checked first without a lock, so an open of an
 * up-to-date database takes none). */
#include <stdio.h>

#include "sqlite_sink.h"

/* 1 when TABLE has COLUMN, 0 when not; -1 on error (*rc set). */
static int has_column(sq_sink *s, const char *table, const char *column,
                      int *rc) {
    sqlite3_stmt *st = NULL;
    *rc = sqlite3_prepare_v2(s->db,
                             "SELECT count(*) FROM pragma_table_info(?1) "
                             "WHERE name = ?2",
                             -1, &st, NULL);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_text(st, 2, column, -1, SQLITE_STATIC);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_step(st);
    int out = -1;
    if (*rc == SQLITE_ROW) {
        out = sqlite3_column_int(st, 0) > 0;
        *rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return out;
}

/* tidemark_keys.applied_wall: the wall clock at which a key was applied,
 * beside its record timestamp, so that retention does not depend on the
 * producer's clock alone. Keys stored before it count as applied now (the
 * first open that migrates): the safe side, they are kept at least the
 * retention from here. */
tm_status sq_migrate(sq_sink *s, tm_error *err) {
    int rc;
    int have = has_column(s, SQ_KEYS, "applied_wall", &rc);
    if (have == 1)
        return TM_OK;
    const char *step = "migrating " SQ_KEYS ": BEGIN IMMEDIATE";
    if (rc == SQLITE_OK)
        rc = sq_exec(s, "BEGIN IMMEDIATE");
    if (rc == SQLITE_OK) {
        step = "migrating " SQ_KEYS ": adding applied_wall";
        have = has_column(s, SQ_KEYS, "applied_wall", &rc);
    }
    if (rc == SQLITE_OK && have == 0) {
        /* ADD COLUMN takes a constant default only: this open's clock. */
        char sql[160];
        snprintf(sql, sizeof sql,
                 "ALTER TABLE " SQ_KEYS " ADD COLUMN applied_wall INTEGER "
                 "NOT NULL DEFAULT %lld",
                 (long long)sq_wall_ms());
        rc = sq_exec(s, sql);
    }
    if (rc == SQLITE_OK) {
        step = "migrating " SQ_KEYS ": COMMIT";
        rc = sq_exec(s, "COMMIT");
    }
    if (rc == SQLITE_OK)
        return TM_OK;
    tm_status r = sq_fail(s, rc, step, err);
    sq_rollback(s);
    return r;
}
