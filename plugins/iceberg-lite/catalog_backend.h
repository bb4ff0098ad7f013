/* What catalog.c shares with its backends (catalog_sqlite.c,
 * catalog_pg.c): the open catalog, the operations a backend implements
 * and the SQL they run. */
#ifndef TM_ICE_CATALOG_BACKEND_H
#define TM_ICE_CATALOG_BACKEND_H

#include "catalog.h"

typedef struct ice_catalog_ops {
    /* As ice_catalog_load and ice_catalog_swap (old NULL: insert). */
    int (*load)(ice_catalog *c, char **loc, char *why, size_t why_size);
    int (*swap)(ice_catalog *c, const char *old, const char *new_loc, char *why,
                size_t why_size);
    void (*close)(ice_catalog *c);
} ice_catalog_ops;

/* The statements every backend runs, in the SQL both SQLite and
 * PostgreSQL take: $1 catalog_name, $2 table_namespace, $3 table_name, $4
 * the new metadata location, $5 the old one (SQLite binds them by name).
 * The tables are the v1 schema (with iceberg_type), column for column
 * SQLAlchemy's DDL of pyiceberg's IcebergTables and
 * IcebergNamespaceProperties. [has_type]: without / with iceberg_type. */
extern const char ICE_CAT_CREATE_TABLES[];
extern const char ICE_CAT_ADD_NAMESPACE[];
extern const char *const ICE_CAT_LOAD[2];
extern const char *const ICE_CAT_INSERT[2];
extern const char ICE_CAT_SWAP[];

/* The row's metadata_location and iceberg_type as read (NULL: SQL NULL)
 * judged: *out a malloc'd copy of the location, 0; or -1 with why (a
 * view, no location, out of memory). */
int ice_catalog_row(const ice_catalog *c, const char *loc, const char *type,
                    char **out, char *why, size_t why_size);

/* "catalog NAME, table NS.TABLE" with the names at their longest. */
#define ICE_CATALOG_IDENT_MAX (3 * ICE_CATALOG_NAME_MAX + 32)

struct ice_catalog {
    const ice_catalog_ops *ops;
    void *db;                /* the backend's connection */
    char *name, *ns, *table; /* the row's key */
    int has_type;            /* iceberg_tables has iceberg_type (schema v1) */
    int fsync; /* commits are durable when they return (PostgreSQL: every
                  session sets synchronous_commit on) */
    int lock_timeout_ms; /* PostgreSQL: a statement's longest wait */
    /* PostgreSQL, the last statement: cancelled by us at its deadline
     * (catalog_pg.c); lost: no answer even after the cancel, the
     * connection is given up (its outcome unknown) and made again at the
     * next call. */
    int cancelled, lost;
    /* PostgreSQL: the session's PGcancel, taken when it connected: a
     * statement whose connection broke is cancelled through it (libpq
     * gives none for a connection already gone). */
    void *cancel;
    int empty; /* opened without create, no catalog there yet (no database
                  file, or no tables): no row, nothing written */
    char ident[ICE_CATALOG_IDENT_MAX];
};

/* Cancels, through CANCEL (a PGcancel, taken over and freed), what its
 * session runs, waiting for the server to take the request at most until
 * DEADLINE (ice_mono_ms; catalog_pg_cancel.c): 1 taken by then; 0 not
 * (not sent, refused, or no answer yet: it may still land later). */
int ice_pg_cancel_until(void *cancel, int64_t deadline);

/* The SQLite backend on database FILE: sets c->ops and c->db. As
 * ice_catalog_open: 0 or -1 with why. */
int ice_catalog_sqlite_open(ice_catalog *c, const char *file, int create,
                            int fsync, char *why, size_t why_size);
/* The PostgreSQL backend on libpq connection URI CONNINFO. The same. */
int ice_catalog_pg_open(ice_catalog *c, const char *conninfo, int create,
                        int fsync, char *why, size_t why_size);

#endif
