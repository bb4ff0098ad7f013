/* Business keys held in memory (docs/sinks/postgres.md, "Business keys held
 * in memory"): per connector a hash set of 24-byte digests (the shared part,
 * plugins/keyset), filled from tidemark_key_batches (one row of packed
 * digests per batch that applied new keys) and from the connector's
 * tidemark_keys rows (older builds, or "dedup_keys": "rows"). The
 * connector's tidemark_keysets row (seed, generation, pruned_generation)
 * serialises the commits that change its keys: each takes it FOR UPDATE,
 * after its rows (so that two hosts' commits of one connector overlap but
 * for their tails), and checks that what it decided from the set still
 * holds: batches committed by others since are loaded, and a key of theirs
 * among this batch's new ones, or a removal by another host, makes the
 * transaction run again with the row locked first. The batch's own changes
 * reach the set only after COMMIT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "pg_sink.h"

int pg_keyset_on(const pg_sink *s) {
    return (s->config->flags & TM_CONFIG_DEDUP) && !s->set.keys_rows;
}

/* SQL on the connector's tables: "%K" the keysets table, "%B" the batch
 * rows, "%L" the per-key rows (tidemark_keys). NULL when out of memory
 * (free it). */
static char *sql_of(const pg_sink *s, const char *fmt) {
    pg_buf b = {0};
    for (const char *p = fmt; *p; p++) {
        if (p[0] == '%' && (p[1] == 'K' || p[1] == 'B' || p[1] == 'L')) {
            pg_buf_add(&b, p[1] == 'K'   ? s->q_keysets
                           : p[1] == 'B' ? s->q_key_batches
                                         : s->q_keys);
            p++;
        } else {
            pg_buf_addn(&b, p, 1);
        }
    }
    if (b.oom) {
        pg_buf_free(&b);
        return NULL;
    }
    return b.p;
}

static PGresult *run(pg_sink *s, const char *fmt, int n, const char **v,
                     const int *lens, const int *fmts, int tuples, int binary,
                     const char *step, tm_status *r, tm_error *err) {
    char *sql = sql_of(s, fmt);
    if (!sql) {
        s->host->set_error(err, "%s: out of memory", step);
        *r = TM_RETRY;
        return NULL;
    }
    PGresult *res =
        binary ? pg_query_binary(s, sql, n, v, lens, fmts, step, r, err)
               : pg_query(s, sql, n, v, lens, fmts, tuples, step, r, err);
    free(sql);
    return res;
}

static tm_status nomem(pg_sink *s, const char *step, tm_error *err) {
    s->host->set_error(err, "%s: out of memory", step);
    return TM_RETRY;
}

/* A batch row whose seed_check is not its keysets row's (batch_row). */
#define PG_OTHER_SEED (-10)

static tm_status refuse(pg_sink *s, const char *what, const char *tables,
                        tm_error *err);

/* The keyset's failure: a set too big for memory (TM_RETRY naming it), a
 * batch row that is no list of keys or of another seed (TM_FATAL). */
static tm_status load_failed(pg_sink *s, int rc, tm_error *err) {
    pg_keyset *k = &s->ks;
    if (rc == PG_OTHER_SEED)
        return refuse(s,
                      "a row of " PG_KEY_BATCHES " was made under another "
                      "seed than its row of " PG_KEYSETS " holds (that row "
                      "replaced, by another connector's?): its digests "
                      "cannot be read with it",
                      PG_KEYSETS " and " PG_KEY_BATCHES, err);
    if (rc == TK_NOMEM) {
        size_t want = k->want > k->set.n ? k->want : k->set.n + 1, cap;
        for (cap = 1024; want > cap / 4 * 3 && cap < SIZE_MAX / 64; cap *= 2)
            ;
        s->host->set_error(
            err,
            "the connector's business keys do not fit in memory (%zu keys "
            "to hold, %zu loaded, a set of %zu bytes; docs/sinks/postgres.md, "
            "Business keys held in memory: \"dedup_keys\": \"rows\" keeps "
            "them on disk)",
            want, k->set.n, cap * sizeof(tk_key));
        return TM_RETRY;
    }
    s->host->set_error(err,
                       "a row of %s of connector %s is not a list of keys "
                       "(its length is no multiple of %d bytes)",
                       s->q_key_batches, s->config->connector, TK_KEY_BYTES);
    return TM_FATAL;
}

static void forget_set(pg_keyset *k) {
    tk_tab_clear(&k->set);
    k->loaded = 0;
}

/* ---- the connector's row ------------------------------------------------ */

typedef struct ks_row {
    int found;
    uint8_t seed[16];
    int64_t gen, pruned, legacy_pruned;
} ks_row;

/* The seed as encode(seed, 'hex') gives it: the same whatever the
 * session's bytea_output ('escape' gives no '\\x' hex in text results). */
