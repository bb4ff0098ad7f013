/* Finding and loading sink plugins. The only module that touches dlopen. */
#ifndef TM_PLUGIN_LOADER_H
#define TM_PLUGIN_LOADER_H

#include <stddef.h>
#include <tidemark/sink.h>

typedef struct tm_plugin {
    const tm_sink_api *api; /* checked: magic, ABI, size, required callbacks */
    char path[4096];        /* the file it was loaded from */
} tm_plugin;

/* Plugin directories in search order: each --plugin-dir given (extra, may
 * be NULL/0), then TIDEMARK_PLUGIN_PATH (colon-separated), then the
 * built-in default. Fills dirs (pointers into static or env storage) and
 * returns the count (at most max). */
size_t tm_plugin_dirs(const char *const *extra, size_t nextra,
                      const char **dirs, size_t max);

/* Loads NAME_OR_PATH: a path when it contains '/', else "<dir>/<name>.so"
 * in dirs order. 0 on success; -1 with one line in errstr naming the file,
 * the field and both values. Never dlclose()s. Thread-safe. */
int tm_plugin_load(const char *name_or_path, const char *const *dirs,
                   size_t ndirs, tm_plugin *out, char *errstr,
                   size_t errstr_size);

#endif
