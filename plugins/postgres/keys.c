/* Business keys (dedup): which of a batch's keyed records are new, which
 * are duplicates and which are identity conflicts, decided as a set: the
 * in-batch repeats here (the records sorted by identity), the distinct
 * keys by the database. When the sink's last batch had no key stored
 * before (most batches: nothing resent), one COPY stores them all, under
 * a savepoint; a key stored before fails it (23505), and the batch, like
 * one after a batch that had such keys, is decided in two round trips: a
 * prepared statement reads the keys stored before by primary key (the
 * identities go as one array), and one COPY stores the others. A key per
 * round trip cost a 2000-record batch 2000 round trips; one statement that
 * probed and inserted them (INSERT ... SELECT) cost the server about a
 * third more CPU than the probe and the COPY, the probe about a third of
 * that (docs/benchmarks.md).
 * pg_key_one is the same decision for one record: the fallback when the
 * set fails for a record's content (or a key stored concurrently), to
 * find which record it was. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binarray.h"
#include "pg_sink.h"

int64_t pg_applied_at(const tm_record *r, int64_t wall_ms) {
    return r->timestamp_ms >= 0 ? r->timestamp_ms : wall_ms;
}

/* Same payload hash (both absent counts as the same). */
static int same_hash(const char *stored, const char *now) {
    return (!stored && !now) || (stored && now && strcmp(stored, now) == 0);
}

void pg_key_conflict_detail(char *detail, size_t size, const char *identity,
                            const char *topic, const char *partition,
                            const char *offset, const char *was,
                            const char *now) {
    was = was ? was : "(none)";
    now = now ? now : "(none)";
    snprintf(detail, size,
             "identity %.*s first applied from %.*s[%s]@%s with "
             "payload hash %.*s, now %.*s",
             (int)pg_utf8_prefix(identity, 120), identity,
             (int)pg_utf8_prefix(topic, 100), topic, partition, offset,
             (int)pg_utf8_prefix(was, 80), was, (int)pg_utf8_prefix(now, 80),
             now);
}

int pg_key_one(pg_sink *s, const tm_record *r, const tm_range *g,
               int64_t wall_ms, char *detail, size_t size, tm_status *st,
               tm_error *err) {
    char part[16], off[32], at[32], wall[32];
    snprintf(part, sizeof part, "%d", (int)g->partition);
    snprintf(off, sizeof off, "%lld", (long long)r->offset);
    snprintf(at, sizeof at, "%lld", (long long)pg_applied_at(r, wall_ms));
    snprintf(wall, sizeof wall, "%lld", (long long)wall_ms);
    const char *v[8] = {s->config->connector,
                        r->identity,
                        r->identity_hash,
                        g->topic,
                        part,
                        off,
                        at,
                        wall};
    pg_buf b = {0};
    pg_buf_add(&b, "INSERT INTO ");
    pg_buf_add(&b, s->q_keys);
    pg_buf_add(&b, " (connector, identity, payload_hash, first_topic, "
                   "first_partition, first_offset, applied_at, "
                   "applied_wall) VALUES ($1, $2, $3, $4, $5::int, "
                   "$6::bigint, $7::bigint, $8::bigint) ON CONFLICT DO "
                   "NOTHING RETURNING 1");
    PGresult *res = b.oom ? NULL
                          : pg_query(s, b.p, 8, v, NULL, NULL, 1,
                                     "storing business keys", st, err);
    if (!res) {
        if (b.oom)
            *st = TM_RETRY;
        pg_buf_free(&b);
        return -1;
    }
    int fresh = PQntuples(res) == 1;
    PQclear(res);
    if (fresh) {
        pg_buf_free(&b);
        return 0;
    }
    b.len = 0;
    pg_buf_add(&b, "SELECT payload_hash, first_topic, first_partition, "
                   "first_offset FROM ");
    pg_buf_add(&b, s->q_keys);
    pg_buf_add(&b, " WHERE connector = $1 AND identity = $2");
    res = b.oom ? NULL
                : pg_query(s, b.p, 2, v, NULL, NULL, 1,
                           "comparing business keys", st, err);
    pg_buf_free(&b);
    if (!res)
        return -1;
    if (PQntuples(res) != 1) {
        /* ON CONFLICT saw it, the read does not: deleted concurrently. */
        PQclear(res);
        s->host->set_error(err, "business key %.*s vanished concurrently",
                           (int)pg_utf8_prefix(r->identity, 100), r->identity);
        *st = TM_RETRY;
        return -1;
    }
    const char *h = PQgetisnull(res, 0, 0) ? NULL : PQgetvalue(res, 0, 0);
    int same = same_hash(h, r->identity_hash);
    if (!same)
        pg_key_conflict_detail(detail, size, r->identity, PQgetvalue(res, 0, 1),
                               PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3), h,
                               r->identity_hash);
    PQclear(res);
    return same ? 1 : 2;
}

