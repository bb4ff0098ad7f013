/* Which manifests a commit merges (see manifest.h, ice_manifests_to_merge),
 * and which dead-letter index segments an expiry merges (ice_expire_meta):
 * size tiers of ICE_MERGE_MIN_COUNT, so that merging costs a bounded
 * number of entries per commit (amortized: one rewrite per entry and
 * tier) instead of every live one. */
#include <stdlib.h>

#include "manifest.h"

/* floor(log8(e)), 0 for e < 8. */
static int tier(int64_t e) {
    int t = 0;
    while (e >= ICE_MERGE_MIN_COUNT) {
        e /= ICE_MERGE_MIN_COUNT;
        t++;
    }
    return t;
}

static int mergeable(int64_t e, const unsigned char *merged, size_t i,
                     int64_t frozen, int upto) {
    return !merged[i] && e >= 0 && e < frozen && tier(e) <= upto;
}

size_t ice_tiers_to_merge(const int64_t *size, size_t n, int64_t forming,
                          int64_t frozen, unsigned char *merge) {
    size_t marked = 0;
    for (size_t i = 0; i < n; i++)
        merge[i] = 0;
    /* From the forming one's tier: the smaller tiers may be empty. */
    for (int t = tier(forming); forming < frozen; t++) {
        size_t peers = 0;
        for (size_t i = 0; i < n; i++)
            peers += (size_t)mergeable(size[i], merge, i, frozen, t);
        if (peers + 1 < ICE_MERGE_MIN_COUNT)
            break; /* this tier, the forming one included, is not full */
        for (size_t i = 0; i < n; i++)
            if (mergeable(size[i], merge, i, frozen, t)) {
                merge[i] = 1;
                marked++;
                forming += size[i];
            }
    }
    return marked;
}

size_t ice_manifests_to_merge(const ice_mfile *mf, size_t n,
                              int64_t new_entries, unsigned char *merge) {
    int64_t *entries = malloc((n ? n : 1) * sizeof *entries);
    if (!entries) {
        for (size_t i = 0; i < n; i++)
            merge[i] = 0; /* no merge this time: still a correct list */
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        entries[i] = (int64_t)mf[i].added_files + (int64_t)mf[i].existing_files;
    size_t marked =
        ice_tiers_to_merge(entries, n, new_entries, ICE_MANIFEST_FROZEN, merge);
    free(entries);
    return marked;
}