static int unhex(const char *h, uint8_t *out, size_t n) {
    if (strlen(h) != 2 * n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (uint8_t)v;
    }
    return 0;
}

/* The connector's keys refused (TM_FATAL): WHAT is wrong with its rows,
 * TABLES the rows to delete to start its keys afresh. */
static tm_status refuse(pg_sink *s, const char *what, const char *tables,
                        tm_error *err) {
    s->host->set_error(err,
                       "connector \"%s\": %s, so a resend would be stored "
                       "again; restore its row of %s from a backup, or "
                       "delete its rows of %s (schema %s) to start its keys "
                       "afresh",
                       s->config->connector, what, s->q_keysets, tables,
                       s->q_schema);
    return TM_FATAL;
}

/* The connector's generation: its row's, or its newest batch row's when
 * that is past it (the row restored from a backup older than the batch
 * rows, as the refusals advise): the next batch row then goes past every
 * other instead of failing on their primary key for ever, and the rows
 * past the row's generation are loaded. Taken FOR UPDATE after a wait, the
 * row is its newest version and the subquery sees the statement's older
 * snapshot, whose newest batch row is never past that version's
 * generation: the maximum counts only for a row behind its batch rows. */
#define GEN_SQL                                                                \
    "greatest(generation, (SELECT max(generation) FROM %B WHERE connector "    \
    "= $1))"

/* The connector's keysets row (FOR UPDATE when LOCK). */
static tm_status read_row(pg_sink *s, int lock, ks_row *row, tm_error *err) {
    const char *v[1] = {s->config->connector};
    tm_status r;
    PGresult *res = run(s,
                        lock ? "SELECT encode(seed, 'hex'), " GEN_SQL
                               ", pruned_generation, seed_check, "
                               "legacy_pruned FROM %K WHERE "
                               "connector = $1 FOR UPDATE"
                             : "SELECT encode(seed, 'hex'), " GEN_SQL
                               ", pruned_generation, seed_check, "
                               "legacy_pruned FROM %K WHERE "
                               "connector = $1",
                        1, v, NULL, NULL, 1, 0,
                        lock ? "locking the connector's business keys"
                             : "reading the connector's business keys",
                        &r, err);
    if (!res)
        return r;
    row->found = PQntuples(res) == 1;
    if (row->found) {
        if (unhex(PQgetvalue(res, 0, 0), row->seed, 16) != 0) {
            s->host->set_error(err,
                               "%s: the seed of connector %s is not 16 "
                               "bytes",
                               s->q_keysets, s->config->connector);
            PQclear(res);
            return TM_FATAL;
        }
        row->gen = atoll(PQgetvalue(res, 0, 1));
        row->pruned = atoll(PQgetvalue(res, 0, 2));
        row->legacy_pruned = atoll(PQgetvalue(res, 0, 4));
        if (atoll(PQgetvalue(res, 0, 3)) != tk_seed_check(row->seed)) {
            PQclear(res);
            return refuse(s,
                          "the seed in its row of " PG_KEYSETS " does not "
                          "match its seed_check (changed, or restored from "
                          "elsewhere): the " PG_KEY_BATCHES " digests cannot "
                          "be read with it",
                          PG_KEYSETS " and " PG_KEY_BATCHES, err);
        }
    }
    PQclear(res);
    return TM_OK;
}

/* Whether the connector has batch rows (*any). */
static tm_status any_batches(pg_sink *s, int *any, tm_error *err) {
    const char *v[1] = {s->config->connector};
    tm_status r;
    PGresult *res =
        run(s,
            "SELECT EXISTS (SELECT 1 FROM %B WHERE connector = "
            "$1), EXISTS (SELECT 1 FROM %L WHERE connector = $1)",
            1, v, NULL, NULL, 1, 0, "reading business keys", &r, err);
    if (!res)
        return r;
    any[0] = *PQgetvalue(res, 0, 0) == 't';
    any[1] = *PQgetvalue(res, 0, 1) == 't';
    PQclear(res);
    return TM_OK;
}

/* The connector's row with a new random seed, unless one is there
 * (*made: this statement made it). */
static tm_status make_row(pg_sink *s, int *made, tm_error *err) {
    uint8_t seed[16];
    if (getrandom(seed, sizeof seed, 0) != (ssize_t)sizeof seed) {
        s->host->set_error(err, "no random bytes for the keys' seed");
        return TM_RETRY;
    }
    char check[32];
    snprintf(check, sizeof check, "%lld", (long long)tk_seed_check(seed));
    const char *v[3] = {s->config->connector, (const char *)seed, check};
    const int lens[3] = {0, 16, 0}, fmts[3] = {0, 1, 0};
    tm_status r;
    PGresult *res = run(s,
                        "INSERT INTO %K (connector, seed, seed_check, "
                        "generation, pruned_generation) VALUES ($1, "
                        "$2::bytea, $3::bigint, 0, 0) ON CONFLICT DO NOTHING",
                        3, v, lens, fmts, 0, 0,
                        "making the connector's business keys' row", &r, err);
    if (res)
        *made = strcmp(PQcmdTuples(res), "1") == 0;
    PQclear(res);
    return r;
}

