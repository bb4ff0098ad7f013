/* The host under test and the judge: the verdict comes from the sink's own
 * tables compared with the records Kafka holds, partition by partition. */
#include "crash.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Every host this test started: a failing check exits the test, and no
 * host may outlive it. */
static pid_t hosts[64];
static size_t nhosts;

static void kill_hosts(void) {
    for (size_t i = 0; i < nhosts; i++)
        if (hosts[i] > 0 && waitpid(hosts[i], NULL, WNOHANG) == 0) {
            kill(hosts[i], SIGKILL);
            waitpid(hosts[i], NULL, 0);
        }
}

pid_t ce_spawn_cfgs(const char *const *cfgs, const char *log,
                    const char *const *env) {
    if (nhosts == 0)
        atexit(kill_hosts);
    const char *given[33];
    size_t n = 0;
    for (size_t i = 0; cfgs[i] && n < sizeof given / sizeof given[0] - 1; i++)
        if (cfgs[i][0])
            given[n++] = cfgs[i];
    given[n] = NULL;
    pid_t pid = h_spawn_many(given, log, env);
    if (nhosts < sizeof hosts / sizeof hosts[0])
        hosts[nhosts++] = pid;
    return pid;
}

pid_t ce_spawn(crash_env *e, const char *log, const char *const *env) {
    const char *cfgs[] = {e->raw_cfg, e->dedup_cfg, NULL};
    return ce_spawn_cfgs(cfgs, log, env);
}

void ce_kill(pid_t pid) {
    int rc = h_stop(pid, SIGKILL, 5000, NULL);
    H_CHECK(rc == 128 + SIGKILL, "the host was not killed (exit %d)", rc);
}

void ce_stop(pid_t pid) {
    int64_t took = 0;
    int rc = h_stop(pid, SIGTERM, 15000, &took);
    H_CHECK(rc == 0, "tidemark exited %d after SIGTERM (expected 0)", rc);
}

int64_t ce_raw_rows(const crash_env *e) {
    return cs_int(&e->sink, "SELECT count(*) FROM raw_t");
}

int64_t ce_raw_progress(const crash_env *e) {
    return cs_quick_count(&e->sink, "raw_t");
}

void ce_spawn_held(ce_held *h, const char *const *cfgs, const char *log,
                   int hit) {
    h_fault_pipe_open(&h->fp);
    h->pid =
        ce_spawn_cfgs(cfgs, log, h_fault_hold_env(&h->fp, "after_commit", hit));
    /* The write end is the host's alone: hosts spawned later must not
     * hold it open (the test would wait for an end that never comes). */
    h_fault_pipe_spawned(&h->fp);
}

int ce_hit_for_rows(const crash_env *e, int64_t rows, int max_records) {
    int64_t hit = e->nconn * rows / max_records;
    return hit < 1 ? 1 : hit > 1000000 ? 1000000 : (int)hit;
}

int ce_held_stopped(const ce_held *h) {
    return h_proc_state(h->pid) == 'T';
}

void ce_wait_held(ce_held *h) {
    h_fault_wait(&h->fp, "after_commit", h->pid, 1);
}

int64_t ce_kill_held(crash_env *e, ce_held *h, int64_t total) {
    ce_wait_held(h);
    ce_kill(h->pid);
    int64_t committed = ce_raw_rows(e);
    H_CHECK(committed > 0 && committed < total,
            "inconclusive: %lld of %lld raw rows committed at the kill (want "
            "0 < committed < total)",
            (long long)committed, (long long)total);
    return committed;
}

void ce_kill_unheld(ce_held *h) {
    ce_kill(h->pid);
    h_fault_pipe_close(&h->fp);
}

static int64_t markers_sum(crash_env *e, const char *connector, int *count) {
    *count = (int)cs_int(&e->sink,
                         "SELECT count(*) FROM tidemark_markers WHERE "
                         "connector = '%s' AND topic = '%s'",
                         connector, e->topic);
    return cs_int(&e->sink,
                  "SELECT sum(next_offset) FROM tidemark_markers WHERE "
                  "connector = '%s' AND topic = '%s'",
                  connector, e->topic);
}

