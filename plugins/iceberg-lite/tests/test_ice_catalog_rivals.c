/* Another engine on the same catalog table (issue 16 part 5), through the
 * plugin API. Each case failed on the code before its fix.
 *
 * pyiceberg (RIVALS_PYTHON, not our code) is the other engine: it commits
 * to the same catalog row exactly between our metadata file and our swap
 * (the host's fault point after_marker), so our swap loses and the commit
 * is rebuilt on pyiceberg's version.
 *   pyiceberg_tag_during_swap_kept   our rebuilt commit keeps the tag
 *                                    pyiceberg just committed
 *   table_replaced_under_running_sink  a table of another table-uuid in
 *                                    the row is refused (FATAL naming both)
 *   pyiceberg_append_refused_during_swap, pyiceberg_append_refused_at_open
 *                                    a data snapshot pyiceberg appended is
 *                                    refused (FATAL at the commit, INVALID
 *                                    at open) naming it: the connector must
 *                                    be the table's only writer of data
 *                                    snapshots (before: markers read as 0,
 *                                    a CONFLICT "gap", then FATAL on the
 *                                    foreign manifest list)
 * Argument "pg" (TIDEMARK_PG_CONNINFO):
 *   pg_reconnect_keeps_synchronous_commit  after the connection is lost,
 *       PQreset's new session still runs with synchronous_commit on, not
 *       the connection's default (here off, from the URI's options), and
 *       lock_timeout and statement_timeout.
 *   pg_swap_waits_bounded  a swap whose row another session holds FOR
 *       UPDATE gives up within its lock timeout, nothing changed (-1: the
 *       commit is retried), and goes through once the lock is gone (before:
 *       it waited for as long as the lock was held, while vacuum could
 *       take the batch's files).
 *   pg_swap_timeout_names_the_lock  that refusal names the row's lock,
 *       the session holding it (pid, state) and the bound (before:
 *       "canceling statement due to statement timeout" alone).
 *   pg_swap_commit_wait_bounded  a swap whose commit waits (a deferred
 *       trigger sleeping 20 s) gives up at its lock timeout and a slack,
 *       cancelled, nothing changed (before: it waited, then published).
 *   pg_register_commit_wait_bounded  the same for the table's
 *       registration (the INSERT's transaction's COMMIT).
 *   pg_swap_connection_cut_in_commit  the connection cut while the
 *       commit waits: -2 (unknown), not the "UPDATE 1" that came before
 *       the commit, and the orphaned statement cancelled (before: 0,
 *       "swapped", and the statement published when its commit ended).
 *   pg_commit_retries_on_held_row  the same through the sink's commit
 *       (catalog_lock_timeout_ms): RETRY, nothing published, then the
 *       batch sent again commits. */
#define _XOPEN_SOURCE 700

#include <check.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "catalog_backend.h"
#include "check_main.h"
#include "ice_cancel_proxy.h"
#include "ice_fixture.h"
#include "services/host_services.h"

static ice_fx fx;
static char cat_uri[1024];

static const char *python(void) {
    const char *py = getenv("RIVALS_PYTHON");
    ck_assert_msg(py && *py, "RIVALS_PYTHON is not set (the venv's python)");
    return py;
}

/* Runs pyiceberg's SCRIPT with sys.argv[1] the catalog URI: its exit
 * status; its stdout's first line into out. */
static int run_py(const char *script, char *out, size_t size) {
    char path[512], cmd[2048];
    snprintf(path, sizeof path, "%s/rival.py", fx.dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(script, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s'", python(), path, cat_uri);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    if (out) {
        out[0] = '\0';
        if (!fgets(out, (int)size, p))
            out[0] = '\0';
        out[strcspn(out, "\n")] = '\0';
    }
    char sink[256];
    while (fgets(sink, sizeof sink, p))
        fputs(sink, stderr);
    return pclose(p);
}

static void setup(void) {
    char text[2048];
    ck_assert_int_eq(ice_fx_init(&fx, ""), 0);
    snprintf(cat_uri, sizeof cat_uri, "sqlite:///%s/catalog.db", fx.dir);
    snprintf(text, sizeof text,
             "{\"path\": \"$T\", \"catalog_uri\": \"%s\", "
             "\"catalog_name\": \"lake\", \"catalog_namespace\": \"sales\", "
             "\"catalog_table\": \"orders\"}",
             cat_uri);
    ck_assert_int_eq(ice_fx_settings(&fx, text), 0);
}

static void teardown(void) {
    ice_fx_done(&fx, 0);
}

static tm_status commit_range(void *sink, const char *id, int32_t p, int64_t at,
                              int n, int64_t epoch, tm_error *err) {
    ice_fx_batch kb;
    ice_fx_batch_init(&kb, id);
    uint32_t r = ice_fx_range(&kb, p, at, at + n, epoch);
    for (int64_t o = at; o < at + n; o++)
        ice_fx_record(&kb, r, o);
    ice_fx_seal(&kb);
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    tm_status rc = ice_api->commit(sink, &kb.b, err);
    ice_fx_batch_free(&kb);
    return rc;
}

/* ---- pyiceberg between our metadata file and our swap ---------------- */

static const char *rival_script;
static int rival_status = -1;
static char rival_out[256]; /* the rival's first line of output */

static void rival_fault(const char *point) {
    if (!rival_script || rival_status != -1 ||
        strcmp(point, TM_FAULT_AFTER_MARKER) != 0)
        return;
    rival_status = run_py(rival_script, rival_out, sizeof rival_out);
}

static const char APPEND_PY[] =
    "import sys, pyarrow as pa\n"
    "from pyiceberg.catalog.sql import SqlCatalog\n"
    "t = SqlCatalog('lake', uri=sys.argv[1]).load_table('sales.orders')\n"
    "rows = [{'id': 1000 + i, '_tm_topic': 'pyiceberg', '_tm_partition': 99,"
    " '_tm_offset': i} for i in range(2)]\n"
    "t.append(pa.Table.from_pylist(rows, schema=t.schema().as_arrow()))\n"
    "print(t.metadata.current_snapshot_id)\n";

static const char TAG_PY[] =
    "import sys\n"
    "from pyiceberg.catalog.sql import SqlCatalog\n"
    "t = SqlCatalog('lake', uri=sys.argv[1]).load_table('sales.orders')\n"
    "t.manage_snapshots().create_tag(t.metadata.current_snapshot_id, "
    "'audit').commit()\n";

/* What pyiceberg reads back: "<rows> <pyiceberg rows> <refs>". */
static const char READ_PY[] =
    "import sys\n"
    "from pyiceberg.catalog.sql import SqlCatalog\n"
    "t = SqlCatalog('lake', uri=sys.argv[1]).load_table('sales.orders')\n"
    "a = t.scan().to_arrow()\n"
    "topics = a.column('_tm_topic').to_pylist()\n"
    "print(len(topics), topics.count('pyiceberg'), "
    "','.join(sorted(t.metadata.refs)))\n";

/* Our commit of 4 records with pyiceberg's SCRIPT landing before our
 * swap, which must answer WANT (its error into race_err); what pyiceberg
 * reads after, into out. The commit's status. */
static tm_error race_err;

static tm_status race_with(const char *script, char *out, size_t size,
                           tm_status want) {
    tm_host_api host = *tm_host_services();
    host.fault = rival_fault;
    void *sink;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_api->open(&host, &fx.config, &sink, &err), TM_OK);
    tm_marker m[1];
    ck_assert_int_eq(ice_fx_claim(sink, m, 1, &err), TM_OK);
    /* pyiceberg needs a table with a snapshot to tag: a first batch. */
    rival_script = NULL;
    ck_assert_int_eq(commit_range(sink, "b-0", 0, 0, 2, m[0].epoch, &err),
                     TM_OK);
    rival_script = script;
    rival_status = -1;
    tm_status rc = commit_range(sink, "b-2", 0, 2, 4, m[0].epoch, &race_err);
    ck_assert_msg(rc == want, "commit: %s (%s)", tm_status_name(rc),
                  race_err.message);
    /* Inconclusive unless pyiceberg committed where intended. */
    ck_assert_msg(rival_status == 0,
                  "inconclusive: pyiceberg's commit at %s did not run or "
                  "failed (status %d)",
                  TM_FAULT_AFTER_MARKER, rival_status);
    ice_api->close(sink);
    ck_assert_int_eq(run_py(READ_PY, out, size), 0);
    return rc;
}

