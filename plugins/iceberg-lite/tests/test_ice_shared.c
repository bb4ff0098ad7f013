/* "shared_table" is every writer's consent, not the newcomer's alone:
 * each connector's setting is recorded in the table when it claims, and
 * a connector with "shared_table": true is refused (open, validate,
 * claim, and at every commit) while the table holds the markers of a
 * connector that did not consent. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "config/settings.h"
#include "ice_fixture.h"
#include "services/host_services.h"
#include "table_meta.h"

static ice_fx fx;
static tm_settings *shared, *alone;

static tm_settings *settings_of(const char *text) {
    char json[1024];
    snprintf(json, sizeof json, text, fx.table);
    json_t *obj = json_loads(json, 0, NULL);
    ck_assert_ptr_nonnull(obj);
    tm_settings *s = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    ck_assert_ptr_nonnull(s);
    return s;
}

static void setup(void) {
    ck_assert_int_eq(ice_fx_init(&fx, ""), 0);
    shared = settings_of("{\"path\": \"%s\", \"shared_table\": true}");
    alone = settings_of("{\"path\": \"%s\"}");
}

static void teardown(void) {
    tm_settings_free(shared);
    tm_settings_free(alone);
    ice_fx_done(&fx, 0);
}

/* A connector: its own config (the sink keeps a pointer to it). */
typedef struct conn {
    tm_sink_config cfg;
    void *sink;
    tm_marker m;
} conn;

static tm_status open_as(conn *c, const char *name, tm_settings *set,
                         tm_error *err) {
    c->cfg = fx.config;
    c->cfg.connector = name;
    c->cfg.settings = set;
    c->sink = NULL;
    *err = (tm_error){sizeof *err, ""};
    return ice_api->open(tm_host_services(), &c->cfg, &c->sink, err);
}

static tm_status validate_as(const char *name, tm_settings *set,
                             tm_error *err) {
    tm_sink_config cfg = fx.config;
    cfg.connector = name;
    cfg.settings = set;
    *err = (tm_error){sizeof *err, ""};
    return ice_api->validate(tm_host_services(), &cfg, err);
}

static tm_status claim(conn *c, int32_t p, tm_error *err) {
    c->m = (tm_marker){.struct_size = sizeof c->m,
                       .topic = "orders",
                       .partition = p,
                       .next_offset = 0};
    *err = (tm_error){sizeof *err, ""};
    return ice_api->claim(c->sink, &c->m, 1, 0, err);
}

static tm_status commit(conn *c, int64_t start, tm_error *err) {
    ice_fx_batch kb;
    char id[48];
    snprintf(id, sizeof id, "%s-%lld", c->cfg.connector, (long long)start);
    ice_fx_batch_init(&kb, id);
    uint32_t r =
        ice_fx_range(&kb, c->m.partition, start, start + 3, c->m.epoch);
    for (int64_t o = start; o < start + 3; o++)
        ice_fx_record(&kb, r, o);
    ice_fx_seal(&kb);
    *err = (tm_error){sizeof *err, ""};
    tm_status rc = ice_api->commit(c->sink, &kb.b, err);
    ice_fx_batch_free(&kb);
    return rc;
}

static int64_t newest(void) {
    ice_table t;
    char why[1024];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    ck_assert_msg(ice_table_refresh(&t, why, sizeof why) == 0, "%s", why);
    int64_t v = t.version;
    ice_table_free(&t);
    return v;
}

static void assert_names(const char *msg, const char *who) {
    char q[64];
    snprintf(q, sizeof q, "\"%s\"", who);
    ck_assert_msg(strstr(msg, q) && strstr(msg, "shared_table") &&
                      strstr(msg, fx.table),
                  "%s", msg);
}

/* B (no "shared_table") writes first; A ("shared_table": true) comes
 * later: B never consented, so A is refused everywhere it looks. */
