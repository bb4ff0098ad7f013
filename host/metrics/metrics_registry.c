#include "metrics/metrics_registry.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/prom_text.h"
#include "services/clock.h"

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
    return tm_clock_mono_ns();
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

void tm_metrics_snapshot(const tm_metrics_conn *m, tm_metrics_values *out) {
    for (int b = 0; b <= TM_METRICS_COMMIT_BUCKETS; b++)
        out->commit_buckets[b] = atomic_load(&m->commit_buckets[b]);
    out->commit_count = atomic_load(&m->commit_count);
    out->commit_ns = atomic_load(&m->commit_ns);
    out->convert_count = atomic_load(&m->convert_count);
    out->convert_ns = atomic_load(&m->convert_ns);
    out->errors = atomic_load(&m->errors);
    out->fetchq_bytes = atomic_load(&m->fetchq_bytes);
    out->fetchq_messages = atomic_load(&m->fetchq_messages);
}

static void write_histogram(FILE *out, const char *name,
                            const tm_metrics_values *v) {
    const char *bucket = "tidemark_commit_duration_seconds_bucket";
    uint64_t cum = 0;
    for (int b = 0; b < TM_METRICS_COMMIT_BUCKETS; b++) {
        cum += v->commit_buckets[b];
        const char *l[] = {"connector", name, "le", bound_names[b]};
        tm_prom_sample_u64(out, bucket, l, 2, cum);
    }
    /* A snapshot taken while a commit was recorded may count it in its
     * bucket and not yet in count, or the other way: +Inf and count are
     * the larger of the two, so the buckets never exceed them. */
    cum += v->commit_buckets[TM_METRICS_COMMIT_BUCKETS];
    uint64_t count = v->commit_count > cum ? v->commit_count : cum;
    const char *l[] = {"connector", name, "le", "+Inf"};
    tm_prom_sample_u64(out, bucket, l, 2, count);
    const char *c[] = {"connector", name};
    tm_prom_sample(out, "tidemark_commit_duration_seconds_sum", c, 1,
                   (double)v->commit_ns / 1e9);
    tm_prom_sample_u64(out, "tidemark_commit_duration_seconds_count", c, 1,
                       count);
}

/* The consumer's fetch queue, in bytes or in messages; a connector whose
 * consumer gave no statistics yet has no sample. */
static void fetch_queue(FILE *out, const char *const *names,
                        const tm_metrics_values *const *values, size_t n,
                        int messages) {
    const char *name = messages ? "tidemark_consumer_fetch_queue_messages"
                                : "tidemark_consumer_fetch_queue_bytes";
    tm_prom_family(out, name, "gauge",
                   messages ? "Messages fetched by the Kafka consumer and not "
                              "consumed yet, at its last statistics."
                            : "Bytes fetched by the Kafka consumer and not "
                              "consumed yet, at its last statistics.");
    for (size_t i = 0; i < n; i++) {
        if (!values[i])
            continue;
        int64_t v =
            messages ? values[i]->fetchq_messages : values[i]->fetchq_bytes;
        if (v < 0)
            continue;
        const char *c[] = {"connector", names[i]};
        tm_prom_sample_u64(out, name, c, 1, (uint64_t)v);
    }
}

void tm_metrics_values_write(FILE *out, const char *const *names,
                             const tm_metrics_values *const *values, size_t n) {
    tm_prom_family(out, "tidemark_commit_duration_seconds", "histogram",
                   "Duration of the sink's commit() calls (one per attempt, "
                   "whatever the answer), since the host started.");
    for (size_t i = 0; i < n; i++)
        if (values[i])
            write_histogram(out, names[i], values[i]);
    tm_prom_family(out, "tidemark_record_conversion_seconds", "summary",
                   "Time spent converting records into rows, since the host "
                   "started.");
    for (size_t i = 0; i < n; i++) {
        if (!values[i])
            continue;
        const char *c[] = {"connector", names[i]};
        tm_prom_sample(out, "tidemark_record_conversion_seconds_sum", c, 1,
                       (double)values[i]->convert_ns / 1e9);
        tm_prom_sample_u64(out, "tidemark_record_conversion_seconds_count", c,
                           1, values[i]->convert_count);
    }
    tm_prom_family(out, "tidemark_errors_total", "counter",
                   "Errors the connector recorded (transient ones it retries "
                   "and the one that failed it), since the host started.");
    for (size_t i = 0; i < n; i++) {
        if (!values[i])
            continue;
        const char *c[] = {"connector", names[i]};
        tm_prom_sample_u64(out, "tidemark_errors_total", c, 1,
                           values[i]->errors);
    }
    fetch_queue(out, names, values, n, 0);
    fetch_queue(out, names, values, n, 1);
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
