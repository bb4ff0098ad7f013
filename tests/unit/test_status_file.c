/* The status file and the host lock (host/status/): what a running host
 * writes is what `tidemark status` reads back; a reader never sees half a
 * file; one host per connector and state directory; a killed host shows as
 * STOPPED with its last update; the default directory's rules. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "services/redact.h"
#include "services/clock.h"
#include "status/status_file.h"
#include "status/status_pulse.h"
#include "status/status_read.h"
#include "check_main.h"

static char dir[256];

static void make_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/tm_status_test.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void remove_dir(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static const tm_status_partition PARTS[2] = {
    {.topic = "orders",
     .partition = 0,
     .next_offset = 120,
     .epoch = 3,
     .high_watermark = 125,
     .rows = 100,
     .dead_letters = 7,
     .filtered = 9,
     .duplicates = 4,
     .paused = 0},
    {.topic = "orders",
     .partition = 1,
     .next_offset = -1,
     .epoch = 0,
     .high_watermark = -1,
     .paused = 1},
};

static void fill(tm_status_snapshot *s, tm_conn_state state) {
    memset(s, 0, sizeof *s);
    snprintf(s->connector, sizeof s->connector, "orders-to-sqlite");
    snprintf(s->plugin, sizeof s->plugin, "sqlite");
    snprintf(s->plugin_version, sizeof s->plugin_version, "1.2.3");
    snprintf(s->instance_id, sizeof s->instance_id, "a1b2c3");
    s->pid = (long)getpid();
    s->state = state;
    s->started_ms = 1764680000000;
    s->updated_ms = 1764680042000;
    snprintf(s->last_batch_id, sizeof s->last_batch_id, "a1b2c3-000042");
    s->last_batch_ms = 1764680041500;
    s->last_batch_records = 17;
    s->partitions = PARTS;
    s->npartitions = 2;
    s->totals.rows = 100;
    s->totals.dead_letters = 7;
    s->totals.filtered = 9;
    s->totals.duplicates = 4;
    s->totals.batches = 42;
    s->totals.fenced = 1;
    s->totals.conflicts = 2;
    s->totals.retries = 5;
    snprintf(s->last_error, sizeof s->last_error, "sink: disk full \"x\"");
    s->last_error_ms = 1764680030000;
}

START_TEST(round_trip) {
    make_dir();
    char err[512] = "";
    tm_status_writer *w =
        tm_status_writer_open(dir, "orders-to-sqlite", err, sizeof err);
    ck_assert_msg(w != NULL, "%s", err);
    tm_status_snapshot s;
    fill(&s, TM_CONN_PAUSED);
    ck_assert_int_eq(tm_status_writer_write(w, &s, err, sizeof err), 0);

    tm_status_report r;
    ck_assert_int_eq(
        tm_status_read(dir, "orders-to-sqlite", &r, err, sizeof err), 0);
    ck_assert_int_eq(r.live, 1); /* our own lock: another open file */
    ck_assert_int_eq(r.live_pid, getpid());
    ck_assert_int_eq(r.has_file, 1);
    ck_assert_int_eq(r.snap.state, TM_CONN_PAUSED);
    ck_assert_int_eq(r.written, TM_CONN_PAUSED);
    ck_assert_str_eq(r.snap.connector, "orders-to-sqlite");
    ck_assert_str_eq(r.snap.plugin, "sqlite");
    ck_assert_str_eq(r.snap.plugin_version, "1.2.3");
    ck_assert_str_eq(r.snap.instance_id, "a1b2c3");
    ck_assert_int_eq(r.snap.pid, getpid());
    ck_assert_int_eq(r.snap.started_ms, 1764680000000);
    ck_assert_int_eq(r.snap.updated_ms, 1764680042000);
    ck_assert_str_eq(r.snap.last_batch_id, "a1b2c3-000042");
    ck_assert_int_eq(r.snap.last_batch_ms, 1764680041500);
    ck_assert_uint_eq(r.snap.last_batch_records, 17);
    ck_assert_uint_eq(r.snap.totals.rows, 100);
    ck_assert_uint_eq(r.snap.totals.dead_letters, 7);
    ck_assert_uint_eq(r.snap.totals.filtered, 9);
    ck_assert_uint_eq(r.snap.totals.duplicates, 4);
    ck_assert_uint_eq(r.snap.totals.batches, 42);
    ck_assert_uint_eq(r.snap.totals.fenced, 1);
    ck_assert_uint_eq(r.snap.totals.conflicts, 2);
    ck_assert_uint_eq(r.snap.totals.retries, 5);
    ck_assert_str_eq(r.snap.last_error, "sink: disk full \"x\"");
    ck_assert_int_eq(r.snap.last_error_ms, 1764680030000);
    ck_assert_uint_eq(r.snap.npartitions, 2);
    const tm_status_partition *p = r.snap.partitions;
    ck_assert_str_eq(p[0].topic, "orders");
    ck_assert_int_eq(p[0].partition, 0);
    ck_assert_int_eq(p[0].next_offset, 120);
    ck_assert_int_eq(p[0].epoch, 3);
    ck_assert_int_eq(p[0].high_watermark, 125);
    ck_assert_uint_eq(p[0].rows, 100);
    ck_assert_uint_eq(p[0].dead_letters, 7);
    ck_assert_uint_eq(p[0].filtered, 9);
    ck_assert_uint_eq(p[0].duplicates, 4);
    ck_assert_int_eq(p[0].paused, 0);
    ck_assert_int_eq(p[1].partition, 1);
    ck_assert_int_eq(p[1].next_offset, -1);
    ck_assert_int_eq(p[1].epoch, 0);
    ck_assert_int_eq(p[1].high_watermark, -1);
    ck_assert_int_eq(p[1].paused, 1);
    tm_status_report_free(&r);

    /* No batch and no error yet: both come back empty. */
    s.last_batch_id[0] = '\0';
    s.last_error[0] = '\0';
    s.npartitions = 0;
    ck_assert_int_eq(tm_status_writer_write(w, &s, err, sizeof err), 0);
    ck_assert_int_eq(
        tm_status_read(dir, "orders-to-sqlite", &r, err, sizeof err), 0);
    ck_assert_str_eq(r.snap.last_batch_id, "");
    ck_assert_str_eq(r.snap.last_error, "");
    ck_assert_int_eq(r.snap.last_error_ms, 0);
    ck_assert_uint_eq(r.snap.npartitions, 0);
    tm_status_report_free(&r);
    tm_status_writer_close(w);
    remove_dir();
}
END_TEST