/* The probe's name on the session (pg_sink.keys_prepared). */
#define PG_STMT_KEYS "tm_keys_probe"
/* The savepoint a COPY of every key tried first rolls back to. */
#define KEYS_SAVEPOINT "tm_keys"

/* The probe: $2 the distinct identities of the batch's keyed records (an
 * array in PostgreSQL's binary format, binarray.h: no literal to parse);
 * the answer, the keys stored before (the statement's snapshot) with
 * their first occurrence, each by its 1-based ordinality in $2, read by
 * one primary key probe (LATERAL ... LIMIT 1: never a scan of every key
 * the connector stored); empty when nothing was resent. No join: its
 * plan cannot depend on estimates (prepared once per session, the
 * statement may run on a generic plan that does not know the array's
 * size). */
static void probe_sql(pg_sink *s, pg_buf *b) {
    pg_buf_add(b, "SELECT u.ord, k.payload_hash, k.first_topic, "
                  "k.first_partition, k.first_offset FROM unnest($2::text[]) "
                  "WITH ORDINALITY AS u(identity, ord) CROSS JOIN LATERAL "
                  "(SELECT payload_hash, first_topic, first_partition, "
                  "first_offset FROM ");
    pg_buf_add(b, s->q_keys);
    pg_buf_add(b, " WHERE connector = $1 AND identity = u.identity LIMIT 1) "
                  "k");
}

/* The probe prepared on this session, once: not parsed and planned for
 * every batch. */
static tm_status prepare_probe(pg_sink *s, tm_error *err) {
    if (s->keys_prepared)
        return TM_OK;
    pg_buf q = {0};
    probe_sql(s, &q);
    tm_status r = pg_prepare(s, PG_STMT_KEYS, q.oom ? NULL : q.p, 2,
                             "preparing the business keys' probe", err);
    pg_buf_free(&q);
    s->keys_prepared = r == TM_OK;
    return r;
}

/* The new keys (FIRST[u] the first occurrence of key u, for the keys
 * u < M with ROW_OF[u] < 0) stored with one COPY in the binary format:
 * rows in bulk, where an INSERT ... SELECT inserted and logged them one by
 * one (docs/benchmarks.md). The probe's snapshot found them absent; a key
 * stored by a concurrent transaction since then fails the COPY (23505),
 * and the keys are then decided one record at a time, which waits for
 * that transaction. A key the database refuses for its content (an
 * identity too long for the index, say) fails it as well (s->last_state):
 * pg_key_one finds the record. LEAD (NULL: none): SQL sent with the COPY,
 * in its round trip. */
static tm_status copy_new_keys(pg_sink *s, const tm_batch *b,
                               const size_t *first, const int *row_of, size_t m,
                               int64_t wall_ms, const char *lead,
                               tm_error *err) {
    pg_buf data = {0}, sql = {0};
    int toobig = 0;
    size_t fresh = 0;
    pg_bincopy_start(&data);
    for (size_t u = 0; u < m; u++) {
        if (row_of[u] >= 0)
            continue;
        const tm_record *rec = TM_CELEM(tm_record, b->records, first[u]);
        const tm_range *g = TM_CELEM(tm_range, b->ranges, rec->range);
        pg_bincopy_row(&data, 8);
        pg_bin_text(&data, s->config->connector, &toobig);
        pg_bin_text(&data, rec->identity, &toobig);
        pg_bin_text(&data, rec->identity_hash, &toobig);
        pg_bin_text(&data, g->topic, &toobig);
        pg_bin_int4(&data, g->partition);
        pg_bin_int8(&data, rec->offset);
        pg_bin_int8(&data, pg_applied_at(rec, wall_ms));
        pg_bin_int8(&data, wall_ms);
        fresh++;
    }
    pg_bincopy_end(&data);
    pg_buf_add(&sql, "COPY ");
    pg_buf_add(&sql, s->q_keys);
    pg_buf_add(&sql, " (connector, identity, payload_hash, first_topic, "
                     "first_partition, first_offset, applied_at, "
                     "applied_wall) FROM STDIN (FORMAT binary)");
    tm_status r = TM_OK;
    if (fresh == 0) {
        /* every key was stored before: nothing to send */
    } else if (data.oom || sql.oom || toobig || data.len > INT32_MAX) {
        s->host->set_error(err, "out of memory (batch %s: %zu business keys)",
                           b->batch_id, fresh);
        r = TM_RETRY;
    } else if ((r = pg_copy_start(s, lead, sql.p, err)) == TM_OK) {
        const char *abandon = NULL;
        if (PQputCopyData(s->conn, data.p, (int)data.len) != 1)
            abandon = "the business keys could not be sent";
        r = pg_copy_finish(s, abandon, "storing business keys", err);
    }
    pg_buf_free(&data);
    pg_buf_free(&sql);
    return r;
}