static tm_status orphan_batches(pg_sink *s, tm_error *err) {
    return refuse(s,
                  "its rows of " PG_KEY_BATCHES " have no row in " PG_KEYSETS
                  " (deleted?), which holds the seed of their digests: they "
                  "cannot be read",
                  PG_KEY_BATCHES, err);
}

/* ---- loading ------------------------------------------------------------- */

/* Each row of the query FMT given to ROW, in pages of PAGE rows (FMT ends
 * in "LIMIT <PAGE>"): at most a page beside the set, not the set and every
 * row (a million keys read as one result: 24 MB of batch rows, 87 MB of
 * tidemark_keys rows more at the peak, and an address space short of it
 * made the claim TM_FATAL, out of memory for query result, instead of
 * TM_RETRY). $1 is the connector, $2 the cursor in binary form: AFTER
 * (LEN bytes; NULL for none) at first, then the first column of the last
 * row read, FMT's order. Results are binary. Plain statements: libpq's
 * single-row mode did it too, but after it the next pipeline's first
 * statement (a marker update, in a commit with no new keys) came back as
 * no result the pipeline expected, and the commit failed with an empty
 * message (duplicates_only_after_another_hosts_batch). ROW answers TK_OK
 * or stops the rows with its TK_ code. */
static tm_status each_page(pg_sink *s, const char *fmt, int page,
                           const char *after, int len,
                           int (*row)(pg_sink *, PGresult *, int),
                           tm_error *err) {
    char *cur = NULL;
    int rc = TK_OK;
    for (;;) {
        const char *v[2] = {s->config->connector, cur ? cur : after};
        int lens[2] = {0, len}, fmts[2] = {0, 1};
        tm_status r;
        PGresult *res = run(s, fmt, 2, v, lens, fmts, 1, 1,
                            "loading business keys", &r, err);
        free(cur);
        cur = NULL;
        if (!res)
            return r;
        int n = PQntuples(res);
        for (int i = 0; rc == TK_OK && i < n; i++)
            rc = row(s, res, i);
        if (rc == TK_OK && n == page) {
            len = PQgetlength(res, n - 1, 0);
            if (!(cur = malloc((size_t)len + 1)))
                rc = TK_NOMEM;
            else
                memcpy(cur, PQgetvalue(res, n - 1, 0), (size_t)len);
        }
        PQclear(res);
        if (rc != TK_OK)
            return load_failed(s, rc, err);
        if (n < page)
            return TM_OK;
    }
}

static int batch_row(pg_sink *s, PGresult *res, int i) {
    const uint8_t *g = (const uint8_t *)PQgetvalue(res, i, 0);
    if (PQgetlength(res, i, 0) != 8)
        return TK_CORRUPT;
    uint64_t gen = 0;
    for (int b = 0; b < 8; b++)
        gen = gen << 8 | g[b]; /* int8's binary form: big-endian */
    s->ks.set.put_gen = (uint32_t)gen;
    /* made under this seed (its seed_check), or none of its keys is */
    const uint8_t *c = (const uint8_t *)PQgetvalue(res, i, 2);
    uint64_t check = 0;
    if (PQgetlength(res, i, 2) != 8)
        return TK_CORRUPT;
    for (int b = 0; b < 8; b++)
        check = check << 8 | c[b];
    if ((int64_t)check != tk_seed_check(s->ks.seed))
        return PG_OTHER_SEED;
    return tk_unpack(PQgetvalue(res, i, 1), (size_t)PQgetlength(res, i, 1),
                     &s->ks.set, NULL);
}

/* The keys of every batch row past generation AFTER into the set, in pages
 * of 32 rows by generation (the primary key). */
static tm_status load_batches(pg_sink *s, int64_t after, tm_error *err) {
    char a[8];
    for (int b = 0; b < 8; b++) /* int8's binary form: big-endian */
        a[b] = (char)(uint8_t)((uint64_t)after >> (56 - 8 * b));
    return each_page(s,
                     "SELECT generation, keys, seed_check FROM %B WHERE "
                     "connector = $1 AND generation > $2::bigint ORDER BY "
                     "generation LIMIT 32",
                     32, a, 8, batch_row, err);
}