/* A child rewrites the file as fast as it can, alternating a short and a
 * long snapshot; every read of the parent parses and is one of the two. */
START_TEST(never_partial) {
    make_dir();
    char err[512] = "";
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        tm_status_writer *w = tm_status_writer_open(dir, "c", err, sizeof err);
        if (!w)
            _exit(3);
        tm_status_snapshot s;
        fill(&s, TM_CONN_RUNNING);
        if (tm_status_writer_write(w, &s, err, sizeof err) != 0)
            _exit(4);
        if (write(ready[1], "x", 1) != 1)
            _exit(5);
        for (long i = 0;; i++) {
            s.npartitions = (i % 2) ? 2 : 0;
            s.last_batch_records = (uint64_t)i;
            if (tm_status_writer_write(w, &s, err, sizeof err) != 0)
                _exit(6);
        }
    }
    close(ready[1]);
    char c;
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    char path[512];
    snprintf(path, sizeof path, "%s/c/status.json", dir);
    int seen[2] = {0, 0};
    for (int i = 0; i < 2000; i++) {
        json_error_t jerr;
        json_t *doc = json_load_file(path, 0, &jerr);
        ck_assert_msg(doc != NULL, "read %d: %s", i, jerr.text);
        size_t n = json_array_size(json_object_get(doc, "partitions"));
        ck_assert_msg(n == 0 || n == 2, "read %d: %zu partitions", i, n);
        seen[n / 2]++;
        json_decref(doc);
    }
    kill(pid, SIGKILL);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFSIGNALED(st), "writer child exited early: %d",
                  WEXITSTATUS(st));
    ck_assert_msg(seen[0] > 0 || seen[1] > 0, "nothing read");
    close(ready[0]);
    remove_dir();
}
END_TEST

