/* The business keys held in memory (plugins/postgres/keyset.c) under an
 * allocator that hands a freed block back for the next request it fits,
 * as any allocator may. A commit decides its new keys from the set and
 * notes where each key's lookup ended, to put it there after COMMIT when
 * the set was not rebuilt meanwhile. Between the decisions and COMMIT the
 * set may be rebuilt twice (another host's batch row loaded under the
 * connector's lock, then the room for the commit's own keys): the second
 * table can then sit at the address of the first, and the set's address
 * alone cannot tell. Here it does sit there, for certain: this program's
 * calloc and free (exported to the plugin, ENABLE_EXPORTS) keep the big
 * blocks a set's table is made of and hand the last one freed back to the
 * next big calloc. The keys must still be found: a resend of them is a
 * duplicate, never a second row. */
#include <check.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "pg_test_common.h"
#include "config/settings.h"
#include "services/host_services.h"

/* glibc's allocator under the names it exports for interposers */
extern void *__libc_calloc(size_t n, size_t size);
extern void __libc_free(void *p);

#define BIG   ((size_t)16 << 10) /* a set's table: 1024 slots and up */
#define BLOCK ((size_t)64 << 20) /* what such a calloc really gets */
#define NMINE 64

static int armed;
static void *mine[NMINE], *kept[NMINE];
static size_t nmine, nkept;
static int reused; /* big callocs given a block freed before */

void *calloc(size_t n, size_t size) {
    if (!armed || (size && n > SIZE_MAX / size) || n * size < BIG ||
        n * size > BLOCK)
        return __libc_calloc(n, size);
    if (nkept > 0) {
        void *p = kept[--nkept];
        memset(p, 0, n * size);
        reused++;
        return p;
    }
    if (nmine == NMINE)
        return __libc_calloc(n, size);
    void *p = __libc_calloc(1, BLOCK); /* untouched pages cost nothing */
    if (p)
        mine[nmine++] = p;
    return p;
}

void free(void *p) {
    for (size_t i = 0; p && i < nmine; i++)
        if (mine[i] == p) {
            if (armed) {
                kept[nkept++] = p;
                return;
            }
            mine[i] = mine[--nmine];
            break;
        }
    __libc_free(p);
}

static const tm_sink_api *api;
static char schema[64], connector[64];
static PGconn *admin;

static const tm_column COLS[] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 1},
    {sizeof(tm_column), "body", TM_TYPE_TEXT, 0, 0},
};

static void drop_schema(void) {
    char q[256];
    snprintf(q, sizeof q, "DROP SCHEMA IF EXISTS \"%s\" CASCADE", schema);
    PQclear(PQexec(admin, q));
}

static void setup(void) {
    api = pgt_plugin(TM_POSTGRES_PLUGIN);
    snprintf(schema, sizeof schema, "pgkeyalloc_%d", (int)getpid());
    snprintf(connector, sizeof connector, "pgkeyalloc_%d", (int)getpid());
    admin = pgt_connect(pgt_conninfo());
    drop_schema(); /* a failed test skips its teardown */
}

static void teardown(void) {
    drop_schema();
    PQfinish(admin);
    admin = NULL;
}

static long long sql_int(const char *fmt) {
    char v[256];
    pgt_sql_text(admin, schema, fmt, v, sizeof v);
    return atoll(v);
}

/* N records of partition P from offset START, keys PREFIX-0 on. */
typedef struct keys_batch {
    tm_batch b;
    tm_range range;
    tm_record *rec;
    tm_value (*val)[2];
    char (*ident)[32];
    char id[32];
} keys_batch;

