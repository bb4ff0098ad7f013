/* tidemark table SUBCOMMAND TABLE [OPTIONS]: runs the iceberg-lite table
 * tool, `tidemark-iceberg` (plugins/iceberg-lite/table_tool.c), installed
 * beside this binary, with the same arguments: exec'd, so its output, its
 * messages and its exit status (0 done, 1 failed, 2 usage error) are the
 * command's. The host links no plugin code; the tool is found next to the
 * running binary as plugins are found relative to it, so a moved install
 * runs its own tool. */
#include "cli/commands.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "plugin/loader.h"

#define TABLE_TOOL "tidemark-iceberg"

int tm_cmd_table(int argc, char **argv) {
    char exe[TM_PLUGIN_PATH_MAX], tool[TM_PLUGIN_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0 || (size_t)n >= sizeof exe - 1) {
        fprintf(stderr,
                "tidemark table: cannot find the tidemark binary "
                "(/proc/self/exe): %s\n",
                n < 0 ? strerror(errno) : "path too long");
        return 1;
    }
    exe[n] = '\0';
    if (tm_plugin_dir_beside(exe, TABLE_TOOL, tool, sizeof tool) != 0) {
        fprintf(stderr, "tidemark table: no path for %s beside %s\n",
                TABLE_TOOL, exe);
        return 1;
    }
    (void)argc; /* argv ends with NULL, as main's does */
    argv[0] = tool;
    execv(tool, argv);
    fprintf(stderr,
            "tidemark table: cannot run the iceberg-lite table tool %s: %s "
            "(it is installed beside tidemark)\n",
            tool, strerror(errno));
    return 1;
}
