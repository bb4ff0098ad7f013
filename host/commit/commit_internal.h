/* Shared between commit_loop.c (intake) and commit_batch.c (outcomes). */
#ifndef TM_COMMIT_INTERNAL_H
#define TM_COMMIT_INTERNAL_H

#include "runtime/connector_state.h"

/* Commits the open batch, retrying RETRY until it is settled, abandoned by
 * a revoke, or past give_up_ms (monotonic; 0: never). Then the batch is
 * closed, whatever happened to it. */
void tm_commit_batch(tm_connector *c, int64_t give_up_ms);

/* Closes the open batch without committing it: its partitions go back to
 * their committed offsets and are re-read (needs_seek). */
void tm_commit_drop_batch(tm_connector *c, const char *why);

/* Pauses (1) or resumes (0) every assigned partition that is not fenced. */
void tm_commit_pause_all(tm_connector *c, int pause);

/* Serves the consumer for ms milliseconds without taking records (the
 * group must not evict us while a commit waits): anything delivered is
 * dropped and its partition marked for a seek. */
void tm_commit_serve(tm_connector *c, int64_t ms);

#endif
