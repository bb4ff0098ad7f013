/* The SQL catalog in a SQLite file (see catalog.h): the tables as
 * pyiceberg's SqlCatalog (SQLAlchemy) and Iceberg's JdbcCatalog create
 * them, and the row's compare-and-swap as one UPDATE ... WHERE
 * metadata_location = old, whose row count says who won. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog_backend.h"

/* Writers hold SQLite's lock for one short statement: a writer that finds
 * it taken waits this long before the attempt counts as failed (nothing
 * swapped, the batch retried). Below ICE_CATALOG_LOCK_TIMEOUT_MAX_MS: a
 * swap's wait after the publish check stays within vacuum's margin. */
#define BUSY_TIMEOUT_MS 10000
_Static_assert(BUSY_TIMEOUT_MS <= ICE_CATALOG_LOCK_TIMEOUT_MAX_MS,
               "the busy timeout bounds a swap's wait (catalog.h)");

static sqlite3 *db_of(ice_catalog *c) {
    return c->db;
}

/* Fills why with what failed and SQLite's message; returns rc. */
static int fail(ice_catalog *c, int rc, const char *what, char *why,
                size_t why_size) {
    snprintf(why, why_size, "%s: %s: %s", c->ident, what,
             c->db ? sqlite3_errmsg(db_of(c)) : "no database");
    return rc;
}

/* SQL prepared with its parameters bound by name: $1 $2 $3 the row's key,
 * $4 p4, $5 p5 (catalog_backend.h). NULL with why. */
static sqlite3_stmt *prepare(ice_catalog *c, const char *sql, const char *p4,
                             const char *p5, const char *what, char *why,
                             size_t why_size) {
    const char *vals[5] = {c->name, c->ns, c->table, p4, p5};
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db_of(c), sql, -1, &st, NULL);
    for (int i = 0; rc == SQLITE_OK && i < 5; i++) {
        char name[4] = {'$', (char)('1' + i), '\0', '\0'};
        int idx = sqlite3_bind_parameter_index(st, name);
        if (idx > 0)
            rc = sqlite3_bind_text(st, idx, vals[i], -1, SQLITE_STATIC);
    }
    if (rc != SQLITE_OK) {
        fail(c, -1, what, why, why_size);
        sqlite3_finalize(st);
        return NULL;
    }
    return st;
}

static int sq_load(ice_catalog *c, char **loc, char *why, size_t why_size) {
    const char *what = "reading the table's row";
    sqlite3_stmt *st =
        prepare(c, ICE_CAT_LOAD[c->has_type], NULL, NULL, what, why, why_size);
    if (!st)
        return -1;
    int rc = sqlite3_step(st), r;
    if (rc == SQLITE_DONE)
        r = 1;
    else if (rc != SQLITE_ROW)
        r = fail(c, -1, what, why, why_size);
    else
        r = ice_catalog_row(c, (const char *)sqlite3_column_text(st, 0),
                            (const char *)sqlite3_column_text(st, 1), loc, why,
                            why_size);
    sqlite3_finalize(st);
    return r;
}

/* Runs one statement to its end: SQLITE_DONE, another result code, or -1
 * when it could not be prepared (why set either way but DONE). */
static int run(ice_catalog *c, const char *sql, const char *p4, const char *p5,
               const char *what, char *why, size_t why_size) {
    sqlite3_stmt *st = prepare(c, sql, p4, p5, what, why, why_size);
    if (!st)
        return -1;
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
        fail(c, 0, what, why, why_size);
    sqlite3_finalize(st);
    return rc;
}

/* Registers the table: the namespace (when new) and the row, in one
 * transaction that fails on the row's primary key when another writer
 * registered it first. */
