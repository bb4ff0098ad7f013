/* The business keys' two paths against each other: the set statement
 * (keys.c, pg_keys_decide: one prepared statement per batch) and the
 * one-record-at-a-time path (pg_key_one) it falls back to. The same
 * batches go to two sinks, each in a schema of its own; in the second, a
 * trigger on the keys table refuses one identity of every batch, which
 * fails the set statement and sends the whole batch down the per-record
 * path. Batches of hundreds of records from a seeded generator: in-batch
 * repeats, keys resent across batches, identity conflicts, null payload
 * hashes, identities that need quoting, rows the table refuses (their
 * keys forgotten), keys expired by the retention, batches of new keys
 * alone (the even ones: the set's COPY of every key without a probe)
 * between batches that resend, and more batches than PostgreSQL plans a
 * prepared statement for before it may keep a generic plan. Both schemas must
 * then hold the same rows, dead letters, keys and markers, offset for offset.
 *
 * Then the business keys held in memory ("dedup_keys": "memory", keyset.c)
 * against the per-key rows ("rows") on the same batches: the first schema
 * in memory, written by two sink instances of one connector (two hosts:
 * partition 0 and partition 1, each its own session and set), the second
 * by one sink in rows; with and without a retention (keys expired: whole
 * batches in memory, the same keys row by row). A commit in memory that
 * fails after its keys were written (a trigger on tidemark_keysets, 40001)
 * is rolled back and sent again: the set must be as it was. After every
 * batch both schemas must hold the same rows, dead letters (partition,
 * offset, reason) and markers.
 */
#include <check.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "pg_test_common.h"
#include "config/settings.h"
#include "services/host_services.h"

#define NBATCHES  9
#define BATCH     400
#define NKEYS     300
#define EXPIRE_AT 5 /* before this batch, the keys k1* expire */

static const tm_sink_api *api;
static char schema[2][64], connector[64];
static PGconn *admin;

static const tm_column COLS[] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 1},
    {sizeof(tm_column), "body", TM_TYPE_TEXT, 0, 0},
};

static void setup(void) {
    api = pgt_plugin(TM_POSTGRES_PLUGIN);
    snprintf(schema[0], sizeof schema[0], "pgkeys_%d_set", (int)getpid());
    snprintf(schema[1], sizeof schema[1], "pgkeys_%d_each", (int)getpid());
    snprintf(connector, sizeof connector, "pgkeys_%d", (int)getpid());
    admin = pgt_connect(pgt_conninfo());
    /* a failed test skips its teardown: a later process with its pid
     * would find its schemas */
    char q[256];
    for (int i = 0; i < 2; i++) {
        snprintf(q, sizeof q, "DROP SCHEMA IF EXISTS \"%s\" CASCADE",
                 schema[i]);
        PQclear(pgt_sql(admin, q));
    }
}

static void teardown(void) {
    char q[256];
    for (int i = 0; i < 2; i++) {
        snprintf(q, sizeof q, "DROP SCHEMA IF EXISTS \"%s\" CASCADE",
                 schema[i]);
        PQclear(PQexec(admin, q));
    }
    PQfinish(admin);
    admin = NULL;
}

/* SQL with "$A" and "$B" the two schemas (quoted), as one text value. */
static void sql2(const char *fmt, char *out, size_t size) {
    char text[8192], *at;
    snprintf(text, sizeof text, "%s", fmt);
    while ((at = strstr(text, "$A")) || (at = strstr(text, "$B"))) {
        char rest[8192];
        snprintf(rest, sizeof rest, "%s", at + 2);
        snprintf(at, sizeof text - (size_t)(at - text), "\"%s\"%s",
                 schema[at[1] == 'B'], rest);
    }
    PGresult *r = pgt_sql(admin, text);
    ck_assert_msg(PQntuples(r) == 1, "%s: %d rows", text, PQntuples(r));
    snprintf(out, size, "%s",
             PQgetisnull(r, 0, 0) ? "(null)" : PQgetvalue(r, 0, 0));
    PQclear(r);
}

static long long sql2_int(const char *fmt) {
    char v[64];
    sql2(fmt, v, sizeof v);
    return atoll(v);
}

/* What each sink logged of its keys' paths (host_ctx). */
typedef struct paths {
    int refusals; /* the set failed: one record at a time */
    int probes;   /* the COPY of every key met a key stored: the probe */
    int again;    /* in memory: decided again, the connector's row locked */
    int loads;    /* in memory: the connector's keys loaded whole */
} paths;

static void counting_log(void *ctx, tm_log_level level, const char *fmt, ...) {
    paths *p = ctx;
    if (level == TM_LOG_WARN && strstr(fmt, "set of business keys failed"))
        p->refusals++;
    if (level == TM_LOG_DEBUG && strstr(fmt, "was stored before; probing"))
        p->probes++;
    if (level == TM_LOG_DEBUG && strcmp(fmt, "%s") == 0) {
        va_list ap;
        va_start(ap, fmt);
        const char *m = va_arg(ap, const char *);
        va_end(ap);
        if (strstr(m, "deciding again"))
            p->again++;
        if (strstr(m, "business keys whole"))
            p->loads++;
    }
}

static unsigned lcg(unsigned *x) {
    *x = *x * 1103515245u + 12345u;
    return (*x >> 16) & 0x7fff;
}

typedef struct gen_batch {
    tm_batch b;
    tm_range range;
    tm_record rec[BATCH];
    tm_value val[BATCH][2];
    char ident[BATCH][48], hash[BATCH][24], id[32];
} gen_batch;

/* Batch K of the sequence, of partition P from offset START, its records
 * stamped TS. */
static void gen(gen_batch *g, int k, int32_t p, int64_t start, int64_t epoch,
                int64_t ts, unsigned *seed) {
    memset(g, 0, sizeof *g);
    snprintf(g->id, sizeof g->id, "keys-%d", k);
    g->range = (tm_range){.struct_size = sizeof(tm_range),
                          .topic = "t",
                          .partition = p,
                          .start_offset = start,
                          .end_offset = start + BATCH,
                          .epoch = epoch};
    for (int i = 0; i < BATCH; i++) {
        unsigned key = lcg(seed) % NKEYS, roll = lcg(seed) % 100;
        const char *body = lcg(seed) % 100 < 3 ? "bad" : "ok";
        const char *ident = g->ident[i], *hash = g->hash[i];
        /* identities that need quoting in an array literal, not ASCII,
         * or that read as NULL there */
        const char *form = key % 7 == 0    ? "q\"\\{,} %u"
                           : key % 11 == 0 ? "ключ%u"
                           : key % 13 == 0 ? "NULL%u"
                                           : "k%u";
        snprintf(g->ident[i], sizeof g->ident[i], form, key);
        if (k % 2 == 0) /* keys of this batch alone: none stored before */
            snprintf(g->ident[i] + strlen(g->ident[i]),
                     sizeof g->ident[i] - strlen(g->ident[i]), "/b%d", k);
        if (i == 17 || i == 211) {
            /* refused by the second schema's trigger, and by the table in
             * both (body "bad"): a dead letter "rejected" either way */
            snprintf(g->ident[i], sizeof g->ident[i], "poison-%d-%d", k, i);
            body = "bad";
        } else if (roll < 4) {
            ident = hash = NULL; /* not keyed */
        } else if (key % 17 == 0) {
            hash = NULL; /* a key without a payload hash */
        }
        if (hash)
            /* mostly the key's own hash; now and then another: a conflict */
            snprintf(g->hash[i], sizeof g->hash[i], "%s%u",
                     roll < 12 ? "x" : "h", key);
        g->val[i][0] = (tm_value){.struct_size = sizeof(tm_value)};
        g->val[i][0].v.i = (int64_t)key;
        g->val[i][1] = (tm_value){.struct_size = sizeof(tm_value)};
        g->val[i][1].v.s.ptr = body;
        g->val[i][1].v.s.len = strlen(body);
        g->rec[i] = (tm_record){.struct_size = sizeof(tm_record),
                                .offset = start + i,
                                .timestamp_ms = ts,
                                .value = "{}",
                                .value_len = 2,
                                .values = g->val[i],
                                .identity = ident,
                                .identity_hash = hash};
    }
    g->b = (tm_batch){.struct_size = sizeof(tm_batch),
                      .connector = connector,
                      .batch_id = g->id,
                      .ranges = &g->range,
                      .nranges = 1,
                      .records = g->rec,
                      .nrecords = BATCH};
}

