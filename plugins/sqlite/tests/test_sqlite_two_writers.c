/* Two processes commit to one SQLite database at once: fencing across
 * processes (docs/sinks/sqlite.md: the epoch in the marker row, checked inside
 * the commit's BEGIN IMMEDIATE transaction).
 *
 * Child A opens an instance, claims t[0] and t[1], commits [0, 5) on both
 * and says so through a pipe. Child B then opens its own instance, claims
 * the same partitions (epochs rise by one) and says so. Both then commit
 * in a loop for a bounded time: B one batch after another from the
 * markers, A from the markers it reads back each time but with its old
 * epoch. A must get TM_FENCED every time (TM_RETRY on a lock wait is
 * retried) and never TM_OK; B must get TM_OK (or TM_RETRY, retried). At the
 * end every offset B reached has exactly one row, A's rows are only those
 * of [0, 5), and the markers carry B's epoch and B's last batch.
 *
 * Before judging, the test checks that A's attempts really overlapped B's
 * commits in time (from both processes' CLOCK_MONOTONIC stamps); if not,
 * it fails as "inconclusive". */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "fixture.h"

#define NPARTS      2
#define A_END       5    /* A's first batch: [0, A_END) */
#define STEP        5    /* offsets per partition per batch */
#define LOOP_MS     1000 /* how long both commit */
#define B_MAX       1000 /* B's batches at most */
#define STAMPS_MAX  4096
#define WAIT_MS     10000 /* for the other child's signal */
#define MIN_OVERLAP 10    /* A's calls during one of B's, to be conclusive */

typedef struct span {
    int64_t start_us, end_us; /* CLOCK_MONOTONIC, the same in both */
} span;

/* What a child reports, in memory shared with the parent. */
typedef struct report {
    int done;                     /* reached the end */
    char why[TM_ERROR_MAX + 256]; /* set on failure */
    int64_t epoch;                /* after its claim */
    int64_t claimed_ms;           /* when the claim returned */
    long ok, already, fenced, retry, other;
    int64_t next;                    /* B: marker after its last batch */
    char last_id[TM_BATCH_ID_MAX];   /* B: its last applied batch */
    int64_t final_epoch[NPARTS];     /* A: read back after the loop */
    long nspans;                     /* commit calls stamped */
    span spans[STAMPS_MAX];          /* one per commit call */
    char first_fenced[TM_ERROR_MAX]; /* A: the first FENCED message */
} report;

static report *rep_a, *rep_b;

