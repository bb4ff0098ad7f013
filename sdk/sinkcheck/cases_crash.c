/* Crash cases: the named crash points (the host's real fault hook), and
 * random SIGKILLs of a child committing in a loop. After every death a
 * fresh instance must show effects that exactly match the markers. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cases.h"
#include "crash_child.h"
#include "kit.h"

static const char *const POINTS[4] = {
    TM_FAULT_BEFORE_BEGIN, TM_FAULT_AFTER_EFFECTS, TM_FAULT_AFTER_MARKER,
    TM_FAULT_AFTER_COMMIT};

int kit_check_dense(const kit_state *st, const int64_t *want,
                    const int64_t *min, char *why, size_t size) {
    for (int p = 0; p < KIT_NPARTS; p++) {
        const kit_part_state *ps = &st->part[p];
        int64_t next = ps->marker.next_offset;
        if (want && next != want[p]) {
            snprintf(why, size,
                     "%s[%d] marker at %" PRId64 ", expected %" PRId64,
                     ps->marker.topic, ps->marker.partition, next, want[p]);
            return -1;
        }
        if (min && next < min[p]) {
            snprintf(why, size,
                     "%s[%d] marker went back from %" PRId64 " to %" PRId64,
                     ps->marker.topic, ps->marker.partition, min[p], next);
            return -1;
        }
        if (kit_part_rows_dense(ps, 0, next, why, size) != 0)
            return -1;
        if (ps->marker.rows != (uint64_t)next || ps->nitems != (size_t)next) {
            snprintf(why, size,
                     "%s[%d]: marker counts %" PRIu64 " rows, %zu "
                     "items stored, marker at %" PRId64,
                     ps->marker.topic, ps->marker.partition, ps->marker.rows,
                     ps->nitems, next);
            return -1;
        }
    }
    return 0;
}

/* 7. one named crash point, from fresh state. */
static void crash_point(const kit_run *run, int k, kit_result *res) {
    kit_fixture fx;
    void *sink;
    tm_marker m[KIT_NPARTS];
    kit_batch b1, b2;
    kit_state ref, after;
    char why[512];
    const int64_t zero[] = {0, 0, 0}, three[] = {3, 3, 3}, six[] = {6, 6, 6};
    int64_t e[KIT_NPARTS];
    int applied = k == 3; /* only after_commit is past the atomic step */
    if (kit_setup(&fx, run, POINTS[k], 0, zero, &sink, m, res) != 0)
        return;
    for (int p = 0; p < KIT_NPARTS; p++)
        e[p] = m[p].epoch;
    int ok = kit_batch_dense(&b1, run, zero, three, e) == 0 &&
             kit_batch_dense(&b2, run, three, three, e) == 0;
    if (!ok)
        kit_fail(res, "out of memory building the batches");
    else if (kit_expect_commit(run, sink, &b1, TM_OK, "first batch", res) ==
                 0 &&
             kit_state_read(run, sink, &ref, res) == 0) {
        run->api->close(sink); /* the child opens its own instance */
        sink = NULL;
        if (kit_commit_with_fault(&fx, &b2, POINTS[k], res) == 0 &&
            kit_state_fresh(&fx, &after, res) == 0) {
            if (!applied && kit_state_compare(&ref, &after, why, sizeof why))
                kit_fail(res, "%s: killed before the commit, yet: %s",
                         POINTS[k], why);
            if (applied && kit_check_dense(&after, six, NULL, why, sizeof why))
                kit_fail(res, "%s: killed after the commit: %s", POINTS[k],
                         why);
            kit_state_free(&after);
            /* The host resends the same batch: the check settles it. */
            tm_error err;
            if (!KIT_FAILED(res) && kit_open(&fx, NULL, &sink, &err) != TM_OK)
                kit_fail(res, "reopen: %s", err.message);
            if (!KIT_FAILED(res))
                kit_expect_commit(run, sink, &b2, applied ? TM_ALREADY : TM_OK,
                                  "the same batch after the crash", res);
            if (!KIT_FAILED(res) && kit_state_fresh(&fx, &after, res) == 0) {
                if (kit_check_dense(&after, six, NULL, why, sizeof why))
                    kit_fail(res, "%s: after the resend: %s", POINTS[k], why);
                kit_state_free(&after);
            }
        }
        kit_state_free(&ref);
    }
    kit_batch_free(&b1);
    kit_batch_free(&b2);
    kit_teardown(&fx, sink);
}

