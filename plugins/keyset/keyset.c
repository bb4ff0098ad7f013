/* Business keys held in memory, the sink-neutral part (keyset.h): digests,
 * the set (linear probing, backward-shift deletion), staged keys and the
 * packed batch row. Described in docs/sinks/sqlite.md, "Business keys
 * held in memory"; the PostgreSQL sink stores the same rows
 * (docs/sinks/postgres.md). */
#include <stdlib.h>
#include <string.h>

#include "keyset.h"
#include "siphash.h"

static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

tk_key tk_digest(const uint8_t seed[16], const char *identity,
                 const char *hash) {
    uint64_t id[2], ph[2];
    tk_siphash(seed, -1, identity, strlen(identity), 1, id);
    if (hash)
        tk_siphash(seed, 1, hash, strlen(hash), 0, ph);
    else
        tk_siphash(seed, 0, NULL, 0, 0, ph);
    return (tk_key){id[0] | 1, id[1], ph[0]};
}

int64_t tk_seed_check(const uint8_t seed[16]) {
    static const char LABEL[] = "tidemark_keysets seed_check";
    uint64_t out[2];
    tk_siphash(seed, 2, LABEL, sizeof LABEL - 1, 0, out);
    return (int64_t)out[0];
}

/* ---- the set ------------------------------------------------------------ */

int tk_tab_grow(tk_tab *t, size_t want) {
    size_t cap = t->mask ? t->mask + 1 : 1024;
    while (want > cap / 4 * 3) {
        if (cap > SIZE_MAX / 2 / sizeof *t->slot)
            return TK_NOMEM; /* a damaged count: cap would wrap to 0 */
        cap *= 2;
    }
    if (t->slot && cap == t->mask + 1)
        return TK_OK;
    tk_key *n = calloc(cap, sizeof *n);
    uint32_t *g = t->gens ? calloc(cap, sizeof *g) : NULL;
    if (!n || (t->gens && !g)) {
        free(n);
        free(g);
        return TK_NOMEM;
    }
    size_t mask = cap - 1;
    for (size_t i = 0; t->slot && i <= t->mask; i++) {
        if (!t->slot[i].a)
            continue;
        size_t j = tk_slot_of(t->slot[i].b, mask);
        while (n[j].a)
            j = (j + 1) & mask;
        n[j] = t->slot[i];
        if (g)
            g[j] = t->gen[i];
    }
    free(t->slot);
    free(t->gen);
    t->slot = n;
    t->gen = g;
    t->mask = mask;
    return TK_OK;
}

tk_key *tk_tab_probe(const tk_tab *t, uint64_t a, uint64_t b, size_t *empty) {
    *empty = SIZE_MAX;
    if (!t->slot)
        return NULL;
    for (size_t j = tk_slot_of(b, t->mask);; j = (j + 1) & t->mask) {
        tk_key *e = &t->slot[j];
        if (!e->a) {
            *empty = j;
            return NULL;
        }
        if (e->a == a && e->b == b)
            return e;
    }
}

tk_key *tk_tab_find(const tk_tab *t, uint64_t a, uint64_t b) {
    size_t empty;
    return tk_tab_probe(t, a, b, &empty);
}

int tk_tab_put_from(tk_tab *t, tk_key key, size_t from) {
    if ((!t->slot || t->n + 1 > (t->mask + 1) / 4 * 3) &&
        tk_tab_grow(t, t->n + 1) != TK_OK)
        return TK_NOMEM;
    size_t j = from <= t->mask ? from : tk_slot_of(key.b, t->mask);
    while (t->slot[j].a && !(t->slot[j].a == key.a && t->slot[j].b == key.b))
        j = (j + 1) & t->mask;
    if (!t->slot[j].a)
        t->n++;
    t->slot[j] = key;
    if (t->gen)
        t->gen[j] = t->put_gen;
    return TK_OK;
}

int tk_tab_put(tk_tab *t, tk_key key) {
    return tk_tab_put_from(t, key, SIZE_MAX);
}

/* Removes the key in slot I. */
static void del_at(tk_tab *t, size_t i) {
    /* shift back the entries of the run that follows into the hole */
    for (size_t j = (i + 1) & t->mask; t->slot[j].a; j = (j + 1) & t->mask) {
        size_t home = tk_slot_of(t->slot[j].b, t->mask);
        /* j's entry may move to i when its home is not in (i, j] */
        if (((j - home) & t->mask) >= ((j - i) & t->mask)) {
            t->slot[i] = t->slot[j];
            if (t->gen)
                t->gen[i] = t->gen[j];
            i = j;
        }
    }
    t->slot[i] = (tk_key){0, 0, 0};
    t->n--;
}

void tk_tab_del(tk_tab *t, uint64_t a, uint64_t b) {
    tk_key *e = tk_tab_find(t, a, b);
    if (e)
        del_at(t, (size_t)(e - t->slot));
}

