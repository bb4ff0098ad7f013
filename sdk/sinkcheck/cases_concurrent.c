/* Two owners at once: two processes, each with its own instance, claim the
 * same partitions of one store and then commit until fenced. What the host
 * relies on when a partition moves between hosts:
 *   - the two claims are serialised: they return different epochs;
 *   - fencing holds: no commit of the older owner that began after the
 *     newer owner's claim returned is OK;
 *   - every acknowledged commit of either is in the store, once: rows are
 *     exactly [0, marker) and the marker is the highest acknowledged end.
 * Rounds repeat on the same store and alternate two schedules:
 *   - at once: both claim at one barrier. Whether two claims overlap is
 *     left to the scheduler, so a sink without a lock shows it in some
 *     runs only (seen: 3 of 40);
 *   - staged: the first owner claims, commits, and is held inside its
 *     second commit, at host->fault(after_effects) (its effects written,
 *     its markers read) or, every other time, at after_marker (its marker
 *     written too), while the second claims; it is let go once that
 *     claim returned, or after a while (STAGE_WAIT_MS, below) if the
 *     claim waits (for the first owner's lock, as it should). A sink
 *     without a lock lets the claim through and the first owner then
 *     commits on its stale markers, whatever the scheduler does. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cases.h"
#include "kit.h"

#define ROUNDS  12
#define COMMITS 4
#define RETRIES 200 /* TM_RETRY (a busy lock) is retried, 5 ms apart */
/* How long a staged claim may take before the first owner is let go: 4
 * times the slowest claim of the rounds at once so far (a loaded machine
 * makes every claim slower, and a claim without a lock must get through
 * while the first owner is held), 250 ms at least. */
#define STAGE_WAIT_MS     250
#define STAGE_WAIT_FACTOR 4
#define HOLD_MAX_MS       10000 /* a held commit is let go after this anyway */

typedef struct cc_commit {
    int64_t start_seq; /* when the commit call began */
    int64_t end[KIT_NPARTS];
    tm_status rc;
} cc_commit;

typedef struct cc_child {
    atomic_int ready;
    atomic_int claimed; /* the claim returned (staged rounds) */
    int64_t claim_seq;  /* when the claim returned */
    int64_t claim_ms;   /* how long the claim took, its retries included */
    int64_t epoch[KIT_NPARTS];
    int ncommits;
    cc_commit commits[COMMITS];
    char error[TM_ERROR_MAX + 64];
} cc_child;

typedef struct cc_page {
    atomic_int staged;  /* this round's schedule: 0 at once, 1 staged */
    atomic_int hold_at; /* staged: the index in HOLD_POINTS */
    atomic_int go;
    atomic_int second_go; /* staged: the second owner may claim */
    atomic_int held;      /* staged: the first owner is held in a commit */
    atomic_int release;   /* staged: let the first owner go on */
    atomic_llong seq;     /* one clock for both processes */
    cc_child child[2];
} cc_page;

static void pause_ms(long ms) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Where a staged round holds the first owner's commit, in turn: after
 * its effects (a claim then meets a commit that read its markers), and
 * after its marker (one that wrote them too: a lock given up between the
 * two shows only here). */
static const char *const HOLD_POINTS[] = {TM_FAULT_AFTER_EFFECTS,
                                          TM_FAULT_AFTER_MARKER};

/* The first owner's fault hook in a staged round: holds the commit it is
 * armed for at the round's point until the parent lets it go. */
static cc_page *hold_page; /* the child's view of the shared page */
static int hold_armed;

static void hold_at_point(const char *point) {
    if (!hold_armed || !point ||
        strcmp(point, HOLD_POINTS[atomic_load(&hold_page->hold_at)]) != 0)
        return;
    hold_armed = 0;
    atomic_store(&hold_page->held, 1);
    for (int64_t end = tm_clock_mono_ms() + HOLD_MAX_MS;
         !atomic_load(&hold_page->release) && tm_clock_mono_ms() < end;)
        pause_ms(1);
}

/* Spins (no sleep: at once, both claims start within microseconds of the
 * flag) until FLAG is set, HOLD_MAX_MS at most. */
static void wait_flag(atomic_int *flag) {
    for (int64_t end = tm_clock_mono_ms() + HOLD_MAX_MS;
         !atomic_load(flag) && tm_clock_mono_ms() < end;)
        ;
}

