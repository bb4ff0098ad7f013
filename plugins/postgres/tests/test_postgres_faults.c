/* Fault tests of the PostgreSQL sink (loaded like the host loads it)
 * against the server of scripts/postgres.sh. Each test first proves that
 * its fault landed where intended, else it fails as "inconclusive":
 *   proxy   a loopback TCP proxy in this process (pg_test_proxy.c),
 *           between the sink and the server, cuts both sockets at one step
 *           of a commit: before BEGIN, after the marker lock, mid-COPY,
 *           before the marker UPDATE, before COMMIT (nothing of the batch
 *           lands: RETRY, resend OK) or just after COMMIT (the server
 *           commits, the sink never hears: RETRY, resend ALREADY);
 *   lock    another transaction holds the partition's marker row FOR
 *           UPDATE past statement_timeout_ms: RETRY, nothing written;
 *   restart the server stopped and started under a committing sink: RETRY
 *           while down, then no gap and no duplicate.
 * Run one group with argv[1] (proxy, lock, restart); none: all of them.
 * What the sink wrote is read back with libpq directly from the server. */
#include <check.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "pg_test_common.h"
#include "pg_test_proxy.h"
#include "config/settings.h"
#include "plugin/loader.h"
#include "services/host_services.h"

static const tm_sink_api *api;
static char schema[64], connector[64];
static PGconn *admin; /* the test's own connection, to the real server */

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void admin_connect(void) {
    if (admin)
        PQfinish(admin);
    admin = pgt_connect(pgt_conninfo());
}

static PGresult *sql(const char *text) {
    return pgt_sql(admin, text);
}

static void sql_text(const char *fmt, char *out, size_t size) {
    pgt_sql_text(admin, schema, fmt, out, size);
}

static void setup(void) {
    (void)pgt_conninfo(); /* fails, never skips, without it */
    api = pgt_plugin(TM_POSTGRES_PLUGIN);
    static int n;
    snprintf(schema, sizeof schema, "pgfault_%d_%d", (int)getpid(), ++n);
    snprintf(connector, sizeof connector, "fault_%d_%d", (int)getpid(), n);
    admin_connect();
}

static void teardown(void) {
    char text[256];
    snprintf(text, sizeof text, "DROP SCHEMA IF EXISTS \"%s\" CASCADE", schema);
    if (admin && PQstatus(admin) != CONNECTION_OK)
        PQreset(admin);
    if (admin)
        PQclear(PQexec(admin, text));
    PQfinish(admin);
    admin = NULL;
}

static const tm_column COLS[] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 1},
    {sizeof(tm_column), "body", TM_TYPE_TEXT, 0, 0},
};
#define NCOLS 2

typedef struct conf {
    tm_settings *settings;
    tm_sink_config config;
} conf;

/* mode: "append" or "upsert" (the key id). */
static void conf_init_mode(conf *c, const char *conn, int64_t statement_timeout,
                           const char *mode) {
    json_t *obj = json_pack("{s:s, s:s, s:s, s:I, s:I, s:s}", "conninfo", conn,
                            "schema", schema, "table", "t", "connect_timeout_s",
                            (json_int_t)2, "statement_timeout_ms",
                            (json_int_t)statement_timeout, "mode", mode);
    ck_assert_ptr_nonnull(obj);
    c->settings = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    ck_assert_ptr_nonnull(c->settings);
    c->config = (tm_sink_config){.struct_size = sizeof(tm_sink_config),
                                 .connector = connector,
                                 .settings = c->settings,
                                 .columns = COLS,
                                 .ncolumns = NCOLS,
                                 .flags = 0};
}

static void conf_init(conf *c, const char *conn, int64_t statement_timeout) {
    conf_init_mode(c, conn, statement_timeout, "append");
}

static void conf_done(conf *c) {
    tm_settings_free(c->settings);
}

static void *open_ok(conf *c) {
    return pgt_open(api, tm_host_services(), &c->config);
}

static tm_marker claim1(void *sink) {
    return pgt_claim1(api, sink);
}

#define PER_BATCH 3

typedef struct batch {
    tm_batch b;
    tm_range range;
    tm_record records[PER_BATCH];
    tm_value values[PER_BATCH][NCOLS];
    char id[48];
} batch;

