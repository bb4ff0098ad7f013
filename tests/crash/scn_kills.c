/* Scenario 2, repeated kills: one backlog, the host killed with SIGKILL
 * again and again at random moments spread across it (kill k once the
 * rows pass a random point of its own slice of the first 80 %, and always
 * after fresh progress, then a random delay; seed printed,
 * TIDEMARK_CRASH_SEED sets it), restarted on the same state each time;
 * then the verdict of scenario 1. Each host also holds itself still at its
 * own commit before the end of the next slice could be passed (a test that
 * does not get the CPU in time kills it there instead), so no kill can
 * come after the backlog's end nor leave the next kill nothing to do. */
#include "crash.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

void scenario_kills(const char *sink) {
    crash_env e;
    ce_init(&e, sink, "kills", 3);
    crash_conf c = {"\"max_records\": 50, \"max_wait_ms\": 50", NULL, "a",
                    NULL};
    ce_configs(&e, &c);
    unsigned seed = (unsigned)ce_env_int("TIDEMARK_CRASH_SEED",
                                         (int64_t)time(NULL) % 100000);
    int kills = (int)ce_env_int("TIDEMARK_CRASH_KILLS", 10);
    /* The random point picks where in the backlog; the delay (a few
     * commits' time) where in the commit cycle. Longer delays ran past the
     * backlog's end once the host drained ~40 000 records a second (a fresh
     * CI broker): kills 9 and 10 landed on the last row, inconclusive. */
    int64_t max_delay = ce_env_int("TIDEMARK_CRASH_MAX_DELAY_MS", 20);
    h_step("seed %u (TIDEMARK_CRASH_SEED), %d kills, delays 0..%lld ms", seed,
           kills, (long long)max_delay);
    srand(seed);
    ce_writeup_backlog(&e);
    /* As many loops again: the backlog must outlast the kills. */
    int64_t loops = ce_env_int("TIDEMARK_CRASH_LOOPS", 50);
    int64_t sample = ce_env_int("TIDEMARK_CRASH_SAMPLE", 400);
    for (int64_t l = 0; l < loops; l++)
        ce_events(&e, e.next_id, sample, (int)(loops + l), 0, NULL, NULL);
    int64_t total = e.sent, prev = 0;
    char at[1024] = "";
    size_t used = 0;
    /* Each connector in a host of its own, held at its own commits: one
     * host for both counted both connectors' commits towards the hold, and
     * a dedup connector that claimed first made them all before the raw
     * connector committed a row (CI: 'inconclusive: 0 of 40425 raw rows
     * committed at the kill'; locally 'kill 2 landed with 850 of 40425 raw
     * rows (previous kill: 850)', 1 run in 3). */
    const char *one[2][2] = {{e.raw_cfg, NULL}, {e.dedup_cfg, NULL}};
    const char *logs[2] = {"run.log", "run-dedup.log"};
    int held_at = 0;
    for (int k = 0; k < kills; k++) {
        /* A random point of this kill's slice, past fresh progress (a
         * kill before the restart committed anything proves nothing new),
         * then a random moment. */
        int64_t lo = total * 8 / 10 * k / kills,
                hi = total * 8 / 10 * (k + 1) / kills;
        int64_t target = lo + rand() % (hi - lo > 0 ? hi - lo : 1);
        if (target <= prev)
            target = prev + 1;
        /* The hold: at most the end of the next slice (< 90 % of the
         * backlog) in raw rows, batches of at most 50 records, the raw
         * connector's commits counted (the dedup host's the same number of
         * its own). prev is below this slice's end. */
        int64_t bound = total * 8 / 10 * (k + 2) / kills;
        int hit = (bound - prev) / 50 > 1 ? (int)((bound - prev) / 50) : 1;
        ce_held held[2];
        for (int h = 0; h < e.nconn; h++)
            ce_spawn_held(&held[h], one[h], logs[h], hit);
        int64_t t0 = h_now_ms();
        int stopped = 0;
        while (ce_raw_progress(&e) < target &&
               !(stopped = ce_held_stopped(&held[0]))) {
            for (int h = 0; h < e.nconn; h++)
                H_CHECK(waitpid(held[h].pid, NULL, WNOHANG) == 0,
                        "the %s host exited", h ? "dedup" : "raw");
            H_CHECK(h_now_ms() - t0 < 60000,
                    "kill %d: no progress to %lld raw rows in 60 s", k + 1,
                    (long long)target);
            h_sleep_ms(5);
        }
        int64_t delay = max_delay ? rand() % (max_delay + 1) : 0;
        if (!stopped)
            h_sleep_ms(delay);
        if (stopped || ce_held_stopped(&held[0])) {
            /* held at its commit: killed there (its point read back) */
            ce_kill_held(&e, &held[0], total);
            held_at++;
        } else
            ce_kill_unheld(&held[0]);
        /* The dedup host (a sink with dedup) at the same moment, held at
         * its commit or not. */
        if (e.nconn > 1) {
            if (ce_held_stopped(&held[1]))
                ce_wait_held(&held[1]);
            ce_kill_unheld(&held[1]);
        }
        int64_t rows = ce_raw_rows(&e);
        H_CHECK(rows > prev && rows < total,
                "inconclusive: kill %d landed with %lld of %lld raw rows "
                "(previous kill: %lld)",
                k + 1, (long long)rows, (long long)total, (long long)prev);
        used += (size_t)snprintf(at + used, sizeof at - used, "%s%lld",
                                 k ? "," : "", (long long)rows);
        prev = rows;
    }
    h_step("%d SIGKILLs, raw rows committed at each: %s (%d held at their "
           "commit first)",
           kills, at, held_at);
    pid_t pid = ce_spawn(&e, "run.log", NULL);
    ce_wait_caught_up(&e, 180000);
    crash_figures f;
    ce_judge(&e, &f);
    ce_stop(pid);
    ce_summary(&e, &f, "seed %u, %d SIGKILLs at raw rows %s of %lld", seed,
               kills, at, (long long)total);
}