/* The sink's refusal of a table whose current snapshot another engine
 * wrote: names that snapshot (SNAP_ID) and its operation. */
static void assert_foreign_refusal(const char *message, const char *snap_id) {
    char want[128];
    snprintf(want, sizeof want, "current snapshot %s (operation \"append\"",
             snap_id);
    ck_assert_msg(*snap_id && strstr(message, want) &&
                      strstr(message, "is another engine's") &&
                      strstr(message, "only writer of data snapshots"),
                  "the refusal does not name pyiceberg's snapshot %s: %s",
                  snap_id, message);
}

/* The catalog "lake" (cat_uri), table sales.orders, opened to write with
 * the given lock timeout. */
static ice_catalog *open_orders(int lock_timeout_ms) {
    ice_catalog_ref ref = {cat_uri, "lake", "sales", "orders", lock_timeout_ms};
    ice_catalog *c = NULL;
    char why[1024];
    ck_assert_msg(ice_catalog_open(&ref, 1, 1, &c, why, sizeof why) == 0, "%s",
                  why);
    return c;
}

/* The connector must be the table's only writer of data snapshots
 * (docs/iceberg-lite.md, "Catalog"): pyiceberg's append landing between
 * our metadata file and our swap stops the commit FATAL naming it, never
 * a CONFLICT "gap"; both earlier commits' rows are there, ours once. */
START_TEST(pyiceberg_append_refused_during_swap) {
    char got[256];
    race_with(APPEND_PY, got, sizeof got, TM_FATAL);
    assert_foreign_refusal(race_err.message, rival_out);
    /* Ours 2 (the refused 4 not), pyiceberg's 2. */
    ck_assert_msg(strncmp(got, "4 2 ", 4) == 0, "pyiceberg reads \"%s\"", got);
}
END_TEST

/* The connector committed [0, 2) and stopped; pyiceberg appended; the
 * restarted sink refuses the table at open (INVALID) naming pyiceberg's
 * snapshot, rather than reading the markers as absent. */
START_TEST(pyiceberg_append_refused_at_open) {
    void *sink;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_OK);
    tm_marker m[1];
    ck_assert_int_eq(ice_fx_claim(sink, m, 1, &err), TM_OK);
    ck_assert_int_eq(commit_range(sink, "b-0", 0, 0, 2, m[0].epoch, &err),
                     TM_OK);
    ice_api->close(sink);
    char snap_id[256];
    ck_assert_int_eq(run_py(APPEND_PY, snap_id, sizeof snap_id), 0);
    sink = NULL;
    tm_status rc = ice_fx_open(&fx, &sink, &err);
    if (rc == TM_OK)
        ice_api->close(sink);
    ck_assert_msg(rc == TM_INVALID, "open after pyiceberg's append: %s (%s)",
                  tm_status_name(rc), err.message);
    assert_foreign_refusal(err.message, snap_id);
    char rows[256];
    ck_assert_int_eq(run_py(READ_PY, rows, sizeof rows), 0);
    ck_assert_msg(strncmp(rows, "4 2 ", 4) == 0, "pyiceberg reads \"%s\"",
                  rows);
}
END_TEST

START_TEST(pyiceberg_tag_during_swap_kept) {
    char got[256];
    race_with(TAG_PY, got, sizeof got, TM_OK);
    ck_assert_msg(strncmp(got, "6 0 ", 4) == 0, "pyiceberg reads \"%s\"", got);
    ck_assert_msg(strstr(got, "audit"),
                  "FINDING: the tag pyiceberg committed before our swap is "
                  "gone after our rebuilt commit (rows, pyiceberg rows, "
                  "refs: \"%s\")",
                  got);
}
END_TEST

/* pyiceberg drops the table (no purge) and creates another at the same
 * location while the connector runs: the row now names a table of
 * another table-uuid. The sink must not take it for its own. */
static const char REPLACE_PY[] =
    "import sys\n"
    "from pyiceberg.catalog.sql import SqlCatalog\n"
    "c = SqlCatalog('lake', uri=sys.argv[1])\n"
    "t = c.load_table('sales.orders')\n"
    "c.drop_table('sales.orders')\n"
    "c.create_table('sales.orders', schema=t.schema(), "
    "location=t.metadata.location)\n"
    "print(t.metadata.table_uuid)\n";

START_TEST(table_replaced_under_running_sink) {
    void *sink;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_OK);
    tm_marker m[1];
    ck_assert_int_eq(ice_fx_claim(sink, m, 1, &err), TM_OK);
    ck_assert_int_eq(commit_range(sink, "b-0", 0, 0, 2, m[0].epoch, &err),
                     TM_OK);
    char old_uuid[128];
    ck_assert_int_eq(run_py(REPLACE_PY, old_uuid, sizeof old_uuid), 0);
    tm_status rc = commit_range(sink, "b-2", 0, 2, 2, m[0].epoch, &err);
    tm_marker got = {
        .struct_size = sizeof got, .topic = "orders", .partition = 0};
    tm_status rm = ice_api->read_markers(sink, &got, 1, &err);
    ice_api->close(sink);
    char rows[256];
    ck_assert_int_eq(run_py(READ_PY, rows, sizeof rows), 0);
    fprintf(stderr,
            "replaced: commit %s, read_markers %s next %lld, "
            "pyiceberg \"%s\" (%s)\n",
            tm_status_name(rc), tm_status_name(rm), (long long)got.next_offset,
            rows, err.message);
    ck_assert_msg(rc == TM_FATAL || rc == TM_INVALID,
                  "FINDING: the row names another table (uuid changed from "
                  "%s) and the sink's commit answered %s (want a refusal "
                  "naming the replaced table); read_markers then says "
                  "next_offset %lld",
                  old_uuid, tm_status_name(rc), (long long)got.next_offset);
}
END_TEST

/* ---- PostgreSQL: the session's durability after a reconnect --------- */

