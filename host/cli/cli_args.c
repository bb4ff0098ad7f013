#include "cli/cli_args.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Options whose value is a directory the loader requires absolute: a
 * relative one is resolved against the working directory here, once, when
 * the command line is read (as the user meant it, whatever the process
 * does later). */
static const char *const path_options[] = {"--plugin-dir"};

/* The resolved values, kept for the life of the process (callers keep
 * pointers to option values as they keep argv's) and freed at exit. */
static char **resolved;
static size_t nresolved;

static void free_resolved(void) {
    for (size_t i = 0; i < nresolved; i++)
        free(resolved[i]);
    free(resolved);
    resolved = NULL;
    nresolved = 0;
}

static int is_path_option(const char *name) {
    for (size_t i = 0; i < sizeof path_options / sizeof path_options[0]; i++)
        if (strcmp(name, path_options[i]) == 0)
            return 1;
    return 0;
}

/* cwd + "/" + v, kept in resolved; NULL after printing why. */
static const char *absolute(const char *cmd, const char *name, const char *v) {
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == NULL) {
        fprintf(stderr,
                "tidemark %s: %s %s: cannot resolve against the working "
                "directory: %s\n",
                cmd, name, v, strerror(errno));
        return NULL;
    }
    size_t n = strlen(cwd) + 1 + strlen(v) + 1;
    char *abs = malloc(n);
    char **grown = realloc(resolved, (nresolved + 1) * sizeof *grown);
    if (grown)
        resolved = grown;
    if (!abs || !grown) {
        free(abs);
        fprintf(stderr, "tidemark %s: out of memory\n", cmd);
        return NULL;
    }
    if (nresolved == 0 && atexit(free_resolved) != 0) {
        free(abs);
        fprintf(stderr, "tidemark %s: out of memory\n", cmd);
        return NULL;
    }
    snprintf(abs, n, "%s%s%s", cwd, strcmp(cwd, "/") == 0 ? "" : "/", v);
    resolved[nresolved++] = abs;
    return abs;
}

int tm_cli_opt(const char *cmd, const char *name, int argc, char **argv, int *i,
               const char **out) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0 || (a[n] != '\0' && a[n] != '='))
        return 0;
    const char *v =
        a[n] == '=' ? a + n + 1 : (*i + 1 < argc ? argv[*i + 1] : NULL);
    if (!v || !*v) {
        fprintf(stderr, "tidemark %s: %s needs a value\n", cmd, name);
        return -1;
    }
    if (v[0] != '/' && is_path_option(name) &&
        (v = absolute(cmd, name, v)) == NULL)
        return -1;
    if (a[n] == '\0')
        (*i)++;
    *out = v;
    return 1;
}