/* A keyed record: its identity and its index in the batch. */
typedef struct key_ref {
    const char *identity;
    size_t j;
} key_ref;

/* By identity, then batch order: each key's records form a run whose
 * first element is its first occurrence. Identities are compared byte for
 * byte, as the primary key (a deterministic collation) compares them. */
static int by_identity(const void *a, const void *b) {
    const key_ref *x = a, *y = b;
    int c = strcmp(x->identity, y->identity);
    return c ? c : (x->j > y->j) - (x->j < y->j);
}

tm_status pg_key_put(pg_sink *s, const tm_batch *b, size_t j, int outcome,
                     const char *detail, pg_key_set *out, tm_error *err) {
    out->outcome[j] = (unsigned char)outcome;
    if (outcome != 2)
        return TM_OK;
    if ((!out->detail &&
         !(out->detail = calloc(b->nrecords, sizeof *out->detail))) ||
        !(out->detail[j] = strdup(detail))) {
        s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
        return TM_RETRY;
    }
    return TM_OK;
}

/* The outcomes of one key's run K[0..n): ROW the probe's answer row
 * for the key, stored before this batch (all its records compare with the
 * stored row), or -1: the COPY stored it (the first occurrence is
 * new, the repeats compare with it). */
static tm_status decide_run(pg_sink *s, const tm_batch *b, const key_ref *k,
                            size_t n, PGresult *res, int row, pg_key_set *out,
                            tm_error *err) {
    char detail[512], part[16], off[32];
    const char *was, *topic, *p, *o;
    if (row < 0) {
        const tm_record *first = TM_CELEM(tm_record, b->records, k[0].j);
        const tm_range *g = TM_CELEM(tm_range, b->ranges, first->range);
        snprintf(part, sizeof part, "%d", (int)g->partition);
        snprintf(off, sizeof off, "%lld", (long long)first->offset);
        was = first->identity_hash;
        topic = g->topic;
        p = part;
        o = off;
        k++, n--;
    } else {
        was = PQgetisnull(res, row, 1) ? NULL : PQgetvalue(res, row, 1);
        topic = PQgetvalue(res, row, 2);
        p = PQgetvalue(res, row, 3);
        o = PQgetvalue(res, row, 4);
    }
    tm_status r = TM_OK;
    for (size_t i = 0; i < n && r == TM_OK; i++) {
        const tm_record *rec = TM_CELEM(tm_record, b->records, k[i].j);
        int same = same_hash(was, rec->identity_hash);
        if (!same)
            pg_key_conflict_detail(detail, sizeof detail, rec->identity, topic,
                                   p, o, was, rec->identity_hash);
        r = pg_key_put(s, b, k[i].j, same ? 1 : 2, detail, out, err);
    }
    return r;
}

/* Reads the probe's answer into ROW_OF (every key -1 before): its row for
 * distinct key u (the answer's 1-based ordinality); the keys not stored
 * before stay -1. */
