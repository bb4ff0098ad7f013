/* tidemark table SUBCOMMAND TABLE [OPTIONS]: runs the iceberg-lite table
 * tool, `tidemark-iceberg` (plugins/iceberg-lite/table_tool.c), installed
 * beside this binary, with the same arguments: exec'd, so its output, its
 * messages and its exit status (0 done, 1 failed, 2 usage error) are the
 * command's. The host links no plugin code; the tool is found next to the
 * running binary as plugins are found relative to it, so a moved install
 * runs its own tool. Without /proc (a container or chroot that does not
 * mount it) the binary's path is found from argv[0] and PATH, through
 * symlinks (cli/table_tool.h); the tool's own name is never looked up. */
#define _GNU_SOURCE /* program_invocation_name: argv[0] */
#include "cli/table_tool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "plugin/loader.h"

/* The tool beside the file BIN (resolved through its symlinks first). */
static int beside_real(const char *bin, char *out, size_t size) {
    char *real = realpath(bin, NULL);
    if (!real) {
        snprintf(out, size, "cannot resolve %s: %s", bin, strerror(errno));
        return -1;
    }
    int r = tm_plugin_dir_beside(real, TM_TABLE_TOOL, out, size);
    if (r != 0)
        snprintf(out, size, "no path for %s beside %s", TM_TABLE_TOOL, real);
    free(real);
    return r;
}

/* The first executable regular file NAME in the directories of PATH_ENV
 * (an empty entry is the working directory, as the shell has it), into
 * out. 1 found, 0 not. */
static int on_path(const char *name, const char *path_env, char *out,
                   size_t size) {
    for (const char *p = path_env; p;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        int w = n ? snprintf(out, size, "%.*s/%s", (int)n, p, name)
                  : snprintf(out, size, "./%s", name);
        struct stat st;
        if (w >= 0 && (size_t)w < size && stat(out, &st) == 0 &&
            S_ISREG(st.st_mode) && access(out, X_OK) == 0)
            return 1;
        p = colon ? colon + 1 : NULL;
    }
    return 0;
}

int tm_table_tool_path(const char *exe, const char *argv0, const char *path_env,
                       const char *install_dir, char *out, size_t size) {
    if (exe) {
        if (tm_plugin_dir_beside(exe, TM_TABLE_TOOL, out, size) == 0)
            return 0;
        snprintf(out, size, "no path for %s beside %s", TM_TABLE_TOOL, exe);
        return -1;
    }
    if (argv0 && strchr(argv0, '/'))
        return beside_real(argv0, out, size);
    char found[TM_PLUGIN_PATH_MAX];
    if (argv0 && *argv0 && path_env &&
        on_path(argv0, path_env, found, sizeof found))
        return beside_real(found, out, size);
    int n = snprintf(out, size, "%s/%s", install_dir, TM_TABLE_TOOL);
    if (n < 0 || (size_t)n >= size) {
        snprintf(out, size, "no path for %s in %s", TM_TABLE_TOOL, install_dir);
        return -1;
    }
    return 0;
}

int tm_cmd_table(int argc, char **argv) {
    char exe[TM_PLUGIN_PATH_MAX], tool[TM_PLUGIN_PATH_MAX];
    char no_exe[160] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0 || (size_t)n >= sizeof exe - 1)
        snprintf(no_exe, sizeof no_exe, "/proc/self/exe: %s",
                 n < 0 ? strerror(errno) : "path too long");
    else
        exe[n] = '\0';
    if (tm_table_tool_path(no_exe[0] ? NULL : exe, program_invocation_name,
                           getenv("PATH"), TIDEMARK_INSTALL_BINDIR, tool,
                           sizeof tool) != 0) {
        fprintf(stderr, "tidemark table: %s%s%s%s\n", tool,
                no_exe[0] ? " (" : "", no_exe, no_exe[0] ? ")" : "");
        return 1;
    }
    (void)argc; /* argv ends with NULL, as main's does */
    argv[0] = tool;
    execv(tool, argv);
    fprintf(stderr,
            "tidemark table: cannot run the iceberg-lite table tool %s: %s "
            "(it is installed beside tidemark)%s%s\n",
            tool, strerror(errno), no_exe[0] ? "; " : "", no_exe);
    return 1;
}