static char *pg_show(ice_catalog *c, const char *name) {
    char sql[64];
    snprintf(sql, sizeof sql, "SHOW %s", name);
    PGresult *r = PQexec(c->db, sql);
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s",
                  PQresultErrorMessage(r));
    char *v = strdup(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

static void quiet_notice(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

static void conninfo_value(const char *ci, const char *key, char *out,
                           size_t size) {
    size_t n = strlen(key);
    for (const char *p = ci; *p;) {
        p += strspn(p, " ");
        size_t len = strcspn(p, " ");
        if (len > n && strncmp(p, key, n) == 0 && p[n] == '=') {
            snprintf(out, size, "%.*s", (int)(len - n - 1), p + n + 1);
            return;
        }
        p += len;
    }
    ck_abort_msg("no %s= in TIDEMARK_PG_CONNINFO", key);
}

START_TEST(pg_reconnect_keeps_synchronous_commit) {
    const char *ci = getenv("TIDEMARK_PG_CONNINFO");
    ck_assert_msg(ci && *ci, "TIDEMARK_PG_CONNINFO is not set");
    char host[256], port[32], db[256], user[256], schema[64], sql[256];
    conninfo_value(ci, "host", host, sizeof host);
    conninfo_value(ci, "port", port, sizeof port);
    conninfo_value(ci, "dbname", db, sizeof db);
    conninfo_value(ci, "user", user, sizeof user);
    PGconn *admin = PQconnectdb(ci);
    ck_assert_int_eq(PQstatus(admin), CONNECTION_OK);
    snprintf(schema, sizeof schema, "rivals_sync_%d", (int)getpid());
    snprintf(sql, sizeof sql, "CREATE SCHEMA %s", schema);
    PQclear(PQexec(admin, sql));
    /* The connection's default is off (as a server's or a role's may be). */
    snprintf(cat_uri, sizeof cat_uri,
             "postgresql://%s@%s:%s/%s?options=-csearch_path%%3D%s%%20"
             "-csynchronous_commit%%3Doff",
             user, host, port, db, schema);
    ice_catalog *c = open_orders(0);
    char why[1024];
    char *before = pg_show(c, "synchronous_commit");
    ck_assert_str_eq(before, "on"); /* what open set */
    /* The connection is lost (a failover, an idle timeout, an admin). */
    snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%d)",
             PQbackendPID(c->db));
    PGresult *r = PQexec(admin, sql);
    ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
    PQclear(r);
    char *loc = NULL;
    /* The first call after it fails (connection lost) or reconnects. */
    int rc = ice_catalog_load(c, &loc, why, sizeof why);
    if (rc < 0)
        rc = ice_catalog_load(c, &loc, why, sizeof why);
    ck_assert_msg(rc == 1, "load after reconnect: %d %s", rc, why);
    /* Inconclusive unless a new session answers. */
    ck_assert_int_eq(PQstatus(c->db), CONNECTION_OK);
    char *after = pg_show(c, "synchronous_commit");
    /* The bounds of a swap's wait too (the default 20 s). */
    char *lock = pg_show(c, "lock_timeout");
    char *stmt = pg_show(c, "statement_timeout");
    ice_catalog_close(c);
    snprintf(sql, sizeof sql, "DROP SCHEMA %s CASCADE", schema);
    PQclear(PQexec(admin, sql));
    PQfinish(admin);
    ck_assert_msg(strcmp(after, "on") == 0,
                  "FINDING: after a reconnect the catalog session's "
                  "synchronous_commit is \"%s\" (was \"%s\" after open): "
                  "swaps are acknowledged before their WAL is flushed",
                  after, before);
    ck_assert_str_eq(lock, "20s");
    ck_assert_str_eq(stmt, "20s");
    free(before);
    free(after);
    free(lock);
    free(stmt);
    free(loc);
}
END_TEST

/* ---- PostgreSQL: a swap waiting on the row's lock gives up ---------- */

/* The catalog's lock timeout in the test, and how long the test lets the
 * swap wait before calling it unbounded. */
#define PG_LOCK_TIMEOUT_MS 1500
#define PG_WAIT_LIMIT_S    15

static void waited_too_long(int sig) {
    (void)sig;
    static const char msg[] =
        "FINDING: the catalog's swap waited > 15 s on the row lock another "
        "session holds (no lock or statement timeout)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void admin_ok(PGconn *admin, const char *sql, ExecStatusType want) {
    PGresult *r = PQexec(admin, sql);
    ck_assert_msg(PQresultStatus(r) == want, "%s: %s", sql,
                  PQresultErrorMessage(r));
    PQclear(r);
}

/* The row's metadata_location as another session reads it (malloc'd). */
static char *row_loc(PGconn *admin, const char *schema) {
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT metadata_location FROM %s.iceberg_tables",
             schema);
    PGresult *r = PQexec(admin, sql);
    ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1,
                  "%s", PQresultErrorMessage(r));
    char *v = strdup(PQgetvalue(r, 0, 0));
    PQclear(r);
    ck_assert_ptr_nonnull(v);
    return v;
}

/* A schema of its own (SCHEMA, size 64) for a PostgreSQL catalog, whose
 * URI goes to cat_uri; the other session's connection. */
static PGconn *pg_catalog_schema(char *schema) {
    const char *ci = getenv("TIDEMARK_PG_CONNINFO");
    ck_assert_msg(ci && *ci, "TIDEMARK_PG_CONNINFO is not set");
    char host[256], port[32], db[256], user[256], sql[256];
    conninfo_value(ci, "host", host, sizeof host);
    conninfo_value(ci, "port", port, sizeof port);
    conninfo_value(ci, "dbname", db, sizeof db);
    conninfo_value(ci, "user", user, sizeof user);
    PGconn *admin = PQconnectdb(ci);
    ck_assert_int_eq(PQstatus(admin), CONNECTION_OK);
    PQsetNoticeProcessor(admin, quiet_notice, NULL);
    snprintf(schema, 64, "rivals_lock_%d", (int)getpid());
    snprintf(sql, sizeof sql, "CREATE SCHEMA %s", schema);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
    snprintf(cat_uri, sizeof cat_uri,
             "postgresql://%s@%s:%s/%s?options=-csearch_path%%3D%s", user, host,
             port, db, schema);
    return admin;
}

/* Another session (an operator's, a backup tool's) holds the row. */
static void hold_row(PGconn *admin, const char *schema) {
    char sql[256];
    admin_ok(admin, "BEGIN", PGRES_COMMAND_OK);
    snprintf(sql, sizeof sql, "SELECT 1 FROM %s.iceberg_tables FOR UPDATE",
             schema);
    admin_ok(admin, sql, PGRES_TUPLES_OK);
}

static void drop_schema(PGconn *admin, const char *schema) {
    char sql[256];
    snprintf(sql, sizeof sql, "DROP SCHEMA %s CASCADE", schema);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
    PQfinish(admin);
}