/* Rows of QUERY (one select on "$S") in one schema and not the other,
 * either way: 0 when both schemas agree. */
static void same_in_both(const char *what, const char *query, int batch) {
    char q[8192], a[1024], b[1024], v[512];
    snprintf(a, sizeof a, "%s", query);
    snprintf(b, sizeof b, "%s", query);
    char *at;
    while ((at = strstr(a, "$S")))
        at[1] = 'A';
    while ((at = strstr(b, "$S")))
        at[1] = 'B';
    snprintf(q, sizeof q,
             "SELECT count(*) || ' ' || coalesce(min(d::text), '') FROM "
             "((%s EXCEPT ALL %s) UNION ALL (%s EXCEPT ALL %s)) d",
             a, b, b, a);
    sql2(q, v, sizeof v);
    ck_assert_msg(strncmp(v, "0 ", 2) == 0,
                  "batch %d: %s differ between the two schemas: %s", batch,
                  what, v);
}

/* Both schemas with the target table, which refuses the body "bad". */
static void make_schemas(void) {
    char q[1024];
    for (int i = 0; i < 2; i++) {
        snprintf(q, sizeof q,
                 "CREATE SCHEMA \"%s\"; CREATE TABLE \"%s\".t (id bigint NOT "
                 "NULL, body text CHECK (body <> 'bad'), _tm_topic text NOT "
                 "NULL, _tm_partition int NOT NULL, _tm_offset bigint NOT "
                 "NULL, _tm_identity text)",
                 schema[i], schema[i]);
        PQclear(pgt_sql(admin, q));
    }
}

START_TEST(set_and_per_record_paths_agree) {
    char q[1024];
    paths seen[2] = {{0}, {0}};
    tm_host_api host[2];
    tm_settings *settings[2];
    tm_sink_config config[2];
    void *sink[2];
    tm_marker mk[2];
    make_schemas();
    for (int i = 0; i < 2; i++) {
        host[i] = *tm_host_services();
        host[i].log = counting_log;
        json_t *obj =
            json_pack("{s:s, s:s, s:s, s:i, s:s}", "conninfo", pgt_conninfo(),
                      "schema", schema[i], "table", "t", "dedup_retention_s",
                      3600, "dedup_keys", "rows");
        ck_assert_ptr_nonnull(obj);
        settings[i] = tm_settings_new(obj, "$.sink.settings");
        json_decref(obj);
        ck_assert_ptr_nonnull(settings[i]);
        config[i] = (tm_sink_config){.struct_size = sizeof(tm_sink_config),
                                     .connector = connector,
                                     .settings = settings[i],
                                     .columns = COLS,
                                     .ncolumns = 2,
                                     .flags = TM_CONFIG_DEDUP,
                                     .host_ctx = &seen[i]};
        sink[i] = pgt_open(api, &host[i], &config[i]);
        mk[i] = pgt_claim1(api, sink[i]);
    }
    snprintf(q, sizeof q,
             "CREATE FUNCTION \"%s\".poison() RETURNS trigger LANGUAGE "
             "plpgsql AS $$ BEGIN IF NEW.identity LIKE 'poison-%%' THEN "
             "RAISE EXCEPTION 'test refuses key %%', NEW.identity USING "
             "ERRCODE = '23514'; END IF; RETURN NEW; END $$; CREATE TRIGGER "
             "poison BEFORE INSERT ON \"%s\".tidemark_keys FOR EACH ROW "
             "EXECUTE FUNCTION \"%s\".poison()",
             schema[1], schema[1], schema[1]);
    PQclear(pgt_sql(admin, q));
    static gen_batch g;
    for (int k = 0; k < NBATCHES; k++) {
        if (k == EXPIRE_AT) {
            /* expired by both clocks: the next batch's prune forgets them */
            long long n[2];
            for (int i = 0; i < 2; i++)
                n[i] = sql2_int(i ? "WITH u AS (UPDATE $B.tidemark_keys SET "
                                    "applied_at = -9000000000000, "
                                    "applied_wall = 0 WHERE identity LIKE "
                                    "'k1%' RETURNING 1) SELECT count(*) "
                                    "FROM u"
                                  : "WITH u AS (UPDATE $A.tidemark_keys SET "
                                    "applied_at = -9000000000000, "
                                    "applied_wall = 0 WHERE identity LIKE "
                                    "'k1%' RETURNING 1) SELECT count(*) "
                                    "FROM u");
            ck_assert_msg(n[0] > 0 && n[0] == n[1],
                          "inconclusive: %lld and %lld keys expired", n[0],
                          n[1]);
        }
        for (int i = 0; i < 2; i++) {
            unsigned seed = 20261204u + (unsigned)k;
            gen(&g, k, 0, (int64_t)k * BATCH, mk[i].epoch, 1000, &seed);
            tm_error err = {sizeof err, ""};
            tm_status rc = api->commit(sink[i], &g.b, &err);
            ck_assert_msg(rc == TM_OK, "batch %d, schema %s: %s: %s", k,
                          schema[i], tm_status_name(rc), err.message);
        }
        same_in_both("rows",
                     "SELECT _tm_offset, id, body, _tm_identity FROM $S.t", k);
        same_in_both("dead letters",
                     "SELECT \"offset\", reason, CASE reason WHEN "
                     "'identity_conflict' THEN detail END FROM "
                     "$S.tidemark_dead_letters",
                     k);
        same_in_both("keys",
                     "SELECT identity, payload_hash, first_topic, "
                     "first_partition, first_offset, applied_at FROM "
                     "$S.tidemark_keys",
                     k);
        same_in_both("markers",
                     "SELECT next_offset, \"rows\", dead_letters, duplicates "
                     "FROM $S.tidemark_markers",
                     k);
    }
    /* the paths ran as intended: in the first schema, the COPY of every
     * key alone (batches 0 to 2), the COPY meeting keys stored before and
     * the probe after it (the odd batches after 2), the probe first (the
     * even ones after those); in the second, one record at a time */
    ck_assert_msg(seen[0].refusals == 0 && seen[1].refusals == NBATCHES,
                  "inconclusive: the set failed %d and %d times, want 0 and %d",
                  seen[0].refusals, seen[1].refusals, NBATCHES);
    ck_assert_msg(seen[0].probes == (NBATCHES - 3) / 2,
                  "inconclusive: %d probes after a COPY, want %d",
                  seen[0].probes, (NBATCHES - 3) / 2);
    char v[256];
    sql2("SELECT (SELECT duplicates FROM $A.tidemark_markers) || '/' || "
         "(SELECT count(*) FILTER (WHERE reason = 'identity_conflict') || '/' "
         "|| count(*) FILTER (WHERE reason = 'rejected') FROM "
         "$A.tidemark_dead_letters) || '/' || (SELECT count(*) FROM "
         "$A.tidemark_keys WHERE payload_hash IS NULL) || '/' || (SELECT "
         "count(*) FROM $A.t t JOIN $A.t u ON u._tm_identity = t._tm_identity "
         "AND u._tm_offset < t._tm_offset WHERE t._tm_identity LIKE 'k1%')",
         v, sizeof v);
    long long dups, conflicts, rejected, nullhash, again;
    ck_assert_int_eq(sscanf(v, "%lld/%lld/%lld/%lld/%lld", &dups, &conflicts,
                            &rejected, &nullhash, &again),
                     5);
    ck_assert_msg(dups > 0 && conflicts > 0 && rejected > 2 * NBATCHES &&
                      nullhash > 0 && again > 0,
                  "inconclusive: duplicates/conflicts/rejected/null "
                  "hashes/rows again after expiry %s",
                  v);
    for (int i = 0; i < 2; i++) {
        api->close(sink[i]);
        tm_settings_free(settings[i]);
    }
}
END_TEST

