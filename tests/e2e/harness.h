/* The harness of the end-to-end tests of `tidemark run`: a real Kafka
 * broker (scripts/kafka.sh), the real tidemark binary as a child process,
 * real SQLite files. Every check reads the source of truth: the rows and
 * markers in the SQLite file and Kafka's own offsets, never the host's
 * counters or logs. A failed check exits the test with status 1. */
#ifndef TM_E2E_HARNESS_H
#define TM_E2E_HARNESS_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

void h_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)))
__attribute__((noreturn));
void h_step(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define H_CHECK(cond, ...)                                                     \
    do {                                                                       \
        if (!(cond))                                                           \
            h_fail(__VA_ARGS__);                                               \
    } while (0)

/* Setup: bootstrap from TIDEMARK_KAFKA_BOOTSTRAP, the tidemark binary and
 * plugin dir from argv, a fresh work directory. Names made unique per run
 * (h_name) so reruns against one broker never see old data. */
void h_init(const char *tidemark_bin, const char *plugin_dir,
            const char *scenario);
/* The scenario passed: says so and removes its work dir (kept when
 * TIDEMARK_KEEP_WORKDIR is set; a failed scenario always keeps it). */
void h_pass(void);
/* A program's scenarios by name: h_main runs the one argv[3] names
 * (argv: TIDEMARK_BIN PLUGIN_DIR SCENARIO) after h_init, and says PASS;
 * 2 on a usage error or an unknown name. */
typedef struct h_scenario {
    const char *name;
    void (*fn)(void);
} h_scenario;
int h_main(int argc, char **argv, const char *prog, const h_scenario *list,
           size_t n);
#define H_NSCENARIOS(list) (sizeof(list) / sizeof((list)[0]))

const char *h_name(const char *base); /* "<base>-<run id>", static buffer
                                         per call: copy it */
const char *h_workdir(void);
const char *h_bootstrap(void);

/* Kafka. */
void h_create_topic(const char *topic, int partitions, const char *cfg_key,
                    const char *cfg_value);
/* A connector reading a topic of its own, its dead letters to another:
 * TOPIC and NAME get h_name(PREFIX), DLQ h_name(PREFIX "-dl"), SIZE bytes
 * each; both topics are created with one partition, the dead-letter one
 * with the config DLQ_KEY=DLQ_VALUE when DLQ_KEY is not NULL. */
void h_dl_setup(const char *prefix, char *topic, char *dlq, char *name,
                size_t size, const char *dlq_key, const char *dlq_value);
rd_kafka_t *h_producer(const char *transactional_id, const char *max_bytes);
/* Produces and waits for the delivery report; returns the offset. */
int64_t h_produce(rd_kafka_t *p, const char *topic, int32_t partition,
                  const void *key, size_t klen, const void *val, size_t vlen,
                  const char *hname, const char *hval);
void h_watermarks(const char *topic, int32_t partition, int64_t *lo,
                  int64_t *hi);
/* The consumer group's committed offset (-1001 when none). */
int64_t h_group_offset(const char *group, const char *topic, int32_t partition);

/* The host. */
pid_t h_spawn(const char *config_path, const char *log_name);
/* `tidemark run A B` (two connectors in one process). */
pid_t h_spawn2(const char *config_a, const char *config_b,
               const char *log_name);
/* The same with extra environment ("NAME=value" strings, NULL-ended). */
pid_t h_spawn_env(const char *config_path, const char *log_name,
                  const char *const *env);
/* Sends sig, waits up to timeout_ms; returns the exit status (or 128+sig
 * when killed by a signal); fails the test when it does not exit. */
int h_stop(pid_t pid, int sig, int timeout_ms, int64_t *took_ms);
void h_dump_log(const char *log_name);

/* Runs `tidemark ARGS...` (NULL-ended) to completion with stdout and
 * stderr into the work dir's file out_name; returns the exit status. */
int h_tidemark(const char *out_name, const char *const *args);
/* The text of a file of the work dir (static buffer, up to 64 KiB). */
const char *h_read_file(const char *name);
/* Deletes the records of one partition below offset (DeleteRecords): the
 * log start offset moves there, as retention would move it. */
void h_delete_records(const char *topic, int32_t partition, int64_t offset);

/* SQLite (read-only connections, as an observer). */
int64_t h_sql_int(const char *db, const char *sql);
/* The same with a printf-style statement. */
int64_t h_sqlf(const char *db, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* WORKDIR/NAME (one of 8 static buffers, reused in turn). */
const char *h_path(const char *name);
/* The status file of CONNECTOR under WORKDIR/state (static buffer), or ""
 * when there is none. */
const char *h_status_text(const char *connector);
/* PostgreSQL (TIDEMARK_PG_CONNINFO, one connection kept): the first
 * column of a one-row answer to a printf-style query, -1 otherwise. */
int64_t h_pg_int(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* SIGTERM; the host must exit 0 within 10 s, else the test fails. */
void h_stop_clean(pid_t pid);
/* Waits until every listed partition's marker reached its high watermark
 * (from the broker). Fails after timeout_ms. */
void h_wait_caught_up(const char *db, const char *connector, const char *topic,
                      int partitions, int timeout_ms);
int64_t h_now_ms(void);
void h_sleep_ms(int64_t ms);

/* Writes a file (a config) into the work dir; returns its path. */
const char *h_write_file(const char *name, const char *text);

/* Produces n records to one partition without waiting for each; values are
 * made by fmt with the record's index (printf "%d"); then flushes and checks
 * every delivery report. */
void h_produce_many(rd_kafka_t *p, const char *topic, int32_t partition,
                    int first, int n, const char *fmt);

/* ---- additions for the crash suite (tests/crash) ---------------------- */

/* Creates a topic with any number of configs: cfg is NULL-ended pairs
 * {"key", "value", ..., NULL}. */
void h_create_topic_cfg(const char *topic, int partitions,
                        const char *const *cfg);
/* The offsets of the records Kafka holds in one partition now, read with a
 * read_committed consumer from the log start to the end (aborted records,
 * control records and compacted-away records are not there): the source of
 * truth the sink is compared with. Returns the count; *out (malloc'd, the
 * caller frees it) gets the offsets in order. */
size_t h_read_offsets(const char *topic, int32_t partition, int64_t **out);
/* `tidemark run CONFIG...` with any number of configs (NULL-ended) and
 * extra environment ("NAME=value", NULL-ended, or NULL). */
pid_t h_spawn_many(const char *const *configs, const char *log_name,
                   const char *const *env);
/* The consumer group's description: returns its member count; when owners
 * is given, owners[p] (for p < partitions of topic) gets the owning
 * member's group.instance.id, else "CLIENT_ID/MEMBER_ID", or "" when no
 * member has the partition. */
#define H_OWNER_MAX 160
int h_group_owners(const char *group, const char *topic, int partitions,
                   char (*owners)[H_OWNER_MAX]);
/* AlterConfigs of a topic: cfg is NULL-ended pairs, the topic's whole
 * set of dynamic configs (a config left out returns to its default). */
void h_alter_topic_cfg(const char *topic, const char *const *cfg);
/* DeleteGroups: the group and all its committed offsets. */
void h_delete_group(const char *group);
/* AlterConsumerGroupOffsets for partitions 0..n-1 of topic. */
void h_alter_group_offsets(const char *group, const char *topic, int n,
                           const int64_t *offsets);
/* Produces one keyed record without waiting (retried while the queue is
 * full); h_flush then waits for every delivery (fails after 60 s). */
void h_produce_async(rd_kafka_t *p, const char *topic, int32_t partition,
                     const char *key, const void *val, size_t vlen);
void h_flush(rd_kafka_t *p);

/* ---- fault points (host/services/fault.h) ---------------------------- */

/* The pipe a host writes the name of the fault point it reached to
 * (TIDEMARK_FAULT_FD): put fd_env and the TIDEMARK_FAULT* settings into the
 * spawn's environment, then call h_fault_wait. */
typedef struct h_fault_pipe {
    int rfd, wfd;
    char fd_env[64]; /* "TIDEMARK_FAULT_FD=<wfd>" */
    /* h_fault_hold_env's strings */
    char point_env[96], hit_env[64];
    const char *env[5];
} h_fault_pipe;
void h_fault_pipe_open(h_fault_pipe *fp);
/* The environment (NULL-ended, kept in fp) of a host that holds itself
 * still (TIDEMARK_FAULT_ACTION=stop) at the hit-th pass of fault point
 * point and reports it on fp's pipe (fp opened first). */
const char *const *h_fault_hold_env(h_fault_pipe *fp, const char *point,
                                    int hit);
/* `tidemark run CONFIG` held so at point's hit-th pass: returns once the
 * host reported point and is seen stopped there (else the test fails as
 * inconclusive, h_fault_wait). */
pid_t h_spawn_held(const char *config_path, const char *log_name,
                   const char *point, int hit);
/* After the spawn of the host that writes to it: the parent's write end
 * closed and the read end kept from later children, so that only that
 * host holds the pipe open (its death ends h_fault_wait's read at once). */
void h_fault_pipe_spawned(h_fault_pipe *fp);
/* Both ends closed, for a host that was never waited for. */
void h_fault_pipe_close(h_fault_pipe *fp);
/* Closes the parent's write end, reads the name the host reported (up to
 * its newline, or the host's death; 60 s at most) and fails the test as
 * inconclusive unless it is point. With stopped (TIDEMARK_FAULT_ACTION=
 * stop), also waits until pid is seen stopped. */
void h_fault_wait(h_fault_pipe *fp, const char *point, pid_t pid, int stopped);
/* The state letter of /proc/PID/stat ('T' stopped), '?' when gone. */
char h_proc_state(pid_t pid);

#endif
