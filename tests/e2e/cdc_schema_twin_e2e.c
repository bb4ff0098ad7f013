/* Columns from the events' schemas in PostgreSQL, found by a second
 * review of issue 17 (each failed on the code before its fix):
 *   postgres_user_twin_column: a table the connector made from the events'
 *     schemas (id, name), to which the user added a column of their own,
 *     "Name" (nullable, not in the events): the batches, whose columns are
 *     exactly "id" and "name", go in after a restart (the case-only
 *     rename check refused every one: the table's "Name" equals the
 *     batch's "name" in ASCII case).
 *   postgres_user_twin_one_process: the same column added while the host
 *     runs, then an event with a new field makes the sink fit the table
 *     again.
 *   postgres_deletes_only_relocks: a process whose first batches are
 *     deletes only fits the table once, not at every one of them (each fit
 *     is ALTER TABLE ... ADD COLUMN IF NOT EXISTS, an ACCESS EXCLUSIVE
 *     lock: a reader's open transaction held the second delete batch up,
 *     which a DELETE alone, ROW EXCLUSIVE, does not wait for). */
#include <libpq-fe.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "cdc_common.h"

#define SCHEMA_MAPPING "{\"mode\": \"json\", \"format\": \"debezium\"}"
#define F(name, type, opt)                                                     \
    "{\"field\":\"" name "\",\"type\":\"" type "\",\"optional\":" opt "}"

static const char *env_key(int id) {
    static char key[256];
    return enveloped_id_key(key, sizeof key, id);
}

