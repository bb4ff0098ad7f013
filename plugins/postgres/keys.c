/* Business keys (dedup): which of a batch's keyed records are new, which
 * are duplicates and which are identity conflicts, decided as a set in one
 * statement: the batch's keys go as arrays, the keys stored before are
 * read by primary key, one INSERT stores the first occurrence of each
 * other key, and the statement answers only for the records that are not
 * simply new (a key stored before, an in-batch repeat). A key per round
 * trip cost a 2000-record batch 2000 round trips (docs/benchmarks.md).
 * pg_key_one is the same decision for one record: the fallback when the
 * set statement fails for a record's content (or a key stored
 * concurrently), to find which record it was. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_sink.h"

int64_t pg_applied_at(const tm_record *r, int64_t wall_ms) {
    return r->timestamp_ms >= 0 ? r->timestamp_ms : wall_ms;
}

/* Same payload hash (both absent counts as the same). */
static int same_hash(const char *stored, const char *now) {
    return (!stored && !now) || (stored && now && strcmp(stored, now) == 0);
}

static void conflict_detail(char *detail, size_t size, const char *identity,
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
        conflict_detail(detail, size, r->identity, PQgetvalue(res, 0, 1),
                        PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3), h,
                        r->identity_hash);
    PQclear(res);
    return same ? 1 : 2;
}

/* One element of a text[] literal: quoted, '"' and '\' escaped; NULL
 * unquoted. */
static void array_text(pg_buf *b, const char *v) {
    if (!v) {
        pg_buf_add(b, "NULL");
        return;
    }
    pg_buf_add(b, "\"");
    for (const char *p = v; *p;) {
        size_t n = strcspn(p, "\"\\");
        pg_buf_addn(b, p, n);
        p += n;
        if (*p) {
            char esc[2] = {'\\', *p++};
            pg_buf_addn(b, esc, 2);
        }
    }
    pg_buf_add(b, "\"");
}

static void array_int(pg_buf *b, int64_t v) {
    char t[32];
    snprintf(t, sizeof t, "%" PRId64, v);
    pg_buf_add(b, t);
}

enum { A_IDENT, A_HASH, A_TOPIC, A_PART, A_OFF, A_AT, NARRAYS };

/* The statement: $2..$7 the keyed records' arrays (identity, payload hash,
 * topic, partition, offset, applied_at) in offset order, $8 the wall
 * clock. f: each key's first occurrence; old: the keys stored before this
 * statement (its snapshot); ins: the first occurrences of the other keys,
 * stored now. A record comes back only when it is not simply new: its key
 * stored before or a repeat of an earlier record of the batch. The INSERT
 * has no ON CONFLICT: its speculative insertion cost a third more, and
 * the keys it inserts are known absent; one stored by a concurrent
 * transaction since the snapshot fails it (23505), and the keys are then
 * decided one record at a time, which waits for that transaction. */
static void set_sql(pg_sink *s, pg_buf *b) {
    pg_buf_add(b, "WITH b AS (SELECT * FROM unnest($2::text[], $3::text[], "
                  "$4::text[], $5::int[], $6::bigint[], $7::bigint[]) WITH "
                  "ORDINALITY AS u(identity, payload_hash, topic, part, off, "
                  "at, ord)), f AS (SELECT DISTINCT ON (identity) identity, "
                  "ord AS first FROM b ORDER BY identity, ord), old AS "
                  "(SELECT f.identity, k.* FROM f CROSS JOIN LATERAL (SELECT "
                  "payload_hash, first_topic, first_partition, first_offset "
                  "FROM ");
    pg_buf_add(b, s->q_keys);
    /* LATERAL ... LIMIT 1: one primary key probe per key of the batch,
     * never a scan of every key the connector stored (the planner takes
     * a hash join over a sequential scan for a thousand keys) */
    pg_buf_add(b, " WHERE connector = $1 AND identity = f.identity LIMIT 1) "
                  "k), ins AS (INSERT INTO ");
    pg_buf_add(b, s->q_keys);
    pg_buf_add(b, " (connector, identity, payload_hash, first_topic, "
                  "first_partition, first_offset, applied_at, applied_wall) "
                  "SELECT $1, b.identity, b.payload_hash, b.topic, b.part, "
                  "b.off, b.at, $8::bigint FROM b JOIN f ON f.first = b.ord "
                  "WHERE NOT EXISTS (SELECT 1 FROM old WHERE old.identity = "
                  "b.identity) ORDER BY b.ord RETURNING identity) "
                  "SELECT b.ord, f.first, old.identity IS NOT NULL, "
                  "old.payload_hash, old.first_topic, old.first_partition, "
                  "old.first_offset FROM b JOIN f USING (identity) LEFT JOIN "
                  "old USING (identity) LEFT JOIN ins USING (identity) WHERE "
                  "old.identity IS NOT NULL OR b.ord <> f.first OR "
                  "ins.identity IS NULL ORDER BY b.ord");
}

/* Index into idx[] of a 1-based ordinality from the server, or -1. */
static long ord_of(const char *v, size_t n) {
    char *end;
    long o = strtol(v, &end, 10);
    return *end || o < 1 || (size_t)o > n ? -1 : o - 1;
}

