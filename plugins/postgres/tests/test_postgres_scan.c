/* The PostgreSQL sink's scan on what another writer may leave in its
 * table: a timestamptz of 'infinity', '-infinity' or within 30 years of
 * PostgreSQL's last timestamp, which the Unix-epoch microseconds of a
 * tm_value cannot hold (adding the epochs' difference overflowed: UB that
 * UBSan reports). Such a row comes back without values, the others with
 * theirs. Rows are written with libpq into a schema of the test's own. */
#include <check.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "config/settings.h"
#include "pg_test_common.h"
#include "services/host_services.h"

static const tm_sink_api *api;
static char schema[64], connector[64];
static PGconn *admin;

static void setup(void) {
    api = pgt_plugin(TM_POSTGRES_PLUGIN);
    snprintf(schema, sizeof schema, "scan_values_%d", (int)getpid());
    snprintf(connector, sizeof connector, "scan_values_%d", (int)getpid());
    admin = pgt_connect(pgt_conninfo());
    char text[512];
    snprintf(text, sizeof text,
             "DROP SCHEMA IF EXISTS \"%s\" CASCADE; CREATE SCHEMA \"%s\"; "
             "CREATE TABLE \"%s\".t (at timestamptz, _tm_topic text NOT "
             "NULL, _tm_partition int NOT NULL, _tm_offset bigint NOT NULL, "
             "_tm_identity text)",
             schema, schema, schema);
    PQclear(pgt_sql(admin, text));
}

static void teardown(void) {
    char text[256];
    snprintf(text, sizeof text, "DROP SCHEMA IF EXISTS \"%s\" CASCADE", schema);
    PQclear(PQexec(admin, text));
    PQfinish(admin);
    admin = NULL;
}

static const tm_column COLS[] = {
    {sizeof(tm_column), "at", TM_TYPE_TIMESTAMP, 0, 0},
};

#define NROWS 5
/* Row i at offset i; NULL: the row must come back without values. */
static const char *const AT[NROWS] = {
    "2020-01-01 00:00:00.000001+00", "infinity", "-infinity",
    "294270-01-01 00:00:00+00", "4713-01-01 00:00:00+00 BC"};
static const int WITH[NROWS] = {1, 0, 0, 0, 1};

typedef struct seen {
    int rows[NROWS], with[NROWS];
    int64_t at[NROWS];
} seen;

static int on_item(void *ctx, const tm_scan_item *it) {
    seen *s = ctx;
    if (it->kind != TM_ITEM_ROW || it->offset < 0 || it->offset >= NROWS)
        return 0;
    s->rows[it->offset]++;
    if (TM_SCAN_ITEM_HAS_VALUES(it)) {
        s->with[it->offset] = 1;
        s->at[it->offset] = TM_CELEM(tm_value, it->values, 0)->v.i;
    }
    return 0;
}

START_TEST(timestamp_out_of_range_row_without_values) {
    for (int i = 0; i < NROWS; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "INSERT INTO \"%s\".t VALUES ('%s', 't', 0, %d, NULL)", schema,
                 AT[i], i);
        PQclear(pgt_sql(admin, text));
    }
    char text[512];
    snprintf(text, sizeof text,
             "{\"conninfo\": \"%s\", \"schema\": \"%s\", \"table\": \"t\"}",
             pgt_conninfo(), schema);
    json_error_t je;
    json_t *obj = json_loads(text, 0, &je);
    ck_assert_ptr_nonnull(obj);
    tm_settings *settings = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    ck_assert_ptr_nonnull(settings);
    tm_sink_config config = {.struct_size = sizeof config,
                             .connector = connector,
                             .settings = settings,
                             .columns = COLS,
                             .ncolumns = 1};
    void *sink = pgt_open(api, tm_host_services(), &config);
    seen s = {0};
    tm_emit_target target = {.fn = on_item, .user = &s};
    tm_error err = {sizeof err, ""};
    tm_status rc = api->scan(sink, "t", 0, &target, &err);
    api->close(sink);
    tm_settings_free(settings);
    ck_assert_msg(rc == TM_OK, "scan: %s: %s", tm_status_name(rc), err.message);
    for (int i = 0; i < NROWS; i++) {
        ck_assert_msg(s.rows[i] == 1, "offset %d (%s): %d rows", i, AT[i],
                      s.rows[i]);
        ck_assert_msg(s.with[i] == WITH[i],
                      "offset %d (%s): came back %s values (%" PRId64 ")", i,
                      AT[i], s.with[i] ? "with" : "without", s.at[i]);
    }
    ck_assert_int_eq(s.at[0], INT64_C(1577836800000001));
    /* 4713-01-01 BC, near PostgreSQL's first day, still fits: Julian day
     * 0 (4714-11-24 BC, -2440588 days from 1970) plus 38 days. */
    ck_assert_int_eq(s.at[4], (INT64_C(-2440588) + 38) * 86400 * 1000000);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("postgres_scan");
    TCase *tc = tcase_create("scan");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, timestamp_out_of_range_row_without_values);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
