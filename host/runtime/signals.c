#include "runtime/signals.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "services/fault.h"
#include "services/log.h"
#include "services/thread_name.h"

static sigset_t waited;
static atomic_int *stop_flag;
static atomic_uint *reload_count;
static pthread_mutex_t hook_lock = PTHREAD_MUTEX_INITIALIZER;
static void (*stop_hook)(void *ctx);
static void *stop_hook_ctx;

void tm_signals_on_stop(void (*fn)(void *ctx), void *ctx) {
    pthread_mutex_lock(&hook_lock);
    stop_hook = fn;
    stop_hook_ctx = ctx;
    pthread_mutex_unlock(&hook_lock);
}

static void *signal_thread(void *arg) {
    tm_thread_name("tm:signals");
    (void)arg;
    atomic_int *stop = stop_flag;
    int signalled = 0;
    for (;;) {
        int sig = 0;
        if (sigwait(&waited, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            /* Counted, not applied here: the run loop reloads when it
             * sees the count move (cli/cmd_run.c), after a stop too. */
            unsigned n = atomic_fetch_add(reload_count, 1) + 1;
            tm_log(TM_LOG_INFO, NULL, "SIGHUP: reload %u asked", n);
            continue;
        }
        if (sig == SIGUSR1) {
            /* Sent by habit (log rotation): the default action would end
             * the host. Nothing to do; said so. */
            tm_log(TM_LOG_INFO, NULL,
                   "SIGUSR1: ignored (SIGHUP reloads the configs; SIGTERM "
                   "or SIGINT stops)");
            continue;
        }
        /* The second signal, not the second stop: the process also stops
         * itself (every connector FAILED, cli/cmd_run.c), and a signal
         * then is the first one. Only this thread touches `signalled`. */
        if (!signalled) {
            signalled = 1;
            atomic_store(stop, 1);
            pthread_mutex_lock(&hook_lock);
            if (stop_hook)
                stop_hook(stop_hook_ctx);
            pthread_mutex_unlock(&hook_lock);
            tm_fault_signal_taken();
            tm_log(TM_LOG_INFO, NULL,
                   "%s: stopping (a second signal exits at once)",
                   sig == SIGINT ? "SIGINT" : "SIGTERM");
            continue;
        }
        static const char msg[] = "second signal: exiting now\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
        _exit(128 + sig);
    }
    return NULL;
}

int tm_signals_start(atomic_int *stop, atomic_uint *reloads) {
    stop_flag = stop;
    reload_count = reloads;
    /* A log reader that goes away (`tidemark run ... | head -1`) must not
     * kill the host: writes to it fail with EPIPE instead, and are lost. */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
        return -1;
    sigemptyset(&waited);
    sigaddset(&waited, SIGINT);
    sigaddset(&waited, SIGTERM);
    sigaddset(&waited, SIGHUP);
    sigaddset(&waited, SIGUSR1);
    if (pthread_sigmask(SIG_BLOCK, &waited, NULL) != 0)
        return -1;
    pthread_t th;
    if (pthread_create(&th, NULL, signal_thread, NULL) != 0)
        return -1;
    pthread_detach(th);
    return 0;
}
