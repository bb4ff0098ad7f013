/* What a snapshot holds: its manifest list, and the live data files of
 * its manifests (the plugin's own Avro files, read back). */
#include <stdio.h>
#include <stdlib.h>

#include "fsio.h"
#include "snapshot_files.h"
#include "table_meta.h"

int ice_table_read(const ice_table *t, const char *uri, uint8_t **data,
                   size_t *len, char *why, size_t why_size) {
    char path[4096];
    if (ice_table_path(t, uri, path, sizeof path, why, why_size) != 0)
        return -1;
    int rc = fs_read_all(path, data, len, why, why_size);
    if (rc == 1)
        snprintf(why, why_size, "%s is missing", path);
    return rc == 0 ? 0 : -1;
}

int ice_snapshot_manifests(const ice_table *t, json_t *snapshot, ice_mfile **mf,
                           size_t *nmf, char *why, size_t why_size) {
    *mf = NULL;
    *nmf = 0;
    if (!snapshot)
        return 0;
    const char *list =
        json_string_value(json_object_get(snapshot, "manifest-list"));
    uint8_t *data;
    size_t len;
    if (!list) {
        snprintf(why, why_size, "a snapshot without a manifest list");
        return -1;
    }
    if (ice_table_read(t, list, &data, &len, why, why_size) != 0)
        return -1;
    int rc = ice_manifest_list_decode(data, len, mf, nmf);
    free(data);
    if (rc != 0)
        snprintf(why, why_size, "%s: not a manifest list this sink wrote",
                 list);
    return rc;
}

int ice_manifests_files(const ice_table *t, const ice_mfile *mf, size_t n,
                        ice_datafile **files, size_t *nfiles, char *why,
                        size_t why_size) {
    size_t cap = *nfiles;
    for (size_t i = 0; i < n; i++) {
        uint8_t *data;
        size_t len, from = *nfiles;
        char path[4096];
        if (ice_table_read(t, mf[i].path, &data, &len, why, why_size) != 0)
            return -1;
        int rc = ice_manifest_decode(data, len, &mf[i], files, nfiles, &cap);
        free(data);
        if (rc != 0) {
            snprintf(why, why_size, "%s: not a manifest this sink wrote",
                     mf[i].path);
            return -1;
        }
        /* Whoever reads the data files later reads only the table's. */
        for (size_t k = from; k < *nfiles; k++)
            if (ice_table_path(t, (*files)[k].path, path, sizeof path, why,
                               why_size) != 0)
                return -1;
    }
    return 0;
}

int ice_snapshot_datafiles(const ice_table *t, json_t *snapshot,
                           ice_datafile **files, size_t *nfiles, char *why,
                           size_t why_size) {
    ice_mfile *mf;
    size_t nmf;
    *files = NULL;
    *nfiles = 0;
    if (ice_snapshot_manifests(t, snapshot, &mf, &nmf, why, why_size) != 0)
        return -1;
    int rc = ice_manifests_files(t, mf, nmf, files, nfiles, why, why_size);
    ice_mfiles_free(mf, nmf);
    if (rc != 0) {
        ice_datafiles_free(*files, *nfiles);
        *files = NULL;
        *nfiles = 0;
    }
    return rc;
}
