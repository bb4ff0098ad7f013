/* The iceberg-lite sink with its table in an Iceberg SQL catalog (SQLite),
 * through its plugin API: the catalog's tables as pyiceberg's SqlCatalog
 * makes them, the row's compare-and-swap lost to a rival's commit (judged
 * again and published on top) or to a rival's claim (FENCED, the row
 * untouched), a SIGKILL between the metadata file and the swap, a
 * file-system table at the path (refused, then registered), a directory a
 * catalog manages refused to file-system writers, a catalog of the older
 * schema (no iceberg_type), and refused settings. The catalog's rows are
 * read with SQLite itself: the source of truth. With the argument "pg"
 * the races and the kill run with the catalog in PostgreSQL (a schema of
 * the test's own), its row read with libpq. */
#define _XOPEN_SOURCE 700 /* nftw in the fixture, glob */

#include <check.h>
#include <glob.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "catalog.h"
#include "check_main.h"
#include "ice_fixture.h"
#include "maint.h"
#include "services/host_services.h"

static ice_fx fx;
static char db_path[512];
/* The PostgreSQL run (argument "pg"): the catalog in a schema of the
 * test's own on the server of TIDEMARK_PG_CONNINFO, read with libpq. */
static int use_pg;
static char pg_schema[64], cat_uri[1024];
static PGconn *pg;

/* Catalog settings on fx's table, plus EXTRA members ("" none). */
static void use_catalog(const char *extra) {
    char text[2048];
    snprintf(db_path, sizeof db_path, "%s/catalog.db", fx.dir);
    if (!use_pg)
        snprintf(cat_uri, sizeof cat_uri, "sqlite:///%s", db_path);
    snprintf(text, sizeof text,
             "{\"path\": \"$T\", \"catalog_uri\": \"%s\", "
             "\"catalog_name\": \"lake\", \"catalog_namespace\": \"sales\", "
             "\"catalog_table\": \"orders\"%s%s}",
             cat_uri, *extra ? ", " : "", extra);
    ck_assert_int_eq(ice_fx_settings(&fx, text), 0);
}

/* The catalog's URI as the settings give it. */
static const char *uri_of_db(void) {
    return cat_uri;
}

/* KEY's value in TIDEMARK_PG_CONNINFO ("host=... port=..."). */
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

static void quiet(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

static void pg_exec(const char *sql) {
    PGresult *r = PQexec(pg, sql);
    ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", sql,
                  PQresultErrorMessage(r));
    PQclear(r);
}

static void setup(void) {
    ck_assert_int_eq(ice_fx_init(&fx, ""), 0);
    if (use_pg) {
        const char *ci = getenv("TIDEMARK_PG_CONNINFO");
        ck_assert_msg(ci && *ci, "TIDEMARK_PG_CONNINFO is not set (. "
                                 "scripts/env.sh)");
        pg = PQconnectdb(ci);
        ck_assert_msg(PQstatus(pg) == CONNECTION_OK, "%s", PQerrorMessage(pg));
        PQsetNoticeProcessor(pg, quiet, NULL); /* DROP ... CASCADE's */
        char host[256], port[32], db[256], user[256], sql[128];
        conninfo_value(ci, "host", host, sizeof host);
        conninfo_value(ci, "port", port, sizeof port);
        conninfo_value(ci, "dbname", db, sizeof db);
        conninfo_value(ci, "user", user, sizeof user);
        snprintf(pg_schema, sizeof pg_schema, "icecat_unit_%d", (int)getpid());
        snprintf(sql, sizeof sql, "CREATE SCHEMA %s", pg_schema);
        pg_exec(sql);
        snprintf(cat_uri, sizeof cat_uri,
                 "postgresql://%s@%s:%s/%s?options=-csearch_path%%3D%s", user,
                 host, port, db, pg_schema);
    }
    use_catalog("");
}

