/* The marker check, table-driven: every combination of epoch (older, equal,
 * newer), start (before, at, after next), end (before, at, after next),
 * empty ranges, absent markers and multi-partition mixes. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "commit/marker_check.h"
#include "check_main.h"

static tm_range range(int32_t p, int64_t start, int64_t end, int64_t epoch) {
    tm_range r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.topic = "t";
    r.partition = p;
    r.start_offset = start;
    r.end_offset = end;
    r.epoch = epoch;
    return r;
}

static tm_marker marker(int32_t p, int64_t next, int64_t epoch) {
    tm_marker m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    m.topic = "t";
    m.partition = p;
    m.next_offset = next;
    m.epoch = epoch;
    return m;
}

static tm_status check1(tm_range r, tm_marker m, tm_error *err) {
    tm_batch b;
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    b.batch_id = "b-1";
    b.ranges = &r;
    b.nranges = 1;
    return tm_marker_check(&b, &m, err);
}

/* One partition, stored marker at next=100 epoch=5. */
typedef struct single_case {
    int64_t epoch, start, end;
    tm_status want;
    const char *want_text; /* a part of the message, or NULL */
} single_case;

static const single_case single_cases[] = {
    /* epoch equal */
    {5, 100, 150, TM_OK, NULL},                 /* start at next */
    {5, 100, 100, TM_OK, NULL},                 /* empty range at next */
    {5, 50, 80, TM_ALREADY, "already applied"}, /* end before next */
    {5, 50, 100, TM_ALREADY, "[50, 100)"},      /* end at next */
    {5, 100 - 0, 100, TM_OK, NULL},             /* start at next, end at next */
    {5, 50, 150, TM_CONFLICT, "overlap"},       /* start before, end after */
    {5, 120, 150, TM_CONFLICT, "gap"},          /* start after next */
    {5, 120, 120, TM_CONFLICT, "gap"},          /* empty range beyond next */
    {5, 80, 80, TM_ALREADY, NULL},              /* empty range behind next */
    /* epoch older / newer: fenced whatever the offsets */
    {4, 100, 150, TM_FENCED, "epoch 4"},
    {4, 50, 80, TM_FENCED, "epoch 5"},
    {4, 120, 150, TM_FENCED, "fenced"},
    {6, 100, 150, TM_FENCED, "epoch 6"},
    {6, 50, 100, TM_FENCED, NULL},
};

START_TEST(single_partition) {
    const single_case *c = &single_cases[_i];
    tm_error err = {sizeof err, ""};
    tm_status got =
        check1(range(3, c->start, c->end, c->epoch), marker(3, 100, 5), &err);
    ck_assert_msg(got == c->want,
                  "case %d (epoch %lld [%lld,%lld)): got %s, want %s (%s)", _i,
                  (long long)c->epoch, (long long)c->start, (long long)c->end,
                  tm_status_name(got), tm_status_name(c->want), err.message);
    if (c->want != TM_OK)
        ck_assert_msg(strstr(err.message, "t[3]") != NULL,
                      "message names the partition: %s", err.message);
    if (c->want_text)
        ck_assert_msg(strstr(err.message, c->want_text) != NULL,
                      "message '%s' lacks '%s'", err.message, c->want_text);
}
END_TEST

START_TEST(absent_marker_is_conflict) {
    tm_error err = {sizeof err, ""};
    tm_status got =
        check1(range(0, 0, 10, 1), marker(0, TM_NO_OFFSET, TM_NO_EPOCH), &err);
    ck_assert_int_eq(got, TM_CONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "no marker"));
}
END_TEST

static tm_status check_n(const tm_range *r, const tm_marker *m, size_t n,
                         tm_error *err) {
    tm_batch b;
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    b.batch_id = "b-2";
    b.ranges = r;
    b.nranges = n;
    return tm_marker_check(&b, m, err);
}

START_TEST(multi_all_apply) {
    tm_range r[3] = {range(0, 10, 20, 2), range(1, 0, 5, 2), range(2, 7, 7, 2)};
    tm_marker m[3] = {marker(0, 10, 2), marker(1, 0, 2), marker(2, 7, 2)};
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(check_n(r, m, 3, &err), TM_OK);
}
END_TEST

