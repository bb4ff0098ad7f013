/* What the connector core's scenarios share across their files
 * (hostcore_e2e.c, hostcore_slow_dlq.c): one program, hostcore_e2e. */
#ifndef TM_E2E_HOSTCORE_H
#define TM_E2E_HOSTCORE_H

#include <stddef.h>
#include <stdint.h>

/* The mapping of {"id": N, "name": S} records, as a config's member. */
extern const char *const JSON_MAPPING;

/* The time of day of the first log line containing NEEDLE (its ts=
 * field, in ms since midnight UTC), -1 when none. */
int64_t log_line_ms(const char *log, const char *needle);

/* From A to B, two times of day, B not before A by a day or more. */
int64_t day_ms_between(int64_t a, int64_t b);

/* One dead letter read from the topic: its source offset
 * (__connect.errors.offset) and batch (tidemark.batch_id). */
typedef struct dl_seen {
    int64_t src_offset;
    char batch[64];
} dl_seen;

/* Every message of partition 0 of TOPIC, in order: *n of them (the caller
 * frees); hostcore_slow_dlq.c. */
dl_seen *read_dead_letters(const char *topic, size_t *n);

/* Partition 0 of TOPIC gets GOOD records {"id": N}, then DL records of
 * DL_BYTES each that are not JSON (dead letters), then GOOD more;
 * hostcore_slow_dlq.c. */
void slow_dl_records(const char *topic, int good, int dl, size_t dl_bytes);

/* hostcore_dlq_wait.c: the consumer polled in time and the status file
 * fresh while a batch waits for the dead-letter topic and its commit. */
void scenario_status_fresh_during_slow_dlq(void);
void scenario_maxpoll_dlq_then_commit(void);
void scenario_given_up_dlq_not_left_queued(void);

/* hostcore_dlq_fatal.c: the dead-letter producer's fatal error. */
void scenario_dlq_fatal_remade(void);
void scenario_dlq_fatal_failed(void);

/* hostcore_slow_dlq.c: a stop or a pause while the dead-letter topic is
 * slow. */
void scenario_stop_during_slow_dlq(void);
void scenario_stop_during_dlq_queue_full(void);
void scenario_pause_during_slow_dlq(void);
void scenario_slow_dlq_commits(void);
void scenario_slow_dlq_commits_short(void);

#endif
