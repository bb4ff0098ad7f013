/* Columns from the events' schemas in the SQLite sink
 * (TM_CONFIG_SCHEMA_COLUMNS, ABI 1.6): opened without columns, the first
 * batch creates the table; a batch that brings a column adds it in its
 * own transaction (a process killed at the host's fault point between the
 * rows and the markers leaves neither the column nor the rows); a column
 * whose type changed is TM_FATAL naming it and both types, with nothing
 * committed, and once the operator has changed the table the same batch
 * goes in. The database is read with libsqlite3 directly. */
#include <check.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "fixture.h"

static char why[FX_WHY_MAX];

#define MAXC 3
#define MAXR 4

/* A batch of partition 0 of topic "t": records at offsets start.., each
 * with ncols values: id = offset (key), name "n<offset>", then note
 * (text "x<offset>") or, with int_name, name as an integer. */
typedef struct sbatch {
    tm_batch b;
    tm_range range;
    tm_column cols[MAXC];
    tm_record recs[MAXR];
    tm_value vals[MAXR][MAXC];
    char text[MAXR][2][32];
} sbatch;

static void make(sbatch *s, const char *id, int64_t epoch, int64_t start,
                 int64_t end, size_t ncols, int int_name) {
    memset(s, 0, sizeof *s);
    static const char *const NAMES[] = {"id", "name", "note"};
    for (size_t c = 0; c < ncols; c++)
        s->cols[c] = (tm_column){
            .struct_size = sizeof(tm_column),
            .name = NAMES[c],
            .type = c == 0 || (c == 1 && int_name) ? TM_TYPE_INT : TM_TYPE_TEXT,
            .required = c == 0,
            .key = c == 0};
    s->range = (tm_range){.struct_size = sizeof(tm_range),
                          .topic = "t",
                          .start_offset = start,
                          .end_offset = end,
                          .epoch = epoch,
                          .last_offset = TM_NO_OFFSET};
    size_t k = 0;
    for (int64_t off = start; off < end; off++, k++) {
        tm_value *v = s->vals[k];
        for (size_t c = 0; c < ncols; c++)
            v[c].struct_size = sizeof(tm_value);
        v[0].v.i = off;
        snprintf(s->text[k][0], sizeof s->text[k][0], "n%lld", (long long)off);
        snprintf(s->text[k][1], sizeof s->text[k][1], "x%lld", (long long)off);
        if (int_name) {
            v[1].v.i = off;
        } else {
            v[1].v.s.ptr = s->text[k][0];
            v[1].v.s.len = strlen(s->text[k][0]);
        }
        if (ncols > 2) {
            v[2].v.s.ptr = s->text[k][1];
            v[2].v.s.len = strlen(s->text[k][1]);
        }
        s->recs[k] = (tm_record){.struct_size = sizeof(tm_record),
                                 .offset = off,
                                 .timestamp_ms = -1,
                                 .value = "{}",
                                 .value_len = 2,
                                 .values = v,
                                 .op = TM_OP_UPSERT};
    }
    s->b = (tm_batch){.struct_size = sizeof(tm_batch),
                      .connector = "unit",
                      .batch_id = id,
                      .ranges = &s->range,
                      .nranges = 1,
                      .records = s->recs,
                      .nrecords = k,
                      .columns = s->cols,
                      .ncolumns = ncols};
}

static void open_schema_sink(fx_conf *c, void **sink) {
    ck_assert_msg(fx_conf_init(c, "\"mode\": \"upsert\"", why, sizeof why) == 0,
                  "%s", why);
    c->config.columns = NULL;
    c->config.ncolumns = 0;
    c->config.flags = TM_CONFIG_CDC | TM_CONFIG_SCHEMA_COLUMNS;
    ck_assert_msg(fx_open(c, sink, why, sizeof why) == TM_OK, "%s", why);
}

static int64_t sql_int(const char *sql) {
    int64_t v = -1;
    ck_assert_msg(fx_sql_int(sql, &v, why, sizeof why) == 0, "%s: %s", sql,
                  why);
    return v;
}

