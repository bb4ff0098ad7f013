/* What catalog.c shares with its backends (catalog_sqlite.c): the open
 * catalog and the operations a backend implements. */
#ifndef TM_ICE_CATALOG_BACKEND_H
#define TM_ICE_CATALOG_BACKEND_H

#include "catalog.h"

typedef struct ice_catalog_ops {
    /* As ice_catalog_load and ice_catalog_swap. */
    int (*load)(ice_catalog *c, char **loc, char *why, size_t why_size);
    int (*swap)(ice_catalog *c, const char *old, const char *new_loc, char *why,
                size_t why_size);
    void (*close)(ice_catalog *c);
} ice_catalog_ops;

/* "catalog NAME, table NS.TABLE" with the names at their longest. */
#define ICE_CATALOG_IDENT_MAX (3 * ICE_CATALOG_NAME_MAX + 32)

struct ice_catalog {
    const ice_catalog_ops *ops;
    void *db;                /* the backend's connection */
    char *name, *ns, *table; /* the row's key */
    int has_type;            /* iceberg_tables has iceberg_type (schema v1) */
    int empty; /* opened without create, no catalog there yet (no database
                  file, or no tables): no row, nothing written */
    char ident[ICE_CATALOG_IDENT_MAX];
};

/* The SQLite backend on database FILE: sets c->ops and c->db. As
 * ice_catalog_open: 0 or -1 with why. */
int ice_catalog_sqlite_open(ice_catalog *c, const char *file, int create,
                            int fsync, char *why, size_t why_size);

#endif