/* Offsets start .. start + PER_BATCH - 1, id = offset. */
static void batch_make(batch *bt, int64_t start, int64_t epoch) {
    static int seq;
    memset(bt, 0, sizeof *bt);
    snprintf(bt->id, sizeof bt->id, "fault-%d-%d", (int)getpid(), ++seq);
    bt->range = (tm_range){.struct_size = sizeof(tm_range),
                           .topic = "t",
                           .partition = 0,
                           .start_offset = start,
                           .end_offset = start + PER_BATCH,
                           .epoch = epoch};
    for (int i = 0; i < PER_BATCH; i++) {
        tm_value *v = bt->values[i];
        v[0] = (tm_value){.struct_size = sizeof(tm_value)};
        v[1] = (tm_value){.struct_size = sizeof(tm_value)};
        v[0].v.i = start + i;
        v[1].v.s.ptr = "row";
        v[1].v.s.len = 3;
        bt->records[i] = (tm_record){.struct_size = sizeof(tm_record),
                                     .offset = start + i,
                                     .timestamp_ms = 1000,
                                     .key = "k",
                                     .key_len = 1,
                                     .value = "{}",
                                     .value_len = 2,
                                     .values = v};
    }
    bt->b = (tm_batch){.struct_size = sizeof(tm_batch),
                       .connector = connector,
                       .batch_id = bt->id,
                       .ranges = &bt->range,
                       .nranges = 1,
                       .records = bt->records,
                       .nrecords = PER_BATCH};
}

static tm_status commit(void *sink, batch *bt, tm_error *err) {
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return api->commit(sink, &bt->b, err);
}

static void commit_ok(void *sink, batch *bt) {
    tm_error err;
    tm_status rc = commit(sink, bt, &err);
    ck_assert_msg(rc == TM_OK, "commit %s: %s: %s", bt->id, tm_status_name(rc),
                  err.message);
}

/* Exactly one row per offset 0 .. end-1, no gap, no duplicate. */
static void assert_rows_exactly(int64_t end) {
    char q[512], v[128];
    snprintf(q, sizeof q,
             "SELECT count(*) || '/' || count(DISTINCT _tm_offset) || '/' || "
             "coalesce(min(_tm_offset), -1) || '/' || "
             "coalesce(max(_tm_offset), -1) FROM $S.t");
    sql_text(q, v, sizeof v);
    char want[128];
    snprintf(want, sizeof want, "%lld/%lld/0/%lld", (long long)end,
             (long long)end, (long long)end - 1);
    ck_assert_msg(strcmp(v, want) == 0,
                  "rows (count/distinct/min/max): %s, want %s", v, want);
}

/* The marker as the server has it: "next_offset/last_batch_id". */
static void marker_text(char *out, size_t size) {
    char q[512];
    snprintf(q, sizeof q,
             "SELECT next_offset || '/' || coalesce(last_batch_id, '') FROM "
             "$S.tidemark_markers WHERE connector = '%s' AND topic = 't' AND "
             "\"partition\" = 0",
             connector);
    sql_text(q, out, size);
}

static void assert_marker(int64_t next, const char *batch_id) {
    char v[128], want[128];
    marker_text(v, sizeof v);
    snprintf(want, sizeof want, "%lld/%s", (long long)next,
             batch_id ? batch_id : "");
    ck_assert_msg(strcmp(v, want) == 0, "marker %s, want %s", v, want);
}

/* ---- connection cuts at each step of a commit --------------------------- */

/* The cuts, in the order of a commit's steps (the order pgp_cut has). */
static const pgp_cut CUTS[] = {
    PGP_CUT_BEFORE_BEGIN,  PGP_CUT_AFTER_LOCK,    PGP_CUT_MID_COPY,
    PGP_CUT_BEFORE_UPDATE, PGP_CUT_BEFORE_COMMIT, PGP_CUT_AFTER_COMMIT,
};
#define NCUTS ((int)(sizeof CUTS / sizeof CUTS[0]))

static void wait_for(atomic_int *flag, int ms) {
    int64_t until = tm_clock_mono_ms() + ms;
    while (!atomic_load(flag) && tm_clock_mono_ms() < until)
        sleep_ms(20);
}

typedef struct seen_at {
    int stmt[PGP_NSTMT], copy_data, copy_done;
} seen_at;

static seen_at seen_now(pgp_proxy *x) {
    seen_at a;
    for (int k = 0; k < PGP_NSTMT; k++)
        a.stmt[k] = atomic_load(&x->seen[k]);
    a.copy_data = atomic_load(&x->copy_data);
    a.copy_done = atomic_load(&x->copy_done);
    return a;
}

