/* Finding and loading sink plugins. The only module that touches dlopen
 * (docs/plugin-loading.md says why it works the way it does). */
#ifndef TM_PLUGIN_LOADER_H
#define TM_PLUGIN_LOADER_H

#include <jansson.h>
#include <stddef.h>
#include <tidemark/sink.h>

#define TM_PLUGIN_PATH_MAX 4096

typedef struct tm_plugin {
    const tm_sink_api *api; /* checked: magic, ABI, size, required callbacks,
                               name; points into the plugin, valid for the
                               life of the process (never unloaded) */
    char path[TM_PLUGIN_PATH_MAX]; /* the file it was loaded from */
} tm_plugin;

/* How many directories TIDEMARK_PLUGIN_PATH may add beyond --plugin-dir:
 * size dirs as nextra + TM_PLUGIN_DIRS_MAX to never lose the default. */
#define TM_PLUGIN_DIRS_MAX 64

/* Plugin directories in search order: each --plugin-dir given (extra, may
 * be NULL/0), then TIDEMARK_PLUGIN_PATH (colon-separated, empty entries
 * skipped), then the built-in default. Fills dirs and returns the count (at
 * most max). The pointers are into extra, into a process-lifetime copy of
 * the environment value, or static: they stay valid for the process.
 * Thread-safe (but, as always, not against a concurrent setenv()). */
size_t tm_plugin_dirs(const char *const *extra, size_t nextra,
                      const char **dirs, size_t max);

/* The default directory (the last one searched): TIDEMARK_PLUGIN_DIR_FROM_BIN
 * (set by the build: the install's plugin directory relative to its bin
 * directory) beside the running executable (/proc/self/exe), so an install
 * moved or made with `cmake --install --prefix` finds its own plugins; the
 * configured absolute TIDEMARK_DEFAULT_PLUGIN_DIR when the executable's path
 * cannot be read. Computed once; static. */
const char *tm_plugin_default_dir(void);

/* rel taken from the directory of the file exe, into out: each leading
 * "../" of rel goes up one directory (never above "/"); an absolute rel is
 * used as it is. 0, or -1 when exe is not absolute or out is too small. */
int tm_plugin_dir_beside(const char *exe, const char *rel, char *out,
                         size_t size);

/* Loads NAME_OR_PATH: a path when it contains '/', else "<dir>/<name>.so"
 * of the first dir that has such a file (a refused file there is an error,
 * later dirs are not tried: it would hide the refusal). Loaded by name,
 * the plugin's api->name must be that name. The file, its directory, the
 * directory a link to it sits in and every directory above them are checked
 * and the checked descriptor is what is loaded (docs/plugin-loading.md);
 * one descriptor per plugin file stays open for good. 0 on success with
 * *out filled; -1 with one line in errstr naming the file, the field and
 * both values (errstr may be NULL). Never dlclose()s. Thread-safe. */
int tm_plugin_load(const char *name_or_path, const char *const *dirs,
                   size_t ndirs, tm_plugin *out, char *errstr,
                   size_t errstr_size);

/* One "*.so" file found by tm_plugin_list(). */
typedef struct tm_plugin_entry {
    const char *dir;         /* the search directory it is in */
    const char *path;        /* dir + "/" + file name */
    const tm_plugin *plugin; /* loaded and checked, or NULL when refused */
    const char *error;       /* the refusal line when plugin is NULL */
    int shadowed; /* a file of the same name in an earlier dir wins when
                     loading by name */
} tm_plugin_entry;

/* Called once per entry; the entry lives only during the call. Non-zero
 * stops the listing. */
typedef int (*tm_plugin_list_fn)(const tm_plugin_entry *entry, void *ctx);

/* Loads every "*.so" in dirs (in dirs order, names sorted within a dir) and
 * calls fn for each, loaded or refused. Directories that do not exist are
 * skipped. 0 when every directory was read; -1 when one could not be (errstr
 * names the first; the others are still listed) or memory ran out. Loading
 * runs each plugin's constructors: list only directories you trust. */
int tm_plugin_list(const char *const *dirs, size_t ndirs, tm_plugin_list_fn fn,
                   void *ctx, char *errstr, size_t errstr_size);

/* The JSON schema of API's settings (a new reference): built from its
 * declared table (tm_sink_api.settings) when it has one, else its
 * describe() text parsed (kept as a string when it is not JSON), else
 * JSON null. NULL when out of memory. (plugin_settings.c) */
json_t *tm_plugin_settings_schema(const tm_sink_api *api);

#endif
