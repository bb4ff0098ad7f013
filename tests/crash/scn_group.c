/* Scenario 4, the consumer group's offsets made wrong while the host is
 * down, three ways: the group deleted (DeleteGroups), its offsets reset to
 * the log start, and moved past the end (AlterConsumerGroupOffsets). The
 * test reads the tampered offsets back before each restart. The markers
 * rule: after every restart 0 duplicates and 0 gaps. */
#include "crash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Waits until the killed host's member left both groups (session
 * timeout): only then will the broker take offsets for them. */
static void wait_groups_empty(crash_env *e, const char *const *groups) {
    int64_t t0 = h_now_ms();
    for (int g = 0; g < e->nconn; g++)
        while (h_group_owners(groups[g], e->topic, 0, NULL) != 0) {
            H_CHECK(h_now_ms() - t0 < 30000,
                    "group %s still has members 30 s after the kill",
                    groups[g]);
            h_sleep_ms(250);
        }
}

/* Waits until GROUP has committed an offset: a connector slower to start
 * than the other (its sink's open retried, its group join late) has no
 * group yet, and a kill then would leave no group to delete or move: the
 * scenario would test nothing for it. A host held at its point commits no
 * more offsets: then the group must have one already. */
static int group_has_offset(crash_env *e, const char *group) {
    for (int p = 0; p < e->partitions; p++)
        if (h_group_offset(group, e->topic, p) >= 0)
            return 1;
    return 0;
}

static void wait_group_committed(crash_env *e, const char *group,
                                 const ce_held *h) {
    int64_t t0 = h_now_ms();
    while (!group_has_offset(e, group)) {
        H_CHECK(waitpid(h->pid, NULL, WNOHANG) == 0,
                "the host exited before group %s committed an offset", group);
        H_CHECK(!ce_held_stopped(h) || group_has_offset(e, group),
                "inconclusive: the host was held at its commit before "
                "group %s committed an offset",
                group);
        H_CHECK(h_now_ms() - t0 < 60000, "group %s committed no offset in 60 s",
                group);
        h_sleep_ms(20);
    }
}

typedef enum { T_DELETE, T_EARLIEST, T_PAST_END } tamper;

static void tamper_groups(crash_env *e, const char *const *groups, tamper t,
                          char *said, size_t size) {
    int64_t want[64];
    for (int p = 0; p < e->partitions; p++) {
        int64_t lo, hi;
        h_watermarks(e->topic, p, &lo, &hi);
        want[p] = t == T_DELETE ? -1001 : t == T_EARLIEST ? lo : hi + 1000;
    }
    size_t used = 0;
    for (int g = 0; g < e->nconn; g++) {
        if (t == T_DELETE)
            h_delete_group(groups[g]);
        else
            h_alter_group_offsets(groups[g], e->topic, e->partitions, want);
        for (int p = 0; p < e->partitions; p++) {
            int64_t got = h_group_offset(groups[g], e->topic, p);
            H_CHECK(got == want[p],
                    "inconclusive: group %s [%d] reads back %lld after the "
                    "tampering, expected %lld",
                    groups[g], p, (long long)got, (long long)want[p]);
            if (g == 0)
                used += (size_t)snprintf(said + used, size - used, "%s%lld",
                                         p ? "," : "", (long long)got);
        }
    }
}

void scenario_group_offsets(const char *sink) {
    crash_env e;
    ce_init(&e, sink, "group_offsets", 3);
    crash_conf c = {"\"max_records\": 100, \"max_wait_ms\": 100", NULL, NULL,
                    NULL};
    ce_configs(&e, &c);
    char g_raw[300], g_dedup[300];
    snprintf(g_raw, sizeof g_raw, "tidemark-%s", e.raw);
    snprintf(g_dedup, sizeof g_dedup, "tidemark-%s", e.dedup);
    const char *const groups[2] = {g_raw, g_dedup};
    ce_writeup_backlog(&e);
    /* Each connector in a host of its own, held at its own commit once
     * about a fifth is applied (a kill timed by polling the rows could come
     * after the last commit), after its group committed an offset (a held
     * host commits no more). One host for both counted both connectors'
     * commits: on a quiet machine the raw connector made them all before
     * the dedup connector committed its first offset ('inconclusive: the
     * host was held at its commit before group tidemark-dedup-...
     * committed an offset'). */
    ce_held held[2];
    const char *one[2][2] = {{e.raw_cfg, NULL}, {e.dedup_cfg, NULL}};
    const char *logs[2] = {"run.log", "run-dedup.log"};
    int hit = ce_hit_for_rows(&e, e.sent / 5, 100) / e.nconn;
    for (int k = 0; k < e.nconn; k++)
        ce_spawn_held(&held[k], one[k], logs[k], hit);
    for (int k = 0; k < e.nconn; k++)
        wait_group_committed(&e, groups[k], &held[k]);
    /* The raw rows are counted at each kill: the raw host's first. */
    int64_t at_kill = 0;
    for (int k = 0; k < e.nconn; k++)
        at_kill = ce_kill_held(&e, &held[k], e.sent);
    h_step("SIGKILL with %lld of %lld raw rows", (long long)at_kill,
           (long long)e.sent);

    static const char *const names[] = {"deleted", "reset to earliest",
                                        "moved past the end"};
    char report[2048] = "";
    size_t used = 0;
    crash_figures f;
    int64_t chunk = ce_env_int("TIDEMARK_CRASH_SAMPLE", 400) * 5;
    for (int t = T_DELETE; t <= T_PAST_END; t++) {
        wait_groups_empty(&e, groups);
        if (t != T_DELETE) /* new records, that a wrong start would skip */
            ce_events(&e, e.next_id, chunk, 100 + t, 0, NULL, NULL);
        char said[512];
        tamper_groups(&e, groups, (tamper)t, said, sizeof said);
        h_step("group %s while down: raw group reads back [%s]", names[t],
               said);
        pid_t pid = ce_spawn(&e, "run.log", NULL);
        ce_wait_caught_up(&e, 180000);
        ce_judge(&e, &f);
        used += (size_t)snprintf(report + used, sizeof report - used,
                                 "%sgroup %s ([%s]) -> %lld raw rows exact",
                                 t ? "; " : "", names[t], said,
                                 (long long)f.raw_rows);
        if (t != T_PAST_END)
            ce_kill(pid);
        else
            ce_stop(pid);
    }
    ce_summary(&e, &f, "first SIGKILL at %lld raw rows; %s", (long long)at_kill,
               report);
}