/* The proof that the cut landed at its step: the proxy cut once, of the
 * kind armed, after exactly the statements of the steps before it (and for
 * a cut after a statement, the server answered that statement). */
static void assert_cut_where_intended(pgp_proxy *x, pgp_cut cut,
                                      const seen_at *before, tm_status rc,
                                      const char *msg) {
    ck_assert_msg(atomic_load(&x->cuts) == 1 &&
                      atomic_load(&x->arm) == PGP_CUT_NONE &&
                      atomic_load(&x->cut_kind) == (int)cut,
                  "inconclusive: the proxy did not cut %s (cuts %d, still "
                  "armed %d); commit gave %s: %s",
                  pgp_cut_name(cut), atomic_load(&x->cuts),
                  atomic_load(&x->arm), tm_status_name(rc), msg);
    seen_at now = seen_now(x);
    int d[PGP_NSTMT];
    for (int k = 0; k < PGP_NSTMT; k++)
        d[k] = now.stmt[k] - before->stmt[k];
    int lock = cut != PGP_CUT_BEFORE_BEGIN, copy = cut >= PGP_CUT_MID_COPY;
    int update = cut >= PGP_CUT_BEFORE_UPDATE;
    int commit = cut >= PGP_CUT_BEFORE_COMMIT;
    ck_assert_msg(d[PGP_BEGIN] == 1 && d[PGP_LOCK] == lock &&
                      d[PGP_COPY] == copy && d[PGP_MARKER_UPDATE] == update &&
                      d[PGP_COMMIT] == commit,
                  "inconclusive: cut %s (at \"%.60s\") having seen BEGIN %d, "
                  "lock %d, COPY %d, marker UPDATE %d, COMMIT %d",
                  pgp_cut_name(cut), x->cut_text, d[PGP_BEGIN], d[PGP_LOCK],
                  d[PGP_COPY], d[PGP_MARKER_UPDATE], d[PGP_COMMIT]);
    int data = now.copy_data - before->copy_data;
    int done = now.copy_done - before->copy_done;
    if (cut == PGP_CUT_MID_COPY)
        ck_assert_msg(data == 1 && done == 0,
                      "inconclusive: mid-COPY cut after %d CopyData and %d "
                      "CopyDone forwarded",
                      data, done);
    else if (copy)
        ck_assert_msg(data >= 1 && done == 1,
                      "inconclusive: the rows were not all sent before the "
                      "cut %s (%d CopyData, %d CopyDone)",
                      pgp_cut_name(cut), data, done);
    if (cut == PGP_CUT_AFTER_LOCK || cut == PGP_CUT_AFTER_COMMIT) {
        /* The server got the statement: wait until it answered it (the
         * proxy read and dropped its CommandComplete). */
        wait_for(&x->srv_reply, 10000);
        ck_assert_msg(atomic_load(&x->srv_reply),
                      "inconclusive: the server never answered the forwarded "
                      "%s",
                      cut == PGP_CUT_AFTER_LOCK ? "marker lock" : "COMMIT");
    }
}

/* Batch 1 commits through the proxy; batch 2 is cut at the step CUT; the
 * database itself then shows batch 1 only (cut after COMMIT: batch 2 too),
 * the resend through the disarmed proxy is OK (ALREADY), there is exactly
 * one row per offset, and the next batch commits. MODE: the sink's mode
 * (upsert: batch 2's keys are new, COPYed straight into the table). */