static int legacy_row(pg_sink *s, PGresult *res, int i) {
    s->ks.legacy++;
    return tk_tab_put(
        &s->ks.set,
        tk_digest(s->ks.seed, PQgetvalue(res, i, 0),
                  PQgetisnull(res, i, 1) ? NULL : PQgetvalue(res, i, 1)));
}

/* The connector's rows of tidemark_keys (older builds, or "rows"), in
 * pages of 4096 by identity (the primary key's order). */
static tm_status load_legacy(pg_sink *s, tm_error *err) {
    s->ks.legacy = 0;
    return each_page(s,
                     "SELECT identity, payload_hash FROM %L WHERE connector "
                     "= $1 AND ($2::text IS NULL OR identity > $2) ORDER BY "
                     "identity LIMIT 4096",
                     4096, NULL, 0, legacy_row, err);
}

/* The set sized once for the connector's keys: growing by doubling while
 * loading would hold the old table and the new one together. */
static tm_status presize(pg_sink *s, tm_error *err) {
    const char *v[1] = {s->config->connector};
    tm_status r;
    PGresult *res =
        run(s,
            "SELECT coalesce(sum(nkeys), 0) + (SELECT count(*) "
            "FROM %L WHERE connector = $1) FROM %B WHERE "
            "connector = $1",
            1, v, NULL, NULL, 1, 0, "counting business keys", &r, err);
    if (!res)
        return r;
    long long n = atoll(PQgetvalue(res, 0, 0));
    PQclear(res);
    s->ks.want = n > 0 ? (size_t)n : 0;
    int rc = n > 0 ? tk_tab_grow(&s->ks.set, (size_t)n) : TK_OK;
    return rc == TK_OK ? TM_OK : load_failed(s, rc, err);
}

/* The whole set for ROW, in the caller's transaction. */
static tm_status full_load(pg_sink *s, const ks_row *row, tm_error *err) {
    pg_keyset *k = &s->ks;
    forget_set(k);
    memcpy(k->seed, row->seed, 16);
    s->host->log(s->config->host_ctx, TM_LOG_DEBUG, "%s",
                 "loading the connector's business keys whole");
    /* the tidemark_keys rows' keys are no batch's: a generation no
     * removal of batch rows from here reaches (tk_tab_drop_gens) */
    k->set.gens = 1;
    k->set.put_gen = (uint32_t)row->pruned;
    tm_status r = presize(s, err);
    if (r == TM_OK)
        r = load_legacy(s, err);
    if (r == TM_OK)
        r = load_batches(s, INT64_MIN, err);
    if (r != TM_OK) {
        forget_set(k);
        return r;
    }
    k->gen = row->gen;
    k->pruned = row->pruned;
    k->legacy_pruned = row->legacy_pruned;
    k->gen_floor = row->pruned;
    k->loaded = 1;
    return TM_OK;
}

/* full_load in a commit's transaction with statement_timeout lifted for
 * it alone (restored after): the whole set is read in a time that grows
 * with the connector's keys, and a load cut by the timeout would be cut
 * again at every try. Its statements wait for no lock (the connector's row
 * is held already). */
static tm_status full_load_untimed(pg_sink *s, const ks_row *row,
                                   tm_error *err) {
    char ms[32];
    snprintf(ms, sizeof ms, "%lld", (long long)s->set.statement_timeout_ms);
    const char *v[1] = {ms};
    tm_status r = pg_exec(s, "SET LOCAL statement_timeout = 0",
                          "loading business keys", err);
    if (r == TM_OK)
        r = full_load(s, row, err);
    PGresult *res = r == TM_OK ? run(s,
                                     "SELECT set_config('statement_timeout', "
                                     "$1, true)",
                                     1, v, NULL, NULL, 1, 0,
                                     "loading business keys", &r, err)
                               : NULL;
    PQclear(res);
    if (r != TM_OK)
        forget_set(&s->ks);
    return r;
}

/* The span of generations the set's 32-bit ones tell apart: the keys of
 * generations up to ROW's, from the lowest one put in the set on, must
 * span less (with room to spare), or a removal followed by
 * tk_tab_drop_gens would drop the keys of a generation 2^32 later too
 * (removal_followed_across_two_to_the_32_generations). */
#define GEN_SPAN_MAX ((int64_t)1 << 31)

/* 1 when the set cannot follow ROW by removing the keys of the batch rows
 * another host removed and loading newer batches: not loaded, another
 * seed, generations gone back, tidemark_keys rows removed by another host
 * (one at a time by their age, not by generation), or more generations
 * than the set's 32-bit ones tell apart since its lowest. */
static int stale(const pg_keyset *k, const ks_row *row) {
    return !k->loaded || row->pruned < k->pruned ||
           row->legacy_pruned != k->legacy_pruned ||
           memcmp(row->seed, k->seed, 16) != 0 || row->gen < k->gen ||
           row->gen - k->gen_floor >= GEN_SPAN_MAX;
}

