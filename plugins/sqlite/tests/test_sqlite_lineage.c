/* The marker's lineage in the SQLite sink: a tidemark_markers table made
 * before it (ABI 1.0, without the three columns) gets them at open, its
 * markers keep their offsets and read as "no lineage", and the next commit
 * stores the batch's last record with the marker. */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "commit/lineage.h"
#include "fixture.h"

static char why[FX_WHY_MAX];

/* The markers table as the sink made it before the lineage, one marker. */
static void old_markers_table(void) {
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(fx_db_path, &db), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(
        db,
        "CREATE TABLE tidemark_markers (connector TEXT NOT NULL, topic TEXT "
        "NOT NULL, \"partition\" INTEGER NOT NULL, next_offset INTEGER NOT "
        "NULL, epoch INTEGER NOT NULL, last_batch_id TEXT NOT NULL DEFAULT "
        "'', rows INTEGER NOT NULL DEFAULT 0, dead_letters INTEGER NOT NULL "
        "DEFAULT 0, filtered INTEGER NOT NULL DEFAULT 0, duplicates INTEGER "
        "NOT NULL DEFAULT 0, PRIMARY KEY (connector, topic, \"partition\"));"
        "INSERT INTO tidemark_markers (connector, topic, \"partition\", "
        "next_offset, epoch) VALUES ('unit', 't', 0, 5, 1);",
        NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "old table: %s", msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(db);
}

START_TEST(old_markers_table_gets_the_lineage) {
    ck_assert_msg(fx_load_plugin(why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_tmpdir(why, sizeof why) == 0, "%s", why);
    old_markers_table();
    int64_t cols = -1;
    ck_assert_int_eq(fx_sql_int("SELECT count(*) FROM pragma_table_info("
                                "'tidemark_markers') WHERE name LIKE 'last_%' "
                                "AND name != 'last_batch_id'",
                                &cols, why, sizeof why),
                     SQLITE_OK);
    ck_assert_msg(cols == 0,
                  "inconclusive: the old table has %lld lineage "
                  "columns",
                  (long long)cols);
    fx_conf c;
    void *sink = NULL;
    ck_assert_msg(fx_conf_init(&c, NULL, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_open(&c, &sink, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_int_eq(fx_sql_int("SELECT count(*) FROM pragma_table_info("
                                "'tidemark_markers') WHERE name LIKE 'last_%' "
                                "AND name != 'last_batch_id'",
                                &cols, why, sizeof why),
                     SQLITE_OK);
    ck_assert_int_eq(cols, 3);

    tm_marker m[1];
    ck_assert_msg(fx_claim(sink, m, 1, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_int_eq(m[0].next_offset, 5); /* the old marker, kept */
    ck_assert_int_eq(m[0].last_offset, TM_NO_OFFSET);
    ck_assert_str_eq(m[0].last_record_hash, "");

    fx_batch bt;
    const int64_t epochs[1] = {m[0].epoch};
    ck_assert_int_eq(fx_batch_make(&bt, "b1", 1, 5, 8, epochs, "x"), 0);
    tm_lineage_fill_ranges(bt.ranges, &bt.b); /* as the host's commit does */
    tm_error err;
    ck_assert_msg(fx_commit(sink, &bt, &err) == TM_OK, "%s", err.message);
    ck_assert_msg(fx_read(sink, m, 1, why, sizeof why) == TM_OK, "%s", why);
    char want[TM_RECORD_HASH_MAX];
    tm_lineage_hash(NULL, 0, "{}", 2, want);
    ck_assert_int_eq(m[0].next_offset, 8);
    ck_assert_int_eq(m[0].last_offset, 7);
    ck_assert_int_eq(m[0].last_timestamp_ms, 1007);
    ck_assert_str_eq(m[0].last_record_hash, want);
    fx_api->close(sink);
    fx_conf_done(&c);
    fx_rmdir();
}
END_TEST

int main(void) {
    Suite *s = suite_create("sqlite_lineage");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, old_markers_table_gets_the_lineage);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
