/* Counting the times a failed Kafka client was made again (the consumer's
 * fatal error, the dead-letter producer's): made again while it recovers,
 * FAILED once something keeps killing it. */
#ifndef TM_RESTARTS_H
#define TM_RESTARTS_H

#include <stdint.h>

struct tm_connector;

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

/* Counts a restart of WHAT ("the Kafka consumer", "the dead-letter
 * producer") now; one too many in a row, C goes FAILED saying so, with
 * the last fatal error LAST. How many in the row, or -1 when FAILED. */
int tm_restarts_admit(struct tm_connector *c, tm_restarts *r, const char *what,
                      const char *last);

#endif
