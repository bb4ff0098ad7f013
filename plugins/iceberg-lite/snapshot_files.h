/* What a snapshot holds: its manifest list and the live data files of its
 * manifests, read back from the plugin's own Avro files. */
#ifndef TM_ICE_SNAPSHOT_FILES_H
#define TM_ICE_SNAPSHOT_FILES_H

#include <jansson.h>
#include <stddef.h>

#include "manifest.h"

/* The manifest list of SNAPSHOT (NULL: none, an empty list). 0, or -1
 * with why. */
int ice_snapshot_manifests(json_t *snapshot, ice_mfile **mf, size_t *nmf,
                           char *why, size_t why_size);
/* The live data files of the manifests mf[0..n), appended to *files. */
int ice_manifests_files(const ice_mfile *mf, size_t n, ice_datafile **files,
                        size_t *nfiles, char *why, size_t why_size);
/* Both at once: the live data files of SNAPSHOT into *files / *nfiles
 * (malloc'd; free with ice_datafiles_free). 0, or -1 with why. */
int ice_snapshot_datafiles(json_t *snapshot, ice_datafile **files,
                           size_t *nfiles, char *why, size_t why_size);

#endif