static void teardown(void) {
    if (use_pg) {
        char sql[128];
        snprintf(sql, sizeof sql, "DROP SCHEMA %s CASCADE", pg_schema);
        pg_exec(sql);
        PQfinish(pg);
        pg = NULL;
    }
    ice_fx_done(&fx, 0);
}

static size_t count_files(const char *pattern_rel) {
    char pat[512];
    glob_t g;
    snprintf(pat, sizeof pat, "%s/%s", fx.table, pattern_rel);
    if (glob(pat, 0, NULL, &g) != 0)
        return 0;
    size_t n = g.gl_pathc;
    globfree(&g);
    return n;
}

/* The row's metadata_location and previous_metadata_location (NULL when
 * absent), read with SQLite: strdup'd into cur and prev (may be NULL). */
static int catalog_row(char **cur, char **prev) {
    static const char q[] =
        "SELECT metadata_location, previous_metadata_location FROM "
        "iceberg_tables WHERE catalog_name = 'lake' AND table_namespace = "
        "'sales' AND table_name = 'orders'";
    const char *c = NULL, *p = NULL;
    int found;
    if (use_pg) {
        char sql[256];
        snprintf(sql, sizeof sql, "SET search_path TO %s", pg_schema);
        pg_exec(sql);
        PGresult *r = PQexec(pg, q);
        ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s",
                      PQresultErrorMessage(r));
        found = PQntuples(r) == 1;
        if (found && !PQgetisnull(r, 0, 0))
            c = PQgetvalue(r, 0, 0);
        if (found && !PQgetisnull(r, 0, 1))
            p = PQgetvalue(r, 0, 1);
        if (cur)
            *cur = c ? strdup(c) : NULL;
        if (prev)
            *prev = p ? strdup(p) : NULL;
        PQclear(r);
        return found;
    }
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, q, -1, &st, NULL), SQLITE_OK);
    found = sqlite3_step(st) == SQLITE_ROW;
    if (found)
        c = (const char *)sqlite3_column_text(st, 0);
    if (found)
        p = (const char *)sqlite3_column_text(st, 1);
    if (cur)
        *cur = c ? strdup(c) : NULL;
    if (prev)
        *prev = p ? strdup(p) : NULL;
    sqlite3_finalize(st);
    sqlite3_close(db);
    return found;
}