static void setup(void) {
    char why[FX_WHY_MAX] = "";
    ck_assert_msg(fx_load_plugin(why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_tmpdir(why, sizeof why) == 0, "%s", why);
    void *mem = mmap(NULL, 2 * sizeof(report), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(mem, MAP_FAILED);
    memset(mem, 0, 2 * sizeof(report));
    rep_a = mem;
    rep_b = rep_a + 1;
}

static void teardown(void) {
    if (rep_a)
        munmap(rep_a, 2 * sizeof(report));
    rep_a = rep_b = NULL;
    fx_rmdir();
}

/* ---- in the children: no ck_assert, a report and _exit ------------------ */

static int signal_other(int fd, report *me) {
    char c = 'x';
    ssize_t n;
    while ((n = write(fd, &c, 1)) < 0 && errno == EINTR)
        ;
    if (n != 1) {
        snprintf(me->why, sizeof me->why, "write to the pipe: %s",
                 strerror(errno));
        return -1;
    }
    return 0;
}

static int wait_other(int fd, report *me, const char *what) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n;
    while ((n = poll(&p, 1, WAIT_MS)) < 0 && errno == EINTR)
        ;
    char c;
    if (n != 1 || read(fd, &c, 1) != 1) {
        snprintf(me->why, sizeof me->why, "no word from %s within %d ms", what,
                 WAIT_MS);
        return -1;
    }
    return 0;
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int64_t mono_us(void) {
    return (int64_t)(tm_clock_mono_ns() / 1000u);
}

static void stamp(report *me, int64_t start_us) {
    if (me->nspans < STAMPS_MAX)
        me->spans[me->nspans++] = (span){start_us, mono_us()};
}

/* A: claim, commit [0, A_END), tell B, wait for B's claim, then try to
 * commit with the old epoch until the time is up. */
static void child_a(int to_b, int from_b) {
    report *me = rep_a;
    fx_conf c;
    void *sink = NULL;
    tm_marker m[NPARTS];
    fx_batch bt;
    tm_error err;
    if (fx_conf_init(&c, NULL, me->why, sizeof me->why) != 0)
        return;
    if (fx_open(&c, &sink, me->why, sizeof me->why) != TM_OK)
        goto out_conf;
    if (fx_claim(sink, m, NPARTS, me->why, sizeof me->why) != TM_OK)
        goto out;
    me->claimed_ms = tm_clock_mono_ms();
    me->epoch = m[0].epoch;
    if (m[1].epoch != me->epoch) {
        snprintf(me->why, sizeof me->why,
                 "A: claim gave epochs %" PRId64 " and %" PRId64, m[0].epoch,
                 m[1].epoch);
        goto out;
    }
    int64_t ep[NPARTS] = {me->epoch, me->epoch};
    tm_status r = TM_FATAL;
    if (fx_batch_make(&bt, "A-0", NPARTS, 0, A_END, ep, "A") == 0)
        r = fx_commit(sink, &bt, &err);
    if (r != TM_OK) {
        snprintf(me->why, sizeof me->why, "A: first batch: %s: %s",
                 tm_status_name(r), err.message);
        goto out;
    }
    if (signal_other(to_b, me) != 0 || wait_other(from_b, me, "B") != 0)
        goto out;
    int64_t until = tm_clock_mono_ms() + LOOP_MS;
    for (long k = 1; tm_clock_mono_ms() < until; k++) {
        /* Continue from the markers as they are now: only the epoch can
         * stop this batch. */
        if (fx_read(sink, m, NPARTS, me->why, sizeof me->why) != TM_OK)
            goto out;
        char id[TM_BATCH_ID_MAX];
        snprintf(id, sizeof id, "A-%ld", k);
        int64_t from = m[0].next_offset < m[1].next_offset ? m[0].next_offset
                                                           : m[1].next_offset;
        if (fx_batch_make(&bt, id, NPARTS, from, from + STEP, ep, "A-late") !=
            0) {
            snprintf(me->why, sizeof me->why, "A: cannot build %s", id);
            goto out;
        }
        int64_t t0 = mono_us();
        r = fx_commit(sink, &bt, &err);
        stamp(me, t0);
        switch (r) {
        case TM_FENCED:
            if (me->fenced++ == 0)
                snprintf(me->first_fenced, sizeof me->first_fenced, "%s",
                         err.message);
            break;
        case TM_RETRY: me->retry++; break;
        case TM_OK:
            me->ok++;
            snprintf(me->why, sizeof me->why,
                     "A: batch %s [%" PRId64 ", %" PRId64
                     ") with epoch %" PRId64 " was applied after B's claim",
                     id, from, from + STEP, me->epoch);
            goto out;
        case TM_ALREADY: me->already++; break;
        default:
            me->other++;
            snprintf(me->why, sizeof me->why, "A: batch %s: %s: %s", id,
                     tm_status_name(r), err.message);
            goto out;
        }
        nap_ms(1);
    }
    if (fx_read(sink, m, NPARTS, me->why, sizeof me->why) != TM_OK)
        goto out;
    for (int p = 0; p < NPARTS; p++)
        me->final_epoch[p] = m[p].epoch;
    me->done = 1;
out:
    fx_api->close(sink);
out_conf:
    fx_conf_done(&c);
}

/* B: wait for A's first batch, claim, tell A, then commit batch after
 * batch from the markers until the time is up. */
static void child_b(int to_a, int from_a) {
    report *me = rep_b;
    fx_conf c;
    void *sink = NULL;
    tm_marker m[NPARTS];
    fx_batch bt;
    tm_error err;
    if (wait_other(from_a, me, "A") != 0)
        return;
    if (fx_conf_init(&c, NULL, me->why, sizeof me->why) != 0)
        return;
    if (fx_open(&c, &sink, me->why, sizeof me->why) != TM_OK)
        goto out_conf;
    if (fx_claim(sink, m, NPARTS, me->why, sizeof me->why) != TM_OK)
        goto out;
    me->claimed_ms = tm_clock_mono_ms();
    me->epoch = m[0].epoch;
    for (int p = 0; p < NPARTS; p++)
        if (m[p].epoch != me->epoch || m[p].next_offset != A_END) {
            snprintf(me->why, sizeof me->why,
                     "B: claim read t[%d] at %" PRId64 " epoch %" PRId64
                     ", want %d and the same epoch on both",
                     p, m[p].next_offset, m[p].epoch, A_END);
            goto out;
        }
    if (signal_other(to_a, me) != 0)
        goto out;
    int64_t ep[NPARTS] = {me->epoch, me->epoch};
    int64_t next = A_END;
    int64_t until = tm_clock_mono_ms() + LOOP_MS;
    long applied = 0;
    int retried = 0; /* the current batch got RETRY before */
    char id[TM_BATCH_ID_MAX] = "";
    while (tm_clock_mono_ms() < until && applied < B_MAX) {
        snprintf(id, sizeof id, "B-%ld", applied + 1);
        if (fx_batch_make(&bt, id, NPARTS, next, next + STEP, ep, "B") != 0) {
            snprintf(me->why, sizeof me->why, "B: cannot build %s", id);
            goto out;
        }
        int64_t t0 = mono_us();
        tm_status r = fx_commit(sink, &bt, &err);
        stamp(me, t0);
        if (r == TM_RETRY) {
            me->retry++;
            retried = 1;
            nap_ms(1);
            continue;
        }
        if (r == TM_OK || (r == TM_ALREADY && retried)) {
            /* ALREADY only settles a batch whose earlier try was RETRY */
            if (r == TM_OK)
                me->ok++;
            else
                me->already++;
            applied++;
            next += STEP;
            retried = 0;
            snprintf(me->last_id, sizeof me->last_id, "%s", id);
            nap_ms(1);
            continue;
        }
        me->other++;
        snprintf(me->why, sizeof me->why,
                 "B: batch %s [%" PRId64 ", %" PRId64 "): %s: %s", id, next,
                 next + STEP, tm_status_name(r), err.message);
        goto out;
    }
    if (retried) {
        /* time ran out on a RETRY: settle that batch before leaving */
        tm_status r;
        for (int k = 0; (r = fx_commit(sink, &bt, &err)) == TM_RETRY && k < 100;
             k++)
            nap_ms(10);
        if (r != TM_OK && r != TM_ALREADY) {
            snprintf(me->why, sizeof me->why, "B: settling %s: %s: %s", id,
                     tm_status_name(r), err.message);
            goto out;
        }
        applied++;
        next += STEP;
        snprintf(me->last_id, sizeof me->last_id, "%s", id);
    }
    me->next = next;
    me->done = 1;
out:
    fx_api->close(sink);
out_conf:
    fx_conf_done(&c);
}

/* ---- the parent ---------------------------------------------------------- */

/* Waits for PID at most until DEADLINE_MS; kills it (our own child) after.
 * Returns its wait status, or -1 when it had to be killed. */
static int reap(pid_t pid, int64_t deadline_ms) {
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            return status;
        if (w < 0 && errno != EINTR)
            return -1;
        if (tm_clock_mono_ms() > deadline_ms) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        nap_ms(10);
    }
}

/* How many of A's commit calls overlapped one of B's in time (both
 * lists are in time order). */
static long overlaps(const report *a, const report *b) {
    long n = 0;
    for (long i = 0; i < a->nspans; i++)
        for (long j = 0; j < b->nspans; j++)
            if (a->spans[i].start_us < b->spans[j].end_us &&
                b->spans[j].start_us < a->spans[i].end_us) {
                n++;
                break;
            }
    return n;
}

static void check_child(const char *name, int status, const report *r) {
    ck_assert_msg(status != -1, "child %s hung (killed)", name);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child %s died (status 0x%x): %s", name, (unsigned)status,
                  r->why);
    ck_assert_msg(r->done, "child %s: %s", name,
                  r->why[0] ? r->why : "stopped early");
}

