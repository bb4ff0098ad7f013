/* Which manifests a commit merges (see manifest.h, ice_manifests_to_merge):
 * size tiers of ICE_MERGE_MIN_COUNT, so that merging costs a bounded
 * number of entries per commit (amortized: one rewrite per entry and
 * tier) instead of every live file. */
#include "manifest.h"

static int64_t entries(const ice_mfile *m) {
    return (int64_t)m->added_files + (int64_t)m->existing_files;
}

/* floor(log8(e)), 0 for e < 8. */
static int tier(int64_t e) {
    int t = 0;
    while (e >= ICE_MERGE_MIN_COUNT) {
        e /= ICE_MERGE_MIN_COUNT;
        t++;
    }
    return t;
}

static int mergeable(const ice_mfile *m, const unsigned char *merged, size_t i,
                     int upto) {
    int64_t e = entries(m);
    return !merged[i] && e >= 0 && e < ICE_MANIFEST_FROZEN && tier(e) <= upto;
}

size_t ice_manifests_to_merge(const ice_mfile *mf, size_t n,
                              int64_t new_entries, unsigned char *merge) {
    size_t marked = 0;
    int64_t forming = new_entries; /* the commit's own manifest */
    for (size_t i = 0; i < n; i++)
        merge[i] = 0;
    for (int t = 0; forming < ICE_MANIFEST_FROZEN; t++) {
        size_t peers = 0;
        for (size_t i = 0; i < n; i++)
            peers += (size_t)mergeable(&mf[i], merge, i, t);
        if (peers + 1 < ICE_MERGE_MIN_COUNT)
            break; /* this tier, the forming manifest included, is not full */
        for (size_t i = 0; i < n; i++)
            if (mergeable(&mf[i], merge, i, t)) {
                merge[i] = 1;
                marked++;
                forming += entries(&mf[i]);
            }
    }
    return marked;
}
