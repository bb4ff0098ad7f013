/* Signals of `tidemark run`. SIGTERM / SIGINT: the first asks every
 * connector to stop (finish or abandon its batch, leave the group); the
 * second exits at once, which is still safe (the sinks' commits are atomic
 * and the markers say where to go on). SIGHUP asks for a reload of the
 * configs (cli/cmd_run.c applies it); SIGUSR1 is logged and ignored;
 * SIGPIPE is ignored (a closed log pipe gives EPIPE). */
#ifndef TM_SIGNALS_H
#define TM_SIGNALS_H

#include <stdatomic.h>

/* Blocks the signals in the calling thread (threads created after inherit
 * the mask) and starts the thread that waits for them: it sets *stop, and
 * adds one to *reloads at each SIGHUP (a count, so that a SIGHUP that
 * comes while a reload is still being applied is not lost). 0, or -1 with
 * errno. */
int tm_signals_start(atomic_int *stop, atomic_uint *reloads);

/* FN(CTX) is called by the signal thread right after it set *stop on the
 * first SIGTERM or SIGINT, before anything else may go on (a fault point
 * that held the process waits for it: services/fault.h), so that every
 * connector sees its stop at once. NULL removes it; returns only once a
 * call in progress finished, so CTX may then be freed. */
void tm_signals_on_stop(void (*fn)(void *ctx), void *ctx);

#endif
