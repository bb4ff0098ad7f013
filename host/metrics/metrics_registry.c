#include "metrics/metrics_registry.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics/prom_text.h"

const double tm_metrics_commit_bounds[TM_METRICS_COMMIT_BUCKETS] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
/* The same bounds as the "le" label shows them. */
static const char *const bound_names[TM_METRICS_COMMIT_BUCKETS] = {
    "0.005", "0.01", "0.025", "0.05", "0.1", "0.25",
    "0.5",   "1",    "2.5",   "5",    "10",  "30"};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tm_metrics_conn *head; /* only added to (under lock) until reset */

tm_metrics_conn *tm_metrics_conn_get(const char *connector) {
    pthread_mutex_lock(&lock);
    tm_metrics_conn *m = head;
    while (m && strcmp(m->name, connector) != 0)
        m = m->next;
    if (!m && (m = calloc(1, sizeof *m)) != NULL) {
        snprintf(m->name, sizeof m->name, "%s", connector);
        atomic_init(&m->fetchq_bytes, -1);
        atomic_init(&m->fetchq_messages, -1);
        m->next = head;
        head = m;
    }
    pthread_mutex_unlock(&lock);
    return m;
}

uint64_t tm_metrics_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void tm_metrics_commit_observe(tm_metrics_conn *m, uint64_t ns) {
    if (!m)
        return;
    double s = (double)ns / 1e9;
    int b = 0;
    while (b < TM_METRICS_COMMIT_BUCKETS && s > tm_metrics_commit_bounds[b])
        b++;
    atomic_fetch_add(&m->commit_buckets[b], 1);
    atomic_fetch_add(&m->commit_ns, ns);
    atomic_fetch_add(&m->commit_count, 1);
}

void tm_metrics_convert_observe(tm_metrics_conn *m, uint64_t ns) {
    if (!m)
        return;
    atomic_fetch_add(&m->convert_ns, ns);
    atomic_fetch_add(&m->convert_count, 1);
}

void tm_metrics_error(tm_metrics_conn *m) {
    if (m)
        atomic_fetch_add(&m->errors, 1);
}

static void write_histogram(FILE *out, const tm_metrics_conn *m) {
    const char *name = "tidemark_commit_duration_seconds_bucket";
    uint64_t cum = 0;
    for (int b = 0; b <= TM_METRICS_COMMIT_BUCKETS; b++) {
        /* Buckets are cumulative; count is read after them, so a commit
         * recorded meanwhile can only make count larger than +Inf's
         * bucket by the ones in flight: +Inf is written as count. */
        cum += atomic_load(&m->commit_buckets[b]);
        if (b == TM_METRICS_COMMIT_BUCKETS)
            break;
        const char *l[] = {"connector", m->name, "le", bound_names[b]};
        tm_prom_sample_u64(out, name, l, 2, cum);
    }
    uint64_t count = atomic_load(&m->commit_count);
    if (count < cum)
        count = cum;
    const char *l[] = {"connector", m->name, "le", "+Inf"};
    tm_prom_sample_u64(out, name, l, 2, count);
    const char *c[] = {"connector", m->name};
    tm_prom_sample(out, "tidemark_commit_duration_seconds_sum", c, 1,
                   (double)atomic_load(&m->commit_ns) / 1e9);
    tm_prom_sample_u64(out, "tidemark_commit_duration_seconds_count", c, 1,
                       count);
}

/* The consumer's fetch queue, in bytes or in messages; a connector whose
 * consumer gave no statistics yet has no sample. */
static void fetch_queue(FILE *out, const tm_metrics_conn *list, int messages) {
    const char *name = messages ? "tidemark_consumer_fetch_queue_messages"
                                : "tidemark_consumer_fetch_queue_bytes";
    tm_prom_family(out, name, "gauge",
                   messages ? "Messages fetched by the Kafka consumer and not "
                              "consumed yet, at its last statistics."
                            : "Bytes fetched by the Kafka consumer and not "
                              "consumed yet, at its last statistics.");
    for (const tm_metrics_conn *m = list; m; m = m->next) {
        int64_t v =
            atomic_load(messages ? &m->fetchq_messages : &m->fetchq_bytes);
        if (v < 0)
            continue;
        const char *c[] = {"connector", m->name};
        tm_prom_sample_u64(out, name, c, 1, (uint64_t)v);
    }
}

void tm_metrics_registry_write(FILE *out) {
    pthread_mutex_lock(&lock);
    tm_metrics_conn *list = head;
    pthread_mutex_unlock(&lock);
    /* Entries are never removed while the process runs: the list can be
     * walked without the lock once its head is read. */
    if (!list)
        return;
    tm_prom_family(out, "tidemark_commit_duration_seconds", "histogram",
                   "Duration of the sink's commit() calls (one per attempt, "
                   "whatever the answer), since this process started.");
    for (const tm_metrics_conn *m = list; m; m = m->next)
        write_histogram(out, m);
    tm_prom_family(out, "tidemark_record_conversion_seconds", "summary",
                   "Time spent converting records into rows, since this "
                   "process started.");
    for (const tm_metrics_conn *m = list; m; m = m->next) {
        const char *c[] = {"connector", m->name};
        tm_prom_sample(out, "tidemark_record_conversion_seconds_sum", c, 1,
                       (double)atomic_load(&m->convert_ns) / 1e9);
        tm_prom_sample_u64(out, "tidemark_record_conversion_seconds_count", c,
                           1, atomic_load(&m->convert_count));
    }
    tm_prom_family(out, "tidemark_errors_total", "counter",
                   "Errors the connector recorded (transient ones it retries "
                   "and the one that failed it), since this process "
                   "started.");
    for (const tm_metrics_conn *m = list; m; m = m->next) {
        const char *c[] = {"connector", m->name};
        tm_prom_sample_u64(out, "tidemark_errors_total", c, 1,
                           atomic_load(&m->errors));
    }
    fetch_queue(out, list, 0);
    fetch_queue(out, list, 1);
}

void tm_metrics_registry_reset(void) {
    pthread_mutex_lock(&lock);
    tm_metrics_conn *m = head;
    head = NULL;
    pthread_mutex_unlock(&lock);
    while (m) {
        tm_metrics_conn *next = m->next;
        free(m);
        m = next;
    }
}
