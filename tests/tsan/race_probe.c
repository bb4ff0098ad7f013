/* The ThreadSanitizer build's own check that it sees what it must:
 *   race_probe race  two C11 threads write one counter without a lock: the
 *                    sanitizer must report a data race (tsan.sees_a_race);
 *   race_probe c11   the same writes under a C11 mtx_t, after each thread
 *                    read what a C11 call_once wrote: no report, which
 *                    holds only while c11_threads.c hands mtx_lock and
 *                    call_once to the intercepted pthread_mutex_lock and
 *                    pthread_once, as librdkafka's locks and its global
 *                    initialisation need (tsan.sees_c11_locks).
 *   race_probe lifetime  one thread initialises a C11 lock and condition
 *                    and later destroys them, another locks and signals
 *                    them in between, handed to and fro by relaxed atomics
 *                    as librdkafka hands its objects over by means the
 *                    sanitizer does not see: no report, which holds only
 *                    while c11_threads.c leaves the lifetimes of
 *                    librdkafka's locks unchecked
 *                    (tsan.ignores_c11_lock_lifetime).
 * A build that stopped catching races, or that took librdkafka's locks for
 * none, or their lifetimes for races, fails one of them. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>

static long counter;
static mtx_t lock;
static int locked;
static once_flag once = ONCE_FLAG_INIT;
static long step; /* written once, by whichever thread comes first */

static void first(void) {
    step = 1;
}

static int bump(void *arg) {
    (void)arg;
    long by = 1;
    if (locked) {
        call_once(&once, first);
        by = step;
    }
    for (int i = 0; i < 100000; i++) {
        if (locked && mtx_lock(&lock) != thrd_success)
            return 1;
        counter += by;
        if (locked && mtx_unlock(&lock) != thrd_success)
            return 1;
    }
    return 0;
}

static mtx_t handed_lock;
static cnd_t handed_cnd;
static atomic_int handed; /* 1: initialised, 2: used; relaxed: unseen */

static void await(int state) {
    while (atomic_load_explicit(&handed, memory_order_relaxed) != state)
        thrd_yield();
}

static int maker(void *arg) {
    (void)arg;
    if (mtx_init(&handed_lock, mtx_plain) != thrd_success ||
        cnd_init(&handed_cnd) != thrd_success)
        return 1;
    atomic_store_explicit(&handed, 1, memory_order_relaxed);
    await(2);
    cnd_destroy(&handed_cnd);
    mtx_destroy(&handed_lock);
    return 0;
}

static int user(void *arg) {
    (void)arg;
    await(1);
    int rc = mtx_lock(&handed_lock) == thrd_success &&
                     cnd_signal(&handed_cnd) == thrd_success &&
                     mtx_unlock(&handed_lock) == thrd_success
                 ? 0
                 : 1;
    atomic_store_explicit(&handed, 2, memory_order_relaxed);
    return rc;
}

static int lifetime(void) {
    thrd_t m, u;
    if (thrd_create(&u, user, NULL) != thrd_success ||
        thrd_create(&m, maker, NULL) != thrd_success)
        return 2;
    int rm = 1, ru = 1;
    if (thrd_join(m, &rm) != thrd_success || thrd_join(u, &ru) != thrd_success)
        return 2;
    printf("lifetime (threads %d %d)\n", rm, ru);
    return rm || ru ? 2 : 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "lifetime") == 0)
        return lifetime();
    if (argc != 2 || (strcmp(argv[1], "race") && strcmp(argv[1], "c11"))) {
        fprintf(stderr, "usage: race_probe race|c11|lifetime\n");
        return 2;
    }
    locked = strcmp(argv[1], "c11") == 0;
    if (mtx_init(&lock, mtx_plain) != thrd_success)
        return 2;
    thrd_t a, b;
    if (thrd_create(&a, bump, NULL) != thrd_success ||
        thrd_create(&b, bump, NULL) != thrd_success)
        return 2;
    int ra = 1, rb = 1;
    if (thrd_join(a, &ra) != thrd_success || thrd_join(b, &rb) != thrd_success)
        return 2;
    mtx_destroy(&lock);
    printf("counter %ld (threads %d %d)\n", counter, ra, rb);
    return ra || rb ? 2 : 0;
}
