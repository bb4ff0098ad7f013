/* Business keys held in memory, the part no sink owns (keyset.c): a key's
 * digests, an open-addressing hash set of them, a batch's staged keys in
 * the order staged, and the packed format of a batch row's keys. Used by
 * the SQLite sink (plugins/sqlite/keyset.c) and the PostgreSQL sink
 * (plugins/postgres/keyset.c); each keeps its own tables, locks and
 * loading. Linked into each plugin as a static library with hidden
 * symbols: nothing here is exported. Allocation failures are TK_NOMEM,
 * never an abort. */
#ifndef TM_KEYSET_KEYSET_H
#define TM_KEYSET_KEYSET_H

#include <stddef.h>
#include <stdint.h>

#define TK_OK      0
#define TK_NOMEM   (-1)
#define TK_CORRUPT (-2) /* a packed blob that is no list of keys */

/* One key: the identity's 128-bit digest (a's low bit forced to 1: 0
 * marks an empty slot) and the payload hash's 64-bit digest. */
typedef struct tk_key {
    uint64_t a, b;
    uint64_t ph;
} tk_key;

/* Bytes of one key in a batch row (a, b, ph: 8 bytes each, little-endian). */
#define TK_KEY_BYTES 24

/* The set: linear probing, at most 3/4 full, doubled as it grows. With
 * GENS set (before its first key), each slot also holds the generation of
 * its key (gen[slot]: put_gen when it was put), so that the keys of a
 * span of generations can be dropped (tk_tab_drop_gens): 4 bytes a slot. */
typedef struct tk_tab {
    tk_key *slot;
    size_t mask, n; /* capacity - 1 (a power of two), entries */
    uint32_t *gen;  /* GENS: beside slot */
    uint32_t put_gen;
    int gens;
} tk_tab;

/* A staged key's rec once it is given up (its row refused): kept in the
 * stage, left out of the packed row. */
#define TK_DROPPED (-2)

/* Keys staged by a batch, kept in insertion order (its row's blob). */
typedef struct tk_stage {
    tk_key *key;  /* in the order staged */
    int32_t *rec; /* the record index that staged each (-1: none) */
    size_t *pos;  /* where its lookup in the set ended (SIZE_MAX: none) */
    int32_t *idx; /* open addressing into key; -1 empty */
    size_t n, cap, mask;
} tk_stage;

/* SipHash-2-4 digests of a record's key under the connector's 16-byte
 * SEED: identity (128 bits) and payload hash (64 bits, tagged: a NULL
 * HASH and "" differ). */
tk_key tk_digest(const uint8_t seed[16], const char *identity,
                 const char *hash);

/* The check value stored beside a connector's seed (seed_check): a 64-bit
 * digest of a fixed label under it, so that a seed changed under its batch
 * rows is told from the one their digests were made with (nothing of the
 * database in it: a copy keeps its keys). */
int64_t tk_seed_check(const uint8_t seed[16]);

/* The home slot of a key whose b is B in a table of MASK + 1 slots. */
static inline size_t tk_slot_of(uint64_t b, size_t mask) {
    return (size_t)(b ^ (b >> 29)) & mask;
}

/* Room for WANT keys (at most 3/4 full): TK_OK or TK_NOMEM (the table as
 * it was). */
int tk_tab_grow(tk_tab *t, size_t want);
/* The slot holding key (A, B), or NULL and in *EMPTY the first empty slot
 * of its probe (where it would be inserted; SIZE_MAX for an empty table). */
tk_key *tk_tab_probe(const tk_tab *t, uint64_t a, uint64_t b, size_t *empty);
tk_key *tk_tab_find(const tk_tab *t, uint64_t a, uint64_t b);
/* Reads the home slots (and two after each) of the keys DIG[j, j +
 * TK_TOUCH_CHUNK) that are set (a != 0), N the number of keys, in a tight
 * loop: the set's slots are spread over all of its memory, and the misses
 * overlap there, where spread over a sink's work between two lookups each
 * costs its full latency (a prefetch alone did not do it: it may be
 * dropped on a TLB miss). The answer is only to be kept, so that the reads
 * are not left out. */
#define TK_TOUCH_CHUNK 256
uint64_t tk_touch(const tk_tab *t, const tk_key *dig, size_t j, size_t n);
/* Adds or replaces KEY, probing from slot FROM (SIZE_MAX: its home; else a
 * slot on its probe path before which no slot was emptied since the probe
 * that gave it). TK_OK or TK_NOMEM. */
int tk_tab_put_from(tk_tab *t, tk_key key, size_t from);
int tk_tab_put(tk_tab *t, tk_key key);
/* Removes key (A, B) if held (backward-shift deletion). */
void tk_tab_del(tk_tab *t, uint64_t a, uint64_t b);
/* Empties T (GENS kept). */
void tk_tab_clear(tk_tab *t);
/* GENS: removes every key whose generation G is in (AFTER, UPTO], counted
 * modulo 2^32 from AFTER (so a span below 2^31 generations); the number
 * removed. */
size_t tk_tab_drop_gens(tk_tab *t, uint32_t after, uint32_t upto);

void tk_stage_reset(tk_stage *st);
void tk_stage_free(tk_stage *st);
/* The index of key (A, B) in the stage, or -1. */
int32_t tk_stage_find(const tk_stage *st, uint64_t a, uint64_t b);
/* Appends KEY with its record REC and probe end POS. TK_OK or TK_NOMEM. */
int tk_stage_add(tk_stage *st, tk_key key, int32_t rec, size_t pos);

/* The stage's keys packed as a batch row's blob (TK_KEY_BYTES a key, those
 * with rec TK_DROPPED left out; malloc'd, *LEN its size); NULL when out of
 * memory. */
uint8_t *tk_pack(const tk_stage *st, size_t *len);
/* The keys of a batch row's blob (LEN bytes) put into SET, or when SET is
 * NULL staged into DEL (removals). TK_OK, TK_NOMEM or TK_CORRUPT (a length
 * that is no multiple of TK_KEY_BYTES, or a key with a == 0). */
int tk_unpack(const void *blob, size_t len, tk_tab *set, tk_stage *del);

#endif