/* The keys' statement is prepared once per session: a new session (the
 * old one lost between two batches) prepares it again, or every later
 * batch would fail on a statement the server no longer knows. */
START_TEST(new_session_prepares_the_keys_statement_again) {
    char q[512];
    snprintf(q, sizeof q,
             "CREATE SCHEMA \"%s\"; CREATE TABLE \"%s\".t (id bigint NOT "
             "NULL, body text, _tm_topic text NOT NULL, _tm_partition int NOT "
             "NULL, _tm_offset bigint NOT NULL, _tm_identity text)",
             schema[0], schema[0]);
    PQclear(pgt_sql(admin, q));
    json_t *obj =
        json_pack("{s:s, s:s, s:s, s:s}", "conninfo", pgt_conninfo(), "schema",
                  schema[0], "table", "t", "dedup_keys", "rows");
    ck_assert_ptr_nonnull(obj);
    tm_settings *settings = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    ck_assert_ptr_nonnull(settings);
    tm_sink_config config = {.struct_size = sizeof(tm_sink_config),
                             .connector = connector,
                             .settings = settings,
                             .columns = COLS,
                             .ncolumns = 2,
                             .flags = TM_CONFIG_DEDUP};
    void *sink = pgt_open(api, tm_host_services(), &config);
    tm_marker mk = pgt_claim1(api, sink);
    static gen_batch g;
    unsigned seed = 7;
    gen(&g, 0, 0, 0, mk.epoch, 1000, &seed);
    tm_error err = {sizeof err, ""};
    tm_status rc = api->commit(sink, &g.b, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
    snprintf(q, sizeof q,
             "SELECT count(pg_terminate_backend(pid, 5000)) FROM "
             "pg_stat_activity WHERE application_name = '%s'",
             connector);
    char v[64];
    sql2(q, v, sizeof v);
    ck_assert_msg(strcmp(v, "1") == 0,
                  "inconclusive: %s sessions of the sink ended, want 1", v);
    gen(&g, 1, 0, BATCH, mk.epoch, 1000, &seed);
    rc = api->commit(sink, &g.b, &err); /* finds the session gone */
    ck_assert_msg(rc == TM_RETRY, "%s: %s", tm_status_name(rc), err.message);
    rc = api->commit(sink, &g.b, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
    ck_assert_int_eq(sql2_int("SELECT next_offset FROM $A.tidemark_markers"),
                     2 * BATCH);
    api->close(sink);
    tm_settings_free(settings);
}
END_TEST

/* ---- keys held in memory against keys as rows -------------------------- */

/* The batch whose first commit in memory fails after its keys; with a
 * retention, the batch before which batches 0 and 1 expire. */
#define FAIL_AT    7
#define EXPIRE_MEM 6

/* statement_timeout_ms of the sinks open_sink opens (0: the default), and
 * their dedup_retention_s when open_sink is asked for a retention; the
 * "dedup_keys" of a sink of the first schema (NULL: "memory") */
static long long statement_timeout_ms, retention_s = 3600;
static const char *keys_in_a, *mode_in_a; /* mode_in_a: NULL "append" */

static void *open_sink(int i, int retention, tm_host_api *host,
                       tm_settings **settings, tm_sink_config *config,
                       paths *ctx) {
    json_t *obj = json_pack("{s:s, s:s, s:s, s:s}", "conninfo", pgt_conninfo(),
                            "schema", schema[i], "table", "t", "dedup_keys",
                            i           ? "rows"
                            : keys_in_a ? keys_in_a
                                        : "memory");
    ck_assert_ptr_nonnull(obj);
    if (retention)
        json_object_set_new(obj, "dedup_retention_s",
                            json_integer(retention_s));
    if (statement_timeout_ms)
        json_object_set_new(obj, "statement_timeout_ms",
                            json_integer(statement_timeout_ms));
    if (mode_in_a && i == 0)
        json_object_set_new(obj, "mode", json_string(mode_in_a));
    *settings = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    ck_assert_ptr_nonnull(*settings);
    *host = *tm_host_services();
    host->log = counting_log;
    *config = (tm_sink_config){.struct_size = sizeof(tm_sink_config),
                               .connector = connector,
                               .settings = *settings,
                               .columns = COLS,
                               .ncolumns = 2,
                               .flags = TM_CONFIG_DEDUP,
                               .host_ctx = ctx};
    return pgt_open(api, host, config);
}

static tm_marker claim(void *sink, int32_t p) {
    tm_marker m = {.struct_size = sizeof m, .topic = "t", .partition = p};
    tm_error err = {sizeof err, ""};
    tm_status rc = api->claim(sink, &m, 1, 0, &err);
    ck_assert_msg(rc == TM_OK, "claim: %s", err.message);
    return m;
}

static void commit_ok(void *sink, gen_batch *g, const char *who, int k) {
    tm_error err = {sizeof err, ""};
    tm_status rc = api->commit(sink, &g->b, &err);
    ck_assert_msg(rc == TM_OK, "batch %d, %s: %s: %s", k, who,
                  tm_status_name(rc), err.message);
}

static void differential(int retention) {
    char q[1024];
    make_schemas();
    /* A: two hosts of the connector (partition 0, partition 1); B: one */
    paths seen[3] = {{0}, {0}, {0}};
    tm_host_api host[3];
    tm_settings *settings[3];
    tm_sink_config config[3];
    void *sink[3];
    for (int i = 0; i < 3; i++)
        sink[i] = open_sink(i == 2, retention, &host[i], &settings[i],
                            &config[i], &seen[i]);
    tm_marker ma[2] = {claim(sink[0], 0), claim(sink[1], 1)};
    tm_marker mb[2] = {claim(sink[2], 0), claim(sink[2], 1)};
    snprintf(q, sizeof q,
             "CREATE TABLE \"%s\".fail_once (n int); CREATE FUNCTION "
             "\"%s\".fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF "
             "EXISTS (SELECT 1 FROM \"%s\".fail_once) THEN RAISE EXCEPTION "
             "'test fails the commit' USING ERRCODE = '40001'; END IF; "
             "RETURN NEW; END $$; CREATE TRIGGER fail BEFORE UPDATE ON "
             "\"%s\".tidemark_keysets FOR EACH ROW EXECUTE FUNCTION "
             "\"%s\".fail()",
             schema[0], schema[0], schema[0], schema[0], schema[0]);
    PQclear(pgt_sql(admin, q));
    static gen_batch g;
    int64_t next[2] = {0, 0};
    int failed = 0;
    long long expired = 0;
    for (int k = 0; k < NBATCHES; k++) {
        /* every third batch to partition 1: the other host */
        int32_t p = k % 3 == 2;
        if (retention && k == EXPIRE_MEM) {
            /* expired by both clocks: the keys first applied by batches 0
             * and 1 (offsets below 2 * BATCH of partition 0), whole batch
             * rows in A, key rows in B */
            long long na = sql2_int(
                "WITH u AS (UPDATE $A.tidemark_key_batches SET "
                "newest_applied_at = -9000000000000, applied_wall = 0 WHERE "
                "generation <= 2 RETURNING nkeys) SELECT coalesce(sum(nkeys), "
                "0) FROM u");
            snprintf(q, sizeof q,
                     "WITH u AS (UPDATE $B.tidemark_keys SET applied_at = "
                     "-9000000000000, applied_wall = 0 WHERE first_partition "
                     "= 0 AND first_offset < %d RETURNING 1) SELECT count(*) "
                     "FROM u",
                     2 * BATCH);
            long long nb = sql2_int(q);
            ck_assert_msg(na > 0 && na == nb,
                          "inconclusive: %lld and %lld keys expired", na, nb);
            expired = na;
        }
        int64_t ts = 1000 + k;
        unsigned seed = 20261205u + (unsigned)k;
        gen(&g, k, p, next[p], ma[p].epoch, ts, &seed);
        if (k == FAIL_AT) {
            snprintf(q, sizeof q, "INSERT INTO \"%s\".fail_once VALUES (1)",
                     schema[0]);
            PQclear(pgt_sql(admin, q));
            tm_error err = {sizeof err, ""};
            tm_status rc = api->commit(sink[p], &g.b, &err);
            ck_assert_msg(rc == TM_RETRY && strstr(err.message, "test fails"),
                          "inconclusive: the failing commit gave %s: %s",
                          tm_status_name(rc), err.message);
            snprintf(q, sizeof q, "DELETE FROM \"%s\".fail_once", schema[0]);
            PQclear(pgt_sql(admin, q));
            failed = 1;
        }
        commit_ok(sink[p], &g, "memory", k);
        seed = 20261205u + (unsigned)k;
        gen(&g, k, p, next[p], mb[p].epoch, ts, &seed);
        commit_ok(sink[2], &g, "rows", k);
        next[p] += BATCH;
        same_in_both("rows",
                     "SELECT _tm_partition, _tm_offset, id, body, "
                     "_tm_identity FROM $S.t",
                     k);
        same_in_both("dead letters",
                     "SELECT \"partition\", \"offset\", reason FROM "
                     "$S.tidemark_dead_letters",
                     k);
        same_in_both("markers",
                     "SELECT \"partition\", next_offset, \"rows\", "
                     "dead_letters, duplicates FROM $S.tidemark_markers",
                     k);
    }
    ck_assert_msg(failed, "inconclusive: no commit failed");
    /* what the batches held: every outcome, and keys of each host's
     * batches resent by the other's, decided again under the lock */
    char v[256];
    sql2("SELECT (SELECT sum(duplicates) FROM $A.tidemark_markers) || '/' || "
         "(SELECT count(*) FILTER (WHERE reason = 'identity_conflict') || '/' "
         "|| count(*) FILTER (WHERE reason = 'rejected') FROM "
         "$A.tidemark_dead_letters) || '/' || (SELECT count(*) FROM $A.t t "
         "JOIN $A.t u ON u._tm_identity = t._tm_identity AND (u._tm_partition, "
         "u._tm_offset) < (t._tm_partition, t._tm_offset))",
         v, sizeof v);
    long long dups, conflicts, rejected, twice;
    ck_assert_int_eq(
        sscanf(v, "%lld/%lld/%lld/%lld", &dups, &conflicts, &rejected, &twice),
        4);
    ck_assert_msg(dups > 0 && conflicts > 0 && rejected > 0 &&
                      (retention ? twice > 0 && expired > 0 : twice == 0),
                  "inconclusive: duplicates/conflicts/rejected/rows stored "
                  "twice %s",
                  v);
    if (!retention)
        ck_assert_msg(seen[0].again + seen[1].again > 0,
                      "inconclusive: no host decided its keys again after "
                      "the other's batch");
    for (int i = 0; i < 3; i++) {
        api->close(sink[i]);
        tm_settings_free(settings[i]);
    }
}

START_TEST(memory_and_rows_agree) {
    differential(0);
}
END_TEST

START_TEST(memory_and_rows_agree_with_a_retention) {
    differential(1);
}
END_TEST

/* A batch of one record of partition P at OFFSET, key IDENT. */
static void one_key(gen_batch *g, int32_t p, int64_t offset, int64_t epoch,
                    const char *ident) {
    memset(g, 0, sizeof *g);
    snprintf(g->id, sizeof g->id, "one-%d-%lld", (int)p, (long long)offset);
    snprintf(g->ident[0], sizeof g->ident[0], "%s", ident);
    g->range = (tm_range){.struct_size = sizeof(tm_range),
                          .topic = "t",
                          .partition = p,
                          .start_offset = offset,
                          .end_offset = offset + 1,
                          .epoch = epoch};
    g->val[0][0] = (tm_value){.struct_size = sizeof(tm_value), .v.i = 1};
    g->val[0][1] = (tm_value){.struct_size = sizeof(tm_value)};
    g->val[0][1].v.s.ptr = "ok";
    g->val[0][1].v.s.len = 2;
    g->rec[0] = (tm_record){.struct_size = sizeof(tm_record),
                            .offset = offset,
                            .timestamp_ms = 1000,
                            .value = "{}",
                            .value_len = 2,
                            .values = g->val[0],
                            .identity = g->ident[0],
                            .identity_hash = "h"};
    g->b = (tm_batch){.struct_size = sizeof(tm_batch),
                      .connector = connector,
                      .batch_id = g->id,
                      .ranges = &g->range,
                      .nranges = 1,
                      .records = g->rec,
                      .nrecords = 1};
}

/* A commit whose keys are all duplicates (no keys' writes before its
 * marker updates) right after it loaded another host's batch under the
 * lock. */
START_TEST(duplicates_only_after_another_hosts_batch) {
    make_schemas();
    paths seen[2] = {{0}, {0}};
    tm_host_api host[2];
    tm_settings *settings[2];
    tm_sink_config config[2];
    void *sink[2];
    int64_t epoch[2];
    for (int i = 0; i < 2; i++) {
        sink[i] = open_sink(0, 0, &host[i], &settings[i], &config[i], &seen[i]);
        epoch[i] = claim(sink[i], i).epoch;
    }
    static gen_batch g;
    one_key(&g, 0, 0, epoch[0], "k1");
    commit_ok(sink[0], &g, "host 0", 0);
    one_key(&g, 1, 0, epoch[1], "k2");
    commit_ok(sink[1], &g, "host 1", 1);
    one_key(&g, 0, 1, epoch[0], "k1"); /* a duplicate, k2's batch loaded */
    commit_ok(sink[0], &g, "host 0", 2);
    ck_assert_int_eq(
        sql2_int("SELECT sum(duplicates) FROM $A.tidemark_markers"), 1);
    for (int i = 0; i < 2; i++) {
        api->close(sink[i]);
        tm_settings_free(settings[i]);
    }
}
END_TEST

/* A batch of N records of partition P from OFFSET, keys IDENTS, stamped
 * TS. */
static void keys_batch(gen_batch *g, int32_t p, int64_t offset, int64_t epoch,
                       const char *const *idents, int n, int64_t ts) {
    one_key(g, p, offset, epoch, idents[0]);
    g->range.end_offset = offset + n;
    for (int i = 0; i < n; i++) {
        snprintf(g->ident[i], sizeof g->ident[i], "%s", idents[i]);
        g->val[i][0] = g->val[0][0];
        g->val[i][1] = g->val[0][1];
        g->rec[i] = g->rec[0];
        g->rec[i].offset = offset + i;
        g->rec[i].timestamp_ms = ts;
        g->rec[i].values = g->val[i];
        g->rec[i].identity = g->ident[i];
    }
    g->b.nrecords = (size_t)n;
}

static int64_t wall_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Two hosts of one connector with a retention (1 s): host 0's commit
 * removes the expired batch rows of both (its own and host 1's), and host
 * 1's next commit follows that removal without loading the connector's
 * keys again (a reload a commit made two hosts with a retention 100 times
 * slower than one), deciding as one sink with per-key rows does on the same
 * batches (schema B): a resend of a removed key stored again, one of a key
 * stored after the removal a duplicate. */
START_TEST(two_hosts_follow_a_removal_without_a_reload) {
    make_schemas();
    retention_s = 1;
    paths seen[3] = {{0}, {0}, {0}};
    tm_host_api host[3];
    tm_settings *settings[3];
    tm_sink_config config[3];
    void *sink[3];
    for (int i = 0; i < 3; i++)
        sink[i] =
            open_sink(i == 2, 1, &host[i], &settings[i], &config[i], &seen[i]);
    retention_s = 3600;
    tm_marker ma[2] = {claim(sink[0], 0), claim(sink[1], 1)};
    tm_marker mb[2] = {claim(sink[2], 0), claim(sink[2], 1)};
    /* the claim's load is seen, or the count proves nothing */
    ck_assert_msg(seen[1].loads == 1,
                  "inconclusive: host 1's claim logged "
                  "%d loads",
                  seen[1].loads);
    static gen_batch g;
    static const char *const b1[] = {"k1", "k2", "k3"}, *const b2[] = {"k4"},
                             *const b3[] = {"k5", "k4"},
                             *const b4[] = {"k1", "k5", "k6", "k2"};
    const struct {
        int32_t p;
        const char *const *idents;
        int n;
        int sleep_before;
    } step[] = {{0, b1, 3, 0}, {1, b2, 1, 0}, {0, b3, 2, 1}, {1, b4, 4, 0}};
    int64_t next[2] = {0, 0};
    int loads_before = 0;
    for (int k = 0; k < 4; k++) {
        if (step[k].sleep_before) /* past the retention, both clocks */
            nanosleep(&(struct timespec){1, 300 * 1000000L}, NULL);
        int32_t p = step[k].p;
        if (k == 3)
            loads_before = seen[1].loads;
        int64_t ts = wall_now_ms();
        keys_batch(&g, p, next[p], ma[p].epoch, step[k].idents, step[k].n, ts);
        commit_ok(sink[p], &g, "memory", k);
        keys_batch(&g, p, next[p], mb[p].epoch, step[k].idents, step[k].n, ts);
        commit_ok(sink[2], &g, "rows", k);
        next[p] += step[k].n;
        same_in_both("rows",
                     "SELECT _tm_partition, _tm_offset, _tm_identity FROM $S.t",
                     k);
        same_in_both("markers",
                     "SELECT \"partition\", next_offset, \"rows\", "
                     "dead_letters, duplicates FROM $S.tidemark_markers",
                     k);
    }
    /* host 0's batch removed both hosts' batch rows (inconclusive else) */
    ck_assert_msg(sql2_int("SELECT count(*) FROM $A.tidemark_key_batches "
                           "WHERE generation <= 2") == 0 &&
                      sql2_int("SELECT count(*) FROM $A.t WHERE "
                               "_tm_identity = 'k1'") == 2,
                  "inconclusive: the first keys were not removed");
    ck_assert_msg(seen[1].loads == loads_before,
                  "host 1 loaded the connector's keys whole %d time(s) "
                  "after host 0's removal",
                  seen[1].loads - loads_before);
    for (int i = 0; i < 3; i++) {
        api->close(sink[i]);
        tm_settings_free(settings[i]);
    }
}
END_TEST

/* The set keeps each key's generation in 32 bits (tk_tab_drop_gens): a
 * host following another's removal must not drop a key stored 2^32
 * generations after a removed one. The connector's generation is moved
 * past 2^32 in SQL, standing for that many batches (their rows, other
 * keys, left out: they change nothing of what is dropped). Retention 3 s,
 * both hosts lock first: host 0 stores k1 (generation 1), then k2
 * (2^32 + 1) while k1's row is kept; host 1 stores k3 once k1 expired
 * and k2 has not, removing k1's row; host 0's resend of k2 must be a
 * duplicate. Inconclusive unless k1's row is gone and k2's is there. */
START_TEST(removal_followed_across_two_to_the_32_generations) {
    make_schemas();
    retention_s = 3;
    paths seen[2] = {{0}, {0}};
    tm_host_api host[2];
    tm_settings *settings[2];
    tm_sink_config config[2];
    void *sink[2];
    for (int i = 0; i < 2; i++)
        sink[i] = open_sink(0, 1, &host[i], &settings[i], &config[i], &seen[i]);
    retention_s = 3600;
    int64_t epoch[2] = {claim(sink[0], 0).epoch, claim(sink[1], 1).epoch};
    static gen_batch g;
    static const char *const k1[] = {"k1"}, *const k2[] = {"k2"},
                             *const k3[] = {"k3"};
    keys_batch(&g, 0, 0, epoch[0], k1, 1, wall_now_ms());
    commit_ok(sink[0], &g, "host 0, k1", 0);
    char q[256];
    snprintf(q, sizeof q,
             "UPDATE \"%s\".tidemark_keysets SET generation = 4294967296",
             schema[0]);
    PQclear(pgt_sql(admin, q));
    nanosleep(&(struct timespec){1, 600 * 1000000L}, NULL);
    keys_batch(&g, 0, 1, epoch[0], k2, 1, wall_now_ms());
    commit_ok(sink[0], &g, "host 0, k2", 1);
    nanosleep(&(struct timespec){1, 800 * 1000000L}, NULL);
    keys_batch(&g, 1, 0, epoch[1], k3, 1, wall_now_ms());
    commit_ok(sink[1], &g, "host 1, k3", 2);
    ck_assert_msg(sql2_int("SELECT count(*) FROM $A.tidemark_key_batches "
                           "WHERE generation = 1") == 0 &&
                      sql2_int("SELECT count(*) FROM $A.tidemark_key_batches "
                               "WHERE generation = 4294967297") == 1,
                  "inconclusive: k1's row not removed, or k2's not kept");
    keys_batch(&g, 0, 2, epoch[0], k2, 1, wall_now_ms()); /* k2 resent */
    commit_ok(sink[0], &g, "host 0, k2 again", 3);
    long long k2_rows =
        sql2_int("SELECT count(*) FROM $A.t WHERE _tm_identity = 'k2'");
    ck_assert_msg(k2_rows == 1,
                  "k2, stored at generation 2^32 + 1, resent after host 1 "
                  "removed generation 1: stored %lld times",
                  k2_rows);
    for (int i = 0; i < 2; i++) {
        api->close(sink[i]);
        tm_settings_free(settings[i]);
    }
}
END_TEST

/* A host configured "dedup_keys": "rows" beside one holding the
 * connector's keys in memory (it claimed before the connector had its
 * keysets row; after, its claim is refused): its commit of a key the other
 * applied is refused by the keys table's trigger (TM_FATAL naming the
 * connector and the way out) instead of storing the key a second time. */
START_TEST(rows_host_beside_memory_is_refused_not_stored_twice) {
    make_schemas();
    paths seen[2] = {{0}, {0}};
    tm_host_api host[2];
    tm_settings *settings[2];
    tm_sink_config config[2];
    void *sink[2];
    keys_in_a = "rows";
    sink[1] = open_sink(0, 0, &host[1], &settings[1], &config[1], &seen[1]);
    keys_in_a = NULL;
    int64_t epoch1 = claim(sink[1], 1).epoch; /* no keysets row yet */
    sink[0] = open_sink(0, 0, &host[0], &settings[0], &config[0], &seen[0]);
    int64_t epoch0 = claim(sink[0], 0).epoch;
    ck_assert_msg(sql2_int("SELECT count(*) FROM $A.tidemark_keysets") == 1,
                  "inconclusive: no keysets row");
    static gen_batch g;
    one_key(&g, 0, 0, epoch0, "k1");
    commit_ok(sink[0], &g, "memory host", 0);
    one_key(&g, 1, 0, epoch1, "k1"); /* k1 again, to the rows host */
    tm_error err = {sizeof err, ""};
    tm_status rc = api->commit(sink[1], &g.b, &err);
    long long twice =
        sql2_int("SELECT count(*) FROM $A.t WHERE _tm_identity = 'k1'");
    ck_assert_msg(
        rc == TM_FATAL &&
            strstr(err.message, "holds its business keys in memory") &&
            strstr(err.message, connector) && twice == 1,
        "the rows host's commit of a key held in memory: %s: %s "
        "(k1 stored %lld times)",
        tm_status_name(rc), err.message, twice);
    for (int i = 0; i < 2; i++) {
        api->close(sink[i]);
        tm_settings_free(settings[i]);
    }
}
END_TEST

/* Two hosts of one connector in upsert mode writing one row key (id 1)
 * under different business keys take the connector's keysets row and the
 * table's row in one order: host 0, its set made stale (another host's
 * removal of tidemark_keys rows), loads it whole with the keysets row
 * locked, while a trigger holds its row's INSERT 1.5 s; host 1, its set
 * current, commits meanwhile. Both commits are OK: no cycle for the
 * server's deadlock detector to end (it ended one, 40P01, when host 1 took
 * the table's row first and the keysets row after). Inconclusive unless
 * host 0 loaded its set under the keysets row. */
typedef struct upsert_call {
    void *sink;
    gen_batch *g;
    tm_status rc;
    char why[TM_ERROR_MAX];
} upsert_call;

static void *upsert_commit(void *arg) {
    upsert_call *c = arg;
    tm_error err = {sizeof err, ""};
    c->rc = api->commit(c->sink, &c->g->b, &err);
    snprintf(c->why, sizeof c->why, "%s", err.message);
    return NULL;
}

START_TEST(upsert_hosts_take_the_keys_row_and_a_table_row_in_one_order) {
    paths seen[2] = {{0}, {0}};
    tm_host_api host[2];
    tm_settings *settings[2];
    tm_sink_config config[2];
    void *sink[2];
    mode_in_a = "upsert";
    for (int i = 0; i < 2; i++)
        sink[i] = open_sink(0, 0, &host[i], &settings[i], &config[i], &seen[i]);
    mode_in_a = NULL;
    int64_t epoch[2] = {claim(sink[0], 0).epoch, claim(sink[1], 1).epoch};
    static gen_batch g[2];
    one_key(&g[0], 0, 0, epoch[0], "k1");
    commit_ok(sink[0], &g[0], "host 0", 0);
    one_key(&g[1], 1, 0, epoch[1], "k2");
    commit_ok(sink[1], &g[1], "host 1", 1);
    char q[1024];
    snprintf(q, sizeof q,
             "CREATE FUNCTION \"%s\".slow() RETURNS trigger LANGUAGE plpgsql "
             "AS $$BEGIN IF NEW._tm_partition = 0 THEN PERFORM "
             "pg_sleep(1.5); END IF; RETURN NEW; END$$; CREATE TRIGGER slow "
             "BEFORE INSERT ON \"%s\".t FOR EACH ROW EXECUTE FUNCTION "
             "\"%s\".slow(); UPDATE \"%s\".tidemark_keysets SET "
             "legacy_pruned = legacy_pruned + 1",
             schema[0], schema[0], schema[0], schema[0]);
    PQclear(pgt_sql(admin, q));
    epoch[1] = claim(sink[1], 1).epoch; /* host 1's set current again */
    int loads0 = seen[0].loads;
    one_key(&g[0], 0, 1, epoch[0], "k3");
    one_key(&g[1], 1, 1, epoch[1], "k4");
    upsert_call call[2] = {{.sink = sink[0], .g = &g[0]},
                           {.sink = sink[1], .g = &g[1]}};
    pthread_t th[2];
    ck_assert_int_eq(pthread_create(&th[0], NULL, upsert_commit, &call[0]), 0);
    /* host 0: its first run's row (1.5 s), then the keysets row and its
     * second run's row (1.5 s more): host 1 comes into that */
    nanosleep(&(struct timespec){2, 200 * 1000000L}, NULL);
    ck_assert_int_eq(pthread_create(&th[1], NULL, upsert_commit, &call[1]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    ck_assert_msg(seen[0].loads > loads0,
                  "inconclusive: host 0's set was not brought up under the "
                  "keysets row (no load)");
    for (int i = 0; i < 2; i++)
        ck_assert_msg(call[i].rc == TM_OK, "host %d: %s: %s", i,
                      tm_status_name(call[i].rc), call[i].why);
    ck_assert_int_eq(
        sql2_int("SELECT count(*) FROM $A.t WHERE _tm_identity IN ('k3', "
                 "'k4')"),
        1);
    for (int i = 0; i < 2; i++) {
        api->close(sink[i]);
        tm_settings_free(settings[i]);
    }
}
END_TEST

/* Two hosts of one connector committing at the same time (threads, each
 * its own sink instance, session and set, partitions 0 and 1), their
 * batches resending each other's keys: every key is stored once (at most
 * one row per identity), every record is counted once in its marker, and
 * some commit had to decide its keys again under the lock. */
#define CONCURRENT_BATCHES 12

typedef struct host_run {
    void *sink;
    int32_t p;
    int64_t epoch;
    tm_status last;
    char why[TM_ERROR_MAX];
} host_run;

static void *commit_loop(void *arg) {
    host_run *h = arg;
    gen_batch *g = malloc(sizeof *g);
    h->last = g ? TM_OK : TM_FATAL;
    for (int k = 0; g && k < CONCURRENT_BATCHES && h->last == TM_OK; k++) {
        /* the odd batches share keys between the hosts */
        unsigned seed = 77u + (unsigned)(k * 2 + h->p);
        gen(g, 2 * k + 1, h->p, (int64_t)k * BATCH, h->epoch, 1000, &seed);
        tm_error err = {sizeof err, ""};
        for (int tries = 0; tries < 5; tries++)
            if ((h->last = api->commit(h->sink, &g->b, &err)) != TM_RETRY)
                break;
        snprintf(h->why, sizeof h->why, "%s", err.message);
    }
    free(g);
    return NULL;
}

START_TEST(two_hosts_at_once_store_each_key_once) {
    make_schemas();
    paths seen[2] = {{0}, {0}};
    tm_host_api host[2];
    tm_settings *settings[2];
    tm_sink_config config[2];
    host_run run[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        run[i] = (host_run){.p = i};
        run[i].sink =
            open_sink(0, 0, &host[i], &settings[i], &config[i], &seen[i]);
        run[i].epoch = claim(run[i].sink, i).epoch;
    }
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, commit_loop, &run[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++)
        ck_assert_msg(run[i].last == TM_OK, "host %d: %s: %s", i,
                      tm_status_name(run[i].last), run[i].why);
    char v[256];
    sql2("SELECT (SELECT count(*) FROM (SELECT _tm_identity FROM $A.t WHERE "
         "_tm_identity IS NOT NULL GROUP BY 1 HAVING count(*) > 1) d) || '/' "
         "|| (SELECT count(*) FROM $A.tidemark_markers WHERE \"rows\" + "
         "dead_letters + duplicates <> next_offset) || '/' || (SELECT "
         "sum(next_offset) FROM $A.tidemark_markers) || '/' || (SELECT "
         "sum(duplicates) FROM $A.tidemark_markers)",
         v, sizeof v);
    long long twice, miscounted, records, dups;
    ck_assert_int_eq(
        sscanf(v, "%lld/%lld/%lld/%lld", &twice, &miscounted, &records, &dups),
        4);
    ck_assert_msg(twice == 0 && miscounted == 0 &&
                      records == 2LL * CONCURRENT_BATCHES * BATCH,
                  "identities stored twice/markers miscounted/records: %s", v);
    ck_assert_msg(dups > 0 && seen[0].again + seen[1].again > 0,
                  "inconclusive: %lld duplicates, %d and %d commits decided "
                  "again",
                  dups, seen[0].again, seen[1].again);
    for (int i = 0; i < 2; i++) {
        api->close(run[i].sink);
        tm_settings_free(settings[i]);
    }
}
END_TEST

/* One stalled host does not stop the others for longer than the session's
 * idle_in_transaction_session_timeout (statement_timeout_ms, at least 10
 * s). Host 0 stops inside a commit once its rows are written and the
 * connector's tidemark_keysets row is locked (its fault hook blocks at
 * after_effects, or at after_marker, its marker updates sent: a stopped or
 * swapped-out process);
 * host 1, a second later, commits a key of its own on partition 1 within
 * its statement timeout (10 s), its lock wait ended by the server ending
 * host 0's session. Host 0's commit then fails, nothing of it stored, and
 * its resend stores its key once. Inconclusive unless host 0's session
 * was in its transaction at the fault point. */
static atomic_int stall_armed, stalled, stall_released;
static const char *const STALL_AT[] = {TM_FAULT_AFTER_EFFECTS,
                                       TM_FAULT_AFTER_MARKER};
static const char *stall_at;

static void stalling_fault(const char *point) {
    if (!atomic_load(&stall_armed) || strcmp(point, stall_at))
        return;
    atomic_store(&stall_armed, 0);
    atomic_store(&stalled, 1);
    for (int i = 0; i < 6000 && !atomic_load(&stall_released); i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *stalled_commit(void *arg) {
    host_run *h = arg;
    gen_batch *g = malloc(sizeof *g);
    h->last = TM_FATAL;
    if (g) {
        one_key(g, 0, 0, h->epoch, "k-stalled");
        tm_error err = {sizeof err, ""};
        h->last = api->commit(h->sink, &g->b, &err);
        snprintf(h->why, sizeof h->why, "%s", err.message);
        free(g);
    }
    return NULL;
}

START_TEST(stalled_host_is_ended_and_the_other_commits) {
    make_schemas();
    statement_timeout_ms = 10000;
    paths seen[2] = {{0}, {0}};
    tm_host_api host[2];
    tm_settings *settings[2];
    tm_sink_config config[2];
    host_run run[2];
    for (int i = 0; i < 2; i++) {
        run[i] = (host_run){.p = i};
        run[i].sink =
            open_sink(0, 0, &host[i], &settings[i], &config[i], &seen[i]);
        run[i].epoch = claim(run[i].sink, i).epoch;
    }
    statement_timeout_ms = 0;
    /* host 0's session, stalled at its fault point */
    char q[512];
    snprintf(q, sizeof q,
             "SELECT count(*) FROM pg_stat_activity WHERE application_name "
             "= '%s' AND xact_start IS NOT NULL",
             connector);
    stall_at = STALL_AT[_i];
    host[0].fault = stalling_fault;
    atomic_store(&stalled, 0);
    atomic_store(&stall_released, 0);
    atomic_store(&stall_armed, 1);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, stalled_commit, &run[0]), 0);
    for (int i = 0; i < 1000 && !atomic_load(&stalled); i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    long long idle = atomic_load(&stalled) ? sql2_int(q) : -1;
    if (idle != 1) {
        atomic_store(&stall_released, 1);
        pthread_join(th, NULL);
        ck_abort_msg("inconclusive: host 0 %s (%lld sessions idle in "
                     "transaction)",
                     atomic_load(&stalled) ? "stalled" : "never stalled", idle);
    }
    sleep(1);
    static gen_batch g;
    one_key(&g, 1, 0, run[1].epoch, "k-other");
    tm_error err = {sizeof err, ""};
    double t0 = mono_s();
    tm_status rc = api->commit(run[1].sink, &g.b, &err);
    double took = mono_s() - t0;
    long long idle_after = sql2_int(q);
    atomic_store(&stall_released, 1);
    pthread_join(th, NULL);
    ck_assert_msg(rc == TM_OK,
                  "host 1's commit while host 0 stalled at %s: %s after %.3f "
                  "s: %s",
                  stall_at, tm_status_name(rc), took, err.message);
    ck_assert_msg(idle_after == 0, "host 0's session still in its "
                                   "transaction");
    ck_assert_msg(run[0].last == TM_RETRY,
                  "host 0's commit, its session ended: %s: %s",
                  tm_status_name(run[0].last), run[0].why);
    ck_assert_int_eq(
        sql2_int("SELECT count(*) FROM $A.t WHERE _tm_identity = 'k-other'"),
        1);
    ck_assert_int_eq(
        sql2_int("SELECT count(*) FROM $A.t WHERE _tm_partition = 0"), 0);
    one_key(&g, 0, 0, run[0].epoch, "k-stalled");
    commit_ok(run[0].sink, &g, "host 0 again", 1);
    ck_assert_int_eq(sql2_int("SELECT count(*) FROM $A.t WHERE _tm_identity "
                              "= 'k-stalled'"),
                     1);
    for (int i = 0; i < 2; i++) {
        api->close(run[i].sink);
        tm_settings_free(settings[i]);
    }
}
END_TEST

/* A host paused inside a commit before the connector's keys row is locked
 * (its marker check held past the session's idle timeout, 10 s: a stopped
 * or swapped-out process) has its session ended by the server: the commit
 * is TM_RETRY, nothing of it stored, and the resend stores its key once.
 * Inconclusive unless the session was ended while paused. */
static atomic_int pause_armed;
static tm_status (*real_marker_check)(const tm_batch *, const tm_marker *,
                                      tm_error *);

static tm_status pausing_marker_check(const tm_batch *b, const tm_marker *m,
                                      tm_error *err) {
    if (atomic_exchange(&pause_armed, 0))
        sleep(12);
    return real_marker_check(b, m, err);
}

START_TEST(host_paused_inside_a_commit_is_retry) {
    make_schemas();
    statement_timeout_ms = 10000;
    paths seen = {0};
    tm_host_api host;
    tm_settings *settings;
    tm_sink_config config;
    void *sink = open_sink(0, 0, &host, &settings, &config, &seen);
    statement_timeout_ms = 0;
    int64_t epoch = claim(sink, 0).epoch;
    static gen_batch g;
    one_key(&g, 0, 0, epoch, "k0");
    commit_ok(sink, &g, "first", 0);
    real_marker_check = host.marker_check;
    host.marker_check = pausing_marker_check;
    atomic_store(&pause_armed, 1);
    one_key(&g, 0, 1, epoch, "k-paused");
    tm_error err = {sizeof err, ""};
    tm_status rc = api->commit(sink, &g.b, &err);
    ck_assert_msg(strstr(err.message, "25P03") ||
                      strstr(err.message, "idle-in-transaction") || rc == TM_OK,
                  "inconclusive: the paused commit failed otherwise: %s: %s",
                  tm_status_name(rc), err.message);
    ck_assert_msg(rc == TM_RETRY, "the paused commit: %s: %s",
                  tm_status_name(rc), err.message);
    ck_assert_int_eq(
        sql2_int("SELECT count(*) FROM $A.t WHERE _tm_identity = 'k-paused'"),
        0);
    commit_ok(sink, &g, "resend", 1);
    ck_assert_int_eq(
        sql2_int("SELECT count(*) FROM $A.t WHERE _tm_identity = 'k-paused'"),
        1);
    api->close(sink);
    tm_settings_free(settings);
}
END_TEST

/* Two hosts of one connector, keys in memory: sink I holds partition I. */
typedef struct two_hosts {
    paths seen[2]; /* each sink's host_ctx */
    tm_host_api host[2];
    tm_settings *settings[2];
    tm_sink_config config[2];
    void *sink[2];
    int64_t epoch[2];
} two_hosts;

static void two_hosts_open(two_hosts *h) {
    make_schemas();
    memset(h, 0, sizeof *h);
    for (int i = 0; i < 2; i++) {
        h->sink[i] = open_sink(0, 0, &h->host[i], &h->settings[i],
                               &h->config[i], &h->seen[i]);
        h->epoch[i] = claim(h->sink[i], i).epoch;
    }
}

static void two_hosts_close(two_hosts *h) {
    for (int i = 0; i < 2; i++) {
        api->close(h->sink[i]);
        tm_settings_free(h->settings[i]);
    }
}

/* Keys decided from the set before the connector's row is locked, the
 * two hosts' commits interleaved for certain: another session holds the
 * connector's row, both hosts (threads, partitions 0 and 1) decide the
 * same two keys as new, write their rows and wait for that row (seen
 * waiting); released, the first commits, and the second finds the first's
 * batch row under the lock and decides again: dup-key resent with the
 * same payload is a duplicate, conflict-key with another payload an
 * identity_conflict, each key stored once. */
typedef struct one_commit {
    void *sink;
    gen_batch *g;
    tm_status rc;
    char why[TM_ERROR_MAX];
} one_commit;

static void *commit_once(void *arg) {
    one_commit *c = arg;
    tm_error err = {sizeof err, ""};
    c->rc = api->commit(c->sink, &c->g->b, &err);
    snprintf(c->why, sizeof c->why, "%s", err.message);
    return NULL;
}

START_TEST(keys_decided_before_the_lock_by_two_hosts_are_decided_again) {
    static two_hosts h;
    two_hosts_open(&h);
    static gen_batch g[2];
    one_commit c[2];
    for (int i = 0; i < 2; i++) {
        one_key(&g[i], i, 0, h.epoch[i], "dup-key");
        g[i].rec[1] = g[i].rec[0];
        g[i].rec[1].offset = 1;
        snprintf(g[i].ident[1], sizeof g[i].ident[1], "conflict-key");
        snprintf(g[i].hash[1], sizeof g[i].hash[1], "h%d", i);
        g[i].rec[1].identity = g[i].ident[1];
        g[i].rec[1].identity_hash = g[i].hash[1];
        g[i].range.end_offset = 2;
        g[i].b.nrecords = 2;
        c[i] = (one_commit){.sink = h.sink[i], .g = &g[i]};
    }
    PGconn *holder = pgt_connect(pgt_conninfo());
    char q[512];
    snprintf(q, sizeof q,
             "BEGIN; SELECT 1 FROM \"%s\".tidemark_keysets WHERE connector = "
             "'%s' FOR UPDATE",
             schema[0], connector);
    PGresult *res = pgt_sql(holder, q);
    ck_assert_msg(PQntuples(res) == 1, "inconclusive: no connector row");
    PQclear(res);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, commit_once, &c[i]), 0);
    /* both hosts' rows written, both waiting for the connector's row */
    snprintf(q, sizeof q,
             "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
             "'%s' AND wait_event_type = 'Lock' AND query LIKE "
             "'%%tidemark_keysets%%FOR UPDATE'",
             connector);
    long long waiting = 0;
    for (int t = 0; t < 2000 && waiting < 2; t++) {
        waiting = sql2_int(q);
        if (waiting < 2)
            nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    ck_assert_msg(waiting == 2,
                  "inconclusive: %lld hosts seen waiting for the connector's "
                  "row",
                  waiting);
    ck_assert_int_eq(sql2_int("SELECT count(*) FROM $A.t"), 0);
    PQclear(pgt_sql(holder, "COMMIT"));
    PQfinish(holder);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(c[i].rc == TM_OK, "host %d: %s: %s", i,
                      tm_status_name(c[i].rc), c[i].why);
    }
    char v[512];
    sql2("SELECT concat_ws(' ', (SELECT string_agg(_tm_identity || '@' || "
         "_tm_partition, ',' ORDER BY _tm_identity, _tm_partition) FROM "
         "$A.t), (SELECT sum(duplicates) FROM $A.tidemark_markers), (SELECT "
         "coalesce(string_agg(reason, ','), 'none') FROM "
         "$A.tidemark_dead_letters), (SELECT sum(nkeys) FROM "
         "$A.tidemark_key_batches))",
         v, sizeof v);
    /* whichever host committed first stored both keys */
    char want[2][128];
    for (int i = 0; i < 2; i++)
        snprintf(want[i], sizeof want[i],
                 "conflict-key@%d,dup-key@%d 1 identity_conflict 2", i, i);
    ck_assert_msg(strcmp(v, want[0]) == 0 || strcmp(v, want[1]) == 0,
                  "rows, duplicates, dead letters, keys stored: %s", v);
    ck_assert_msg(h.seen[0].again + h.seen[1].again == 1,
                  "inconclusive: %d and %d commits decided again",
                  h.seen[0].again, h.seen[1].again);
    two_hosts_close(&h);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("postgres_keys");
    TCase *tc = tcase_create("paths");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, set_and_per_record_paths_agree);
    tcase_add_test(tc, new_session_prepares_the_keys_statement_again);
    suite_add_tcase(s, tc);
    TCase *mem = tcase_create("memory");
    tcase_add_checked_fixture(mem, setup, teardown);
    tcase_set_timeout(mem, 240);
    tcase_add_test(mem, memory_and_rows_agree);
    tcase_add_test(mem, memory_and_rows_agree_with_a_retention);
    tcase_add_test(mem, duplicates_only_after_another_hosts_batch);
    tcase_add_test(mem, two_hosts_at_once_store_each_key_once);
    tcase_add_test(mem,
                   keys_decided_before_the_lock_by_two_hosts_are_decided_again);
    tcase_add_test(mem, two_hosts_follow_a_removal_without_a_reload);
    tcase_add_test(mem, rows_host_beside_memory_is_refused_not_stored_twice);
    suite_add_tcase(s, mem);
    TCase *gens = tcase_create("generations");
    tcase_add_checked_fixture(gens, setup, teardown);
    tcase_set_timeout(gens, 60);
    tcase_add_test(gens, removal_followed_across_two_to_the_32_generations);
    suite_add_tcase(s, gens);
    TCase *hosts = tcase_create("hosts");
    tcase_add_checked_fixture(hosts, setup, teardown);
    tcase_set_timeout(hosts, 120);
    tcase_add_loop_test(hosts, stalled_host_is_ended_and_the_other_commits, 0,
                        2);
    tcase_add_test(hosts,
                   upsert_hosts_take_the_keys_row_and_a_table_row_in_one_order);
    tcase_add_test(hosts, host_paused_inside_a_commit_is_retry);
    suite_add_tcase(s, hosts);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
