/* Crash points (tm_host_api.fault). Plugins call tm_fault(point) at named
 * points of a commit; nothing happens unless the environment asks:
 *   TIDEMARK_FAULT=<point>        the point to fire at
 *   TIDEMARK_FAULT_FD=<fd>        where the point's name is written first,
 *                                 so a test can prove the point was reached
 *   TIDEMARK_FAULT_ACTION=kill|stop|hang  SIGKILL (default), SIGSTOP
 *                                 (zombie tests: the process resumes on
 *                                 SIGCONT), or the calling thread alone
 *                                 blocks for ever (a call that never
 *                                 returns: the rest of the process runs on)
 *   TIDEMARK_FAULT_HIT=<n>        fire on the n-th time the point is
 *                                 reached in this process (default 1)
 *   TIDEMARK_FAULT_ACTION=slow-from  the calling thread sleeps
 *                                 TIDEMARK_FAULT_SLEEP_MS (default 1000) at
 *                                 the n-th time and every later one: a call
 *                                 as slow on a loaded machine as on an idle
 *                                 one
 * Plugins never implement faults themselves.
 * A failure point (tm_fault_fail) makes its caller fail instead, with
 *   TIDEMARK_FAULT_ACTION=fail       on the n-th time only
 *   TIDEMARK_FAULT_ACTION=fail-from  on the n-th time and every later one */
#ifndef TM_FAULT_H
#define TM_FAULT_H

void tm_fault(const char *point);

/* 1 when the failure point POINT fires (its name written to
 * TIDEMARK_FAULT_FD first): the caller then fails as it would by itself
 * (the host's own code, where no plugin can reach). */
int tm_fault_fail(const char *point);

/* Called by the signal thread once it has acted on a stop signal (the
 * stop flag is set). A point that stopped the process waits for it after
 * SIGCONT when a stop signal was sent meanwhile, so that a test which
 * stops the host at a point, signals it and continues it finds the signal
 * taken before the point's caller goes on, not racing it. */
void tm_fault_signal_taken(void);

#endif