/* The set brought up to ROW (not stale): the keys of the batch rows
 * another host removed (generations up to row->pruned) dropped, those of
 * the batch rows committed since loaded. */
static tm_status follow(pg_sink *s, const ks_row *row, tm_error *err) {
    pg_keyset *k = &s->ks;
    if (row->pruned > k->pruned) {
        tk_tab_drop_gens(&k->set, (uint32_t)k->pruned, (uint32_t)row->pruned);
        k->pruned = row->pruned;
    }
    if (row->gen > k->gen) {
        tm_status r = load_batches(s, k->gen, err);
        if (r != TM_OK) {
            forget_set(k);
            return r;
        }
        k->gen = row->gen;
    }
    return TM_OK;
}

tm_status pg_keyset_claim(pg_sink *s, tm_error *err) {
    if (!(s->config->flags & TM_CONFIG_DEDUP))
        return TM_OK;
    ks_row row = {0};
    tm_status r = read_row(s, 0, &row, err);
    if (r != TM_OK)
        return r;
    if (s->set.keys_rows) {
        if (!row.found)
            return TM_OK;
        s->host->set_error(err,
                           "setting \"dedup_keys\": \"rows\", but connector "
                           "%s holds its business keys as batches in %s "
                           "(\"memory\"), which \"rows\" would not see; keep "
                           "\"memory\"",
                           s->config->connector, s->q_key_batches);
        return TM_FATAL;
    }
    int any[2] = {0, 0};
    if ((r = any_batches(s, any, err)) != TM_OK)
        return r;
    if (!row.found) {
        int made = 0;
        if (any[0])
            return orphan_batches(s, err);
        if ((r = make_row(s, &made, err)) != TM_OK)
            return r;
    }
    /* One snapshot for the row and the keys it counts. With rows in
     * tidemark_keys, the whole set: those an older build wrote meanwhile
     * move no generation or counter. */
    if (any[1])
        s->ks.loaded = 0;
    /* statement_timeout lifted for the loads (full_load_untimed) */
    r = pg_exec(s,
                "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET LOCAL "
                "statement_timeout = 0",
                "claim: reading business keys", err);
    if (r == TM_OK)
        r = read_row(s, 0, &row, err);
    if (r == TM_OK && !row.found)
        r = orphan_batches(s, err); /* deleted since it was made */
    if (r == TM_OK && stale(&s->ks, &row))
        r = full_load(s, &row, err);
    else if (r == TM_OK)
        r = follow(s, &row, err);
    if (r == TM_OK)
        r = pg_exec(s, "COMMIT", "claim: reading business keys", err);
    if (r != TM_OK)
        pg_rollback(s);
    return r;
}

/* ---- one batch ----------------------------------------------------------- */

static void stmts_free(pg_keyset *k);

static void stage_reset_all(pg_keyset *k) {
    stmts_free(k);
    tk_stage_reset(&k->add);
    tk_stage_reset(&k->del);
    k->newest_at = INT64_MIN;
    k->prune_to = 0;
    k->legacy_now = 0;
    k->locked = 0;
    k->fresh_row = 0;
}

/* The connector's row locked, the set brought up to it. */
static tm_status lock_and_sync(pg_sink *s, tm_error *err) {
    pg_keyset *k = &s->ks;
    ks_row row = {0};
    tm_status r = read_row(s, 1, &row, err);
    if (r == TM_OK && !row.found) {
        int any[2] = {0, 0}, made = 0;
        if ((r = any_batches(s, any, err)) != TM_OK)
            return r;
        if (any[0])
            return orphan_batches(s, err);
        if ((r = make_row(s, &made, err)) != TM_OK ||
            (r = read_row(s, 1, &row, err)) != TM_OK)
            return r;
        if (!row.found)
            return orphan_batches(s, err);
        k->fresh_row = made;
        forget_set(k);
    }
    if (r != TM_OK)
        return r;
    k->locked = 1;
    if (stale(k, &row))
        return full_load_untimed(s, &row, err);
    /* others removed and committed batches: the set follows */
    return follow(s, &row, err);
}

tm_status pg_keyset_begin(pg_sink *s, int lock_first, tm_error *err) {
    stage_reset_all(&s->ks);
    if (!lock_first && s->ks.loaded)
        return TM_OK;
    return lock_and_sync(s, err);
}

