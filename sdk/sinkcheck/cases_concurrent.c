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
 *     written too), while the second claims. No step waits for a time:
 *     the parent lets the first owner go only once the claim returned or
 *     provably waits (the second process asleep in it: blocked on the
 *     first owner's lock, or between the kit's retries of RETRY, as a
 *     claim should be; see await_owner). A claim that got through while
 *     the first owner was held (no lock, or one given up before the
 *     marker) is followed the same way: the second owner's first commit
 *     is held at the same point (or waits), then the first owner goes on
 *     alone until it ends or waits, then the second. Each order is the
 *     parent's, not the scheduler's: a sink whose lock does not cover the
 *     commit shows it in every run. */
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
/* A held commit is let go after this anyway, and a staged step waited for
 * no longer: a safety net for a sink that spins, not a schedule. */
#define HOLD_MAX_MS 10000

typedef struct cc_commit {
    int64_t start_seq; /* when the commit call began */
    int64_t end[KIT_NPARTS];
    tm_status rc;
} cc_commit;

typedef struct cc_child {
    atomic_int ready;
    atomic_int claiming; /* the claim was called (staged rounds) */
    atomic_int claimed;  /* the claim returned (staged rounds) */
    int64_t claim_seq;   /* when the claim returned */
    int64_t epoch[KIT_NPARTS];
    int ncommits;
    cc_commit commits[COMMITS];
    char error[TM_ERROR_MAX + 64];
} cc_child;

