/* The marker's lineage: the record hash, which record of a batch a range
 * keeps, how marker_advance carries it (and never into a marker of ABI 1.0
 * size), and the comparison at claim. */
#include <check.h>
#include <stdatomic.h>
#include <time.h>
#include <string.h>

#include "check_main.h"
#include "commit/lineage.h"
#include "commit/marker_check.h"
#include "config/connector_config.h"
#include "kafka/partition_reader.h"

static tm_marker marker_with(int64_t off, int64_t ts, const char *key,
                             const char *value) {
    tm_marker m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    m.topic = "t";
    m.last_offset = off;
    m.last_timestamp_ms = ts;
    tm_lineage_hash(key, key ? strlen(key) : 0, value,
                    value ? strlen(value) : 0, m.last_record_hash);
    return m;
}

static tm_lineage_seen seen(int64_t off, int64_t ts, const char *key,
                            const char *value) {
    tm_lineage_seen s = {
        off, ts, key, key ? strlen(key) : 0, value, value ? strlen(value) : 0};
    return s;
}

START_TEST(hash_tells_null_empty_and_swapped_apart) {
    char a[TM_RECORD_HASH_MAX], b[TM_RECORD_HASH_MAX], c[TM_RECORD_HASH_MAX],
        d[TM_RECORD_HASH_MAX], e[TM_RECORD_HASH_MAX];
    tm_lineage_hash(NULL, 0, "v", 1, a);
    tm_lineage_hash("", 0, "v", 1, b);
    tm_lineage_hash("v", 1, NULL, 0, c);
    tm_lineage_hash("ab", 2, "c", 1, d);
    tm_lineage_hash("a", 1, "bc", 2, e);
    ck_assert_uint_eq(strlen(a), TM_RECORD_HASH_MAX - 1);
    ck_assert_str_ne(a, b);
    ck_assert_str_ne(a, c);
    ck_assert_str_ne(d, e); /* the lengths are framed */
    tm_lineage_hash(NULL, 0, "v", 1, b);
    ck_assert_str_eq(a, b); /* and it is a function of its input */
}
END_TEST

START_TEST(compare_same_other_unchecked) {
    tm_marker m = marker_with(199, 1000, "k", "v1");
    char why[512];
    tm_lineage_seen s = seen(199, 1000, "k", "v1");
    ck_assert_int_eq(tm_lineage_compare(&m, &s, why, sizeof why),
                     TM_LINEAGE_SAME);
    s = seen(199, 1000, "k", "v2"); /* another value */
    ck_assert_int_eq(tm_lineage_compare(&m, &s, why, sizeof why),
                     TM_LINEAGE_OTHER);
    ck_assert_ptr_nonnull(strstr(why, "offset 199"));
    s = seen(199, 1001, "k", "v1"); /* same bytes, another timestamp */
    ck_assert_int_eq(tm_lineage_compare(&m, &s, why, sizeof why),
                     TM_LINEAGE_OTHER);
    s = seen(199, 1000, NULL, "v1"); /* null key, not "k" */
    ck_assert_int_eq(tm_lineage_compare(&m, &s, why, sizeof why),
                     TM_LINEAGE_OTHER);
    s = seen(205, 1000, "k", "v1"); /* compacted away: the next one */
    ck_assert_int_eq(tm_lineage_compare(&m, &s, why, sizeof why),
                     TM_LINEAGE_UNCHECKED);
    ck_assert_int_eq(tm_lineage_compare(&m, NULL, why, sizeof why),
                     TM_LINEAGE_UNCHECKED);
}
END_TEST

START_TEST(compare_none_without_lineage) {
    char why[64];
    tm_lineage_seen s = seen(0, 0, NULL, NULL);
    tm_marker m = marker_with(0, 0, NULL, NULL);
    m.last_record_hash[0] = '\0'; /* a new or reset marker */
    ck_assert_int_eq(tm_lineage_compare(&m, &s, why, sizeof why),
                     TM_LINEAGE_NONE);
    m = marker_with(0, 0, "x", "y");
    m.last_offset = TM_NO_OFFSET;
    ck_assert_int_eq(tm_lineage_compare(&m, &s, why, sizeof why),
                     TM_LINEAGE_NONE);
    m = marker_with(0, 0, NULL, NULL); /* matches s, but ABI 1.0 size */
    m.struct_size = TM_MARKER_SIZE_1_0;
    ck_assert_int_eq(tm_lineage_compare(&m, &s, why, sizeof why),
                     TM_LINEAGE_NONE);
}
END_TEST

/* Two ranges: the first carries records 3 and 5 and a dead letter at 7 (the
 * last delivered), the second none (holes only). */
