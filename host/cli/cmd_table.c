/* tidemark table SUBCOMMAND TABLE [OPTIONS]: runs the iceberg-lite table
 * tool, `tidemark-iceberg` (plugins/iceberg-lite/table_tool.c), installed
 * beside this binary, with the same arguments: exec'd, so its output, its
 * messages and its exit status (0 done, 1 failed, 2 usage error) are the
 * command's. The host links no plugin code; the tool is found next to the
 * running binary as plugins are found relative to it, so a moved install
 * runs its own tool. Without /proc (a container or chroot that does not
 * mount it) the binary's path is argv[0] when that is a path, and the
 * tool is looked up on PATH when it is not. */
#define _GNU_SOURCE /* program_invocation_name: argv[0] */
#include "cli/table_tool.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "plugin/loader.h"

int tm_table_tool_path(const char *exe, const char *argv0, const char *cwd,
                       char *out, size_t size) {
    if (exe) {
        if (tm_plugin_dir_beside(exe, TM_TABLE_TOOL, out, size) == 0)
            return 1;
        snprintf(out, size, "no path for %s beside %s", TM_TABLE_TOOL, exe);
        return -1;
    }
    if (argv0 && strchr(argv0, '/')) {
        char abs[TM_PLUGIN_PATH_MAX];
        int n = argv0[0] == '/' ? snprintf(abs, sizeof abs, "%s", argv0)
                : cwd           ? snprintf(abs, sizeof abs, "%s/%s", cwd, argv0)
                                : -1;
        if (n >= 0 && (size_t)n < sizeof abs &&
            tm_plugin_dir_beside(abs, TM_TABLE_TOOL, out, size) == 0)
            return 1;
        snprintf(out, size, "no path for %s beside argv[0] %s", TM_TABLE_TOOL,
                 argv0);
        return -1;
    }
    if ((size_t)snprintf(out, size, "%s", TM_TABLE_TOOL) >= size)
        return -1;
    return 0;
}

int tm_cmd_table(int argc, char **argv) {
    char exe[TM_PLUGIN_PATH_MAX], tool[TM_PLUGIN_PATH_MAX], cwd[4096];
    char no_exe[160] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0 || (size_t)n >= sizeof exe - 1)
        snprintf(no_exe, sizeof no_exe, "/proc/self/exe: %s",
                 n < 0 ? strerror(errno) : "path too long");
    else
        exe[n] = '\0';
    const char *argv0 = program_invocation_name;
    int r = tm_table_tool_path(no_exe[0] ? NULL : exe, argv0,
                               getcwd(cwd, sizeof cwd), tool, sizeof tool);
    if (r < 0) {
        fprintf(stderr, "tidemark table: %s%s%s%s\n", tool,
                no_exe[0] ? " (" : "", no_exe, no_exe[0] ? ")" : "");
        return 1;
    }
    (void)argc; /* argv ends with NULL, as main's does */
    argv[0] = tool;
    if (r == 1)
        execv(tool, argv);
    else
        execvp(tool, argv);
    int e = errno;
    if (r == 1)
        fprintf(stderr,
                "tidemark table: cannot run the iceberg-lite table tool %s: "
                "%s (it is installed beside tidemark)%s%s\n",
                tool, strerror(e), no_exe[0] ? "; " : "", no_exe);
    else
        fprintf(stderr,
                "tidemark table: cannot find the iceberg-lite table tool: "
                "%s; argv[0] \"%s\" is no path; %s on PATH: %s\n",
                no_exe, argv0 ? argv0 : "", TM_TABLE_TOOL, strerror(e));
    return 1;
}
