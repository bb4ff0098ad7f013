#include "convert/dedup_index.h"

#include <stdlib.h>
#include <string.h>

void tm_dedup_init(tm_dedup_index *x) {
    x->slots = NULL;
    x->cap = 0;
    x->n = 0;
}

void tm_dedup_clear(tm_dedup_index *x) {
    if (x->slots)
        memset(x->slots, 0, x->cap * sizeof *x->slots);
    x->n = 0;
}

void tm_dedup_free(tm_dedup_index *x) {
    free(x->slots);
    tm_dedup_init(x);
}

/* FNV-1a, 64 bits: identities are short texts; no adversary picks them
 * to collide, and a collision costs only a longer probe. */
static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3u;
    return h;
}

static tm_dedup_entry *probe(tm_dedup_entry *slots, size_t cap, uint64_t h,
                             const char *identity) {
    size_t i = (size_t)h & (cap - 1);
    while (slots[i].identity &&
           (slots[i].h != h || strcmp(slots[i].identity, identity) != 0))
        i = (i + 1) & (cap - 1);
    return &slots[i];
}

static int grow(tm_dedup_index *x) {
    size_t cap = x->cap ? x->cap * 2 : 64;
    if (cap > SIZE_MAX / sizeof(tm_dedup_entry))
        return -1;
    tm_dedup_entry *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < x->cap; i++)
        if (x->slots[i].identity)
            *probe(slots, cap, x->slots[i].h, x->slots[i].identity) =
                x->slots[i];
    free(x->slots);
    x->slots = slots;
    x->cap = cap;
    return 0;
}

int tm_dedup_find_or_add(tm_dedup_index *x, const char *identity,
                         const char *hash, uint32_t range, int64_t offset,
                         const tm_dedup_entry **found) {
    uint64_t h = fnv1a(identity);
    if (x->cap) {
        tm_dedup_entry *e = probe(x->slots, x->cap, h, identity);
        if (e->identity) {
            *found = e;
            return 1;
        }
    }
    if ((x->n + 1) * 2 > x->cap && grow(x) != 0)
        return -1;
    tm_dedup_entry *e = probe(x->slots, x->cap, h, identity);
    e->h = h;
    e->identity = identity;
    e->hash = hash;
    e->range = range;
    e->offset = offset;
    x->n++;
    return 0;
}

int tm_dedup_replace(tm_dedup_index *x, const char *identity, uint32_t range,
                     int64_t offset, int64_t *previous) {
    uint64_t h = fnv1a(identity);
    if (x->cap) {
        tm_dedup_entry *e = probe(x->slots, x->cap, h, identity);
        if (e->identity) {
            *previous = e->offset;
            e->range = range;
            e->offset = offset;
            return 1;
        }
    }
    const tm_dedup_entry *unused;
    return tm_dedup_find_or_add(x, identity, NULL, range, offset, &unused);
}
