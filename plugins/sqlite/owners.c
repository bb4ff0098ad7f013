/* Which connectors write which target table: tidemark_table_owners, beside
 * the markers. tidemark_markers is keyed by connector, not by table, so
 * without this record a second connector pointed at a table another one
 * writes would be accepted silently, each keeping its own markers over
 * rows they both add (verify then finds offsets "stored 3 times"). A
 * table is written by one connector unless every connector writing it
 * says "shared_table": true. Registration happens in the claim's
 * transaction (BEGIN IMMEDIATE: two connectors claiming take turns). */
#include <stdio.h>
#include <string.h>

#include "sqlite_sink.h"

/* The row that says the registry is in use in this database (no table is
 * named ""): from then on, markers are not read as owners, so deleting a
 * gone connector's row hands its table over. */
#define SQ_OWNERS_IN_USE                                                       \
    "INSERT OR IGNORE INTO " SQ_OWNERS " (table_name, connector, shared) "     \
    "VALUES ('', '', 0)"

/* OTHER was found through its markers (a database from before the
 * registry): the message names them, the only trace to remove. */
static tm_status refuse_legacy(sq_sink *s, const char *other, tm_error *err) {
    s->host->set_error(
        err,
        "setting \"shared_table\": table \"%s\" in %s holds rows below the "
        "markers of connector \"%.200s\" (its rows in %s; the database is "
        "from before %s); two connectors on one table need "
        "\"shared_table\": true in both (or, if that connector is gone, "
        "DELETE FROM %s WHERE connector = '%.200s')",
        s->set.table, s->set.path, other, SQ_MARKERS, SQ_OWNERS, SQ_MARKERS,
        other);
    return TM_FATAL;
}

static tm_status refuse(sq_sink *s, const char *other, int other_shared,
                        tm_error *err) {
    s->host->set_error(
        err,
        "setting \"shared_table\": table \"%s\" in %s is written by "
        "connector \"%.200s\"%s; two connectors on one table need "
        "\"shared_table\": true in both (or DELETE its row from %s if that "
        "connector is gone)",
        s->set.table, s->set.path, other,
        !s->set.shared_table ? ""
        : other_shared       ? ""
                             : ", which has \"shared_table\": false",
        SQ_OWNERS);
    return TM_FATAL;
}

/* One query, its parameters (those it has, in this order) ?1 the table,
 * ?2 the connector, ?3 shared_table: the first row's first column into
 * OTHER (empty: no row), its second into *flag. SQLite result code. */
