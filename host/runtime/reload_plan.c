#include "runtime/reload_plan.h"

#include <string.h>

int tm_reload_same(const tm_connector_config *a, const tm_connector_config *b) {
    return a->resolved && b->resolved && json_equal(a->resolved, b->resolved);
}

void tm_reload_plan(const tm_reload_entry *run, size_t nrun,
                    const tm_reload_entry *next, size_t nnext,
                    tm_reload_action *run_action, long *run_next,
                    tm_reload_action *next_action) {
    for (size_t k = 0; k < nnext; k++)
        next_action[k] = TM_RELOAD_START;
    for (size_t i = 0; i < nrun; i++) {
        run_action[i] = TM_RELOAD_STOP;
        run_next[i] = -1;
        for (size_t k = 0; k < nnext; k++) {
            if (strcmp(run[i].cfg->name, next[k].cfg->name) != 0)
                continue;
            /* A down connector is started again even when its config did
             * not change: a reload is how an operator recovers one whose
             * cause was outside the config (a store fixed, a lock gone). */
            run_action[i] =
                !run[i].down && tm_reload_same(run[i].cfg, next[k].cfg)
                    ? TM_RELOAD_KEEP
                    : TM_RELOAD_RESTART;
            run_next[i] = (long)k;
            next_action[k] = run_action[i];
            break;
        }
    }
}
