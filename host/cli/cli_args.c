#include "cli/cli_args.h"

#include <stdio.h>
#include <string.h>

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
    if (a[n] == '\0')
        (*i)++;
    *out = v;
    return 1;
}
