/* The SDK's helpers for stores without transactions (tidemark/store.h):
 * the marker file round-trips, refuses a damaged or torn file, survives a
 * crash between its write and its rename; the journal cuts a torn tail and
 * refuses one shorter than committed; claim and the sorted emit. Each test
 * works in its own fresh directory. */
#define _DEFAULT_SOURCE /* mkdtemp */

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <tidemark/store.h>
#include <unistd.h>

#include "../unit/check_main.h"
#include "services/host_services.h"

static char dir[256], path[320], jpath[320];
static const tm_host_api *host;

static void setup(void) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tm-store-test-XXXXXX",
             base && *base ? base : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/c.markers", dir);
    snprintf(jpath, sizeof jpath, "%s/c.csv", dir);
    host = tm_host_services();
}

static void teardown(void) {
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp);
    unlink(path);
    unlink(jpath);
    rmdir(dir);
}

/* A set of two claimed markers, one with lineage and odd characters. */
static void sample(tms_markers *ms, uint64_t committed) {
    tm_marker want[2];
    tm_error err;
    memset(ms, 0, sizeof *ms);
    memset(want, 0, sizeof want);
    const char *topics[2] = {"orders", "odd topic%-"};
    for (int i = 0; i < 2; i++) {
        want[i].struct_size = sizeof want[i];
        want[i].topic = topics[i];
        want[i].partition = i;
        want[i].next_offset = 5 * i;
    }
    ck_assert_int_eq(tms_claim(host, ms, want, 2, 0, &err), TM_OK);
    tm_marker *m = tms_find(ms, "odd topic%-", 1);
    ck_assert_ptr_nonnull(m);
    snprintf(m->last_batch_id, sizeof m->last_batch_id, "b 1");
    snprintf(m->last_record_hash, sizeof m->last_record_hash, "abc");
    m->last_offset = 4;
    m->last_timestamp_ms = 1700;
    m->rows = 3;
    ms->committed = committed;
}

static void write_file(const char *p, const char *text, size_t len) {
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(marker_file_round_trips) {
    tms_markers a, b;
    tm_error err;
    sample(&a, 123);
    ck_assert_int_eq(tms_save(host, path, &a, 0, &err), TM_OK);
    ck_assert_int_eq(tms_load(host, path, &b, &err), TM_OK);
    ck_assert_uint_eq(b.n, 2);
    ck_assert_uint_eq(b.committed, 123);
    tm_marker *m = tms_find(&b, "odd topic%-", 1);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(m->topic, "odd topic%-");
    ck_assert_str_eq(m->last_batch_id, "b 1");
    ck_assert_str_eq(m->last_record_hash, "abc");
    ck_assert_int_eq(m->next_offset, 5);
    ck_assert_int_eq(m->epoch, 1);
    ck_assert_int_eq(m->last_offset, 4);
    ck_assert_int_eq(m->last_timestamp_ms, 1700);
    ck_assert_uint_eq(m->rows, 3);
    m = tms_find(&b, "orders", 0);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(m->last_batch_id, "");
    ck_assert_int_eq(m->last_offset, TM_NO_OFFSET);
    tms_markers_free(&a);
    tms_markers_free(&b);
}
END_TEST

START_TEST(missing_marker_file_is_empty) {
    tms_markers ms;
    tm_error err;
    ck_assert_int_eq(tms_load(host, path, &ms, &err), TM_OK);
    ck_assert_uint_eq(ms.n, 0);
    ck_assert_uint_eq(ms.committed, 0);
}
END_TEST

START_TEST(checksum_mismatch_is_refused) {
    tms_markers a, b;
    tm_error err;
    char *buf;
    size_t len;
    sample(&a, 7);
    ck_assert_int_eq(tms_encode(&a, &buf, &len), 0);
    char *digit = strstr(buf, "\nm orders 0 0 1 ");
    ck_assert_ptr_nonnull(digit);
    digit[12] = '9'; /* next_offset 0 -> 9: still a well-formed line */
    write_file(path, buf, len);
    ck_assert_int_eq(tms_load(host, path, &b, &err), TM_FATAL);
    ck_assert_ptr_nonnull(strstr(err.message, "checksum mismatch"));
    ck_assert_ptr_nonnull(strstr(err.message, path));
    free(buf);
    tms_markers_free(&a);
}
END_TEST

START_TEST(torn_marker_file_is_refused) {
    tms_markers a, b;
    tm_error err;
    char *buf;
    size_t len;
    sample(&a, 7);
    ck_assert_int_eq(tms_encode(&a, &buf, &len), 0);
    for (size_t cut = 0; cut < len; cut += 7) { /* every torn length */
        write_file(path, buf, cut);
        ck_assert_int_eq(tms_load(host, path, &b, &err), TM_FATAL);
        ck_assert_ptr_nonnull(strstr(err.message, "damaged"));
    }
    free(buf);
    tms_markers_free(&a);
}
END_TEST

/* The fault hook of the child: dies where the temp file is written and
 * fsynced but not yet renamed. */
static void die_at(const char *point) {
    if (strcmp(point, TM_FAULT_AFTER_MARKER) == 0)
        _exit(42);
}

START_TEST(crash_between_write_and_rename) {
    tms_markers a, b, got;
    tm_error err;
    sample(&a, 10);
    ck_assert_int_eq(tms_save(host, path, &a, 0, &err), TM_OK);
    sample(&b, 99);
    tms_find(&b, "orders", 0)->next_offset = 50;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        tm_host_api h = *host;
        h.fault = die_at;
        tms_save(&h, path, &b, 1, &err);
        _exit(1); /* the hook was not reached */
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 42,
                  "inconclusive: the child did not die at after_marker");
    char tmp[400];
    struct stat st;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ck_assert_int_eq(stat(tmp, &st), 0); /* the unpublished write is there */
    ck_assert_int_eq(tms_load(host, path, &got, &err), TM_OK);
    ck_assert_uint_eq(got.committed, 10); /* ... and not visible */
    ck_assert_int_eq(tms_find(&got, "orders", 0)->next_offset, 0);
    tms_markers_free(&got);
    /* The next save replaces the leftover and publishes. */
    ck_assert_int_eq(tms_save(host, path, &b, 0, &err), TM_OK);
    ck_assert_int_eq(tms_load(host, path, &got, &err), TM_OK);
    ck_assert_uint_eq(got.committed, 99);
    ck_assert_int_eq(tms_find(&got, "orders", 0)->next_offset, 50);
    tms_markers_free(&got);
    tms_markers_free(&a);
    tms_markers_free(&b);
}
END_TEST