static void sql(const char *text) {
    sqlite3 *db;
    char *msg = NULL;
    ck_assert_int_eq(sqlite3_open(db_path, &db), SQLITE_OK);
    int rc = sqlite3_exec(db, text, NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", text, msg ? msg : "");
    sqlite3_free(msg);
    sqlite3_close(db);
}

static void *open_ok(void) {
    void *sink;
    tm_error err;
    tm_status rc = ice_fx_open(&fx, &sink, &err);
    ck_assert_msg(rc == TM_OK, "open: %s: %s", tm_status_name(rc), err.message);
    return sink;
}

static tm_status commit(void *sink, ice_fx_batch *kb, tm_error *err) {
    ice_fx_seal(kb);
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return ice_api->commit(sink, &kb->b, err);
}

static void read1(void *sink, int32_t p, tm_marker *m) {
    tm_error err = {sizeof err, ""};
    *m = (tm_marker){
        .struct_size = sizeof *m, .topic = "orders", .partition = p};
    ck_assert_int_eq(ice_api->read_markers(sink, m, 1, &err), TM_OK);
}

/* Commits offsets [at, at+n) of partition P at EPOCH: the status. */
static tm_status commit_range(void *sink, const char *id, int32_t p, int64_t at,
                              int n, int64_t epoch, tm_error *err) {
    ice_fx_batch kb;
    ice_fx_batch_init(&kb, id);
    uint32_t r = ice_fx_range(&kb, p, at, at + n, epoch);
    for (int64_t o = at; o < at + n; o++)
        ice_fx_record(&kb, r, o);
    tm_status rc = commit(sink, &kb, err);
    ice_fx_batch_free(&kb);
    return rc;
}

/* Every *.metadata.json is a published version: the current one or one in
 * its metadata log (short here, under its bound): no orphan was left. */
static void no_orphan_metadata(void) {
    char *cur = NULL;
    ck_assert(catalog_row(&cur, NULL));
    json_error_t je;
    json_t *m = json_load_file(cur + strlen("file://"), 0, &je);
    ck_assert_msg(m != NULL, "%s: %s", cur, je.text);
    size_t logged = json_array_size(json_object_get(m, "metadata-log"));
    ck_assert_uint_lt(logged, 10);
    ck_assert_uint_eq(count_files("metadata/*.metadata.json"), logged + 1);
    json_decref(m);
    free(cur);
}

START_TEST(catalog_tables_and_row) {
    void *sink = open_ok();
    tm_marker m[1];
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, m, 1, &err), TM_OK);
    ck_assert_int_eq(commit_range(sink, "b-0", 0, 0, 5, m[0].epoch, &err),
                     TM_OK);
    char *cur = NULL, *prev = NULL;
    ck_assert(catalog_row(&cur, &prev));
    /* The table's own file, named as Iceberg's catalogs name them. */
    char want[600];
    snprintf(want, sizeof want, "file://%s/metadata/", fx.table);
    ck_assert_msg(strncmp(cur, want, strlen(want)) == 0, "%s", cur);
    ck_assert_msg(strstr(cur, ".metadata.json") && cur[strlen(want) + 5] == '-',
                  "%s", cur);
    ck_assert_ptr_nonnull(prev);
    ck_assert_str_ne(cur, prev);
    /* No v<N> files and no hint: readers go through the catalog. */
    ck_assert_uint_eq(count_files("metadata/v*.metadata.json"), 0);
    ck_assert_uint_eq(count_files("metadata/version-hint.text"), 0);
    ck_assert_uint_eq(count_files("metadata/catalog-table.text"), 1);
    /* pyiceberg's SqlCatalog's tables and key, the namespace listed. */
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open(db_path, &db), SQLITE_OK);
    ck_assert_int_eq(
        sqlite3_prepare_v2(db,
                           "SELECT iceberg_type, (SELECT property_value FROM "
                           "iceberg_namespace_properties WHERE catalog_name "
                           "= 'lake' AND namespace = 'sales' AND "
                           "property_key = 'exists') FROM iceberg_tables",
                           -1, &st, NULL),
        SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(st, 0), "TABLE");
    ck_assert_str_eq((const char *)sqlite3_column_text(st, 1), "true");
    ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
    /* Reopened: the markers and rows from the row's version. */
    ice_api->close(sink);
    sink = open_ok();
    tm_marker got;
    read1(sink, 0, &got);
    ck_assert_int_eq(got.next_offset, 5);
    size_t rows, dls;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, NULL), 0);
    ck_assert_uint_eq(rows, 5);
    no_orphan_metadata();
    ice_api->close(sink);
    free(cur);
    free(prev);
}
END_TEST

/* ---- a rival between our metadata file and our swap ------------------- */

static void *rival;
static int rival_action; /* 1: commit p1, 2: claim p0 */
static int rival_done;
static char *rival_loc; /* the row after the rival's step */

static void rival_fault(const char *point) {
    if (rival_done || strcmp(point, TM_FAULT_AFTER_MARKER) != 0)
        return;
    rival_done = 1;
    tm_error err = {sizeof err, ""};
    if (rival_action == 1) {
        tm_marker m;
        read1(rival, 1, &m);
        ck_assert_int_eq(commit_range(rival, "rival-1", 1, 0, 3, m.epoch, &err),
                         TM_OK);
    } else {
        tm_marker m = {.struct_size = sizeof m,
                       .topic = "orders",
                       .partition = 0,
                       .next_offset = 0};
        ck_assert_int_eq(ice_api->claim(rival, &m, 1, 0, &err), TM_OK);
    }
    ck_assert(catalog_row(&rival_loc, NULL));
}

