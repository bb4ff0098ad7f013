/* validate() and the privileges of the session's role: a role with USAGE
 * and SELECT only is refused naming INSERT, the table and the role; with
 * the privileges granted it passes. Also a schema without USAGE, and one
 * without CREATE when the table must be created. The role (tm_ro_<pid>) is
 * made through the superuser "postgres" of the private server (trust auth
 * on loopback: TIDEMARK_PG_CONNINFO with user=postgres) and dropped
 * afterwards, with the test's schema. */
#include <check.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "pg_test_common.h"
#include "config/settings.h"
#include "plugin/loader.h"
#include "services/host_services.h"

static const tm_sink_api *api;
static char schema[64], role[64];
static PGconn *admin; /* the tables' owner (the tests' usual user) */
static PGconn *super; /* creates and drops the role */

static PGconn *connect_as(const char *user) {
    char ci[1024];
    if (user)
        snprintf(ci, sizeof ci, "%s user=%s", pgt_conninfo(), user);
    else
        snprintf(ci, sizeof ci, "%s", pgt_conninfo());
    return pgt_connect(ci);
}

/* Runs SQL with "$S" replaced by the schema and "$R" by the role. */
static void sql(PGconn *c, const char *fmt) {
    char text[1024], *at;
    snprintf(text, sizeof text, "%s", fmt);
    while ((at = strstr(text, "$S")) != NULL || (at = strstr(text, "$R"))) {
        char rest[1024];
        const char *v = at[1] == 'S' ? schema : role;
        snprintf(rest, sizeof rest, "%s", at + 2);
        snprintf(at, sizeof text - (size_t)(at - text), "\"%s\"%s", v, rest);
    }
    PGresult *r = PQexec(c, text);
    ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s: %s", text,
                  PQerrorMessage(c));
    PQclear(r);
}

static void setup(void) {
    api = pgt_plugin(TM_POSTGRES_PLUGIN);
    static int n;
    snprintf(schema, sizeof schema, "pgval_%d_%d", (int)getpid(), ++n);
    snprintf(role, sizeof role, "tm_ro_%d", (int)getpid());
    admin = connect_as(NULL);
    super = connect_as("postgres");
    sql(super, "DROP ROLE IF EXISTS $R");
    sql(super, "CREATE ROLE $R LOGIN");
}

static void teardown(void) {
    char text[256];
    snprintf(text, sizeof text, "DROP SCHEMA IF EXISTS \"%s\" CASCADE", schema);
    PQclear(PQexec(admin, text));
    snprintf(text, sizeof text, "DROP OWNED BY \"%s\"", role);
    PQclear(PQexec(super, text));
    snprintf(text, sizeof text, "DROP ROLE IF EXISTS \"%s\"", role);
    PQclear(PQexec(super, text));
    PQfinish(admin);
    PQfinish(super);
    admin = super = NULL;
}

static const tm_column COLS[] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 1},
    {sizeof(tm_column), "body", TM_TYPE_TEXT, 0, 0},
};

typedef struct conf {
    tm_settings *settings;
    tm_sink_config config;
} conf;

/* The sink's settings for USER (NULL: the tests' usual user). */
static void conf_init(conf *c, const char *user, const char *extra) {
    char ci[1024], text[2048];
    if (user)
        snprintf(ci, sizeof ci, "%s user=%s", pgt_conninfo(), user);
    else
        snprintf(ci, sizeof ci, "%s", pgt_conninfo());
    json_t *obj = json_pack("{s:s,s:s,s:s}", "conninfo", ci, "schema", schema,
                            "table", "t");
    ck_assert_ptr_nonnull(obj);
    snprintf(text, sizeof text, "{%s}", extra ? extra : "");
    json_t *more = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(more);
    json_object_update(obj, more);
    json_decref(more);
    c->settings = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    ck_assert_ptr_nonnull(c->settings);
    c->config = (tm_sink_config){.struct_size = sizeof(tm_sink_config),
                                 .connector = "validate",
                                 .settings = c->settings,
                                 .columns = COLS,
                                 .ncolumns = 2};
}