static void keys_batch_make(keys_batch *k, int32_t p, int64_t start,
                            int64_t epoch, const char *prefix, int n) {
    free(k->rec);
    free(k->val);
    free(k->ident);
    memset(k, 0, sizeof *k);
    /* malloc: the test's own blocks stay out of calloc's reuse */
    k->rec = malloc((size_t)n * sizeof *k->rec);
    k->val = malloc((size_t)n * sizeof *k->val);
    k->ident = malloc((size_t)n * sizeof *k->ident);
    ck_assert(k->rec && k->val && k->ident);
    snprintf(k->id, sizeof k->id, "%s@%lld", prefix, (long long)start);
    k->range = (tm_range){.struct_size = sizeof(tm_range),
                          .topic = "t",
                          .partition = p,
                          .start_offset = start,
                          .end_offset = start + n,
                          .epoch = epoch};
    for (int i = 0; i < n; i++) {
        snprintf(k->ident[i], sizeof k->ident[i], "%s-%d", prefix, i);
        k->val[i][0] = (tm_value){.struct_size = sizeof(tm_value), .v.i = i};
        k->val[i][1] = (tm_value){.struct_size = sizeof(tm_value)};
        k->val[i][1].v.s.ptr = "ok";
        k->val[i][1].v.s.len = 2;
        k->rec[i] = (tm_record){.struct_size = sizeof(tm_record),
                                .offset = start + i,
                                .timestamp_ms = 1000,
                                .value = "{}",
                                .value_len = 2,
                                .values = k->val[i],
                                .identity = k->ident[i],
                                .identity_hash = "h"};
    }
    k->b = (tm_batch){.struct_size = sizeof(tm_batch),
                      .connector = connector,
                      .batch_id = k->id,
                      .ranges = &k->range,
                      .nranges = 1,
                      .records = k->rec,
                      .nrecords = (size_t)n};
}

static void commit_ok(void *sink, keys_batch *k, const char *what) {
    tm_error err = {sizeof err, ""};
    tm_status rc = api->commit(sink, &k->b, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s: %s", what, tm_status_name(rc),
                  err.message);
}

static void *open_sink(tm_settings **settings, tm_sink_config *config) {
    json_t *obj = json_pack("{s:s, s:s, s:s}", "conninfo", pgt_conninfo(),
                            "schema", schema, "table", "t");
    ck_assert_ptr_nonnull(obj);
    *settings = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    ck_assert_ptr_nonnull(*settings);
    *config = (tm_sink_config){.struct_size = sizeof(tm_sink_config),
                               .connector = connector,
                               .settings = *settings,
                               .columns = COLS,
                               .ncolumns = 2,
                               .flags = TM_CONFIG_DEDUP};
    return pgt_open(api, tm_host_services(), config);
}

/* Host A holds 700 keys (a table of 1024 slots), host B stores 100 more;
 * A's next batch of 800 new keys is decided in that table, loads B's row
 * under the lock (the set rebuilt at 2048 slots, the first table freed)
 * and after COMMIT makes room for its keys (4096 slots: the first table's
 * block again). */
START_TEST(keys_found_after_the_set_is_rebuilt_twice_in_a_commit) {
    tm_settings *settings[2];
    tm_sink_config config[2];
    armed = 1;
    void *a = open_sink(&settings[0], &config[0]);
    void *b = open_sink(&settings[1], &config[1]);
    int64_t ea = pgt_claim_p(api, a, 0).epoch;
    static keys_batch k;
    keys_batch_make(&k, 0, 0, ea, "first", 700);
    commit_ok(a, &k, "A's first batch");
    int64_t eb = pgt_claim_p(api, b, 1).epoch;
    keys_batch_make(&k, 1, 0, eb, "other", 100);
    commit_ok(b, &k, "B's batch");
    int before = reused;
    keys_batch_make(&k, 0, 700, ea, "new", 800);
    commit_ok(a, &k, "A's batch of new keys");
    ck_assert_msg(reused >= before + 2,
                  "inconclusive: %d blocks handed back in A's commit, want "
                  "2 (the set rebuilt twice)",
                  reused - before);
    armed = 0;
    keys_batch_make(&k, 0, 1500, ea, "new", 800); /* resent */
    commit_ok(a, &k, "A's resend");
    char v[256];
    pgt_sql_text(admin, schema,
                 "SELECT (SELECT count(*) FROM $S.t) || ' rows, ' || (SELECT "
                 "duplicates FROM $S.tidemark_markers WHERE \"partition\" = "
                 "0) || ' duplicates'",
                 v, sizeof v);
    ck_assert_str_eq(v, "1600 rows, 800 duplicates");
    ck_assert_int_eq(sql_int("SELECT count(*) FROM $S.tidemark_key_batches"),
                     3);
    api->close(a);
    api->close(b);
    tm_settings_free(settings[0]);
    tm_settings_free(settings[1]);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("postgres_keyset_alloc");
    TCase *tc = tcase_create("alloc");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, keys_found_after_the_set_is_rebuilt_twice_in_a_commit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
