/* The configs of `tidemark run`, read at start and again at each reload
 * (SIGHUP): the CONFIG arguments expanded, every config loaded and checked
 * as `tidemark validate` checks it. */
#ifndef TM_RUN_CONFIGS_H
#define TM_RUN_CONFIGS_H

#include <stddef.h>

#include "config/connector_config.h"

/* The config files of the CONFIG arguments (of run, and of validate, which
 * checks what run would run): a file as given; a directory
 * for the *.json files in it, in name order (names starting with '.'
 * skipped), so that a reload sees a file added or removed there. A file
 * given twice (the same device and inode: a directory and a file in it, a
 * symlink to another config) is listed once, with a note. 0 with
 * *files (free with tm_run_files_free), or -1 with each problem printed as
 * "PATH: message" (a directory without any *.json file is one). */
int tm_run_config_files(const char *const *args, size_t nargs, char ***files,
                        size_t *nfiles);
void tm_run_files_free(char **files, size_t n);

/* Whether a config needs no plugin validate: the one its connector runs
 * with now (a reload does not ask a running store again). */
typedef int (*tm_run_unchanged_fn)(void *ctx, const tm_connector_config *cfg);

/* Loads every file and checks it as `tidemark validate` does, in the same
 * order and with the same lines: the config, the name clash, then the
 * plugin (its loading and, unless unchanged says so, its own validate),
 * then the checks across the configs (tm_cli_cross_check).
 * cfgs[i] gets each config that loaded (the caller frees them). 0, or -1
 * with every problem printed as "FILE: PATH: message". */
int tm_run_configs_load(char *const *files, size_t n, const char *const *dirs,
                        size_t ndirs, tm_run_unchanged_fn unchanged, void *ctx,
                        tm_connector_config **cfgs);

#endif
