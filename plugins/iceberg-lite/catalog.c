/* The catalog settings' text, the open catalog dispatched to the backend
 * of the URI's scheme, and what the backends share: their SQL and the
 * judgment of the row (see catalog.h). URIs are written as SQLAlchemy
 * writes them, so that the same text goes into pyiceberg's
 * SqlCatalog(uri=...): "sqlite:///relative.db", "sqlite:////abs.db",
 * "postgresql+psycopg2://user@host:5432/db". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_backend.h"

/* The catalog's backends, by the URI's scheme. */
enum { CAT_SQLITE, CAT_PG };

/* A URI's scheme and target: for "sqlite[+driver]:///FILE" the database
 * file; for "postgresql[+driver]://..." (or "postgres://") the same URI
 * without "+driver", which libpq takes as its conninfo. The target goes
 * to out (size >= strlen(uri) + 1). 0, or -1 with why. */
static int parse_uri(const char *uri, int *kind, char *out, size_t size,
                     char *why, size_t why_size) {
    const char *sep = strstr(uri, "://");
    size_t scheme = sep ? strcspn(uri, "+:") : 0;
    if (sep && scheme == 6 && strncmp(uri, "sqlite", 6) == 0) {
        const char *file = sep + 3;
        if (*file != '/') {
            snprintf(why, why_size,
                     "expected \"sqlite:///FILE\" (three slashes; "
                     "\"sqlite:////abs/catalog.db\" for an absolute path)");
            return -1;
        }
        file++;
        if (!*file || strcmp(file, ":memory:") == 0) {
            snprintf(why, why_size,
                     "names no database file (an in-memory catalog would "
                     "vanish with the process)");
            return -1;
        }
        if (strchr(file, '?')) {
            snprintf(why, why_size,
                     "query parameters (\"?...\") are not supported in a "
                     "SQLite catalog's URI");
            return -1;
        }
        *kind = CAT_SQLITE;
        snprintf(out, size, "%s", file);
        return 0;
    }
    if (sep && ((scheme == 10 && strncmp(uri, "postgresql", 10) == 0) ||
                (scheme == 8 && strncmp(uri, "postgres", 8) == 0))) {
        /* SQLAlchemy's "+psycopg2" names its driver: libpq has none. */
        *kind = CAT_PG;
        snprintf(out, size, "%.*s%s", (int)scheme, uri, sep);
        return 0;
    }
    snprintf(why, why_size,
             "expected \"sqlite:///FILE\" or \"postgresql://USER@HOST:PORT/"
             "DB\" (SQLAlchemy's forms, as pyiceberg's SqlCatalog takes "
             "them)");
    return -1;
}

/* NAME as a catalog column holds it: 1 to 255 bytes; dots allowed or not. */
static int name_ok(const char *name, int dots, char *why, size_t why_size) {
    size_t n = strlen(name);
    if (n == 0 || n > ICE_CATALOG_NAME_MAX) {
        snprintf(why, why_size, "%zu bytes: expected 1 to %d", n,
                 ICE_CATALOG_NAME_MAX);
        return -1;
    }
    if (!dots && strchr(name, '.')) {
        snprintf(why, why_size,
                 "\"%s\" holds a '.': readers split \"namespace.table\" at "
                 "the last dot, so they would not find it",
                 name);
        return -1;
    }
    /* Namespace levels are joined by dots: none of them empty. */
    if (name[0] == '.' || name[n - 1] == '.' || strstr(name, "..")) {
        snprintf(why, why_size, "\"%s\" has an empty namespace level", name);
        return -1;
    }
    return 0;
}

int ice_catalog_check_ref(const ice_catalog_ref *ref, const char **key,
                          char *why, size_t why_size) {
    int kind;
    size_t n = strlen(ref->uri) + 1;
    char *target = malloc(n);
    int rc = target ? parse_uri(ref->uri, &kind, target, n, why, why_size) : -1;
    if (!target)
        snprintf(why, why_size, "out of memory");
    free(target);
    if (rc != 0) {
        *key = "catalog_uri";
        return -1;
    }
    if (name_ok(ref->name, 1, why, why_size) != 0) {
        *key = "catalog_name";
        return -1;
    }
    if (name_ok(ref->ns, 1, why, why_size) != 0) {
        *key = "catalog_namespace";
        return -1;
    }
    if (name_ok(ref->table, 0, why, why_size) != 0) {
        *key = "catalog_table";
        return -1;
    }
    return 0;
}

const char ICE_CAT_CREATE_TABLES[] =
    "CREATE TABLE IF NOT EXISTS iceberg_tables ("
    "catalog_name VARCHAR(255) NOT NULL, "
    "table_namespace VARCHAR(255) NOT NULL, "
    "table_name VARCHAR(255) NOT NULL, "
    "metadata_location VARCHAR(1000), "
    "previous_metadata_location VARCHAR(1000), "
    "iceberg_type VARCHAR(5), "
    "PRIMARY KEY (catalog_name, table_namespace, table_name));"
    "CREATE TABLE IF NOT EXISTS iceberg_namespace_properties ("
    "catalog_name VARCHAR(255) NOT NULL, "
    "namespace VARCHAR(255) NOT NULL, "
    "property_key VARCHAR(255) NOT NULL, "
    "property_value VARCHAR(1000) NOT NULL, "
    "PRIMARY KEY (catalog_name, namespace, property_key));";