START_TEST(multi_all_already) {
    tm_range r[2] = {range(0, 10, 20, 2), range(1, 0, 5, 2)};
    tm_marker m[2] = {marker(0, 20, 2), marker(1, 9, 2)};
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(check_n(r, m, 2, &err), TM_ALREADY);
    ck_assert_ptr_nonnull(strstr(err.message, "b-2"));
}
END_TEST

START_TEST(multi_mixed_apply_already_is_conflict) {
    tm_range r[2] = {range(0, 10, 20, 2), range(1, 0, 5, 2)};
    tm_marker m[2] = {marker(0, 10, 2), marker(1, 5, 2)};
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(check_n(r, m, 2, &err), TM_CONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "partly applied"));
}
END_TEST

START_TEST(multi_one_conflict) {
    tm_range r[3] = {range(0, 10, 20, 2), range(1, 3, 5, 2), range(2, 0, 1, 2)};
    tm_marker m[3] = {marker(0, 10, 2), marker(1, 0, 2), marker(2, 0, 2)};
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(check_n(r, m, 3, &err), TM_CONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "t[1]"));
    ck_assert_ptr_nonnull(strstr(err.message, "gap"));
}
END_TEST

START_TEST(multi_fenced_outranks_conflict) {
    tm_range r[3] = {range(0, 3, 5, 2), range(1, 0, 5, 1), range(2, 0, 1, 2)};
    tm_marker m[3] = {marker(0, 0, 2), marker(1, 0, 2), marker(2, 0, 2)};
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(check_n(r, m, 3, &err), TM_FENCED);
    ck_assert_ptr_nonnull(strstr(err.message, "t[1]"));
}
END_TEST

START_TEST(no_ranges_is_ok) {
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(check_n(NULL, NULL, 0, &err), TM_OK);
}
END_TEST

/* A plugin built against a later minor version hands larger elements: the
 * check walks by struct_size, not by its own sizeof. */
START_TEST(walks_by_struct_size) {
    struct big_range {
        tm_range r;
        char future[40];
    } r[2];
    struct big_marker {
        tm_marker m;
        char future[24];
    } m[2];
    memset(r, 0xAB, sizeof r);
    memset(m, 0xCD, sizeof m);
    for (int i = 0; i < 2; i++) {
        r[i].r = range(i, 10, 20, 3);
        r[i].r.struct_size = sizeof r[0];
        m[i].m = marker(i, 10, 3);
        m[i].m.struct_size = sizeof m[0];
    }
    m[1].m.next_offset = 20;
    tm_batch b;
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    b.batch_id = "b-3";
    b.ranges = &r[0].r;
    b.nranges = 2;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(tm_marker_check(&b, &m[0].m, &err), TM_CONFLICT);
    m[1].m.next_offset = 10;
    ck_assert_int_eq(tm_marker_check(&b, &m[0].m, &err), TM_OK);
}
END_TEST

/* A malformed batch is refused before any marker is looked at, so no sink
 * ever indexes past its arrays. */
START_TEST(malformed_batch_is_invalid) {
    tm_range r[2] = {range(0, 10, 20, 2), range(1, 0, 5, 2)};
    tm_marker m[2] = {marker(0, 10, 2), marker(1, 0, 2)};
    tm_record rec;
    memset(&rec, 0, sizeof rec);
    rec.struct_size = sizeof rec;
    tm_dead_letter dl;
    memset(&dl, 0, sizeof dl);
    dl.struct_size = sizeof dl;
    tm_batch b;
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    b.batch_id = "b-9";
    b.ranges = r;
    b.nranges = 2;
    tm_error err = {sizeof err, ""};

    b.records = &rec;
    b.nrecords = 1;
    rec.range = 1;
    rec.offset = 4;
    ck_assert_int_eq(tm_marker_check(&b, m, &err), TM_OK);
    rec.range = 2; /* no such range */
    ck_assert_int_eq(tm_marker_check(&b, m, &err), TM_INVALID);
    ck_assert_str_eq(err.message,
                     "batch b-9 is malformed: record 0 names range 2 of 2");
    rec.range = 1;
    rec.offset = 5; /* the range is [0, 5) */
    ck_assert_int_eq(tm_marker_check(&b, m, &err), TM_INVALID);
    ck_assert_str_eq(err.message, "batch b-9 is malformed: record 0 at offset "
                                  "5 lies outside its range t[1] [0, 5)");
    rec.offset = 0;
    b.dead_letters = &dl;
    b.ndead_letters = 1;
    dl.range = 0;
    dl.offset = 9; /* the range is [10, 20) */
    ck_assert_int_eq(tm_marker_check(&b, m, &err), TM_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "dead letter 0 at offset 9"));
    dl.offset = 19;
    ck_assert_int_eq(tm_marker_check(&b, m, &err), TM_OK);
}
END_TEST