static int sq_insert(ice_catalog *c, const char *loc, char *why,
                     size_t why_size) {
    /* IMMEDIATE: the write lock now, so that BUSY here means nothing was
     * done. */
    if (sqlite3_exec(db_of(c), "BEGIN IMMEDIATE", NULL, NULL, NULL) !=
        SQLITE_OK)
        return fail(c, -1, "registering the table", why, why_size);
    int rc = run(c, ICE_CAT_ADD_NAMESPACE, NULL, NULL,
                 "registering the namespace", why, why_size);
    if (rc == SQLITE_DONE)
        rc = run(c, ICE_CAT_INSERT[c->has_type], loc, NULL,
                 "registering the table", why, why_size);
    if (rc != SQLITE_DONE) {
        sqlite3_exec(db_of(c), "ROLLBACK", NULL, NULL, NULL);
        return (rc & 0xff) == SQLITE_CONSTRAINT ? 1 : -1;
    }
    if (sqlite3_exec(db_of(c), "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        fail(c, 0, "committing the table's registration", why, why_size);
        sqlite3_exec(db_of(c), "ROLLBACK", NULL, NULL, NULL);
        return -2;
    }
    return 0;
}

static int sq_swap(ice_catalog *c, const char *old, const char *new_loc,
                   char *why, size_t why_size) {
    if (!old)
        return sq_insert(c, new_loc, why, why_size);
    /* One statement in autocommit mode: its own transaction. */
    int rc = run(c, ICE_CAT_SWAP, new_loc, old, "the commit's compare-and-swap",
                 why, why_size);
    if (rc == SQLITE_DONE)
        return sqlite3_changes(db_of(c)) == 1 ? 0 : 1;
    /* Busy or locked: the statement never got the write lock. Anything
     * else may have failed while committing. */
    int base = rc & 0xff;
    return rc == -1 || base == SQLITE_BUSY || base == SQLITE_LOCKED ? -1 : -2;
}

static void sq_close(ice_catalog *c) {
    sqlite3_close(db_of(c));
    c->db = NULL;
}

/* Durable commits on this connection. synchronous=FULL syncs the journal
 * and the database, but in the default journal mode (DELETE) a commit
 * ends by unlinking the journal, and that unlink is not synced: after an
 * OS crash the journal can be back and roll the last swap back. TRUNCATE
 * (this connection only, nothing persistent in the file) ends a commit by
 * truncating the journal and syncing that. A database another user put
 * in WAL mode stays so (WAL with FULL syncs every commit). */
static int set_durable(ice_catalog *c, int fsync, char *why, size_t why_size) {
    sqlite3 *db = db_of(c);
    if (!fsync)
        return sqlite3_exec(db, "PRAGMA synchronous=OFF", NULL, NULL, NULL) ==
                       SQLITE_OK
                   ? 0
                   : fail(c, -1, "setting synchronous=OFF", why, why_size);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_exec(db, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st) == SQLITE_ROW ? SQLITE_OK : SQLITE_ERROR;
    const char *mode =
        rc == SQLITE_OK ? (const char *)sqlite3_column_text(st, 0) : NULL;
    int wal = mode && strcmp(mode, "wal") == 0;
    sqlite3_finalize(st);
    if (rc == SQLITE_OK && !wal)
        rc = sqlite3_exec(db, "PRAGMA journal_mode=TRUNCATE", NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0
                           : fail(c, -1, "making the catalog's commits durable",
                                  why, why_size);
}

static const ice_catalog_ops SQLITE_OPS = {
    .load = sq_load, .swap = sq_swap, .close = sq_close};

/* 1 when the database has table NAME, 0 when not, -1 with why. */
static int has_table(ice_catalog *c, const char *name, char *why,
                     size_t why_size) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db_of(c),
                           "SELECT 1 FROM sqlite_master WHERE type = 'table' "
                           "AND name = ?1",
                           -1, &st, NULL) != SQLITE_OK ||
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC) != SQLITE_OK) {
        sqlite3_finalize(st);
        return fail(c, -1, "reading the schema", why, why_size);
    }
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_ROW)
        return 1;
    return rc == SQLITE_DONE ? 0
                             : fail(c, -1, "reading the schema", why, why_size);
}

int ice_catalog_sqlite_open(ice_catalog *c, const char *file, int create,
                            int fsync, char *why, size_t why_size) {
    c->ops = &SQLITE_OPS;
    if (!create && access(file, F_OK) != 0) {
        c->empty = 1; /* nothing is created without create */
        return 0;
    }
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    if (sqlite3_open_v2(file, &db, flags, NULL) != SQLITE_OK) {
        snprintf(why, why_size, "%s: opening %s: %s", c->ident, file,
                 db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return -1;
    }
    c->db = db;
    if (sqlite3_busy_timeout(db, BUSY_TIMEOUT_MS) != SQLITE_OK)
        return fail(c, -1, "setting up the connection", why, why_size);
    if (set_durable(c, fsync, why, why_size) != 0)
        return -1;
    if (create &&
        sqlite3_exec(db, ICE_CAT_CREATE_TABLES, NULL, NULL, NULL) != SQLITE_OK)
        return fail(c, -1, "creating the catalog's tables", why, why_size);
    int rc = has_table(c, "iceberg_tables", why, why_size);
    if (rc < 0)
        return -1;
    if (rc == 0) {
        c->empty = 1; /* no catalog tables yet (and !create) */
        return 0;
    }
    /* A catalog made by an older JdbcCatalog has no iceberg_type
     * (schema v0): rows are then written without it. */
    sqlite3_stmt *st = NULL;
    c->has_type = sqlite3_prepare_v2(db,
                                     "SELECT iceberg_type FROM iceberg_tables "
                                     "LIMIT 0",
                                     -1, &st, NULL) == SQLITE_OK;
    sqlite3_finalize(st);
    return 0;
}
