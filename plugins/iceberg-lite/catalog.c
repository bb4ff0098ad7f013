/* The catalog settings' text and the open catalog, dispatched to the
 * backend of the URI's scheme (see catalog.h). URIs are written as
 * SQLAlchemy writes them, so that the same text goes into pyiceberg's
 * SqlCatalog(uri=...): "sqlite:///relative.db", "sqlite:////abs.db". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_backend.h"

/* The database file of a "sqlite[+driver]:///FILE" URI, or NULL (why set)
 * when URI is not one (or names no file). */
static const char *sqlite_file(const char *uri, char *why, size_t why_size) {
    const char *p = NULL;
    if (strncmp(uri, "sqlite:", 7) == 0)
        p = uri + 7;
    else if (strncmp(uri, "sqlite+", 7) == 0 && (p = strchr(uri, ':')))
        p++;
    if (!p || strncmp(p, "///", 3) != 0) {
        if (strncmp(uri, "postgresql", 10) == 0)
            snprintf(why, why_size,
                     "PostgreSQL catalogs are not supported yet: give a "
                     "SQLite catalog, \"sqlite:///FILE\"");
        else
            snprintf(why, why_size,
                     "expected \"sqlite:///FILE\" (SQLAlchemy's form, as "
                     "pyiceberg's SqlCatalog takes it; \"sqlite:////abs/"
                     "catalog.db\" for an absolute path)");
        return NULL;
    }
    const char *file = p + 3;
    if (!*file || strcmp(file, ":memory:") == 0) {
        snprintf(why, why_size,
                 "names no database file (an in-memory catalog would "
                 "vanish with the process)");
        return NULL;
    }
    if (strchr(file, '?')) {
        snprintf(why, why_size,
                 "query parameters (\"?...\") are not "
                 "supported");
        return NULL;
    }
    return file;
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
    if (!sqlite_file(ref->uri, why, why_size)) {
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
    snprintf(c->ident, sizeof c->ident, "catalog \"%s\", table %s.%s", c->name,
             c->ns, c->table);
    if (ice_catalog_sqlite_open(c, sqlite_file(ref->uri, why, why_size), create,
                                fsync, why, why_size) != 0) {
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
