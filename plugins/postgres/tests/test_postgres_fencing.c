/* Two PostgreSQL sink instances in two processes on one table: A claims
 * partition t[0] and commits; B (a child process, its own open() and
 * connection) claims the same partition, which raises the epoch; A's next
 * commit must be TM_FENCED with nothing written, and B's commit of the
 * same offsets works. Checked in the database's own rows: every offset
 * once, A's rows before the claim and B's after, the marker B's. */
#include <check.h>
#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "pg_test_common.h"
#include "config/settings.h"
#include "plugin/loader.h"
#include "services/host_services.h"

static const tm_sink_api *api;
static char schema[64], connector[64];
static PGconn *admin; /* the test's own connection */

static void setup(void) {
    api = pgt_plugin(TM_POSTGRES_PLUGIN);
    static int n;
    snprintf(schema, sizeof schema, "pgfence_%d_%d", (int)getpid(), ++n);
    snprintf(connector, sizeof connector, "fence_%d_%d", (int)getpid(), n);
    admin = pgt_connect(pgt_conninfo());
}

static void teardown(void) {
    char text[256];
    snprintf(text, sizeof text, "DROP SCHEMA IF EXISTS \"%s\" CASCADE", schema);
    PQclear(PQexec(admin, text));
    PQfinish(admin);
    admin = NULL;
}

static const tm_column COLS[] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 0},
    {sizeof(tm_column), "body", TM_TYPE_TEXT, 0, 0},
};
#define NCOLS     2
#define PER_BATCH 3

typedef struct instance {
    tm_settings *settings;
    tm_sink_config config;
    void *sink;
} instance;

/* open() of an instance of its own (own connection); NULL sink on failure
 * with err set. Usable in the child, where Check must not assert. */
static tm_status instance_open(instance *in, tm_error *err) {
    json_t *obj = json_pack("{s:s, s:s, s:s}", "conninfo", pgt_conninfo(),
                            "schema", schema, "table", "t");
    in->settings = obj ? tm_settings_new(obj, "$.sink.settings") : NULL;
    json_decref(obj);
    if (!in->settings) {
        snprintf(err->message, sizeof err->message, "settings: no memory");
        return TM_FATAL;
    }
    in->config = (tm_sink_config){.struct_size = sizeof(tm_sink_config),
                                  .connector = connector,
                                  .settings = in->settings,
                                  .columns = COLS,
                                  .ncolumns = NCOLS};
    in->sink = NULL;
    return api->open(tm_host_services(), &in->config, &in->sink, err);
}

static void instance_close(instance *in) {
    if (in->sink)
        api->close(in->sink);
    tm_settings_free(in->settings);
}

static tm_status claim(instance *in, int64_t *epoch, tm_error *err) {
    tm_marker m = {.struct_size = sizeof m, .topic = "t", .partition = 0};
    tm_status rc = api->claim(in->sink, &m, 1, 0, err);
    *epoch = m.epoch;
    return rc;
}

typedef struct batch {
    tm_batch b;
    tm_range range;
    tm_record records[PER_BATCH];
    tm_value values[PER_BATCH][NCOLS];
    char id[48];
} batch;