static tm_status commit(void *sink, sbatch *s, tm_error *err) {
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return fx_api->commit(sink, &s->b, err);
}

/* A fresh database and a sink on it with partition 0 claimed. */
static void fresh_sink(fx_conf *c, void **sink, tm_marker *m) {
    ck_assert_msg(fx_load_plugin(why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_tmpdir(why, sizeof why) == 0, "%s", why);
    open_schema_sink(c, sink);
    ck_assert_msg(fx_claim(*sink, m, 1, why, sizeof why) == TM_OK, "%s", why);
}

/* A fresh database with the rows of offsets 0 and 1 (id, name), committed
 * by a sink closed again. */
static void two_rows_committed(void) {
    fx_conf c;
    void *sink = NULL;
    tm_marker m;
    fresh_sink(&c, &sink, &m);
    sbatch b1;
    tm_error err;
    make(&b1, "b1", m.epoch, 0, 2, 2, 0);
    ck_assert_msg(commit(sink, &b1, &err) == TM_OK, "%s", err.message);
    fx_api->close(sink);
    fx_conf_done(&c);
}

#define HAS_NOTE "SELECT count(*) FROM pragma_table_info('t') WHERE name='note'"

START_TEST(created_at_the_first_batch_and_added_with_its_rows) {
    ck_assert_msg(fx_load_plugin(why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_tmpdir(why, sizeof why) == 0, "%s", why);
    fx_conf c;
    void *sink = NULL;
    open_schema_sink(&c, &sink);
    ck_assert_int_eq(
        sql_int("SELECT count(*) FROM sqlite_schema WHERE name = 't'"), 0);
    tm_marker m;
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    sbatch b1;
    tm_error err;
    make(&b1, "b1", m.epoch, 0, 2, 2, 0);
    ck_assert_msg(commit(sink, &b1, &err) == TM_OK, "%s", err.message);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t"), 2);
    ck_assert_int_eq(sql_int(HAS_NOTE), 0);

    /* the next batch brings "note": killed between its rows and its
     * markers, the column and the rows are both gone */
    sbatch b2;
    fx_api->close(sink); /* the child opens its own: no connection forked */
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        char fd[16];
        snprintf(fd, sizeof fd, "%d", fds[1]);
        setenv("TIDEMARK_FAULT", TM_FAULT_AFTER_EFFECTS, 1);
        setenv("TIDEMARK_FAULT_FD", fd, 1);
        tm_error e;
        if (fx_open(&c, &sink, why, sizeof why) != TM_OK ||
            fx_claim(sink, &m, 1, why, sizeof why) != TM_OK)
            _exit(2);
        make(&b2, "b2", m.epoch, 2, 4, 3, 0);
        commit(sink, &b2, &e);
        _exit(3); /* the fault did not fire */
    }
    close(fds[1]);
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    char point[64] = "";
    ssize_t n = read(fds[0], point, sizeof point - 1);
    close(fds[0]);
    ck_assert_msg(n > 0 && strstr(point, TM_FAULT_AFTER_EFFECTS) &&
                      WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
                  "inconclusive: the child was not killed at %s (read "
                  "\"%s\", status %d)",
                  TM_FAULT_AFTER_EFFECTS, point, st);
    ck_assert_int_eq(sql_int(HAS_NOTE), 0);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t"), 2);
    ck_assert_int_eq(sql_int("SELECT next_offset FROM tidemark_markers"), 2);

    /* the same batch again, from a process that never saw it fail */
    fx_conf_done(&c);
    open_schema_sink(&c, &sink);
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    make(&b1, "b1", m.epoch, 0, 2, 2, 0);
    make(&b2, "b2", m.epoch, 2, 4, 3, 0);
    ck_assert_msg(commit(sink, &b2, &err) == TM_OK, "%s", err.message);
    ck_assert_int_eq(sql_int(HAS_NOTE), 1);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t"), 4);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t WHERE note IS NULL"), 2);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t WHERE id = 3 AND note = "
                             "'x3' AND name = 'n3'"),
                     1);
    ck_assert_int_eq(sql_int("SELECT next_offset FROM tidemark_markers"), 4);
    /* a batch of the older columns after it: note stays, null */
    sbatch b3;
    make(&b3, "b3", m.epoch, 4, 5, 2, 0);
    ck_assert_msg(commit(sink, &b3, &err) == TM_OK, "%s", err.message);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t WHERE id = 4 AND note "
                             "IS NULL"),
                     1);
    fx_api->close(sink);
    fx_conf_done(&c);
    fx_rmdir();
}
END_TEST

