/* The committing child that crash cases kill (random_kills, power_loss),
 * the page it reports on, and the checks of the state after a kill. */
#ifndef TM_SINKCHECK_CRASH_CHILD_H
#define TM_SINKCHECK_CRASH_CHILD_H

#include <stdatomic.h>

#include "kit.h"

/* On a MAP_SHARED page: what the child was doing when the kill landed is
 * read after its death. */
typedef struct kill_page {
    atomic_int phase;
    atomic_int last_point; /* in this commit; -1: none yet */
    atomic_int point_seen[4];
    atomic_int ready;
    /* Per partition: the end of the last commit the sink acknowledged (OK)
     * and of the one in flight (== acked when none is). Set from the
     * child's claim before ready; the parent bounds the marker by them. */
    atomic_llong acked[KIT_NPARTS];
    atomic_llong in_flight[KIT_NPARTS];
    atomic_int commits_acked;
    atomic_llong claimed_epoch[KIT_NPARTS]; /* what the child's claim said */
    char child_error[512];
} kill_page;

/* The child: a fresh instance, a fresh claim, then commits until killed
 * (30 s at most). Never returns. */
void kit_kill_child(const kit_fixture *fx, kill_page *pg, uint64_t seed)
    __attribute__((noreturn));

/* Every part holds exactly the rows [0, next_offset) and the marker says
 * so; next_offset == want[p] (want NULL: any) and >= min[p] (min NULL: any).
 * -1 with why. */
int kit_check_dense(const kit_state *st, const int64_t *want,
                    const int64_t *min, char *why, size_t size);
/* Every part's marker in [acked, in flight] of the page (LAST when the
 * child never got ready), and at least the epoch its claim returned (an
 * acknowledged claim survives too). -1 with why. */
int kit_check_acked(const kit_state *st, kill_page *pg, const int64_t *last,
                    char *why, size_t size);

#endif