/* Offsets start .. start + PER_BATCH - 1, id = offset, body = who. */
static void batch_make(batch *bt, const char *who, int64_t start,
                       int64_t epoch) {
    memset(bt, 0, sizeof *bt);
    snprintf(bt->id, sizeof bt->id, "%s-%d-%lld", who, (int)getpid(),
             (long long)start);
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
        v[1].v.s.ptr = who;
        v[1].v.s.len = strlen(who);
        bt->records[i] = (tm_record){.struct_size = sizeof(tm_record),
                                     .offset = start + i,
                                     .timestamp_ms = 1000,
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

static tm_status commit(instance *in, batch *bt, tm_error *err) {
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return api->commit(in->sink, &bt->b, err);
}

static void sql_text(const char *fmt, char *out, size_t size) {
    pgt_sql_text(admin, schema, fmt, out, size);
}

/* "next_offset/epoch/last_batch_id" of t[0] on the server. */
static void marker_text(char *out, size_t size) {
    char q[512];
    snprintf(q, sizeof q,
             "SELECT next_offset || '/' || epoch || '/' || "
             "coalesce(last_batch_id, '') FROM $S.tidemark_markers WHERE "
             "connector = '%s' AND topic = 't' AND \"partition\" = 0",
             connector);
    sql_text(q, out, size);
}

/* "count/distinct/min/max/bodies in offset order" of the rows. */
static void rows_text(char *out, size_t size) {
    sql_text("SELECT count(*) || '/' || count(DISTINCT _tm_offset) || '/' || "
             "coalesce(min(_tm_offset), -1) || '/' || "
             "coalesce(max(_tm_offset), -1) || '/' || "
             "coalesce(string_agg(body, '' ORDER BY _tm_offset), '') FROM $S.t",
             out, size);
}

/* ---- process B ------------------------------------------------------------
 */

typedef struct report {
    int step;         /* 1: claimed, 2: committed */
    tm_status status; /* of that step */
    int64_t epoch;
    char message[TM_ERROR_MAX];
} report;

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n) {
    char *c = p;
    while (n > 0) {
        ssize_t k = read(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The child: its own instance claims t[0], reports the epoch, waits for
 * the go, commits offsets [from, from + PER_BATCH) as "B", reports. No
 * Check asserts here: the exit code and the reports say what happened. */
static int process_b(int to_parent, int from_parent, int64_t from) {
    instance b;
    report r = {0};
    tm_error err = {sizeof err, ""};
    r.step = 1;
    r.status = instance_open(&b, &err);
    if (r.status == TM_OK)
        r.status = claim(&b, &r.epoch, &err);
    snprintf(r.message, sizeof r.message, "%s", err.message);
    if (write_all(to_parent, &r, sizeof r) != 0 || r.status != TM_OK) {
        instance_close(&b);
        return 2;
    }
    char go;
    if (read_all(from_parent, &go, 1) != 0) {
        instance_close(&b);
        return 3;
    }
    batch bt;
    batch_make(&bt, "B", from, r.epoch);
    r.step = 2;
    r.status = commit(&b, &bt, &err);
    snprintf(r.message, sizeof r.message, "%s", err.message);
    int rc = write_all(to_parent, &r, sizeof r) == 0 ? 0 : 4;
    instance_close(&b);
    return rc;
}

static pid_t spawn_b(int *from_b, int *to_b, int64_t from) {
    int up[2], down[2];
    ck_assert_int_eq(pipe(up), 0);
    ck_assert_int_eq(pipe(down), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        /* The parent's sessions (admin, A's) stay the parent's: no
         * PQfinish here, which would end them; _exit only closes fds. */
        _exit(process_b(up[1], down[0], from));
    }
    close(up[1]);
    close(down[0]);
    *from_b = up[0];
    *to_b = down[1];
    return pid;
}

static void read_report(int fd, int step, report *r) {
    ck_assert_msg(read_all(fd, r, sizeof *r) == 0,
                  "process B died before step %d", step);
    ck_assert_int_eq(r->step, step);
}

START_TEST(second_process_fences_the_first) {
    char v[256], want[256];
    instance a;
    tm_error err = {sizeof err, ""};
    tm_status rc = instance_open(&a, &err);
    ck_assert_msg(rc == TM_OK, "A: open: %s: %s", tm_status_name(rc),
                  err.message);
    int64_t ea;
    rc = claim(&a, &ea, &err);
    ck_assert_msg(rc == TM_OK, "A: claim: %s", err.message);
    batch a1, a2;
    batch_make(&a1, "A", 0, ea);
    rc = commit(&a, &a1, &err);
    ck_assert_msg(rc == TM_OK, "A: commit: %s: %s", tm_status_name(rc),
                  err.message);

    /* B, another process with its own connection, claims t[0]. */
    int from_b, to_b;
    pid_t pid = spawn_b(&from_b, &to_b, PER_BATCH);
    report r;
    read_report(from_b, 1, &r);
    ck_assert_msg(r.status == TM_OK, "B: claim: %s: %s",
                  tm_status_name(r.status), r.message);
    ck_assert_msg(r.epoch == ea + 1, "B's claim: epoch %lld, A had %lld",
                  (long long)r.epoch, (long long)ea);
    marker_text(v, sizeof v);
    snprintf(want, sizeof want, "%d/%lld/%s", PER_BATCH, (long long)r.epoch,
             a1.id);
    ck_assert_msg(strcmp(v, want) == 0,
                  "inconclusive: after B's claim the marker is %s, want %s", v,
                  want);

    /* A's next commit, with its old epoch: fenced, nothing written. */
    batch_make(&a2, "A", PER_BATCH, ea);
    rc = commit(&a, &a2, &err);
    ck_assert_msg(rc == TM_FENCED, "A after B's claim: %s: %s",
                  tm_status_name(rc), err.message);
    rc = commit(&a, &a2, &err); /* and again: the answer does not change */
    ck_assert_msg(rc == TM_FENCED, "A's resend: %s: %s", tm_status_name(rc),
                  err.message);
    marker_text(v, sizeof v);
    ck_assert_msg(strcmp(v, want) == 0,
                  "A's fenced commit moved the "
                  "marker: %s, want %s",
                  v, want);
    rows_text(v, sizeof v);
    ck_assert_msg(strcmp(v, "3/3/0/2/AAA") == 0,
                  "A's fenced commit wrote rows: %s, want 3/3/0/2/AAA", v);

    /* B commits the same offsets: that works. */
    ck_assert_int_eq(write(to_b, "g", 1), 1);
    read_report(from_b, 2, &r);
    ck_assert_msg(r.status == TM_OK, "B: commit: %s: %s",
                  tm_status_name(r.status), r.message);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "process B ended with status %d", status);
    close(from_b);
    close(to_b);
    rows_text(v, sizeof v);
    ck_assert_msg(strcmp(v, "6/6/0/5/AAABBB") == 0,
                  "rows %s, want 6/6/0/5/AAABBB (no gap, no duplicate)", v);
    marker_text(v, sizeof v);
    char b_id[96];
    snprintf(b_id, sizeof b_id, "B-%d-%d", (int)pid, PER_BATCH);
    snprintf(want, sizeof want, "%d/%lld/%s", 2 * PER_BATCH, (long long)ea + 1,
             b_id);
    ck_assert_msg(strcmp(v, want) == 0, "marker %s, want %s", v, want);
    /* A stays fenced after B's commit too. */
    rc = commit(&a, &a2, &err);
    ck_assert_msg(rc == TM_FENCED, "A after B's commit: %s: %s",
                  tm_status_name(rc), err.message);
    rows_text(v, sizeof v);
    ck_assert_msg(strcmp(v, "6/6/0/5/AAABBB") == 0, "rows %s after A's try", v);
    instance_close(&a);
}
END_TEST

int main(void) {
    Suite *s = suite_create("postgres_fencing");
    TCase *tc = tcase_create("fencing");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, second_process_fences_the_first);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
