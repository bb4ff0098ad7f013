/* Scenario 1, the write-up's: both connectors in one `tidemark run`, the
 * backlog (loops of unique events, loop 0 resent as new messages,
 * contract violations), small batches, SIGKILL mid-backlog (the host held
 * at its own commit once about a fifth is applied; guarded), a restart on
 * the same state, 100 events stamped 30 minutes in the past; then the
 * verdict. */
#include "crash.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void scenario_writeup(const char *sink) {
    crash_env e;
    ce_init(&e, sink, "writeup", 3);
    crash_conf c = {"\"max_records\": 100, \"max_wait_ms\": 100", NULL, "a",
                    NULL};
    ce_configs(&e, &c);
    ce_writeup_backlog(&e);
    int64_t total = e.sent;

    /* Held right after the commit that brings the raw rows to about a
     * fifth (at most e.nconn fifths: the hits are shared), killed there. */
    ce_held held;
    const char *cfgs[] = {e.raw_cfg, e.dedup_cfg, NULL};
    ce_spawn_held(&held, cfgs, "run.log", ce_hit_for_rows(&e, total / 5, 100));
    int64_t at_kill = ce_kill_held(&e, &held, total);
    if (e.sink.dedup)
        h_step("SIGKILL with %lld of %lld raw rows and %lld dedup rows "
               "committed",
               (long long)at_kill, (long long)total,
               (long long)cs_int(&e.sink, "SELECT count(*) FROM dedup_t"));
    else
        h_step("SIGKILL with %lld of %lld raw rows committed",
               (long long)at_kill, (long long)total);

    pid_t pid = ce_spawn(&e, "run.log", NULL);
    int64_t late_n = ce_env_int("TIDEMARK_CRASH_LATE", 100);
    int64_t late_first = e.next_id;
    int64_t stamp = (int64_t)time(NULL) * 1000 - 30 * 60 * 1000;
    int64_t *offs = NULL;
    int32_t *parts = NULL;
    ce_events(&e, late_first, late_n, 999, stamp, &offs, &parts);
    ce_wait_caught_up(&e, 180000);

    crash_figures f;
    ce_judge(&e, &f);
    /* The late events are there, in both tables: nothing is dropped for
     * lateness. */
    if (e.sink.dedup) {
        int64_t late_dedup =
            cs_int(&e.sink,
                   "SELECT count(*) FROM dedup_t WHERE id >= "
                   "%lld AND id < %lld",
                   (long long)late_first, (long long)(late_first + late_n));
        H_CHECK(late_dedup == late_n, "late events in dedup: %lld of %lld",
                (long long)late_dedup, (long long)late_n);
    }
    int64_t late_raw = 0;
    for (int64_t i = 0; i < late_n; i++)
        late_raw += cs_int(&e.sink,
                           "SELECT count(*) FROM raw_t WHERE _tm_partition = "
                           "%d AND _tm_offset = %lld",
                           (int)parts[i], (long long)offs[i]);
    H_CHECK(late_raw == late_n, "late events in raw: %lld of %lld",
            (long long)late_raw, (long long)late_n);
    free(offs);
    free(parts);
    ce_stop(pid);
    ce_summary(&e, &f,
               "SIGKILL with %lld of %lld raw rows committed; %lld late "
               "events (30 min old) present in %s",
               (long long)at_kill, (long long)total, (long long)late_n,
               e.sink.dedup ? "both" : "raw");
}
