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
#include <dirent.h>
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

/* A mark's first line: "catalog \"NAME\", table NS.TABLE" (as
 * ice_catalog_ident). */
#define ICE_CATALOG_IDENT_TEXT (ICE_CATALOG_NAME_MAX * 3 + 64)

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

/* N of "<N>-<anything>.metadata.json" (a catalog's metadata file, any
 * engine's: pyiceberg starts at 0), -1 for any other name. */
static int64_t catalog_file_version(const char *name) {
    int64_t v = 0;
    const char *p = name;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (ICE_VERSION_MAX - (*p - '0')) / 10)
            return -1;
        v = v * 10 + (*p - '0');
    }
    size_t n = strlen(p), tail = strlen(".metadata.json");
    return p > name && *p == '-' && n > tail &&
                   strcmp(p + n - tail, ".metadata.json") == 0
               ? v
               : -1;
}

/* The catalog metadata files in metadata/, the newest one's name into
 * name: 1 when any is not a first version (N other than 1), 0 when all
 * are (what a registration this catalog began and never finished
 * leaves), -1 when there is none, -2 with why. */
static int newest_catalog_file(const ice_table *t, char *name, size_t name_size,
                               char *why, size_t why_size) {
    DIR *d = opendir(t->meta_dir);
    if (!d) {
        if (errno == ENOENT)
            return -1;
        snprintf(why, why_size, "open %s: %s", t->meta_dir, strerror(errno));
        return -2;
    }
    int64_t newest = -1;
    int later = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int64_t v = catalog_file_version(e->d_name);
        if (v < 0)
            continue;
        later |= v != 1;
        if (v > newest) {
            newest = v;
            snprintf(name, name_size, "%s", e->d_name);
        }
    }
    closedir(d);
    return newest < 0 ? -1 : later;
}

/* metadata/ICE_CATALOG_MARK's first line into text ("" when absent). 0,
 * or -1 with why. */
static int read_mark(const ice_table *t, char *text, size_t size, char *why,
                     size_t why_size) {
    char path[PATH_SIZE];
    snprintf(path, sizeof path, "%s/%s", t->meta_dir, ICE_CATALOG_MARK);
    uint8_t *data = NULL;
    size_t len;
    text[0] = '\0';
    int rc = fs_read_all(path, &data, &len, why, why_size);
    if (rc == 1)
        return 0;
    if (rc != 0)
        return -1;
    size_t n = 0;
    while (n < len && data[n] != '\n' && data[n] != '\0')
        n++;
    snprintf(text, size, "%.*s", (int)(n >= size ? size - 1 : n),
             (const char *)data);
    free(data);
    return 0;
}

/* The row's absence: a new table, unless the directory already holds a
 * table: a file-system table (not registered: refused, it would be
 * forked), or a catalog table this row does not name (renamed or dropped
 * without purge, or registered in another catalog): registering a second
 * table there would make each one's vacuum delete the other's files. Also
 * refused when the row was there before (dropped meanwhile). Only the
 * first-version files of a registration this same catalog table began and
 * never finished are taken as ours. 1 or -1 with why. */
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
    char mark[ICE_CATALOG_IDENT_TEXT], name[256];
    if (read_mark(t, mark, sizeof mark, why, why_size) != 0)
        return -1;
    int c = newest_catalog_file(t, name, sizeof name, why, why_size);
    if (c < -1)
        return -1;
    int other = mark[0] && strcmp(mark, id) != 0;
    if (c > 0 || (other && c == 0)) {
        snprintf(
            why, why_size,
            "%s: not in the catalog, but %s already holds a catalog "
            "table's metadata (metadata/%s%s%s%s): it was renamed or "
            "dropped without purge, or another catalog manages it. "
            "Register that metadata file under this name if it is this "
            "table (pyiceberg: SqlCatalog(...).register_table("
            "\"NS.TABLE\", \"file://%s/%s\")), or give this table an "
            "empty path of its own",
            id, t->root, name, other ? "; marked as " : "", other ? mark : "",
            other ? " in metadata/" ICE_CATALOG_MARK : "", t->meta_dir, name);
        return -1;
    }
    if (other) {
        snprintf(why, why_size,
                 "%s: not in the catalog, but %s is marked as the directory "
                 "of %s (metadata/%s): give this table an empty path of its "
                 "own, or remove the mark if that table is gone for good",
                 id, t->root, mark, ICE_CATALOG_MARK);
        return -1;
    }
    return 1;
}

/* Checks M's table-uuid against the one this writer opened (remembered
 * at its first version): the row naming another table (dropped and
 * created again at the same location, or replaced) is refused, as
 * Iceberg's catalogs refuse a UUID change, and stays refused
 * (t->replaced). 0 or -1 with why. */
static int same_table(ice_table *t, json_t *m, char *why, size_t why_size) {
    const char *got = json_string_value(json_object_get(m, "table-uuid"));
    if (!got)
        got = "";
    if (!t->cat_uuid[0]) {
        if (strlen(got) < sizeof t->cat_uuid)
            snprintf(t->cat_uuid, sizeof t->cat_uuid, "%s", got);
        return 0;
    }
    if (strcmp(got, t->cat_uuid) == 0)
        return 0;
    t->replaced = 1;
    snprintf(why, why_size,
             "%s: the row now names table-uuid \"%.64s\", not %s, the table "
             "this writer opened: the table was replaced under it (dropped "
             "and created again at the same location, or another table "
             "registered under its name). Refused, as Iceberg's catalogs "
             "refuse a table-uuid change: stop the connector and check which "
             "table the row should name",
             ice_catalog_ident(t->cat), got, t->cat_uuid);
    return -1;
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
    } else if (rc == 0 && same_table(t, m, why, why_size) != 0) {
        json_decref(m);
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
    if (!t->cat_uuid[0]) /* a new table's: remembered, never refused */
        (void)same_table(t, next, why, why_size);
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
