/* Shared between commit_loop.c (intake) and commit_batch.c (outcomes). */
#ifndef TM_COMMIT_INTERNAL_H
#define TM_COMMIT_INTERNAL_H

#include "runtime/connector_state.h"

/* Commits the open batch, retrying RETRY until it is settled, abandoned by
 * a revoke, or past the stop's deadline (commit_loop.h) once a stop or a
 * pause is asked. Then the batch is closed, whatever happened to it. */
void tm_commit_batch(tm_connector *c);

/* What the commit loop was asked, for the log: "stopping", "pausing"
 * (`tidemark pause`) or "pausing, taken back since" (resumed before the
 * loop settled its batch). */
const char *tm_stop_kind(const tm_connector *c);

/* Closes the open batch without committing it: its partitions go back to
 * their committed offsets and are re-read (needs_seek); when the builder
 * failed (its ranges unknown), every partition read past its commit. */
void tm_commit_drop_batch(tm_connector *c, const char *why);

/* Carries P's range of the open batch (opened if need be) to END without
 * a record (offsets without one: transaction markers); never backwards. */
void tm_commit_extend(tm_connector *c, tm_part *p, int64_t end);

/* Pauses (1) or resumes (0) every assigned partition that is neither
 * fenced nor held by a stop (commit/part_stop.h). */
void tm_commit_pause_all(tm_connector *c, int pause);

/* Serves the consumer for ms milliseconds without taking records (the
 * group must not evict us while a commit waits): anything delivered is
 * dropped and its partition marked for a seek. Returns early when a stop
 * is asked meanwhile (the batch in flight tries once more within the
 * grace), and at the stop's deadline. */
void tm_commit_serve(tm_connector *c, int64_t ms);

#endif