tm_status pg_keyset_prune(pg_sink *s, int64_t horizon, int64_t wall_horizon,
                          tm_error *err) {
    pg_keyset *k = &s->ks;
    char h[32], w[32], g[32];
    snprintf(h, sizeof h, "%lld", (long long)horizon);
    snprintf(w, sizeof w, "%lld", (long long)wall_horizon);
    snprintf(g, sizeof g, "%lld", (long long)k->gen);
    const char *v[4] = {s->config->connector, h, w, g};
    tm_status r;
    /* Whole batch rows in generation order, up to the first one not
     * expired: what another host can follow (it drops the keys of the
     * generations up to the one recorded, tk_tab_drop_gens) without
     * reading the rows again. A row expired after one that is not is kept
     * until that one expires (kept longer, never forgotten early). Both
     * scans walk the primary key (connector, generation) from the
     * connector's first row: the rows removed and the first one kept, not
     * the connector's rows. */
    PGresult *res =
        run(s,
            "DELETE FROM %B WHERE connector = $1 AND generation <= "
            "coalesce((SELECT generation - 1 FROM %B WHERE connector = $1 "
            "AND (newest_applied_at >= $2::bigint OR applied_wall >= "
            "$3::bigint) ORDER BY generation LIMIT 1), $4::bigint) RETURNING "
            "generation::text, keys",
            4, v, NULL, NULL, 1, 1, "pruning expired business keys", &r, err);
    if (!res)
        return r;
    int rc = TK_OK;
    for (int i = 0; rc == TK_OK && i < PQntuples(res); i++) {
        int64_t gen = atoll(PQgetvalue(res, i, 0));
        if (gen > k->prune_to)
            k->prune_to = gen;
        rc = tk_unpack(PQgetvalue(res, i, 1), (size_t)PQgetlength(res, i, 1),
                       NULL, &k->del);
    }
    PQclear(res);
    if (rc != TK_OK)
        return load_failed(s, rc, err);
    if (k->legacy == 0)
        return TM_OK;
    res = run(s,
              "DELETE FROM %L WHERE connector = $1 AND applied_at < $2::bigint "
              "AND applied_wall < $3::bigint RETURNING identity, payload_hash",
              3, v, NULL, NULL, 1, 0, "pruning expired business keys", &r, err);
    if (!res)
        return r;
    for (int i = 0; rc == TK_OK && i < PQntuples(res); i++) {
        k->legacy_now = 1;
        rc = tk_stage_add(
            &k->del,
            tk_digest(k->seed, PQgetvalue(res, i, 0),
                      PQgetisnull(res, i, 1) ? NULL : PQgetvalue(res, i, 1)),
            -1, SIZE_MAX);
    }
    PQclear(res);
    return rc == TK_OK ? TM_OK : nomem(s, "pruning business keys", err);
}

/* The detail of a conflict with a key seen before: the first occurrence
 * in this batch (EARLIER >= 0), or a stored key (only digests are kept). */
static void detail_of(const tm_batch *b, const tm_record *r, int32_t earlier,
                      char *detail, size_t size) {
    const char *now = r->identity_hash ? r->identity_hash : "(none)";
    if (earlier >= 0) {
        const tm_record *e = TM_CELEM(tm_record, b->records, earlier);
        const tm_range *g = TM_CELEM(tm_range, b->ranges, e->range);
        char part[16], off[32];
        snprintf(part, sizeof part, "%d", (int)g->partition);
        snprintf(off, sizeof off, "%lld", (long long)e->offset);
        pg_key_conflict_detail(detail, size, r->identity, g->topic, part, off,
                               e->identity_hash, r->identity_hash);
        return;
    }
    snprintf(detail, size,
             "identity %.*s was applied before with another payload hash "
             "(the sink keeps 64-bit digests of them, not the text), now %.*s",
             (int)pg_utf8_prefix(r->identity, 120), r->identity,
             (int)pg_utf8_prefix(now, 80), now);
}