START_TEST(pg_swap_waits_bounded) {
    char schema[64];
    PGconn *admin = pg_catalog_schema(schema);
    ice_catalog *c = open_orders(PG_LOCK_TIMEOUT_MS);
    char why[1024];
    ck_assert_msg(
        ice_catalog_swap(c, NULL, "s3://b/v1.json", why, sizeof why) == 0, "%s",
        why);
    hold_row(admin, schema);
    signal(SIGALRM, waited_too_long);
    alarm(PG_WAIT_LIMIT_S);
    double t0 = now_s();
    int rc = ice_catalog_swap(c, "s3://b/v1.json", "s3://b/v2.json", why,
                              sizeof why);
    double waited = now_s() - t0;
    alarm(0);
    char *held = row_loc(admin, schema);
    admin_ok(admin, "ROLLBACK", PGRES_COMMAND_OK);
    ck_assert_msg(rc == -1,
                  "a swap that timed out on the lock answered %d (want -1: "
                  "not published, retried): %s",
                  rc, why);
    ck_assert_msg(strstr(why, "canceling statement due to"),
                  "the error does not say the lock's wait ran out: %s", why);
    ck_assert_msg(waited >= PG_LOCK_TIMEOUT_MS / 1000.0 - 0.1 &&
                      waited < PG_LOCK_TIMEOUT_MS / 1000.0 + 5,
                  "the swap gave up after %.1f s (lock timeout %d ms)", waited,
                  PG_LOCK_TIMEOUT_MS);
    ck_assert_str_eq(held, "s3://b/v1.json"); /* nothing published */
    /* The lock gone, the same swap goes through. */
    rc = ice_catalog_swap(c, "s3://b/v1.json", "s3://b/v2.json", why,
                          sizeof why);
    ck_assert_msg(rc == 0, "the swap after the lock: %d %s", rc, why);
    char *after = row_loc(admin, schema);
    ice_catalog_close(c);
    drop_schema(admin, schema);
    ck_assert_str_eq(after, "s3://b/v2.json");
    free(held);
    free(after);
}
END_TEST

/* The swap's refusal says what it waited for: the lock on the table's
 * catalog row, held by the other session (its pid, as pg_stat_activity
 * shows it), and the bound, not PostgreSQL's "statement timeout" alone
 * (both timeouts are the same, and PostgreSQL then reports the statement
 * one, whose timer started first). */
START_TEST(pg_swap_timeout_names_the_lock) {
    char schema[64], pid[32];
    PGconn *admin = pg_catalog_schema(schema);
    ice_catalog *c = open_orders(PG_LOCK_TIMEOUT_MS);
    char why[1024];
    ck_assert_msg(
        ice_catalog_swap(c, NULL, "s3://b/v1.json", why, sizeof why) == 0, "%s",
        why);
    hold_row(admin, schema);
    snprintf(pid, sizeof pid, "pid %d", PQbackendPID(admin));
    signal(SIGALRM, waited_too_long);
    alarm(PG_WAIT_LIMIT_S);
    int rc = ice_catalog_swap(c, "s3://b/v1.json", "s3://b/v2.json", why,
                              sizeof why);
    alarm(0);
    admin_ok(admin, "ROLLBACK", PGRES_COMMAND_OK);
    ice_catalog_close(c);
    drop_schema(admin, schema);
    ck_assert_msg(rc == -1, "the swap answered %d: %s", rc, why);
    ck_assert_msg(strstr(why, "the lock on the table's catalog row") &&
                      strstr(why, "held by another session") &&
                      strstr(why, pid) && strstr(why, "idle in transaction") &&
                      strstr(why, "catalog_lock_timeout_ms (1500 ms)"),
                  "the refusal does not say the swap waited for the row's "
                  "lock, held by %s, for 1500 ms: %s",
                  pid, why);
}
END_TEST

/* The wait after the statement: PostgreSQL disables statement_timeout
 * before it commits, so a commit that waits (here a deferred trigger on
 * the catalog table; synchronous replication to a standby that is gone
 * waits the same way) held the swap, and then published it, for as long
 * as the server took: a version a vacuum beside may have emptied
 * meanwhile. The swap gives up at its lock timeout and a slack, cancels
 * the statement (the trigger's sleep is cancelled: nothing changed), and
 * the connection still serves the next swap. */
#define PG_COMMIT_SLEEP_S 20

static void commit_waited_too_long(int sig) {
    (void)sig;
    static const char msg[] =
        "FINDING: the catalog's swap waited > 15 s for its commit (no bound "
        "once the statement is done: it publishes when the server commits)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

/* A deferred trigger on the catalog table's EVENT sleeping
 * PG_COMMIT_SLEEP_S at each commit. */
static void slow_commits(PGconn *admin, const char *schema, const char *event) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "CREATE OR REPLACE FUNCTION %s.slow() RETURNS trigger LANGUAGE "
             "plpgsql AS $$ BEGIN PERFORM pg_sleep(%d); RETURN NULL; END $$",
             schema, PG_COMMIT_SLEEP_S);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
    snprintf(sql, sizeof sql,
             "CREATE CONSTRAINT TRIGGER slow AFTER %s ON "
             "%s.iceberg_tables DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
             "EXECUTE FUNCTION %s.slow()",
             event, schema, schema);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
}

START_TEST(pg_swap_commit_wait_bounded) {
    char schema[64], sql[512];
    PGconn *admin = pg_catalog_schema(schema);
    ice_catalog *c = open_orders(PG_LOCK_TIMEOUT_MS);
    char why[1024];
    ck_assert_msg(
        ice_catalog_swap(c, NULL, "s3://b/v1.json", why, sizeof why) == 0, "%s",
        why);
    slow_commits(admin, schema, "UPDATE");
    signal(SIGALRM, commit_waited_too_long);
    alarm(PG_WAIT_LIMIT_S);
    double t0 = now_s();
    int rc = ice_catalog_swap(c, "s3://b/v1.json", "s3://b/v2.json", why,
                              sizeof why);
    double waited = now_s() - t0;
    alarm(0);
    char *after_wait = row_loc(admin, schema);
    /* The trigger gone, the connection serves the same swap. */
    snprintf(sql, sizeof sql, "DROP TRIGGER slow ON %s.iceberg_tables", schema);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
    int rc2 = ice_catalog_swap(c, "s3://b/v1.json", "s3://b/v2.json", why,
                               sizeof why);
    char *last = row_loc(admin, schema);
    ice_catalog_close(c);
    drop_schema(admin, schema);
    ck_assert_msg(rc == -1, "a swap whose commit waited answered %d: %s", rc,
                  why);
    ck_assert_msg(strstr(why, "cancelled") && strstr(why, "nothing changed"),
                  "%s", why);
    ck_assert_msg(waited < PG_LOCK_TIMEOUT_MS / 1000.0 + 8,
                  "the swap gave up after %.1f s (lock timeout %d ms)", waited,
                  PG_LOCK_TIMEOUT_MS);
    ck_assert_str_eq(after_wait, "s3://b/v1.json");
    ck_assert_msg(rc2 == 0, "the swap after the trigger: %d %s", rc2, why);
    ck_assert_str_eq(last, "s3://b/v2.json");
    free(after_wait);
    free(last);
}
END_TEST

/* The connection lost while the swap's commit waits (cut on our side:
 * no error from the server, whose backend goes on): the outcome is
 * unknown (-2: the row is read again and the resend's marker check
 * settles it), never "swapped" from the "UPDATE 1" that came before the
 * commit; and the orphaned statement is cancelled, so it cannot publish
 * when its commit ends, long after the publish check. The cut waits for
 * the backend to be in the trigger's sleep (pg_stat_activity), not for a
 * time. */
static ice_catalog *cut_c;
static char cut_ci[1024];

