/* Which connectors write which target table: tidemark_table_owners, beside
 * the markers in the configured schema. tidemark_markers is keyed by
 * connector, not by table, so without this record a second connector
 * pointed at a table another one writes would be accepted silently, each
 * keeping its own markers over rows they both add. A table is written by
 * one connector unless every connector writing it says "shared_table":
 * true. Registration happens in the claim's transaction, under an
 * advisory lock per table, so two connectors claiming at once take turns. */
#include <stdio.h>
#include <string.h>

#include "pg_sink.h"

/* Any key of the two-int advisory lock space: "TMOW" (tidemark owners). */
#define PG_OWNERS_LOCK_CLASS 0x544D4F57

static tm_status refuse(pg_sink *s, const char *other, int other_shared,
                        tm_error *err) {
    s->host->set_error(
        err,
        "setting \"shared_table\": table %s is written by connector "
        "\"%.*s\"%s"
        "; two connectors on one table need \"shared_table\": true in both "
        "(or DELETE its row from %s.%s if that connector is gone)",
        s->q_table, (int)pg_utf8_prefix(other, 200), other,
        !s->set.shared_table ? ""
        : other_shared       ? ""
                             : ", which has \"shared_table\": false",
        s->q_schema, PG_OWNERS);
    return TM_FATAL;
}

/* Runs SQL (reading, one value of a row or none) with statement_timeout
 * lifted for it alone: inside the caller's transaction, or in one of its
 * own. */
static PGresult *untimed(pg_sink *s, const char *sql, int n,
                         const char *const *v, const char *step, tm_status *r,
                         tm_error *err) {
    int own = PQtransactionStatus(s->conn) == PQTRANS_IDLE;
    char ms[32];
    snprintf(ms, sizeof ms, "%lld", (long long)s->set.statement_timeout_ms);
    const char *restore[1] = {ms};
    PGresult *res = NULL;
    if ((!own || (*r = pg_exec(s, "BEGIN", step, err)) == TM_OK) &&
        (*r = pg_exec(s, "SET LOCAL statement_timeout = 0", step, err)) ==
            TM_OK &&
        (res = pg_query(s, sql, n, v, NULL, NULL, 1, step, r, err)) != NULL) {
        PGresult *back = pg_query(s,
                                  "SELECT set_config('statement_timeout', $1, "
                                  "true)",
                                  1, restore, NULL, NULL, 1, step, r, err);
        PQclear(back);
        if (back && own)
            *r = pg_exec(s, "COMMIT", step, err);
        if (*r != TM_OK) {
            PQclear(res);
            res = NULL;
        }
    }
    if (!res && own)
        pg_rollback(s);
    return res;
}

/* Before the registry (or before this table's first registration), the
 * only trace of another connector is its markers over rows of the table:
 * another connector whose marker is past an offset of a row that this
 * connector's own markers do not explain (a row of a topic or partition it
 * never read, or past its own next offset). Rows this connector's markers
 * cover are taken as its own: two connectors reading one topic into two
 * tables are not refused (nothing in the database tells a row's writer,
 * so two that wrote one topic into one table before the registry are not
 * told apart either). Whatever "shared_table" says: the writer from before
 * the registry never said it.
 *
 * One pass over the table (the rows' first unexplained offset per topic
 * and partition, then the markers), not bound by statement_timeout_ms:
 * it runs until the table's first registration, which records its
 * outcome, and would otherwise time out on a large table at every try. */
static tm_status legacy_writer(pg_sink *s, const char *step, char *other,
                               size_t size, tm_error *err) {
    if (s->schema_cols) {
        /* columns from the events' schemas: the table may not be made
         * yet, and a table not there holds no one's rows */
        int exists = 0;
        tm_status r = pg_table_exists(s, &exists, err);
        other[0] = '\0';
        if (r != TM_OK || !exists)
            return r;
    }
    pg_buf b = {0};
    pg_buf_add(&b, "SELECT m.connector FROM ");
    pg_buf_add(&b, s->q_markers);
    pg_buf_add(&b, " m JOIN (SELECT t._tm_topic AS topic, t._tm_partition AS "
                   "part, min(t._tm_offset) AS first FROM ");
    pg_buf_add(&b, s->q_table);
    pg_buf_add(&b, " t LEFT JOIN ");
    pg_buf_add(&b, s->q_markers);
    pg_buf_add(&b, " o ON o.connector = $1 AND o.topic = t._tm_topic AND "
                   "o.\"partition\" = t._tm_partition WHERE o.next_offset IS "
                   "NULL OR t._tm_offset >= o.next_offset GROUP BY 1, 2) u ON "
                   "u.topic = m.topic AND u.part = m.\"partition\" WHERE "
                   "m.connector <> $1 AND u.first < m.next_offset ORDER BY "
                   "m.connector LIMIT 1");
    const char *v[1] = {s->config->connector};
    tm_status r = TM_FATAL;
    PGresult *res = b.oom ? NULL : untimed(s, b.p, 1, v, step, &r, err);
    if (b.oom)
        s->host->set_error(err, "%s: out of memory", step);
    pg_buf_free(&b);
    if (!res)
        return r;
    other[0] = '\0';
    if (PQntuples(res) == 1)
        snprintf(other, size, "%s", PQgetvalue(res, 0, 0));
    PQclear(res);
    return TM_OK;
}

