/* The lineage a batch hands the sink costs one record hash per range, not
 * one per record: tm_lineage_fill_ranges runs on the connector's thread
 * for every batch, and a SHA-256 of each record was a third of that
 * thread's time end to end. tm_sha256_init is wrapped at link time to
 * count the hashes made. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "commit/lineage.h"
#include "convert/sha256.h"

#include "check_main.h"

static int hashes;

void __real_tm_sha256_init(tm_sha256 *h);
void __wrap_tm_sha256_init(tm_sha256 *h);
void __wrap_tm_sha256_init(tm_sha256 *h) {
    hashes++;
    __real_tm_sha256_init(h);
}

START_TEST(one_hash_per_range) {
    enum { NREC = 1000 };
    static tm_record recs[NREC];
    static char values[NREC][16];
    tm_range r[2] = {{.struct_size = sizeof(tm_range),
                      .topic = "t",
                      .partition = 0,
                      .end_offset = NREC},
                     {.struct_size = sizeof(tm_range),
                      .topic = "t",
                      .partition = 1,
                      .end_offset = NREC}};
    for (int i = 0; i < NREC; i++) {
        memset(&recs[i], 0, sizeof recs[i]);
        recs[i].struct_size = sizeof recs[i];
        recs[i].range = (uint32_t)(i % 2);
        recs[i].offset = i / 2;
        recs[i].timestamp_ms = 1000 + i;
        snprintf(values[i], sizeof values[i], "{\"i\":%d}", i);
        recs[i].value = values[i];
        recs[i].value_len = strlen(values[i]);
    }
    tm_batch b;
    memset(&b, 0, sizeof b);
    b.struct_size = sizeof b;
    b.ranges = r;
    b.nranges = 2;
    b.records = recs;
    b.nrecords = NREC;
    hashes = 0;
    tm_lineage_fill_ranges(r, &b);
    ck_assert_msg(hashes == 2, "%d record hashes for a batch of 2 ranges",
                  hashes);
    /* Each range keeps its last record, hashed as before. */
    for (int k = 0; k < 2; k++) {
        int last = NREC - 2 + k;
        char want[TM_RECORD_HASH_MAX];
        tm_lineage_hash(NULL, 0, values[last], strlen(values[last]), want);
        ck_assert_int_eq(r[k].last_offset, last / 2);
        ck_assert_int_eq(r[k].last_timestamp_ms, 1000 + last);
        ck_assert_str_eq(r[k].last_record_hash, want);
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("lineage_cost");
    TCase *tc = tcase_create("cost");
    tcase_add_test(tc, one_hash_per_range);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 0);
}
