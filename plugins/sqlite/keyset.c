/* Business keys held in memory (docs/sinks/sqlite.md, "Business keys held
 * in memory"): per connector an open-addressing hash set of 24-byte
 * digests (identity 128 bits, payload hash 64 bits), filled from
 * tidemark_key_batches (one row of packed digests per batch that applied
 * new keys) and from the connector's tidemark_keys rows of older builds.
 * Inside each commit's BEGIN IMMEDIATE the set is brought up to the
 * connector's newest batch row and tidemark_keysets row (newer generations
 * loaded, a removal by another process reloads); the batch's own changes are
 * staged and reach the set only after COMMIT. The digests, the set, the
 * staged keys and the packed row are the shared part (plugins/keyset,
 * keyset.h); the tables, statements and locking here are SQLite's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite_sink.h"

/* The shared part's answers (keyset.h) as SQLite's codes. */
static int tk_rc(int rc) {
    return rc == TK_OK      ? SQLITE_OK
           : rc == TK_NOMEM ? SQLITE_NOMEM
                            : SQLITE_CORRUPT;
}

static sq_key digest(const sq_keyset *k, const char *identity,
                     const char *hash) {
    return tk_digest(k->seed, identity, hash);
}

/* ---- loading ----------------------------------------------------------- */

/* The keys of one batch row's blob into the set (add) or the removals. */
static int blob_keys(sq_keyset *k, const void *blob, int len, int into_del) {
    if (len < 0)
        return SQLITE_CORRUPT;
    return tk_rc(
        tk_unpack(blob, (size_t)len, into_del ? NULL : &k->set, &k->del));
}