static void *cut_in_commit(void *arg) {
    (void)arg;
    PGconn *watch = PQconnectdb(cut_ci);
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT 1 FROM pg_stat_activity WHERE pid = %d AND "
             "wait_event = 'PgSleep'",
             PQbackendPID(cut_c->db));
    for (int i = 0; i < 1000 && PQstatus(watch) == CONNECTION_OK; i++) {
        PGresult *r = PQexec(watch, sql);
        int there = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
        PQclear(r);
        if (there) {
            shutdown(PQsocket(cut_c->db), SHUT_RDWR);
            PQfinish(watch);
            return (void *)1;
        }
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    PQfinish(watch);
    return NULL;
}

/* 1 once no backend runs the swap's UPDATE any more (waits at most
 * LIMIT_S; 0 if it still does). */
static int update_gone(PGconn *admin, int backend_pid, int limit_s) {
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT 1 FROM pg_stat_activity WHERE pid = %d",
             backend_pid);
    double end = now_s() + limit_s;
    while (now_s() < end) {
        PGresult *r = PQexec(admin, sql);
        int there = PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) > 0;
        PQclear(r);
        if (!there)
            return 1;
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    }
    return 0;
}

START_TEST(pg_swap_connection_cut_in_commit) {
    char schema[64];
    PGconn *admin = pg_catalog_schema(schema);
    snprintf(cut_ci, sizeof cut_ci, "%s", getenv("TIDEMARK_PG_CONNINFO"));
    ice_catalog *c = open_orders(ICE_CATALOG_LOCK_TIMEOUT_MS);
    char why[1024];
    ck_assert_msg(
        ice_catalog_swap(c, NULL, "s3://b/v1.json", why, sizeof why) == 0, "%s",
        why);
    slow_commits(admin, schema, "UPDATE");
    cut_c = c;
    int backend = PQbackendPID(c->db);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, cut_in_commit, NULL), 0);
    int rc = ice_catalog_swap(c, "s3://b/v1.json", "s3://b/v2.json", why,
                              sizeof why);
    void *cut;
    pthread_join(th, &cut);
    ck_assert_msg(cut, "inconclusive: the swap's backend was never seen in "
                       "the trigger's sleep");
    int gone = update_gone(admin, backend, PG_COMMIT_SLEEP_S / 2);
    char *row = row_loc(admin, schema);
    char sql[256];
    snprintf(sql, sizeof sql, "DROP TRIGGER slow ON %s.iceberg_tables", schema);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
    char why2[1024];
    int rc2 = ice_catalog_swap(c, "s3://b/v1.json", "s3://b/v2.json", why2,
                               sizeof why2);
    ice_catalog_close(c);
    /* Cleaning up after a finding: the statement's sleep ends first. */
    if (!gone)
        update_gone(admin, backend, 2 * PG_COMMIT_SLEEP_S);
    drop_schema(admin, schema);
    ck_assert_msg(rc == -2,
                  "a swap whose connection was cut in its commit answered "
                  "%d (want -2, unknown; the row is %s): %s",
                  rc, row, why);
    ck_assert_msg(gone,
                  "FINDING: the swap's statement (backend %d) lives on after "
                  "its connection was cut: it publishes when its commit "
                  "ends",
                  backend);
    ck_assert_str_eq(row, "s3://b/v1.json");
    ck_assert_msg(rc2 == 0, "the swap after a reconnect: %d %s", rc2, why2);
    free(row);
}
END_TEST

/* The same for the table's registration (its INSERT's transaction, whose
 * COMMIT runs the trigger): cancelled, no row; then registered. */
START_TEST(pg_register_commit_wait_bounded) {
    char schema[64], sql[512];
    PGconn *admin = pg_catalog_schema(schema);
    ice_catalog *c = open_orders(PG_LOCK_TIMEOUT_MS);
    char why[1024];
    slow_commits(admin, schema, "INSERT");
    signal(SIGALRM, commit_waited_too_long);
    alarm(PG_WAIT_LIMIT_S);
    double t0 = now_s();
    int rc = ice_catalog_swap(c, NULL, "s3://b/v1.json", why, sizeof why);
    double waited = now_s() - t0;
    alarm(0);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s.iceberg_tables", schema);
    PGresult *r = PQexec(admin, sql);
    ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
    int rows = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    snprintf(sql, sizeof sql, "DROP TRIGGER slow ON %s.iceberg_tables", schema);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
    char why2[1024];
    int rc2 = ice_catalog_swap(c, NULL, "s3://b/v1.json", why2, sizeof why2);
    char *last = row_loc(admin, schema);
    ice_catalog_close(c);
    drop_schema(admin, schema);
    ck_assert_msg(rc == -1,
                  "a registration whose commit waited answered %d: "
                  "%s",
                  rc, why);
    ck_assert_msg(strstr(why, "cancelled"), "%s", why);
    ck_assert_msg(waited < PG_LOCK_TIMEOUT_MS / 1000.0 + 8,
                  "the registration gave up after %.1f s (lock timeout %d ms)",
                  waited, PG_LOCK_TIMEOUT_MS);
    ck_assert_int_eq(rows, 0);
    ck_assert_msg(rc2 == 0, "the registration after the trigger: %d %s", rc2,
                  why2);
    ck_assert_str_eq(last, "s3://b/v1.json");
    free(last);
}
END_TEST

/* The same through the sink, with catalog_lock_timeout_ms: the commit of
 * a batch whose swap waits on the held row answers RETRY within the bound
 * and publishes nothing (the row and the markers as before); once the
 * lock is gone the batch, sent again, commits. */
START_TEST(pg_commit_retries_on_held_row) {
    char schema[64], text[2048];
    PGconn *admin = pg_catalog_schema(schema);
    snprintf(text, sizeof text,
             "{\"path\": \"$T\", \"catalog_uri\": \"%s\", "
             "\"catalog_name\": \"lake\", \"catalog_namespace\": \"sales\", "
             "\"catalog_table\": \"orders\", \"catalog_lock_timeout_ms\": %d}",
             cat_uri, PG_LOCK_TIMEOUT_MS);
    ck_assert_int_eq(ice_fx_settings(&fx, text), 0);
    void *sink;
    tm_error err = {sizeof err, ""};
    ck_assert_msg(ice_fx_open(&fx, &sink, &err) == TM_OK, "%s", err.message);
    tm_marker m[1];
    ck_assert_int_eq(ice_fx_claim(sink, m, 1, &err), TM_OK);
    ck_assert_int_eq(commit_range(sink, "b-0", 0, 0, 2, m[0].epoch, &err),
                     TM_OK);
    char *before = row_loc(admin, schema);
    hold_row(admin, schema);
    signal(SIGALRM, waited_too_long);
    alarm(PG_WAIT_LIMIT_S);
    double t0 = now_s();
    tm_status rc = commit_range(sink, "b-2", 0, 2, 2, m[0].epoch, &err);
    double waited = now_s() - t0;
    alarm(0);
    char *held = row_loc(admin, schema);
    admin_ok(admin, "ROLLBACK", PGRES_COMMAND_OK);
    ck_assert_msg(rc == TM_RETRY, "the commit on a held row: %s (%s)",
                  tm_status_name(rc), err.message);
    ck_assert_msg(strstr(err.message, "canceling statement due to") &&
                      strstr(err.message, "for the lock on the table's "
                                          "catalog row, held by another "
                                          "session (pid"),
                  "the error does not say the lock's wait ran out: %s",
                  err.message);
    ck_assert_msg(waited < PG_LOCK_TIMEOUT_MS / 1000.0 + 5,
                  "the commit gave up after %.1f s (lock timeout %d ms)",
                  waited, PG_LOCK_TIMEOUT_MS);
    ck_assert_str_eq(held, before); /* nothing published */
    tm_marker got = {
        .struct_size = sizeof got, .topic = "orders", .partition = 0};
    ck_assert_int_eq(ice_api->read_markers(sink, &got, 1, &err), TM_OK);
    ck_assert_int_eq(got.next_offset, 2);
    /* The lock gone, the batch sent again commits. */
    rc = commit_range(sink, "b-2", 0, 2, 2, m[0].epoch, &err);
    ck_assert_msg(rc == TM_OK, "the commit after the lock: %s (%s)",
                  tm_status_name(rc), err.message);
    ck_assert_int_eq(ice_api->read_markers(sink, &got, 1, &err), TM_OK);
    ice_api->close(sink);
    char *after = row_loc(admin, schema);
    drop_schema(admin, schema);
    ck_assert_int_eq(got.next_offset, 4);
    ck_assert_str_ne(after, before);
    free(before);
    free(held);
    free(after);
}
END_TEST

