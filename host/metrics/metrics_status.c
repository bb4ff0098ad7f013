#include "metrics/metrics_status.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics/metrics_persist.h"
#include "metrics/prom_text.h"

/* The states the gauge has one series for each (the health model and
 * STOPPED; docs/operations.md, Health). */
static const tm_conn_state states[] = {TM_CONN_STARTING, TM_CONN_RUNNING,
                                       TM_CONN_DEGRADED, TM_CONN_PAUSED,
                                       TM_CONN_FAILED,   TM_CONN_STOPPED};

long long tm_metrics_rss_bytes(long pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/statm", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    long long size = 0, resident = -1;
    if (fscanf(f, "%lld %lld", &size, &resident) != 2)
        resident = -1;
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return resident < 0 || page <= 0 ? -1 : resident * page;
}

static double seconds(int64_t ms) {
    return (double)ms / 1000.0;
}

/* Views with a status to show (not an unreadable file). */
static int shown(const tm_status_view *v) {
    return v->error[0] == '\0';
}

static void state_family(FILE *out, const tm_status_view *views, size_t n,
                         const int *bad) {
    tm_prom_family(out, "tidemark_connector_state", "gauge",
                   "1 for the connector's state (STARTING, RUNNING, "
                   "DEGRADED, PAUSED, FAILED, STOPPED), 0 for the others.");
    for (size_t i = 0; i < n; i++) {
        if (!shown(&views[i]) || !views[i].running)
            continue;
        const tm_status_snapshot *s = &views[i].r.snap;
        for (size_t k = 0; k < sizeof states / sizeof states[0]; k++) {
            const char *l[] = {"connector", s->connector, "state",
                               tm_conn_state_name(states[k])};
            tm_prom_sample(out, "tidemark_connector_state", l, 2,
                           s->state == states[k]);
        }
    }
    tm_prom_family(out, "tidemark_connector_status_error", "gauge",
                   "1 when the connector's status file (or its metrics "
                   "file) cannot be read, else 0.");
    for (size_t i = 0; i < n; i++) {
        const char *l[] = {"connector", views[i].r.snap.connector};
        tm_prom_sample(out, "tidemark_connector_status_error", l, 1,
                       !shown(&views[i]) || bad[i]);
    }
}

/* A gauge of one value per connector with a status file. */
static void per_connector(FILE *out, const tm_status_view *views, size_t n,
                          const char *name, const char *type, const char *help,
                          int which) {
    tm_prom_family(out, name, type, help);
    for (size_t i = 0; i < n; i++) {
        if (!shown(&views[i]) || !views[i].r.has_file)
            continue;
        const tm_status_snapshot *s = &views[i].r.snap;
        const char *l[] = {"connector", s->connector};
        double v = which == 0   ? seconds(s->started_ms)
                   : which == 1 ? seconds(s->updated_ms)
                   : which == 2 ? seconds(s->last_batch_ms)
                                : seconds(s->last_error_ms);
        tm_prom_sample(out, name, l, 1, v);
    }
}

static void records_family(FILE *out, const tm_status_view *views, size_t n) {
    tm_prom_family(out, "tidemark_records_total", "counter",
                   "Records the sink applied since the host started, by "
                   "outcome (row, dead_letter, filtered, duplicate).");
    for (size_t i = 0; i < n; i++) {
        if (!shown(&views[i]) || !views[i].r.has_file)
            continue;
        const tm_status_snapshot *s = &views[i].r.snap;
        const char *outcome[] = {"row", "dead_letter", "filtered", "duplicate"};
        const uint64_t v[] = {s->totals.rows, s->totals.dead_letters,
                              s->totals.filtered, s->totals.duplicates};
        for (int k = 0; k < 4; k++) {
            const char *l[] = {"connector", s->connector, "outcome",
                               outcome[k]};
            tm_prom_sample_u64(out, "tidemark_records_total", l, 2, v[k]);
        }
    }
    tm_prom_family(out, "tidemark_batches_total", "counter",
                   "Sink commit answers since the host started: OK (a batch "
                   "applied, ALREADY included), FENCED, CONFLICT, RETRY "
                   "(one per retried attempt).");
    for (size_t i = 0; i < n; i++) {
        if (!shown(&views[i]) || !views[i].r.has_file)
            continue;
        const tm_status_snapshot *s = &views[i].r.snap;
        const char *answer[] = {"OK", "FENCED", "CONFLICT", "RETRY"};
        const uint64_t v[] = {s->totals.batches, s->totals.fenced,
                              s->totals.conflicts, s->totals.retries};
        for (int k = 0; k < 4; k++) {
            const char *l[] = {"connector", s->connector, "answer", answer[k]};
            tm_prom_sample_u64(out, "tidemark_batches_total", l, 2, v[k]);
        }
    }
}

enum { P_NEXT, P_EPOCH, P_HWM, P_LAG, P_PAUSED };

static void partition_family(FILE *out, const tm_status_view *views, size_t n,
                             const char *name, const char *help, int which) {
    tm_prom_family(out, name, "gauge", help);
    for (size_t i = 0; i < n; i++) {
        if (!shown(&views[i]))
            continue;
        const tm_status_snapshot *s = &views[i].r.snap;
        for (size_t k = 0; k < s->npartitions; k++) {
            const tm_status_partition *p = &s->partitions[k];
            int64_t v = which == P_NEXT    ? p->next_offset
                        : which == P_EPOCH ? p->epoch
                        : which == P_HWM   ? p->high_watermark
                        : which == P_LAG
                            ? tm_status_lag(p->next_offset, p->high_watermark)
                            : p->paused;
            if (v < 0 || (which == P_EPOCH && p->next_offset < 0))
                continue; /* unknown: no sample rather than a made-up one */
            char part[16];
            snprintf(part, sizeof part, "%" PRId32, p->partition);
            const char *l[] = {"connector", s->connector, "topic",
                               p->topic,    "partition",  part};
            tm_prom_sample(out, name, l, 3, (double)v);
        }
    }
}