static void child_run(const kit_fixture *fx, cc_page *pg, int me) {
    cc_child *c = &pg->child[me];
    tm_marker m[KIT_NPARTS];
    int64_t zero[KIT_NPARTS] = {0}, len[KIT_NPARTS] = {2, 1, 3};
    tm_error err;
    void *sink;
    int staged = atomic_load(&pg->staged);
    tm_host_api host = *tm_host_services();
    hold_page = pg;
    host.fault = hold_at_point;
    /* Both owners open one store at the same moment: a sink may answer
     * RETRY for a lock the other's open holds (SQLite's switch to WAL),
     * which the host retries, and so does the kit. */
    tm_status rc = TM_RETRY;
    for (int t = 0; rc == TM_RETRY && t < RETRIES; t++)
        if ((rc = kit_open(fx, staged && me == 0 ? &host : NULL, &sink,
                           &err)) == TM_RETRY)
            pause_ms(5);
    if (rc != TM_OK) {
        snprintf(c->error, sizeof c->error, "open: %s: %s", tm_status_name(rc),
                 err.message);
        _exit(3);
    }
    atomic_store(&c->ready, 1);
    wait_flag(staged && me == 1 ? &pg->second_go : &pg->go);
    rc = TM_RETRY;
    int64_t t0 = tm_clock_mono_ms();
    for (int t = 0; rc == TM_RETRY && t < RETRIES; t++)
        if ((rc = kit_claim(fx->run, sink, m, zero, 0, &err)) == TM_RETRY)
            pause_ms(5);
    c->claim_ms = tm_clock_mono_ms() - t0;
    c->claim_seq = atomic_fetch_add(&pg->seq, 1);
    atomic_store(&c->claimed, 1);
    if (rc != TM_OK) {
        snprintf(c->error, sizeof c->error, "claim: %s: %s", tm_status_name(rc),
                 err.message);
        fx->run->api->close(sink);
        _exit(3);
    }
    int64_t pos[KIT_NPARTS];
    for (int p = 0; p < KIT_NPARTS; p++)
        pos[p] = m[p].next_offset, c->epoch[p] = m[p].epoch;
    for (int k = 0; k < COMMITS; k++) {
        kit_batch kb;
        cc_commit *cm = &c->commits[k];
        if (kit_batch_dense(&kb, fx->run, pos, len, c->epoch) != 0) {
            snprintf(c->error, sizeof c->error, "out of memory");
            _exit(3);
        }
        hold_armed = staged && me == 0 && k == 1;
        cm->start_seq = atomic_fetch_add(&pg->seq, 1);
        rc = TM_RETRY;
        for (int t = 0; rc == TM_RETRY && t < RETRIES; t++)
            if ((rc = kit_commit(fx->run, sink, &kb, &err)) == TM_RETRY)
                pause_ms(5);
        kit_batch_free(&kb);
        cm->rc = rc;
        c->ncommits = k + 1;
        if (rc != TM_OK)
            break; /* FENCED is the older owner's due */
        for (int p = 0; p < KIT_NPARTS; p++)
            cm->end[p] = pos[p] += len[p];
    }
    fx->run->api->close(sink);
    _exit(0);
}

/* The staged schedule from the parent: once the first owner is held in
 * its commit, the second claims; the first is let go when that claim
 * returned or after WAIT_MS. 0, or -1 with res set when the first owner
 * was never held (the round would have tested nothing). */
