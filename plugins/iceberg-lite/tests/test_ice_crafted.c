/* The readers on crafted files: footers, headers and lengths that lie.
 * Each must be refused with a clear error, never read past, overflowed or
 * recursed into until the stack runs out. Files are built here with the
 * Thrift writer and by hand, so each lie is exactly the one under test;
 * the file-level ones go through ice_file_rows, the way `tidemark table
 * scan|compact` reach the reader. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "avro_reader.h"
#include "check_main.h"
#include "maint.h"
#include "parquet_reader.h"
#include "pq_codec.h"
#include "thrift_compact.h"
#include "thrift_reader.h"

/* What a crafted Parquet file claims. Columns are required INT64s, one
 * row group, each chunk one PLAIN page of page_values values. */
typedef struct craft {
    int64_t num_rows;     /* the footer's FileMetaData.num_rows */
    int64_t chunk_values; /* each ColumnMetaData.num_values */
    int32_t page_values;  /* each DataPageHeader.num_values (all present) */
    size_t ncols;
    size_t schema_again; /* > 0: a second schema of that many columns
                            after row_groups */
    int groups_again;    /* a second row_groups field after the first */
    int codec;           /* ColumnMetaData.codec; pages compressed with it
                            when pq_codec knows it */
    int64_t usize_lie;   /* added to each page's uncompressed_page_size */
    int truncated;       /* each page's compressed data lacks its last
                            byte (the header says the shorter size) */
} craft;

static void schema_field(tc_writer *t, size_t ncols) {
    tc_field_list(t, 2, TC_STRUCT, ncols + 1);
    tc_struct_begin(t);
    tc_field_string(t, 4, "schema");
    tc_field_i32(t, 5, (int32_t)ncols);
    tc_struct_end(t);
    for (size_t k = 0; k < ncols; k++) {
        char name[32];
        snprintf(name, sizeof name, "c%zu", k);
        tc_struct_begin(t);
        tc_field_i32(t, 1, 2); /* INT64 */
        tc_field_i32(t, 3, 0); /* REQUIRED */
        tc_field_string(t, 4, name);
        tc_field_i32(t, 9, (int32_t)k + 1);
        tc_struct_end(t);
    }
}

static void groups_field(tc_writer *t, const craft *c, const int64_t *offs,
                         int64_t chunk_size) {
    tc_field_list(t, 4, TC_STRUCT, 1);
    tc_struct_begin(t);
    tc_field_list(t, 1, TC_STRUCT, c->ncols);
    for (size_t k = 0; k < c->ncols; k++) {
        tc_struct_begin(t);
        tc_field_i64(t, 2, offs[k]);
        tc_field_struct(t, 3);
        tc_field_i32(t, 1, 2);
        tc_field_i32(t, 4, c->codec);
        tc_field_i64(t, 5, c->chunk_values);
        tc_field_i64(t, 7, chunk_size);
        tc_field_i64(t, 9, offs[k]);
        tc_struct_end(t);
        tc_struct_end(t);
    }
    tc_field_i64(t, 3, c->chunk_values);
    tc_struct_end(t);
}