/* Rows of tidemark_key_batches past generation AFTER into the set. */
static int load_batches(sq_sink *s, int64_t after) {
    sqlite3_stmt *st = s->stmt[SQ_KB_LOAD];
    int rc = sqlite3_bind_text(st, 1, s->config->connector, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 2, after);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
        rc = blob_keys(&s->keys, sqlite3_column_blob(st, 0),
                       sqlite3_column_bytes(st, 0), 0);
    sq_reuse(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* The connector's batch rows into *rows, the keys they say they hold
 * into *keys. */
static int batch_keys(sq_sink *s, int64_t *rows, int64_t *keys) {
    sqlite3_stmt *st = s->stmt[SQ_KB_COUNT];
    int rc = sqlite3_bind_text(st, 1, s->config->connector, -1, SQLITE_STATIC);
    *rows = *keys = 0;
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        *rows = sqlite3_column_int64(st, 0);
        *keys = sqlite3_column_int64(st, 1);
        rc = SQLITE_OK;
    }
    sq_reuse(st);
    return rc;
}

/* Sizes the empty set for the keys of the connector's batch rows at
 * once: growing by doubling while loading would hold the old table and
 * the new one together (1.5 times the end size) at each step. */
static int presize(sq_sink *s) {
    int64_t rows, n;
    int rc = batch_keys(s, &rows, &n);
    return rc == SQLITE_OK && n > 0
               ? tk_rc(tk_tab_grow(&s->keys.set, (size_t)n))
               : rc;
}

/* The connector's rows of tidemark_keys (older builds, or "rows"). */
static int load_legacy(sq_sink *s) {
    sqlite3_stmt *st = s->stmt[SQ_KEY_LOAD];
    int rc = sqlite3_bind_text(st, 1, s->config->connector, -1, SQLITE_STATIC);
    s->keys.legacy = 0;
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(st, 0);
        const char *h = (const char *)sqlite3_column_text(st, 1);
        rc = SQLITE_OK;
        if (!id) /* NOT NULL in the table: a table made otherwise */
            continue;
        rc = tk_rc(tk_tab_put(&s->keys.set, digest(&s->keys, id, h)));
        s->keys.legacy++;
    }
    sq_reuse(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* 1 when the connector has rows in tidemark_keys, 0 when not, -1 when
 * that could not be read. */
static int any_legacy(sq_sink *s) {
    sqlite3_stmt *st = s->stmt[SQ_KEY_ANY];
    int rc = sqlite3_bind_text(st, 1, s->config->connector, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    int any = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sq_reuse(st);
    return any;
}

/* The check value stored beside a seed (seed_check; the shared part's,
 * keyset.h, so that both sinks store the same). */
int64_t sq_keys_seed_check(const uint8_t seed[16]) {
    return tk_seed_check(seed);
}

/* The connector's keys refused (TM_FATAL): WHAT is wrong with its rows,
 * TABLES the rows to delete to start its keys afresh. SQLITE_CORRUPT. */
static int refuse(sq_sink *s, const char *what, const char *tables) {
    sq_keyset *k = &s->keys;
    snprintf(k->why_buf, sizeof k->why_buf,
             "connector \"%s\": %s, so a resend would be stored again; "
             "restore its row of " SQ_KEYSETS " from a backup of this file, "
             "or delete its rows of %s to start its keys afresh",
             s->config->connector, what, tables);
    k->why = k->why_buf;
    k->why_retry = 0;
    return SQLITE_CORRUPT;
}

/* The seed of a row read (column 0) checked against its seed_check
 * (column 3): SQLITE_OK, or refused. */
static int check_seed(sq_sink *s, sqlite3_stmt *st, const uint8_t seed[16]) {
    static const char TABLES[] = SQ_KEYSETS " and " SQ_KEY_BATCHES;
    if (sqlite3_column_type(st, 3) == SQLITE_NULL)
        return refuse(s,
                      "its row of " SQ_KEYSETS " has no seed_check (written "
                      "by an older build, or edited): its seed may not be "
                      "the one of the " SQ_KEY_BATCHES " digests",
                      TABLES);
    if (sqlite3_column_int64(st, 3) != sq_keys_seed_check(seed))
        return refuse(s,
                      "the seed in its row of " SQ_KEYSETS " does not match "
                      "its seed_check (changed, or restored from elsewhere): "
                      "the " SQ_KEY_BATCHES " digests cannot be read with it",
                      TABLES);
    return SQLITE_OK;
}

/* Reads the connector's tidemark_keysets row: SQLITE_OK with *found. */
static int read_row(sq_sink *s, int *found, uint8_t seed[16], int64_t *gen,
                    int64_t *pruned) {
    sqlite3_stmt *st = s->stmt[SQ_KS_GET];
    int rc = sqlite3_bind_text(st, 1, s->config->connector, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    *found = rc == SQLITE_ROW;
    if (rc == SQLITE_ROW) {
        if (sqlite3_column_bytes(st, 0) != 16) {
            rc = SQLITE_CORRUPT;
        } else {
            memcpy(seed, sqlite3_column_blob(st, 0), 16);
            *gen = sqlite3_column_int64(st, 1);
            *pruned = sqlite3_column_int64(st, 2);
            rc = check_seed(s, st, seed);
        }
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sq_reuse(st);
    return rc;
}

static int write_row(sq_sink *s, int64_t pruned) {
    sqlite3_stmt *st = s->stmt[SQ_KS_PUT];
    int rc = sqlite3_bind_text(st, 1, s->config->connector, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_blob(st, 2, s->keys.seed, 16, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 3, pruned);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 4, sq_keys_seed_check(s->keys.seed));
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sq_reuse(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* 1 when the set cannot follow the connector's row (SEED, newest
 * generation GEN, removals counter PRUNED) by loading newer batches: not
 * loaded, keys removed by another process, another seed, rows gone. */
static int stale(const sq_keyset *k, const uint8_t seed[16], int64_t gen,
                 int64_t pruned) {
    return !k->loaded || pruned != k->pruned ||
           memcmp(seed, k->seed, 16) != 0 || gen < k->gen;
}

/* The whole set from the connector's rows (its keysets row read: SEED,
 * GEN, PRUNED), in a transaction of the caller's. */
static int full_load(sq_sink *s, const uint8_t seed[16], int64_t gen,
                     int64_t pruned) {
    sq_keyset *k = &s->keys;
    int rc;
    tk_tab_clear(&k->set);
    k->loaded = 0;
    memcpy(k->seed, seed, 16);
    /* Committed rows: a whole load is kept whatever this call does,
     * so it is not given up for the call's deadline (a retry would
     * load again from nothing, and a set too big to load within one
     * deadline would never be); interrupt() still stops it. */
    int64_t deadline = s->deadline_ms;
    s->deadline_ms = 0;
    if ((rc = presize(s)) == SQLITE_OK && (rc = load_legacy(s)) == SQLITE_OK)
        rc = load_batches(s, INT64_MIN);
    s->deadline_ms = deadline;
    if (rc == SQLITE_NOMEM) {
        k->why_retry = 1;
        snprintf(k->why_buf, sizeof k->why_buf,
                 "the connector's business keys do not fit in memory "
                 "(%zu loaded, a set of %zu bytes; docs/sinks/sqlite.md, "
                 "Business keys held in memory: \"dedup_keys\": \"rows\" "
                 "keeps them on disk)",
                 k->set.n, (k->set.mask + 1) * sizeof(sq_key));
        k->why = k->why_buf;
    }
    if (rc != SQLITE_OK) {
        tk_tab_clear(&k->set);
        return rc;
    }
    k->gen = gen;
    k->pruned = pruned;
    k->loaded = 1;
    return SQLITE_OK;
}

int sq_keys_sync(sq_sink *s) {
    sq_keyset *k = &s->keys;
    uint8_t seed[16];
    int64_t gen = 0, pruned = 0;
    int found = 0;
    tk_stage_reset(&k->add);
    tk_stage_reset(&k->del);
    k->newest_at = INT64_MIN;
    k->pruned_now = 0;
    k->why = NULL;
    k->why_retry = 0;
    int rc = read_row(s, &found, seed, &gen, &pruned);
    if (rc != SQLITE_OK)
        return rc;
    if (!found) {
        /* The connector's first memory-mode transaction: a new seed. If
         * this transaction rolls back, the row goes with it (sq_keys_abort
         * forgets the set). */
        int64_t rows, n;
        if ((rc = batch_keys(s, &rows, &n)) != SQLITE_OK)
            return rc;
        /* Rows, whatever keys they say they hold (a count is no proof):
         * their seed is gone, the digests cannot be read. */
        if (rows > 0)
            return refuse(s,
                          "its rows of " SQ_KEY_BATCHES
                          " have no row in " SQ_KEYSETS
                          " (deleted?), which holds the seed of their "
                          "digests: they cannot be read",
                          SQ_KEY_BATCHES);
        sqlite3_randomness(16, k->seed);
        k->fresh_row = 1;
        tk_tab_clear(&k->set);
        k->loaded = 0;
        if ((rc = write_row(s, 0)) != SQLITE_OK)
            return rc;
        if ((rc = load_legacy(s)) != SQLITE_OK)
            return rc;
        k->gen = k->pruned = 0;
        k->loaded = 1;
        return SQLITE_OK;
    }
    if (stale(k, seed, gen, pruned))
        return full_load(s, seed, gen, pruned);
    if (gen > k->gen) {
        /* another process of the connector committed batches: follow */
        if ((rc = load_batches(s, k->gen)) != SQLITE_OK) {
            tk_tab_clear(&k->set);
            k->loaded = 0;
            return rc;
        }
        k->gen = gen;
    }
    return SQLITE_OK;
}

int sq_keys_preload(sq_sink *s) {
    sq_keyset *k = &s->keys;
    uint8_t seed[16];
    int64_t gen = 0, pruned = 0;
    int found = 0;
    k->why = NULL;
    k->why_retry = 0;
    int rc = sq_exec(s, "BEGIN");
    if (rc == SQLITE_OK)
        rc = read_row(s, &found, seed, &gen, &pruned);
    /* With rows in tidemark_keys, the whole set: those that a host of an
     * older build wrote meanwhile move no generation or counter of ours,
     * and are seen no other way. */
    if (rc == SQLITE_OK && found && any_legacy(s) != 0)
        k->loaded = 0; /* its error too: rather read whole than miss them */
    /* what sq_keys_sync would load whole; newer batches alone are cheap
     * under the write lock */
    if (rc == SQLITE_OK && found && stale(k, seed, gen, pruned))
        rc = full_load(s, seed, gen, pruned);
    if (rc == SQLITE_OK)
        rc = sq_exec(s, "COMMIT");
    if (rc != SQLITE_OK)
        sq_rollback(s);
    return rc;
}

/* ---- one batch --------------------------------------------------------- */

/* The set's slots are spread over all of its memory: each lookup is a
 * cache miss. */
#define PREFETCH_AHEAD 16

static void prefetch_slot(const sq_keytab *t, const sq_key *key) {
    if (t->slot && key->a)
        __builtin_prefetch(&t->slot[tk_slot_of(key->b, t->mask)]);
}

int sq_keys_prepare(sq_sink *s, const tm_batch *b) {
    sq_keyset *k = &s->keys;
    if (b->nrecords > k->ndig) {
        sq_key *d = realloc(k->dig, b->nrecords * sizeof *d);
        if (!d)
            return SQLITE_NOMEM;
        k->dig = d;
        k->ndig = b->nrecords;
    }
    for (size_t j = 0; j < b->nrecords; j++) {
        const tm_record *r = TM_CELEM(tm_record, b->records, j);
        k->dig[j] = r->identity ? digest(k, r->identity, r->identity_hash)
                                : (sq_key){0, 0, 0};
    }
    return SQLITE_OK;
}

int sq_keys_decide(sq_sink *s, size_t j, size_t n, sq_key *key,
                   int32_t *earlier) {
    sq_keyset *k = &s->keys;
    /* the home slots of the next records read ahead (tk_touch), kept so
     * that the reads are not left out */
    if (j % TK_TOUCH_CHUNK == 0)
        k->touched += tk_touch(&k->set, k->dig, j, n);
    *key = k->dig[j];
    *earlier = -1;
    int32_t i = tk_stage_find(&k->add, key->a, key->b);
    if (i >= 0) {
        *earlier = k->add.rec[i];
        return k->add.key[i].ph == key->ph ? 1 : 2;
    }
    const sq_key *e = tk_tab_probe(&k->set, key->a, key->b, &k->last_pos);
    if (!e)
        return 0;
    if (tk_stage_find(&k->del, key->a, key->b) >= 0) {
        k->last_pos = SIZE_MAX; /* its slot is taken until the removal */
        return 0;
    }
    return e->ph == key->ph ? 1 : 2;
}

int sq_keys_stage(sq_sink *s, sq_key key, int32_t rec, int64_t applied_at) {
    if (applied_at > s->keys.newest_at)
        s->keys.newest_at = applied_at;
    return tk_rc(tk_stage_add(&s->keys.add, key, rec, s->keys.last_pos));
}

/* DELETE ... RETURNING of expired key batches (and old per-key rows):
 * their keys become this batch's removals. */
int sq_keys_prune(sq_sink *s, int64_t horizon, int64_t wall_horizon) {
    sq_keyset *k = &s->keys;
    int rc = SQLITE_OK;
    for (int legacy = 0; legacy < 2 && rc == SQLITE_OK; legacy++) {
        if (legacy && k->legacy == 0)
            break;
        sqlite3_stmt *st = s->stmt[legacy ? SQ_KEY_PRUNE_RET : SQ_KB_PRUNE];
        rc = sqlite3_bind_text(st, 1, s->config->connector, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK)
            rc = sqlite3_bind_int64(st, 2, horizon);
        if (rc == SQLITE_OK)
            rc = sqlite3_bind_int64(st, 3, wall_horizon);
        while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            k->pruned_now = 1;
            rc = SQLITE_OK;
            if (!legacy) {
                rc = blob_keys(k, sqlite3_column_blob(st, 0),
                               sqlite3_column_bytes(st, 0), 1);
                continue;
            }
            const char *id = (const char *)sqlite3_column_text(st, 0);
            if (id)
                rc = tk_rc(tk_stage_add(
                    &k->del,
                    digest(k, id, (const char *)sqlite3_column_text(st, 1)), -1,
                    SIZE_MAX));
        }
        sq_reuse(st);
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
    }
    return rc;
}

int sq_keys_write(sq_sink *s, int64_t wall_ms) {
    sq_keyset *k = &s->keys;
    if (!k->add.n && !k->pruned_now)
        return SQLITE_OK;
    int64_t newest = k->gen;
    int rc = SQLITE_OK;
    if (k->pruned_now) {
        /* the newest generation after this batch's removals */
        uint8_t seed[16];
        int64_t pruned;
        int found;
        if ((rc = read_row(s, &found, seed, &newest, &pruned)) != SQLITE_OK)
            return rc;
    }
    int64_t gen = newest + (k->add.n > 0);
    if (k->add.n) {
        size_t len;
        uint8_t *blob = tk_pack(&k->add, &len);
        if (!blob)
            return SQLITE_NOMEM;
        sqlite3_stmt *st = s->stmt[SQ_KB_INS];
        rc = sqlite3_bind_text(st, 1, s->config->connector, -1, SQLITE_STATIC);
        if (rc == SQLITE_OK)
            rc = sqlite3_bind_int64(st, 2, gen);
        if (rc == SQLITE_OK)
            rc = sqlite3_bind_int64(st, 3, wall_ms);
        if (rc == SQLITE_OK)
            rc = sqlite3_bind_int64(st, 4, k->newest_at);
        if (rc == SQLITE_OK)
            rc = sqlite3_bind_int64(st, 5, (int64_t)k->add.n);
        if (rc == SQLITE_OK)
            rc = sqlite3_bind_blob64(st, 6, blob, len, SQLITE_STATIC);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(st);
        sq_reuse(st);
        free(blob);
        if (rc == SQLITE_DONE)
            rc = SQLITE_OK;
    }
    if (rc == SQLITE_OK && k->pruned_now)
        rc = write_row(s, k->pruned + 1);
    if (rc == SQLITE_OK) {
        k->next_gen = gen;
        k->next_pruned = k->pruned + k->pruned_now;
    }
    return rc;
}

void sq_keys_committed(sq_sink *s) {
    sq_keyset *k = &s->keys;
    k->fresh_row = 0;
    if (!k->add.n && !k->pruned_now)
        return;
    const sq_key *slot0 = k->set.slot;
    for (size_t i = 0; i < k->del.n; i++)
        tk_tab_del(&k->set, k->del.key[i].a, k->del.key[i].b);
    if (tk_tab_grow(&k->set, k->set.n + k->add.n) != TK_OK) {
        tk_tab_clear(&k->set);
        k->loaded = 0;
    }
    /* Where each new key's lookup ended is where it goes, as long as no
     * slot was emptied and the set not rebuilt since (else: probed again,
     * its home prefetched ahead). */
    int hints = !k->del.n && k->set.slot == slot0;
    for (size_t i = 0; k->loaded && i < k->add.n; i++) {
        if (!hints && i + PREFETCH_AHEAD < k->add.n)
            prefetch_slot(&k->set, &k->add.key[i + PREFETCH_AHEAD]);
        if (tk_tab_put_from(&k->set, k->add.key[i],
                            hints ? k->add.pos[i] : SIZE_MAX) != TK_OK) {
            /* out of memory: the next commit reloads from the table */
            tk_tab_clear(&k->set);
            k->loaded = 0;
            break;
        }
    }
    k->gen = k->next_gen;
    k->pruned = k->next_pruned;
    tk_stage_reset(&k->add);
    tk_stage_reset(&k->del);
    k->pruned_now = 0;
}

void sq_keys_abort(sq_sink *s) {
    sq_keyset *k = &s->keys;
    if (k->fresh_row) {
        /* the seed's row was rolled back with the transaction */
        tk_tab_clear(&k->set);
        k->loaded = 0;
        k->fresh_row = 0;
    }
    tk_stage_reset(&k->add);
    tk_stage_reset(&k->del);
    k->pruned_now = 0;
}

void sq_keys_free(sq_sink *s) {
    tk_tab_clear(&s->keys.set);
    free(s->keys.dig);
    tk_stage_free(&s->keys.add);
    tk_stage_free(&s->keys.del);
}

tm_status sq_keys_fail(sq_sink *s, int rc, const char *step, tm_error *err) {
    if (!s->keys.why)
        return sq_fail(s, rc, step, err);
    s->host->set_error(err, "%s: %s (%s)", step, s->keys.why, s->set.path);
    return s->keys.why_retry ? TM_RETRY : TM_FATAL;
}

int sq_keys_rows_allowed(sq_sink *s, int *allowed) {
    uint8_t seed[16];
    int64_t gen, pruned;
    int found = 0;
    s->keys.why = NULL;
    int rc = read_row(s, &found, seed, &gen, &pruned);
    *allowed = !found;
    return rc;
}
