/* An Iceberg SQL catalog: the two tables of Iceberg's JdbcCatalog, which
 * pyiceberg's SqlCatalog creates the same way (iceberg_tables and
 * iceberg_namespace_properties), in a SQLite file or in PostgreSQL. A
 * table registered
 * there is one row (catalog_name, table_namespace, table_name) whose
 * metadata_location names the current metadata file; a commit is the
 * compare-and-swap of that column (docs/iceberg-lite.md, "Catalog").
 *
 *   catalog.c         the settings' text (URI, names), open, the table's
 *                     row by the backend of the URI's scheme, the SQL
 *   catalog_sqlite.c  the SQLite backend
 *   catalog_pg.c      the PostgreSQL backend (libpq)
 *   catalog_meta.c    an ice_table whose versions live in the catalog:
 *                     refresh, the metadata file's name, the publish */
#ifndef TM_ICE_CATALOG_H
#define TM_ICE_CATALOG_H

#include <jansson.h>
#include <stddef.h>

#include "table_meta.h"

/* What the settings name (strings owned by the caller). */
typedef struct ice_catalog_ref {
    const char *uri;     /* as SQLAlchemy spells it: "sqlite:////abs.db",
                            "postgresql://user@host:5432/db" */
    const char *name;    /* the catalog's name (catalog_name) */
    const char *ns;      /* the namespace (table_namespace), levels by "." */
    const char *table;   /* the table's name (table_name) */
    int lock_timeout_ms; /* PostgreSQL: the longest a statement may wait
                            (on a row lock, or at all); 0 the default
                            ICE_CATALOG_LOCK_TIMEOUT_MS */
} ice_catalog_ref;

/* The longest a catalog statement waits (PostgreSQL's lock_timeout and
 * statement_timeout, SQLite's busy timeout): a swap waiting on a lock is
 * a stall between a writer's publish check and its publish, which must
 * stay well below the margin between ICE_PUBLISH_MAX_MS and vacuum's age
 * floor (docs/iceberg-lite.md, "Vacuum beside writers"). */
#define ICE_CATALOG_LOCK_TIMEOUT_MS     20000
#define ICE_CATALOG_LOCK_TIMEOUT_MIN_MS 100
#define ICE_CATALOG_LOCK_TIMEOUT_MAX_MS 30000
/* How long a (re)connection to a PostgreSQL catalog may take when the URI
 * does not say (connect_timeout, whole seconds), and the TCP settings
 * that find a dead connection while a statement waits for its answer. */
#define ICE_CATALOG_CONNECT_TIMEOUT_S "10"
/* A PostgreSQL catalog statement's deadline on our side: its answer is
 * awaited for the lock timeout and this slack (the server's own timeouts
 * answer first), then the statement is cancelled (a commit that waits
 * after its statement, e.g. on a deferred trigger or on synchronous
 * replication, is not under statement_timeout), and its answer awaited
 * ICE_CATALOG_CANCEL_WAIT_MS more before the connection is given up. */
#define ICE_CATALOG_DEADLINE_SLACK_MS 2000
#define ICE_CATALOG_CANCEL_WAIT_MS    3000

/* The longest name the catalog's columns hold (VARCHAR(255)) and the
 * longest metadata_location (VARCHAR(1000)). */
#define ICE_CATALOG_NAME_MAX 255
#define ICE_CATALOG_LOC_MAX  1000

/* The row's key and its backend; opaque outside catalog*.c. */
typedef struct ice_catalog ice_catalog;

/* Which setting of REF is wrong and why, from the text alone (changes
 * nothing): 0, or -1 with *key the setting's name and why filled. */
int ice_catalog_check_ref(const ice_catalog_ref *ref, const char **key,
                          char *why, size_t why_size);
/* Opens the catalog REF names. create: make the database and its two
 * tables when missing (as pyiceberg does on first use); else a catalog
 * not there yet changes nothing and has no row (validate, the CLI).
 * fsync: the catalog's own commits are durable when they return. 0, or
 * -1 with why. */
int ice_catalog_open(const ice_catalog_ref *ref, int create, int fsync,
                     ice_catalog **out, char *why, size_t why_size);
void ice_catalog_close(ice_catalog *c);
/* "catalog NAME, table NS.TABLE", for messages. */
const char *ice_catalog_ident(const ice_catalog *c);
/* The row's metadata_location into *loc (malloc'd). 0; 1 no such table
 * (no row); -1 with why (also a row that is a view or has no location). */
int ice_catalog_load(ice_catalog *c, char **loc, char *why, size_t why_size);
/* The commit: the row's metadata_location from OLD to NEW (and
 * previous_metadata_location to OLD) only when it is still OLD; with OLD
 * NULL, the row is inserted (the table registered) only when there is
 * none. 0 swapped; 1 another writer's value was there first (nothing
 * changed); -1 failed, nothing changed; -2 the outcome is unknown. */
int ice_catalog_swap(ice_catalog *c, const char *old, const char *new_loc,
                     char *why, size_t why_size);

/* ---- A table whose versions live in the catalog (catalog_meta.c) ---- */

/* Makes T (after ice_table_init) a catalog table: its versions are the
 * catalog row's, no longer v<N>.metadata.json. create as for
 * ice_catalog_open. 0, or -1 with why. */
int ice_table_use_catalog(ice_table *t, const ice_catalog_ref *ref, int create,
                          char *why, size_t why_size);
/* ice_table_refresh of a catalog table: the row's metadata, loaded when
 * it changed. 0 loaded; 1 no row (and no file-system table at the path);
 * -1 with why. */
int ice_cat_refresh(ice_table *t, char *why, size_t why_size);
/* The new metadata file's path (size >= 4096): a name no other writer
 * takes, "<N>-<UUID>.metadata.json" as Iceberg's catalogs name them, N
 * the next version (five digits at least). */
void ice_cat_new_path(const ice_table *t, const char *uuid, char *path);
/* ice_meta_link of a catalog table: NEXT, written and made durable at
 * PATH by ice_meta_stage, published by the row's compare-and-swap; as
 * ice_meta_link: 0, 1 lost, -1 not published, -2 unknown. PATH is removed
 * when it is known not published. */
int ice_cat_publish(ice_table *t, json_t *next, const char *path, char *why,
                    size_t why_size);
/* metadata/ICE_CATALOG_MARK: the directory is a catalog table's (written
 * before its first swap by each writer that finds it missing). */
#define ICE_CATALOG_MARK "catalog-table.text"

/* A file-system table's refusal of a directory a catalog manages (its
 * versions are not v<N> files: writing them would fork the table). 0, or
 * -1 with why. */
int ice_table_not_cataloged(const ice_table *t, char *why, size_t why_size);

#endif
