/* Smoke test of the PostgreSQL cluster started by scripts/postgres.sh, through
 * libpq: connect with TIDEMARK_PG_CONNINFO, check server_version >= 15, create
 * a temp table, insert with PQexecParams, read back. Fails (exit 1) when the
 * variable is unset or the server is unreachable; never skips. */
#include <libpq-fe.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static PGconn *conn;

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "pg_smoke: FAIL: %s%s%s\n", what, detail ? ": " : "",
            detail ? detail : "");
    if (conn)
        PQfinish(conn);
    exit(1);
}

static PGresult *exec_ok(const char *sql, ExecStatusType want) {
    PGresult *r = PQexec(conn, sql);
    if (PQresultStatus(r) != want)
        fail(sql, PQerrorMessage(conn));
    return r;
}

int main(void) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    const char *ci = getenv("TIDEMARK_PG_CONNINFO");
    if (!ci || !*ci)
        fail("TIDEMARK_PG_CONNINFO is not set (scripts/postgres.sh start; . "
             "scripts/env.sh)",
             NULL);
    conn = PQconnectdb(ci);
    if (PQstatus(conn) != CONNECTION_OK)
        fail("connect", PQerrorMessage(conn));
    int ver = PQserverVersion(conn);
    printf("pg_smoke: connected to %s, server_version_num %d\n", ci, ver);
    if (ver < 150000)
        fail("server_version must be >= 15", NULL);

    PGresult *r = exec_ok("SHOW fsync", PGRES_TUPLES_OK);
    printf("pg_smoke: fsync = %s\n", PQgetvalue(r, 0, 0));
    PQclear(r);

    PQclear(exec_ok("CREATE TEMP TABLE smoke (id bigint PRIMARY KEY, body text "
                    "NOT NULL, doc jsonb)",
                    PGRES_COMMAND_OK));
    PQclear(exec_ok("BEGIN", PGRES_COMMAND_OK));
    for (int i = 0; i < 100; i++) {
        char id[32], body[64], doc[64];
        snprintf(id, sizeof id, "%d", i);
        snprintf(body, sizeof body, "row %d with 'quotes' and \\ backslash", i);
        snprintf(doc, sizeof doc, "{\"n\": %d}", i);
        const char *vals[3] = {id, body, doc};
        r = PQexecParams(conn,
                         "INSERT INTO smoke (id, body, doc) VALUES "
                         "($1::bigint, $2, $3::jsonb)",
                         3, NULL, vals, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            fail("insert", PQerrorMessage(conn));
        PQclear(r);
    }
    PQclear(exec_ok("COMMIT", PGRES_COMMAND_OK));

    const char *p[1] = {"42"};
    r = PQexecParams(conn,
                     "SELECT body, (doc->>'n')::int, (SELECT count(*) FROM "
                     "smoke) FROM smoke WHERE id = $1",
                     1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1)
        fail("select", PQerrorMessage(conn));
    if (strcmp(PQgetvalue(r, 0, 0), "row 42 with 'quotes' and \\ backslash") !=
        0)
        fail("body mismatch", PQgetvalue(r, 0, 0));
    if (strcmp(PQgetvalue(r, 0, 1), "42") != 0)
        fail("jsonb mismatch", PQgetvalue(r, 0, 1));
    if (strcmp(PQgetvalue(r, 0, 2), "100") != 0)
        fail("row count mismatch", PQgetvalue(r, 0, 2));
    PQclear(r);
    PQfinish(conn);
    conn = NULL;
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("pg_smoke: PASS in %.3f s: PostgreSQL %d.%d, 100 rows inserted with "
           "PQexecParams and read back\n",
           (double)(b.tv_sec - a.tv_sec) +
               (double)(b.tv_nsec - a.tv_nsec) / 1e9,
           ver / 10000, ver % 10000);
    return 0;
}
