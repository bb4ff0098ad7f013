/* The "partition" setting through the plugin API: bad specs refused by
 * open and validate naming $.sink.settings.partition and what is wrong; a
 * table whose spec differs from the setting's refused (no spec
 * evolution). What a partitioned table holds is judged by pyiceberg,
 * pyarrow and DuckDB in judge_partition.py. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "ice_fixture.h"
#include "services/host_services.h"

static ice_fx fx;

static void setup(void) {
    ck_assert_int_eq(ice_fx_init(&fx, ""), 0);
}

static void teardown(void) {
    ice_fx_done(&fx, 0);
}

static void set_partition(const char *spec) {
    char json[512];
    snprintf(json, sizeof json, "{\"path\": \"$T\", \"partition\": \"%s\"}",
             spec);
    ck_assert_int_eq(ice_fx_settings(&fx, json), 0);
}

/* open and validate both refuse SPEC, naming the setting and WHY. */
static void refused(const char *spec, const char *why) {
    void *sink;
    tm_error err;
    set_partition(spec);
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_msg(strstr(err.message, "$.sink.settings.partition") &&
                      strstr(err.message, why),
                  "%s: %s", spec, err.message);
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &err),
                     TM_INVALID);
    ck_assert_msg(strstr(err.message, "$.sink.settings.partition") &&
                      strstr(err.message, why),
                  "validate %s: %s", spec, err.message);
}

START_TEST(bad_partition_settings_refused) {
    refused("day(nope)", "no column \"nope\" in the mapping");
    refused("nope", "no column \"nope\"");
    refused("day(id)", "day does not apply to a long column");
    refused("hour(body)", "hour does not apply to a string column");
    refused("bucket[4](amount)", "bucket does not apply to a double column");
    refused("truncate[4](at)", "truncate does not apply to a timestamptz");
    refused("bucket[0](id)", "N of bucket[N] must be an integer from 1");
    refused("bucket[2147483648](id)", "N of bucket[N] must be an integer");
    refused("bucket[-3](id)", "N of bucket[N]");
    refused("bucket(id)", "not a transform");
    refused("truncate[0](body)", "W of truncate[W] must be an integer from 1");
    refused("days(at)", "not a transform");
    refused("day(at", "expected transform(column)");
    refused("day(at),", "a trailing comma");
    refused("day(at), , id", "no column name");
    refused("day(at), day(at)", "the name at_day is taken");
    /* The setting is checked before anything is created. */
    ck_assert_int_ne(access(fx.table, F_OK), 0);
}
END_TEST

START_TEST(good_partition_settings_accepted) {
    tm_error err;
    set_partition(" day(at) , bucket[16](id), truncate[3](body), flag, "
                  "identity(_tm_partition), year(at), month(at), hour(at), "
                  "bucket[2147483647](raw)");
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &err),
                     TM_OK);
}
END_TEST

/* Writes records [at, at + 3) of partition 0 with spec SPEC. */
static void write_one(const char *spec, int64_t at) {
    void *sink;
    tm_error err;
    tm_marker m;
    set_partition(spec);
    tm_status rc = ice_fx_open(&fx, &sink, &err);
    ck_assert_msg(rc == TM_OK, "open %s: %s", spec, err.message);
    ck_assert_int_eq(ice_fx_claim(sink, &m, 1, &err), TM_OK);
    ice_fx_batch kb;
    char id[32];
    snprintf(id, sizeof id, "b-%lld", (long long)at);
    ice_fx_batch_init(&kb, id);
    uint32_t r = ice_fx_range(&kb, 0, at, at + 3, m.epoch);
    for (int64_t o = at; o < at + 3; o++)
        ice_fx_record(&kb, r, o);
    ice_fx_seal(&kb);
    rc = ice_api->commit(sink, &kb.b, &err);
    ck_assert_msg(rc == TM_OK, "commit: %s", err.message);
    ice_fx_batch_free(&kb);
    ice_api->close(sink);
}

/* A table keeps the spec it was created with: another one is refused at
 * open and validate, showing both. */
START_TEST(different_spec_refused) {
    write_one("day(at), bucket[4](id)", 0);
    refused("day(at), bucket[8](id)",
            "is partitioned by day(at), bucket[4](id); the setting says "
            "partitioned by day(at), bucket[8](id)");
    refused("", "the setting says unpartitioned");
    refused("bucket[4](id), day(at)", "partition spec evolution is not "
                                      "supported");
    write_one("day(at), bucket[4](id)", 3); /* the same spec goes on */
}
END_TEST

START_TEST(unpartitioned_table_refuses_a_spec) {
    write_one("", 0);
    refused("day(at)",
            "is unpartitioned; the setting says partitioned by day(at)");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("iceberg_lite.partition");
    TCase *tc = tcase_create("partition");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, bad_partition_settings_refused);
    tcase_add_test(tc, good_partition_settings_accepted);
    tcase_add_test(tc, different_spec_refused);
    tcase_add_test(tc, unpartitioned_table_refuses_a_spec);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
