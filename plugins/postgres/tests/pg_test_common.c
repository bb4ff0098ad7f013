#include "pg_test_common.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/settings.h"
#include "plugin/loader.h"

const char *pgt_conninfo(void) {
    const char *c = getenv("TIDEMARK_PG_CONNINFO");
    ck_assert_msg(c && *c, "TIDEMARK_PG_CONNINFO is not set: bash "
                           "scripts/postgres.sh start; source scripts/env.sh");
    return c;
}

static void quiet(void *arg, const char *message) {
    (void)arg, (void)message; /* DROP ... CASCADE notices */
}

PGconn *pgt_connect(const char *conninfo) {
    PGconn *c = PQconnectdb(conninfo);
    ck_assert_msg(PQstatus(c) == CONNECTION_OK, "cannot connect: %s",
                  PQerrorMessage(c));
    PQsetNoticeProcessor(c, quiet, NULL);
    return c;
}

PGresult *pgt_sql(PGconn *c, const char *text) {
    PGresult *r = PQexec(c, text);
    ExecStatusType st = PQresultStatus(r);
    ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s",
                  text, PQerrorMessage(c));
    return r;
}

void pgt_with_schema(const char *schema, const char *fmt, char *out,
                     size_t size) {
    char *at;
    snprintf(out, size, "%s", fmt);
    while ((at = strstr(out, "$S")) != NULL) {
        char rest[4096];
        snprintf(rest, sizeof rest, "%s", at + 2);
        snprintf(at, size - (size_t)(at - out), "\"%s\"%s", schema, rest);
    }
}

void pgt_sql_text(PGconn *c, const char *schema, const char *fmt, char *out,
                  size_t size) {
    char text[2048];
    pgt_with_schema(schema, fmt, text, sizeof text);
    PGresult *r = pgt_sql(c, text);
    ck_assert_msg(PQntuples(r) == 1, "%s: %d rows", text, PQntuples(r));
    snprintf(out, size, "%s",
             PQgetisnull(r, 0, 0) ? "(null)" : PQgetvalue(r, 0, 0));
    PQclear(r);
}

void pgt_run(PGconn *c, const char *schema, const char *fmt) {
    char text[4096];
    pgt_with_schema(schema, fmt, text, sizeof text);
    PQclear(pgt_sql(c, text));
}

long long pgt_sql_int(PGconn *c, const char *schema, const char *fmt) {
    char v[64];
    pgt_sql_text(c, schema, fmt, v, sizeof v);
    return atoll(v);
}

PGconn *pgt_fresh_schema(const char *prefix, char *schema, size_t ssize,
                         char *connector, size_t csize) {
    static int n;
    n++;
    snprintf(schema, ssize, "%s_%d_%d", prefix, (int)getpid(), n);
    snprintf(connector, csize, "%s_c_%d_%d", prefix, (int)getpid(), n);
    PGconn *c = pgt_connect(pgt_conninfo());
    char text[256];
    snprintf(text, sizeof text, "DROP SCHEMA IF EXISTS \"%s\" CASCADE", schema);
    PQclear(pgt_sql(c, text));
    return c;
}

void pgt_drop_schema(PGconn *c, const char *schema) {
    char text[256];
    snprintf(text, sizeof text, "DROP SCHEMA IF EXISTS \"%s\" CASCADE", schema);
    PQclear(PQexec(c, text));
    PQfinish(c);
}

tm_settings *pgt_settings(const char *json_text) {
    json_error_t je;
    json_t *obj = json_loads(json_text, 0, &je);
    ck_assert_msg(obj != NULL, "bad test JSON: %s: %s", je.text, json_text);
    tm_settings *st = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    ck_assert_ptr_nonnull(st);
    return st;
}

tm_status pgt_commit(const tm_sink_api *api, void *sink, const tm_batch *b,
                     tm_error *err) {
    *err = (tm_error){sizeof *err, ""};
    return api->commit(sink, b, err);
}

void pgt_commit_ok(const tm_sink_api *api, void *sink, const tm_batch *b) {
    tm_error err;
    tm_status rc = pgt_commit(api, sink, b, &err);
    ck_assert_msg(rc == TM_OK, "commit: %s: %s", tm_status_name(rc),
                  err.message);
}

const tm_sink_api *pgt_plugin(const char *path) {
    static tm_plugin plugin;
    char errstr[512];
    if (!plugin.api)
        ck_assert_msg(
            tm_plugin_load(path, NULL, 0, &plugin, errstr, sizeof errstr) == 0,
            "%s", errstr);
    return plugin.api;
}

void *pgt_open(const tm_sink_api *api, const tm_host_api *host,
               const tm_sink_config *config) {
    tm_error err = {sizeof err, ""};
    void *sink = NULL;
    tm_status rc = api->open(host, config, &sink, &err);
    ck_assert_msg(rc == TM_OK, "open: %s: %s", tm_status_name(rc), err.message);
    return sink;
}

tm_marker pgt_claim1(const tm_sink_api *api, void *sink) {
    return pgt_claim_p(api, sink, 0);
}

tm_marker pgt_claim_p(const tm_sink_api *api, void *sink, int32_t p) {
    tm_marker m = {.struct_size = sizeof m, .topic = "t", .partition = p};
    tm_error err = {sizeof err, ""};
    tm_status rc = api->claim(sink, &m, 1, 0, &err);
    ck_assert_msg(rc == TM_OK, "claim: %s", err.message);
    return m;
}
