/* The host's one clock. Monotonic time for deadlines and durations (the
 * clock of tm_batch.deadline_ms); wall-clock time for what is shown to
 * people or stored (status ages, timestamps). */
#ifndef TM_CLOCK_H
#define TM_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in milliseconds; 0 if the clock cannot be read. */
int64_t tm_clock_mono_ms(void);
/* CLOCK_MONOTONIC in nanoseconds; 0 if the clock cannot be read. */
uint64_t tm_clock_mono_ns(void);
/* CLOCK_REALTIME in milliseconds since the epoch; 0 if it cannot be read. */
int64_t tm_clock_wall_ms(void);

/* A condition variable whose timed waits run on CLOCK_MONOTONIC, so that a
 * step of the wall clock (NTP, an operator) neither stretches a wait by the
 * step nor cuts it short. 0, or the pthread error. Pair it with
 * tm_clock_mono_after for pthread_cond_timedwait's deadline. */
int tm_cond_init_mono(pthread_cond_t *cv);
/* The CLOCK_MONOTONIC time MS milliseconds from now, as an absolute
 * deadline for a condition variable of tm_cond_init_mono. */
struct timespec tm_clock_mono_after(int64_t ms);

#endif