/* The namespace exists for readers that list it (the property both
 * catalogs write on create_namespace), unless it has properties already;
 * a writer registering another table of it at the same time is no
 * error. */
const char ICE_CAT_ADD_NAMESPACE[] =
    "INSERT INTO iceberg_namespace_properties "
    "(catalog_name, namespace, property_key, property_value) "
    "SELECT $1, $2, 'exists', 'true' WHERE NOT EXISTS ("
    "SELECT 1 FROM iceberg_namespace_properties "
    "WHERE catalog_name = $1 AND namespace = $2) ON CONFLICT DO NOTHING";

const char *const ICE_CAT_LOAD[2] = {
    "SELECT metadata_location, NULL FROM iceberg_tables WHERE catalog_name "
    "= $1 AND table_namespace = $2 AND table_name = $3",
    "SELECT metadata_location, iceberg_type FROM iceberg_tables WHERE "
    "catalog_name = $1 AND table_namespace = $2 AND table_name = $3"};

const char *const ICE_CAT_INSERT[2] = {
    "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
    "metadata_location, previous_metadata_location) VALUES ($1, $2, $3, $4, "
    "NULL)",
    "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
    "metadata_location, previous_metadata_location, iceberg_type) VALUES "
    "($1, $2, $3, $4, NULL, 'TABLE')"};

/* One statement: its own transaction in either database. */
const char ICE_CAT_SWAP[] =
    "UPDATE iceberg_tables SET metadata_location = $4, "
    "previous_metadata_location = $5 WHERE catalog_name = $1 AND "
    "table_namespace = $2 AND table_name = $3 AND metadata_location = $5";

int ice_catalog_row(const ice_catalog *c, const char *loc, const char *type,
                    char **out, char *why, size_t why_size) {
    *out = NULL;
    if (type && strcmp(type, "TABLE") != 0) {
        snprintf(why, why_size, "%s: the catalog's entry is a %s, not a table",
                 c->ident, type);
        return -1;
    }
    if (!loc || !*loc) {
        snprintf(why, why_size,
                 "%s: the catalog's row has no "
                 "metadata_location",
                 c->ident);
        return -1;
    }
    if (!(*out = strdup(loc))) {
        snprintf(why, why_size, "out of memory (catalog row)");
        return -1;
    }
    return 0;
}

void ice_catalog_close(ice_catalog *c) {
    if (!c)
        return;
    if (c->ops)
        c->ops->close(c);
    free(c->name);
    free(c->ns);
    free(c->table);
    free(c);
}

int ice_catalog_open(const ice_catalog_ref *ref, int create, int fsync,
                     ice_catalog **out, char *why, size_t why_size) {
    const char *key;
    *out = NULL;
    if (ice_catalog_check_ref(ref, &key, why, why_size) != 0)
        return -1;
    ice_catalog *c = calloc(1, sizeof *c);
    if (!c || !(c->name = strdup(ref->name)) || !(c->ns = strdup(ref->ns)) ||
        !(c->table = strdup(ref->table))) {
        ice_catalog_close(c);
        snprintf(why, why_size, "out of memory (catalog)");
        return -1;
    }
    /* Out of range (0: not given) is the default: a longer wait would
     * break vacuum's margin (catalog.h). */
    c->lock_timeout_ms =
        ref->lock_timeout_ms >= ICE_CATALOG_LOCK_TIMEOUT_MIN_MS &&
                ref->lock_timeout_ms <= ICE_CATALOG_LOCK_TIMEOUT_MAX_MS
            ? ref->lock_timeout_ms
            : ICE_CATALOG_LOCK_TIMEOUT_MS;
    snprintf(c->ident, sizeof c->ident, "catalog \"%s\", table %s.%s", c->name,
             c->ns, c->table);
    int kind;
    size_t n = strlen(ref->uri) + 1;
    char *target = malloc(n);
    int rc = target ? parse_uri(ref->uri, &kind, target, n, why, why_size) : -1;
    if (!target)
        snprintf(why, why_size, "out of memory (catalog)");
    if (rc == 0)
        rc = kind == CAT_SQLITE
                 ? ice_catalog_sqlite_open(c, target, create, fsync, why,
                                           why_size)
                 : ice_catalog_pg_open(c, target, create, fsync, why, why_size);
    free(target);
    if (rc != 0) {
        ice_catalog_close(c);
        return -1;
    }
    *out = c;
    return 0;
}

const char *ice_catalog_ident(const ice_catalog *c) {
    return c->ident;
}

int ice_catalog_load(ice_catalog *c, char **loc, char *why, size_t why_size) {
    *loc = NULL;
    return c->empty ? 1 : c->ops->load(c, loc, why, why_size);
}

int ice_catalog_swap(ice_catalog *c, const char *old, const char *new_loc,
                     char *why, size_t why_size) {
    if (strlen(new_loc) > ICE_CATALOG_LOC_MAX) {
        snprintf(why, why_size,
                 "%s: the metadata location is %zu bytes, more than the "
                 "catalog's %d",
                 c->ident, strlen(new_loc), ICE_CATALOG_LOC_MAX);
        return -1;
    }
    if (c->empty) {
        snprintf(why, why_size, "%s: opened read-only and not there yet",
                 c->ident);
        return -1;
    }
    return c->ops->swap(c, old, new_loc, why, why_size);
}
