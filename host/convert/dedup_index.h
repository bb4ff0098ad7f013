/* The in-batch dedup index: business identity -> the first record that
 * carried it (its identity hash and position). Open addressing with
 * linear probing, at most half full, so a batch of any size stays linear.
 * The strings are the caller's (the batch arena) and must outlive the
 * entries, that is, until the next clear. */
#ifndef TM_DEDUP_INDEX_H
#define TM_DEDUP_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct tm_dedup_entry {
    uint64_t h;           /* hash of identity (for probing) */
    const char *identity; /* NULL: empty slot */
    const char *hash;     /* identity_hash of the first record */
    uint32_t range;
    int64_t offset;
} tm_dedup_entry;

typedef struct tm_dedup_index {
    tm_dedup_entry *slots;
    size_t cap; /* a power of two, or 0 */
    size_t n;
} tm_dedup_index;

void tm_dedup_init(tm_dedup_index *x);
void tm_dedup_clear(tm_dedup_index *x); /* empties it, keeps the slots */
void tm_dedup_free(tm_dedup_index *x);

/* Looks identity up. Present: 1 and *found is the first record's entry.
 * Absent: inserts (identity, hash, range, offset) and returns 0. -1 on
 * OOM (nothing inserted). */
int tm_dedup_find_or_add(tm_dedup_index *x, const char *identity,
                         const char *hash, uint32_t range, int64_t offset,
                         const tm_dedup_entry **found);

/* The last-wins use (change events): sets identity's entry to (range,
 * offset), the offset field holding whatever position the caller keeps.
 * 1 when it was present (*previous: its former offset), 0 when added, -1
 * on OOM (nothing changed). */
int tm_dedup_replace(tm_dedup_index *x, const char *identity, uint32_t range,
                     int64_t offset, int64_t *previous);

#endif
