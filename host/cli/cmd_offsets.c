#include "cli/commands.h"

#include <stdio.h>

int tm_cmd_offsets(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tidemark offsets: not built yet\n");
    return 1;
}