/* A range that runs backwards would move a marker back (100 -> 40): the
 * records between would be applied twice. Refused whatever the marker. */
START_TEST(backwards_range_is_invalid) {
    tm_error err = {sizeof err, ""};
    /* marker at 100: [100, 40) starts at next and would set it to 40 */
    ck_assert_int_eq(check1(range(3, 100, 40, 5), marker(3, 100, 5), &err),
                     TM_INVALID);
    ck_assert_str_eq(err.message, "batch b-1 is malformed: range 0 t[3] runs "
                                  "backwards: [100, 40)");
    /* behind the marker it would otherwise pass for already applied */
    ck_assert_int_eq(check1(range(3, 60, 50, 5), marker(3, 100, 5), &err),
                     TM_INVALID);
    /* a negative start is no offset at all */
    ck_assert_int_eq(check1(range(3, -1, 5, 5), marker(3, -1, 5), &err),
                     TM_INVALID);
    ck_assert_ptr_nonnull(strstr(err.message, "negative"));
}
END_TEST

/* One partition twice in a batch: a sink would advance its marker twice
 * (or apply the second range's records behind the first). */
START_TEST(partition_twice_is_invalid) {
    tm_range r[3] = {range(0, 10, 20, 2), range(1, 0, 5, 2),
                     range(0, 20, 30, 2)};
    tm_marker m[3] = {marker(0, 10, 2), marker(1, 0, 2), marker(0, 10, 2)};
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(check_n(r, m, 3, &err), TM_INVALID);
    ck_assert_str_eq(err.message, "batch b-2 is malformed: ranges 0 and 2 "
                                  "both name t[0]");
    /* the same partition number of another topic is another partition */
    r[2].topic = "u";
    m[2].topic = "u";
    m[2].next_offset = 20;
    ck_assert_int_eq(check_n(r, m, 3, &err), TM_OK);
}
END_TEST

START_TEST(advance_moves_marker_and_counts) {
    tm_range r[2] = {range(0, 10, 20, 2), range(1, 0, 5, 2)};
    r[1].filtered = 2;
    r[1].duplicates = 1;
    tm_batch b;
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    b.batch_id = "inst-7";
    b.ranges = r;
    b.nranges = 2;
    tm_marker m = marker(1, 0, 2);
    m.rows = 100;
    tm_marker_advance(&m, &b, 1, 1, 1, 0);
    ck_assert_int_eq(m.next_offset, 5);
    ck_assert_int_eq(m.epoch, 2);
    ck_assert_str_eq(m.last_batch_id, "inst-7");
    ck_assert_uint_eq(m.rows, 101);
    ck_assert_uint_eq(m.dead_letters, 1);
    ck_assert_uint_eq(m.filtered, 2);
    ck_assert_uint_eq(m.duplicates, 1);
}
END_TEST

int main(void) {
    Suite *s = suite_create("marker_check");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, single_partition, 0,
                        (int)(sizeof single_cases / sizeof single_cases[0]));
    tcase_add_test(tc, absent_marker_is_conflict);
    tcase_add_test(tc, multi_all_apply);
    tcase_add_test(tc, multi_all_already);
    tcase_add_test(tc, multi_mixed_apply_already_is_conflict);
    tcase_add_test(tc, multi_one_conflict);
    tcase_add_test(tc, multi_fenced_outranks_conflict);
    tcase_add_test(tc, no_ranges_is_ok);
    tcase_add_test(tc, walks_by_struct_size);
    tcase_add_test(tc, malformed_batch_is_invalid);
    tcase_add_test(tc, backwards_range_is_invalid);
    tcase_add_test(tc, partition_twice_is_invalid);
    tcase_add_test(tc, advance_moves_marker_and_counts);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