size_t tk_tab_drop_gens(tk_tab *t, uint32_t after, uint32_t upto) {
    size_t dropped = 0;
    uint32_t span = upto - after;
    /* A removal shifts entries of the run after I back, into I among
     * them: I is looked at again. Entries move only backwards along their
     * run, so none not yet looked at lands before I (one that wraps past
     * the end was looked at, and is again). */
    /* the generations first: 4 bytes a slot read in order, the slots
     * only for those in the span (an empty slot's is of no key) */
    for (size_t i = 0; t->gen && i <= t->mask;) {
        if (t->gen[i] - after - 1 < span && t->slot[i].a) {
            del_at(t, i);
            dropped++;
        } else {
            i++;
        }
    }
    return dropped;
}

uint64_t tk_touch(const tk_tab *t, const tk_key *dig, size_t j, size_t n) {
    uint64_t sum = 0;
    size_t end = j + TK_TOUCH_CHUNK < n ? j + TK_TOUCH_CHUNK : n;
    for (; t->slot && j < end; j++) {
        if (!dig[j].a)
            continue;
        /* the home slot and two after it: a probe's usual run, which
         * crosses into the next cache line (24-byte slots) */
        size_t home = tk_slot_of(dig[j].b, t->mask);
        sum += t->slot[home].a + t->slot[(home + 2) & t->mask].a;
    }
    return sum;
}

void tk_tab_clear(tk_tab *t) {
    free(t->slot);
    free(t->gen);
    *t = (tk_tab){.gens = t->gens};
}

/* ---- staged keys ----------------------------------------------------------
 */

void tk_stage_reset(tk_stage *st) {
    st->n = 0;
    if (st->idx)
        memset(st->idx, 0xff, (st->mask + 1) * sizeof *st->idx);
}

void tk_stage_free(tk_stage *st) {
    free(st->key);
    free(st->rec);
    free(st->pos);
    free(st->idx);
    *st = (tk_stage){0};
}

int32_t tk_stage_find(const tk_stage *st, uint64_t a, uint64_t b) {
    if (!st->n)
        return -1;
    for (size_t j = tk_slot_of(b, st->mask);; j = (j + 1) & st->mask) {
        int32_t i = st->idx[j];
        if (i < 0 || (st->key[i].a == a && st->key[i].b == b))
            return i;
    }
}

int tk_stage_add(tk_stage *st, tk_key key, int32_t rec, size_t pos) {
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 256;
        tk_key *k = realloc(st->key, cap * sizeof *k);
        if (!k)
            return TK_NOMEM;
        st->key = k;
        int32_t *r = realloc(st->rec, cap * sizeof *r);
        if (!r)
            return TK_NOMEM;
        st->rec = r;
        size_t *p = realloc(st->pos, cap * sizeof *p);
        if (!p)
            return TK_NOMEM;
        st->pos = p;
        st->cap = cap;
    }
    if (!st->idx || st->n + 1 > (st->mask + 1) / 2) {
        size_t cap = st->idx ? (st->mask + 1) * 2 : 512;
        int32_t *idx = malloc(cap * sizeof *idx);
        if (!idx)
            return TK_NOMEM;
        memset(idx, 0xff, cap * sizeof *idx);
        free(st->idx);
        st->idx = idx;
        st->mask = cap - 1;
        for (size_t i = 0; i < st->n; i++) {
            size_t j = tk_slot_of(st->key[i].b, st->mask);
            while (idx[j] >= 0)
                j = (j + 1) & st->mask;
            idx[j] = (int32_t)i;
        }
    }
    size_t j = tk_slot_of(key.b, st->mask);
    while (st->idx[j] >= 0)
        j = (j + 1) & st->mask;
    st->idx[j] = (int32_t)st->n;
    st->key[st->n] = key;
    st->rec[st->n] = rec;
    st->pos[st->n] = pos;
    st->n++;
    return TK_OK;
}

/* ---- the packed batch row -------------------------------------------------
 */

uint8_t *tk_pack(const tk_stage *st, size_t *len) {
    uint8_t *blob = malloc(st->n ? st->n * TK_KEY_BYTES : 1);
    if (!blob)
        return NULL;
    uint8_t *p = blob;
    for (size_t i = 0; i < st->n; i++) {
        if (st->rec[i] == TK_DROPPED)
            continue;
        wr64(p, st->key[i].a);
        wr64(p + 8, st->key[i].b);
        wr64(p + 16, st->key[i].ph);
        p += TK_KEY_BYTES;
    }
    *len = (size_t)(p - blob);
    return blob;
}

int tk_unpack(const void *blob, size_t len, tk_tab *set, tk_stage *del) {
    const uint8_t *p = blob;
    int rc = TK_OK;
    if (len % TK_KEY_BYTES != 0)
        return TK_CORRUPT;
    for (size_t off = 0; rc == TK_OK && off < len; off += TK_KEY_BYTES) {
        tk_key key = {rd64(p + off), rd64(p + off + 8), rd64(p + off + 16)};
        if (!key.a)
            return TK_CORRUPT;
        rc = set ? tk_tab_put(set, key) : tk_stage_add(del, key, -1, SIZE_MAX);
    }
    return rc;
}