void kit_case_crash_points(const kit_run *run, kit_result *res) {
    for (int k = 0; k < 4 && !KIT_FAILED(res); k++)
        crash_point(run, k, res);
}

/* ---- 8. random kills ---------------------------------------------------- */

/* Where the child is, on a MAP_SHARED page: what it was doing when the
 * kill landed is read after its death. */
enum { PH_SETUP, PH_BEFORE_CALL, PH_IN_COMMIT, PH_AFTER_RETURN };
enum { W_BEFORE_CALL, W_IN_COMMIT, W_AFTER_POINT0, W_AFTER_RETURN = 6, NWIN };
/* In-commit windows are named by the last fault point the commit passed;
 * "no_point_yet" is inside the call before its first point. */
static const char *const WIN_NAME[NWIN] = {
    "before_commit_call",          "in_commit:no_point_yet",
    "in_commit:past_before_begin", "in_commit:past_after_effects",
    "in_commit:past_after_marker", "in_commit:past_after_commit",
    "after_commit_return"};

static kill_page *page;    /* the child's view of the shared page */
static uint64_t child_rng; /* the child's own jitter */

static void sleep_us(long us) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = us * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The kit's fault hook for this case: records the point and returns, after
 * a short pause so that a kill can land in the window the point opens. */
static void record_fault(const char *point) {
    for (int k = 0; k < 4; k++)
        if (point && strcmp(point, POINTS[k]) == 0) {
            atomic_store(&page->last_point, k);
            atomic_store(&page->point_seen[k], 1);
        }
    sleep_us((long)(kit_rand(&child_rng) % 300));
}

static int window_of(kill_page *pg) {
    switch (atomic_load(&pg->phase)) {
    case PH_BEFORE_CALL: return W_BEFORE_CALL;
    case PH_AFTER_RETURN: return W_AFTER_RETURN;
    case PH_IN_COMMIT: {
        int k = atomic_load(&pg->last_point);
        return k < 0 ? W_IN_COMMIT : W_AFTER_POINT0 + k;
    }
    }
    return -1; /* setup */
}

static void child_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
static void child_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(page->child_error, sizeof page->child_error, fmt, ap);
    va_end(ap);
    _exit(3);
}

/* The child: a fresh instance, a fresh claim (so the parent's read of the
 * markers is what it continues from), then commits until killed. */
void kit_kill_child(const kit_fixture *fx, kill_page *pg, uint64_t seed) {
    tm_host_api host = *tm_host_services();
    tm_marker m[KIT_NPARTS];
    int64_t pos[KIT_NPARTS], zero[KIT_NPARTS] = {0};
    tm_error err;
    void *sink;
    page = pg;
    child_rng = seed;
    host.fault = record_fault;
    if (kit_open(fx, &host, &sink, &err) != TM_OK)
        child_fail("open: %s", err.message);
    tm_status rc = kit_claim(fx->run, sink, m, zero, 0, &err);
    if (rc != TM_OK)
        child_fail("claim: %s: %s", tm_status_name(rc), err.message);
    for (int p = 0; p < KIT_NPARTS; p++) {
        pos[p] = m[p].next_offset;
        atomic_store(&page->acked[p], pos[p]);
        atomic_store(&page->in_flight[p], pos[p]);
        atomic_store(&page->claimed_epoch[p], m[p].epoch);
    }
    atomic_store(&page->ready, 1);
    for (int64_t deadline = tm_clock_mono_ms() + 30000;
         tm_clock_mono_ms() < deadline;) {
        int64_t len[KIT_NPARTS], e[KIT_NPARTS];
        kit_batch kb;
        atomic_store(&page->last_point, -1);
        atomic_store(&page->phase, PH_BEFORE_CALL);
        for (int p = 0; p < KIT_NPARTS; p++) {
            len[p] = (int64_t)(kit_rand(&child_rng) % 4); /* 0: not in it */
            e[p] = m[p].epoch;
        }
        len[kit_rand(&child_rng) % KIT_NPARTS] |= 1; /* never empty */
        if (kit_batch_dense(&kb, fx->run, pos, len, e) != 0)
            child_fail("out of memory");
        sleep_us((long)(kit_rand(&child_rng) % 300)); /* the host's work */
        for (int p = 0; p < KIT_NPARTS; p++)
            atomic_store(&page->in_flight[p], pos[p] + len[p]);
        atomic_store(&page->phase, PH_IN_COMMIT);
        rc = kit_commit(fx->run, sink, &kb, &err);
        kit_batch_free(&kb);
        if (rc != TM_OK)
            child_fail("commit: %s: %s", tm_status_name(rc), err.message);
        for (int p = 0; p < KIT_NPARTS; p++) { /* acknowledged: it counts */
            pos[p] += len[p];
            atomic_store(&page->acked[p], pos[p]);
        }
        atomic_fetch_add(&page->commits_acked, 1);
        atomic_store(&page->phase, PH_AFTER_RETURN);
        sleep_us((long)(kit_rand(&child_rng) % 300));
    }
    child_fail("was never killed in 30 s");
}

