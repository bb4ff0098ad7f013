/* The SQLite sink when COMMIT itself fails (commit.c: "outcome unknown:
 * roll back what is left, start from a fresh connection, and let the
 * resend's marker check settle it"). A fault-injecting VFS (fault_vfs.c),
 * registered as the process's default, fails one operation on the WAL
 * file while the plugin commits a batch; the test then proves:
 *   - the plugin's connections really go through the wrapper (the plugin
 *     is dlopen'ed RTLD_LOCAL, yet shares the test's libsqlite3);
 *   - the failure was injected into the COMMIT step and nowhere else;
 *   - commit() said TM_RETRY, reopened its connection, and left no lock;
 *   - the batch either landed whole or not at all;
 *   - the same batch again gives TM_OK (it had not landed) or TM_ALREADY
 *     (it had), and every offset has exactly one row, the marker at the
 *     batch's end, its counters counted once.
 * A test whose fault did not fire where intended fails as "inconclusive"
 * rather than passing on a path it never took. */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "fault_vfs.h"
#include "fixture.h"

static char why[FX_WHY_MAX];

static void setup(void) {
    why[0] = '\0';
    ck_assert_msg(fx_load_plugin(why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_tmpdir(why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(fv_install(), SQLITE_OK);
    ck_assert_str_eq(sqlite3_vfs_find(NULL)->zName, fv_name());
    /* only this test's database counts: "tm-sqlite-fault-XXXXXX/sink.db"
     * (the mkdtemp name) is unique to it */
    fv_watch(fx_db_path + (strrchr(fx_dir, '/') - fx_dir) + 1);
    fv_disarm();
    fv_persist_wal(0);
    fv_fail_opens(0);
}

static void teardown(void) {
    fv_disarm();
    fv_persist_wal(0);
    fv_fail_opens(0);
    fx_rmdir();
}

static int64_t sql_int(const char *sql) {
    int64_t v = 0;
    ck_assert_msg(fx_sql_int(sql, &v, why, sizeof why) == SQLITE_OK, "%s", why);
    return v;
}

/* The variants: which operation fails, whether the commit is meant to
 * have landed when commit() reports the failure, and whether the reopen
 * after it fails too (the next call must then open again). */
static const struct {
    fv_fault fault;
    int landed, fail_reopen;
    const char *name;
} VARIANT[] = {
    {FV_WAL_SYNC, 0, 0, "fsync of the WAL fails"},
    {FV_WAL_WRITE, 0, 0, "write of the WAL fails"},
    {FV_WAL_SYNC_LANDED, 1, 0,
     "fsync of the WAL reaches the disk but reports failure, WAL kept"},
    {FV_WAL_SYNC, 0, 1, "fsync of the WAL fails, and so does the reopen"},
};

START_TEST(commit_failure_is_retry_then_settled) {
    const char *name = VARIANT[_i].name;
    fx_conf c;
    void *sink;
    tm_marker m;
    tm_error err;
    fx_batch b1, b2, b3;
    ck_assert_msg(
        fx_conf_init(&c, "\"synchronous\": \"FULL\"", why, sizeof why) == 0,
        "%s", why);

    /* 1. The plugin's sqlite3_open_v2 goes through the wrapper. */
    long opens = fv_get().main_opens;
    ck_assert_msg(fx_open(&c, &sink, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_msg(fv_get().main_opens > opens,
                  "inconclusive (%s): the plugin opened %s without going "
                  "through the default VFS \"%s\" (not the test's "
                  "libsqlite3?)",
                  name, fx_db_path, fv_name());
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    int64_t epoch = m.epoch;

    /* A first batch commits normally: the WAL is open and has frames. */
    ck_assert_int_eq(fx_batch_make(&b1, "fault-1", 1, 0, 3, &epoch, "one"), 0);
    tm_status r = fx_commit(sink, &b1, &err);
    ck_assert_msg(r == TM_OK, "%s: commit fault-1: %s: %s", name,
                  tm_status_name(r), err.message);

    /* 2. The second batch's COMMIT fails. Nothing before COMMIT writes the
     * WAL (a 3-row batch never spills the page cache), so the first WAL
     * xWrite/xSync after arming is the COMMIT's; the error text names the
     * step that failed, which proves it. */
    if (VARIANT[_i].landed)
        fv_persist_wal(1);
    ck_assert_int_eq(fx_batch_make(&b2, "fault-2", 1, 3, 6, &epoch, "two"), 0);
    opens = fv_get().main_opens;
    long open_failures = fv_get().open_failures;
    long fired = fv_get().fired; /* the process's count so far */
    fv_arm(VARIANT[_i].fault);
    fv_fail_opens(VARIANT[_i].fail_reopen);
    r = fx_commit(sink, &b2, &err);
    fv_disarm();
    fv_fail_opens(0);
    fv_stats st = fv_get();
    ck_assert_msg(st.fired == fired + 1,
                  "inconclusive (%s): the injected failure never fired "
                  "(commit gave %s: %s; %ld WAL writes, %ld WAL syncs)",
                  name, tm_status_name(r), err.message, st.wal_writes,
                  st.wal_syncs);
    ck_assert_msg(strncmp(err.message, "COMMIT on ", 10) == 0,
                  "inconclusive (%s): the failure (%s) was not reported by "
                  "the COMMIT step: %s: %s",
                  name, st.fired_on, tm_status_name(r), err.message);
    if (VARIANT[_i].fault == FV_WAL_SYNC_LANDED)
        ck_assert_msg(st.real_sync_rc == SQLITE_OK,
                      "inconclusive (%s): the real fsync failed too (%d)", name,
                      st.real_sync_rc);
    ck_assert_msg(strstr(err.message, "disk I/O error") != NULL, "%s: %s", name,
                  err.message);

    /* 3. What commit() owes after a failed COMMIT. */
    ck_assert_msg(r == TM_RETRY, "%s: commit fault-2 gave %s, not RETRY: %s",
                  name, tm_status_name(r), err.message);
    /* It closed its connection and opened a new one (or tried to). */
    ck_assert_msg(st.main_opens + st.open_failures == opens + open_failures + 1,
                  "%s: the connection was not reopened (%ld opens of the "
                  "database during the failed commit, want 1)",
                  name,
                  st.main_opens + st.open_failures - opens - open_failures);
    if (VARIANT[_i].fail_reopen)
        ck_assert_msg(st.open_failures == open_failures + 1,
                      "inconclusive (%s): the reopen did not fail", name);
    {
        /* No transaction is left open, no lock held: another connection
         * takes the write lock at once. */
        sqlite3 *other = NULL;
        ck_assert_int_eq(sqlite3_open(fx_db_path, &other), SQLITE_OK);
        int rc = sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        ck_assert_msg(rc == SQLITE_OK, "%s: write lock still held: %s", name,
                      sqlite3_errmsg(other));
        ck_assert_int_eq(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL),
                         SQLITE_OK);
        ck_assert_int_eq(sqlite3_close(other), SQLITE_OK);
    }

    /* 4. All or nothing, read with a connection of our own. */
    int64_t rows = sql_int("SELECT count(*) FROM t WHERE _tm_offset >= 3");
    int64_t next = sql_int("SELECT next_offset FROM tidemark_markers");
    int landed = rows == 3 && next == 6;
    ck_assert_msg(landed || (rows == 0 && next == 3),
                  "%s: a torn commit: %lld of 3 rows, marker at %lld", name,
                  (long long)rows, (long long)next);
    ck_assert_msg(landed == VARIANT[_i].landed,
                  "inconclusive (%s): the commit %s, the variant needs it "
                  "to have %s",
                  name, landed ? "landed" : "did not land",
                  VARIANT[_i].landed ? "landed" : "not landed");

    /* 5. The resend is settled by the marker check (after opening again
     * when the reopen had failed). */
    opens = fv_get().main_opens;
    r = fx_commit(sink, &b2, &err);
    ck_assert_int_eq(fv_get().main_opens - opens, VARIANT[_i].fail_reopen);
    ck_assert_msg(r == (landed ? TM_ALREADY : TM_OK),
                  "%s: resend of fault-2 gave %s (want %s): %s", name,
                  tm_status_name(r), landed ? "ALREADY" : "OK", err.message);
    ck_assert_int_eq(fv_get().fired, fired + 1); /* nothing else injected */

    /* 6. Exactly once, through the plugin and directly. */
    ck_assert_msg(fx_scan_exactly_once(sink, 0, 6, why, sizeof why) == 0,
                  "%s: %s", name, why);
    ck_assert_msg(fx_sql_exactly_once(0, 6, why, sizeof why) == 0, "%s: %s",
                  name, why);
    ck_assert_msg(fx_read(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_int_eq(m.next_offset, 6);
    ck_assert_int_eq(m.epoch, epoch);
    ck_assert_str_eq(m.last_batch_id, "fault-2");
    ck_assert_uint_eq(m.rows, 6);
    ck_assert_uint_eq(m.dead_letters, 0);

    /* 7. The reopened instance goes on as before. */
    ck_assert_int_eq(fx_batch_make(&b3, "fault-3", 1, 6, 8, &epoch, "three"),
                     0);
    r = fx_commit(sink, &b3, &err);
    ck_assert_msg(r == TM_OK, "%s: commit fault-3: %s: %s", name,
                  tm_status_name(r), err.message);
    ck_assert_msg(fx_scan_exactly_once(sink, 0, 8, why, sizeof why) == 0,
                  "%s: %s", name, why);
    ck_assert_int_eq(sql_int("SELECT rows FROM tidemark_markers"), 8);
    fx_api->close(sink);
    fx_conf_done(&c);
}
END_TEST

/* Business keys held in memory across a COMMIT that fails (variants 0:
 * it did not land, 2: it landed): the set takes the batch's keys only
 * after COMMIT returned OK, so after the failure the keys of the batch
 * must come from the database: a producer's resend of them in the next
 * batch (new offsets, the same identities) is a duplicate whether the
 * failed COMMIT had landed (the next commit reads the newer generation)
 * or not (the resend of the batch applies them). */
static void with_keys(fx_batch *b, int64_t first_key) {
    static char ids[64][24]; /* "k-" and any int64 */
    for (size_t i = 0; i < b->b.nrecords; i++) {
        int64_t k = first_key + (int64_t)i;
        snprintf(ids[k % 64], sizeof ids[0], "k-%lld", (long long)k);
        b->records[i].identity = ids[k % 64];
        b->records[i].identity_hash = "h";
    }
}

START_TEST(failed_commit_keys_in_memory_come_from_the_database) {
    int v = _i ? 2 : 0; /* not landed, landed */
    fx_conf c;
    ck_assert_msg(
        fx_conf_init(&c, "\"synchronous\": \"FULL\"", why, sizeof why) == 0,
        "%s", why);
    c.config.flags |= TM_CONFIG_DEDUP;
    const char *name = VARIANT[v].name;
    void *sink;
    tm_marker m;
    tm_error err;
    fx_batch b1, b2, b3;
    ck_assert_msg(fx_open(&c, &sink, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    int64_t epoch = m.epoch;
    ck_assert_int_eq(fx_batch_make(&b1, "keys-1", 1, 0, 3, &epoch, "one"), 0);
    with_keys(&b1, 0);
    ck_assert_int_eq(fx_commit(sink, &b1, &err), TM_OK);
    if (VARIANT[v].landed)
        fv_persist_wal(1);
    ck_assert_int_eq(fx_batch_make(&b2, "keys-2", 1, 3, 6, &epoch, "two"), 0);
    with_keys(&b2, 3);
    long fired = fv_get().fired;
    fv_arm(VARIANT[v].fault);
    tm_status r = fx_commit(sink, &b2, &err);
    fv_disarm();
    ck_assert_msg(fv_get().fired == fired + 1 &&
                      strncmp(err.message, "COMMIT on ", 10) == 0,
                  "inconclusive (%s): the failure was not injected into "
                  "COMMIT: %s: %s",
                  name, tm_status_name(r), err.message);
    ck_assert_int_eq(r, TM_RETRY);
    int landed = sql_int("SELECT count(*) FROM t WHERE _tm_offset >= 3") == 3;
    ck_assert_msg(landed == VARIANT[v].landed, "inconclusive (%s)", name);
    r = fx_commit(sink, &b2, &err);
    ck_assert_msg(r == (landed ? TM_ALREADY : TM_OK), "%s: resend: %s: %s",
                  name, tm_status_name(r), err.message);
    /* the producer resends k-3 .. k-5 at offsets 6 .. 8 */
    ck_assert_int_eq(fx_batch_make(&b3, "keys-3", 1, 6, 9, &epoch, "three"), 0);
    with_keys(&b3, 3);
    r = fx_commit(sink, &b3, &err);
    ck_assert_msg(r == TM_OK, "%s: %s: %s", name, tm_status_name(r),
                  err.message);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t"), 6);
    ck_assert_int_eq(sql_int("SELECT duplicates FROM tidemark_markers"), 3);
    fx_api->close(sink);
    fx_conf_done(&c);
}
END_TEST

/* The optional variant: the first write of the main database file fails.
 * In WAL mode only a checkpoint writes it, and the plugin never
 * checkpoints itself: SQLite's automatic checkpoint runs after a COMMIT
 * once the WAL holds 1000 pages (and ignores its own errors), so the
 * batch whose COMMIT set it off must still be committed exactly once,
 * whatever commit() said (TM_OK, or TM_RETRY settled by the resend), and
 * read back the same by a fresh instance after the close (whose own
 * checkpoint, no longer failed, moves the WAL into the database). */
START_TEST(checkpoint_write_failure_loses_nothing) {
    enum { PER_BATCH = 16, MAX_BATCHES = 1000 };
    static char body[2001];
    fx_conf c;
    void *sink;
    tm_marker m;
    tm_error err;
    fx_batch b;
    memset(body, 'x', sizeof body - 1);
    ck_assert_msg(
        fx_conf_init(&c, "\"synchronous\": \"FULL\"", why, sizeof why) == 0,
        "%s", why);
    long opens = fv_get().main_opens;
    ck_assert_msg(fx_open(&c, &sink, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_msg(fv_get().main_opens > opens,
                  "inconclusive: the plugin opened %s without going through "
                  "the default VFS \"%s\"",
                  fx_db_path, fv_name());
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    int64_t epoch = m.epoch, next = 0;
    long fired_at = -1;
    tm_status at_fire = TM_OK;
    char at_fire_msg[TM_ERROR_MAX] = "";
    long fired = fv_get().fired; /* the process's count so far */
    fv_arm(FV_MAIN_WRITE);
    for (long k = 0; k < MAX_BATCHES && fired_at < 0; k++) {
        char id[32];
        snprintf(id, sizeof id, "ckpt-%ld", k);
        ck_assert_int_eq(
            fx_batch_make(&b, id, 1, next, next + PER_BATCH, &epoch, body), 0);
        tm_status r = fx_commit(sink, &b, &err);
        if (fv_get().fired > fired) {
            fired_at = k;
            at_fire = r;
            snprintf(at_fire_msg, sizeof at_fire_msg, "%s", err.message);
        }
        if (r == TM_RETRY && fired_at == k) {
            /* the outcome is unknown to the host: it resends */
            r = fx_commit(sink, &b, &err);
            ck_assert_msg(r == TM_OK || r == TM_ALREADY,
                          "resend of %s after %s gave %s: %s", id, at_fire_msg,
                          tm_status_name(r), err.message);
        } else {
            ck_assert_msg(r == TM_OK, "commit %s: %s: %s", id,
                          tm_status_name(r), err.message);
        }
        next += PER_BATCH;
    }
    fv_disarm();
    ck_assert_msg(fired_at >= 0,
                  "inconclusive: no checkpoint wrote the database in %d "
                  "batches",
                  MAX_BATCHES);
    ck_assert_msg(at_fire == TM_OK || at_fire == TM_RETRY,
                  "the commit whose checkpoint failed gave %s: %s",
                  tm_status_name(at_fire), at_fire_msg);
    /* Nothing lost, nothing twice, through this instance and a new one. */
    ck_assert_msg(fx_scan_exactly_once(sink, 0, next, why, sizeof why) == 0,
                  "%s", why);
    fx_api->close(sink);
    ck_assert_msg(fx_open(&c, &sink, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_msg(fx_scan_exactly_once(sink, 0, next, why, sizeof why) == 0,
                  "%s", why);
    ck_assert_msg(fx_sql_exactly_once(0, next, why, sizeof why) == 0, "%s",
                  why);
    ck_assert_msg(fx_read(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_int_eq(m.next_offset, next);
    ck_assert_uint_eq(m.rows, (uint64_t)next);
    ck_assert_int_eq(fv_get().fired, fired + 1);
    fx_api->close(sink);
    fx_conf_done(&c);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("sqlite_commit_fault");
    TCase *tc = tcase_create("commit_fault");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, commit_failure_is_retry_then_settled, 0,
                        (int)(sizeof VARIANT / sizeof VARIANT[0]));
    tcase_add_test(tc, checkpoint_write_failure_loses_nothing);
    tcase_add_loop_test(tc, failed_commit_keys_in_memory_come_from_the_database,
                        0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