/* The tables, made by the sink as the usual user. */
static void make_tables(const char *extra) {
    conf c;
    tm_error err = {sizeof err, ""};
    void *sink = NULL;
    conf_init(&c, NULL, extra);
    ck_assert_msg(api->open(tm_host_services(), &c.config, &sink, &err) ==
                      TM_OK,
                  "open: %s", err.message);
    api->close(sink);
    tm_settings_free(c.settings);
}

static tm_status validate_as_role(const char *extra, tm_error *err) {
    conf c;
    conf_init(&c, role, extra);
    err->message[0] = '\0';
    tm_status rc = api->validate(tm_host_services(), &c.config, err);
    tm_settings_free(c.settings);
    return rc;
}

static void assert_mentions(const char *message, const char *a, const char *b) {
    ck_assert_msg(
        strstr(message, a) && strstr(message, b) && strstr(message, role),
        "want \"%s\", \"%s\" and the role %s in: %s", a, b, role, message);
}

START_TEST(missing_insert_is_refused_naming_it) {
    tm_error err = {sizeof err, ""};
    make_tables(NULL);
    sql(admin, "GRANT USAGE ON SCHEMA $S TO $R");
    sql(admin, "GRANT SELECT ON ALL TABLES IN SCHEMA $S TO $R");
    ck_assert_int_eq(validate_as_role("\"create\": false", &err), TM_INVALID);
    assert_mentions(err.message, "lacks INSERT", ".\"t\"");

    /* INSERT on the table: now the markers want more. */
    sql(admin, "GRANT INSERT ON $S.t TO $R");
    ck_assert_int_eq(validate_as_role("\"create\": false", &err), TM_INVALID);
    assert_mentions(err.message, "lacks INSERT", "tidemark_markers");

    sql(admin, "GRANT INSERT, UPDATE ON $S.tidemark_markers TO $R");
    sql(admin, "GRANT INSERT, DELETE ON $S.tidemark_keys TO $R");
    sql(admin, "GRANT INSERT ON $S.tidemark_dead_letters TO $R");
    /* the owners of the table are registered at claim */
    ck_assert_int_eq(validate_as_role("\"create\": false", &err), TM_INVALID);
    assert_mentions(err.message, "lacks INSERT", "tidemark_table_owners");
    sql(admin, "GRANT INSERT, UPDATE ON $S.tidemark_table_owners TO $R");
    ck_assert_msg(validate_as_role("\"create\": false", &err) == TM_OK,
                  "with the privileges: %s", err.message);
    /* The helper tables exist: "create" needs no CREATE on the schema. */
    ck_assert_msg(validate_as_role(NULL, &err) == TM_OK, "create: %s",
                  err.message);
}
END_TEST

START_TEST(upsert_needs_update) {
    tm_error err = {sizeof err, ""};
    make_tables("\"mode\": \"upsert\"");
    sql(admin, "GRANT USAGE ON SCHEMA $S TO $R");
    sql(admin, "GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA $S TO $R");
    sql(admin, "GRANT UPDATE ON $S.tidemark_markers TO $R");
    sql(admin, "GRANT DELETE ON $S.tidemark_keys TO $R");
    sql(admin, "GRANT UPDATE ON $S.tidemark_table_owners TO $R");
    ck_assert_msg(validate_as_role(NULL, &err) == TM_OK, "append: %s",
                  err.message);
    ck_assert_int_eq(validate_as_role("\"mode\": \"upsert\"", &err),
                     TM_INVALID);
    assert_mentions(err.message, "lacks UPDATE", ".\"t\"");
    sql(admin, "GRANT UPDATE ON $S.t TO $R");
    ck_assert_msg(validate_as_role("\"mode\": \"upsert\"", &err) == TM_OK,
                  "upsert: %s", err.message);
}
END_TEST

/* With dedup, the keys held in memory: the connector's keysets row is
 * updated and its batch rows pruned. */
static tm_status validate_dedup_as_role(tm_error *err) {
    conf c;
    conf_init(&c, role, NULL);
    c.config.flags = TM_CONFIG_DEDUP;
    err->message[0] = '\0';
    tm_status rc = api->validate(tm_host_services(), &c.config, err);
    tm_settings_free(c.settings);
    return rc;
}

/* The sink opened by USER (NULL: the tests' usual user) for a connector
 * with dedup (keys held in memory). */