START_TEST(second_writer_refused) {
    make_dir();
    char err[512] = "";
    tm_status_writer *w = tm_status_writer_open(dir, "c1", err, sizeof err);
    ck_assert_msg(w != NULL, "%s", err);
    char want[128];
    snprintf(want, sizeof want, "connector c1 is already running (pid %ld)",
             (long)getpid());
    ck_assert_ptr_null(tm_status_writer_open(dir, "c1", err, sizeof err));
    ck_assert_str_eq(err, want);
    /* Another connector in the same directory is another lock. */
    tm_status_writer *w2 = tm_status_writer_open(dir, "c2", err, sizeof err);
    ck_assert_msg(w2 != NULL, "%s", err);
    tm_status_writer_close(w2);
    /* Closing releases: the next host gets it. */
    tm_status_writer_close(w);
    w = tm_status_writer_open(dir, "c1", err, sizeof err);
    ck_assert_msg(w != NULL, "%s", err);
    tm_status_writer_close(w);
    remove_dir();
}
END_TEST

START_TEST(live_then_killed) {
    make_dir();
    char err[512] = "";
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        tm_status_writer *w =
            tm_status_writer_open(dir, "orders-to-sqlite", err, sizeof err);
        tm_status_snapshot s;
        fill(&s, TM_CONN_RUNNING);
        s.pid = (long)getpid();
        if (!w || tm_status_writer_write(w, &s, err, sizeof err) != 0 ||
            write(ready[1], "x", 1) != 1)
            _exit(3);
        for (;;)
            pause();
    }
    close(ready[1]);
    char c;
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    close(ready[0]);

    long holder = 0;
    ck_assert_int_eq(tm_status_is_live(dir, "orders-to-sqlite", &holder), 1);
    ck_assert_int_eq(holder, pid);
    tm_status_report r;
    ck_assert_int_eq(
        tm_status_read(dir, "orders-to-sqlite", &r, err, sizeof err), 0);
    ck_assert_int_eq(r.live, 1);
    ck_assert_int_eq(r.snap.state, TM_CONN_RUNNING);
    ck_assert_int_eq(r.snap.pid, pid);
    tm_status_report_free(&r);

    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);

    ck_assert_int_eq(tm_status_is_live(dir, "orders-to-sqlite", &holder), 0);
    ck_assert_int_eq(holder, 0);
    ck_assert_int_eq(
        tm_status_read(dir, "orders-to-sqlite", &r, err, sizeof err), 0);
    ck_assert_int_eq(r.live, 0);
    ck_assert_int_eq(r.snap.state, TM_CONN_STOPPED); /* whatever it said */
    ck_assert_int_eq(r.written, TM_CONN_RUNNING);
    ck_assert_int_eq(r.snap.updated_ms, 1764680042000);
    ck_assert_int_eq(r.snap.pid, pid);
    tm_status_report_free(&r);
    remove_dir();
}
END_TEST