static void cut_by_proxy(pgp_cut cut, const char *mode) {
    const int after_commit = cut == PGP_CUT_AFTER_COMMIT;
    pgp_proxy x;
    char conn[1024];
    pgp_start(&x, conn, sizeof conn);
    conf c;
    conf_init_mode(&c, conn, 30000, mode);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    ck_assert_msg(atomic_load(&x.accepted) >= 1,
                  "inconclusive: the sink did not connect through the proxy");
    batch b1, b2;
    batch_make(&b1, 0, m.epoch);
    int commits = atomic_load(&x.seen[PGP_COMMIT]);
    commit_ok(sink, &b1);
    ck_assert_msg(atomic_load(&x.seen[PGP_COMMIT]) == commits + 1,
                  "inconclusive: the proxy saw no COMMIT in a commit (%d -> "
                  "%d)",
                  commits, atomic_load(&x.seen[PGP_COMMIT]));
    assert_marker(PER_BATCH, b1.id);

    batch_make(&b2, PER_BATCH, m.epoch);
    seen_at before = seen_now(&x);
    atomic_store(&x.arm, (int)cut);
    tm_error err;
    tm_status rc = commit(sink, &b2, &err);
    assert_cut_where_intended(&x, cut, &before, rc, err.message);
    ck_assert_msg(rc == TM_RETRY, "commit with the connection cut %s: %s: %s",
                  pgp_cut_name(cut), tm_status_name(rc), err.message);
    if (after_commit) {
        assert_marker(2 * PER_BATCH, b2.id);
        assert_rows_exactly(2 * PER_BATCH);
    } else {
        assert_marker(PER_BATCH, b1.id); /* nothing of batch 2 landed */
        assert_rows_exactly(PER_BATCH);
    }
    int accepted = atomic_load(&x.accepted);
    rc = commit(sink, &b2, &err); /* the resend, through the disarmed proxy */
    ck_assert_msg(rc == (after_commit ? TM_ALREADY : TM_OK),
                  "resend after the cut %s: %s: %s", pgp_cut_name(cut),
                  tm_status_name(rc), err.message);
    ck_assert_msg(atomic_load(&x.accepted) == accepted + 1,
                  "the resend did not reconnect through the proxy");
    assert_rows_exactly(2 * PER_BATCH);
    assert_marker(2 * PER_BATCH, b2.id);
    /* and the sink goes on */
    batch b3;
    batch_make(&b3, 2 * PER_BATCH, m.epoch);
    commit_ok(sink, &b3);
    assert_rows_exactly(3 * PER_BATCH);
    assert_marker(3 * PER_BATCH, b3.id);
    api->close(sink);
    conf_done(&c);
    pgp_stop(&x);
}

/* _i indexes CUTS. */
START_TEST(commit_cut_by_proxy) {
    cut_by_proxy(CUTS[_i], "append");
}
END_TEST

START_TEST(upsert_commit_cut_by_proxy) {
    cut_by_proxy(CUTS[_i], "upsert");
}
END_TEST

/* ---- a lock past the statement timeout ---------------------------------- */

typedef struct watch {
    atomic_int stop, saw_lock_wait;
} watch;

/* Sees the sink's backend waiting on a lock (pg_stat_activity). */
static void *lock_watcher(void *arg) {
    watch *w = arg;
    PGconn *c = PQconnectdb(pgt_conninfo());
    char q[256];
    snprintf(q, sizeof q,
             "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
             "'%s' AND wait_event_type = 'Lock'",
             connector);
    while (PQstatus(c) == CONNECTION_OK && !atomic_load(&w->stop)) {
        PGresult *r = PQexec(c, q);
        if (PQresultStatus(r) == PGRES_TUPLES_OK &&
            atoi(PQgetvalue(r, 0, 0)) > 0)
            atomic_store(&w->saw_lock_wait, 1);
        PQclear(r);
        sleep_ms(20);
    }
    PQfinish(c);
    return NULL;
}

START_TEST(marker_lock_past_statement_timeout) {
    conf c;
    conf_init(&c, pgt_conninfo(), 500);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b1, b2;
    batch_make(&b1, 0, m.epoch);
    commit_ok(sink, &b1);
    char q[512];
    PQclear(sql("BEGIN"));
    snprintf(q, sizeof q,
             "SELECT next_offset FROM \"%s\".tidemark_markers WHERE connector "
             "= '%s' AND topic = 't' AND \"partition\" = 0 FOR UPDATE",
             schema, connector);
    PGresult *r = sql(q);
    ck_assert_msg(PQntuples(r) == 1,
                  "inconclusive: no marker row to lock (%d rows)",
                  PQntuples(r));
    PQclear(r);
    watch w = {0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, lock_watcher, &w), 0);
    batch_make(&b2, PER_BATCH, m.epoch);
    tm_error err;
    int64_t t0 = tm_clock_mono_ms();
    tm_status rc = commit(sink, &b2, &err);
    int64_t took = tm_clock_mono_ms() - t0;
    atomic_store(&w.stop, 1);
    pthread_join(th, NULL);
    ck_assert_msg(atomic_load(&w.saw_lock_wait),
                  "inconclusive: the sink's backend was never seen waiting "
                  "for a lock (commit %s in %lld ms: %s)",
                  tm_status_name(rc), (long long)took, err.message);
    ck_assert_msg(rc == TM_RETRY, "commit: %s: %s", tm_status_name(rc),
                  err.message);
    ck_assert_msg(strstr(err.message, "57014"), "not the timeout: %s",
                  err.message);
    ck_assert_msg(took >= 450 && took < 2000, "gave up after %lld ms",
                  (long long)took);
    /* nothing written: the holder still sees the old marker */
    assert_rows_exactly(PER_BATCH);
    PQclear(sql("ROLLBACK"));
    assert_marker(PER_BATCH, b1.id);
    assert_rows_exactly(PER_BATCH);
    commit_ok(sink, &b2);
    assert_rows_exactly(2 * PER_BATCH);
    assert_marker(2 * PER_BATCH, b2.id);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* ---- the server restarted ----------------------------------------------- */

