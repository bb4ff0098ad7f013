/* The host's one clock. Monotonic time for deadlines and durations (the
 * clock of tm_batch.deadline_ms); wall-clock time for what is shown to
 * people or stored (status ages, timestamps). */
#ifndef TM_CLOCK_H
#define TM_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds; 0 if the clock cannot be read. */
int64_t tm_clock_mono_ms(void);
/* CLOCK_MONOTONIC in nanoseconds; 0 if the clock cannot be read. */
uint64_t tm_clock_mono_ns(void);
/* CLOCK_REALTIME in milliseconds since the epoch; 0 if it cannot be read. */
int64_t tm_clock_wall_ms(void);

#endif