tm_status pg_keyset_decide(pg_sink *s, const tm_batch *b,
                           const unsigned char *keyed, int64_t wall_ms,
                           pg_key_set *out, tm_error *err) {
    pg_keyset *k = &s->ks;
    size_t n = b->nrecords;
    if (n > k->ndig) {
        tk_key *d = realloc(k->dig, n * sizeof *d);
        if (!d)
            return nomem(s, "deciding business keys", err);
        k->dig = d;
        k->ndig = n;
    }
    for (size_t j = 0; j < n; j++) {
        const tm_record *r = TM_CELEM(tm_record, b->records, j);
        k->dig[j] = keyed[j] ? tk_digest(k->seed, r->identity, r->identity_hash)
                             : (tk_key){0, 0, 0};
    }
    char detail[512];
    uint64_t touched = 0;
    for (size_t j = 0; j < n; j++) {
        if (j % TK_TOUCH_CHUNK == 0) /* the next home slots read ahead */
            touched += tk_touch(&k->set, k->dig, j, n);
        if (!keyed[j])
            continue;
        const tm_record *r = TM_CELEM(tm_record, b->records, j);
        tk_key key = k->dig[j];
        int outcome = 0;
        int32_t earlier = -1;
        size_t pos = SIZE_MAX;
        int32_t i = tk_stage_find(&k->add, key.a, key.b);
        if (i >= 0) {
            earlier = k->add.rec[i];
            outcome = k->add.key[i].ph == key.ph ? 1 : 2;
        } else {
            const tk_key *e = tk_tab_probe(&k->set, key.a, key.b, &pos);
            if (e && tk_stage_find(&k->del, key.a, key.b) < 0)
                outcome = e->ph == key.ph ? 1 : 2;
            else if (e)
                pos = SIZE_MAX; /* its slot is taken until the removal */
        }
        if (outcome == 0) {
            int64_t at = pg_applied_at(r, wall_ms);
            if (at > k->newest_at)
                k->newest_at = at;
            if (tk_stage_add(&k->add, key, (int32_t)j, pos) != TK_OK)
                return nomem(s, "deciding business keys", err);
            continue;
        }
        if (outcome == 2)
            detail_of(b, r, earlier, detail, sizeof detail);
        tm_status st = pg_key_put(s, b, j, outcome, detail, out, err);
        if (st != TM_OK)
            return st;
    }
    k->touched += touched; /* kept, so that the reads are not left out */
    k->decided_slot = k->set.slot;
    k->decided_mask = k->set.mask;
    return TM_OK;
}

void pg_keyset_drop(pg_sink *s, const tm_record *r) {
    pg_keyset *k = &s->ks;
    tk_key key = tk_digest(k->seed, r->identity, r->identity_hash);
    int32_t i = tk_stage_find(&k->add, key.a, key.b);
    if (i >= 0)
        k->add.rec[i] = TK_DROPPED;
}

/* The queued statements' memory (pg_keyset_stmts), after the pipeline. */
static void stmts_free(pg_keyset *k) {
    free(k->sql[0]);
    free(k->sql[1]);
    free(k->blob);
    k->sql[0] = k->sql[1] = NULL;
    k->blob = NULL;
    k->nstmts = 0;
}

/* The batch's row of new keys (generation GEN, its NKEYS keys packed in
 * k->blob, LEN bytes) and the connector's row moved to GEN and PRUNED,
 * ready for pg_keyset_stmts. */
static tm_status ready_writes(pg_sink *s, int64_t gen, int64_t pruned,
                              int64_t legacy, int64_t wall_ms, size_t len,
                              tm_error *err) {
    pg_keyset *k = &s->ks;
    snprintf(k->par[0], sizeof k->par[0], "%lld", (long long)gen);
    snprintf(k->par[1], sizeof k->par[1], "%lld", (long long)wall_ms);
    snprintf(k->par[2], sizeof k->par[2], "%lld", (long long)k->newest_at);
    snprintf(k->par[3], sizeof k->par[3], "%zu", len / TK_KEY_BYTES);
    snprintf(k->par[4], sizeof k->par[4], "%lld", (long long)pruned);
    snprintf(k->par[5], sizeof k->par[5], "%lld", (long long)legacy);
    snprintf(k->par[6], sizeof k->par[6], "%lld",
             (long long)tk_seed_check(k->seed));
    const char *c = s->config->connector;
    k->vals[0][0] = c;
    for (int i = 0; i < 4; i++)
        k->vals[0][i + 1] = k->par[i];
    k->vals[0][5] = (const char *)k->blob;
    k->vals[0][6] = k->par[6];
    for (int i = 0; i < 7; i++) {
        k->lens[i] = i == 5 ? (int)len : 0;
        k->fmts[i] = i == 5;
    }
    k->vals[1][0] = c;
    k->vals[1][1] = k->par[0];
    k->vals[1][2] = k->par[4];
    k->vals[1][3] = k->par[5];
    k->sql[0] = len ? sql_of(s, "INSERT INTO %B (connector, generation, "
                                "applied_wall, newest_applied_at, nkeys, "
                                "keys, seed_check) VALUES ($1, $2::bigint, "
                                "$3::bigint, $4::bigint, $5::bigint, "
                                "$6::bytea, $7::bigint)")
                    : NULL;
    k->sql[1] = sql_of(s, "UPDATE %K SET generation = $2::bigint, "
                          "pruned_generation = $3::bigint, legacy_pruned = "
                          "$4::bigint WHERE connector = $1");
    if ((len && !k->sql[0]) || !k->sql[1] || len > INT32_MAX) {
        stmts_free(k);
        return nomem(s, "storing business keys", err);
    }
    k->nstmts = 2;
    return TM_OK;
}