static int pg_script(const char *what) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/postgres.sh' %s >&2",
             TM_REPO_ROOT, what);
    return system(cmd);
}

static void *starter(void *arg) {
    (void)arg;
    sleep_ms(500); /* a few commits fail against the stopped server */
    intptr_t rc = pg_script("start");
    return (void *)rc;
}

START_TEST(server_restarted_mid_stream) {
    conf c;
    conf_init(&c, pgt_conninfo(), 30000);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const int before = 3, after = 3;
    batch b;
    for (int i = 0; i < before; i++) {
        batch_make(&b, (int64_t)i * PER_BATCH, m.epoch);
        commit_ok(sink, &b);
    }
    assert_rows_exactly(before * PER_BATCH);
    ck_assert_int_eq(pg_script("stop"), 0);
    ck_assert_msg(PQping(pgt_conninfo()) == PQPING_NO_RESPONSE,
                  "inconclusive: the server still answers after stop");
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, starter, NULL), 0);
    int retries = 0, down_retries = 0;
    int64_t until = tm_clock_mono_ms() + 30000;
    for (int i = before; i < before + after; i++) {
        batch_make(&b, (int64_t)i * PER_BATCH, m.epoch);
        int backoff = 50;
        for (;;) {
            tm_error err;
            int down = PQping(pgt_conninfo()) == PQPING_NO_RESPONSE;
            tm_status rc = commit(sink, &b, &err);
            if (rc == TM_OK)
                break;
            ck_assert_msg(rc == TM_RETRY, "batch %d: %s: %s", i,
                          tm_status_name(rc), err.message);
            retries++;
            down_retries += down;
            ck_assert_msg(tm_clock_mono_ms() < until,
                          "still RETRY after 30 s: %s (%d retries)",
                          err.message, retries);
            sleep_ms(backoff);
            backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
        }
    }
    void *started = NULL;
    pthread_join(th, &started);
    ck_assert_msg(started == NULL, "postgres.sh start failed");
    ck_assert_msg(down_retries >= 1,
                  "inconclusive: no commit was tried while the server was "
                  "down (%d retries)",
                  retries);
    fprintf(stderr,
            "restart: %d RETRY (%d with the server down) before the "
            "stream went on\n",
            retries, down_retries);
    admin_connect(); /* the old session died with the server */
    assert_rows_exactly((before + after) * PER_BATCH);
    assert_marker((before + after) * PER_BATCH, b.id);
    api->close(sink);
    conf_done(&c);
}
END_TEST

static TCase *tcase(const char *name) {
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    return tc;
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    Suite *s = suite_create("postgres_faults");
    if (!only || strcmp(only, "proxy") == 0) {
        TCase *tc = tcase("proxy");
        tcase_add_loop_test(tc, commit_cut_by_proxy, 0, NCUTS);
        tcase_add_loop_test(tc, upsert_commit_cut_by_proxy, 0, NCUTS);
        suite_add_tcase(s, tc);
    }
    if (!only || strcmp(only, "lock") == 0) {
        TCase *tc = tcase("lock");
        tcase_add_test(tc, marker_lock_past_statement_timeout);
        suite_add_tcase(s, tc);
    }
    if (!only || strcmp(only, "restart") == 0) {
        TCase *tc = tcase("restart");
        tcase_add_test(tc, server_restarted_mid_stream);
        suite_add_tcase(s, tc);
    }
    return tm_check_run(s, 1);
}