static void race(int action, tm_status want) {
    tm_host_api host = *tm_host_services();
    host.fault = rival_fault;
    void *sink;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_api->open(&host, &fx.config, &sink, &err), TM_OK);
    rival = open_ok();
    tm_marker m[2];
    ck_assert_int_eq(ice_fx_claim(sink, m, 2, &err), TM_OK);
    rival_action = action;
    rival_done = 0;
    char *before = NULL;
    ck_assert(catalog_row(&before, NULL));
    tm_status rc = commit_range(sink, "mine-1", 0, 0, 4, m[0].epoch, &err);
    ck_assert_msg(rc == want, "commit: %s (%s), want %s", tm_status_name(rc),
                  err.message, tm_status_name(want));
    /* The interleaving happened where intended: the rival moved the row
     * after our metadata file was written, before our swap. */
    ck_assert_int_eq(rival_done, 1);
    ck_assert_str_ne(rival_loc, before);
    char *cur = NULL, *prev = NULL;
    ck_assert(catalog_row(&cur, &prev));
    if (want == TM_OK) {
        /* Our first swap lost; judged again on the rival's version and
         * published on top of it. */
        ck_assert_str_eq(prev, rival_loc);
    } else {
        /* The zombie's swap never landed: the row is the rival's. */
        ck_assert_str_eq(cur, rival_loc);
    }
    size_t rows, dls;
    ck_assert_int_eq(ice_fx_scan_count(rival, 0, &rows, &dls, NULL), 0);
    ck_assert_uint_eq(rows, want == TM_OK ? 4 : 0);
    ck_assert_int_eq(ice_fx_scan_count(rival, 1, &rows, &dls, NULL), 0);
    ck_assert_uint_eq(rows, action == 1 ? 3 : 0);
    /* The loser removed its metadata file and data files. */
    no_orphan_metadata();
    ck_assert_uint_eq(count_files("data/*.parquet"),
                      (want == TM_OK) + (action == 1));
    ice_api->close(sink);
    ice_api->close(rival);
    free(before);
    free(cur);
    free(prev);
    free(rival_loc);
    rival_loc = NULL;
}

START_TEST(swap_lost_to_a_commit) {
    race(1, TM_OK);
}
END_TEST

START_TEST(swap_lost_to_a_claim_is_fenced) {
    race(2, TM_FENCED);
}
END_TEST

/* ---- SIGKILL between the metadata file and the swap ------------------- */

static int kill_fd = -1;

static void kill_at_swap(const char *point) {
    if (strcmp(point, TM_FAULT_AFTER_MARKER) != 0)
        return;
    /* Says where it died, then dies as a power cut would stop it. */
    if (write(kill_fd, point, strlen(point)) < 0)
        _exit(3);
    raise(SIGKILL);
}

