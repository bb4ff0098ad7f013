/* The steps every CLI command that talks to a connector's sink shares:
 * load and check the config, then (runtime/sink_instance.h, the same steps
 * `run` takes) load its plugin, check its capabilities, build the plugin's
 * view of the config, and for commands that read the store open an
 * instance. Every problem is printed on stderr as "FILE: PATH: message",
 * redacted, so validate, status and offsets word them the same way. */
#ifndef TM_CLI_SINK_H
#define TM_CLI_SINK_H

#include <stddef.h>
#include <tidemark/sink.h>

#include "config/connector_config.h"
#include "runtime/sink_instance.h"

/* One connector's config and sink. inst.config points into the struct
 * itself: never copy it after tm_cli_sink_load. */
typedef struct tm_cli_sink {
    const char *file; /* the config's path, as given */
    tm_connector_config *cfg;
    tm_sink_instance inst; /* inst.sink is NULL until tm_cli_sink_open */
    int oom;               /* tm_cli_sink_load failed for want of memory */
} tm_cli_sink;

/* The plugin directories: each --plugin-dir in extra, then
 * TIDEMARK_PLUGIN_PATH, then the default (tm_plugin_dirs). Returns an array
 * to free(), NULL when memory ran out. */
const char **tm_cli_plugin_dirs(const char *const *extra, size_t nextra,
                                size_t *ndirs);

/* Loads and checks FILE's config, including the librdkafka
 * configurations run builds from it (tm_kafka_conf_check); NULL with every
 * error printed as "FILE: PATH: message". */
tm_connector_config *tm_cli_load_config(const char *file);

/* The same; *oom is set to 1 when it failed for want of memory (the
 * command exits 1, not "invalid"), else 0. */
tm_connector_config *tm_cli_load_config_oom(const char *file, int *oom);

/* The checks across the configs one process runs together
 * (tm_config_cross_check), each problem printed as "FILE: PATH: message".
 * Entries of cfgs may be NULL (configs that did not load). bad_files, when not
 * NULL, gets bad_files[i] = 1 for each config a problem is about. Returns the
 * number printed: 0 when they can run together. */
size_t tm_cli_cross_check(tm_connector_config *const *cfgs, size_t n, int *bad);

/* Markers, status files and locks are per connector name: two configs of
 * one name in one command would fence each other. When names[i] is also
 * names[k] for some k < i, prints "FILE: $.name: connector ... is also
 * defined by FILE-K; names must be unique" and returns 1; else 0. A NULL
 * name (a config that did not load) clashes with nothing. */
int tm_cli_name_clash(const char *const *files, const char *const *names,
                      size_t i);

/* Loads FILE's config and its plugin and prepares inst.config. 0, or -1
 * with every problem printed (s is then empty but for s->oom: nothing to
 * free). */
int tm_cli_sink_load(tm_cli_sink *s, const char *file, const char *const *dirs,
                     size_t ndirs);

/* The plugin's declared settings checked against its table (ABI 1.3), then
 * its validate callback on the loaded config (its settings and its store,
 * read-only), when it has one. 0 accepted (or nothing to check), -1
 * with "FILE: $.sink: plugin \"NAME\" refused the config (STATUS): ..."
 * printed. */
int tm_cli_sink_validate(tm_cli_sink *s);

/* Opens an instance of the sink (the plugin's open). 0, or -1 with the
 * plugin's refusal printed. */
int tm_cli_sink_open(tm_cli_sink *s);

/* Closes the instance if open and frees everything; s can be reused. */
void tm_cli_sink_free(tm_cli_sink *s);

/* Prints "FILE: PATH: message" on stderr, through tm_config_redact (cfg
 * may be NULL); path NULL when msg already starts with one. */
void tm_cli_report(const tm_connector_config *cfg, const char *file,
                   const char *path, const char *msg);

#endif