void ce_wait_caught_up(crash_env *e, int timeout_ms) {
    int64_t want = 0;
    for (int p = 0; p < e->partitions; p++) {
        int64_t lo, hi;
        h_watermarks(e->topic, p, &lo, &hi);
        want += hi;
    }
    const char *conns[2] = {e->raw, e->dedup};
    int64_t t0 = h_now_ms();
    for (int c = 0; c < e->nconn; c++)
        for (;;) {
            int n = 0;
            int64_t at = markers_sum(e, conns[c], &n);
            if (n == e->partitions && at == want)
                break;
            H_CHECK(h_now_ms() - t0 < timeout_ms,
                    "%s: markers at %lld of %lld (%d of %d partitions) "
                    "after %d ms",
                    conns[c], (long long)at, (long long)want, n, e->partitions,
                    timeout_ms);
            h_sleep_ms(100);
        }
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

void ce_same_offsets(const char *what, int p, const int64_t *k, size_t nk,
                     const int64_t *s, size_t ns) {
    size_t i = 0, j = 0;
    while (i < nk || j < ns) {
        if (j > 0 && j < ns && s[j] == s[j - 1])
            h_fail("%s [%d]: offset %lld stored twice (a duplicate)", what, p,
                   (long long)s[j]);
        if (j < ns && (i == nk || s[j] < k[i]))
            h_fail("%s [%d]: offset %lld stored but not a record Kafka "
                   "holds",
                   what, p, (long long)s[j]);
        if (i < nk && (j == ns || k[i] < s[j]))
            h_fail("%s [%d]: offset %lld is in Kafka but not in the sink (a "
                   "gap)",
                   what, p, (long long)k[i]);
        i++;
        j++;
    }
}

/* Every offset of one partition of the dedup connector accounted for
 * once: stored offsets (rows and dead letters) distinct and in Kafka, and
 * rows + dead letters + counted duplicates == Kafka's records (no filter
 * is configured, so the filtered count must be 0). */
static void dedup_partition(crash_env *e, int p, const int64_t *k, size_t nk) {
    int64_t *s = NULL;
    size_t ns = cs_list(&e->sink, &s,
                        "SELECT _tm_offset FROM dedup_t WHERE _tm_partition = "
                        "%d UNION ALL SELECT \"offset\" FROM "
                        "tidemark_dead_letters WHERE connector = '%s' AND "
                        "\"partition\" = %d",
                        p, e->dedup, p);
    qsort(s, ns, sizeof *s, cmp64);
    for (size_t j = 1; j < ns; j++)
        H_CHECK(s[j] != s[j - 1],
                "dedup [%d]: offset %lld stored twice (rows + dead letters)", p,
                (long long)s[j]);
    for (size_t j = 0, i = 0; j < ns; j++) {
        while (i < nk && k[i] < s[j])
            i++;
        H_CHECK(i < nk && k[i] == s[j],
                "dedup [%d]: offset %lld stored but not a record Kafka holds",
                p, (long long)s[j]);
    }
    /* No connector of the suite has a filter: a filtered count would be
     * records made to vanish, not an outcome to add. */
    int64_t filtered = cs_int(&e->sink,
                              "SELECT filtered FROM tidemark_markers WHERE "
                              "connector = '%s' AND \"partition\" = %d",
                              e->dedup, p);
    H_CHECK(filtered == 0,
            "dedup [%d]: the marker counts %lld filtered records, but no "
            "filter is configured",
            p, (long long)filtered);
    int64_t counted = cs_int(&e->sink,
                             "SELECT duplicates FROM "
                             "tidemark_markers WHERE connector = '%s' AND "
                             "\"partition\" = %d",
                             e->dedup, p);
    H_CHECK((int64_t)ns + counted == (int64_t)nk,
            "dedup [%d]: %zu stored + %lld counted duplicates != "
            "%zu records in Kafka (%s)",
            p, ns, (long long)counted, nk,
            (int64_t)ns + counted > (int64_t)nk ? "duplicates" : "a gap");
    free(s);
}

void ce_judge(crash_env *e, crash_figures *f) {
    memset(f, 0, sizeof *f);
    for (int p = 0; p < e->partitions; p++) {
        int64_t *k = NULL, *s = NULL;
        size_t nk = h_read_offsets(e->topic, p, &k);
        size_t ns = cs_list(&e->sink, &s,
                            "SELECT _tm_offset FROM raw_t WHERE _tm_partition "
                            "= %d ORDER BY 1",
                            p);
        ce_same_offsets("raw", p, k, nk, s, ns);
        if (e->sink.dedup)
            dedup_partition(e, p, k, nk);
        f->kafka += (int64_t)nk;
        free(k);
        free(s);
    }
    const crash_sink *s = &e->sink;
    f->raw_rows = cs_int(s, "SELECT count(*) FROM raw_t");
    f->raw_distinct = cs_int(s, "SELECT count(*) FROM (SELECT DISTINCT "
                                "_tm_partition, _tm_offset FROM raw_t) x");
    int64_t raw_dl = cs_int(s,
                            "SELECT count(*) FROM tidemark_dead_letters "
                            "WHERE connector = '%s'",
                            e->raw);
    H_CHECK(f->kafka == e->sent, "Kafka holds %lld records, %lld were sent",
            (long long)f->kafka, (long long)e->sent);
    H_CHECK(f->raw_rows == f->kafka && f->raw_distinct == f->kafka,
            "raw rows %lld, distinct offsets %lld, Kafka messages %lld",
            (long long)f->raw_rows, (long long)f->raw_distinct,
            (long long)f->kafka);
    H_CHECK(raw_dl == 0, "raw: %lld dead letters (every record is a row)",
            (long long)raw_dl);
    if (!e->sink.dedup)
        return;
    f->dedup_rows = cs_int(s, "SELECT count(*) FROM dedup_t");
    f->dedup_ids = cs_int(s, "SELECT count(DISTINCT id) FROM dedup_t");
    f->dups = cs_int(s,
                     "SELECT sum(duplicates) FROM tidemark_markers WHERE "
                     "connector = '%s'",
                     e->dedup);
    f->dead_letters = cs_int(s,
                             "SELECT count(*) FROM tidemark_dead_letters "
                             "WHERE connector = '%s'",
                             e->dedup);
    f->conflicts = cs_int(s,
                          "SELECT count(*) FROM tidemark_dead_letters WHERE "
                          "connector = '%s' AND reason = 'identity_conflict'",
                          e->dedup);
    H_CHECK(f->dedup_rows == e->unique_ids && f->dedup_ids == e->unique_ids,
            "dedup rows %lld, distinct ids %lld, unique ids sent %lld",
            (long long)f->dedup_rows, (long long)f->dedup_ids,
            (long long)e->unique_ids);
    H_CHECK(f->dead_letters == e->violations + e->conflicts,
            "dead letters %lld, expected %lld violations + %lld conflicts",
            (long long)f->dead_letters, (long long)e->violations,
            (long long)e->conflicts);
    H_CHECK(f->conflicts == e->conflicts,
            "identity_conflict dead letters %lld, expected %lld",
            (long long)f->conflicts, (long long)e->conflicts);
    H_CHECK(f->dups == e->resends, "counted duplicates %lld, resends %lld",
            (long long)f->dups, (long long)e->resends);
}

void ce_verify_cli(crash_env *e, const char *cfg) {
    (void)e;
    const char *args[] = {"verify", cfg, NULL};
    int rc = h_tidemark("verify.out", args);
    const char *out = h_read_file("verify.out");
    const char *last = out + strlen(out);
    while (last > out && last[-1] == '\n')
        last--;
    const char *ls = last;
    while (ls > out && ls[-1] != '\n')
        ls--;
    H_CHECK(rc == 0, "tidemark verify %s: exit %d (expected 0):\n%s", cfg, rc,
            out);
    h_step("tidemark verify: %.*s", (int)(last - ls), ls);
}

void ce_summary(crash_env *e, const crash_figures *f, const char *fmt, ...) {
    char what[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (f) { /* the scenarios without figures judge verify themselves */
        ce_verify_cli(e, e->raw_cfg);
        if (e->sink.dedup)
            ce_verify_cli(e, e->dedup_cfg);
    }
    double secs = (double)(h_now_ms() - e->t0_ms) / 1000.0;
    char line[4096];
    if (f && !e->sink.dedup)
        snprintf(line, sizeof line,
                 "crash.%s.%s: %s; %lld Kafka messages, %lld raw rows, %lld "
                 "distinct offsets (no dedup connector: the sink has no "
                 "dedup); 0 duplicates, 0 gaps; %.1f s",
                 e->sink.name, e->scenario, what, (long long)f->kafka,
                 (long long)f->raw_rows, (long long)f->raw_distinct, secs);
    else if (f)
        snprintf(line, sizeof line,
                 "crash.%s.%s: %s; %lld Kafka messages, %lld raw rows, %lld "
                 "distinct offsets; %lld dedup rows, %lld distinct ids, %lld "
                 "duplicates counted, %lld dead letters (%lld "
                 "identity_conflict); 0 duplicates, 0 gaps; %.1f s",
                 e->sink.name, e->scenario, what, (long long)f->kafka,
                 (long long)f->raw_rows, (long long)f->raw_distinct,
                 (long long)f->dedup_rows, (long long)f->dedup_ids,
                 (long long)f->dups, (long long)f->dead_letters,
                 (long long)f->conflicts, secs);
    else
        snprintf(line, sizeof line, "crash.%s.%s: %s; %.1f s", e->sink.name,
                 e->scenario, what, secs);
    printf("SUMMARY %s\n", line);
    fflush(stdout);
    if (e->producer)
        rd_kafka_destroy(e->producer);
    e->producer = NULL;
    cs_cleanup(&e->sink);
}