START_TEST(shared_table_needs_every_writers_consent) {
    conn a, b;
    tm_error err;
    /* A opens the empty table first (nothing to refuse yet). */
    ck_assert_int_eq(open_as(&a, "conn_a", shared, &err), TM_OK);
    ck_assert_int_eq(open_as(&b, "conn_b", alone, &err), TM_OK);
    ck_assert_int_eq(claim(&b, 0, &err), TM_OK);
    ck_assert_int_eq(commit(&b, 0, &err), TM_OK);
    int64_t v = newest();
    /* A's claim: refused, naming B. */
    tm_status rc = claim(&a, 1, &err);
    ck_assert_msg(rc == TM_FATAL, "claim: %s: %s", tm_status_name(rc),
                  err.message);
    assert_names(err.message, "conn_b");
    ck_assert_int_eq(newest(), v);
    ice_api->close(a.sink);
    /* A fresh open and validate of A: refused the same way. */
    rc = open_as(&a, "conn_a", shared, &err);
    if (rc == TM_OK)
        ice_api->close(a.sink);
    ck_assert_msg(rc == TM_INVALID, "open: %s", tm_status_name(rc));
    assert_names(err.message, "conn_b");
    tm_error verr;
    ck_assert_int_eq(validate_as("conn_a", shared, &verr), TM_INVALID);
    ck_assert_str_eq(verr.message, err.message);
    /* B goes on alone. */
    ck_assert_int_eq(commit(&b, 3, &err), TM_OK);
    ice_api->close(b.sink);

    /* B consents (restarted with "shared_table": true, its claim records
     * it): now A is welcome. */
    rc = open_as(&b, "conn_b", shared, &err);
    ck_assert_msg(rc == TM_OK, "open: %s", err.message);
    ck_assert_int_eq(claim(&b, 0, &err), TM_OK);
    ck_assert_int_eq(validate_as("conn_a", shared, &verr), TM_OK);
    ck_assert_int_eq(open_as(&a, "conn_a", shared, &err), TM_OK);
    ck_assert_msg(claim(&a, 1, &err) == TM_OK, "%s", err.message);
    ck_assert_msg(commit(&a, 0, &err) == TM_OK, "%s", err.message);
    ck_assert_msg(commit(&b, 6, &err) == TM_OK, "%s", err.message);
    ice_api->close(a.sink);
    ice_api->close(b.sink);
}
END_TEST

/* Removes conn_b's recorded consent in a new version, as a table written
 * before consents were recorded looks. */
static void drop_consent(const char *name) {
    ice_table t;
    char why[1024], tmp[4096], key[128];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 1, why, sizeof why), 0);
    ck_assert_msg(ice_table_refresh(&t, why, sizeof why) == 0, "%s", why);
    json_t *next = ice_meta_next(&t);
    ck_assert_ptr_nonnull(next);
    snprintf(key, sizeof key, "tidemark.shared-table.%s", name);
    json_t *props = json_object_get(next, "properties");
    ck_assert_msg(json_object_get(props, key), "inconclusive: no %s", key);
    ck_assert_int_eq(json_object_del(props, key), 0);
    ck_assert_int_eq(ice_meta_stage(&t, next, tmp, why, sizeof why), 0);
    ck_assert_msg(ice_meta_link(&t, next, tmp, why, sizeof why) == 0, "%s",
                  why);
    json_decref(next);
    ice_table_free(&t);
}

/* The consent is checked again at every commit: the metadata is read
 * anyway. A running connector stops (FATAL, nothing written) once the
 * table holds a writer that did not consent. */
START_TEST(shared_table_rechecked_at_commit) {
    conn a, b;
    tm_error err;
    ck_assert_int_eq(open_as(&a, "conn_a", shared, &err), TM_OK);
    ck_assert_int_eq(open_as(&b, "conn_b", shared, &err), TM_OK);
    ck_assert_int_eq(claim(&a, 1, &err), TM_OK);
    ck_assert_int_eq(claim(&b, 0, &err), TM_OK);
    ck_assert_msg(commit(&a, 0, &err) == TM_OK, "%s", err.message);
    ck_assert_msg(commit(&b, 0, &err) == TM_OK, "%s", err.message);
    drop_consent("conn_b");
    int64_t v = newest();
    tm_status rc = commit(&a, 3, &err);
    ck_assert_msg(rc == TM_FATAL, "commit: %s: %s", tm_status_name(rc),
                  err.message);
    assert_names(err.message, "conn_b");
    ck_assert_int_eq(newest(), v);
    ice_api->close(a.sink);
    ice_api->close(b.sink);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("iceberg_lite_shared");
    TCase *tc = tcase_create("shared");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, shared_table_needs_every_writers_consent);
    tcase_add_test(tc, shared_table_rechecked_at_commit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
