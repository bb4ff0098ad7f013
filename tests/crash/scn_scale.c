/* Scenario 6, scale-out: 3 host processes (their own state dirs, both
 * connectors each) in one group on an 8-partition topic. One is killed
 * with SIGKILL mid-backlog, one is added, one is stopped gracefully; after
 * each change the group's description (Admin API) must show the partitions
 * actually moved. Then the verdict: 0 duplicates, 0 gaps. The hosts are
 * static members (the default): the group names each by the id in its
 * state dir's member.id, and the partitions of a killed or stopped host
 * move once the session timeout (6 s) expires. */
#include "crash.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PARTS 8
#define HOSTS 4

typedef char owners_t[PARTS][H_OWNER_MAX];

/* The raw connector's static member id of each host (its state dir's
 * member.id, which the group description names the member by), read once
 * the host made it; "" before. */
static char member_ids[HOSTS + 1][H_OWNER_MAX];
static const char *raw_name;

static void read_member_ids(void) {
    for (int h = 1; h <= HOSTS; h++) {
        if (member_ids[h][0])
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/s%d/%s/member.id", h_workdir(), h,
                 raw_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (!fgets(member_ids[h], sizeof member_ids[h], f))
            member_ids[h][0] = '\0';
        fclose(f);
        member_ids[h][strcspn(member_ids[h], "\n")] = '\0';
    }
}

/* The host number of an owner (its static member id), 0 for none. */
static int host_of(const char *owner) {
    for (int h = 1; owner[0] && h <= HOSTS; h++)
        if (strcmp(owner, member_ids[h]) == 0)
            return h;
    return 0;
}

/* Waits until the group has want members, every partition owned, none by
 * gone, and each host of the bit mask need owning at least one; fills o. */
static void wait_layout(crash_env *e, const char *group, int want, int gone,
                        unsigned need, owners_t o) {
    int64_t t0 = h_now_ms();
    for (;;) {
        read_member_ids();
        int members = h_group_owners(group, e->topic, PARTS, o);
        int ok = members == want;
        unsigned has = 0;
        for (int p = 0; p < PARTS; p++) {
            int h = host_of(o[p]);
            ok = ok && h != 0 && h != gone;
            has |= 1u << h;
        }
        if (ok && (has & need) == need)
            return;
        H_CHECK(h_now_ms() - t0 < 60000,
                "group %s: not %d members owning all %d partitions (gone "
                "h%d, hosts 0x%x each owning some) after 60 s: %d members",
                group, want, PARTS, gone, need, members);
        h_sleep_ms(200);
    }
}

/* "p:hA>hB" for each partition whose owner changed; fails when none of
 * the partitions that had to move (owned by from, or any when from is 0)
 * did. */
static void moved(const owners_t a, const owners_t b, int from,
                  const char *what, char *out, size_t size) {
    size_t used = 0;
    int n = 0;
    out[0] = '\0';
    for (int p = 0; p < PARTS; p++) {
        int ha = host_of(a[p]), hb = host_of(b[p]);
        if (ha != hb && (from == 0 || ha == from)) {
            used += (size_t)snprintf(out + used, size - used, "%s%d:h%d>h%d",
                                     n ? " " : "", p, ha, hb);
            n++;
        }
        H_CHECK(from == 0 || ha != from || hb != from,
                "%s: partition %d still owned by h%d", what, p, from);
    }
    H_CHECK(n > 0, "%s: no partition moved", what);
}

void scenario_scale(const char *sink) {
    crash_env e;
    ce_init(&e, sink, "scale", PARTS);
    raw_name = e.raw;
    char cfg[HOSTS + 1][2][4096];
    for (int h = 1; h <= HOSTS; h++) {
        char state[16];
        snprintf(state, sizeof state, "s%d", h);
        crash_conf c = {"\"max_records\": 100, \"max_wait_ms\": 100", NULL,
                        NULL, state};
        ce_configs(&e, &c);
        snprintf(cfg[h][0], sizeof cfg[h][0], "%s", e.raw_cfg);
        snprintf(cfg[h][1], sizeof cfg[h][1], "%s", e.dedup_cfg);
    }
    char group[300];
    snprintf(group, sizeof group, "tidemark-%s", e.raw);
    pid_t pid[HOSTS + 1] = {0};
    /* h1 holds itself at its own commit once it applied about a tenth of
     * the backlog (the hits shared by its connectors), to be killed there:
     * a kill timed by polling the rows could come after its last commit. */
    ce_held held;
    for (int h = 1; h <= 3; h++) {
        const char *c[] = {cfg[h][0], cfg[h][1], NULL};
        char log[32];
        snprintf(log, sizeof log, "h%d.log", h);
        if (h == 1) {
            ce_spawn_held(
                &held, c, log,
                ce_hit_for_rows(&e, ce_writeup_backlog_size() / 10, 100));
            pid[h] = held.pid;
        } else
            pid[h] = ce_spawn_cfgs(c, log, NULL);
    }
    owners_t a, b, c, d;
    wait_layout(&e, group, 3, 0, 1u << 1 | 1u << 2 | 1u << 3, a);
    /* The backlog arrives while the three hosts are held (SIGSTOP, for
     * less than the session timeout), so that they all start on it. */
    for (int h = 1; h <= 3; h++)
        H_CHECK(kill(pid[h], SIGSTOP) == 0, "SIGSTOP h%d", h);
    ce_writeup_backlog(&e);
    for (int h = 1; h <= 3; h++)
        H_CHECK(kill(pid[h], SIGCONT) == 0, "SIGCONT h%d", h);
    int64_t at_kill = ce_kill_held(&e, &held, e.sent);
    int64_t chunk = ce_env_int("TIDEMARK_CRASH_SAMPLE", 400) * 10;
    ce_events(&e, e.next_id, chunk, 200, 0, NULL, NULL);
    wait_layout(&e, group, 2, 1, 1u << 2 | 1u << 3, b);
    char m1[256], m2[256], m3[256];
    moved(a, b, 1, "after h1's SIGKILL", m1, sizeof m1);
    h_step("h1 SIGKILLed at %lld raw rows: %s", (long long)at_kill, m1);

    const char *c4[] = {cfg[4][0], cfg[4][1], NULL};
    pid[4] = ce_spawn_cfgs(c4, "h4.log", NULL);
    ce_events(&e, e.next_id, chunk, 201, 0, NULL, NULL);
    wait_layout(&e, group, 3, 1, 1u << 2 | 1u << 3 | 1u << 4, c);
    moved(b, c, 0, "after h4 joined", m2, sizeof m2);
    h_step("h4 joined: %s", m2);

    ce_events(&e, e.next_id, chunk, 202, 0, NULL, NULL);
    ce_stop(pid[2]);
    wait_layout(&e, group, 2, 2, 1u << 3 | 1u << 4, d);
    moved(c, d, 2, "after h2's SIGTERM", m3, sizeof m3);
    h_step("h2 stopped: %s", m3);

    ce_wait_caught_up(&e, 180000);
    crash_figures f;
    ce_judge(&e, &f);
    ce_stop(pid[3]);
    ce_stop(pid[4]);
    ce_summary(&e, &f,
               "h1 SIGKILLed at %lld raw rows [%s], h4 added [%s], h2 "
               "stopped [%s] (partition:from>to, group description)",
               (long long)at_kill, m1, m2, m3);
}
