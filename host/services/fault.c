#include "services/fault.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_long hits;
static atomic_uint signals_taken;

void tm_fault_signal_taken(void) {
    atomic_fetch_add(&signals_taken, 1);
}

/* After SIGCONT: a SIGTERM or SIGINT sent while the process was stopped is
 * either still pending or being taken by the signal thread. Wait (at most
 * 2 s) until that thread says it acted, so the caller sees the stop. */
static void settle_signals(unsigned before) {
    for (int i = 0; i < 2000; i++) {
        if (atomic_load(&signals_taken) != before)
            return;
        sigset_t pending;
        if (sigpending(&pending) != 0)
            return;
        if (!sigismember(&pending, SIGTERM) && !sigismember(&pending, SIGINT))
            break; /* none pending: none sent, or dequeued just now */
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    /* Dequeued by sigwait but not yet acted on is a few instructions. */
    for (int i = 0; i < 20 && atomic_load(&signals_taken) == before; i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
}

static long env_long(const char *name, long dflt) {
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return (errno || *end) ? dflt : v;
}

/* Writes all of buf, retrying on EINTR; best effort: a test that finds no
 * name on its descriptor reports "inconclusive". */
static void write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        buf += n;
        len -= (size_t)n;
    }
}

/* 1 when POINT is the point asked and this hit fires it (the n-th; with
 * FROM_ON, any from the n-th on), its name then written to the fault's
 * descriptor. */
static int reached(const char *point, int from_on) {
    const char *want = getenv("TIDEMARK_FAULT");
    if (!want || !point || strcmp(want, point) != 0)
        return 0;
    long hit = atomic_fetch_add(&hits, 1) + 1,
         at = env_long("TIDEMARK_FAULT_HIT", 1);
    if (from_on ? hit < at : hit != at)
        return 0;
    long fd = env_long("TIDEMARK_FAULT_FD", -1);
    if (fd >= 0) {
        write_all((int)fd, point, strlen(point));
        write_all((int)fd, "\n", 1);
    }
    return 1;
}

int tm_fault_fail(const char *point) {
    const char *action = getenv("TIDEMARK_FAULT_ACTION");
    if (!action)
        return 0;
    if (strcmp(action, "fail") == 0)
        return reached(point, 0);
    return strcmp(action, "fail-from") == 0 && reached(point, 1);
}

void tm_fault(const char *point) {
    /* Exactly the n-th hit, not every one from there on: a stopped zombie
     * that is continued and reaches the point again must run on (seen: a
     * zombie given a partition back stopped again, and never took SIGTERM). */
    const char *action = getenv("TIDEMARK_FAULT_ACTION");
    if (action && strncmp(action, "fail", 4) == 0)
        return; /* for tm_fault_fail's points only */
    if (action && strcmp(action, "slow-from") == 0) {
        if (!reached(point, 1))
            return;
        long ms = env_long("TIDEMARK_FAULT_SLEEP_MS", 1000);
        struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&left, &left) != 0 && errno == EINTR)
            ;
        return;
    }
    if (!reached(point, 0))
        return;
    if (action && strcmp(action, "stop") == 0) {
        /* raise(), not kill(getpid()): a process-directed SIGSTOP may be
         * taken by another thread, and this one would run on into the
         * commit before the group stop reaches it (seen: a "zombie"
         * stopped in COMMIT's fdatasync, holding SQLite's write lock).
         * Directed at this thread, the stop happens before raise returns. */
        unsigned before = atomic_load(&signals_taken);
        raise(SIGSTOP);
        settle_signals(before);
        return; /* resumed by SIGCONT: the zombie goes on where it was */
    }
    if (action && strcmp(action, "hang") == 0) {
        /* A sink call that never returns (a plugin ignoring its deadline,
         * a driver blocked for good): only this thread stops. */
        for (;;)
            pause();
    }
    raise(SIGKILL);
    for (;;)
        pause(); /* SIGKILL is not deliverable late, but never return */
}