START_TEST(a_changed_type_is_fatal_until_the_table_is_changed) {
    two_rows_committed();
    /* a process started later: name comes as an integer */
    fx_conf c;
    void *sink = NULL;
    tm_marker m;
    sbatch b2;
    tm_error err;
    open_schema_sink(&c, &sink);
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    make(&b2, "b2", m.epoch, 2, 4, 2, 1);
    ck_assert_int_eq(commit(sink, &b2, &err), TM_FATAL);
    ck_assert_msg(strstr(err.message, "column \"name\" is TEXT (text) in "
                                      "the table, the batch's columns say int"),
                  "%s", err.message);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t"), 2);
    ck_assert_int_eq(sql_int("SELECT next_offset FROM tidemark_markers"), 2);
    /* the operator changes the table; the same batch then goes in */
    char *msg = NULL;
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(fx_db_path, &db), SQLITE_OK);
    int rc = sqlite3_exec(db,
                          "ALTER TABLE t RENAME COLUMN name TO old_name;"
                          "ALTER TABLE t ADD COLUMN name INTEGER;",
                          NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%s", msg ? msg : "?");
    sqlite3_close(db);
    ck_assert_msg(commit(sink, &b2, &err) == TM_OK, "%s", err.message);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t WHERE name = 3"), 1);
    ck_assert_int_eq(sql_int("SELECT next_offset FROM tidemark_markers"), 4);
    fx_api->close(sink);
    fx_conf_done(&c);
    fx_rmdir();
}
END_TEST

/* A column without a name in a batch like the last one is FATAL naming
 * it, not a crash comparing it with the columns kept. */
START_TEST(a_column_without_a_name_is_fatal) {
    fx_conf c;
    void *sink = NULL;
    tm_marker m;
    fresh_sink(&c, &sink, &m);
    sbatch b1, b2;
    tm_error err;
    make(&b1, "b1", m.epoch, 0, 2, 2, 0);
    ck_assert_msg(commit(sink, &b1, &err) == TM_OK, "%s", err.message);
    make(&b2, "b2", m.epoch, 2, 4, 2, 0);
    b2.cols[1].name = NULL;
    ck_assert_int_eq(commit(sink, &b2, &err), TM_FATAL);
    ck_assert_msg(strstr(err.message, "batch b2: column 1: no name"), "%s",
                  err.message);
    ck_assert_int_eq(sql_int("SELECT next_offset FROM tidemark_markers"), 2);
    fx_api->close(sink);
    fx_conf_done(&c);
    fx_rmdir();
}
END_TEST

/* A batch of deletes only carries the key columns alone (the host learnt
 * nothing else, e.g. a tombstone read first after a restart): it writes
 * no other column, so a NOT NULL column it lacks does not refuse it. A
 * batch with a row and those columns is still refused. */