static int stage(cc_page *pg, pid_t first, int round, int64_t wait_ms,
                 kit_result *res) {
    int64_t end = tm_clock_mono_ms() + HOLD_MAX_MS;
    for (;;) {
        siginfo_t si = {0}; /* WNOWAIT: run_pair reaps it */
        if (atomic_load(&pg->held) || tm_clock_mono_ms() >= end ||
            waitid(P_PID, (id_t)first, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
            si.si_pid != 0)
            break;
        pause_ms(1);
    }
    int held = atomic_load(&pg->held);
    atomic_store(&pg->second_go, 1);
    for (end = tm_clock_mono_ms() + wait_ms;
         held && !atomic_load(&pg->child[1].claimed) &&
         tm_clock_mono_ms() < end;)
        pause_ms(1);
    atomic_store(&pg->release, 1);
    if (!held)
        kit_fail(res,
                 "round %d: inconclusive: the first owner's second commit "
                 "never reached host->fault(\"%s\"), where the staged "
                 "round holds it while the other owner claims (does commit "
                 "call host->fault?)",
                 round, HOLD_POINTS[atomic_load(&pg->hold_at)]);
    return held ? 0 : -1;
}

/* Runs both children to their end; 0, or -1 with res set. */
static int run_pair(const kit_fixture *fx, cc_page *pg, int round, int staged,
                    int hold_at, int64_t stage_wait_ms, kit_result *res) {
    pid_t pid[2] = {-1, -1};
    memset(pg, 0, sizeof *pg);
    atomic_store(&pg->staged, staged);
    atomic_store(&pg->hold_at, hold_at);
    fflush(NULL);
    for (int i = 0; i < 2; i++) {
        if ((pid[i] = fork()) < 0) {
            kit_fail(res, "fork: %s", strerror(errno));
            break;
        }
        if (pid[i] == 0)
            child_run(fx, pg, i);
    }
    for (int64_t end = tm_clock_mono_ms() + HOLD_MAX_MS;
         !(atomic_load(&pg->child[0].ready) &&
           atomic_load(&pg->child[1].ready)) &&
         tm_clock_mono_ms() < end;)
        pause_ms(1);
    atomic_store(&pg->go, 1);
    if (staged && pid[0] > 0 && pid[1] > 0)
        stage(pg, pid[0], round, stage_wait_ms, res);
    atomic_store(&pg->second_go, 1); /* whatever happened: no child waits */
    atomic_store(&pg->release, 1);
    for (int i = 0; i < 2; i++) {
        int status;
        pid_t w = -1;
        while (pid[i] > 0 && (w = waitpid(pid[i], &status, 0)) < 0 &&
               errno == EINTR)
            ;
        if (pid[i] > 0 && w != pid[i])
            kit_fail(res, "waitpid: %s", strerror(errno));
        else if (pid[i] > 0 && !(WIFEXITED(status) && !WEXITSTATUS(status)))
            kit_fail(res, "round %d, owner %d: %s", round, i + 1,
                     pg->child[i].error[0] ? pg->child[i].error
                                           : "the process died");
    }
    return KIT_FAILED(res) ? -1 : 0;
}

/* The verdict of one round against the store as a fresh instance reads
 * it; LAST holds the markers before the round and gets those after. */
static void judge(const kit_fixture *fx, const cc_page *pg, int round,
                  int64_t *last, kit_result *res) {
    kit_state st;
    char why[512];
    if (kit_state_fresh(fx, &st, res) != 0)
        return;
    for (int p = 0; p < KIT_NPARTS && !KIT_FAILED(res); p++) {
        const tm_marker *m = &st.part[p].marker;
        const cc_child *a = &pg->child[0], *b = &pg->child[1];
        if (a->epoch[p] == b->epoch[p]) {
            kit_fail(res,
                     "round %d: two processes claimed %s[%d] at once and "
                     "both got epoch %" PRId64
                     ": the claim is not serialised (no lock?), so "
                     "neither fences the other",
                     round, m->topic, m->partition, a->epoch[p]);
            break;
        }
        const cc_child *old = a->epoch[p] < b->epoch[p] ? a : b;
        const cc_child *young = old == a ? b : a;
        int64_t acked = last[p];
        for (int i = 0; i < 2; i++) {
            const cc_child *c = &pg->child[i];
            for (int k = 0; k < c->ncommits; k++) {
                const cc_commit *cm = &c->commits[k];
                if (cm->rc != TM_OK && (c == young || cm->rc != TM_FENCED))
                    kit_fail(res,
                             "round %d: the owner of epoch %" PRId64
                             " (the %s) got %s from a commit; expected "
                             "%s",
                             round, c->epoch[p], c == old ? "older" : "newer",
                             tm_status_name(cm->rc),
                             c == old ? "OK or FENCED" : "OK");
                if (cm->rc != TM_OK)
                    continue;
                if (c == old && cm->start_seq > young->claim_seq)
                    kit_fail(res,
                             "round %d: fencing does not hold: the owner of "
                             "epoch %" PRId64 " committed %s[%d] up to "
                             "%" PRId64 " (OK) after the owner of epoch "
                             "%" PRId64 " had claimed it",
                             round, old->epoch[p], m->topic, m->partition,
                             cm->end[p], young->epoch[p]);
                if (cm->end[p] > acked)
                    acked = cm->end[p];
            }
        }
        if (!KIT_FAILED(res) && m->next_offset != acked)
            kit_fail(res,
                     "round %d: %s[%d] marker at %" PRId64 ", but the "
                     "highest acknowledged commit ends at %" PRId64 "%s",
                     round, m->topic, m->partition, m->next_offset, acked,
                     m->next_offset < acked ? ": an acknowledged commit was "
                                              "lost"
                                            : "");
        if (!KIT_FAILED(res) &&
            kit_part_rows_dense(&st.part[p], 0, m->next_offset, why,
                                sizeof why) != 0)
            kit_fail(res, "round %d: %s", round, why);
        last[p] = m->next_offset;
    }
    kit_state_free(&st);
}

void kit_case_concurrent_owners(const kit_run *run, kit_result *res) {
    kit_fixture fx;
    int64_t last[KIT_NPARTS] = {0};
    cc_page *pg = mmap(NULL, sizeof *pg, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (pg == MAP_FAILED) {
        kit_fail(res, "mmap: %s", strerror(errno));
        return;
    }
    if (kit_fixture_init(&fx, run, "concurrent_owners", 0, res) == 0) {
        int64_t slowest = 0; /* claim of the rounds at once so far */
        for (int r = 1; r <= ROUNDS && !KIT_FAILED(res); r++) {
            int staged = r % 2 == 0;
            int64_t wait = STAGE_WAIT_FACTOR * slowest;
            wait = wait < STAGE_WAIT_MS ? STAGE_WAIT_MS
                   : wait > HOLD_MAX_MS ? HOLD_MAX_MS
                                        : wait;
            if (run_pair(&fx, pg, r, staged, r / 2 % 2, wait, res) != 0)
                break;
            for (int i = 0; i < 2 && !staged; i++)
                if (pg->child[i].claim_ms > slowest)
                    slowest = pg->child[i].claim_ms;
            judge(&fx, pg, r, last, res);
        }
        kit_fixture_done(&fx);
    }
    munmap(pg, sizeof *pg);
}
