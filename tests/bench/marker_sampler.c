/* marker_sampler: watches a connector's markers in its sink, the way
 * `tidemark offsets` reads them (the config's plugin opened through the
 * host's own loader, then the plugin's read_markers), so one program samples
 * SQLite, PostgreSQL and iceberg-lite alike and sees exactly what the sink
 * has committed, not what the host believes.
 *
 * usage: marker_sampler [--interval-ms N] [--seconds S] [--until-sum N]
 *                       [--partitions P] CONFIG
 *
 * Reads the markers of partitions 0..P-1 (8) of the config's first topic
 * every N ms (10) and prints one line per partition whose marker changed
 * since the previous read (every partition on the first read), then flushes:
 *   WALL_MS PARTITION NEXT_OFFSET EPOCH
 * WALL_MS is CLOCK_REALTIME after the read returned, in ms, comparable with
 * Kafka record timestamps. A move is therefore seen up to N ms plus one
 * read's time after the sink committed it: the summary on stderr gives the
 * reads' durations so that the bench can state its resolution:
 *   marker_sampler: reads=R errors=E interval_ms=N read_ms_p50=X
 *   read_ms_p99=Y read_ms_max=Z
 * Stops after S seconds (600), when the sum of the next offsets reaches
 * --until-sum (exit 0), or on SIGTERM/SIGINT. Exit 1 when S passed before
 * --until-sum was reached, 2 on usage or open errors.
 *
 * The sink is opened before anything else reads or writes it when the bench
 * starts this program first; the plugins' open creates a missing table
 * (idempotently), so the host that starts next finds it ready. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli_sink.h"
#include "services/error.h"

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

static double mono_ms(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int64_t wall_ms(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of the sorted t[0..n), 0 when empty. */
static double quantile(const double *t, size_t n, double q) {
    if (n == 0)
        return 0;
    size_t i = (size_t)(q * (double)n);
    return t[i < n ? i : n - 1];
}

static int parse_long(const char *s, long long min, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min)
        return -1;
    *out = v;
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: marker_sampler [--interval-ms N] [--seconds S] "
                    "[--until-sum N] [--partitions P] CONFIG\n");
}

/* Sleeps until the monotonic deadline (absolute, so the period does not
 * drift by the read's own time). */
static void sleep_until(struct timespec *next, long long interval_ms) {
    next->tv_nsec += (long)(interval_ms % 1000) * 1000000L;
    next->tv_sec += (time_t)(interval_ms / 1000);
    if (next->tv_nsec >= 1000000000L) {
        next->tv_nsec -= 1000000000L;
        next->tv_sec++;
    }
    while (!stop_flag &&
           clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, next, NULL) == EINTR)
        ;
}

typedef struct sampler {
    long long interval_ms, seconds, until_sum, parts;
    tm_cli_sink sink;
    tm_marker *m;
    int64_t *prev_next, *prev_epoch;
    double *reads; /* each read's duration, ms */
    size_t nreads, cap, errors;
    int seen; /* a read succeeded: later ones print only changes */
} sampler;

/* One read; prints the changed partitions. Returns the sum of the next
 * offsets (partitions without a marker count 0), or -1 on a read error. */
static long long sample_once(sampler *s) {
    const char *topic = s->sink.cfg->kafka.topics[0];
    for (long long p = 0; p < s->parts; p++) {
        memset(&s->m[p], 0, sizeof s->m[p]);
        s->m[p].struct_size = sizeof s->m[p];
        s->m[p].topic = topic;
        s->m[p].partition = (int32_t)p;
    }
    tm_error err = tm_error_init();
    double t0 = mono_ms();
    tm_status st = s->sink.inst.api->read_markers(s->sink.inst.sink, s->m,
                                                  (size_t)s->parts, &err);
    double took = mono_ms() - t0;
    int64_t now = wall_ms();
    if (s->nreads == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        double *r = realloc(s->reads, cap * sizeof *r);
        if (!r)
            return -1;
        s->reads = r;
        s->cap = cap;
    }
    s->reads[s->nreads++] = took;
    if (st != TM_OK) {
        if (s->errors++ == 0)
            fprintf(stderr, "marker_sampler: read_markers: %s: %s\n",
                    tm_status_name(st), err.message);
        return -1;
    }
    long long sum = 0;
    for (long long p = 0; p < s->parts; p++) {
        const tm_marker *m = &s->m[p];
        if (m->next_offset > 0)
            sum += m->next_offset;
        if (m->next_offset == s->prev_next[p] && m->epoch == s->prev_epoch[p] &&
            s->seen)
            continue;
        s->prev_next[p] = m->next_offset;
        s->prev_epoch[p] = m->epoch;
        if (printf("%" PRId64 " %lld %" PRId64 " %" PRId64 "\n", now, p,
                   m->next_offset, m->epoch) < 0)
            return -1;
    }
    s->seen = 1;
    if (fflush(stdout) != 0)
        return -1;
    return sum;
}