/* Durability and progress of acknowledged commits: every part's marker
 * lies in [acked, in flight] (a commit the sink said OK to survives the
 * kill; one in flight may or may not have landed). Before the child was
 * ready, nothing was acknowledged or in flight: the marker stays at LAST. */
int kit_check_acked(const kit_state *st, kill_page *pg, const int64_t *last,
                    char *why, size_t size) {
    int ready = atomic_load(&pg->ready);
    for (int p = 0; p < KIT_NPARTS; p++) {
        const tm_marker *m = &st->part[p].marker;
        int64_t lo = ready ? (int64_t)atomic_load(&pg->acked[p]) : last[p];
        int64_t hi = ready ? (int64_t)atomic_load(&pg->in_flight[p]) : last[p];
        int64_t epoch = ready ? (int64_t)atomic_load(&pg->claimed_epoch[p]) : 0;
        if (m->epoch < epoch) {
            snprintf(why, size,
                     "%s[%d] epoch %" PRId64 ", but a claim had returned "
                     "epoch %" PRId64 ": an acknowledged claim was lost",
                     m->topic, m->partition, m->epoch, epoch);
            return -1;
        }
        if (m->next_offset < lo) {
            snprintf(why, size,
                     "%s[%d] marker at %" PRId64 ", but commits up to %" PRId64
                     " were acknowledged (OK): an acknowledged commit was "
                     "lost",
                     m->topic, m->partition, m->next_offset, lo);
            return -1;
        }
        if (m->next_offset > (hi > lo ? hi : lo)) {
            snprintf(why, size,
                     "%s[%d] marker at %" PRId64 ", beyond every commit made "
                     "(acknowledged up to %" PRId64 ", in flight up to %" PRId64
                     ")",
                     m->topic, m->partition, m->next_offset, lo, hi);
            return -1;
        }
    }
    return 0;
}

/* Kills the child: either at a random moment or as soon as it is in the
 * window TARGET (so every window is reached in a short run). */
static int kill_one(kill_page *pg, pid_t pid, int target, uint64_t *rng) {
    int64_t deadline = tm_clock_mono_ms() + 1000;
    while (!atomic_load(&pg->ready) && tm_clock_mono_ms() < deadline)
        sleep_us(50);
    if (target < 0)
        sleep_us((long)(kit_rand(rng) % 8000));
    else
        while (window_of(pg) != target && tm_clock_mono_ms() < deadline)
            ; /* spin: the windows are microseconds wide */
    return kill(pid, SIGKILL);
}

