/* The crash suite: usage crash_suite TIDEMARK_BIN PLUGIN_DIR SINK SCENARIO
 * (SINK sqlite, postgres or iceberg_lite). One ctest test per scenario and
 * sink; each prints one SUMMARY line with its figures and its duration. */
#include "crash.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: crash_suite TIDEMARK_BIN PLUGIN_DIR SINK "
                        "SCENARIO\n");
        return 2;
    }
    static const struct {
        const char *name;
        void (*fn)(const char *sink);
    } scenarios[] = {
        {"writeup", scenario_writeup},
        {"kills", scenario_kills},
        {"faults", scenario_faults},
        {"group_offsets", scenario_group_offsets},
        {"boundary", scenario_boundary},
        {"scale", scenario_scale},
        {"txn_compact", scenario_txn_compact},
        {"zombie", scenario_zombie},
        {"broker_restart", scenario_broker_restart},
        {"pg_restart", scenario_pg_restart},
    };
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        if (strcmp(scenarios[i].name, argv[4]) == 0) {
            char label[128];
            snprintf(label, sizeof label, "%s.%s", argv[3], argv[4]);
            h_init(argv[1], argv[2], label);
            scenarios[i].fn(argv[3]);
            h_pass();
            return 0;
        }
    fprintf(stderr, "crash_suite: unknown scenario %s\n", argv[4]);
    return 2;
}