/* The swap blocked by a lock on the whole table (LOCK TABLE by one
 * session, SHARE mode) while another holds the row FOR KEY SHARE (its xid in
 * the row's xmax, not blocking an UPDATE of the metadata columns): the refusal
 * must not name the FOR KEY SHARE holder as the one that held the swap; it says
 * it could not tell. */
START_TEST(pg_swap_timeout_names_no_wrong_holder) {
    char schema[64], sql[256], share_pid[32];
    PGconn *admin = pg_catalog_schema(schema);
    ice_catalog *c = open_orders(PG_LOCK_TIMEOUT_MS);
    char why[1024];
    ck_assert_msg(
        ice_catalog_swap(c, NULL, "s3://b/v1.json", why, sizeof why) == 0, "%s",
        why);
    PGconn *sharer = PQconnectdb(getenv("TIDEMARK_PG_CONNINFO"));
    ck_assert_int_eq(PQstatus(sharer), CONNECTION_OK);
    admin_ok(sharer, "BEGIN", PGRES_COMMAND_OK);
    snprintf(sql, sizeof sql, "SELECT 1 FROM %s.iceberg_tables FOR KEY SHARE",
             schema);
    admin_ok(sharer, sql, PGRES_TUPLES_OK);
    snprintf(share_pid, sizeof share_pid, "pid %d,", PQbackendPID(sharer));
    admin_ok(admin, "BEGIN", PGRES_COMMAND_OK);
    snprintf(sql, sizeof sql, "LOCK TABLE %s.iceberg_tables IN SHARE MODE",
             schema);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
    signal(SIGALRM, waited_too_long);
    alarm(PG_WAIT_LIMIT_S);
    int rc = ice_catalog_swap(c, "s3://b/v1.json", "s3://b/v2.json", why,
                              sizeof why);
    alarm(0);
    admin_ok(admin, "ROLLBACK", PGRES_COMMAND_OK);
    admin_ok(sharer, "ROLLBACK", PGRES_COMMAND_OK);
    PQfinish(sharer);
    ice_catalog_close(c);
    drop_schema(admin, schema);
    ck_assert_msg(rc == -1, "the swap answered %d: %s", rc, why);
    ck_assert_msg(!strstr(why, share_pid),
                  "FINDING: the refusal names the FOR KEY SHARE holder (%s) "
                  "as the session that held the swap, which a table lock "
                  "held: %s",
                  share_pid, why);
    ck_assert_msg(strstr(why, "PostgreSQL does not say") &&
                      strstr(why, "nothing changed"),
                  "%s", why);
}
END_TEST

/* ---- PostgreSQL: the cancel itself, and a statement that outlives it -- */

/* PQcancel is a blocking connect, send and wait for the server to close:
 * a cancel request that a server (or a proxy before it) accepts and never
 * answers held the connector's thread for good. Through ice_cancel_proxy
 * holding every cancel request unanswered, a swap whose commit waits (the
 * sleeping deferred trigger) gives up within the bound: the statement may
 * still commit, so the outcome is unknown (-2). */
static void cancel_hung(int sig) {
    (void)sig;
    static const char msg[] =
        "FINDING: the catalog's swap blocked > 15 s in its cancel (a cancel "
        "request accepted and never answered holds the thread)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

/* Ends BACKEND (its statement rolled back) and waits until it is gone. */
static void end_backend(PGconn *admin, int backend) {
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%d)", backend);
    admin_ok(admin, sql, PGRES_TUPLES_OK);
    ck_assert_msg(update_gone(admin, backend, 10), "backend %d still there",
                  backend);
}

START_TEST(pg_swap_cancel_unanswered_bounded) {
    char schema[64], sql[256], host[256], port[32], db[256], user[256];
    PGconn *admin = pg_catalog_schema(schema);
    const char *ci = getenv("TIDEMARK_PG_CONNINFO");
    conninfo_value(ci, "host", host, sizeof host);
    conninfo_value(ci, "port", port, sizeof port);
    conninfo_value(ci, "dbname", db, sizeof db);
    conninfo_value(ci, "user", user, sizeof user);
    icp_proxy px;
    ck_assert_int_eq(icp_start(&px, host, atoi(port)), 0);
    snprintf(cat_uri, sizeof cat_uri,
             "postgresql://%s@127.0.0.1:%d/%s?sslmode=disable&gssencmode="
             "disable&options=-csearch_path%%3D%s",
             user, px.port, db, schema);
    ice_catalog *c = open_orders(PG_LOCK_TIMEOUT_MS);
    char why[1024];
    ck_assert_msg(
        ice_catalog_swap(c, NULL, "s3://b/v1.json", why, sizeof why) == 0, "%s",
        why);
    slow_commits(admin, schema, "UPDATE");
    int backend = PQbackendPID(c->db);
    atomic_store(&px.blackhole, 1);
    signal(SIGALRM, cancel_hung);
    alarm(PG_WAIT_LIMIT_S);
    int rc = ice_catalog_swap(c, "s3://b/v1.json", "s3://b/v2.json", why,
                              sizeof why);
    alarm(0);
    int held = atomic_load(&px.blackholed);
    end_backend(admin, backend); /* its sleep would publish v2 later */
    char *row = row_loc(admin, schema);
    atomic_store(&px.blackhole, 0);
    snprintf(sql, sizeof sql, "DROP TRIGGER slow ON %s.iceberg_tables", schema);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
    char why2[1024];
    int rc2 = ice_catalog_swap(c, "s3://b/v1.json", "s3://b/v2.json", why2,
                               sizeof why2);
    ice_catalog_close(c);
    icp_stop(&px);
    drop_schema(admin, schema);
    ck_assert_msg(held >= 1, "inconclusive: no cancel request was held by the "
                             "proxy");
    ck_assert_msg(rc == -2 && strstr(why, "outcome unknown"),
                  "a swap whose cancel was never answered answered %d (want "
                  "-2: its statement may still commit): %s",
                  rc, why);
    ck_assert_str_eq(row, "s3://b/v1.json");
    ck_assert_msg(rc2 == 0, "the swap after a reconnect: %d %s", rc2, why2);
    free(row);
}
END_TEST