START_TEST(fill_keeps_the_last_record_of_each_range) {
    tm_range r[2];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 2; i++) {
        r[i].struct_size = sizeof r[i];
        r[i].topic = "t";
        r[i].partition = i;
        r[i].start_offset = 0;
        r[i].end_offset = 10;
    }
    tm_record rec[2];
    memset(rec, 0, sizeof rec);
    for (int i = 0; i < 2; i++) {
        rec[i].struct_size = sizeof rec[i];
        rec[i].offset = 3 + 2 * i;
        rec[i].timestamp_ms = 100 + i;
        rec[i].key = "k";
        rec[i].key_len = 1;
        rec[i].value = "v";
        rec[i].value_len = 1;
    }
    tm_dead_letter dl;
    memset(&dl, 0, sizeof dl);
    dl.struct_size = sizeof dl;
    dl.offset = 7;
    dl.timestamp_ms = 107;
    dl.value = "not json";
    dl.value_len = 8;
    tm_batch b;
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    b.batch_id = "b1";
    b.ranges = r;
    b.nranges = 2;
    b.records = rec;
    b.nrecords = 2;
    b.dead_letters = &dl;
    b.ndead_letters = 1;
    tm_lineage_fill_ranges(r, &b);
    char want[TM_RECORD_HASH_MAX];
    tm_lineage_hash(NULL, 0, "not json", 8, want);
    ck_assert_int_eq(r[0].last_offset, 7);
    ck_assert_int_eq(r[0].last_timestamp_ms, 107);
    ck_assert_str_eq(r[0].last_record_hash, want);
    ck_assert_int_eq(r[1].last_offset, TM_NO_OFFSET);
    ck_assert_str_eq(r[1].last_record_hash, "");

    /* marker_advance: the first range's lineage into the marker; the
     * second leaves the marker's own; an ABI 1.0 marker gets none. */
    tm_marker m0 = marker_with(1, 1, "old", "old"), m1 = m0, m2 = m0;
    tm_marker_advance(&m0, &b, 0, 2, 1, 0);
    ck_assert_int_eq(m0.next_offset, 10);
    ck_assert_int_eq(m0.last_offset, 7);
    ck_assert_str_eq(m0.last_record_hash, want);
    char old[TM_RECORD_HASH_MAX];
    memcpy(old, m1.last_record_hash, sizeof old);
    tm_marker_advance(&m1, &b, 1, 0, 0, 0);
    ck_assert_int_eq(m1.last_offset, 1);
    ck_assert_str_eq(m1.last_record_hash, old);
    m2.struct_size = TM_MARKER_SIZE_1_0;
    tm_marker_advance(&m2, &b, 0, 2, 1, 0);
    ck_assert_int_eq(m2.next_offset, 10);
    ck_assert_int_eq(m2.last_offset, 1);
    ck_assert_str_eq(m2.last_record_hash, old);
}
END_TEST

/* The read-back at claim against a broker that does not answer: bounded
 * by its timeout (-1: the caller retries, nothing FAILED), and given up
 * within half a second of a stop (-2). */
static void never_called(void *user, size_t i, const tm_read_record *m) {
    (void)user;
    (void)i;
    (void)m;
    ck_abort_msg("a record from a broker that is not there");
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

START_TEST(read_back_is_bounded_and_stoppable) {
    static const char *const CFG =
        "{\"name\":\"lineage\",\"kafka\":{\"bootstrap_servers\":"
        "\"127.0.0.1:1\",\"topics\":[\"t\"]},\"sink\":{\"plugin\":"
        "\"sqlite\",\"settings\":{\"path\":\"/tmp/x.db\",\"table\":"
        "\"t\"}},\"mapping\":{\"mode\":\"json\",\"columns\":[{\"name\":"
        "\"id\",\"pointer\":\"/id\",\"type\":\"int\"}]}}";
    tm_connector_config *cfg = tm_config_load_string(CFG, "t.json", NULL);
    ck_assert_ptr_nonnull(cfg);
    tm_read_at want[2] = {{"t", 0, 199}, {"t", 1, 5}};
    char why[512];
    atomic_int stop = 0;
    int64_t t0 = mono_ms();
    int rc = tm_kafka_read_each(cfg, want, 2, 1500, &stop, never_called, NULL,
                                why, sizeof why);
    int64_t took = mono_ms() - t0;
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(took >= 1500 && took < 6000, "took %lld ms", (long long)took);
    ck_assert_msg(strstr(why, "[0]") && strstr(why, "199"), "%s", why);
    atomic_store(&stop, 1);
    t0 = mono_ms();
    rc = tm_kafka_read_each(cfg, want, 2, 60000, &stop, never_called, NULL, why,
                            sizeof why);
    took = mono_ms() - t0;
    ck_assert_int_eq(rc, -2);
    ck_assert_msg(took < 3000, "a stop waited %lld ms", (long long)took);
    tm_config_free(cfg);
}
END_TEST

int main(void) {
    Suite *s = suite_create("lineage");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, hash_tells_null_empty_and_swapped_apart);
    tcase_add_test(tc, compare_same_other_unchecked);
    tcase_add_test(tc, compare_none_without_lineage);
    tcase_add_test(tc, fill_keeps_the_last_record_of_each_range);
    tcase_add_test(tc, read_back_is_bounded_and_stoppable);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
