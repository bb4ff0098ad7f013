/* What the change-data-capture end-to-end tests share (cdc_e2e.c: a
 * Debezium stream against the state it leaves; cdc_order_e2e.c: the order
 * of change events across keys in PostgreSQL, and PostgreSQL against
 * SQLite): a target (a table in SQLite or PostgreSQL and the connector
 * writing it), its config, the host run until its markers reach Kafka's
 * high watermarks, and reads of the target's database. Every scenario
 * produces to partition 0 of a topic of PARTITIONS partitions unless it
 * says otherwise. */
#ifndef TM_E2E_CDC_COMMON_H
#define TM_E2E_CDC_COMMON_H

#include <librdkafka/rdkafka.h>
#include <sqlite3.h>
#include <stdint.h>

#include "harness.h"

#define PARTITIONS 2

typedef struct target {
    int pg;
    char db[1024]; /* SQLite file */
    char table[128];
    char connector[128];
    char topic[128];
} target;

/* Columns id (int, the key) and name (text) of Debezium change events. */
#define DEBEZIUM_MAPPING                                                       \
    "{\"mode\": \"json\", \"format\": \"debezium\", \"columns\": ["            \
    "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", \"key\": "    \
    "true}, {\"name\": \"name\", \"pointer\": \"/name\", \"type\": "           \
    "\"text\"}]}"

/* A batch waits this long for more records: all of a scenario's few
 * events, produced before the host starts, make one batch. */
#define ONE_BATCH_WAIT_MS 2000

/* A seeded pseudo-random stream (splitmix64). */
void seed_rand(uint64_t seed);
uint64_t next_rand(void);

/* The run's names for a target in SQLite (PG 0) or PostgreSQL; _as adds
 * SUFFIX to them, for a second target in one scenario. */
void init_target(target *t, int pg);
void init_target_as(target *t, int pg, const char *suffix);

/* count(*) of the target table with a WHERE clause made by FMT_WHERE from
 * A and B ("%.0d%s", 0, "": every row). */
int64_t count_rows(const target *t, const char *fmt_where, int a,
                   const char *b);
/* The sum of the connector's markers on the topic; -1 when none. */
int64_t marker_sum(const target *t);
/* The sum of the topic's high watermarks, from the broker. */
int64_t high_sum(const target *t);
/* Until marker_sum reaches high_sum: CAUGHT_UP; or until the host on PID
 * (when > 0) exits: its exit status (128 + signal when killed); or
 * CAUGHT_UP_TIMEOUT after TIMEOUT_MS. */
#define CAUGHT_UP         (-1)
#define CAUGHT_UP_TIMEOUT (-2)
int wait_markers(const target *t, pid_t pid, int64_t timeout_ms);
/* wait_markers without a host to watch; fails after 120 s. */
void wait_caught_up(const target *t);
/* Starts the host on CFG, waits until caught up, stops it (exit 0). */
void run_until_caught_up(const target *t, const char *cfg, const char *log);
/* Runs the host until its markers reach the high watermarks (1), it exits
 * (0) or 60 s pass (0); then stops it. */
int run_caught_up(const target *t, const char *cfg, const char *log);

/* The connector's config into the work dir's FILE: batches of up to
 * MAX_RECORDS records, cut after MAX_WAIT_MS. _with: "cdc.json", 40
 * records, 100 ms; config: that with DEBEZIUM_MAPPING. */
const char *config_file(const target *t, const char *mapping, const char *file,
                        int max_records, int max_wait_ms);
/* config_file with the batch's commit_timeout_ms (none when 0). */
const char *config_file_timeout(const target *t, const char *mapping,
                                const char *file, int max_records,
                                int max_wait_ms, int commit_timeout_ms);
const char *config_with(const target *t, const char *mapping);
/* SQLite's write lock on the target's file (BEGIN IMMEDIATE), held until
 * sqlite_write_unlock; inconclusive when it cannot be taken. */
sqlite3 *sqlite_write_lock(const target *t);
void sqlite_write_unlock(sqlite3 *lock);
const char *config(const target *t);

/* Runs SQL (statements without results) on PostgreSQL; any error fails
 * the test as inconclusive. */
void pg_do(const char *sql);
/* The target table (id, name NAME_SQL) made before the host makes it,
 * with upsert's unique index on id; _checked: a CHECK refusing "bad". */
void create_table_as(const target *t, const char *name_sql);
void create_checked_table(const target *t);

/* A bare Debezium event of key ID into partition 0 (NAME NULL: a
 * delete); bad_marker: a malformed one, a dead letter "envelope" that
 * carries its batch id. */
void plain_event(rd_kafka_t *p, const target *t, int id, const char *op,
                 const char *name);
void bad_marker(rd_kafka_t *p, const target *t);

/* A Debezium create (op "c") in JsonConverter's envelope: the row
 * schema's fields ROWFIELDS (field schemas, comma-separated) for before
 * and after, payload AFTER, record key KEY (its bytes as given), into
 * PARTITION. */
void schema_create(rd_kafka_t *p, const target *t, int32_t partition,
                   const char *key, const char *rowfields, const char *after);
/* The record key {"id": ID} (int32) in JsonConverter's envelope, in BUF
 * (at least 160 bytes). */
const char *enveloped_id_key(char *buf, size_t n, int id);

/* The connector's dead letters of REASON, read from the target. */
int64_t dead_letters(const target *t, const char *reason);
/* The bad markers at offsets FIRST and LAST of partition 0 are dead
 * letters of one batch, so every event between them was in it; else the
 * scenario is inconclusive. */
void check_one_batch(const target *t, int64_t first, int64_t last);
/* `tidemark verify CFG` must exit 0. */
void check_verify(const char *cfg);

#endif