void kit_case_random_kills(const kit_run *run, kit_result *res) {
    kit_fixture fx;
    kit_state st;
    char why[512];
    int hits[NWIN] = {0}, seen[4] = {0};
    int64_t last[KIT_NPARTS] = {0};
    long acked_total = 0;
    uint64_t rng = run->seed;
    kill_page *pg = mmap(NULL, sizeof *pg, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (pg == MAP_FAILED) {
        kit_fail(res, "mmap: %s", strerror(errno));
        return;
    }
    if (kit_fixture_init(&fx, run, "random_kills", 0, res) != 0) {
        munmap(pg, sizeof *pg);
        return;
    }
    for (int i = 0; i < run->kills && !KIT_FAILED(res); i++) {
        memset(pg, 0,
               sizeof *pg); /* this child's page; seen[] keeps the run's */
        atomic_store(&pg->last_point, -1);
        uint64_t child_seed = kit_rand(&rng);
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            kit_fail(res, "fork: %s", strerror(errno));
            break;
        }
        if (pid == 0)
            kit_kill_child(&fx, pg, child_seed);
        /* Even kills aim at a window, odd ones land at random. */
        static const int targets[] = {W_BEFORE_CALL,      W_AFTER_POINT0,
                                      W_AFTER_POINT0 + 1, W_AFTER_POINT0 + 2,
                                      W_AFTER_POINT0 + 3, W_AFTER_RETURN};
        int target = i % 2 == 0 ? targets[(i / 2) % 6] : -1;
        if (kill_one(pg, pid, target, &rng) != 0)
            kit_fail(res, "kill: %s", strerror(errno));
        int status;
        pid_t w;
        while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
            ;
        if (w != pid) {
            kit_fail(res, "waitpid: %s", strerror(errno));
            break;
        }
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
            kit_fail(res, "kill %d: the child %s: %s", i + 1,
                     WIFEXITED(status) ? "exited by itself" : "died otherwise",
                     pg->child_error[0] ? pg->child_error : "no message");
            break;
        }
        int win = window_of(pg);
        if (win >= 0)
            hits[win]++;
        /* The proof: a fresh instance sees effects exactly = markers. */
        if (kit_state_fresh(&fx, &st, res) != 0)
            break;
        if (kit_check_dense(&st, NULL, last, why, sizeof why) != 0 ||
            kit_check_acked(&st, pg, last, why, sizeof why) != 0)
            kit_fail(res, "after kill %d (child in %s): %s", i + 1,
                     win >= 0 ? WIN_NAME[win] : "setup", why);
        acked_total += atomic_load(&pg->commits_acked);
        for (int p = 0; p < KIT_NPARTS; p++)
            last[p] = st.part[p].marker.next_offset;
        kit_state_free(&st);
        for (int k = 0; k < 4; k++)
            seen[k] += atomic_load(&pg->point_seen[k]);
    }
    /* Inconclusive unless every phase was hit and every point reached. */
    int phase_hit[3] = {hits[W_BEFORE_CALL], 0, hits[W_AFTER_RETURN]};
    for (int w = W_IN_COMMIT; w < W_AFTER_RETURN; w++)
        phase_hit[1] += hits[w];
    static const char *const phase_name[3] = {"before_commit_call", "in_commit",
                                              "after_commit_return"};
    for (int ph = 0; ph < 3 && !KIT_FAILED(res); ph++)
        if (!phase_hit[ph])
            kit_fail(res,
                     "inconclusive: no kill landed in phase %s in %d "
                     "kills (seed %" PRIu64 ")",
                     phase_name[ph], run->kills, run->seed);
    /* Progress: commits were acknowledged, and the markers moved. */
    int64_t moved = 0;
    for (int p = 0; p < KIT_NPARTS; p++)
        moved += last[p];
    if (!KIT_FAILED(res) && (acked_total == 0 || moved == 0))
        kit_fail(res,
                 "no progress: %ld commits acknowledged in %d kills, markers "
                 "moved by %" PRId64 " offsets in all",
                 acked_total, run->kills, moved);
    for (int k = 0; k < 4 && !KIT_FAILED(res); k++)
        if (!seen[k])
            kit_fail(res,
                     "inconclusive: fault point %s was never reached "
                     "(does commit call host->fault?)",
                     POINTS[k]);
    /* The three phases' totals first, then every window of the total. */
    fprintf(stderr,
            "sinkcheck: random_kills: %d kills, seed %" PRIu64
            ": before_commit_call=%d in_commit=%d after_commit_return=%d; "
            "in_commit by window:",
            run->kills, run->seed, phase_hit[0], phase_hit[1], phase_hit[2]);
    for (int w = W_IN_COMMIT; w < W_AFTER_RETURN; w++)
        fprintf(stderr, " %s=%d", WIN_NAME[w], hits[w]);
    fprintf(stderr, "\n");
    kit_fixture_done(&fx);
    munmap(pg, sizeof *pg);
}