START_TEST(killed_between_file_and_swap) {
    void *sink = open_ok();
    tm_marker m[1];
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, m, 1, &err), TM_OK);
    ck_assert_int_eq(commit_range(sink, "b-0", 0, 0, 3, m[0].epoch, &err),
                     TM_OK);
    ice_api->close(sink);
    char *before = NULL;
    ck_assert(catalog_row(&before, NULL));
    size_t files_before = count_files("metadata/*.metadata.json");
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        kill_fd = fds[1];
        tm_host_api host = *tm_host_services();
        host.fault = kill_at_swap;
        void *s;
        tm_error e = {sizeof e, ""};
        if (ice_api->open(&host, &fx.config, &s, &e) != TM_OK)
            _exit(2);
        (void)commit_range(s, "b-3", 0, 3, 4, m[0].epoch, &e);
        _exit(0); /* not killed: the parent calls it inconclusive */
    }
    close(fds[1]);
    char said[64] = "";
    ssize_t n = read(fds[0], said, sizeof said - 1);
    close(fds[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    /* Inconclusive unless the child died by SIGKILL at that point. */
    ck_assert_msg(n > 0 && strcmp(said, TM_FAULT_AFTER_MARKER) == 0 &&
                      WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "inconclusive: the child was not killed at %s (said \"%s\", "
                  "status %d)",
                  TM_FAULT_AFTER_MARKER, said, status);
    /* Its metadata file was written (an orphan), the row never moved. */
    ck_assert_uint_eq(count_files("metadata/*.metadata.json"),
                      files_before + 1);
    char *after = NULL;
    ck_assert(catalog_row(&after, NULL));
    ck_assert_str_eq(after, before);
    /* Vacuum (grace 0) removes the orphan, through the catalog. */
    ice_table t;
    char why[1024];
    ice_catalog_ref ref = {uri_of_db(), "lake", "sales", "orders", 0};
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    ck_assert_msg(ice_table_use_catalog(&t, &ref, 0, why, sizeof why) == 0,
                  "%s", why);
    size_t removed = 0;
    ck_assert_msg(ice_vacuum(&t, 0, NULL, NULL, &removed, why, sizeof why) == 0,
                  "%s", why);
    ice_table_free(&t);
    ck_assert_uint_ge(removed, 1);
    ck_assert_uint_eq(count_files("metadata/*.metadata.json"), files_before);
    no_orphan_metadata();
    /* The restart reads the row: the batch is not there, and its resend
     * commits it once. */
    sink = open_ok();
    tm_marker got;
    read1(sink, 0, &got);
    ck_assert_int_eq(got.next_offset, 3);
    size_t rows, dls;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, NULL), 0);
    ck_assert_uint_eq(rows, 3);
    ck_assert_int_eq(commit_range(sink, "b-3", 0, 3, 4, m[0].epoch, &err),
                     TM_OK);
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, NULL), 0);
    ck_assert_uint_eq(rows, 7);
    ice_api->close(sink);
    free(before);
    free(after);
}
END_TEST

/* ---- a file-system table at the path ---------------------------------- */

START_TEST(file_system_table_refused_then_registered) {
    /* A table written without the catalog. */
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\"}"), 0);
    void *sink = open_ok();
    tm_marker m[1];
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, m, 1, &err), TM_OK);
    ck_assert_int_eq(commit_range(sink, "b-0", 0, 0, 2, m[0].epoch, &err),
                     TM_OK);
    ice_api->close(sink);
    ck_assert_uint_eq(count_files("metadata/v3.metadata.json"), 1);
    /* Not in the catalog: refused, naming what to do; by validate too
     * when the catalog database is not there yet (open would create it,
     * then refuse). */
    use_catalog("");
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &err),
                     TM_INVALID);
    ck_assert_msg(strstr(err.message, "holds a file-system table "
                                      "(v3.metadata.json)"),
                  "%s", err.message);
    ck_assert_int_ne(access(db_path, F_OK), 0); /* validate made nothing */
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_FATAL);
    ck_assert_msg(strstr(err.message, "holds a file-system table "
                                      "(v3.metadata.json): stop its writers "
                                      "and register it"),
                  "%s", err.message);
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &err),
                     TM_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "register"));
    /* Registered the way pyiceberg's register_table does: a row naming
     * v3. The catalog table goes on from there. */
    char text[1024];
    snprintf(text, sizeof text,
             "INSERT INTO iceberg_tables VALUES ('lake', 'sales', 'orders', "
             "'file://%s/metadata/v3.metadata.json', NULL, 'TABLE')",
             fx.table);
    sql(text);
    sink = open_ok();
    tm_marker got;
    read1(sink, 0, &got);
    ck_assert_int_eq(got.next_offset, 2);
    ck_assert_int_eq(commit_range(sink, "b-2", 0, 2, 3, m[0].epoch, &err),
                     TM_OK);
    ice_api->close(sink);
    char *cur = NULL, *prev = NULL;
    ck_assert(catalog_row(&cur, &prev));
    ck_assert_msg(strstr(cur, "/metadata/00004-"), "%s", cur);
    ck_assert_msg(strstr(prev, "/metadata/v3.metadata.json"), "%s", prev);
    /* Now a file-system writer would fork it: refused. */
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\"}"), 0);
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_FATAL);
    ck_assert_msg(strstr(err.message, "managed by an Iceberg SQL catalog "
                                      "(catalog \"lake\", table sales.orders"),
                  "%s", err.message);
    free(cur);
    free(prev);
}
END_TEST

