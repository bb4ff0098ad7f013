/* Scenario 3, the named crash points under `tidemark run`: the host's
 * fault hook kills the process at before_begin, after_effects,
 * after_marker and after_commit in turn (TIDEMARK_FAULT_HIT lands each
 * mid-backlog); each time the test reads the point's name back from
 * TIDEMARK_FAULT_FD (else inconclusive) and restarts on the same state;
 * finally without a fault: exactly one copy of everything. */
#include "crash.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Kills the host at the hit-th pass of point; returns the rows committed
 * then in the raw table (*dedup_rows: in the dedup table, which holds the
 * count before this spawn on entry). raw_before is the raw table's count
 * before this spawn. */
static int64_t crash_at(crash_env *e, const char *point, int hit,
                        int64_t raw_before, int64_t *dedup_rows) {
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    char fault[64], hitenv[64];
    snprintf(fault, sizeof fault, "TIDEMARK_FAULT=%s", point);
    snprintf(hitenv, sizeof hitenv, "TIDEMARK_FAULT_HIT=%d", hit);
    const char *env[] = {fault, fp.fd_env, hitenv, NULL};
    pid_t pid = ce_spawn(e, "run.log", env);
    h_fault_wait(&fp, point, pid, 0);
    int rc = h_stop(pid, 0, 10000, NULL);
    H_CHECK(rc == 128 + SIGKILL, "%s: the host exited %d, not by SIGKILL",
            point, rc);
    /* The hits are counted across both connectors of the process, so the
     * crash may come before one of them committed anything (seen: the raw
     * connector still retrying its open of the shared SQLite file while
     * the dedup one made its 15 commits): a table not there yet counts 0.
     * Mid-backlog: this spawn committed something (the hit-1 commits before
     * the fatal one: the counts carried over from earlier points prove
     * nothing about this one), not everything. */
    int64_t raw = ce_raw_rows(e);
    int64_t dedup =
        e->sink.dedup ? cs_int(&e->sink, "SELECT count(*) FROM dedup_t") : 0;
    raw = raw < 0 ? 0 : raw;
    dedup = dedup < 0 ? 0 : dedup;
    int64_t raw_new = raw - raw_before, dedup_new = dedup - *dedup_rows;
    H_CHECK(raw_new + dedup_new > 0 && raw < e->sent && dedup < e->unique_ids,
            "inconclusive: crash at %s with %lld of %lld raw rows (%+lld "
            "since this spawn) and %lld of %lld dedup rows (%+lld): want "
            "progress since the spawn and the backlog not done",
            point, (long long)raw, (long long)e->sent, (long long)raw_new,
            (long long)dedup, (long long)e->unique_ids, (long long)dedup_new);
    h_step("%s: the raw connector committed %lld rows since this spawn, the "
           "dedup connector %lld",
           point, (long long)raw_new, (long long)dedup_new);
    *dedup_rows = dedup;
    return raw;
}

void scenario_faults(const char *sink) {
    crash_env e;
    ce_init(&e, sink, "faults", 3);
    crash_conf c = {"\"max_records\": 100, \"max_wait_ms\": 100", NULL, "a",
                    NULL};
    ce_configs(&e, &c);
    ce_writeup_backlog(&e);
    static const char *const points[] = {"before_begin", "after_effects",
                                         "after_marker", "after_commit"};
    int hit = (int)ce_env_int("TIDEMARK_CRASH_FAULT_HIT", 15);
    char at[512] = "";
    size_t used = 0;
    int64_t rows = 0, dedup = 0;
    for (int i = 0; i < 4; i++) {
        rows = crash_at(&e, points[i], hit, rows, &dedup);
        h_step("crashed at %s (hit %d): %lld raw and %lld dedup rows "
               "committed",
               points[i], hit, (long long)rows, (long long)dedup);
        used += (size_t)snprintf(at + used, sizeof at - used, "%s%s@%lld",
                                 i ? ", " : "", points[i], (long long)rows);
    }
    pid_t pid = ce_spawn(&e, "run.log", NULL);
    ce_wait_caught_up(&e, 180000);
    crash_figures f;
    ce_judge(&e, &f);
    ce_stop(pid);
    ce_summary(&e, &f, "killed at %s (raw rows committed, hit %d)", at, hit);
}
