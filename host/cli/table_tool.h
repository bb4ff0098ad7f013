/* Where `tidemark table` (cli/cmd_table.c) finds the iceberg-lite table
 * tool it runs. For the unit test: touches the file system (realpath,
 * stat) but nothing of the process. */
#ifndef TM_CLI_TABLE_TOOL_H
#define TM_CLI_TABLE_TOOL_H

#include <stddef.h>

#define TM_TABLE_TOOL "tidemark-iceberg"

/* The tool's path, beside the running binary's real path, as git finds
 * its own programs: beside EXE (/proc/self/exe, already resolved; NULL
 * when it cannot be read); else beside realpath(ARGV0) when ARGV0 holds a
 * '/' (relative: against the working directory); else, ARGV0 being a bare
 * name, beside the realpath of the first executable of that name on
 * PATH_ENV (the one the shell ran; may be NULL); else in INSTALL_DIR, the
 * install's bin directory. The tool's own name is never searched on PATH:
 * whatever came first there would run. 0 with OUT the path; -1 with OUT
 * saying why (an ARGV0 path that does not resolve, OUT too small). */
int tm_table_tool_path(const char *exe, const char *argv0, const char *path_env,
                       const char *install_dir, char *out, size_t size);

#endif