static tm_status open_dedup(const char *user, tm_error *err) {
    conf c;
    void *sink = NULL;
    conf_init(&c, user, NULL);
    c.config.flags = TM_CONFIG_DEDUP;
    err->message[0] = '\0';
    tm_status rc = api->open(tm_host_services(), &c.config, &sink, err);
    if (sink)
        api->close(sink);
    tm_settings_free(c.settings);
    return rc;
}

START_TEST(dedup_needs_the_keys_tables) {
    tm_error err = {sizeof err, ""};
    ck_assert_msg(open_dedup(NULL, &err) == TM_OK, "%s", err.message);
    sql(admin, "GRANT USAGE ON SCHEMA $S TO $R");
    sql(admin, "GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA $S TO $R");
    sql(admin, "GRANT UPDATE ON $S.tidemark_markers TO $R");
    sql(admin, "GRANT DELETE ON $S.tidemark_keys TO $R");
    sql(admin, "GRANT UPDATE ON $S.tidemark_table_owners TO $R");
    ck_assert_msg(validate_as_role(NULL, &err) == TM_OK, "no dedup: %s",
                  err.message);
    ck_assert_int_eq(validate_dedup_as_role(&err), TM_INVALID);
    assert_mentions(err.message, "lacks UPDATE", "tidemark_keysets");
    sql(admin, "GRANT UPDATE ON $S.tidemark_keysets TO $R");
    ck_assert_int_eq(validate_dedup_as_role(&err), TM_INVALID);
    assert_mentions(err.message, "lacks DELETE", "tidemark_key_batches");
    sql(admin, "GRANT DELETE ON $S.tidemark_key_batches TO $R");
    ck_assert_msg(validate_dedup_as_role(&err) == TM_OK, "dedup: %s",
                  err.message);
}
END_TEST

/* The trigger on tidemark_keys refusing a connector's keys there while
 * they are held in memory is made by the first open of a connector with
 * dedup ("dedup_keys": "memory", the default) when missing: that open
 * needs TRIGGER on the table and CREATE on the schema (its function), and
 * validate names each. */
START_TEST(dedup_needs_trigger_privilege_to_make_the_guard) {
    tm_error err = {sizeof err, ""};
    make_tables(NULL); /* no dedup: no trigger */
    sql(admin, "GRANT USAGE ON SCHEMA $S TO $R");
    sql(admin, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "
               "$S TO $R");
    tm_status rc = open_dedup(role, &err);
    ck_assert_msg(rc != TM_OK && strstr(err.message, "42501"),
                  "inconclusive: open with dedup without TRIGGER: %s: %s",
                  tm_status_name(rc), err.message);
    ck_assert_int_eq(validate_dedup_as_role(&err), TM_INVALID);
    assert_mentions(err.message, "lacks TRIGGER", "tidemark_keys");
    sql(admin, "GRANT TRIGGER ON $S.tidemark_keys TO $R");
    ck_assert_int_eq(validate_dedup_as_role(&err), TM_INVALID);
    assert_mentions(err.message, "lacks CREATE",
                    "tidemark_keys_held_in_memory");
    sql(admin, "GRANT CREATE ON SCHEMA $S TO $R");
    ck_assert_msg(validate_dedup_as_role(&err) == TM_OK, "after: %s",
                  err.message);
    ck_assert_msg(open_dedup(role, &err) == TM_OK, "%s", err.message);
}
END_TEST

/* A connector with dedup and "dedup_keys": "rows" reads tidemark_keysets
 * too: its claim (a connector whose keys are held in memory is refused
 * "rows") and the trigger on tidemark_keys its key rows fire. A role that
 * may not read it passed validate, then its claim failed, TM_FATAL
 * (42501); validate names it. Inconclusive unless that claim fails so. */
static tm_status open_claim_rows_as_role(tm_error *err) {
    conf c;
    void *sink = NULL;
    conf_init(&c, role, "\"dedup_keys\": \"rows\"");
    c.config.flags = TM_CONFIG_DEDUP;
    err->message[0] = '\0';
    tm_status rc = api->open(tm_host_services(), &c.config, &sink, err);
    if (rc == TM_OK) {
        tm_marker m = {.struct_size = sizeof m, .topic = "t", .partition = 0};
        rc = api->claim(sink, &m, 1, 0, err);
    }
    if (sink)
        api->close(sink);
    tm_settings_free(c.settings);
    return rc;
}

