/* What a snapshot holds: its manifest list and the live data files of its
 * manifests, read back from the plugin's own Avro files. */
#ifndef TM_ICE_SNAPSHOT_FILES_H
#define TM_ICE_SNAPSHOT_FILES_H

#include <jansson.h>
#include <stddef.h>

#include "manifest.h"
#include "table_meta.h"

/* Every file named here is confined to table T (ice_table_path): a
 * manifest list, manifest or data file outside it is an error, never
 * read. */
/* A file the metadata names (a URI or a path relative to T), malloc'd
 * into *data / *len. 0, or -1 with why ("... is missing" when it is). */
int ice_table_read(const ice_table *t, const char *uri, uint8_t **data,
                   size_t *len, char *why, size_t why_size);
/* The manifest list of SNAPSHOT (NULL: none, an empty list). 0, or -1
 * with why. */
int ice_snapshot_manifests(const ice_table *t, json_t *snapshot, ice_mfile **mf,
                           size_t *nmf, char *why, size_t why_size);
/* The live data files of the manifests mf[0..n), appended to *files. */
int ice_manifests_files(const ice_table *t, const ice_mfile *mf, size_t n,
                        ice_datafile **files, size_t *nfiles, char *why,
                        size_t why_size);
/* Both at once: the live data files of SNAPSHOT into *files / *nfiles
 * (malloc'd; free with ice_datafiles_free). 0, or -1 with why. */
int ice_snapshot_datafiles(const ice_table *t, json_t *snapshot,
                           ice_datafile **files, size_t *nfiles, char *why,
                           size_t why_size);

#endif