/* Reads the statement's answer into out[] and details[]. */
static tm_status read_answer(pg_sink *s, const tm_batch *b, const size_t *idx,
                             size_t n, PGresult *res, pg_key_set *out,
                             tm_error *err) {
    char detail[512];
    for (int i = 0; i < PQntuples(res); i++) {
        long o = ord_of(PQgetvalue(res, i, 0), n),
             f = ord_of(PQgetvalue(res, i, 1), n);
        if (o < 0 || f < 0) {
            s->host->set_error(err, "business keys: the server answered "
                                    "an ordinality out of range");
            return TM_FATAL;
        }
        size_t j = idx[o];
        const tm_record *r = TM_CELEM(tm_record, b->records, j);
        int same;
        if (PQgetvalue(res, i, 2)[0] == 't') {
            /* stored before this batch */
            const char *h =
                PQgetisnull(res, i, 3) ? NULL : PQgetvalue(res, i, 3);
            same = same_hash(h, r->identity_hash);
            if (!same)
                conflict_detail(detail, sizeof detail, r->identity,
                                PQgetvalue(res, i, 4), PQgetvalue(res, i, 5),
                                PQgetvalue(res, i, 6), h, r->identity_hash);
        } else if (o != f) {
            /* a repeat of record idx[f], stored by this statement */
            const tm_record *first = TM_CELEM(tm_record, b->records, idx[f]);
            const tm_range *g = TM_CELEM(tm_range, b->ranges, first->range);
            char part[16], off[32];
            snprintf(part, sizeof part, "%d", (int)g->partition);
            snprintf(off, sizeof off, "%lld", (long long)first->offset);
            same = same_hash(first->identity_hash, r->identity_hash);
            if (!same)
                conflict_detail(detail, sizeof detail, r->identity, g->topic,
                                part, off, first->identity_hash,
                                r->identity_hash);
        } else {
            /* neither in the snapshot nor stored: cannot happen (the
             * INSERT fails instead); the batch again decides it */
            s->host->set_error(err, "business key %.*s not stored",
                               (int)pg_utf8_prefix(r->identity, 100),
                               r->identity);
            return TM_RETRY;
        }
        out->outcome[j] = same ? 1 : 2;
        if (!same) {
            if (!out->detail &&
                !(out->detail = calloc(b->nrecords, sizeof *out->detail))) {
                s->host->set_error(err, "out of memory (batch %s)",
                                   b->batch_id);
                return TM_RETRY;
            }
            if (!(out->detail[j] = strdup(detail))) {
                s->host->set_error(err, "out of memory (batch %s)",
                                   b->batch_id);
                return TM_RETRY;
            }
        }
    }
    return TM_OK;
}

tm_status pg_keys_decide(pg_sink *s, const tm_batch *b,
                         const unsigned char *keyed, int64_t wall_ms,
                         pg_key_set *out, tm_error *err) {
    size_t n = 0, *idx = malloc((b->nrecords ? b->nrecords : 1) * sizeof *idx);
    pg_buf a[NARRAYS] = {{0}}, q = {0};
    tm_status r = TM_OK;
    PGresult *res = NULL;
    if (!idx) {
        s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
        return TM_RETRY;
    }
    for (size_t j = 0; j < b->nrecords; j++) {
        if (!keyed[j])
            continue;
        const tm_record *rec = TM_CELEM(tm_record, b->records, j);
        const tm_range *g = TM_CELEM(tm_range, b->ranges, rec->range);
        for (int k = 0; k < NARRAYS; k++)
            pg_buf_add(&a[k], n ? "," : "{");
        array_text(&a[A_IDENT], rec->identity);
        array_text(&a[A_HASH], rec->identity_hash);
        array_text(&a[A_TOPIC], g->topic);
        array_int(&a[A_PART], g->partition);
        array_int(&a[A_OFF], rec->offset);
        array_int(&a[A_AT], pg_applied_at(rec, wall_ms));
        idx[n++] = j;
    }
    int oom = 0;
    for (int k = 0; k < NARRAYS; k++) {
        pg_buf_add(&a[k], n ? "}" : "{}");
        oom |= a[k].oom;
    }
    set_sql(s, &q);
    char wall[32];
    snprintf(wall, sizeof wall, "%" PRId64, wall_ms);
    const char *v[8] = {
        s->config->connector, a[A_IDENT].p, a[A_HASH].p, a[A_TOPIC].p,
        a[A_PART].p,          a[A_OFF].p,   a[A_AT].p,   wall};
    if (n > 0 && (oom || q.oom)) {
        s->host->set_error(err, "out of memory (batch %s)", b->batch_id);
        r = TM_RETRY;
    } else if (n > 0) {
        s->last_state[0] = '\0';
        res = pg_query(s, q.p, 8, v, NULL, NULL, 1, "storing business keys", &r,
                       err);
        if (res)
            r = read_answer(s, b, idx, n, res, out, err);
    }
    PQclear(res);
    for (int k = 0; k < NARRAYS; k++)
        pg_buf_free(&a[k]);
    pg_buf_free(&q);
    free(idx);
    return r;
}

void pg_key_set_free(pg_key_set *k, size_t nrecords) {
    for (size_t j = 0; k->detail && j < nrecords; j++)
        free(k->detail[j]);
    free(k->detail);
    free(k->outcome);
    memset(k, 0, sizeof *k);
}
