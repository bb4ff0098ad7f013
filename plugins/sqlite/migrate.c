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

/* A column added to TABLE in one write transaction: ADD (SQL that adds
 * it, then fills it where needed). *rc, and what failed: "<step> COLUMN". */
static const char *add_column(sq_sink *s, const char *table, const char *column,
                              int (*add)(sq_sink *), int *rc) {
    const char *step = "reading the columns for";
    int have = has_column(s, table, column, rc);
    if (have == 1)
        return step;
    if (*rc == SQLITE_OK) {
        step = "BEGIN IMMEDIATE to add";
        *rc = sq_exec(s, "BEGIN IMMEDIATE");
    }
    if (*rc == SQLITE_OK) {
        step = "adding";
        have = has_column(s, table, column, rc);
    }
    if (*rc == SQLITE_OK && have == 0)
        *rc = add(s);
    if (*rc == SQLITE_OK) {
        step = "COMMIT after adding";
        *rc = sq_exec(s, "COMMIT");
    }
    return step;
}

/* tidemark_keys.applied_wall: the wall clock at which a key was applied,
 * beside its record timestamp, so that retention does not depend on the
 * producer's clock alone. Keys stored before it count as applied now (the
 * first open that migrates): the safe side, they are kept at least the
 * retention from here. */
static int add_applied_wall(sq_sink *s) {
    /* ADD COLUMN takes a constant default only: this open's clock. */
    char sql[160];
    snprintf(sql, sizeof sql,
             "ALTER TABLE " SQ_KEYS " ADD COLUMN applied_wall INTEGER "
             "NOT NULL DEFAULT %lld",
             (long long)sq_wall_ms());
    return sq_exec(s, sql);
}

/* tidemark_keysets.seed_check (docs/sinks/sqlite.md, Business keys held in
 * memory): each connector's check value from the seed it has now, filled
 * in the transaction that adds the column, so that no row is left
 * without one (a row without one is refused). */
static int add_seed_check(sq_sink *s) {
    int rc =
        sq_exec(s, "ALTER TABLE " SQ_KEYSETS " ADD COLUMN seed_check INTEGER");
    sqlite3_stmt *get = NULL, *put = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(
            s->db, "SELECT connector, seed FROM " SQ_KEYSETS, -1, &get, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db,
                                "UPDATE " SQ_KEYSETS " SET seed_check = ?2 "
                                "WHERE connector = ?1",
                                -1, &put, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(get)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        if (sqlite3_column_bytes(get, 1) != 16)
            continue; /* not a seed: read_row refuses it */
        rc = sqlite3_bind_value(put, 1, sqlite3_column_value(get, 0));
        if (rc == SQLITE_OK)
            rc = sqlite3_bind_int64(
                put, 2, sq_keys_seed_check(sqlite3_column_blob(get, 1)));
        if (rc == SQLITE_OK && (rc = sqlite3_step(put)) == SQLITE_DONE)
            rc = SQLITE_OK;
        sqlite3_reset(put);
    }
    sqlite3_finalize(get);
    sqlite3_finalize(put);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static const struct {
    const char *table, *column;
    int (*add)(sq_sink *);
} MIGRATIONS[] = {
    {SQ_KEYS, "applied_wall", add_applied_wall},
    {SQ_KEYSETS, "seed_check", add_seed_check},
};

tm_status sq_migrate(sq_sink *s, tm_error *err) {
    for (size_t i = 0; i < sizeof MIGRATIONS / sizeof MIGRATIONS[0]; i++) {
        int rc;
        const char *step =
            add_column(s, MIGRATIONS[i].table, MIGRATIONS[i].column,
                       MIGRATIONS[i].add, &rc);
        if (rc == SQLITE_OK)
            continue;
        char what[128];
        snprintf(what, sizeof what, "migrating %s: %s %s", MIGRATIONS[i].table,
                 step, MIGRATIONS[i].column);
        tm_status r = sq_fail(s, rc, what, err);
        sq_rollback(s);
        return r;
    }
    return TM_OK;
}
