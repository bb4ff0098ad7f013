/* tidemark: the command-line entry. Each command lives in its own file
 * (cmd_*.c) behind one function; this file only dispatches. */
#include <stdio.h>
#include <string.h>

#include <tidemark/sink.h>

#include "cli/commands.h"
#include "services/log.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"run", tm_cmd_run, "run connector configs until SIGTERM or SIGINT"},
    {"plugins", tm_cmd_plugins,
     "list the sink plugins found in the plugin directories"},
    {"validate", tm_cmd_validate,
     "check connector configs, their plugins and the plugins' settings"},
    {"status", tm_cmd_status,
     "show connectors' state, markers and lag (a health check)"},
    {"offsets", tm_cmd_offsets,
     "show a connector's markers; reset them offline (--reset-to)"},
    {"verify", tm_cmd_verify,
     "reconcile a connector's sink with Kafka: duplicates and gaps"},
    {"table", tm_cmd_table,
     "read and maintain an iceberg-lite table (scan, compact, expire...)"},
    {"pause", tm_cmd_control,
     "pause a running connector (kept across restarts) until resume"},
    {"resume", tm_cmd_control, "resume a paused connector"},
    {"restart", tm_cmd_control,
     "stop a running (or FAILED) connector and start it again"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: tidemark COMMAND [ARGS...]\n"
                 "\n"
                 "A Kafka sink plugin host with exactly-once commits.\n"
                 "\n"
                 "Commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "  %-10s %s\n"
            "  %-10s %s\n"
            "\n"
            "Run 'tidemark help COMMAND' (or 'tidemark COMMAND --help') for a\n"
            "command's options.\n"
            "Environment: TIDEMARK_PLUGIN_PATH (colon-separated plugin "
            "directories),\n"
            "TIDEMARK_LOG_LEVEL (debug|info|warn|error),\n"
            "TIDEMARK_LOG_FORMAT (logfmt|json).\n",
            "help", "show this help", "version", "print the version");
}

static const command *find(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0)
            return &commands[i];
    fprintf(stderr, "tidemark: unknown command '%s' (see 'tidemark --help')\n",
            name);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "help") == 0 && argc > 2 && strcmp(argv[2], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "help") == 0 && argc > 2 &&
        strcmp(argv[2], "version") == 0) {
        printf("usage: tidemark version (or tidemark --version)\n"
               "\n"
               "Prints tidemark's version and the sink ABI it loads plugins "
               "of.\n");
        return 0;
    }
    if (strcmp(name, "help") == 0 && argc > 2) {
        /* "tidemark help run" is "tidemark run --help". */
        static char help_opt[] = "--help";
        const command *c = find(argv[2]);
        char *help_argv[] = {argv[2], help_opt, NULL};
        return c ? c->run(2, help_argv) : 2;
    }
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 ||
        strcmp(name, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("tidemark %s (sink ABI %d.%d)\n", TIDEMARK_VERSION,
               TM_SINK_ABI_MAJOR, TM_SINK_ABI_MINOR);
        return 0;
    }
    const command *c = find(name);
    if (!c)
        return 2;
    /* Before the command runs: a log setting that means nothing stops the
     * process here, before it logs a line in a format nobody asked for. */
    char bad[256];
    if (tm_log_check_env(bad, sizeof bad) != 0) {
        fprintf(stderr, "tidemark: %s\n", bad);
        return 2;
    }
    return c->run(argc - 1, argv + 1);
}