static int first_row(sq_sink *s, const char *sql, char *other, size_t size,
                     int *flag) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    int nparams = rc == SQLITE_OK ? sqlite3_bind_parameter_count(st) : 0;
    if (rc == SQLITE_OK && nparams >= 1)
        rc = sqlite3_bind_text(st, 1, s->set.table, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && nparams >= 2)
        rc = sqlite3_bind_text(st, 2, s->config->connector, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && nparams >= 3)
        rc = sqlite3_bind_int(st, 3, s->set.shared_table);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    other[0] = '\0';
    if (rc == SQLITE_ROW) {
        const char *c = (const char *)sqlite3_column_text(st, 0);
        snprintf(other, size, "%s", c ? c : "?");
        if (flag)
            *flag = sqlite3_column_int(st, 1);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

/* Before the registry (no row at all in it), the only trace of another
 * connector is its markers over rows of the table: another connector
 * whose marker is past an offset the table holds. */
static int legacy_writer(sq_sink *s, char *other, size_t size) {
    if (s->schema_cols) {
        /* columns from the events' schemas: the table may not be made
         * yet, and a table not there holds no one's rows */
        int exists = 0;
        tm_error scratch = {sizeof scratch, ""};
        other[0] = '\0';
        if (sq_table_exists(s, &exists, &scratch) != TM_OK)
            return SQLITE_ERROR;
        if (!exists)
            return SQLITE_OK;
    }
    sq_buf b = {0};
    sq_buf_add(&b, "SELECT m.connector FROM " SQ_MARKERS " m WHERE "
                   "m.connector <> ?2 AND EXISTS (SELECT 1 "
                   "FROM ");
    sq_buf_ident(&b, s->set.table);
    sq_buf_add(&b, " t WHERE t._tm_topic = m.topic AND t._tm_partition = "
                   "m.\"partition\" AND t._tm_offset < m.next_offset) "
                   "LIMIT 1");
    int rc = b.oom ? SQLITE_NOMEM : first_row(s, b.p, other, size, NULL);
    sq_buf_free(&b);
    return rc;
}

tm_status sq_owner_register(sq_sink *s, const tm_marker *markers, size_t n,
                            tm_error *err) {
    char other[256];
    int other_shared = 0, any = 0;
    /* Another connector we may not share with: either side not shared. */
    int rc = first_row(s,
                       "SELECT connector, shared FROM " SQ_OWNERS
                       " WHERE table_name = ?1 COLLATE NOCASE AND connector "
                       "<> ?2 AND NOT "
                       "(shared AND ?3) ORDER BY connector LIMIT 1",
                       other, sizeof other, &other_shared);
    if (rc == SQLITE_OK && !other[0]) {
        /* Any row, of any table: the registry is in use in this database
         * (a hand-over may have left none for this table). */
        char me[8];
        rc = first_row(s, "SELECT 'any' FROM " SQ_OWNERS " LIMIT 1", me,
                       sizeof me, NULL);
        any = me[0] != '\0';
    }
    int legacy = 0;
    if (rc == SQLITE_OK && !other[0] && !any && !s->set.shared_table) {
        rc = legacy_writer(s, other, sizeof other);
        legacy = 1;
    }
    if (rc != SQLITE_OK)
        return sq_fail(s, rc, "claim: reading the table's owners", err);
    if (other[0])
        return legacy ? refuse_legacy(s, other, err)
                      : refuse(s, other, other_shared, err);
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(
        s->db,
        "INSERT INTO " SQ_OWNERS " (table_name, connector, shared) VALUES "
        "(?1, ?2, ?3) ON CONFLICT (table_name, connector) DO UPDATE SET "
        "shared = excluded.shared WHERE shared IS NOT excluded.shared",
        -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 1, s->set.table, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, s->config->connector, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(st, 3, s->set.shared_table);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) {
        int in_use = sq_exec(s, SQ_OWNERS_IN_USE);
        rc = in_use == SQLITE_OK ? SQLITE_DONE : in_use;
    }
    if (rc != SQLITE_DONE)
        return sq_fail(s, rc, "claim: registering the table's owner", err);
    /* Sharing a table is for different partitions: two connectors of one
     * partition would each store every offset (their own markers), and
     * their rows could not be told apart. Refused here, before a marker
     * is written, rather than found later by scan. */
    tm_status r = TM_OK;
    for (size_t i = 0; r == TM_OK && i < n; i++) {
        const tm_marker *m = TM_CELEM(tm_marker, markers, i);
        r = sq_owner_scan_check(s, m->topic, m->partition, err);
    }
    return r;
}

tm_status sq_owner_scan_check(sq_sink *s, const char *topic, int32_t partition,
                              tm_error *err) {
    if (!s->set.shared_table)
        return TM_OK; /* the table is this connector's alone */
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        s->db,
        "SELECT o.connector FROM " SQ_OWNERS " o JOIN " SQ_MARKERS
        " m ON m.connector = o.connector WHERE o.table_name = ?1 COLLATE "
        "NOCASE AND "
        "o.connector <> ?2 AND m.topic = ?3 AND m.\"partition\" = ?4 "
        "ORDER BY o.connector LIMIT 1",
        -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 1, s->set.table, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 2, s->config->connector, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 3, topic, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_int(st, 4, partition);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    tm_status r = TM_OK;
    if (rc == SQLITE_ROW) {
        const char *other = (const char *)sqlite3_column_text(st, 0);
        /* The rows carry topic, partition and offset, not the connector:
         * two connectors of one partition cannot be told apart. */
        s->host->set_error(err,
                           "table \"%s\" is shared (\"shared_table\": true) "
                           "and connector \"%.200s\" also writes %s[%d]: "
                           "its rows cannot be told from this connector's "
                           "(each would store every offset; they cannot be "
                           "read back or verified); connectors sharing a "
                           "table must read different partitions",
                           s->set.table, other ? other : "?", topic,
                           (int)partition);
        r = TM_FATAL;
    } else if (rc != SQLITE_DONE) {
        r = sq_fail(s, rc, "scan: reading the table's owners", err);
    }
    sqlite3_finalize(st);
    return r;
}