/* A deferred trigger that ignores cancels: it loops in short sleeps until
 * SCHEMA.release has a row, and on a cancel sets its session's
 * application_name to "cancel_ignored" (pg_stat_activity shows it: the
 * cancel reached it) and goes on. The release check is inside the block
 * that catches the cancel too: a cancel that lands in it rather than in
 * the sleep (a loaded machine) must be ignored as well, or the statement
 * ends "cancelled" and the tests built on this are inconclusive. */
static void stubborn_commits(PGconn *admin, const char *schema) {
    char sql[1024];
    snprintf(sql, sizeof sql, "CREATE TABLE %s.release (x int)", schema);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
    snprintf(sql, sizeof sql,
             "CREATE OR REPLACE FUNCTION %s.stubborn() RETURNS trigger "
             "LANGUAGE plpgsql AS $$ BEGIN LOOP "
             "BEGIN EXIT WHEN EXISTS (SELECT 1 FROM %s.release); "
             "PERFORM pg_sleep(0.05); "
             "EXCEPTION WHEN query_canceled THEN PERFORM "
             "set_config('application_name', 'cancel_ignored', false); END; "
             "END LOOP; RETURN NULL; END $$",
             schema, schema);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
    snprintf(sql, sizeof sql,
             "CREATE CONSTRAINT TRIGGER stubborn AFTER UPDATE ON "
             "%s.iceberg_tables DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
             "EXECUTE FUNCTION %s.stubborn()",
             schema, schema);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
}

/* Lets the stubborn trigger end (its transaction then commits) and waits
 * until BACKEND's statement is over (idle or gone). */
static void release_stubborn(PGconn *admin, const char *schema, int backend) {
    char sql[256];
    snprintf(sql, sizeof sql, "INSERT INTO %s.release VALUES (1)", schema);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
    snprintf(sql, sizeof sql,
             "SELECT 1 FROM pg_stat_activity WHERE pid = %d AND state = "
             "'active'",
             backend);
    for (int i = 0; i < 500; i++) {
        PGresult *r = PQexec(admin, sql);
        int busy = PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) > 0;
        PQclear(r);
        if (!busy)
            return;
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    }
    ck_abort_msg("backend %d still runs the swap after its release", backend);
}

/* A swap whose statement outlives its cancel (the trigger ignores it) is
 * given up, outcome unknown, through the sink: RETRY, its files kept;
 * the statement then commits (its version published, every file it
 * names there), and the batch sent again is ALREADY, every row once. */
START_TEST(pg_commit_outliving_its_cancel_is_unknown) {
    char schema[64], text[2048];
    PGconn *admin = pg_catalog_schema(schema);
    snprintf(text, sizeof text,
             "{\"path\": \"$T\", \"catalog_uri\": \"%s\", "
             "\"catalog_name\": \"lake\", \"catalog_namespace\": \"sales\", "
             "\"catalog_table\": \"orders\", \"catalog_lock_timeout_ms\": %d}",
             cat_uri, PG_LOCK_TIMEOUT_MS);
    ck_assert_int_eq(ice_fx_settings(&fx, text), 0);
    void *sink;
    tm_error err = {sizeof err, ""};
    ck_assert_msg(ice_fx_open(&fx, &sink, &err) == TM_OK, "%s", err.message);
    tm_marker m[1];
    ck_assert_int_eq(ice_fx_claim(sink, m, 1, &err), TM_OK);
    ck_assert_int_eq(commit_range(sink, "b-0", 0, 0, 2, m[0].epoch, &err),
                     TM_OK);
    char *before = row_loc(admin, schema);
    stubborn_commits(admin, schema);
    char sql[256];
    tm_status rc = commit_range(sink, "b-2", 0, 2, 2, m[0].epoch, &err);
    char retry_msg[sizeof err.message];
    snprintf(retry_msg, sizeof retry_msg, "%s", err.message);
    /* The swap's backend, still in the trigger, saw the cancel. */
    snprintf(sql, sizeof sql,
             "SELECT pid FROM pg_stat_activity WHERE application_name = "
             "'cancel_ignored' AND state = 'active'");
    PGresult *r = PQexec(admin, sql);
    ck_assert_int_eq(PQresultStatus(r), PGRES_TUPLES_OK);
    int seen = PQntuples(r) == 1;
    int backend = seen ? atoi(PQgetvalue(r, 0, 0)) : 0;
    PQclear(r);
    if (seen)
        release_stubborn(admin, schema, backend);
    char *published = row_loc(admin, schema);
    snprintf(sql, sizeof sql, "DROP TRIGGER stubborn ON %s.iceberg_tables",
             schema);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
    const char *path =
        strncmp(published, "file://", 7) == 0 ? published + 7 : published;
    int file_there = access(path, F_OK) == 0;
    tm_status rc2 = commit_range(sink, "b-2", 0, 2, 2, m[0].epoch, &err);
    size_t rows = 0, dls = 0;
    int64_t max_off = -1;
    int scanned = ice_fx_scan_count(sink, 0, &rows, &dls, &max_off);
    ice_api->close(sink);
    drop_schema(admin, schema);
    ck_assert_msg(seen,
                  "inconclusive: the swap's backend never saw a cancel "
                  "(rc %s: %s)",
                  tm_status_name(rc), retry_msg);
    ck_assert_msg(rc == TM_RETRY && strstr(retry_msg, "outcome unknown"),
                  "the commit whose swap outlived its cancel: %s (want RETRY, "
                  "outcome unknown): %s",
                  tm_status_name(rc), retry_msg);
    ck_assert_str_ne(published, before); /* the statement committed later */
    ck_assert_msg(file_there,
                  "FINDING: the catalog row names %s, which the sink deleted "
                  "as not published",
                  published);
    ck_assert_msg(rc2 == TM_ALREADY, "the resend: %s (%s)", tm_status_name(rc2),
                  err.message);
    ck_assert_int_eq(scanned, 0);
    ck_assert_int_eq(rows, 4);
    ck_assert_int_eq(max_off, 3);
    free(before);
    free(published);
}
END_TEST

/* The cancel of a statement, then its connection broken in the wait for
 * the answer (the backend ended): the outcome is unknown (-2), and the
 * message must not say "cancelled, nothing changed"; the next failure
 * (the reconnect refused) does not repeat the cancel either. */
static int killer_backend;
static char killer_ci[1024];

static void *kill_after_cancel(void *arg) {
    (void)arg;
    PGconn *watch = PQconnectdb(killer_ci);
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
             "pid = %d AND application_name = 'cancel_ignored'",
             killer_backend);
    for (int i = 0; i < 1000 && PQstatus(watch) == CONNECTION_OK; i++) {
        PGresult *r = PQexec(watch, sql);
        int done = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
        PQclear(r);
        if (done) {
            PQfinish(watch);
            return (void *)1;
        }
        nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    PQfinish(watch);
    return NULL;
}

