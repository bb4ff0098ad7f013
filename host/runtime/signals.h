/* Signals of `tidemark run`. SIGTERM / SIGINT: the first asks every
 * connector to stop (finish or abandon its batch, leave the group); the
 * second exits at once, which is still safe (the sinks' commits are atomic
 * and the markers say where to go on). SIGHUP and SIGUSR1 are logged and
 * ignored; SIGPIPE is ignored (a closed log pipe gives EPIPE). */
#ifndef TM_SIGNALS_H
#define TM_SIGNALS_H

#include <stdatomic.h>

/* Blocks the signals in the calling thread (threads created after inherit
 * the mask) and starts the thread that waits for them and sets *stop.
 * 0, or -1 with errno. */
int tm_signals_start(atomic_int *stop);

#endif