/* A catalog made by an older JdbcCatalog: no iceberg_type column. */
START_TEST(catalog_without_iceberg_type) {
    sql("CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, "
        "table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT "
        "NULL, metadata_location VARCHAR(1000), previous_metadata_location "
        "VARCHAR(1000), PRIMARY KEY (catalog_name, table_namespace, "
        "table_name))");
    void *sink = open_ok();
    tm_marker m[1];
    tm_error err;
    ck_assert_int_eq(ice_fx_claim(sink, m, 1, &err), TM_OK);
    ck_assert_int_eq(commit_range(sink, "b-0", 0, 0, 2, m[0].epoch, &err),
                     TM_OK);
    ice_api->close(sink);
    ck_assert(catalog_row(NULL, NULL));
    /* A view of that name is not our table. */
    sql("ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)");
    sql("UPDATE iceberg_tables SET iceberg_type = 'VIEW'");
    ck_assert_int_ne(ice_fx_open(&fx, &sink, &err), TM_OK);
    ck_assert_msg(strstr(err.message, "is a VIEW, not a table"), "%s",
                  err.message);
}
END_TEST

/* Each refusal names its setting's JSON path and why. */
static void refused(const char *extra_json, const char *want) {
    char text[1024];
    tm_error err;
    void *sink;
    snprintf(text, sizeof text, "{\"path\": \"$T\"%s}", extra_json);
    ck_assert_int_eq(ice_fx_settings(&fx, text), 0);
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_msg(strstr(err.message, want), "%s\nwant: %s", err.message, want);
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &err),
                     TM_INVALID);
    ck_assert_msg(strstr(err.message, want), "%s\nwant: %s", err.message, want);
}