typedef struct cc_page {
    atomic_int staged;  /* this round's schedule: 0 at once, 1 staged */
    atomic_int hold_at; /* staged: the index in HOLD_POINTS */
    atomic_int go;
    atomic_int second_go;  /* staged: the second owner may claim */
    atomic_int held[2];    /* staged: the owner is held in a commit */
    atomic_int release[2]; /* staged: let the owner go on */
    atomic_int resumed[2]; /* staged: the owner went on from its hold */
    atomic_llong seq;      /* one clock for both processes */
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

/* The owners' fault hook in a staged round: holds the commit it is armed
 * for at the round's point until the parent lets it go. */
static cc_page *hold_page; /* the child's view of the shared page */
static int hold_me;        /* the child's index */
static int hold_armed;

static void hold_at_point(const char *point) {
    if (!hold_armed || !point ||
        strcmp(point, HOLD_POINTS[atomic_load(&hold_page->hold_at)]) != 0)
        return;
    hold_armed = 0;
    atomic_store(&hold_page->held[hold_me], 1);
    for (int64_t end = tm_clock_mono_ms() + HOLD_MAX_MS;
         !atomic_load(&hold_page->release[hold_me]) &&
         tm_clock_mono_ms() < end;)
        pause_ms(1);
    atomic_store(&hold_page->resumed[hold_me], 1);
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
    hold_page = pg, hold_me = me;
    host.fault = hold_at_point;
    /* Both owners open one store at the same moment: a sink may answer
     * RETRY for a lock the other's open holds (SQLite's switch to WAL),
     * which the host retries, and so does the kit. */
    tm_status rc = TM_RETRY;
    for (int t = 0; rc == TM_RETRY && t < RETRIES; t++)
        if ((rc = kit_open(fx, staged ? &host : NULL, &sink, &err)) == TM_RETRY)
            pause_ms(5);
    if (rc != TM_OK) {
        snprintf(c->error, sizeof c->error, "open: %s: %s", tm_status_name(rc),
                 err.message);
        _exit(3);
    }
    atomic_store(&c->ready, 1);
    wait_flag(staged && me == 1 ? &pg->second_go : &pg->go);
    rc = TM_RETRY;
    atomic_store(&c->claiming, 1);
    for (int t = 0; rc == TM_RETRY && t < RETRIES; t++)
        if ((rc = kit_claim(fx->run, sink, m, zero, 0, &err)) == TM_RETRY)
            pause_ms(5);
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
        /* the first owner's second commit; the second owner's first, held
         * only when its claim got through while the first was held */
        hold_armed = staged && k == 1 - me;
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

/* Whether process PID has ended (not reaped yet: run_pair reaps it). */
static int gone(pid_t pid) {
    siginfo_t si = {0};
    return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
           si.si_pid != 0;
}

/* Whether process PID sleeps: state S in /proc/PID/stat, a wait for an
 * event (a lock another process holds, in fcntl or flock; a server's
 * answer; the kit's pause between retries of RETRY). Not a process that is
 * runnable but not yet scheduled (R), nor one in disk I/O (D: an fsync).
 * 0 when it cannot tell. */
static int asleep(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *e = strrchr(buf, ')'); /* the name may hold ')' too */
    return e && e[1] == ' ' && e[2] == 'S';
}

/* Waits until *FLAG is set (1), or until the owner of process PID has
 * ended, or sleeps once *FROM is set (0: what it does next waits for
 * something the other owner holds). FLAG may be NULL. A sleep counts only
 * when FLAG is still unset after it was seen, so it is one from before
 * FLAG, not the kit's own (a hold sets FLAG first). HOLD_MAX_MS at most. */
static int await_owner(pid_t pid, atomic_int *flag, atomic_int *from) {
    for (int64_t end = tm_clock_mono_ms() + HOLD_MAX_MS;;) {
        int waits = atomic_load(from) && asleep(pid);
        if (flag && atomic_load(flag))
            return 1;
        if (waits || gone(pid) || tm_clock_mono_ms() >= end)
            return 0;
        pause_ms(1);
    }
}

/* The staged schedule from the parent: once the first owner is held in
 * its commit, the second claims; the first is let go once that claim
 * waits (blocked on the first owner's lock, as it should). A claim that
 * returned instead got through the first owner's commit: the second
 * owner's first commit goes up to the same point and is held there (or
 * waits, or ends), then the first owner goes on alone until it ends or
 * waits, and only then the second (run_pair lets it go). 0, or -1 with
 * res set when the first owner was never held (the round would have
 * tested nothing). */
static int stage(cc_page *pg, const pid_t *pid, int round, kit_result *res) {
    for (int64_t end = tm_clock_mono_ms() + HOLD_MAX_MS;
         !atomic_load(&pg->held[0]) && !gone(pid[0]) &&
         tm_clock_mono_ms() < end;)
        pause_ms(1);
    if (!atomic_load(&pg->held[0])) {
        kit_fail(res,
                 "round %d: inconclusive: the first owner's second commit "
                 "never reached host->fault(\"%s\"), where the staged "
                 "round holds it while the other owner claims (does commit "
                 "call host->fault?)",
                 round, HOLD_POINTS[atomic_load(&pg->hold_at)]);
        return -1;
    }
    cc_child *second = &pg->child[1];
    atomic_store(&pg->second_go, 1);
    if (await_owner(pid[1], &second->claimed, &second->claiming)) {
        await_owner(pid[1], &pg->held[1], &second->claimed);
        atomic_store(&pg->release[0], 1);
        await_owner(pid[0], NULL, &pg->resumed[0]);
    }
    return 0;
}

/* Runs both children to their end; 0, or -1 with res set. */
static int run_pair(const kit_fixture *fx, cc_page *pg, int round, int staged,
                    int hold_at, kit_result *res) {
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
        stage(pg, pid, round, res);
    atomic_store(&pg->second_go, 1); /* whatever happened: no child waits */
    atomic_store(&pg->release[0], 1);
    atomic_store(&pg->release[1], 1);
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
        for (int r = 1; r <= ROUNDS && !KIT_FAILED(res); r++)
            if (run_pair(&fx, pg, r, r % 2 == 0, r / 2 % 2, res) == 0)
                judge(&fx, pg, r, last, res);
        kit_fixture_done(&fx);
    }
    munmap(pg, sizeof *pg);
}