START_TEST(journal_torn_tail_is_cut) {
    tms_journal j;
    tm_error err;
    char *text;
    size_t len;
    struct stat st;
    ck_assert_int_eq(tms_journal_open(host, jpath, 0, &j, &err), TM_OK);
    ck_assert_int_eq(tms_journal_append(host, &j, "abc\n", 4, &err), TM_OK);
    ck_assert_int_eq(tms_journal_sync(host, &j, &err), TM_OK);
    tms_journal_close(&j); /* died before the markers said 4 */
    ck_assert_int_eq(tms_journal_read(host, jpath, 0, &text, &len, &err),
                     TM_OK);
    ck_assert_uint_eq(len, 0); /* scan never sees it */
    free(text);
    ck_assert_int_eq(tms_journal_open(host, jpath, 0, &j, &err), TM_OK);
    ck_assert_int_eq(stat(jpath, &st), 0);
    ck_assert_int_eq(st.st_size, 0); /* cut at open */
    ck_assert_int_eq(tms_journal_append(host, &j, "xyz\n", 4, &err), TM_OK);
    ck_assert_uint_eq(j.len, 4);
    tms_journal_close(&j); /* committed: 4 */
    ck_assert_int_eq(tms_journal_open(host, jpath, 4, &j, &err), TM_OK);
    ck_assert_int_eq(tms_journal_append(host, &j, "torn", 4, &err), TM_OK);
    tms_journal_close(&j);
    ck_assert_int_eq(tms_journal_open(host, jpath, 4, &j, &err), TM_OK);
    ck_assert_uint_eq(j.len, 4);
    tms_journal_close(&j);
    ck_assert_int_eq(stat(jpath, &st), 0);
    ck_assert_int_eq(st.st_size, 4);
    ck_assert_int_eq(tms_journal_read(host, jpath, 4, &text, &len, &err),
                     TM_OK);
    ck_assert_str_eq(text, "xyz\n");
    free(text);
}
END_TEST

START_TEST(journal_shorter_than_committed_is_refused) {
    tms_journal j;
    tm_error err;
    char *text;
    size_t len;
    write_file(jpath, "ab", 2);
    ck_assert_int_eq(tms_journal_open(host, jpath, 5, &j, &err), TM_FATAL);
    ck_assert_ptr_nonnull(strstr(err.message, "5 were committed"));
    ck_assert_int_eq(tms_journal_read(host, jpath, 5, &text, &len, &err),
                     TM_FATAL);
    ck_assert_ptr_nonnull(strstr(err.message, "shorter"));
}
END_TEST

START_TEST(claim_raises_epochs_and_reset_clears_lineage) {
    tms_markers ms;
    tm_error err;
    tm_marker want;
    sample(&ms, 0);
    memset(&want, 0, sizeof want);
    want.struct_size = sizeof want;
    want.topic = "odd topic%-";
    want.partition = 1;
    want.next_offset = 99; /* an existing marker keeps its offset */
    ck_assert_int_eq(tms_claim(host, &ms, &want, 1, 0, &err), TM_OK);
    ck_assert_int_eq(want.epoch, 2);
    ck_assert_int_eq(want.next_offset, 5);
    ck_assert_int_eq(want.last_offset, 4);
    ck_assert_int_eq(tms_claim(host, &ms, &want, 1, TM_CLAIM_RESET, &err),
                     TM_OK);
    want.next_offset = 99;
    ck_assert_int_eq(tms_claim(host, &ms, &want, 1, TM_CLAIM_RESET, &err),
                     TM_OK);
    ck_assert_int_eq(want.epoch, 4);
    ck_assert_int_eq(want.next_offset, 99);
    ck_assert_int_eq(want.last_offset, TM_NO_OFFSET);
    ck_assert_str_eq(want.last_record_hash, "");
    tms_markers_free(&ms);
}
END_TEST

