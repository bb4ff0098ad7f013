/* A table whose versions live in an Iceberg SQL catalog (see catalog.h).
 * The catalog row's metadata_location is the truth: a metadata file is
 * written under a name of its own (no other writer takes it), made durable
 * by the commit's barrier, and published by the row's compare-and-swap
 * from the version the commit was built on. A writer that lost (the row
 * moved on) removes its file, refreshes and judges its markers again,
 * exactly as after losing the link of a file-system table; a crash between
 * the file and the swap leaves an orphan file no reader is ever pointed at.
 * metadata/catalog-table.text says that a catalog manages the directory,
 * so that no file-system writer forks it with v<N>.metadata.json links. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "fsio.h"

#define PATH_SIZE 4096

/* "file://" + metadata/ + "/" + "<N>-<uuid>.metadata.json" with N of up
 * to 19 digits. */
#define LOC_EXTRA (7 + 1 + 19 + 1 + 36 + 14)

int ice_table_use_catalog(ice_table *t, const ice_catalog_ref *ref, int create,
                          char *why, size_t why_size) {
    /* Refused now rather than at the first swap: the catalog's column (and
     * other catalogs reading the row) hold 1000 bytes. */
    size_t n = strlen(t->meta_dir) + LOC_EXTRA;
    if (n > ICE_CATALOG_LOC_MAX) {
        snprintf(why, why_size,
                 "the table's metadata files would be named by locations of "
                 "up to %zu bytes, more than the %d the catalog's "
                 "metadata_location holds: give the table a shorter path",
                 n, ICE_CATALOG_LOC_MAX);
        return -1;
    }
    return ice_catalog_open(ref, create, t->fsync, &t->cat, why, why_size);
}

/* N of a metadata file a catalog names: "<N>-<uuid>.metadata.json" (the
 * catalogs' names) or "v<N>.metadata.json" (a file-system table that was
 * registered); 0 for any other name. Only the next file's name uses it. */
static int64_t version_of(const char *loc) {
    const char *name = strrchr(loc, '/');
    name = name ? name + 1 : loc;
    int64_t v = ice_meta_version_of(name);
    if (v > 0)
        return v;
    v = 0;
    const char *p = name;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (ICE_VERSION_MAX - (*p - '0')) / 10)
            return 0;
        v = v * 10 + (*p - '0');
    }
    return p > name && *p == '-' ? v : 0;
}

/* The row's absence: a new table, unless the directory holds a
 * file-system table (not registered: refused, it would be forked) or the
 * row was there before (dropped meanwhile). 1 or -1 with why. */
static int no_row(ice_table *t, char *why, size_t why_size) {
    const char *id = ice_catalog_ident(t->cat);
    if (t->meta) {
        snprintf(why, why_size,
                 "%s: the table's row is gone from the catalog (dropped "
                 "while this writer had it open)",
                 id);
        return -1;
    }
    int64_t v = ice_table_newest_on_disk(t, why, why_size);
    if (v < 0)
        return -1;
    if (v > 0) {
        snprintf(why, why_size,
                 "%s: not in the catalog, but %s holds a file-system table "
                 "(v%lld.metadata.json): stop its writers and register it "
                 "(pyiceberg: SqlCatalog(...).register_table(\"NS.TABLE\", "
                 "\"file://%s/v%lld.metadata.json\")), or give the catalog "
                 "table a path of its own",
                 id, t->root, (long long)v, t->meta_dir, (long long)v);
        return -1;
    }
    return 1;
}

int ice_cat_refresh(ice_table *t, char *why, size_t why_size) {
    char *loc = NULL, path[PATH_SIZE], inner[512];
    int rc = ice_catalog_load(t->cat, &loc, why, why_size);
    if (rc != 0)
        return rc < 0 ? -1 : no_row(t, why, why_size);
    if (t->meta && t->meta_loc && strcmp(loc, t->meta_loc) == 0) {
        free(loc);
        return 0;
    }
    json_t *m = NULL;
    /* The row is read from a database anyone may write: the file it
     * names must lie in this table's directory, like any file the
     * metadata names. */
    if (ice_table_path(t, loc, path, sizeof path, inner, sizeof inner) != 0) {
        snprintf(why, why_size,
                 "%s: metadata_location is not a file of the table at "
                 "setting \"path\" %s: %s",
                 ice_catalog_ident(t->cat), t->root, inner);
        rc = -1;
    } else if ((rc = ice_meta_read(path, &m, why, why_size)) == 1) {
        snprintf(why, why_size,
                 "%s: metadata_location names %s, which does not exist",
                 ice_catalog_ident(t->cat), path);
        rc = -1;
    }
    if (rc != 0) {
        free(loc);
        return -1;
    }
    json_decref(t->meta);
    free(t->meta_loc);
    t->meta = m;
    t->meta_loc = loc;
    t->version = version_of(loc);
    return 0;
}

