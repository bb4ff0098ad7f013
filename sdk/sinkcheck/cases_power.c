/* Power loss: a child commits in a loop with every fsync/fdatasync of the
 * sink's files recorded (powerloss.c); after a few acknowledged commits it
 * is killed and the state directory is replaced by what a machine that
 * lost power would find. A fresh instance must then hold rows exactly
 * [0, marker), with the marker between the last acknowledged commit's end
 * and the end of the one in flight: a sink that skips an fsync of a file,
 * or of the directory a new or renamed file sits in, loses it. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cases.h"
#include "crash_child.h"
#include "powerloss.h"

#define ROUNDS 20

/* Whether the sink keeps its state under ${tmpdir} (its settings name it). */
static int uses_tmpdir(const kit_run *run) {
    char *text = json_dumps(run->settings, JSON_COMPACT);
    int yes = text && strstr(text, "${tmpdir}") != NULL;
    free(text);
    return yes;
}

/* Waits for the child's NEED-th acknowledged commit, then lets it run a
 * random while longer (up to 2 ms) and kills it. */
static void cut_power(kill_page *pg, pid_t pid, int need, uint64_t *rng) {
    for (int64_t end = tm_clock_mono_ms() + 10000;
         atomic_load(&pg->commits_acked) < need && tm_clock_mono_ms() < end;) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    struct timespec ts = {0, (long)(kit_rand(rng) % 2000) * 1000};
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
}

static void rounds(const kit_fixture *fx, const char *shadow, kill_page *pg,
                   kit_result *res) {
    int64_t last[KIT_NPARTS] = {0};
    uint64_t rng = fx->run->seed ^ 0x9e3779b97f4a7c15u;
    char why[512];
    for (int r = 1; r <= ROUNDS && !KIT_FAILED(res); r++) {
        if (kit_pl_snapshot(fx->tmpdir, shadow) != 0) {
            kit_fail(res, "power loss %d: cannot snapshot %s", r, fx->tmpdir);
            return;
        }
        memset(pg, 0, sizeof *pg);
        atomic_store(&pg->last_point, -1);
        uint64_t seed = kit_rand(&rng);
        int need = 1 + (int)(kit_rand(&rng) % 4);
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            kit_fail(res, "fork: %s", strerror(errno));
            return;
        }
        if (pid == 0) {
            kit_pl_arm(fx->tmpdir, shadow);
            kit_kill_child(fx, pg, seed);
        }
        cut_power(pg, pid, need, &rng);
        int status;
        pid_t w;
        while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
            ;
        if (w != pid || !WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
            kit_fail(res, "power loss %d: the child %s: %s", r,
                     w != pid ? "was lost" : "exited by itself",
                     pg->child_error[0] ? pg->child_error : "no message");
            return;
        }
        int acked = atomic_load(&pg->commits_acked);
        if (acked < need) {
            kit_fail(res,
                     "power loss %d: inconclusive: %d commits acknowledged "
                     "in 10 s, expected %d",
                     r, acked, need);
            return;
        }
        if (kit_pl_reboot(fx->tmpdir, shadow) != 0) {
            kit_fail(res, "power loss %d: cannot rebuild %s", r, fx->tmpdir);
            return;
        }
        kit_state st;
        if (kit_state_fresh(fx, &st, res) != 0) {
            char was[sizeof res->reason];
            memcpy(was, res->reason, sizeof was);
            res->verdict = KIT_PASS; /* restate with the round */
            kit_fail(res,
                     "power loss %d (after %d acknowledged commits): the "
                     "sink cannot read its state: %s (writes not made "
                     "durable by fsync/fdatasync of the file, or of its "
                     "directory, were dropped)",
                     r, acked, was);
            return;
        }
        if (kit_check_dense(&st, NULL, last, why, sizeof why) != 0 ||
            kit_check_acked(&st, pg, last, why, sizeof why) != 0)
            kit_fail(res,
                     "power loss %d (after %d acknowledged commits): %s "
                     "(writes not made durable by fsync/fdatasync of the "
                     "file, or of its directory, were dropped)",
                     r, acked, why);
        for (int p = 0; p < KIT_NPARTS; p++)
            last[p] = st.part[p].marker.next_offset;
        kit_state_free(&st);
    }
}

void kit_case_power_loss(const kit_run *run, kit_result *res) {
    if (!uses_tmpdir(run)) {
        kit_skip(res, "the sink's settings name no ${tmpdir}: its state is "
                      "not in files the kit can cut the power of");
        return;
    }
    kit_fixture fx;
    void *sink;
    tm_marker m[KIT_NPARTS];
    char shadow[300];
    const char *base = getenv("TMPDIR");
    snprintf(shadow, sizeof shadow, "%s/tm-sinkcheck-shadow-XXXXXX",
             base && *base ? base : "/tmp");
    if (!mkdtemp(shadow)) {
        kit_fail(res, "mkdtemp %s: %s", shadow, strerror(errno));
        return;
    }
    kill_page *pg = mmap(NULL, sizeof *pg, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (pg == MAP_FAILED)
        kit_fail(res, "mmap: %s", strerror(errno));
    else if (kit_setup(&fx, run, "power_loss", 0, NULL, &sink, m, res) == 0) {
        /* The store exists (created, claimed once) before the first cut:
         * what is tested is the durability of claims and commits. */
        run->api->close(sink);
        rounds(&fx, shadow, pg, res);
        kit_fixture_done(&fx);
    }
    if (pg != MAP_FAILED)
        munmap(pg, sizeof *pg);
    kit_remove_tree(shadow, 0);
}