size_t pg_keyset_stmts(pg_sink *s, pg_stmt *out) {
    pg_keyset *k = &s->ks;
    size_t n = 0;
    if (!k->nstmts)
        return 0;
    if (k->sql[0])
        out[n++] = (pg_stmt){.sql = k->sql[0],
                             .n = 7,
                             .vals = k->vals[0],
                             .lens = k->lens,
                             .formats = k->fmts,
                             .step = "storing business keys"};
    out[n++] = (pg_stmt){.sql = k->sql[1],
                         .n = 4,
                         .vals = k->vals[1],
                         .step = "moving the connector's business keys"};
    return n;
}

/* 1 when a key staged by this batch is in the set: a batch another host
 * committed since the decisions holds it. */
static int staged_in_set(const pg_keyset *k) {
    for (size_t i = 0; i < k->add.n; i++)
        if (k->add.rec[i] != TK_DROPPED &&
            tk_tab_find(&k->set, k->add.key[i].a, k->add.key[i].b))
            return 1;
    return 0;
}

tm_status pg_keyset_finish(pg_sink *s, const tm_batch *b, int64_t wall_ms,
                           int *redo, tm_error *err) {
    pg_keyset *k = &s->ks;
    tm_status r = TM_OK;
    if (!k->locked) {
        ks_row row = {0};
        if ((r = read_row(s, 1, &row, err)) != TM_OK)
            return r;
        k->locked = 1;
        if (!row.found || stale(k, &row) || row.pruned != k->pruned) {
            *redo = 1;
            s->host->set_error(err,
                               "batch %s: the connector's business keys "
                               "changed under the decisions (removed by "
                               "another host); deciding again",
                               b->batch_id);
            return TM_RETRY;
        }
        if (row.gen > k->gen) {
            if ((r = load_batches(s, k->gen, err)) != TM_OK) {
                forget_set(k);
                return r;
            }
            k->gen = row.gen;
            if (staged_in_set(k)) {
                *redo = 1;
                s->host->set_error(err,
                                   "batch %s: a key of this batch was "
                                   "committed by another host since it was "
                                   "decided; deciding again",
                                   b->batch_id);
                return TM_RETRY;
            }
        }
    }
    stmts_free(k);
    size_t len;
    if (!(k->blob = tk_pack(&k->add, &len)))
        return nomem(s, "storing business keys", err);
    int64_t gen = k->gen + (len > 0);
    int64_t pruned = k->prune_to > k->pruned ? k->prune_to : k->pruned;
    int64_t legacy = k->legacy_pruned + k->legacy_now;
    if ((len > 0 || pruned != k->pruned || k->legacy_now) &&
        (r = ready_writes(s, gen, pruned, legacy, wall_ms, len, err)) != TM_OK)
        return r;
    k->next_gen = gen;
    k->next_pruned = pruned;
    k->next_legacy = legacy;
    return TM_OK;
}

void pg_keyset_committed(pg_sink *s) {
    pg_keyset *k = &s->ks;
    if (!k->locked) { /* no keyed record: nothing changed */
        stage_reset_all(k);
        return;
    }
    for (size_t i = 0; i < k->del.n; i++)
        tk_tab_del(&k->set, k->del.key[i].a, k->del.key[i].b);
    if (tk_tab_grow(&k->set, k->set.n + k->add.n) != TK_OK)
        forget_set(k);
    /* Where each new key's lookup ended is where it goes, as long as no
     * slot was emptied and the set not rebuilt since the decisions (keys
     * loaded after them only fill empty slots: the probe goes on from
     * there). A rebuild is told by the size, which it always grows: the
     * load under the lock and the room made here may rebuild it twice,
     * the second table at the first one's address (a resend of the keys
     * was then stored again, test_postgres_keyset_alloc.c); a set cleared
     * meanwhile is not loaded, and takes no key here. */
    int hints = !k->del.n && k->set.slot == k->decided_slot &&
                k->set.mask == k->decided_mask;
    k->set.put_gen = (uint32_t)k->next_gen;
    for (size_t i = 0; k->loaded && i < k->add.n; i++) {
        if (k->add.rec[i] == TK_DROPPED)
            continue;
        if (tk_tab_put_from(&k->set, k->add.key[i],
                            hints ? k->add.pos[i] : SIZE_MAX) != TK_OK) {
            forget_set(k); /* out of memory: the next commit reloads */
            break;
        }
    }
    k->gen = k->next_gen;
    k->pruned = k->next_pruned;
    k->legacy_pruned = k->next_legacy;
    stage_reset_all(k);
}

void pg_keyset_abort(pg_sink *s) {
    pg_keyset *k = &s->ks;
    if (k->fresh_row)
        forget_set(k); /* its seed's row went back with the transaction */
    stage_reset_all(k);
}

void pg_keyset_free(pg_sink *s) {
    stmts_free(&s->ks);
    tk_tab_clear(&s->ks.set);
    free(s->ks.dig);
    tk_stage_free(&s->ks.add);
    tk_stage_free(&s->ks.del);
}