START_TEST(missing_and_malformed) {
    make_dir();
    char err[1024] = "", want[1024];
    tm_status_report r;
    ck_assert_int_eq(tm_status_read(dir, "nobody", &r, err, sizeof err), 1);
    snprintf(want, sizeof want, "no status for connector nobody in %s", dir);
    ck_assert_str_eq(err, want);
    ck_assert_int_eq(tm_status_is_live(dir, "nobody", NULL), 0);

    ck_assert_int_eq(tm_status_read(dir, "..", &r, err, sizeof err), -1);
    ck_assert_str_eq(err, "\"..\" is not a connector name");
    ck_assert_int_eq(tm_status_read(dir, "a/b", &r, err, sizeof err), -1);

    char path[512];
    snprintf(path, sizeof path, "%s/bad", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/bad/status.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"format\": 1, \"connector\": \"bad\", \"state\": \"DANCING\"}", f);
    fclose(f);
    ck_assert_int_eq(tm_status_read(dir, "bad", &r, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: state: unknown state \"DANCING\"", path);
    ck_assert_str_eq(err, want);

    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"format\": 2}", f);
    fclose(f);
    ck_assert_int_eq(tm_status_read(dir, "bad", &r, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: format 2, this tidemark reads 1", path);
    ck_assert_str_eq(err, want);
    remove_dir();
}
END_TEST

START_TEST(lock_without_file_is_starting) {
    make_dir();
    char err[512] = "";
    tm_status_writer *w = tm_status_writer_open(dir, "new", err, sizeof err);
    ck_assert_msg(w != NULL, "%s", err);
    tm_status_report r;
    ck_assert_int_eq(tm_status_read(dir, "new", &r, err, sizeof err), 0);
    ck_assert_int_eq(r.has_file, 0);
    ck_assert_int_eq(r.snap.state, TM_CONN_STARTING);
    ck_assert_int_eq(r.snap.pid, getpid());
    tm_status_report_free(&r);
    tm_status_writer_close(w);
    /* The lock is free now and there is no file: nothing to report. */
    ck_assert_int_eq(tm_status_read(dir, "new", &r, err, sizeof err), 1);
    remove_dir();
}
END_TEST

START_TEST(list_sorted) {
    make_dir();
    char err[512] = "";
    const char *names[] = {"zeta", "alpha", "mid"};
    tm_status_writer *w[3];
    tm_status_snapshot s;
    fill(&s, TM_CONN_RUNNING);
    for (int i = 0; i < 3; i++) {
        w[i] = tm_status_writer_open(dir, names[i], err, sizeof err);
        ck_assert_msg(w[i] != NULL, "%s", err);
        ck_assert_int_eq(tm_status_writer_write(w[i], &s, err, sizeof err), 0);
    }
    char other[512];
    snprintf(other, sizeof other, "%s/not-a-connector", dir);
    ck_assert_int_eq(mkdir(other, 0755), 0);
    char **got = NULL;
    size_t n = 0;
    ck_assert_int_eq(tm_status_list(dir, &got, &n, err, sizeof err), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(got[0], "alpha");
    ck_assert_str_eq(got[1], "mid");
    ck_assert_str_eq(got[2], "zeta");
    tm_status_names_free(got, n);
    for (int i = 0; i < 3; i++)
        tm_status_writer_close(w[i]);
    snprintf(other, sizeof other, "%s/missing", dir);
    ck_assert_int_eq(tm_status_list(other, &got, &n, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "does not exist"));
    remove_dir();
}
END_TEST

/* A state directory that also holds other things (a SQLite file, a
 * folder of no connector): they are skipped, and the stat() that found
 * them not to be connectors leaves no errno behind that the end of the
 * listing would take for a read error. */
START_TEST(list_skips_other_entries) {
    make_dir();
    char err[512] = "", path[600];
    snprintf(path, sizeof path, "%s/orders.db", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(path, sizeof path, "%s/not-a-connector", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    char **got = NULL;
    size_t n = 99;
    ck_assert_msg(tm_status_list(dir, &got, &n, err, sizeof err) == 0, "%s",
                  err);
    ck_assert_uint_eq(n, 0);
    tm_status_names_free(got, n);
    remove_dir();
}
END_TEST

START_TEST(default_dir_rules) {
    char out[512];
    setenv("TIDEMARK_STATE_DIR", "/srv/tm-state", 1);
    setenv("XDG_STATE_HOME", "/xdg", 1);
    setenv("HOME", "/home/u", 1);
    tm_status_default_dir(out, sizeof out);
    ck_assert_str_eq(out, "/srv/tm-state");
    setenv("TIDEMARK_STATE_DIR", "", 1); /* empty: as if unset */
    tm_status_default_dir(out, sizeof out);
    ck_assert_str_eq(out, "/xdg/tidemark");
    unsetenv("TIDEMARK_STATE_DIR");
    tm_status_default_dir(out, sizeof out);
    ck_assert_str_eq(out, "/xdg/tidemark");
    setenv("XDG_STATE_HOME", "relative/dir", 1); /* invalid per XDG */
    tm_status_default_dir(out, sizeof out);
    ck_assert_str_eq(out, "/home/u/.local/state/tidemark");
    unsetenv("XDG_STATE_HOME");
    tm_status_default_dir(out, sizeof out);
    ck_assert_str_eq(out, "/home/u/.local/state/tidemark");
}
END_TEST

START_TEST(writer_creates_parents) {
    make_dir();
    char deep[512], err[512] = "";
    snprintf(deep, sizeof deep, "%s/a/b/c", dir);
    tm_status_writer *w = tm_status_writer_open(deep, "x", err, sizeof err);
    ck_assert_msg(w != NULL, "%s", err);
    tm_status_writer_close(w);
    char lock[600];
    snprintf(lock, sizeof lock, "%s/x/host.lock", deep);
    ck_assert_int_eq(access(lock, F_OK), 0);
    /* A file where the directory should be: a clear error. */
    char file[512];
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_ptr_null(tm_status_writer_open(file, "x", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "cannot create the state directory"));
    remove_dir();
}
END_TEST

/* The text of status.json, "" when unreadable. */
static const char *status_text(const char *connector) {
    static char buf[16384];
    char path[600];
    snprintf(path, sizeof path, "%s/%s/status.json", dir, connector);
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
        fclose(f);
    }
    return buf;
}

/* The host's last error is cut to its buffer (1023 bytes) before the
 * config's redaction sees it: a secret cut in two left its start in
 * status.json. The writer redacts again, knowing a full buffer was cut. */
START_TEST(cut_secret_in_last_error_redacted) {
    make_dir();
    const char *secret[] = {"pw-9a8b7c6d"};
    tm_redact_reset();
    ck_assert_int_eq(tm_redact_add(secret, 1), 0);
    char err[512] = "";
    tm_status_writer *w = tm_status_writer_open(dir, "cut", err, sizeof err);
    ck_assert_msg(w != NULL, "%s", err);
    tm_status_snapshot s;
    fill(&s, TM_CONN_FAILED);
    size_t room = sizeof s.last_error - 1;
    memset(s.last_error, 'x', room - 3);
    memcpy(s.last_error + room - 3, "pw-", 4); /* the cut, and its NUL */
    ck_assert_uint_eq(strlen(s.last_error), room);
    ck_assert_int_eq(tm_status_writer_write(w, &s, err, sizeof err), 0);
    const char *text = status_text("cut");
    ck_assert_ptr_nonnull(strstr(text, "xxx***\""));
    ck_assert_ptr_null(strstr(text, "pw-"));
    /* A whole one anywhere, too (a caller that did not redact). */
    snprintf(s.last_error, sizeof s.last_error, "auth pw-9a8b7c6d refused");
    ck_assert_int_eq(tm_status_writer_write(w, &s, err, sizeof err), 0);
    text = status_text("cut");
    ck_assert_ptr_nonnull(strstr(text, "\"auth *** refused\""));
    tm_status_writer_close(w);
    tm_redact_reset();
    remove_dir();
}
END_TEST

/* A file outside the state directory that planted links point to. */
static char victim[300];

static void make_victim(void) {
    snprintf(victim, sizeof victim, "%s.victim", dir);
    FILE *f = fopen(victim, "w");
    ck_assert_ptr_nonnull(f);
    fputs("victim\n", f);
    fclose(f);
}

static void check_victim_untouched(void) {
    char buf[64] = "";
    FILE *f = fopen(victim, "r");
    ck_assert_ptr_nonnull(f);
    buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
    fclose(f);
    ck_assert_str_eq(buf, "victim\n");
    unlink(victim);
}

/* host.lock planted as a link to another file: the writer opened it with
 * O_CREAT and truncated it (the victim lost its content to a pid). */
START_TEST(planted_lock_symlink_refused) {
    make_dir();
    make_victim();
    char cdir[300], lock[400], err[512] = "";
    snprintf(cdir, sizeof cdir, "%s/c", dir);
    ck_assert_int_eq(mkdir(cdir, 0700), 0);
    snprintf(lock, sizeof lock, "%s/host.lock", cdir);
    ck_assert_int_eq(symlink(victim, lock), 0);
    tm_status_writer *w = tm_status_writer_open(dir, "c", err, sizeof err);
    tm_status_writer_close(w);
    ck_assert_ptr_null(w);
    ck_assert_msg(strstr(err, "host.lock is a symbolic link") != NULL, "%s",
                  err);
    check_victim_untouched();
    remove_dir();
}
END_TEST

/* status.json.tmp planted as a link: the writer truncated it (O_TRUNC). */
START_TEST(planted_tmp_symlink_refused) {
    make_dir();
    make_victim();
    char tmp[400], err[512] = "";
    tm_status_writer *w = tm_status_writer_open(dir, "c", err, sizeof err);
    ck_assert_msg(w != NULL, "%s", err);
    snprintf(tmp, sizeof tmp, "%s/c/status.json.tmp", dir);
    ck_assert_int_eq(symlink(victim, tmp), 0);
    tm_status_snapshot s;
    fill(&s, TM_CONN_RUNNING);
    int rc = tm_status_writer_write(w, &s, err, sizeof err);
    tm_status_writer_close(w);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(err, "status.json.tmp is a symbolic link") != NULL,
                  "%s", err);
    check_victim_untouched();
    remove_dir();
}
END_TEST

/* A state directory anyone may write to is refused, the top one and a
 * connector's, with the reason; nothing is created in it. */
START_TEST(writable_state_dir_refused) {
    make_dir();
    char err[512] = "", cdir[300];
    ck_assert_int_eq(chmod(dir, 0777), 0);
    ck_assert_ptr_null(tm_status_writer_open(dir, "c", err, sizeof err));
    ck_assert_msg(strstr(err, "writable by group or others (mode 0777)") &&
                      strstr(err, dir),
                  "%s", err);
    snprintf(cdir, sizeof cdir, "%s/c", dir);
    ck_assert_int_eq(access(cdir, F_OK), -1);
    /* The connector's own directory too. */
    ck_assert_int_eq(chmod(dir, 0700), 0);
    ck_assert_int_eq(mkdir(cdir, 0700), 0);
    ck_assert_int_eq(chmod(cdir, 0770), 0);
    ck_assert_ptr_null(tm_status_writer_open(dir, "c", err, sizeof err));
    ck_assert_msg(strstr(err, "writable by group or others (mode 0770)") &&
                      strstr(err, cdir),
                  "%s", err);
    remove_dir();
}
END_TEST

/* One owned by another user is refused (as root: a directory given to
 * nobody; as anyone else: /usr, root's). */
START_TEST(foreign_state_dir_refused) {
    make_dir();
    char err[512] = "", target[300];
    if (geteuid() == 0) {
        snprintf(target, sizeof target, "%s/foreign", dir);
        ck_assert_int_eq(mkdir(target, 0755), 0);
        ck_assert_int_eq(chown(target, 65534, 65534), 0);
    } else {
        snprintf(target, sizeof target, "/usr");
    }
    ck_assert_ptr_null(tm_status_writer_open(target, "c", err, sizeof err));
    ck_assert_msg(strstr(err, "is owned by uid ") && strstr(err, target) &&
                      strstr(err, "not by this user"),
                  "%s", err);
    remove_dir();
}
END_TEST

/* A new state directory is created 0700 (parents included). */
START_TEST(new_state_dir_private) {
    make_dir();
    char deep[300], err[512] = "";
    snprintf(deep, sizeof deep, "%s/a/b", dir);
    tm_status_writer *w = tm_status_writer_open(deep, "c", err, sizeof err);
    ck_assert_msg(w != NULL, "%s", err);
    tm_status_writer_close(w);
    const char *sub[] = {"a", "a/b", "a/b/c"};
    for (size_t i = 0; i < 3; i++) {
        char p[400];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, sub[i]);
        ck_assert_int_eq(stat(p, &st), 0);
        ck_assert_msg((st.st_mode & 07777) == 0700, "%s: mode %o", p,
                      (unsigned)(st.st_mode & 07777));
    }
    remove_dir();
}
END_TEST

/* A reader never follows a planted status.json either. */
START_TEST(reader_refuses_symlinked_status) {
    make_dir();
    make_victim();
    char cdir[300], file[400], err[512] = "";
    snprintf(cdir, sizeof cdir, "%s/c", dir);
    ck_assert_int_eq(mkdir(cdir, 0700), 0);
    snprintf(file, sizeof file, "%s/status.json", cdir);
    ck_assert_int_eq(symlink(victim, file), 0);
    tm_status_report r;
    ck_assert_int_eq(tm_status_read(dir, "c", &r, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "status.json is a symbolic link") != NULL, "%s",
                  err);
    check_victim_untouched();
    remove_dir();
}
END_TEST

/* The status pulse (status_pulse.h): a snapshot published once is
 * rewritten by the pulse's own thread, its updated_ms renewed, while
 * nothing else is published (the connector's thread inside a long commit),
 * and the wait the connector declared comes with it, round trip through
 * the file; declared over, it goes. */
START_TEST(pulse_rewrites_while_nothing_is_published) {
    make_dir();
    char err[512] = "";
    tm_status_writer *w = tm_status_writer_open(dir, "c", err, sizeof err);
    ck_assert_msg(w != NULL, "%s", err);
    tm_status_pulse *p = tm_status_pulse_start(w, 200, "c");
    ck_assert_ptr_nonnull(p);
    tm_status_snapshot s;
    fill(&s, TM_CONN_RUNNING);
    snprintf(s.connector, sizeof s.connector, "c");
    tm_status_pulse_waiting(p, "the sink's commit of batch b-1", 1764680043000,
                            1764680103000);
    ck_assert_int_eq(tm_status_pulse_write(p, &s, err, sizeof err), 0);
    tm_status_report r;
    ck_assert_int_eq(tm_status_read(dir, "c", &r, err, sizeof err), 0);
    ck_assert_int_eq(r.snap.updated_ms, 1764680042000);
    ck_assert_str_eq(r.snap.waiting_on, "the sink's commit of batch b-1");
    ck_assert_int_eq(r.snap.waiting_since_ms, 1764680043000);
    ck_assert_int_eq(r.snap.waiting_until_ms, 1764680103000);
    tm_status_report_free(&r);
    /* Rewritten by the pulse alone: a fresh updated_ms, the rest kept. */
    int64_t t0 = tm_clock_mono_ms(), updated = 0;
    while (tm_clock_mono_ms() - t0 < 10000) {
        ck_assert_int_eq(tm_status_read(dir, "c", &r, err, sizeof err), 0);
        updated = r.snap.updated_ms;
        if (updated != 1764680042000)
            break;
        tm_status_report_free(&r);
        struct timespec ts = {0, 20000000L};
        nanosleep(&ts, NULL);
    }
    ck_assert_msg(updated > 1764680042000,
                  "the pulse did not rewrite the snapshot in 10 s");
    ck_assert_int_ge(updated, tm_clock_wall_ms() - 5000);
    ck_assert_str_eq(r.snap.waiting_on, "the sink's commit of batch b-1");
    ck_assert_int_eq(r.snap.waiting_until_ms, 1764680103000);
    ck_assert_uint_eq(r.snap.totals.batches, 42);
    ck_assert_uint_eq(r.snap.npartitions, 2);
    ck_assert_int_eq(r.snap.partitions[0].next_offset, 120);
    tm_status_report_free(&r);
    /* The wait over: the next write has none. */
    tm_status_pulse_waiting(p, NULL, 0, 0);
    ck_assert_int_eq(tm_status_pulse_write(p, &s, err, sizeof err), 0);
    ck_assert_int_eq(tm_status_read(dir, "c", &r, err, sizeof err), 0);
    ck_assert_str_eq(r.snap.waiting_on, "");
    ck_assert_int_eq(r.snap.waiting_since_ms, 0);
    ck_assert_int_eq(r.snap.waiting_until_ms, 0);
    tm_status_report_free(&r);
    tm_status_pulse_stop(p);
    tm_status_writer_close(w);
    remove_dir();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("status_file");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, round_trip);
    tcase_add_test(tc, never_partial);
    tcase_add_test(tc, second_writer_refused);
    tcase_add_test(tc, live_then_killed);
    tcase_add_test(tc, missing_and_malformed);
    tcase_add_test(tc, lock_without_file_is_starting);
    tcase_add_test(tc, list_sorted);
    tcase_add_test(tc, list_skips_other_entries);
    tcase_add_test(tc, default_dir_rules);
    tcase_add_test(tc, writer_creates_parents);
    tcase_add_test(tc, cut_secret_in_last_error_redacted);
    tcase_add_test(tc, planted_lock_symlink_refused);
    tcase_add_test(tc, planted_tmp_symlink_refused);
    tcase_add_test(tc, writable_state_dir_refused);
    tcase_add_test(tc, foreign_state_dir_refused);
    tcase_add_test(tc, new_state_dir_private);
    tcase_add_test(tc, reader_refuses_symlinked_status);
    tcase_add_test(tc, pulse_rewrites_while_nothing_is_published);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