START_TEST(settings_refused) {
    const char *rest = ", \"catalog_name\": \"c\", \"catalog_namespace\": "
                       "\"n\", \"catalog_table\": \"t\"";
    char text[512];
    refused(", \"catalog_name\": \"c\"",
            "$.sink.settings.catalog_name: given without "
            "$.sink.settings.catalog_uri");
    refused(", \"catalog_uri\": \"sqlite:////x.db\"",
            "$.sink.settings.catalog_name: required with");
    snprintf(text, sizeof text, ", \"catalog_uri\": \"sqlite:/x.db\"%s", rest);
    refused(text, "$.sink.settings.catalog_uri: expected \"sqlite:///FILE\" "
                  "or \"postgresql://USER@HOST:PORT/DB\"");
    snprintf(text, sizeof text, ", \"catalog_uri\": \"mysql://h/db\"%s", rest);
    refused(text, "$.sink.settings.catalog_uri: expected \"sqlite:///FILE\" "
                  "or \"postgresql://USER@HOST:PORT/DB\"");
    snprintf(text, sizeof text, ", \"catalog_uri\": \"sqlite://x.db\"%s", rest);
    refused(text, "$.sink.settings.catalog_uri: expected \"sqlite:///FILE\" "
                  "(three slashes");
    snprintf(text, sizeof text, ", \"catalog_uri\": \"sqlite:///:memory:\"%s",
             rest);
    refused(text, "$.sink.settings.catalog_uri: names no database file");
    refused(", \"catalog_uri\": \"sqlite:////x.db\", \"catalog_name\": \"c\", "
            "\"catalog_namespace\": \"a..b\", \"catalog_table\": \"t\"",
            "$.sink.settings.catalog_namespace: \"a..b\" has an empty "
            "namespace level");
    refused(", \"catalog_uri\": \"sqlite:////x.db\", \"catalog_name\": \"c\", "
            "\"catalog_namespace\": \"n\", \"catalog_table\": \"t.u\"",
            "$.sink.settings.catalog_table: \"t.u\" holds a '.'");
    /* The database's directory must exist (nothing is made but the
     * file). */
    snprintf(text, sizeof text,
             ", \"catalog_uri\": \"sqlite:///%s/missing/c.db\"%s", fx.dir,
             rest);
    char full[2048];
    snprintf(full, sizeof full, "{\"path\": \"$T\"%s}", text);
    ck_assert_int_eq(ice_fx_settings(&fx, full), 0);
    void *sink;
    tm_error err;
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_msg(strstr(err.message, "$.sink.settings.catalog_uri: catalog "
                                      "\"c\", table n.t: opening"),
                  "%s", err.message);
    /* A table path whose metadata locations would not fit the catalog's
     * column (1000 bytes). */
    char deep[1200];
    int k = snprintf(deep, sizeof deep, "%s", fx.dir);
    for (int level = 0; level < 4; level++) {
        k += snprintf(deep + k, sizeof deep - (size_t)k, "/%0240d", level);
        ck_assert_int_eq(mkdir(deep, 0700), 0);
    }
    snprintf(full, sizeof full,
             "{\"path\": \"%s/t\", \"catalog_uri\": \"sqlite:///%s/c.db\"%s}",
             deep, fx.dir, rest);
    ck_assert_int_eq(ice_fx_settings(&fx, full), 0);
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_msg(strstr(err.message, "$.sink.settings.catalog_uri: the "
                                      "table's metadata files would be named "
                                      "by locations of up to"),
                  "%s", err.message);
    /* A PostgreSQL catalog that cannot be reached: open refuses it,
     * naming the setting, never showing the URI's password. */
    snprintf(full, sizeof full,
             "{\"path\": \"$T\", \"catalog_uri\": "
             "\"postgresql+psycopg2://u:secretpw@127.0.0.1:1/db\"%s}",
             rest);
    ck_assert_int_eq(ice_fx_settings(&fx, full), 0);
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_msg(strstr(err.message, "$.sink.settings.catalog_uri: catalog "
                                      "\"c\", table n.t: connecting: ") &&
                      !strstr(err.message, "secretpw"),
                  "%s", err.message);
    /* create false and no catalog yet: no table. */
    ck_assert(mkdir(fx.table, 0700) == 0 || access(fx.table, F_OK) == 0);
    use_catalog("\"create\": false");
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_msg(strstr(err.message, "catalog \"lake\" has no table "
                                      "sales.orders and \"create\" is false"),
                  "%s", err.message);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("iceberg_lite_catalog");
    TCase *tc = tcase_create(use_pg ? "catalog_pg" : "catalog");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    if (!use_pg)
        tcase_add_test(tc, catalog_tables_and_row);
    tcase_add_test(tc, swap_lost_to_a_commit);
    tcase_add_test(tc, swap_lost_to_a_claim_is_fenced);
    tcase_add_test(tc, killed_between_file_and_swap);
    if (!use_pg) {
        tcase_add_test(tc, file_system_table_refused_then_registered);
        tcase_add_test(tc, catalog_without_iceberg_type);
        tcase_add_test(tc, settings_refused);
    }
    suite_add_tcase(s, tc);
    return s;
}

/* "pg": the swap's races and the kill with the catalog in PostgreSQL. */
int main(int argc, char **argv) {
    use_pg = argc > 1 && strcmp(argv[1], "pg") == 0;
    return tm_check_run(suite(), 1);
}