/* Another connector writing the table that this one may not share it
 * with, into OTHER ("" if none; *other_shared its setting). STEP names
 * the call in errors. */
static tm_status other_writer(pg_sink *s, const char *step, char *other,
                              size_t size, int *other_shared, tm_error *err) {
    const char *v[3] = {s->set.table, s->config->connector,
                        s->set.shared_table ? "t" : "f"};
    pg_buf b = {0};
    pg_buf_add(&b, "SELECT count(*), (array_agg(connector ORDER BY connector) "
                   "FILTER (WHERE connector <> $2 AND NOT (shared AND "
                   "$3::boolean)))[1], (array_agg(shared ORDER BY connector) "
                   "FILTER (WHERE connector <> $2 AND NOT (shared AND "
                   "$3::boolean)))[1] FROM ");
    pg_buf_add(&b, s->q_owners);
    pg_buf_add(&b, " WHERE table_name = $1");
    tm_status r = TM_FATAL;
    PGresult *res =
        b.oom ? NULL : pg_query(s, b.p, 3, v, NULL, NULL, 1, step, &r, err);
    if (b.oom)
        s->host->set_error(err, "%s: out of memory", step);
    pg_buf_free(&b);
    if (!res)
        return r;
    int any = strcmp(PQgetvalue(res, 0, 0), "0") != 0;
    *other_shared = *PQgetvalue(res, 0, 2) == 't';
    other[0] = '\0';
    if (!PQgetisnull(res, 0, 1))
        snprintf(other, size, "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    /* No registration for the table yet: a writer from before them, who
     * never said "shared_table" (consent is mutual, so this connector's
     * own setting does not matter). */
    if (!other[0] && !any) {
        *other_shared = 0;
        return legacy_writer(s, step, other, size, err);
    }
    return TM_OK;
}

tm_status pg_owner_check(pg_sink *s, tm_error *err) {
    /* validate may run before open made the tables: nothing to read then */
    const char *v[3] = {s->q_owners, s->q_markers, s->q_table};
    tm_status r = TM_FATAL;
    PGresult *res =
        pg_query(s,
                 "SELECT to_regclass($1) IS NOT NULL AND "
                 "to_regclass($2) IS NOT NULL AND to_regclass($3) "
                 "IS NOT NULL",
                 3, v, NULL, NULL, 1, "looking up the tables", &r, err);
    if (!res)
        return r;
    int exist = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    if (!exist)
        return TM_OK;
    char other[256];
    int other_shared = 0;
    r = other_writer(s, "reading the table's owners", other, sizeof other,
                     &other_shared, err);
    if (r != TM_OK || !other[0])
        return r;
    refuse(s, other, other_shared, err);
    return TM_INVALID;
}

tm_status pg_owner_register(pg_sink *s, tm_error *err) {
    char cls[32];
    snprintf(cls, sizeof cls, "%d", PG_OWNERS_LOCK_CLASS);
    tm_status r = TM_FATAL;
    /* Its own statement: READ COMMITTED reads below from a snapshot taken
     * after the lock, so a registration committed meanwhile is seen. */
    PGresult *res =
        pg_query(s, "SELECT pg_advisory_xact_lock($1::int, hashtext($2))", 2,
                 (const char *const[]){cls, s->set.table}, NULL, NULL, 1,
                 "claim: locking the table's owners", &r, err);
    if (!res)
        return r;
    PQclear(res);
    char other[256];
    int other_shared = 0;
    if ((r = other_writer(s, "claim: reading the table's owners", other,
                          sizeof other, &other_shared, err)) != TM_OK)
        return r;
    if (other[0])
        return refuse(s, other, other_shared, err);
    const char *v[3] = {s->set.table, s->config->connector,
                        s->set.shared_table ? "t" : "f"};
    pg_buf b = {0};
    pg_buf_add(&b, "INSERT INTO ");
    pg_buf_add(&b, s->q_owners);
    pg_buf_add(&b, " AS o (table_name, connector, shared) VALUES ($1, $2, "
                   "$3::boolean) ON CONFLICT (table_name, connector) DO "
                   "UPDATE SET shared = EXCLUDED.shared WHERE o.shared IS "
                   "DISTINCT FROM EXCLUDED.shared");
    res = b.oom ? NULL
                : pg_query(s, b.p, 3, v, NULL, NULL, 0,
                           "claim: registering the table's owner", &r, err);
    int oom = b.oom;
    if (oom)
        s->host->set_error(err, "claim: out of memory");
    pg_buf_free(&b);
    PQclear(res);
    return oom ? TM_FATAL : r;
}