START_TEST(rows_dedup_needs_select_on_keysets) {
    tm_error err = {sizeof err, ""};
    /* another connector's keys held in memory made every helper table */
    ck_assert_msg(open_dedup(NULL, &err) == TM_OK, "%s", err.message);
    sql(admin, "GRANT USAGE ON SCHEMA $S TO $R");
    sql(admin, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "
               "$S TO $R");
    sql(admin, "REVOKE ALL ON $S.tidemark_keysets FROM $R");
    tm_status rc = open_claim_rows_as_role(&err);
    ck_assert_msg(rc != TM_OK && strstr(err.message, "42501") &&
                      strstr(err.message, "tidemark_keysets"),
                  "inconclusive: the rows connector's claim without SELECT "
                  "on tidemark_keysets: %s: %s",
                  tm_status_name(rc), err.message);
    conf c;
    conf_init(&c, role, "\"dedup_keys\": \"rows\"");
    c.config.flags = TM_CONFIG_DEDUP;
    err.message[0] = '\0';
    rc = api->validate(tm_host_services(), &c.config, &err);
    tm_settings_free(c.settings);
    ck_assert_msg(rc == TM_INVALID,
                  "validate of a \"rows\" connector whose claim fails "
                  "(42501 on tidemark_keysets): %s: %s",
                  tm_status_name(rc), err.message);
    assert_mentions(err.message, "lacks SELECT", "tidemark_keysets");
    sql(admin, "GRANT SELECT ON $S.tidemark_keysets TO $R");
    ck_assert_msg(open_claim_rows_as_role(&err) == TM_OK, "after: %s",
                  err.message);
}
END_TEST

START_TEST(schema_usage_and_create) {
    tm_error err = {sizeof err, ""};
    make_tables(NULL);
    sql(admin, "GRANT ALL ON ALL TABLES IN SCHEMA $S TO $R");
    ck_assert_int_eq(validate_as_role(NULL, &err), TM_INVALID);
    assert_mentions(err.message, "lacks USAGE", schema);

    /* USAGE but no CREATE, and the table must be created. */
    sql(admin, "GRANT USAGE ON SCHEMA $S TO $R");
    sql(admin, "DROP TABLE $S.t");
    ck_assert_int_eq(validate_as_role(NULL, &err), TM_INVALID);
    assert_mentions(err.message, "lacks CREATE", schema);
    sql(admin, "GRANT CREATE ON SCHEMA $S TO $R");
    ck_assert_msg(validate_as_role(NULL, &err) == TM_OK, "CREATE: %s",
                  err.message);
}
END_TEST

/* Open adds the marker's lineage columns to a markers table from before
 * them (and applied_wall to such a keys table) with ALTER TABLE ... ADD
 * COLUMN IF NOT EXISTS, which needs the table's owner: a role with every
 * privilege but not the owner passed validate, then open failed (42501).
 * validate names the owner and the fix. */
static tm_status open_as_role_with(const char *extra, tm_error *err) {
    conf c;
    void *sink = NULL;
    conf_init(&c, role, extra);
    tm_status rc = api->open(tm_host_services(), &c.config, &sink, err);
    if (sink)
        api->close(sink);
    tm_settings_free(c.settings);
    return rc;
}

static tm_status open_as_role(tm_error *err) {
    return open_as_role_with(NULL, err);
}

