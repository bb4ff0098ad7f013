/* Counting the times a failed Kafka client was made again (the consumer's
 * fatal error, the dead-letter producer's): made again while it recovers,
 * FAILED once something keeps killing it. */
#ifndef TM_RESTARTS_H
#define TM_RESTARTS_H

#include <stdint.h>

/* More restarts in a row than this end in FAILED: the fourth fatal error,
 * each within a minute of the last. */
#define TM_RESTARTS_MAX 3

typedef struct tm_restarts {
    int in_row;      /* each within a minute of the last */
    int64_t last_ms; /* monotonic, the last one */
} tm_restarts;

/* Counts a restart at NOW (monotonic ms): one more in the row when the
 * last was less than a minute before, else the first of a new row. How
 * many in the row, this one included. */
int tm_restarts_count(tm_restarts *r, int64_t now);

#endif