static void scenario_postgres_user_twin_column(void) {
    target t;
    init_target_as(&t, 1, "twin");
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    const char *cols =
        F("id", "int32", "false") "," F("name", "string", "true");
    schema_create(p, &t, 0, env_key(1), cols, "{\"id\":1,\"name\":\"one\"}");
    h_flush(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    H_CHECK(run_caught_up(&t, cfg, "run1.log"), "inconclusive: run 1");
    /* the user's own column, nullable, beside the connector's "name" */
    char sql[512];
    snprintf(sql, sizeof sql, "ALTER TABLE \"%s\" ADD COLUMN \"Name\" text",
             t.table);
    pg_do(sql);
    schema_create(p, &t, 0, env_key(2), cols, "{\"id\":2,\"name\":\"two\"}");
    h_flush(p);
    rd_kafka_destroy(p);
    int ok = run_caught_up(&t, cfg, "run2.log");
    H_CHECK(ok && count_rows(&t, "%.0dWHERE %s", 0, "id = 2") == 1,
            "a batch of exactly the table's columns was refused beside the "
            "user's own column \"Name\": caught up %d, markers %lld of %lld, "
            "row 2: %lld; status: %s",
            ok, (long long)marker_sum(&t), (long long)high_sum(&t),
            (long long)count_rows(&t, "%.0dWHERE %s", 0, "id = 2"),
            h_status_text(t.connector));
}

static void scenario_postgres_user_twin_one_process(void) {
    target t;
    init_target_as(&t, 1, "twin1");
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    const char *cols =
        F("id", "int32", "false") "," F("name", "string", "true");
    const char *more = F("id", "int32", "false") "," F(
        "name", "string", "true") "," F("note", "string", "true");
    schema_create(p, &t, 0, env_key(1), cols, "{\"id\":1,\"name\":\"one\"}");
    h_flush(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    pid_t pid = h_spawn(cfg, "run.log");
    wait_caught_up(&t);
    char sql[512];
    snprintf(sql, sizeof sql, "ALTER TABLE \"%s\" ADD COLUMN \"Name\" text",
             t.table);
    pg_do(sql);
    schema_create(p, &t, 0, env_key(2), more,
                  "{\"id\":2,\"name\":\"two\",\"note\":\"n\"}");
    h_flush(p);
    rd_kafka_destroy(p);
    int64_t want = high_sum(&t), t0 = h_now_ms();
    while (marker_sum(&t) != want && h_now_ms() - t0 < 60000)
        h_sleep_ms(200);
    int ok = marker_sum(&t) == want;
    fprintf(stderr, "status: %s\n", h_status_text(t.connector));
    h_stop(pid, SIGTERM, 30000, NULL);
    H_CHECK(ok && count_rows(&t, "%.0dWHERE %s", 0, "id = 2") == 1,
            "an added field was refused beside the user's own column "
            "\"Name\": caught up %d, markers %lld of %lld",
            ok, (long long)marker_sum(&t), (long long)high_sum(&t));
}

/* A Debezium delete of ID whose before image is {"id":ID,"name":NAME}. */
static void schema_delete(rd_kafka_t *p, const target *t, int id,
                          const char *rowfields, const char *name) {
    char value[4096];
    snprintf(value, sizeof value,
             "{\"schema\":{\"type\":\"struct\",\"fields\":["
             "{\"field\":\"before\",\"type\":\"struct\",\"optional\":true,"
             "\"fields\":[%s]},{\"field\":\"after\",\"type\":\"struct\","
             "\"optional\":true,\"fields\":[%s]},"
             "{\"field\":\"op\",\"type\":\"string\",\"optional\":false}]},"
             "\"payload\":{\"before\":{\"id\":%d,\"name\":\"%s\"},"
             "\"after\":null,\"op\":\"d\"}}",
             rowfields, rowfields, id, name);
    h_produce_async(p, t->topic, 0, env_key(id), value, strlen(value));
}

static void scenario_postgres_deletes_only_relocks(void) {
    target t;
    init_target_as(&t, 1, "twin2");
    h_create_topic(t.topic, PARTITIONS, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    const char *cols =
        F("id", "int32", "false") "," F("name", "string", "true");
    for (int id = 1; id <= 4; id++) {
        char after[64];
        snprintf(after, sizeof after, "{\"id\":%d,\"name\":\"n\"}", id);
        schema_create(p, &t, 0, env_key(id), cols, after);
    }
    h_flush(p);
    const char *cfg = config_with(&t, SCHEMA_MAPPING);
    H_CHECK(run_caught_up(&t, cfg, "run1.log"), "inconclusive: run 1");
    /* run 2 reads a delete first: a deletes-only batch */
    schema_delete(p, &t, 1, cols, "n");
    h_flush(p);
    pid_t pid = h_spawn(cfg, "run2.log");
    H_CHECK(wait_markers(&t, pid, 60000) == CAUGHT_UP,
            "inconclusive: the first delete");
    /* a reader's transaction: ACCESS SHARE on the table until it ends */
    const char *ci = getenv("TIDEMARK_PG_CONNINFO");
    PGconn *reader = PQconnectdb(ci ? ci : "");
    H_CHECK(PQstatus(reader) == CONNECTION_OK, "inconclusive: connect: %s",
            PQerrorMessage(reader));
    char sql[512];
    snprintf(sql, sizeof sql, "BEGIN; SELECT count(*) FROM \"%s\"", t.table);
    PGresult *r = PQexec(reader, sql);
    H_CHECK(PQresultStatus(r) == PGRES_TUPLES_OK, "inconclusive: reader: %s",
            PQerrorMessage(reader));
    PQclear(r);
    schema_delete(p, &t, 2, cols, "n");
    h_flush(p);
    rd_kafka_destroy(p);
    int ok = wait_markers(&t, pid, 20000) == CAUGHT_UP;
    int64_t waiting = h_pg_int(
        "SELECT count(*) FROM pg_locks WHERE relation = '\"%s\"'::regclass "
        "AND mode = 'AccessExclusiveLock' AND NOT granted",
        t.table);
    PQclear(PQexec(reader, "ROLLBACK"));
    PQfinish(reader);
    int after = wait_markers(&t, pid, 60000) == CAUGHT_UP;
    fprintf(stderr, "status: %s\n", h_status_text(t.connector));
    h_stop(pid, SIGTERM, 30000, NULL);
    H_CHECK(ok,
            "the second deletes-only batch waited for a reader's ACCESS SHARE "
            "lock: caught up within 20 s: %d; AccessExclusiveLock requests "
            "waiting on the table: %lld; caught up once the reader ended: %d",
            ok, (long long)waiting, after);
}

static const h_scenario SCENARIOS[] = {
    {"postgres_deletes_only_relocks", scenario_postgres_deletes_only_relocks},
    {"postgres_user_twin_column", scenario_postgres_user_twin_column},
    {"postgres_user_twin_one_process", scenario_postgres_user_twin_one_process},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "cdc_schema_twin_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