START_TEST(not_the_owner_of_an_older_helper_table_is_refused) {
    tm_error err = {sizeof err, ""};
    make_tables(NULL);
    sql(admin, "GRANT USAGE ON SCHEMA $S TO $R");
    sql(admin, "GRANT ALL ON ALL TABLES IN SCHEMA $S TO $R");
    ck_assert_msg(validate_as_role(NULL, &err) == TM_OK, "owner's tables: %s",
                  err.message);
    ck_assert_msg(open_as_role(&err) == TM_OK, "%s", err.message);
    /* a markers table from before the lineage; open's DDL (CREATE SCHEMA
     * and TABLE IF NOT EXISTS) needs CREATE on the database and schema */
    sql(admin, "ALTER TABLE $S.tidemark_markers DROP COLUMN last_offset");
    sql(admin, "GRANT CREATE ON SCHEMA $S TO $R");
    char grant[256];
    snprintf(grant, sizeof grant, "GRANT CREATE ON DATABASE \"%s\" TO $R",
             PQdb(admin));
    sql(super, grant);
    /* open as the role fails there, or this test proves nothing */
    tm_status rc = open_as_role(&err);
    ck_assert_msg(rc != TM_OK && strstr(err.message, "must be owner"),
                  "inconclusive: open as a non-owner: %s: %s",
                  tm_status_name(rc), err.message);
    ck_assert_int_eq(validate_as_role(NULL, &err), TM_INVALID);
    assert_mentions(err.message, "is not the owner", "tidemark_markers");
    /* the owner opens once: the columns are there, the role may open */
    make_tables(NULL);
    ck_assert_msg(validate_as_role(NULL, &err) == TM_OK, "after: %s",
                  err.message);
    ck_assert_msg(open_as_role(&err) == TM_OK, "%s", err.message);
    /* a keys table from before applied_wall */
    sql(admin, "ALTER TABLE $S.tidemark_keys DROP COLUMN applied_wall");
    ck_assert_int_eq(validate_as_role(NULL, &err), TM_INVALID);
    assert_mentions(err.message, "is not the owner", "tidemark_keys");
    /* a member of the owner's role may alter it */
    snprintf(grant, sizeof grant, "GRANT \"%s\" TO $R", PQuser(admin));
    sql(super, grant);
    ck_assert_msg(validate_as_role(NULL, &err) == TM_OK, "member: %s",
                  err.message);
    ck_assert_msg(open_as_role(&err) == TM_OK, "%s", err.message);
}
END_TEST

/* The keys' age index is made by the first connector with a retention
 * (schema.c): on a keys table made without it, that connector's open runs
 * CREATE INDEX, which needs the table's owner. validate refuses a role
 * that is not, naming the owner; once the owner has opened with a
 * retention, the role may. */
#define RETENTION "\"dedup_retention_s\": 3600"
START_TEST(not_the_owner_of_keys_without_the_age_index_is_refused) {
    tm_error err = {sizeof err, ""};
    make_tables(NULL); /* no retention: no age index */
    sql(admin, "GRANT USAGE, CREATE ON SCHEMA $S TO $R");
    sql(admin, "GRANT ALL ON ALL TABLES IN SCHEMA $S TO $R");
    char grant[256];
    snprintf(grant, sizeof grant, "GRANT CREATE ON DATABASE \"%s\" TO $R",
             PQdb(admin));
    sql(super, grant);
    ck_assert_msg(validate_as_role(NULL, &err) == TM_OK, "no retention: %s",
                  err.message);
    /* open as the role with a retention fails, or this proves nothing */
    tm_status rc = open_as_role_with(RETENTION, &err);
    ck_assert_msg(rc != TM_OK && strstr(err.message, "must be owner"),
                  "inconclusive: open as a non-owner: %s: %s",
                  tm_status_name(rc), err.message);
    ck_assert_int_eq(validate_as_role(RETENTION, &err), TM_INVALID);
    assert_mentions(err.message, "is not the owner", "tidemark_keys");
    /* the owner opens once with a retention: the index is there */
    make_tables(RETENTION);
    ck_assert_msg(validate_as_role(RETENTION, &err) == TM_OK, "after: %s",
                  err.message);
    ck_assert_msg(open_as_role_with(RETENTION, &err) == TM_OK, "%s",
                  err.message);
}
END_TEST

/* A role that is not the owner of up-to-date helper tables, with USAGE and
 * CREATE on the schema, every privilege on the tables and CREATE and TEMP
 * on the database, configures a new target table: validate said OK, then
 * open failed with 42501 "must be owner of table tidemark_markers", since
 * it ran all of the helpers' DDL (ALTER TABLE ... ADD COLUMN IF NOT EXISTS
 * and CREATE INDEX IF NOT EXISTS still need the owner) whenever anything
 * was missing. open makes only what is missing. */
