/* C11 threads as pthread calls, linked into every program of the
 * ThreadSanitizer build (TIDEMARK_TSAN) and nowhere else.
 *
 * ThreadSanitizer intercepts pthread_create, pthread_mutex_lock and the
 * rest, but not glibc's C11 threads: thrd_create and mtx_lock reach glibc's
 * internal pthread functions directly. librdkafka makes its threads and
 * locks with C11 threads, so without this file its threads run unknown to
 * the sanitizer (which crashes allocating in them) and its locks order
 * nothing for it (every hand-over of a message would look like a race);
 * its global initialisation runs under call_once, which without this file
 * orders nothing for the sanitizer either. tidemark's own code uses
 * pthreads, not C11 threads.
 * Defined in the program, these names win over libc's for librdkafka too,
 * and each calls the pthread function glibc's own would have: glibc's
 * mtx_t, cnd_t, thrd_t and once_flag are its pthread_mutex_t,
 * pthread_cond_t, pthread_t and pthread_once_t. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

_Static_assert(sizeof(mtx_t) == sizeof(pthread_mutex_t), "mtx_t");
_Static_assert(sizeof(cnd_t) == sizeof(pthread_cond_t), "cnd_t");
_Static_assert(sizeof(thrd_t) == sizeof(pthread_t), "thrd_t");
_Static_assert(sizeof(once_flag) == sizeof(pthread_once_t), "once_flag");

/* The sanitizer's dynamic annotations (its runtime defines them). */
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);

/* Only librdkafka calls these functions (tidemark's code uses pthreads).
 * The sanitizer takes the init and the destroy of a lock or condition for
 * writes to it, to catch one used before its init or after its destroy.
 * librdkafka's are not checked that way: it hands an object from the
 * thread that made it to the ones that lock it under its read-write locks
 * (which tsan_options.c leaves unseen), and to the one that destroys it by
 * its reference counts (atomics, invisible), so the write would look like
 * a race with the last lock on another thread. The lock and wait calls
 * still order as before. */
#define LIFETIME(call)                                                         \
    do {                                                                       \
        AnnotateIgnoreWritesBegin(__FILE__, __LINE__);                         \
        call;                                                                  \
        AnnotateIgnoreWritesEnd(__FILE__, __LINE__);                           \
    } while (0)

/* glibc's mapping of an error number to a C11 thread result. */
static int result(int err) {
    switch (err) {
    case 0: return thrd_success;
    case ENOMEM: return thrd_nomem;
    case ETIMEDOUT: return thrd_timedout;
    case EBUSY: return thrd_busy;
    default: return thrd_error;
    }
}

typedef struct start {
    thrd_start_t fn;
    void *arg;
} start;

static void *run(void *p) {
    start s = *(start *)p;
    free(p);
    return (void *)(intptr_t)s.fn(s.arg);
}

int thrd_create(thrd_t *thr, thrd_start_t fn, void *arg) {
    start *s = malloc(sizeof *s);
    if (!s)
        return thrd_nomem;
    s->fn = fn;
    s->arg = arg;
    int err = pthread_create((pthread_t *)thr, NULL, run, s);
    if (err != 0)
        free(s);
    return result(err);
}

int thrd_join(thrd_t thr, int *res) {
    void *r = NULL;
    int err = pthread_join((pthread_t)thr, &r);
    if (err == 0 && res)
        *res = (int)(intptr_t)r;
    return result(err);
}

int thrd_detach(thrd_t thr) {
    return result(pthread_detach((pthread_t)thr));
}

int mtx_init(mtx_t *m, int type) {
    pthread_mutexattr_t a;
    int err = pthread_mutexattr_init(&a);
    if (err == 0 && (type & mtx_recursive))
        err = pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    if (err == 0)
        LIFETIME(err = pthread_mutex_init((pthread_mutex_t *)m, &a));
    pthread_mutexattr_destroy(&a);
    return result(err);
}

int mtx_lock(mtx_t *m) {
    return result(pthread_mutex_lock((pthread_mutex_t *)m));
}

int mtx_trylock(mtx_t *m) {
    return result(pthread_mutex_trylock((pthread_mutex_t *)m));
}

int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict at) {
    return result(pthread_mutex_timedlock((pthread_mutex_t *)m, at));
}

int mtx_unlock(mtx_t *m) {
    return result(pthread_mutex_unlock((pthread_mutex_t *)m));
}

void mtx_destroy(mtx_t *m) {
    LIFETIME(pthread_mutex_destroy((pthread_mutex_t *)m));
}

int cnd_init(cnd_t *c) {
    int err;
    LIFETIME(err = pthread_cond_init((pthread_cond_t *)c, NULL));
    return result(err);
}

int cnd_signal(cnd_t *c) {
    return result(pthread_cond_signal((pthread_cond_t *)c));
}

int cnd_broadcast(cnd_t *c) {
    return result(pthread_cond_broadcast((pthread_cond_t *)c));
}

int cnd_wait(cnd_t *c, mtx_t *m) {
    return result(pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m));
}

int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m,
                  const struct timespec *restrict at) {
    return result(
        pthread_cond_timedwait((pthread_cond_t *)c, (pthread_mutex_t *)m, at));
}

void cnd_destroy(cnd_t *c) {
    LIFETIME(pthread_cond_destroy((pthread_cond_t *)c));
}

/* glibc's ONCE_FLAG_INIT is its PTHREAD_ONCE_INIT (0). */
void call_once(once_flag *flag, void (*fn)(void)) {
    pthread_once((pthread_once_t *)flag, fn);
}