START_TEST(a_deletes_only_batch_needs_no_required_column) {
    fx_conf c;
    void *sink = NULL;
    tm_marker m;
    fresh_sink(&c, &sink, &m);
    sbatch b1, b2, b3;
    tm_error err;
    make(&b1, "b1", m.epoch, 0, 2, 2, 0);
    b1.cols[1].required = 1; /* name NOT NULL */
    ck_assert_msg(commit(sink, &b1, &err) == TM_OK, "%s", err.message);
    ck_assert_int_eq(sql_int("SELECT \"notnull\" FROM pragma_table_info('t') "
                             "WHERE name = 'name'"),
                     1);
    /* a later process reads a delete first: the key column only */
    fx_api->close(sink);
    fx_conf_done(&c);
    open_schema_sink(&c, &sink);
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    make(&b2, "b2", m.epoch, 2, 3, 1, 0);
    b2.vals[0][0].v.i = 0; /* deletes id 0 */
    b2.recs[0].op = TM_OP_DELETE;
    ck_assert_msg(commit(sink, &b2, &err) == TM_OK, "%s", err.message);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t WHERE id = 0"), 0);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t"), 1);
    ck_assert_int_eq(sql_int("SELECT next_offset FROM tidemark_markers"), 3);
    /* the same columns with a row to write: refused, nothing stored */
    make(&b3, "b3", m.epoch, 3, 5, 1, 0);
    b3.recs[0].op = TM_OP_DELETE;
    ck_assert_int_eq(commit(sink, &b3, &err), TM_FATAL);
    ck_assert_msg(strstr(err.message, "column \"name\" is NOT NULL but not in "
                                      "the mapping"),
                  "%s", err.message);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t"), 1);
    ck_assert_int_eq(sql_int("SELECT next_offset FROM tidemark_markers"), 3);
    fx_api->close(sink);
    fx_conf_done(&c);
    fx_rmdir();
}
END_TEST

/* The table made keyed by id (its INTEGER PRIMARY KEY), then a process
 * whose batches key by name (a key change the host refused, then a
 * restart) or by a renamed key column: TM_FATAL, nothing stored and no
 * index added on the new key, as for a table keyed by its unique index;
 * a later batch keyed by id again goes in. */
START_TEST(a_key_on_another_column_is_fatal) {
    two_rows_committed();
    ck_assert_int_eq(sql_int("SELECT pk FROM pragma_table_info('t') WHERE "
                             "name = 'id'"),
                     1);
    fx_conf c;
    void *sink = NULL;
    tm_marker m;
    sbatch b2;
    tm_error err;
    for (int renamed = 0; renamed < 2; renamed++) {
        open_schema_sink(&c, &sink);
        ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s",
                      why);
        make(&b2, "b2", m.epoch, 2, 4, 2, 0);
        if (renamed) {
            b2.cols[0].name = "id2";
        } else {
            b2.cols[0].key = 0;
            b2.cols[1].key = b2.cols[1].required = 1;
        }
        ck_assert_int_eq(commit(sink, &b2, &err), TM_FATAL);
        ck_assert_msg(strstr(err.message, renamed ? "column \"id\" is NOT "
                                                    "NULL but not in the "
                                                    "mapping"
                                                  : "needs a UNIQUE index on "
                                                    "exactly the key columns"),
                      "%s", err.message);
        ck_assert_int_eq(sql_int("SELECT count(*) FROM sqlite_schema WHERE "
                                 "type = 'index' AND tbl_name = 't'"),
                         0);
        ck_assert_int_eq(sql_int("SELECT count(*) FROM t"), 2);
        ck_assert_int_eq(sql_int("SELECT count(*) FROM pragma_table_info('t') "
                                 "WHERE name = 'id2'"),
                         0);
        ck_assert_int_eq(sql_int("SELECT next_offset FROM tidemark_markers"),
                         2);
        fx_api->close(sink);
        fx_conf_done(&c);
    }
    open_schema_sink(&c, &sink);
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    make(&b2, "b2", m.epoch, 2, 4, 2, 0);
    ck_assert_msg(commit(sink, &b2, &err) == TM_OK, "%s", err.message);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t"), 4);
    fx_api->close(sink);
    fx_conf_done(&c);
    fx_rmdir();
}
END_TEST

/* A field renamed in case only ("name" -> "Name"), learnt by a process
 * started after it: SQLite would take "Name" for "name" and write the new
 * values into the old column. TM_FATAL naming both spellings, nothing
 * stored. */