static int run(sampler *s) {
    size_t n = (size_t)s->parts;
    s->m = calloc(n, sizeof *s->m);
    s->prev_next = calloc(n, sizeof *s->prev_next);
    s->prev_epoch = calloc(n, sizeof *s->prev_epoch);
    if (!s->m || !s->prev_next || !s->prev_epoch) {
        fprintf(stderr, "marker_sampler: out of memory\n");
        return 2;
    }
    struct timespec next;
    if (clock_gettime(CLOCK_MONOTONIC, &next) != 0) {
        perror("marker_sampler: clock_gettime");
        return 2;
    }
    double end = mono_ms() + (double)s->seconds * 1e3;
    int rc = s->until_sum > 0 ? 1 : 0;
    while (!stop_flag && mono_ms() < end) {
        long long sum = sample_once(s);
        if (s->until_sum > 0 && sum >= s->until_sum) {
            rc = 0;
            break;
        }
        sleep_until(&next, s->interval_ms);
    }
    qsort(s->reads, s->nreads, sizeof *s->reads, cmp_double);
    fprintf(stderr,
            "marker_sampler: reads=%zu errors=%zu interval_ms=%lld "
            "read_ms_p50=%.2f read_ms_p99=%.2f read_ms_max=%.2f\n",
            s->nreads, s->errors, s->interval_ms,
            quantile(s->reads, s->nreads, 0.5),
            quantile(s->reads, s->nreads, 0.99),
            quantile(s->reads, s->nreads, 1.0));
    return rc;
}

int main(int argc, char **argv) {
    sampler s = {.interval_ms = 10, .seconds = 600, .parts = 8};
    int i = 1;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        long long *dst = strcmp(argv[i], "--interval-ms") == 0  ? &s.interval_ms
                         : strcmp(argv[i], "--seconds") == 0    ? &s.seconds
                         : strcmp(argv[i], "--until-sum") == 0  ? &s.until_sum
                         : strcmp(argv[i], "--partitions") == 0 ? &s.parts
                                                                : NULL;
        if (!dst || parse_long(argv[i + 1], 1, dst) != 0) {
            usage();
            return 2;
        }
    }
    if (i != argc - 1) {
        usage();
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    if (sigaction(SIGTERM, &sa, NULL) != 0 ||
        sigaction(SIGINT, &sa, NULL) != 0) {
        perror("marker_sampler: sigaction");
        return 2;
    }
    size_t ndirs = 0;
    const char **dirs = tm_cli_plugin_dirs(NULL, 0, &ndirs);
    if (!dirs) {
        fprintf(stderr, "marker_sampler: out of memory\n");
        return 2;
    }
    int rc = 2;
    if (tm_cli_sink_load(&s.sink, argv[i], dirs, ndirs) == 0) {
        if (!s.sink.cfg->kafka.topics || s.sink.cfg->kafka.ntopics == 0)
            fprintf(stderr, "marker_sampler: %s: needs $.kafka.topics\n",
                    argv[i]);
        else if (tm_cli_sink_open(&s.sink) == 0)
            rc = run(&s);
        tm_cli_sink_free(&s.sink);
    }
    free(dirs);
    free(s.m);
    free(s.prev_next);
    free(s.prev_epoch);
    free(s.reads);
    return rc;
}