START_TEST(non_owner_opens_with_a_new_target_table) {
    tm_error err = {sizeof err, ""};
    make_tables(NULL);
    sql(admin, "GRANT USAGE, CREATE ON SCHEMA $S TO $R");
    sql(admin, "GRANT ALL ON ALL TABLES IN SCHEMA $S TO $R");
    char grant[256];
    snprintf(grant, sizeof grant, "GRANT CREATE, TEMP ON DATABASE \"%s\" TO $R",
             PQdb(admin));
    sql(super, grant);
    static const char *const NEW[] = {
        "\"table\": \"t2\"", "\"table\": \"t3\", \"mode\": \"upsert\""};
    for (size_t i = 0; i < sizeof NEW / sizeof *NEW; i++) {
        ck_assert_msg(validate_as_role(NEW[i], &err) == TM_OK,
                      "validate %s: %s", NEW[i], err.message);
        ck_assert_msg(open_as_role_with(NEW[i], &err) == TM_OK, "open %s: %s",
                      NEW[i], err.message);
    }
    /* the database's own catalog: both tables made, by the role, and
     * upsert's unique index on t3 */
    char q[512];
    snprintf(q, sizeof q,
             "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = "
             "c.relnamespace WHERE n.nspname = '%s' AND c.relname IN ('t2', "
             "'t3') AND pg_get_userbyid(c.relowner) = '%s'",
             schema, role);
    PGresult *res = PQexec(admin, q);
    ck_assert_int_eq(PQresultStatus(res), PGRES_TUPLES_OK);
    ck_assert_str_eq(PQgetvalue(res, 0, 0), "2");
    PQclear(res);
    snprintf(q, sizeof q,
             "SELECT count(*) FROM pg_index i WHERE i.indisunique AND "
             "i.indrelid = to_regclass('\"%s\".t3')",
             schema);
    res = PQexec(admin, q);
    ck_assert_int_eq(PQresultStatus(res), PGRES_TUPLES_OK);
    ck_assert_str_eq(PQgetvalue(res, 0, 0), "1");
    PQclear(res);
}
END_TEST

/* open makes the dead letters' by-offset index when it is missing, which
 * needs the table's owner: validate said OK to a role that is not, then
 * open failed (42501). validate names the owner and the fix. */
START_TEST(not_the_owner_of_dead_letters_without_the_index_is_refused) {
    tm_error err = {sizeof err, ""};
    make_tables(NULL);
    sql(admin, "GRANT USAGE, CREATE ON SCHEMA $S TO $R");
    sql(admin, "GRANT ALL ON ALL TABLES IN SCHEMA $S TO $R");
    sql(admin, "DROP INDEX $S.tidemark_dead_letters_by_offset");
    /* open as the role fails there, or this test proves nothing */
    tm_status rc = open_as_role(&err);
    ck_assert_msg(rc != TM_OK && strstr(err.message, "must be owner"),
                  "inconclusive: open as a non-owner: %s: %s",
                  tm_status_name(rc), err.message);
    ck_assert_int_eq(validate_as_role(NULL, &err), TM_INVALID);
    assert_mentions(err.message, "is not the owner", "tidemark_dead_letters");
    /* the owner opens once: the index is there, the role may open */
    make_tables(NULL);
    ck_assert_msg(validate_as_role(NULL, &err) == TM_OK, "after: %s",
                  err.message);
    ck_assert_msg(open_as_role(&err) == TM_OK, "%s", err.message);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("postgres_validate");
    TCase *tc = tcase_create("privileges");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, missing_insert_is_refused_naming_it);
    tcase_add_test(tc, upsert_needs_update);
    tcase_add_test(tc, dedup_needs_the_keys_tables);
    tcase_add_test(tc, schema_usage_and_create);
    tcase_add_test(tc, not_the_owner_of_an_older_helper_table_is_refused);
    tcase_add_test(tc, not_the_owner_of_keys_without_the_age_index_is_refused);
    tcase_add_test(tc, non_owner_opens_with_a_new_target_table);
    tcase_add_test(tc, dedup_needs_trigger_privilege_to_make_the_guard);
    tcase_add_test(tc, rows_dedup_needs_select_on_keysets);
    tcase_add_test(tc,
                   not_the_owner_of_dead_letters_without_the_index_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