static void rss_family(FILE *out, const tm_status_view *views, size_t n) {
    tm_prom_family(out, "tidemark_process_resident_memory_bytes", "gauge",
                   "Resident memory of each live host process, by pid.");
    for (size_t i = 0; i < n; i++) {
        long pid = views[i].r.live ? views[i].r.live_pid : 0;
        int first = pid > 0;
        for (size_t j = 0; first && j < i; j++)
            first = !(views[j].r.live && views[j].r.live_pid == pid);
        long long rss = first ? tm_metrics_rss_bytes(pid) : -1;
        if (rss < 0)
            continue;
        char p[32];
        snprintf(p, sizeof p, "%ld", pid);
        const char *l[] = {"pid", p};
        tm_prom_sample(out, "tidemark_process_resident_memory_bytes", l, 1,
                       (double)rss);
    }
}

/* Each view's saved figures: ptrs[i] NULL when it has none, bad[i] set
 * when its file cannot be read. */
static void load_saved(const tm_status_view *views, size_t n,
                       const char *const *state_dirs, tm_metrics_values *vals,
                       const tm_metrics_values **ptrs, const char **names,
                       int *bad) {
    for (size_t i = 0; i < n; i++) {
        names[i] = views[i].r.snap.connector;
        char why[1024];
        int rc = shown(&views[i]) ? tm_metrics_load(state_dirs[i], names[i],
                                                    &vals[i], why, sizeof why)
                                  : 1;
        ptrs[i] = rc == 0 ? &vals[i] : NULL;
        bad[i] = rc < 0;
    }
}

/* A 0/1 gauge per running connector: 1 when FLAG (a time past a bound, in
 * ms) is above 0 at NOW_MS. */
static void flag_family(FILE *out, const char *name, const char *help,
                        int64_t (*flag)(const tm_status_view *, int64_t),
                        const tm_status_view *views, size_t n, int64_t now_ms) {
    tm_prom_family(out, name, "gauge", help);
    for (size_t i = 0; i < n; i++) {
        if (!shown(&views[i]) || !views[i].running)
            continue;
        const char *l[] = {"connector", views[i].r.snap.connector};
        tm_prom_sample(out, name, l, 1, flag(&views[i], now_ms) > 0);
    }
}

void tm_metrics_status_write(FILE *out, const tm_status_view *views, size_t n,
                             const char *const *state_dirs, int64_t now_ms) {
    size_t k = n ? n : 1;
    tm_metrics_values *vals = calloc(k, sizeof *vals);
    const tm_metrics_values **ptrs = calloc(k, sizeof *ptrs);
    const char **names = calloc(k, sizeof *names);
    int *bad = calloc(k, sizeof *bad);
    if (!vals || !ptrs || !names || !bad) {
        /* Out of memory: nothing rather than a part that looks whole. */
        fprintf(out, "# tidemark: out of memory\n");
        goto out;
    }
    load_saved(views, n, state_dirs, vals, ptrs, names, bad);
    state_family(out, views, n, bad);
    /* A live host's status file past TM_STATUS_STALE_MS: its state gauge
     * still says what the file says, this says the file is no longer news. */
    flag_family(out, "tidemark_connector_status_stale",
                "1 when a live host's status file is more than 10 s old (the "
                "host is hung or cannot write it), else 0.",
                tm_status_stale_ms, views, n, now_ms);
    /* A live host's wait past its end by more than TM_STATUS_STALE_MS: the
     * file is fresh (the pulse), the connector stuck in a call. */
    flag_family(out, "tidemark_connector_wait_overdue",
                "1 when a live host's connector waits on a step of its commit "
                "more than 10 s past the end it was given (a call that does "
                "not return), else 0.",
                tm_status_overdue_ms, views, n, now_ms);
    per_connector(out, views, n, "tidemark_connector_start_time_seconds",
                  "gauge", "When the host started the connector (Unix time).",
                  0);
    per_connector(out, views, n, "tidemark_status_updated_timestamp_seconds",
                  "gauge", "When the host last wrote its status (Unix time).",
                  1);
    per_connector(out, views, n, "tidemark_last_batch_timestamp_seconds",
                  "gauge",
                  "When the last batch was committed (Unix time; 0 none).", 2);
    per_connector(out, views, n, "tidemark_last_error_timestamp_seconds",
                  "gauge",
                  "When the last error was recorded (Unix time; 0 "
                  "none).",
                  3);
    records_family(out, views, n);
    partition_family(out, views, n, "tidemark_partition_next_offset",
                     "The sink's marker: the next offset to apply.", P_NEXT);
    partition_family(out, views, n, "tidemark_partition_epoch",
                     "The sink's marker: the epoch of the last claim.",
                     P_EPOCH);
    partition_family(out, views, n, "tidemark_partition_high_watermark",
                     "The broker's high watermark, as the host last saw it.",
                     P_HWM);
    partition_family(out, views, n, "tidemark_partition_lag",
                     "Records not applied yet: high watermark minus the "
                     "marker's next offset.",
                     P_LAG);
    partition_family(out, views, n, "tidemark_partition_paused",
                     "1 while the host pauses the partition, else 0.",
                     P_PAUSED);
    rss_family(out, views, n);
    tm_metrics_values_write(out, names, (const tm_metrics_values *const *)ptrs,
                            n);
out:
    free(vals);
    free(ptrs);
    free(names);
    free(bad);
}
