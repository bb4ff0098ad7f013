/* Where `tidemark table` (cli/cmd_table.c) finds the iceberg-lite table
 * tool it runs. Pure, for the unit test. */
#ifndef TM_CLI_TABLE_TOOL_H
#define TM_CLI_TABLE_TOOL_H

#include <stddef.h>

#define TM_TABLE_TOOL "tidemark-iceberg"

/* The tool's path, in order: beside EXE, the running binary's own path
 * (/proc/self/exe; NULL when that cannot be read); else beside ARGV0 when
 * it holds a '/' (a relative one against CWD, which may then not be NULL);
 * else none: the name alone, to look up on PATH. Returns 1 with OUT the
 * path to run, 0 with OUT the bare name (search PATH), -1 when OUT is too
 * small or a path is unusable (OUT then says what). */
int tm_table_tool_path(const char *exe, const char *argv0, const char *cwd,
                       char *out, size_t size);

#endif