START_TEST(a_column_renamed_in_case_only_is_fatal) {
    fx_conf c;
    void *sink = NULL;
    tm_marker m;
    fresh_sink(&c, &sink, &m);
    sbatch b1, b2;
    tm_error err;
    make(&b1, "b1", m.epoch, 0, 2, 2, 0);
    ck_assert_msg(commit(sink, &b1, &err) == TM_OK, "%s", err.message);
    fx_api->close(sink);
    fx_conf_done(&c);
    open_schema_sink(&c, &sink);
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    make(&b2, "b2", m.epoch, 2, 4, 2, 0);
    b2.cols[1].name = "Name";
    b2.vals[0][0].v.i = 0; /* would overwrite row 0's name */
    ck_assert_int_eq(commit(sink, &b2, &err), TM_FATAL);
    ck_assert_msg(strstr(err.message, "\"name\"") &&
                      strstr(err.message, "\"Name\"") &&
                      strstr(err.message, "renamed in case only"),
                  "%s", err.message);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t"), 2);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t WHERE name = 'n0'"), 1);
    ck_assert_int_eq(sql_int("SELECT next_offset FROM tidemark_markers"), 2);
    fx_api->close(sink);
    fx_conf_done(&c);
    fx_rmdir();
}
END_TEST

/* A column declared with the affinity its type needs but not this sink's
 * word (as an older build declared bool INTEGER): the message says the
 * declaration differs and how to declare it again, nothing committed. */
START_TEST(an_older_builds_declaration_is_named_as_such) {
    ck_assert_msg(fx_load_plugin(why, sizeof why) == 0, "%s", why);
    ck_assert_msg(fx_tmpdir(why, sizeof why) == 0, "%s", why);
    fx_conf c;
    void *sink = NULL;
    open_schema_sink(&c, &sink);
    char *msg = NULL;
    sqlite3 *db = NULL;
    ck_assert_int_eq(sqlite3_open(fx_db_path, &db), SQLITE_OK);
    int rc = sqlite3_exec(
        db,
        "CREATE TABLE t (id INTEGER NOT NULL, name INTEGER, _tm_topic TEXT "
        "NOT NULL, _tm_partition INTEGER NOT NULL, _tm_offset INTEGER NOT "
        "NULL, _tm_identity TEXT); CREATE UNIQUE INDEX t_tm_key ON t (id);",
        NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%s", msg ? msg : "?");
    sqlite3_close(db);
    tm_marker m;
    ck_assert_msg(fx_claim(sink, &m, 1, why, sizeof why) == TM_OK, "%s", why);
    sbatch b1;
    tm_error err;
    make(&b1, "b1", m.epoch, 0, 2, 2, 1);
    b1.cols[1].type = TM_TYPE_BOOL;
    ck_assert_int_eq(commit(sink, &b1, &err), TM_FATAL);
    ck_assert_msg(
        strstr(err.message,
               "column \"name\" is INTEGER (int) in the table, the "
               "batch's columns say bool: a changed type is not "
               "followed, or the column was made by an older build") &&
            strstr(err.message, "declare it again as BOOLEAN "
                                "INTEGER"),
        "%s", err.message);
    ck_assert_int_eq(sql_int("SELECT count(*) FROM t"), 0);
    fx_api->close(sink);
    fx_conf_done(&c);
    fx_rmdir();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("sqlite_schema_columns");
    TCase *t = tcase_create("core");
    tcase_add_test(t, created_at_the_first_batch_and_added_with_its_rows);
    tcase_add_test(t, a_column_without_a_name_is_fatal);
    tcase_add_test(t, a_changed_type_is_fatal_until_the_table_is_changed);
    tcase_add_test(t, a_deletes_only_batch_needs_no_required_column);
    tcase_add_test(t, a_column_renamed_in_case_only_is_fatal);
    tcase_add_test(t, an_older_builds_declaration_is_named_as_such);
    tcase_add_test(t, a_key_on_another_column_is_fatal);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
