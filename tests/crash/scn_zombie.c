/* Scenario 9, the zombie: host A stops itself at a fault point with a
 * batch in flight (TIDEMARK_FAULT=before_begin, action stop: SIGSTOP, the
 * point's name read back first); the group moves its partitions to host B
 * after the session timeout; B claims them (the epochs rise in the sink)
 * and applies the backlog; then SIGCONT A: its commit must be answered
 * FENCED (its status file's counter: proof of the fault, not the verdict)
 * and nothing of it lands. Then the verdict over both hosts. */
#include "crash.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The "fenced" counter of a connector's status file in state dir sd. */
static int64_t fenced(const char *sd, const char *connector) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s/%s/status.json", h_workdir(), sd,
             connector);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    static char buf[1 << 15];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *at = strstr(buf, "\"fenced\":");
    return at ? strtoll(at + strlen("\"fenced\":"), NULL, 10) : 0;
}

/* Starts a host that stops itself at its 10th before_begin; returns once
 * the point's name came back and the process is seen stopped. */
static pid_t zombie(const char *const *cfgs, const char *log) {
    h_fault_pipe fp;
    h_fault_pipe_open(&fp);
    const char *env[] = {"TIDEMARK_FAULT=before_begin",
                         "TIDEMARK_FAULT_ACTION=stop", "TIDEMARK_FAULT_HIT=10",
                         fp.fd_env, NULL};
    pid_t pid = ce_spawn_cfgs(cfgs, log, env);
    h_fault_wait(&fp, "before_begin", pid, 1);
    return pid;
}

void scenario_zombie(const char *sink) {
    crash_env e;
    ce_init(&e, sink, "zombie", 3);
    char a[2][4096], b[2][4096];
    crash_conf ca = {"\"max_records\": 100, \"max_wait_ms\": 100", NULL, NULL,
                     "sa"};
    ce_configs(&e, &ca);
    snprintf(a[0], sizeof a[0], "%s", e.raw_cfg);
    snprintf(a[1], sizeof a[1], "%s", e.dedup_cfg);
    crash_conf cb = {"\"max_records\": 100, \"max_wait_ms\": 100", NULL, NULL,
                     "sb"};
    ce_configs(&e, &cb);
    snprintf(b[0], sizeof b[0], "%s", e.raw_cfg);
    snprintf(b[1], sizeof b[1], "%s", e.dedup_cfg);
    ce_writeup_backlog(&e);

    /* One process per connector on A's side: SIGSTOP stops a whole
     * process, and a connector stopped at before_begin holds no lock, but
     * a sibling thread stopped inside its own commit would (SQLite: the
     * file's write lock), and then nobody could take over. */
    pid_t pa[2];
    for (int i = 0; i < e.nconn; i++) {
        const char *cfg_a[] = {a[i], NULL};
        pa[i] = zombie(cfg_a, i ? "a-dedup.log" : "a-raw.log");
    }
    int64_t by_a = ce_raw_rows(&e);
    H_CHECK(by_a >= 0 && by_a < e.sent,
            "inconclusive: %lld of %lld raw rows when A stopped",
            (long long)by_a, (long long)e.sent);
    int64_t epochs0 =
        cs_int(&e.sink, "SELECT sum(epoch) FROM tidemark_markers");
    h_step("host A (%d process(es)) stopped in a commit at %lld raw rows",
           e.nconn, (long long)by_a);

    const char *cfg_b[] = {b[0], b[1], NULL};
    pid_t pb = ce_spawn_cfgs(cfg_b, "b.log", NULL);
    ce_wait_caught_up(&e, 120000);
    int64_t epochs1 =
        cs_int(&e.sink, "SELECT sum(epoch) FROM tidemark_markers");
    H_CHECK(epochs1 >= epochs0 + e.nconn * e.partitions,
            "inconclusive: host B did not claim every partition (epochs %lld "
            "-> %lld)",
            (long long)epochs0, (long long)epochs1);
    crash_figures f;
    ce_judge(&e, &f);

    for (int i = 0; i < e.nconn; i++)
        H_CHECK(kill(pa[i], SIGCONT) == 0, "SIGCONT");
    /* Each of A's processes stopped inside its own connector's commit, so
     * each connector has a batch in flight and each must be answered
     * FENCED: one fenced connector proves nothing about the other. */
    int64_t t0 = h_now_ms();
    int64_t nf_raw = 0, nf_dedup = 0;
    for (;;) {
        nf_raw = fenced("sa", e.raw);
        nf_dedup = e.sink.dedup ? fenced("sa", e.dedup) : 0;
        if (nf_raw >= 1 && (!e.sink.dedup || nf_dedup >= 1))
            break;
        H_CHECK(h_now_ms() - t0 < 30000,
                "host A's in-flight batch was not answered FENCED after "
                "SIGCONT for every connector: raw %lld, dedup %lld",
                (long long)nf_raw, (long long)nf_dedup);
        h_sleep_ms(100);
    }
    int64_t nf = nf_raw + nf_dedup;
    h_step("host A resumed: FENCED batches raw %lld, dedup %lld",
           (long long)nf_raw, (long long)nf_dedup);
    ce_judge(&e, &f); /* nothing of A's batch landed */
    int64_t sample = ce_env_int("TIDEMARK_CRASH_SAMPLE", 400);
    ce_events(&e, e.next_id, sample, 400, 0, NULL, NULL);
    ce_wait_caught_up(&e, 120000);
    ce_judge(&e, &f);
    for (int i = 0; i < e.nconn; i++)
        ce_stop(pa[i]);
    ce_stop(pb);
    ce_summary(&e, &f,
               "host A stopped at before_begin with %lld raw rows applied, B "
               "took over (epochs %lld -> %lld), A's batch FENCED on SIGCONT "
               "(%lld)",
               (long long)by_a, (long long)epochs0, (long long)epochs1,
               (long long)nf);
}