void ice_cat_new_path(const ice_table *t, const char *uuid, char *path) {
    snprintf(path, PATH_SIZE, "%s/%05lld-%s.metadata.json", t->meta_dir,
             (long long)(t->version + 1), uuid);
}

/* Writes metadata/catalog-table.text once (durably with fsync) before
 * the first swap this writer makes: from then on file-system writers
 * refuse the directory. 0 or -1 with why. */
static int mark_managed(ice_table *t, char *why, size_t why_size) {
    char path[PATH_SIZE], text[ICE_CATALOG_NAME_MAX * 3 + 64];
    if (t->cat_marked)
        return 0;
    snprintf(path, sizeof path, "%s/%s", t->meta_dir, ICE_CATALOG_MARK);
    int e = fs_exists(path);
    if (e == 0) {
        snprintf(text, sizeof text, "%s\n", ice_catalog_ident(t->cat));
        if (fs_write_new(path, text, strlen(text), t->fsync, why, why_size) !=
                0 &&
            fs_exists(path) != 1) /* another writer's is as good */
            return -1;
        if (t->fsync && fs_sync_dir(t->meta_dir, why, why_size) != 0)
            return -1;
    } else if (e < 0) {
        snprintf(why, why_size, "stat %s: %s", path, strerror(errno));
        return -1;
    }
    t->cat_marked = 1;
    return 0;
}

/* Forgets the loaded version: the next refresh reads the row afresh. */
static void drop_cache(ice_table *t) {
    json_decref(t->meta);
    free(t->meta_loc);
    t->meta = NULL;
    t->meta_loc = NULL;
    t->version = 0;
}

int ice_cat_publish(ice_table *t, json_t *next, const char *path, char *why,
                    size_t why_size) {
    char loc[PATH_SIZE + 16];
    snprintf(loc, sizeof loc, "file://%s", path);
    if (mark_managed(t, why, why_size) != 0) {
        unlink(path);
        return -1;
    }
    /* No loaded version: the table is new, registered by an insert. */
    int rc = ice_catalog_swap(t->cat, t->meta ? t->meta_loc : NULL, loc, why,
                              why_size);
    if (rc == 1 || rc == -1) {
        unlink(path); /* never published */
        return rc;
    }
    if (rc == -2) {
        drop_cache(t); /* the file stays: the row may name it */
        return -2;
    }
    char *dup = strdup(loc);
    if (!dup) {
        /* Published; only our copy of it is missing. */
        drop_cache(t);
        return 0;
    }
    json_decref(t->meta);
    free(t->meta_loc);
    t->meta = json_incref(next);
    t->meta_loc = dup;
    t->version++;
    return 0;
}

int ice_table_not_cataloged(const ice_table *t, char *why, size_t why_size) {
    char path[PATH_SIZE];
    snprintf(path, sizeof path, "%s/%s", t->meta_dir, ICE_CATALOG_MARK);
    uint8_t *data = NULL;
    size_t len;
    int rc = fs_read_all(path, &data, &len, why, why_size);
    if (rc == 1)
        return 0;
    if (rc == 0) {
        /* "catalog NAME, table NS.TABLE\n" as written above. */
        size_t n = strcspn((const char *)data, "\n");
        snprintf(why, why_size,
                 "%s: the table is managed by an Iceberg SQL catalog (%.*s, "
                 "metadata/%s): its versions are the catalog row's; open it "
                 "through the catalog (the sink's catalog_* settings, "
                 "tidemark table's --catalog options; docs/iceberg-lite.md, "
                 "\"Catalog\")",
                 t->root, (int)(n > 800 ? 800 : n), (const char *)data,
                 ICE_CATALOG_MARK);
    }
    free(data);
    return -1;
}