static void craft_parquet(const craft *c, ib_buf *f) {
    int64_t offs[16];
    int64_t chunk_size = 0;
    ck_assert_uint_le(c->ncols, 16);
    ib_buf_add(f, "PAR1", 4);
    for (size_t k = 0; k < c->ncols; k++) {
        offs[k] = (int64_t)f->len;
        ib_buf raw = {0}, body = {0};
        for (int32_t i = 0; i < c->page_values; i++)
            ib_buf_u64le(&raw, (uint64_t)(k * 1000 + (size_t)i));
        void *zctx = NULL;
        ck_assert_int_eq(pq_compress(pq_codec_known(c->codec)
                                         ? (pq_codec)c->codec
                                         : PQ_CODEC_NONE,
                                     &zctx, raw.p, raw.len, &body),
                         0);
        pq_codec_ctx_free(zctx);
        if (c->truncated && body.len > 0)
            body.len--;
        tc_writer t;
        tc_init(&t, f);
        tc_struct_begin(&t);
        tc_field_i32(&t, 1, 0); /* DATA_PAGE */
        tc_field_i32(&t, 2, (int32_t)((int64_t)raw.len + c->usize_lie));
        tc_field_i32(&t, 3, (int32_t)body.len);
        tc_field_struct(&t, 5);
        tc_field_i32(&t, 1, c->page_values);
        tc_field_i32(&t, 2, 0); /* PLAIN */
        tc_field_i32(&t, 3, 3);
        tc_field_i32(&t, 4, 3);
        tc_struct_end(&t);
        tc_struct_end(&t);
        ib_buf_add(f, body.p, body.len);
        ib_buf_free(&raw);
        ib_buf_free(&body);
        chunk_size = (int64_t)f->len - offs[k];
    }
    size_t footer = f->len;
    tc_writer t;
    tc_init(&t, f);
    tc_struct_begin(&t);
    tc_field_i32(&t, 1, 1);
    schema_field(&t, c->ncols);
    tc_field_i64(&t, 3, c->num_rows);
    groups_field(&t, c, offs, chunk_size);
    if (c->groups_again)
        groups_field(&t, c, offs, chunk_size);
    if (c->schema_again)
        schema_field(&t, c->schema_again);
    tc_struct_end(&t);
    ck_assert_int_eq(t.err, 0);
    ib_buf_u32le(f, (uint32_t)(f->len - footer));
    ib_buf_add(f, "PAR1", 4);
    ck_assert(ib_buf_ok(f));
}

/* Writes the bytes to a file of their own and reads its rows. */
typedef struct rows_seen {
    int64_t rows;
} rows_seen;

static int count_row(void *ctx, const pq_cell *cells, size_t ncols) {
    (void)cells;
    (void)ncols;
    ((rows_seen *)ctx)->rows++;
    return 0;
}

static int file_rows_of(const ib_buf *f, rows_seen *seen, char *why,
                        size_t why_size) {
    char path[] = "/tmp/tm-ice-crafted-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, f->p, f->len), (ssize_t)f->len);
    close(fd);
    why[0] = '\0';
    int rc = ice_file_rows(path, count_row, seen, why, why_size);
    unlink(path);
    return rc;
}