START_TEST(pg_cancel_then_broken_is_unknown) {
    char schema[64];
    PGconn *admin = pg_catalog_schema(schema);
    snprintf(killer_ci, sizeof killer_ci, "%s", getenv("TIDEMARK_PG_CONNINFO"));
    ice_catalog *c = open_orders(PG_LOCK_TIMEOUT_MS);
    char why[1024];
    ck_assert_msg(
        ice_catalog_swap(c, NULL, "s3://b/v1.json", why, sizeof why) == 0, "%s",
        why);
    stubborn_commits(admin, schema);
    killer_backend = PQbackendPID(c->db);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, kill_after_cancel, NULL), 0);
    int rc = ice_catalog_swap(c, "s3://b/v1.json", "s3://b/v2.json", why,
                              sizeof why);
    void *killed;
    pthread_join(th, &killed);
    ice_catalog_close(c);
    drop_schema(admin, schema);
    ck_assert_msg(killed,
                  "inconclusive: the backend was not ended after the "
                  "cancel reached it (%d: %s)",
                  rc, why);
    ck_assert_msg(rc == -2, "answered %d (want -2): %s", rc, why);
    ck_assert_msg(!strstr(why, "nothing changed") &&
                      strstr(why, "outcome unknown"),
                  "FINDING: a cancel followed by a broken connection is "
                  "reported as: %s",
                  why);
}
END_TEST

/* The flag of a cancel lives as long as its statement: after a swap
 * given up (its statement outlived the cancel), the reconnect that fails
 * (the server gone: the proxy ends every new session) says so, not that
 * a statement was "cancelled, nothing changed". */
START_TEST(pg_failed_reconnect_repeats_no_cancel) {
    char schema[64], host[256], port[32], db[256], user[256];
    PGconn *admin = pg_catalog_schema(schema);
    const char *ci = getenv("TIDEMARK_PG_CONNINFO");
    conninfo_value(ci, "host", host, sizeof host);
    conninfo_value(ci, "port", port, sizeof port);
    conninfo_value(ci, "dbname", db, sizeof db);
    conninfo_value(ci, "user", user, sizeof user);
    icp_proxy px;
    ck_assert_int_eq(icp_start(&px, host, atoi(port)), 0);
    snprintf(cat_uri, sizeof cat_uri,
             "postgresql://%s@127.0.0.1:%d/%s?sslmode=disable&gssencmode="
             "disable&options=-csearch_path%%3D%s",
             user, px.port, db, schema);
    ice_catalog_ref ref = {cat_uri, "lake", "sales", "orders",
                           PG_LOCK_TIMEOUT_MS};
    ice_catalog *c = NULL;
    char why[1024], why2[1024];
    ck_assert_msg(ice_catalog_open(&ref, 1, 1, &c, why, sizeof why) == 0, "%s",
                  why);
    ck_assert_msg(
        ice_catalog_swap(c, NULL, "s3://b/v1.json", why, sizeof why) == 0, "%s",
        why);
    stubborn_commits(admin, schema);
    int backend = PQbackendPID(c->db);
    int rc = ice_catalog_swap(c, "s3://b/v1.json", "s3://b/v2.json", why,
                              sizeof why);
    atomic_store(&px.refuse, 1);
    char *loc = NULL;
    int rc2 = ice_catalog_load(c, &loc, why2, sizeof why2);
    free(loc);
    release_stubborn(admin, schema, backend);
    ice_catalog_close(c);
    icp_stop(&px);
    drop_schema(admin, schema);
    ck_assert_msg(rc == -2, "inconclusive: the swap was not given up (%d: %s)",
                  rc, why);
    ck_assert_msg(rc2 == -1, "the load with no server: %d %s", rc2, why2);
    ck_assert_msg(!strstr(why2, "cancelled"),
                  "FINDING: a failed reconnect repeats the last statement's "
                  "cancel: %s",
                  why2);
}
END_TEST

/* A reconnect takes the new session's cancel key: a swap after it whose
 * commit waits is cancelled (-1, nothing changed), not given up as lost
 * because the cancel went to the old, ended backend. */
START_TEST(pg_cancel_after_reconnect) {
    char schema[64], sql[256];
    PGconn *admin = pg_catalog_schema(schema);
    ice_catalog *c = open_orders(PG_LOCK_TIMEOUT_MS);
    char why[1024];
    ck_assert_msg(
        ice_catalog_swap(c, NULL, "s3://b/v1.json", why, sizeof why) == 0, "%s",
        why);
    int first = PQbackendPID(c->db);
    end_backend(admin, first);
    char *loc = NULL;
    int rc = ice_catalog_load(c, &loc, why, sizeof why);
    if (rc != 0)
        rc = ice_catalog_load(c, &loc, why, sizeof why);
    ck_assert_msg(rc == 0, "load after the reconnect: %d %s", rc, why);
    free(loc);
    ck_assert_int_ne(PQbackendPID(c->db), first); /* else inconclusive */
    slow_commits(admin, schema, "UPDATE");
    rc = ice_catalog_swap(c, "s3://b/v1.json", "s3://b/v2.json", why,
                          sizeof why);
    char *row = row_loc(admin, schema);
    snprintf(sql, sizeof sql, "DROP TRIGGER slow ON %s.iceberg_tables", schema);
    admin_ok(admin, sql, PGRES_COMMAND_OK);
    ice_catalog_close(c);
    drop_schema(admin, schema);
    ck_assert_msg(rc == -1 && strstr(why, "nothing changed"),
                  "a swap cancelled after a reconnect answered %d: %s", rc,
                  why);
    ck_assert_str_eq(row, "s3://b/v1.json");
    free(row);
}
END_TEST

static const char *group = "";

static Suite *suite(void) {
    Suite *s = suite_create("ice_catalog_rivals");
    TCase *tc = tcase_create(*group ? group : "rivals");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    if (strcmp(group, "pg") == 0) {
        tcase_add_test(tc, pg_reconnect_keeps_synchronous_commit);
        tcase_add_test(tc, pg_swap_waits_bounded);
        tcase_add_test(tc, pg_swap_timeout_names_the_lock);
        tcase_add_test(tc, pg_swap_timeout_names_no_wrong_holder);
        tcase_add_test(tc, pg_swap_commit_wait_bounded);
        tcase_add_test(tc, pg_register_commit_wait_bounded);
        tcase_add_test(tc, pg_swap_connection_cut_in_commit);
        tcase_add_test(tc, pg_commit_retries_on_held_row);
    } else if (strcmp(group, "pg_cancel") == 0) {
        tcase_add_test(tc, pg_swap_cancel_unanswered_bounded);
        tcase_add_test(tc, pg_commit_outliving_its_cancel_is_unknown);
        tcase_add_test(tc, pg_cancel_then_broken_is_unknown);
        tcase_add_test(tc, pg_cancel_after_reconnect);
        tcase_add_test(tc, pg_failed_reconnect_repeats_no_cancel);
    } else {
        tcase_add_test(tc, pyiceberg_tag_during_swap_kept);
        tcase_add_test(tc, table_replaced_under_running_sink);
        tcase_add_test(tc, pyiceberg_append_refused_during_swap);
        tcase_add_test(tc, pyiceberg_append_refused_at_open);
    }
    suite_add_tcase(s, tc);
    return s;
}

/* No argument: pyiceberg on the table; "pg": the PostgreSQL session. */
int main(int argc, char **argv) {
    if (argc > 1)
        group = argv[1];
    return tm_check_run(suite(), 1);
}
