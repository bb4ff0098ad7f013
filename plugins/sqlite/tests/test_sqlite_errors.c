/* The SQLite sink's error classes (docs/sinks/sqlite.md, "Error
 * classes"), each provoked for real through the plugin API: a file that is
 * not a database and a corrupt one are permanent (TM_FATAL, also when met
 * by the reopen after an unknown COMMIT outcome, not TM_RETRY for ever); a
 * full disk, an I/O error and a read-only database at open are transient
 * (TM_RETRY, not TM_INVALID); a row the table refuses for its content is a
 * dead letter. Faults come from the fault-injecting VFS (fault_vfs.c);
 * each test first checks that its fault fired where intended. */
#define _DEFAULT_SOURCE /* setgroups */
#include <check.h>
#include <grp.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "fault_vfs.h"
#include "fixture.h"
#include "services/host_services.h"

static char why[FX_WHY_MAX];

static void setup(void) {
    why[0] = '\0';
    ck_assert_msg(fx_load_plugin(why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_tmpdir(why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(fv_install(), SQLITE_OK);
    fv_watch(fx_db_path + (strrchr(fx_dir, '/') - fx_dir) + 1);
    fv_disarm();
    fv_fail_opens(0);
    fv_write_error(SQLITE_IOERR_WRITE);
}

static void teardown(void) {
    fv_disarm();
    fv_fail_opens(0);
    fv_write_error(SQLITE_IOERR_WRITE);
    fx_rmdir();
}

/* Opens, claims t[0] and closes: a database with every table, and the
 * WAL checkpointed into the main file. */
static void make_database(void) {
    fx_conf c;
    void *sink;
    tm_marker m;
    ck_assert_msg(fx_conf_init(&c, NULL, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_open(&c, &sink, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    fx_api->close(sink);
    fx_conf_done(&c);
}

/* Writes LEN bytes of BYTE at OFFSET of the database file. */
static void scribble(long offset, int byte, size_t len) {
    FILE *f = fopen(fx_db_path, offset ? "r+b" : "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, offset, SEEK_SET), 0);
    for (size_t i = 0; i < len; i++)
        ck_assert_int_ne(fputc(byte, f), EOF);
    ck_assert_int_eq(fclose(f), 0);
}

static tm_status open_status(tm_error *err) {
    fx_conf c;
    void *sink = NULL;
    ck_assert_msg(fx_conf_init(&c, NULL, why, sizeof why) == 0, "%s", why);
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    tm_status r = fx_api->open(tm_host_services(), &c.config, &sink, err);
    if (r == TM_OK)
        fx_api->close(sink);
    fx_conf_done(&c);
    return r;
}

/* ---- permanent ---------------------------------------------------------- */

START_TEST(not_a_database_at_open_is_fatal) {
    tm_error err;
    scribble(0, 'x', 8192);
    tm_status r = open_status(&err);
    ck_assert_msg(r == TM_FATAL && strstr(err.message, "not a database") &&
                      strstr(err.message, fx_db_path),
                  "%s: %s", tm_status_name(r), err.message);
}
END_TEST

START_TEST(corrupt_database_at_open_is_fatal) {
    tm_error err;
    make_database();
    /* page 1 after the 100-byte header: the schema's b-tree page */
    scribble(100, 0xff, 3000);
    tm_status r = open_status(&err);
    ck_assert_msg(r == TM_FATAL && strstr(err.message, "malformed"), "%s: %s",
                  tm_status_name(r), err.message);
}
END_TEST

/* The reopen after an unknown COMMIT outcome fails; meanwhile the file was
 * replaced by one that is not a database: the next call must say FATAL,
 * not RETRY for ever. */
START_TEST(not_a_database_at_reopen_is_fatal) {
    fx_conf c;
    void *sink;
    tm_marker m;
    tm_error err;
    fx_batch b1, b2;
    ck_assert_msg(fx_conf_init(&c, NULL, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_open(&c, &sink, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    int64_t epoch = m.epoch;
    ck_assert_int_eq(fx_batch_make(&b1, "e-1", 1, 0, 2, &epoch, "one"), 0);
    long fired = fv_get().fired, failures = fv_get().open_failures;
    fv_arm(FV_WAL_SYNC);
    fv_fail_opens(1);
    tm_status r = fx_commit(sink, &b1, &err);
    fv_disarm();
    fv_fail_opens(0);
    ck_assert_msg(fv_get().fired == fired + 1 &&
                      fv_get().open_failures == failures + 1,
                  "inconclusive: the COMMIT failure or the failed reopen "
                  "did not happen (%s: %s)",
                  tm_status_name(r), err.message);
    ck_assert_int_eq(r, TM_RETRY);
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", fx_db_path);
    unlink(wal);
    snprintf(wal, sizeof wal, "%s-shm", fx_db_path);
    unlink(wal);
    scribble(0, 'x', 8192);
    ck_assert_int_eq(fx_batch_make(&b2, "e-2", 1, 0, 2, &epoch, "one"), 0);
    for (int i = 0; i < 2; i++) {
        r = fx_commit(sink, &b2, &err);
        ck_assert_msg(r == TM_FATAL && strstr(err.message, "not a database"),
                      "call %d: %s: %s", i, tm_status_name(r), err.message);
    }
    fx_api->close(sink);
    fx_conf_done(&c);
}
END_TEST

/* ---- transient at open -------------------------------------------------- */

/* A fresh database: open creates the tables, and the COMMIT of that
 * writes the WAL, where the write fails with CODE. */
static void open_with_failing_write(int code, const char *text) {
    tm_error err;
    long fired = fv_get().fired;
    fv_write_error(code);
    fv_arm(FV_WAL_WRITE);
    tm_status r = open_status(&err);
    fv_disarm();
    ck_assert_msg(fv_get().fired == fired + 1,
                  "inconclusive: no WAL write failed during open (%s: %s)",
                  tm_status_name(r), err.message);
    ck_assert_msg(r == TM_RETRY && strstr(err.message, text), "%s: %s",
                  tm_status_name(r), err.message);
    /* transient indeed: once the disk is back, open works */
    r = open_status(&err);
    ck_assert_msg(r == TM_OK, "%s: %s", tm_status_name(r), err.message);
}

START_TEST(io_error_at_open_is_retry) {
    open_with_failing_write(SQLITE_IOERR_WRITE, "disk I/O error");
}
END_TEST

START_TEST(full_disk_at_open_is_retry) {
    open_with_failing_write(SQLITE_FULL, "full");
}
END_TEST

/* Runs CALL in a child that cannot write the database (root writes
 * anything, so the child gives up root first); its status, and its
 * message in MSG. */
static tm_status unprivileged(tm_status (*call)(tm_error *), char *msg,
                              size_t size) {
    ck_assert_int_eq(chmod(fx_dir, 0755), 0);
    ck_assert_int_eq(chmod(fx_db_path, 0444), 0);
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        tm_error err = {sizeof err, "cannot drop root"};
        tm_status r = (tm_status)99;
        if (geteuid() != 0 || (setgroups(0, NULL) == 0 && setgid(65534) == 0 &&
                               setuid(65534) == 0))
            r = access(fx_db_path, W_OK) == 0 ? (tm_status)97 : call(&err);
        if (write(fd[1], err.message, strlen(err.message) + 1) < 0)
            _exit(98);
        _exit((int)r);
    }
    close(fd[1]);
    ssize_t n = read(fd[0], msg, size - 1);
    close(fd[0]);
    msg[n > 0 ? n : 0] = '\0';
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) < 97,
                  "inconclusive: the child could not give up write access "
                  "(exit %d: %s)",
                  WIFEXITED(status) ? WEXITSTATUS(status) : -1, msg);
    return (tm_status)WEXITSTATUS(status);
}

/* A database the process may not write: RETRY at open (the owner may
 * fix the permissions), with SQLite's reason. */
START_TEST(read_only_database_at_open_is_retry) {
    char msg[TM_ERROR_MAX];
    make_database();
    tm_status r = unprivileged(open_status, msg, sizeof msg);
    ck_assert_msg(r == TM_RETRY && strstr(msg, fx_db_path), "%s: %s",
                  tm_status_name(r), msg);
}
END_TEST

static tm_status validate_status(tm_error *err) {
    fx_conf c;
    ck_assert_msg(fx_conf_init(&c, NULL, why, sizeof why) == 0, "%s", why);
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    tm_status r = fx_api->validate(tm_host_services(), &c.config, err);
    fx_conf_done(&c);
    return r;
}

/* validate catches what open refuses: the same read-only database is
 * INVALID to validate, naming the setting and the path. */
START_TEST(validate_refuses_read_only_database) {
    char msg[TM_ERROR_MAX];
    make_database();
    tm_status r = unprivileged(validate_status, msg, sizeof msg);
    ck_assert_msg(r == TM_INVALID && strstr(msg, "\"path\"") &&
                      strstr(msg, fx_db_path) && strstr(msg, "read-only"),
                  "%s: %s", tm_status_name(r), msg);
}
END_TEST

/* ---- content ------------------------------------------------------------ */

/* Creates t with the hidden columns, then SQL, opens, claims t[0] and
 * commits ids 0..3 (body "x"): its answer in *r, its error in *err. */
static void *commit_with(const char *sql, fx_conf *c, tm_status *r,
                         tm_error *err) {
    void *sink;
    tm_marker m;
    fx_batch b;
    sqlite3 *db;
    char *msg = NULL;
    ck_assert_int_eq(sqlite3_open(fx_db_path, &db), SQLITE_OK);
    int rc = sqlite3_exec(db,
                          "CREATE TABLE t (id INTEGER, body TEXT, _tm_topic "
                          "TEXT NOT NULL, _tm_partition INTEGER NOT NULL, "
                          "_tm_offset INTEGER NOT NULL, _tm_identity TEXT)",
                          NULL, NULL, &msg);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(db);
    ck_assert_msg(fx_conf_init(c, NULL, why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_open(c, &sink, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    int64_t epoch = m.epoch;
    ck_assert_int_eq(fx_batch_make(&b, "c-1", 1, 0, 4, &epoch, "x"), 0);
    *r = fx_commit(sink, &b, err);
    return sink;
}

/* commit_with, TM_OK expected. */
static void *commit_into(const char *sql, fx_conf *c) {
    tm_status r;
    tm_error err;
    void *sink = commit_with(sql, c, &r, &err);
    ck_assert_msg(r == TM_OK, "%s: %s", tm_status_name(r), err.message);
    return sink;
}

/* ids 1 and 3 were refused with WHY: two rows, two dead letters
 * "rejected" naming it, the marker past the batch. */
static void expect_odd_ids_rejected(void *sink, const char *why_like) {
    int64_t v = -1;
    tm_marker m;
    char sql[256];
    ck_assert_msg(fx_sql_int("SELECT count(*) FROM t WHERE id % 2 = 0", &v, why,
                             sizeof why) == SQLITE_OK,
                  "%s", why);
    ck_assert_int_eq(v, 2);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM tidemark_dead_letters WHERE reason = "
             "'rejected' AND \"offset\" %% 2 = 1 AND detail LIKE '%%%s%%'",
             why_like);
    ck_assert_msg(fx_sql_int(sql, &v, why, sizeof why) == SQLITE_OK, "%s", why);
    ck_assert_int_eq(v, 2);
    ck_assert_msg(fx_read(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_int_eq(m.next_offset, 4);
    ck_assert_uint_eq(m.dead_letters, 2);
    ck_assert_uint_eq(m.rows, 2);
}

/* A row the table refuses (a CHECK constraint) is a dead letter
 * "rejected" in the same transaction; the batch goes on. */
START_TEST(refused_row_is_a_dead_letter) {
    fx_conf c;
    void *sink = commit_into("CREATE TRIGGER odd BEFORE INSERT ON t WHEN "
                             "NEW.id % 2 = 1 BEGIN SELECT RAISE(ABORT, "
                             "'odd ids refused'); END",
                             &c);
    expect_odd_ids_rejected(sink, "odd ids refused");
    fx_api->close(sink);
    fx_conf_done(&c);
}
END_TEST

/* SQLITE_MISMATCH (a value an INTEGER PRIMARY KEY cannot take, here in a
 * table a trigger writes) is the record's content too: a dead letter. */
START_TEST(mismatched_row_is_a_dead_letter) {
    fx_conf c;
    void *sink = commit_into("CREATE TABLE side (k INTEGER PRIMARY KEY); "
                             "CREATE TRIGGER odd BEFORE INSERT ON t WHEN "
                             "NEW.id % 2 = 1 BEGIN INSERT INTO side VALUES "
                             "(NEW.body); END",
                             &c);
    expect_odd_ids_rejected(sink, "datatype mismatch");
    fx_api->close(sink);
    fx_conf_done(&c);
}
END_TEST

/* A trigger's RAISE(ROLLBACK) ends the transaction, not the statement: not
 * a row refused. Nothing of the batch may stay and the marker may not
 * move (FATAL with the trigger's message), so that the batch is sent
 * again whole once the trigger is fixed. Before: the refusal was
 * taken for the row's, the rest of the batch and the marker were written
 * one statement at a time outside any transaction, COMMIT failed ("no
 * transaction is active": RETRY), and the resend was ALREADY with the
 * row of offset 0 rolled back: lost. */
START_TEST(trigger_rollback_is_not_a_refused_row) {
    fx_conf c;
    tm_status r;
    tm_error err;
    int64_t v = -1;
    tm_marker m;
    void *sink = commit_with("CREATE TRIGGER one BEFORE INSERT ON t WHEN "
                             "NEW.id = 1 BEGIN SELECT RAISE(ROLLBACK, "
                             "'rolled back by a trigger'); END",
                             &c, &r, &err);
    ck_assert_msg(r == TM_FATAL &&
                      strstr(err.message, "rolled back by a trigger"),
                  "%s: %s", tm_status_name(r), err.message);
    ck_assert_msg(fx_sql_int("SELECT count(*) FROM t", &v, why, sizeof why) ==
                      SQLITE_OK,
                  "%s", why);
    ck_assert_msg(v == 0, "%lld rows stayed of a batch not applied",
                  (long long)v);
    ck_assert_msg(fx_sql_int("SELECT count(*) FROM tidemark_dead_letters", &v,
                             why, sizeof why) == SQLITE_OK,
                  "%s", why);
    ck_assert_int_eq(v, 0);
    ck_assert_msg(fx_read(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    ck_assert_msg(m.next_offset == 0, "the marker moved to %lld",
                  (long long)m.next_offset);
    fx_api->close(sink);
    fx_conf_done(&c);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("sqlite_errors");
    TCase *tc = tcase_create("classes");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, not_a_database_at_open_is_fatal);
    tcase_add_test(tc, corrupt_database_at_open_is_fatal);
    tcase_add_test(tc, not_a_database_at_reopen_is_fatal);
    tcase_add_test(tc, io_error_at_open_is_retry);
    tcase_add_test(tc, full_disk_at_open_is_retry);
    tcase_add_test(tc, read_only_database_at_open_is_retry);
    tcase_add_test(tc, validate_refuses_read_only_database);
    tcase_add_test(tc, refused_row_is_a_dead_letter);
    tcase_add_test(tc, mismatched_row_is_a_dead_letter);
    tcase_add_test(tc, trigger_rollback_is_not_a_refused_row);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