START_TEST(fenced_writer_never_commits) {
    char why[FX_WHY_MAX] = "";
    int a2b[2], b2a[2];
    ck_assert_int_eq(pipe(a2b), 0);
    ck_assert_int_eq(pipe(b2a), 0);
    /* Children leave with exit() (so that a sanitizer build checks them
     * for leaks too): nothing buffered may be written twice. */
    fflush(NULL);
    pid_t a = fork();
    ck_assert_int_ne(a, -1);
    if (a == 0) {
        close(a2b[0]);
        close(b2a[1]);
        child_a(a2b[1], b2a[0]);
        exit(0);
    }
    pid_t b = fork();
    if (b == -1) {
        kill(a, SIGKILL);
        waitpid(a, NULL, 0);
    }
    ck_assert_int_ne(b, -1);
    if (b == 0) {
        close(a2b[1]);
        close(b2a[0]);
        child_b(b2a[1], a2b[0]);
        exit(0);
    }
    for (int i = 0; i < 2; i++) {
        close(a2b[i]);
        close(b2a[i]);
    }
    int64_t deadline = tm_clock_mono_ms() + 2 * WAIT_MS;
    int sa = reap(a, deadline), sb = reap(b, deadline);
    check_child("A", sa, rep_a);
    check_child("B", sb, rep_b);

    /* Did the fault happen where intended? B claimed after A's claim and
     * first batch, and A kept committing while B did. */
    ck_assert_msg(rep_b->epoch > rep_a->epoch &&
                      rep_b->claimed_ms >= rep_a->claimed_ms,
                  "inconclusive: B's claim (epoch %" PRId64
                  ") did not follow A's (epoch %" PRId64 ")",
                  rep_b->epoch, rep_a->epoch);
    long both = overlaps(rep_a, rep_b);
    ck_assert_msg(rep_a->nspans > 0 && rep_b->ok + rep_b->already >= 2 &&
                      both >= MIN_OVERLAP,
                  "inconclusive: the writers did not commit at the same "
                  "time (A: %ld calls, B: %ld batches, %ld overlapping)",
                  rep_a->nspans, rep_b->ok + rep_b->already, both);

    /* A: fenced, never applied. */
    ck_assert_msg(rep_a->ok == 0, "A applied %ld batch(es) after B's claim",
                  rep_a->ok);
    ck_assert_msg(rep_a->fenced > 0 && rep_a->already == 0 && rep_a->other == 0,
                  "A: %ld FENCED, %ld ALREADY, %ld other", rep_a->fenced,
                  rep_a->already, rep_a->other);
    ck_assert_msg(strstr(rep_a->first_fenced, "fenced") != NULL, "%s",
                  rep_a->first_fenced);
    for (int p = 0; p < NPARTS; p++)
        ck_assert_int_eq(rep_a->final_epoch[p], rep_b->epoch);

    /* The database: exactly once, B's markers. */
    int64_t end = rep_b->next;
    ck_assert_int_eq(end, A_END + STEP * (rep_b->ok + rep_b->already));
    void *sink = NULL;
    fx_conf c;
    tm_marker m[NPARTS];
    ck_assert_msg(fx_conf_init(&c, NULL, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_open(&c, &sink, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_msg(fx_read(sink, m, NPARTS, why, sizeof why) == TM_OK, "%s",
                  why);
    for (int p = 0; p < NPARTS; p++) {
        ck_assert_int_eq(m[p].next_offset, end);
        ck_assert_int_eq(m[p].epoch, rep_b->epoch);
        ck_assert_str_eq(m[p].last_batch_id, rep_b->last_id);
        ck_assert_uint_eq(m[p].rows, (uint64_t)end);
        ck_assert_msg(fx_scan_exactly_once(sink, p, end, why, sizeof why) == 0,
                      "%s", why);
        ck_assert_msg(fx_sql_exactly_once(p, end, why, sizeof why) == 0, "%s",
                      why);
    }
    int64_t n = -1;
    ck_assert_msg(fx_sql_int("SELECT count(*) FROM t WHERE body = 'A-late'", &n,
                             why, sizeof why) == SQLITE_OK,
                  "%s", why);
    ck_assert_int_eq(n, 0);
    ck_assert_msg(fx_sql_int("SELECT count(*) FROM t WHERE body = 'A' AND "
                             "_tm_offset < 5",
                             &n, why, sizeof why) == SQLITE_OK,
                  "%s", why);
    ck_assert_int_eq(n, NPARTS * A_END);
    fx_api->close(sink);
    fx_conf_done(&c);
}
END_TEST

/* Another connection holds the database's write lock (BEGIN IMMEDIATE,
 * a row written) while the sink opens it: the open's switch to WAL reads
 * first and then needs that lock, and SQLite answers such an upgrade with
 * SQLITE_BUSY at once, without the busy handler (it could deadlock). This
 * is how two connectors opening one new file at the same moment meet. The
 * open must wait for the lock like any statement (here the holder commits
 * after HOLD_MS), not answer RETRY, which the host would follow with a
 * backoff of 0.5 s or more; and, held longer than busy_timeout_ms, answer
 * RETRY at that bound, not a multiple of it. */
#define HOLD_MS  400 /* the other connection's write lock, then COMMIT */
#define BOUND_MS 500 /* busy_timeout_ms of the bounded case */
#define SLACK_MS 400 /* over the bound: the sleeps' granularity, a load */

typedef struct holder {
    sqlite3 *db;
    int hold_ms; /* then COMMIT */
    int64_t released_ms;
} holder;

static void *release_later(void *arg) {
    holder *h = arg;
    struct timespec ts = {h->hold_ms / 1000, (h->hold_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    h->released_ms = tm_clock_mono_ms();
    ck_assert_int_eq(sqlite3_exec(h->db, "COMMIT", NULL, NULL, NULL),
                     SQLITE_OK);
    return NULL;
}

/* Opens the sink (settings EXTRA) while another connection holds the
 * write lock of a database in rollback-journal mode for HOLD_MS (BEGIN
 * IMMEDIATE: others may still read; EXCLUSIVE: they may not, and SQLite
 * calls the busy handler for the open's read); the open's answer and how
 * long it took. */
static tm_status open_beside_a_writer(const char *begin, const char *extra,
                                      int hold_ms, int64_t *took_ms,
                                      int64_t *released_ms, char *why,
                                      size_t size) {
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(fx_db_path, &db), SQLITE_OK);
    char sql[128];
    snprintf(sql, sizeof sql,
             "CREATE TABLE IF NOT EXISTS other (a); BEGIN %s; "
             "INSERT INTO other VALUES (1)",
             begin);
    ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    holder h = {.db = db, .hold_ms = hold_ms};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, release_later, &h), 0);
    fx_conf conf;
    ck_assert_msg(fx_conf_init(&conf, extra, why, size) == 0, "%s", why);
    void *sink = NULL;
    int64_t t0 = tm_clock_mono_ms();
    tm_status rc = fx_open(&conf, &sink, why, size);
    *took_ms = tm_clock_mono_ms() - t0;
    if (sink)
        fx_api->close(sink);
    fx_conf_done(&conf);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    *released_ms = h.released_ms - t0;
    ck_assert_int_eq(sqlite3_close(db), SQLITE_OK);
    return rc;
}

START_TEST(open_waits_for_a_writer_holding_the_file) {
    char why[FX_WHY_MAX] = "";
    int64_t took, released;
    tm_status rc = open_beside_a_writer("IMMEDIATE", NULL, HOLD_MS, &took,
                                        &released, why, sizeof why);
    ck_assert_msg(rc == TM_OK,
                  "open beside a writer holding the lock for %d "
                  "ms: %s after %lld ms",
                  HOLD_MS, why, (long long)took);
    ck_assert_msg(took >= released,
                  "inconclusive: the open returned after %lld ms, before "
                  "the other connection let its lock go (%lld ms)",
                  (long long)took, (long long)released);
}
END_TEST

START_TEST(open_gives_up_at_busy_timeout) {
    static const char *const begin[2] = {"IMMEDIATE", "EXCLUSIVE"};
    char why[FX_WHY_MAX] = "", extra[64];
    snprintf(extra, sizeof extra, "\"busy_timeout_ms\": %d", BOUND_MS);
    for (int k = 0; k < 2; k++) {
        int64_t took, released;
        tm_status rc = open_beside_a_writer(begin[k], extra, 6 * BOUND_MS,
                                            &took, &released, why, sizeof why);
        ck_assert_msg(rc == TM_RETRY,
                      "open beside BEGIN %s held %d ms, busy_timeout_ms %d: "
                      "%s after %lld ms, expected RETRY",
                      begin[k], 6 * BOUND_MS, BOUND_MS, tm_status_name(rc),
                      (long long)took);
        ck_assert_msg(took >= BOUND_MS && took < BOUND_MS + SLACK_MS,
                      "open beside BEGIN %s: RETRY after %lld ms, expected "
                      "%d ms (busy_timeout_ms) to %d",
                      begin[k], (long long)took, BOUND_MS, BOUND_MS + SLACK_MS);
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("sqlite_two_writers");
    TCase *tc = tcase_create("two_writers");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, fenced_writer_never_commits);
    tcase_add_test(tc, open_waits_for_a_writer_holding_the_file);
    tcase_add_test(tc, open_gives_up_at_busy_timeout);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