static int64_t seen[8];
static size_t nseen;
static int collect(void *ctx, const tm_scan_item *it) {
    (void)ctx;
    seen[nseen++] = it->offset;
    return nseen == 3; /* stop after three */
}

START_TEST(emit_sorted_orders_and_stops) {
    tm_host_api h = *tm_host_services();
    tm_scan_item items[4];
    int64_t offs[4] = {7, 0, 3, 1};
    memset(items, 0, sizeof items);
    for (int i = 0; i < 4; i++)
        items[i].offset = offs[i], items[i].kind = TM_ITEM_ROW;
    h.emit = collect;
    nseen = 0;
    tms_emit_sorted(&h, items, 4, NULL);
    ck_assert_uint_eq(nseen, 3);
    ck_assert_int_eq(seen[0], 0);
    ck_assert_int_eq(seen[1], 1);
    ck_assert_int_eq(seen[2], 3);
}
END_TEST

START_TEST(values_round_trip_exactly) {
    tm_column cols[5];
    tm_value in[5], out[5];
    const tm_type types[5] = {TM_TYPE_INT, TM_TYPE_FLOAT, TM_TYPE_TEXT,
                              TM_TYPE_BYTES, TM_TYPE_TEXT};
    memset(cols, 0, sizeof cols);
    memset(in, 0, sizeof in);
    for (int i = 0; i < 5; i++) {
        cols[i].struct_size = sizeof cols[i];
        cols[i].type = types[i];
        in[i].struct_size = sizeof in[i];
    }
    in[0].v.i = -9007199254740993;
    in[1].v.f = 0.1;
    in[2].v.s.ptr = "a b\nc \"d\"";
    in[2].v.s.len = 10;
    in[3].v.s.ptr = "\0\xff";
    in[3].v.s.len = 2;
    in[4].is_null = 1;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    fputs("r t 0 7", f);
    tms_values_write(f, cols, 5, in);
    fputc('\n', f);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_ptr_eq(strchr(text, '\n'), text + len - 1); /* one line */
    ck_assert_int_eq(tms_values_parse(text + 7, cols, 5, out), 0);
    ck_assert_int_eq(out[0].v.i, -9007199254740993);
    ck_assert(out[1].v.f == 0.1);
    ck_assert_uint_eq(out[2].v.s.len, 10);
    ck_assert_int_eq(memcmp(out[2].v.s.ptr, "a b\nc \"d\"", 10), 0);
    ck_assert_uint_eq(out[3].v.s.len, 2);
    ck_assert_int_eq(memcmp(out[3].v.s.ptr, "\0\xff", 2), 0);
    ck_assert(out[4].is_null && !out[0].is_null);
    free(text);
}
END_TEST

START_TEST(values_refuse_what_they_did_not_write) {
    tm_column col;
    tm_value out[2];
    memset(&col, 0, sizeof col);
    col.struct_size = sizeof col;
    col.type = TM_TYPE_INT;
    const char *bad[] = {"", " ", " 12x", " 1 2", "12", " x12"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char buf[16];
        snprintf(buf, sizeof buf, "%s", bad[i]);
        ck_assert_msg(tms_values_parse(buf, &col, 1, out) == -1, "'%s'",
                      bad[i]);
    }
    col.type = TM_TYPE_TEXT;
    const char *badtext[] = {" 41", " x4", " x4g", " xAB"};
    for (size_t i = 0; i < sizeof badtext / sizeof badtext[0]; i++) {
        char buf[16];
        snprintf(buf, sizeof buf, "%s", badtext[i]);
        ck_assert_msg(tms_values_parse(buf, &col, 1, out) == -1, "'%s'",
                      badtext[i]);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("store");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, marker_file_round_trips);
    tcase_add_test(tc, missing_marker_file_is_empty);
    tcase_add_test(tc, checksum_mismatch_is_refused);
    tcase_add_test(tc, torn_marker_file_is_refused);
    tcase_add_test(tc, crash_between_write_and_rename);
    tcase_add_test(tc, journal_torn_tail_is_cut);
    tcase_add_test(tc, journal_shorter_than_committed_is_refused);
    tcase_add_test(tc, claim_raises_epochs_and_reset_clears_lineage);
    tcase_add_test(tc, emit_sorted_orders_and_stops);
    tcase_add_test(tc, values_round_trip_exactly);
    tcase_add_test(tc, values_refuse_what_they_did_not_write);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