START_TEST(crafted_parquet_sane) {
    /* The crafting itself: an honest file reads back, so the refusals
     * below are refusals of the lie and not of the helper. */
    craft c = {.num_rows = 8, .chunk_values = 8, .page_values = 8, .ncols = 3};
    ib_buf f = {0};
    craft_parquet(&c, &f);
    rows_seen seen = {0};
    char why[512];
    ck_assert_msg(file_rows_of(&f, &seen, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(seen.rows, 8);
    ib_buf_free(&f);
}
END_TEST

START_TEST(file_rows_cells_overflow) {
    /* nrows * ncols wraps to 4 cells: (2^62 + 1) * 4 = 2^64 + 4. */
    int64_t rows = (INT64_C(1) << 62) + 1;
    craft c = {
        .num_rows = rows, .chunk_values = rows, .page_values = 8, .ncols = 4};
    ib_buf f = {0};
    craft_parquet(&c, &f);
    rows_seen seen = {0};
    char why[512];
    ck_assert_int_eq(file_rows_of(&f, &seen, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "rows") != NULL, "%s", why);
    ck_assert_int_eq(seen.rows, 0);
    ib_buf_free(&f);
}
END_TEST

START_TEST(parquet_schema_after_row_groups) {
    /* 2 columns' chunks, then a schema of 6: chunks[] is 2 wide. */
    craft c = {.num_rows = 8,
               .chunk_values = 8,
               .page_values = 8,
               .ncols = 2,
               .schema_again = 6};
    ib_buf f = {0};
    craft_parquet(&c, &f);
    rows_seen seen = {0};
    char why[512];
    ck_assert_int_eq(file_rows_of(&f, &seen, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "schema") != NULL, "%s", why);
    ib_buf_free(&f);
}
END_TEST

START_TEST(parquet_row_groups_twice) {
    craft c = {.num_rows = 8,
               .chunk_values = 8,
               .page_values = 8,
               .ncols = 2,
               .groups_again = 1};
    ib_buf f = {0};
    craft_parquet(&c, &f);
    char why[512];
    pq_reader *r = pq_reader_open(f.p, f.len, why, sizeof why);
    ck_assert_ptr_null(r);
    ck_assert_msg(strstr(why, "row groups") != NULL, "%s", why);
    ib_buf_free(&f);
}
END_TEST

START_TEST(parquet_rows_disagree) {
    /* The footer claims 5 rows, the chunks hold 8 each. */
    craft c = {.num_rows = 5, .chunk_values = 8, .page_values = 8, .ncols = 2};
    ib_buf f = {0};
    craft_parquet(&c, &f);
    char why[512];
    ck_assert_ptr_null(pq_reader_open(f.p, f.len, why, sizeof why));
    ck_assert_msg(strstr(why, "rows") != NULL, "%s", why);
    ib_buf_free(&f);
}
END_TEST

START_TEST(parquet_page_past_its_chunk) {
    /* Rows and chunks agree on 4; the one page holds 8 values. */
    craft c = {.num_rows = 4, .chunk_values = 4, .page_values = 8, .ncols = 2};
    ib_buf f = {0};
    craft_parquet(&c, &f);
    rows_seen seen = {0};
    char why[512];
    ck_assert_int_eq(file_rows_of(&f, &seen, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "more values than its chunk") != NULL, "%s", why);
    ck_assert_int_eq(seen.rows, 0);
    ib_buf_free(&f);
}
END_TEST

/* Compressed pages that lie: each is refused by ice_file_rows with the
 * reason, no row handed out, nothing allocated for a size over the bound
 * (ASan would report a 2 GiB allocation attempt as too big). */
static void refused(const craft *c, const char *want) {
    ib_buf f = {0};
    craft_parquet(c, &f);
    rows_seen seen = {0};
    char why[512];
    ck_assert_int_eq(file_rows_of(&f, &seen, why, sizeof why), -1);
    ck_assert_msg(strstr(why, want) != NULL, "%s", why);
    ck_assert_int_eq(seen.rows, 0);
    ib_buf_free(&f);
}

START_TEST(parquet_compressed_pages_that_lie) {
    static const char DECOMPRESS[] = "does not decompress to its header";
    static const int CODECS[] = {PQ_CODEC_SNAPPY, PQ_CODEC_ZSTD};
    for (size_t k = 0; k < 2; k++) {
        craft c = {.num_rows = 64,
                   .chunk_values = 64,
                   .page_values = 64,
                   .ncols = 2,
                   .codec = CODECS[k]};
        /* the truth reads (the crafting itself is sound) */
        ib_buf f = {0};
        craft_parquet(&c, &f);
        rows_seen seen = {0};
        char why[512];
        ck_assert_msg(file_rows_of(&f, &seen, why, sizeof why) == 0, "%s", why);
        ck_assert_int_eq(seen.rows, 64);
        ib_buf_free(&f);
        c.usize_lie = 1; /* one byte more than the data holds */
        refused(&c, DECOMPRESS);
        c.usize_lie = -8; /* one value fewer */
        refused(&c, DECOMPRESS);
        c.usize_lie = INT32_MAX - 8 * 64; /* 2 GiB: over the bound */
        refused(&c, DECOMPRESS);
        c.usize_lie = 0;
        c.truncated = 1;
        refused(&c, DECOMPRESS);
    }
    /* GZIP (2): a codec this reader does not have. */
    craft g = {.num_rows = 4,
               .chunk_values = 4,
               .page_values = 4,
               .ncols = 1,
               .codec = 2};
    refused(&g, "a compression codec other than zstd, snappy or none");
}
END_TEST

/* A footer of one unknown list-typed field nesting lists DEPTH deep. */
static void nested_lists_footer(ib_buf *f, size_t depth) {
    ib_buf_add(f, "PAR1", 4);
    size_t footer = f->len;
    ck_assert_int_eq(ib_buf_reserve(f, depth + 8), 0);
    ib_buf_byte(f, 0x79); /* field 7, a list */
    for (size_t i = 0; i < depth; i++)
        ib_buf_byte(f, 0x19); /* one element, a list */
    ib_buf_byte(f, 0x05);     /* innermost: no elements of i32 */
    ib_buf_byte(f, 0x00);     /* stop */
    ib_buf_u32le(f, (uint32_t)(f->len - footer));
    ib_buf_add(f, "PAR1", 4);
    ck_assert(ib_buf_ok(f));
}

START_TEST(thrift_skip_nested_lists) {
    ib_buf f = {0};
    nested_lists_footer(&f, 4u << 20); /* far past any stack */
    char why[512];
    ck_assert_ptr_null(pq_reader_open(f.p, f.len, why, sizeof why));
    ck_assert_msg(strstr(why, "footer") != NULL, "%s", why);
    ib_buf_free(&f);

    /* A few levels are still skipped (what the limit must allow). */
    ib_buf g = {0};
    tr_reader t;
    nested_lists_footer(&g, 8);
    tr_init(&t, g.p + 4, g.len - 12);
    tr_struct_begin(&t);
    int16_t id;
    int type;
    ck_assert_int_eq(tr_field(&t, &id, &type), 1);
    ck_assert_int_eq(type, TC_LIST);
    tr_skip(&t, type);
    ck_assert_int_eq(t.err, 0);
    ck_assert_int_eq(tr_field(&t, &id, &type), 0);
    ib_buf_free(&g);
}
END_TEST

/* An Avro header whose map block count is COUNT (zigzag varint), then a
 * byte size, one key/value pair, the end of the map and the sync marker:
 * well formed but for the count. */
static void avro_with_map_count(ib_buf *f, int64_t count) {
    ib_buf_add(f, "Obj\x01", 4);
    ib_buf_zigzag(f, count);
    ib_buf_zigzag(f, 4); /* the block's byte size */
    av_put_string(f, "k");
    av_put_string(f, "v");
    ib_buf_zigzag(f, 0);
    for (int i = 0; i < AV_SYNC_SIZE; i++)
        ib_buf_byte(f, (uint8_t)i);
    ck_assert(ib_buf_ok(f));
}

START_TEST(avro_map_count_int64_min) {
    ib_buf f = {0};
    av_reader r;
    avro_with_map_count(&f, -1); /* a negative count is legal: one pair */
    ck_assert_int_eq(av_read_open(&r, f.p, f.len), 0);
    const uint8_t *v;
    size_t n;
    ck_assert_int_eq(av_read_meta(&r, "k", &v, &n), 0);
    ck_assert_uint_eq(n, 1);
    ib_buf_reset(&f);
    avro_with_map_count(&f, INT64_MIN); /* -count overflows */
    ck_assert_int_eq(av_read_open(&r, f.p, f.len), -1);
    ib_buf_free(&f);
}
END_TEST

/* A manifest list entry read from disk (crafted or corrupt) that counts
 * INT64_MAX rows: the next commit's totals overflowed (signed overflow,
 * UBSan); now refused with the reason, nothing written. */
START_TEST(manifest_totals_overflow) {
    char dir[] = "/tmp/tm-ice-totals-XXXXXX", why[512], list[4200];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ice_table t;
    ck_assert_int_eq(ice_table_init(&t, dir, 1, 0, why, sizeof why), 0);
    ice_mfile keep[1] = {{.path = "file:///x/m.avro",
                          .added_rows = INT64_MAX,
                          .existing_rows = 1,
                          .added_files = 1}};
    ice_own own = {0};
    int64_t tf = 0, tr = 0;
    int rc =
        ice_write_snapshot_manifests(&t, keep, 1, NULL, 0, 7, -1, 1, "{}", &own,
                                     list, &tf, &tr, why, sizeof why);
    ck_assert_msg(rc == -1, "rc %d, total_rows %lld", rc, (long long)tr);
    ck_assert_msg(strstr(why, "corrupt") != NULL, "why: %s", why);
    keep[0].added_rows = -5; /* a negative count is no count either */
    rc = ice_write_snapshot_manifests(&t, keep, 1, NULL, 0, 7, -1, 1, "{}",
                                      &own, list, &tf, &tr, why, sizeof why);
    ck_assert_int_eq(rc, -1);
    ice_own_drop(&own);
    ice_own_free(&own);
    ice_table_free(&t);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("iceberg_lite_crafted");
    TCase *tc = tcase_create("crafted");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, crafted_parquet_sane);
    tcase_add_test(tc, file_rows_cells_overflow);
    tcase_add_test(tc, parquet_schema_after_row_groups);
    tcase_add_test(tc, parquet_row_groups_twice);
    tcase_add_test(tc, parquet_rows_disagree);
    tcase_add_test(tc, parquet_page_past_its_chunk);
    tcase_add_test(tc, parquet_compressed_pages_that_lie);
    tcase_add_test(tc, thrift_skip_nested_lists);
    tcase_add_test(tc, avro_map_count_int64_min);
    tcase_add_test(tc, manifest_totals_overflow);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