static tm_status read_rows(pg_sink *s, PGresult *res, int *row_of, size_t m,
                           tm_error *err) {
    for (int i = 0; i < PQntuples(res); i++) {
        char *end;
        long o = strtol(PQgetvalue(res, i, 0), &end, 10);
        if (*end || o < 1 || (size_t)o > m || row_of[o - 1] >= 0) {
            s->host->set_error(err, "business keys: the server answered "
                                    "an ordinality out of range");
            return TM_FATAL;
        }
        row_of[o - 1] = i;
    }
    return TM_OK;
}

tm_status pg_keys_decide(pg_sink *s, const tm_batch *b,
                         const unsigned char *keyed, int64_t wall_ms,
                         pg_key_set *out, tm_error *err) {
    size_t n = 0, m = 0, cap = b->nrecords ? b->nrecords : 1;
    key_ref *k = malloc(cap * sizeof *k);
    size_t *run =
        malloc((cap + 1) * sizeof *run); /* key u: k[run[u] .. run[u+1]) */
    size_t *first = malloc(cap * sizeof *first); /* key u: its record */
    int *row_of = malloc(cap * sizeof *row_of);
    pg_binarray ids;
    pg_binarray_start(&ids, PG_OID_TEXT);
    tm_status r = TM_OK;
    PGresult *res = NULL;
    if (!k || !run || !first || !row_of) {
        s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
        r = TM_RETRY;
        goto done;
    }
    for (size_t j = 0; j < b->nrecords; j++)
        if (keyed[j])
            k[n++] = (key_ref){TM_CELEM(tm_record, b->records, j)->identity, j};
    if (n == 0)
        goto done;
    qsort(k, n, sizeof *k, by_identity);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || strcmp(k[i].identity, k[i - 1].identity) != 0) {
            pg_binarray_text(&ids, k[i].identity);
            first[m] = k[i].j;
            run[m++] = i;
        }
    run[m] = n;
    if (pg_binarray_finish(&ids) != 0) {
        s->host->set_error(err, "out of memory (batch %s: %zu business keys)",
                           b->batch_id, m);
        r = TM_RETRY;
        goto done;
    }
    for (size_t u = 0; u < m; u++)
        row_of[u] = -1;
    s->last_state[0] = '\0';
    int copied = 0;
    /* Nothing stored before in the last batch: most likely nothing in
     * this one either, and the COPY alone decides (the probe cost about a
     * third of the keys' CPU). */
    if (!s->keys_resent) {
        r = copy_new_keys(s, b, first, row_of, m, wall_ms,
                          "SAVEPOINT " KEYS_SAVEPOINT, err);
        if (r == TM_OK)
            copied = 1;
        else if (!s->conn || strcmp(s->last_state, "23505") != 0 ||
                 (r = pg_exec(s, "ROLLBACK TO SAVEPOINT " KEYS_SAVEPOINT,
                              "business keys: ROLLBACK TO SAVEPOINT", err)) !=
                     TM_OK)
            goto done; /* not a key stored before: the caller's to judge */
        else
            s->host->log(s->config->host_ctx, TM_LOG_DEBUG,
                         "batch %s: a business key was stored before; "
                         "probing the keys",
                         b->batch_id);
    }
    if (!copied) {
        const char *v[2] = {s->config->connector, ids.b.p};
        const int lens[2] = {0, (int)ids.b.len}, fmts[2] = {0, 1};
        s->last_state[0] = '\0';
        if ((r = prepare_probe(s, err)) != TM_OK)
            goto done;
        res = pg_query_prepared(s, PG_STMT_KEYS, 2, v, lens, fmts, 1,
                                "probing business keys", &r, err);
        if (!res || (r = read_rows(s, res, row_of, m, err)) != TM_OK ||
            (r = copy_new_keys(s, b, first, row_of, m, wall_ms, NULL, err)) !=
                TM_OK)
            goto done;
    }
    s->keys_resent = res && PQntuples(res) > 0;
    for (size_t u = 0; u < m && r == TM_OK; u++)
        r = decide_run(s, b, k + run[u], run[u + 1] - run[u], res, row_of[u],
                       out, err);
done:
    PQclear(res);
    pg_binarray_free(&ids);
    free(k);
    free(run);
    free(first);
    free(row_of);
    return r;
}

void pg_key_set_free(pg_key_set *k, size_t nrecords) {
    for (size_t j = 0; k->detail && j < nrecords; j++)
        free(k->detail[j]);
    free(k->detail);
    free(k->outcome);
    memset(k, 0, sizeof *k);
}
