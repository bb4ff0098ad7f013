/* The connector core's state machine (host/commit/machine.h), table-driven
 * like test_marker_check: each row sets a state up with a script of
 * events, feeds one more event, and compares the actions and the state
 * with what docs/exactly-once.md and today's commit loop say. Every sink
 * answer in every partition state, revokes and losses while a batch is at
 * the sink, holes and empty ranges, the dead-letter topic before the
 * commit, the pipeline's second batch.
 *
 * The script: events separated by ';', partitions as TOPIC:PARTITION.
 *   assign|revoke|lost P...        claimed ok|retry|fatal [P eE nN [loL]
 * [hiH]]... rec P OFFSET [BYTES]           end P POSITION       due       stop
 *   stop [WHY [@DEADLINE]]   goon
 *   dlq ok|fail                    answer STATUS [noread] [P eE nN]...
 *   read ok|retry|fatal [P eE nN]...   seekfail P    timer +MS
 * A record's TAKE is answered at once: TAKEN OK after rec, RECORD_STOP
 * after `stoprec P OFFSET` (the converter refused it), TAKEN FATAL after
 * `recfail P OFFSET` (the builder failed); the actions of both steps.
 * Actions are written KIND [P] [#batch] [@offset], joined by ", "; a TAKE
 * that is no sign of recovery (records read again after a RETRY) ends in
 * " quiet". A stopped partition shows " stop@OFFSET", " held" once paused
 * there. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "commit/machine.h"

#define MAXM 16

/* Out of memory: the machine's allocations fail from the n-th on while
 * alloc_armed (linked with --wrap=malloc,--wrap=realloc; only the
 * machine's calls are counted). */
void *__real_malloc(size_t n);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_realloc(void *p, size_t n);
static int alloc_armed;
static long alloc_left = -1; /* -1: never fail */
static int alloc_failed;

static int alloc_fails(void) {
    if (!alloc_armed || alloc_left < 0)
        return 0;
    if (alloc_left-- > 0)
        return 0;
    alloc_failed = 1;
    return 1;
}

void *__wrap_malloc(size_t n) {
    return alloc_fails() ? NULL : __real_malloc(n);
}

void *__wrap_realloc(void *p, size_t n) {
    return alloc_fails() ? NULL : __real_realloc(p, n);
}

typedef struct row {
    const char *name;
    int dlq; /* $.dead_letters.topic set */
    const char *setup;
    const char *event;
    const char *actions; /* exactly these, in this order */
    const char *parts; /* "P STATE eE cC nN [paused] [seek] [deferred]; ..." */
    const char *batches; /* "BUILDING#1 AT_SINK#2" (the built, the one out) */
    int failed;
} row;

typedef struct driver {
    tm_machine *m;
    int64_t now;
    char topics[MAXM][32];
    tm_machine_tp tps[MAXM];
    tm_marker mk[MAXM];
    int64_t low[MAXM], high[MAXM];
    char rendered[4096];
    char why[1024];      /* the last FAIL's or DEGRADE's reason */
    char dropped[1024];  /* the last DROP_BATCH's reason */
    int took;            /* the last step emitted a TAKE ... */
    uint64_t took_batch; /* ... into this batch */
} driver;

static void config(tm_machine_config *cfg, int dlq) {
    tm_machine_config_defaults(cfg);
    cfg->max_records = 100;
    cfg->max_bytes = 1 << 20;
    cfg->max_wait_ms = 1000;
    cfg->commit_deadline_ms = 1000;
    cfg->stop_grace_ms = 50;
    cfg->fenced_bound_ms = 500;
    cfg->retry_base_ms = 10;
    cfg->retry_max_ms = 100;
    cfg->claim_base_ms = 10;
    cfg->claim_max_ms = 100;
    cfg->dead_letter_topic = dlq;
}

/* "t:3" into slot i. */
static void part_of(driver *d, const char *tok, size_t i, const char **topic,
                    int32_t *partition) {
    const char *colon = strchr(tok, ':');
    ck_assert_msg(colon != NULL, "not a partition: %s", tok);
    snprintf(d->topics[i], sizeof d->topics[i], "%.*s", (int)(colon - tok),
             tok);
    *topic = d->topics[i];
    *partition = (int32_t)strtol(colon + 1, NULL, 10);
}

static tm_status status_of(const char *w) {
    static const struct {
        const char *name;
        tm_status st;
    } names[] = {{"ok", TM_OK},
                 {"OK", TM_OK},
                 {"ALREADY", TM_ALREADY},
                 {"retry", TM_RETRY},
                 {"RETRY", TM_RETRY},
                 {"FENCED", TM_FENCED},
                 {"CONFLICT", TM_CONFLICT},
                 {"fatal", TM_FATAL},
                 {"FATAL", TM_FATAL},
                 {"INVALID", TM_INVALID},
                 {"fail", TM_RETRY}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(w, names[i].name) == 0)
            return names[i].st;
    ck_abort_msg("unknown status %s", w);
    return TM_FATAL;
}

/* Markers "P eE nN [loL] [hiH]" from tok[k..n). */
static size_t markers_of(driver *d, char **tok, size_t k, size_t n) {
    size_t c = 0;
    while (k < n) {
        ck_assert(c < MAXM);
        tm_marker *m = &d->mk[c];
        memset(m, 0, sizeof *m);
        m->struct_size = sizeof *m;
        part_of(d, tok[k++], c, &m->topic, &m->partition);
        d->low[c] = 0;
        d->high[c] = 100;
        while (k < n && !strchr(tok[k], ':')) {
            const char *t = tok[k++];
            if (t[0] == 'e')
                m->epoch = strtoll(t + 1, NULL, 10);
            else if (t[0] == 'n')
                m->next_offset = strtoll(t + 1, NULL, 10);
            else if (strncmp(t, "lo", 2) == 0)
                d->low[c] = strtoll(t + 2, NULL, 10);
            else if (strncmp(t, "hi", 2) == 0)
                d->high[c] = strtoll(t + 2, NULL, 10);
            else
                ck_abort_msg("bad marker field %s", t);
        }
        c++;
    }
    return c;
}

/* Appends the actions of one step to d->rendered. */
static void render(driver *d, const tm_machine_action *a, size_t n) {
    size_t at = strlen(d->rendered);
    for (size_t i = 0; i < n; i++) {
        char one[256];
        int len = snprintf(one, sizeof one, "%s%s",
                           tm_machine_action_name(a[i].kind), "");
        if (a[i].topic)
            len += snprintf(one + len, sizeof one - (size_t)len, " %s:%" PRId32,
                            a[i].topic, a[i].partition);
        switch (a[i].kind) {
        case TM_ACT_RANGE:
        case TM_ACT_TAKE:
        case TM_ACT_EXTEND:
        case TM_ACT_DLQ_SEND:
        case TM_ACT_SINK_COMMIT:
        case TM_ACT_DROP_BATCH:
            len += snprintf(one + len, sizeof one - (size_t)len, " #%" PRIu64,
                            a[i].batch);
            break;
        default: break;
        }
        switch (a[i].kind) {
        case TM_ACT_CLAIM:
        case TM_ACT_START:
        case TM_ACT_SEEK:
        case TM_ACT_RANGE:
        case TM_ACT_TAKE:
        case TM_ACT_EXTEND:
        case TM_ACT_SINK_COMMIT:
        case TM_ACT_COMMIT_OFFSETS:
            len += snprintf(one + len, sizeof one - (size_t)len, " @%" PRId64,
                            a[i].offset);
            break;
        default: break;
        }
        if (a[i].kind == TM_ACT_TAKE && !a[i].flows)
            snprintf(one + len, sizeof one - (size_t)len, " quiet");
        at += (size_t)snprintf(d->rendered + at, sizeof d->rendered - at,
                               "%s%s", at ? ", " : "", one);
        ck_assert(at < sizeof d->rendered);
    }
}

static void feed(driver *d, tm_machine_event *ev, const char *text);

/* Runs one event of the script; its actions rendered in d->rendered. */
static void run_event(driver *d, const char *text) {
    d->rendered[0] = '\0';
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    char *tok[64];
    size_t n = 0;
    for (char *t = strtok(buf, " ,"); t && n < 64; t = strtok(NULL, " ,"))
        tok[n++] = t;
    ck_assert_msg(n > 0, "empty event in the script");
    tm_machine_event ev;
    memset(&ev, 0, sizeof ev);
    const char *w = tok[0];
    if (strcmp(w, "assign") == 0 || strcmp(w, "revoke") == 0 ||
        strcmp(w, "lost") == 0) {
        ev.kind = w[0] == 'a'   ? TM_EV_ASSIGNED
                  : w[0] == 'r' ? TM_EV_REVOKED
                                : TM_EV_LOST;
        for (size_t i = 1; i < n; i++)
            part_of(d, tok[i], i - 1, &d->tps[i - 1].topic,
                    &d->tps[i - 1].partition);
        ev.parts = d->tps;
        ev.nparts = n - 1;
    } else if (strcmp(w, "claimed") == 0 || strcmp(w, "read") == 0) {
        ev.kind = w[0] == 'c' ? TM_EV_CLAIMED : TM_EV_MARKERS_READ;
        ck_assert(n >= 2);
        ev.status = status_of(tok[1]);
        ev.nmarkers = markers_of(d, tok, 2, n);
        ev.markers = d->mk;
        ev.low = d->low;
        ev.high = d->high;
        ev.why = "store said no";
    } else if (strcmp(w, "rec") == 0 || strcmp(w, "end") == 0 ||
               strcmp(w, "seekfail") == 0 || strcmp(w, "stoprec") == 0 ||
               strcmp(w, "recfail") == 0) {
        ev.kind = w[0] == 'r' || w[0] == 's' ? TM_EV_RECORD
                  : w[0] == 'e'              ? TM_EV_PARTITION_END
                                             : TM_EV_SEEK_FAILED;
        if (strcmp(w, "seekfail") == 0)
            ev.kind = TM_EV_SEEK_FAILED;
        part_of(d, tok[1], 0, &ev.topic, &ev.partition);
        ev.offset = n > 2 ? strtoll(tok[2], NULL, 10) : 0;
        ev.bytes = n > 3 ? strtoll(tok[3], NULL, 10) : 100;
    } else if (strcmp(w, "due") == 0) {
        ev.kind = TM_EV_BATCH_DUE;
    } else if (strcmp(w, "stop") == 0) {
        ev.kind = TM_EV_STOP;
        ev.why = n > 1 ? tok[1] : NULL;
        ev.offset = n > 2 ? strtoll(tok[2] + 1, NULL, 10) : 0;
    } else if (strcmp(w, "goon") == 0) {
        ev.kind = TM_EV_GO_ON;
    } else if (strcmp(w, "hold") == 0) {
        ev.kind = TM_EV_HOLD_READS;
    } else if (strcmp(w, "timer") == 0) {
        ev.kind = TM_EV_TIMER;
        d->now += strtoll(tok[1], NULL, 10);
    } else if (strcmp(w, "dlq") == 0 || strcmp(w, "answer") == 0) {
        tm_machine_batch_view out;
        tm_machine_batch(d->m, 1, &out);
        ev.kind = w[0] == 'd' ? TM_EV_DLQ_SENT : TM_EV_SINK_ANSWER;
        ev.batch = out.id;
        ev.status = status_of(tok[1]);
        ev.why = "the sink said so";
        size_t k = 2;
        ev.markers_read = 1;
        if (k < n && strcmp(tok[k], "noread") == 0) {
            ev.markers_read = 0;
            k++;
        }
        ev.nmarkers = markers_of(d, tok, k, n);
        ev.markers = d->mk;
    } else {
        ck_abort_msg("unknown event %s", w);
    }
    ev.now_ms = d->now;
    feed(d, &ev, text);
    if (!d->took)
        return;
    /* The TAKE answered, as the executor does once it converted it. */
    tm_machine_event ans;
    memset(&ans, 0, sizeof ans);
    ans.kind = TM_EV_TAKEN;
    ans.status = TM_OK;
    if (strcmp(w, "stoprec") == 0) {
        ans.kind = TM_EV_RECORD_STOP;
        ans.why = "column n: int64 narrowed to int32";
    } else if (strcmp(w, "recfail") == 0) {
        ans.status = TM_FATAL;
        ans.why = "out of memory converting t [0] offset 10";
    }
    ans.batch = d->took_batch;
    ans.topic = ev.topic;
    ans.partition = ev.partition;
    ans.offset = ev.offset;
    ans.now_ms = d->now;
    feed(d, &ans, text);
}

/* One step; its actions appended to d->rendered, d->took when one is a
 * TAKE (its batch in d->took_batch). */
static void feed(driver *d, tm_machine_event *ev, const char *text) {
    const tm_machine_action *a;
    size_t na;
    char err[256];
    d->took = 0;
    alloc_armed = 1;
    int rc = tm_machine_step(d->m, ev, &a, &na, err, sizeof err);
    alloc_armed = 0;
    if (alloc_failed) {
        /* Out of memory: one FAIL action, the machine FAILED. */
        ck_assert_int_eq(rc, -1);
        ck_assert_uint_eq(na, 1);
        ck_assert_int_eq(a[0].kind, TM_ACT_FAIL);
        ck_assert_str_eq(a[0].why, "out of memory");
        ck_assert(tm_machine_failed(d->m));
        ck_assert_msg(strstr(err, "out of memory") != NULL, "%s", err);
        d->rendered[0] = '\0';
        return;
    }
    ck_assert_msg(rc == 0, "event '%s': %s", text, err);
    render(d, a, na);
    for (size_t i = 0; i < na; i++)
        if (a[i].kind == TM_ACT_TAKE) {
            d->took = 1;
            d->took_batch = a[i].batch;
        } else if ((a[i].kind == TM_ACT_FAIL || a[i].kind == TM_ACT_DEGRADE) &&
                   a[i].why)
            snprintf(d->why, sizeof d->why, "%s", a[i].why);
        else if (a[i].kind == TM_ACT_DROP_BATCH && a[i].why)
            snprintf(d->dropped, sizeof d->dropped, "%s", a[i].why);
}

static void run_script(driver *d, const char *script) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", script ? script : "");
    char *save = NULL;
    for (char *e = strtok_r(buf, ";", &save); e;
         e = strtok_r(NULL, ";", &save)) {
        while (*e == ' ')
            e++;
        if (*e)
            run_event(d, e);
    }
}

static void render_part(const driver *d, const char *p, char *out,
                        size_t size) {
    char topic[32];
    const char *colon = strchr(p, ':');
    snprintf(topic, sizeof topic, "%.*s", (int)(colon - p), p);
    tm_machine_part_view v;
    tm_machine_part(d->m, topic, (int32_t)strtol(colon + 1, NULL, 10), &v);
    if (v.state == TM_PART_ABSENT) {
        snprintf(out, size, "%s ABSENT", p);
        return;
    }
    int len = snprintf(
        out, size, "%s %s e%" PRId64 " c%" PRId64 " n%" PRId64 "%s%s%s", p,
        tm_machine_part_state_name(v.state), v.epoch, v.committed,
        v.next_expected, v.paused ? " paused" : "", v.needs_seek ? " seek" : "",
        v.deferred ? " deferred" : "");
    if (v.stopped)
        snprintf(out + len, size - (size_t)len, " stop@%" PRId64 "%s",
                 v.stop_at, v.held ? " held" : "");
}

static void render_batches(const driver *d, char *out, size_t size) {
    static const char *const phase[] = {"NONE", "BUILDING", "DLQ", "AT_SINK",
                                        "RETRY_WAIT"};
    size_t at = 0;
    for (int w = 0; w < 2; w++) {
        tm_machine_batch_view v;
        tm_machine_batch(d->m, w, &v);
        at += (size_t)snprintf(out + at, size - at, "%s%s", w ? " " : "",
                               phase[v.phase]);
        if (v.phase != TM_BATCH_NONE)
            at += (size_t)snprintf(out + at, size - at, "#%" PRIu64 "%s", v.id,
                                   v.abandoned ? "!" : "");
    }
}

#define RUN   "assign t:0 t:1; claimed ok t:0 e3 n10 t:1 e3 n10"
#define BUILD RUN "; rec t:0 10; rec t:0 11; rec t:1 10"
#define SINK  BUILD "; due"
/* t:1 fenced by batch 1's answer; batch 2 (t:0 only) at the sink. */
#define FSINK SINK "; answer FENCED t:0 e3 n10 t:1 e4 n10; rec t:0 10; due"
/* t:0 fenced by batch 1's answer. */
#define FENCED0        SINK "; answer FENCED t:0 e4 n10 t:1 e3 n10"
#define RSINK          SINK "; revoke t:0"
#define LSINK          SINK "; lost t:0 t:1"
#define CSINK          SINK "; assign t:2"
#define PSINK          SINK "; rec t:0 12"
#define DSINK          BUILD "; due"
#define DEFER          "assign t:0; claimed retry t:0"
#define CONFLICT_AGAIN "; answer CONFLICT t:0 e3 n10; rec t:0 10; due"

/* Batch 1 (three records) answered RETRY at its deadline: cut in half. */
#define SPLIT SINK "; timer +1000; answer RETRY"
/* t:0 stopped at 11 by the converter, batch 1 dropped. */
#define STOP RUN "; rec t:0 10; rec t:1 10; stoprec t:0 11"
/* ... read again: batch 2 holds t:0 10 and t:1 10, t:0 held at 11. */
#define HELD STOP "; rec t:0 10; rec t:1 10; rec t:0 11"

#define R_RUN        "t:0 RUNNING e3 c10 n10; t:1 RUNNING e3 c10 n10"
#define A_APPLIED    "COMMIT_OFFSETS t:0 @12, COMMIT_OFFSETS t:1 @11"
#define R_APPLIED    "t:0 RUNNING e3 c12 n12; t:1 RUNNING e3 c11 n11"
#define A_DROP1_SEEK "DROP_BATCH #1, WRITE_STATUS, SEEK t:0 @10, SEEK t:1 @10"
#define A_FAIL1      "FAIL, DROP_BATCH #1, WRITE_STATUS"

static const row rows[] = {
    /* ---- claim on assignment ---- */
    {"assign claims each partition", 0, "", "assign t:0 t:1",
     "CLAIM t:0 @-1, CLAIM t:1 @-1",
     "t:0 CLAIMING e0 c-1 n-1; t:1 CLAIMING e0 c-1 n-1", "NONE NONE", 0},
    {"claimed: start at the marker, resumed, status", 0, "assign t:0 t:1",
     "claimed ok t:0 e3 n10 t:1 e3 n10",
     "START t:0 @10, RESUME t:0, START t:1 @10, RESUME t:1, WRITE_STATUS",
     R_RUN, "NONE NONE", 0},
    {"claimed below the log start fails, nothing claimed", 0, "assign t:0",
     "claimed ok t:0 e3 n5 lo8", "FAIL t:0", "t:0 CLAIMING e0 c-1 n-1",
     "NONE NONE", 1},
    {"claimed above the high watermark fails", 0, "assign t:0",
     "claimed ok t:0 e3 n150 hi100", "FAIL t:0", "t:0 CLAIMING e0 c-1 n-1",
     "NONE NONE", 1},
    {"one bad marker fails the whole claim", 0, "assign t:0 t:1",
     "claimed ok t:0 e3 n10 t:1 e3 n150", "FAIL t:1",
     "t:0 CLAIMING e0 c-1 n-1; t:1 CLAIMING e0 c-1 n-1", "NONE NONE", 1},
    {"claim deferred: assigned at the log's end", 0, "assign t:0",
     "claimed retry t:0", "START t:0 @-1, WRITE_STATUS",
     "t:0 CLAIMING e0 c-1 n-1 deferred", "NONE NONE", 0},
    {"deferred claim retried at the next timer", 0, DEFER, "timer +1",
     "CLAIM t:0 @-1", "t:0 CLAIMING e0 c-1 n-1 deferred", "NONE NONE", 0},
    {"deferred claim taken: sought to the marker", 0, DEFER "; timer +1",
     "claimed ok t:0 e3 n10", "RESUME t:0, WRITE_STATUS, SEEK t:0 @10",
     "t:0 RUNNING e3 c10 n10", "NONE NONE", 0},
    {"deferred twice: the retry waits for its backoff", 0,
     DEFER "; timer +1; claimed retry t:0", "timer +1", "",
     "t:0 CLAIMING e0 c-1 n-1 deferred", "NONE NONE", 0},
    {"deferred twice: retried past the backoff", 0,
     DEFER "; timer +1; claimed retry t:0", "timer +200", "CLAIM t:0 @-1",
     "t:0 CLAIMING e0 c-1 n-1 deferred", "NONE NONE", 0},
    {"claim FATAL fails", 0, "assign t:0", "claimed fatal t:0", "FAIL",
     "t:0 CLAIMING e0 c-1 n-1", "NONE NONE", 1},
    {"a record of a partition being claimed is not taken", 0, "assign t:0",
     "rec t:0 10", "", "t:0 CLAIMING e0 c-1 n-1", "NONE NONE", 0},
    {"a record of a deferred partition is not taken", 0, DEFER, "rec t:0 10",
     "", "t:0 CLAIMING e0 c-1 n-1 deferred", "NONE NONE", 0},
    {"a claim answered after its revoke claims nothing", 0,
     "assign t:0; revoke t:0", "claimed ok t:0 e3 n10", "WRITE_STATUS",
     "t:0 ABSENT", "NONE NONE", 0},

    /* ---- records, holes, partition ends ---- */
    {"a record opens the batch and its range at the marker", 0, RUN,
     "rec t:0 10", "RANGE t:0 #1 @10, TAKE t:0 #1 @10",
     "t:0 RUNNING e3 c10 n11", "BUILDING#1 NONE", 0},
    {"a hole: the range starts at the marker, covers the gap", 0, RUN,
     "rec t:0 15", "RANGE t:0 #1 @10, TAKE t:0 #1 @15",
     "t:0 RUNNING e3 c10 n16", "BUILDING#1 NONE", 0},
    {"a record delivered again is not taken", 0, BUILD, "rec t:0 11", "",
     "t:0 RUNNING e3 c10 n12", "BUILDING#1 NONE", 0},
    {"a record behind the marker is not taken", 0, RUN, "rec t:0 5", "",
     "t:0 RUNNING e3 c10 n10", "NONE NONE", 0},
    {"a record of a partition not assigned is not taken", 0, RUN, "rec t:9 0",
     "", "t:9 ABSENT", "NONE NONE", 0},
    {"partition end past the position: an empty range", 0, RUN, "end t:0 15",
     "RANGE t:0 #1 @10, EXTEND t:0 #1 @15", "t:0 RUNNING e3 c10 n15",
     "BUILDING#1 NONE", 0},
    {"partition end at the position: nothing", 0, RUN, "end t:0 10", "",
     "t:0 RUNNING e3 c10 n10", "NONE NONE", 0},
    {"partition end behind the position: nothing", 0, BUILD, "end t:0 11", "",
     "t:0 RUNNING e3 c10 n12", "BUILDING#1 NONE", 0},
    {"partition end extends the open range past a hole", 0, BUILD, "end t:0 20",
     "EXTEND t:0 #1 @20", "t:0 RUNNING e3 c10 n20", "BUILDING#1 NONE", 0},
    {"an empty range alone goes to the sink", 0, RUN "; end t:0 15", "due",
     "SINK_COMMIT #1 @1000", "t:0 RUNNING e3 c10 n15", "NONE AT_SINK#1", 0},
    {"an empty range applied moves the marker", 0, RUN "; end t:0 15; due",
     "answer OK", "COMMIT_OFFSETS t:0 @15", "t:0 RUNNING e3 c15 n15",
     "NONE NONE", 0},

    /* ---- cutting ---- */
    {"due by bytes", 0, RUN, "rec t:0 10 2000000",
     "RANGE t:0 #1 @10, TAKE t:0 #1 @10, SINK_COMMIT #1 @1000",
     "t:0 RUNNING e3 c10 n11", "NONE AT_SINK#1", 0},
    {"due by age", 0, BUILD, "timer +1000", "SINK_COMMIT #1 @2000",
     "t:0 RUNNING e3 c10 n12", "NONE AT_SINK#1", 0},
    {"not due before its age", 0, BUILD, "timer +999", "",
     "t:0 RUNNING e3 c10 n12", "BUILDING#1 NONE", 0},
    {"due asked", 0, BUILD, "due", "SINK_COMMIT #1 @1000",
     "t:0 RUNNING e3 c10 n12; t:1 RUNNING e3 c10 n11", "NONE AT_SINK#1", 0},
    {"due with nothing built", 0, RUN, "due", "", R_RUN, "NONE NONE", 0},

    /* ---- the dead-letter topic before the commit ---- */
    {"dead letters go to the topic first", 1, BUILD, "due", "DLQ_SEND #1",
     "t:0 RUNNING e3 c10 n12", "NONE DLQ#1", 0},
    {"delivered: then the sink commit", 1, DSINK, "dlq ok",
     "SINK_COMMIT #1 @1000", "t:0 RUNNING e3 c10 n12", "NONE AT_SINK#1", 0},
    {"not delivered: like RETRY, nothing committed", 1, DSINK, "dlq fail",
     "PAUSE t:0, PAUSE t:1",
     "t:0 RUNNING e3 c10 n12 paused; t:1 RUNNING e3 c10 n11 paused",
     "NONE RETRY_WAIT#1", 0},
    {"not delivered: sent again after the backoff", 1, DSINK "; dlq fail",
     "timer +200", "DLQ_SEND #1", "t:0 RUNNING e3 c10 n12 paused", "NONE DLQ#1",
     0},
    {"delivered once: a RETRY of the sink does not send them again", 1,
     DSINK "; dlq ok; answer RETRY", "timer +200", "SINK_COMMIT #1 @1200",
     "t:0 RUNNING e3 c10 n12 paused", "NONE AT_SINK#1", 0},
    {"revoked while the dead letters were out: dropped, not committed", 1,
     DSINK "; revoke t:0", "dlq ok",
     "DROP_BATCH #1, WRITE_STATUS, SEEK t:1 @10",
     "t:0 ABSENT; t:1 RUNNING e3 c10 n10", "NONE NONE", 0},

    /* ---- every answer, partitions running ---- */
    {"running: OK", 0, SINK, "answer OK", A_APPLIED, R_APPLIED, "NONE NONE", 0},
    {"running: ALREADY", 0, SINK, "answer ALREADY", A_APPLIED, R_APPLIED,
     "NONE NONE", 0},
    {"running: RETRY pauses every running partition", 0, SINK, "answer RETRY",
     "PAUSE t:0, PAUSE t:1",
     "t:0 RUNNING e3 c10 n12 paused; t:1 RUNNING e3 c10 n11 paused",
     "NONE RETRY_WAIT#1", 0},
    {"running: RETRY sends the same batch after the backoff", 0,
     SINK "; answer RETRY", "timer +200", "SINK_COMMIT #1 @1200",
     "t:0 RUNNING e3 c10 n12 paused", "NONE AT_SINK#1", 0},
    {"running: RETRY, then OK resumes and seeks past the batch", 0,
     SINK "; answer RETRY; timer +200", "answer OK",
     A_APPLIED ", RESUME t:0, RESUME t:1, SEEK t:0 @12, SEEK t:1 @11",
     R_APPLIED, "NONE NONE", 0},
    {"running: a record while paused is read again later", 0,
     SINK "; answer RETRY", "rec t:0 12", "",
     "t:0 RUNNING e3 c10 n12 paused seek", "NONE RETRY_WAIT#1", 0},
    {"running: FENCED pauses the partition another owner claimed", 0, SINK,
     "answer FENCED t:0 e4 n10 t:1 e3 n10",
     "PAUSE t:0, DROP_BATCH #1, WRITE_STATUS, SEEK t:1 @10",
     "t:0 FENCED e3 c10 n10 seek; t:1 RUNNING e3 c10 n10", "NONE NONE", 0},
    {"running: FENCED, markers not read: back to the committed offsets", 0,
     SINK, "answer FENCED noread", A_DROP1_SEEK, R_RUN, "NONE NONE", 0},
    {"running: CONFLICT goes on from the marker read again", 0, SINK,
     "answer CONFLICT t:0 e3 n12 t:1 e3 n10",
     "DROP_BATCH #1, WRITE_STATUS, SEEK t:0 @12, SEEK t:1 @10",
     "t:0 RUNNING e3 c12 n12; t:1 RUNNING e3 c10 n10", "NONE NONE", 0},
    {"running: CONFLICT with the marker gone fails", 0, SINK,
     "answer CONFLICT t:0 e0 n-1 t:1 e3 n10",
     "FAIL t:0, DROP_BATCH #1, WRITE_STATUS", "t:0 RUNNING e3 c10 n10 seek",
     "NONE NONE", 1},
    {"running: the fifth CONFLICT in a row fails", 0,
     SINK CONFLICT_AGAIN CONFLICT_AGAIN CONFLICT_AGAIN CONFLICT_AGAIN,
     "answer CONFLICT t:0 e3 n10", "FAIL, DROP_BATCH #5, WRITE_STATUS",
     "t:0 RUNNING e3 c10 n10 seek", "NONE NONE", 1},
    {"running: an OK between resets the CONFLICT count", 0,
     SINK CONFLICT_AGAIN CONFLICT_AGAIN CONFLICT_AGAIN
     "; answer OK; rec t:0 11; due" CONFLICT_AGAIN,
     "answer CONFLICT t:0 e3 n11", "DROP_BATCH #6, WRITE_STATUS, SEEK t:0 @11",
     "t:0 RUNNING e3 c11 n11", "NONE NONE", 0},
    {"running: INVALID fails", 0, SINK, "answer INVALID", A_FAIL1,
     "t:0 RUNNING e3 c10 n10 seek", "NONE NONE", 1},
    {"running: FATAL fails", 0, SINK, "answer FATAL", A_FAIL1,
     "t:0 RUNNING e3 c10 n10 seek", "NONE NONE", 1},
    {"a record the builder fails on fails the connector", 0, RUN,
     "recfail t:0 10", "RANGE t:0 #1 @10, TAKE t:0 #1 @10, FAIL, DROP_BATCH #1",
     "t:0 RUNNING e3 c10 n10 seek", "NONE NONE", 1},
    {"a TAKE answered, its batch due is cut then", 0,
     RUN "; rec t:0 10 2000000", "timer +1", "", "t:0 RUNNING e3 c10 n11",
     "NONE AT_SINK#1", 0},
    {"failed: nothing more is taken", 0, SINK "; answer FATAL", "rec t:0 10",
     "", "t:0 RUNNING e3 c10 n10 seek", "NONE NONE", 1},

    /* ---- every answer, another partition paused after FENCED ---- */
    {"fenced beside: OK commits the running one only", 0, FSINK, "answer OK",
     "COMMIT_OFFSETS t:0 @11",
     "t:0 RUNNING e3 c11 n11; t:1 FENCED e3 c10 n10 seek", "NONE NONE", 0},
    {"fenced beside: ALREADY", 0, FSINK, "answer ALREADY",
     "COMMIT_OFFSETS t:0 @11",
     "t:0 RUNNING e3 c11 n11; t:1 FENCED e3 c10 n10 seek", "NONE NONE", 0},
    {"fenced beside: RETRY pauses the running one only", 0, FSINK,
     "answer RETRY", "PAUSE t:0",
     "t:0 RUNNING e3 c10 n11 paused; t:1 FENCED e3 c10 n10 seek",
     "NONE RETRY_WAIT#2", 0},
    {"fenced beside: FENCED again fences the other too", 0, FSINK,
     "answer FENCED t:0 e5 n10", "PAUSE t:0, DROP_BATCH #2, WRITE_STATUS",
     "t:0 FENCED e3 c10 n10 seek; t:1 FENCED e3 c10 n10 seek", "NONE NONE", 0},
    {"fenced beside: CONFLICT", 0, FSINK, "answer CONFLICT t:0 e3 n11",
     "DROP_BATCH #2, WRITE_STATUS, SEEK t:0 @11",
     "t:0 RUNNING e3 c11 n11; t:1 FENCED e3 c10 n10 seek", "NONE NONE", 0},
    {"fenced beside: INVALID", 0, FSINK, "answer INVALID",
     "FAIL, DROP_BATCH #2, WRITE_STATUS", "t:1 FENCED e3 c10 n10 seek",
     "NONE NONE", 1},
    {"fenced beside: FATAL", 0, FSINK, "answer FATAL",
     "FAIL, DROP_BATCH #2, WRITE_STATUS", "t:1 FENCED e3 c10 n10 seek",
     "NONE NONE", 1},
    {"fenced: a record of it is not taken", 0, FENCED0, "rec t:0 10", "",
     "t:0 FENCED e3 c10 n10 seek", "NONE NONE", 0},
    {"fenced: no revoke yet within the bound", 0, FENCED0, "timer +499", "",
     "t:0 FENCED e3 c10 n10 seek", "NONE NONE", 0},
    {"fenced: past the bound its marker is read again", 0, FENCED0,
     "timer +500", "READ_MARKERS t:0", "t:0 FENCED e3 c10 n10 seek",
     "NONE NONE", 0},
    {"fenced: marker unchanged, claimed again from it", 0,
     FENCED0 "; timer +500", "read ok t:0 e4 n10", "CLAIM t:0 @10",
     "t:0 FENCED e3 c10 n10 seek", "NONE NONE", 0},
    {"fenced: marker moved, another live writer, not claimed", 0,
     FENCED0 "; timer +500", "read ok t:0 e4 n20", "DEGRADE t:0",
     "t:0 FENCED e3 c10 n10 seek", "NONE NONE", 0},
    {"fenced: marker gone fails", 0, FENCED0 "; timer +500",
     "read ok t:0 e0 n-1", "FAIL t:0", "t:0 FENCED e3 c10 n10 seek",
     "NONE NONE", 1},
    {"fenced: the read RETRY waits for the claim backoff", 0,
     FENCED0 "; timer +500; read retry", "timer +1", "",
     "t:0 FENCED e3 c10 n10 seek", "NONE NONE", 0},
    {"fenced: claimed again, resumed, sought to the marker", 0,
     FENCED0 "; timer +500; read ok t:0 e4 n10", "claimed ok t:0 e5 n10",
     "RESUME t:0, WRITE_STATUS, SEEK t:0 @10", "t:0 RUNNING e5 c10 n10",
     "NONE NONE", 0},
    {"fenced: a re-claim that did not raise the epoch fails", 0,
     FENCED0 "; timer +500; read ok t:0 e4 n10", "claimed ok t:0 e4 n10",
     "FAIL t:0", "t:0 FENCED e3 c10 n10 seek", "NONE NONE", 1},
    {"fenced: revoked at last", 0, FENCED0, "revoke t:0", "",
     "t:0 ABSENT; t:1 RUNNING e3 c10 n10", "NONE NONE", 0},

    /* ---- every answer, a partition revoked while at the sink ---- */
    {"revoked at the sink: waits for the answer", 0, SINK, "revoke t:0", "",
     "t:0 REVOKING e3 c10 n12; t:1 RUNNING e3 c10 n11", "NONE AT_SINK#1!", 0},
    {"revoking: OK commits group offsets of the owned one only", 0, RSINK,
     "answer OK", "COMMIT_OFFSETS t:1 @11",
     "t:0 ABSENT; t:1 RUNNING e3 c11 n11", "NONE NONE", 0},
    {"revoking: ALREADY", 0, RSINK, "answer ALREADY", "COMMIT_OFFSETS t:1 @11",
     "t:0 ABSENT; t:1 RUNNING e3 c11 n11", "NONE NONE", 0},
    {"revoking: RETRY drops the batch", 0, RSINK, "answer RETRY",
     "DROP_BATCH #1, WRITE_STATUS, SEEK t:1 @10",
     "t:0 ABSENT; t:1 RUNNING e3 c10 n10", "NONE NONE", 0},
    {"revoking: FENCED", 0, RSINK, "answer FENCED t:0 e4 n10 t:1 e3 n10",
     "DROP_BATCH #1, WRITE_STATUS, SEEK t:1 @10",
     "t:0 ABSENT; t:1 RUNNING e3 c10 n10", "NONE NONE", 0},
    {"revoking: CONFLICT", 0, RSINK, "answer CONFLICT t:0 e3 n12 t:1 e3 n11",
     "DROP_BATCH #1, WRITE_STATUS, SEEK t:1 @11",
     "t:0 ABSENT; t:1 RUNNING e3 c11 n11", "NONE NONE", 0},
    {"revoking: INVALID", 0, RSINK, "answer INVALID", A_FAIL1, "t:0 ABSENT",
     "NONE NONE", 1},
    {"revoking: FATAL", 0, RSINK, "answer FATAL", A_FAIL1, "t:0 ABSENT",
     "NONE NONE", 1},
    {"revoked during retries: dropped at once", 0, SINK "; answer RETRY",
     "revoke t:0", "DROP_BATCH #1, RESUME t:1, WRITE_STATUS, SEEK t:1 @10",
     "t:0 ABSENT; t:1 RUNNING e3 c10 n10", "NONE NONE", 0},
    {"revoke of a partition not in the batch keeps it", 0, RUN "; rec t:0 10",
     "revoke t:1", "", "t:0 RUNNING e3 c10 n11; t:1 ABSENT", "BUILDING#1 NONE",
     0},
    {"revoke of a partition of the batch being built drops it", 0, BUILD,
     "revoke t:0", "DROP_BATCH #1, SEEK t:1 @10",
     "t:0 ABSENT; t:1 RUNNING e3 c10 n10", "NONE NONE", 0},
    /* A batch's ranges name their partition by its topic string: a revoke
     * that forgot a partition before dropping the batch read it freed
     * (seen under the sanitizers with a same-numbered partition of another
     * topic beside it). */
    {"revoke drops the batch built before the partition goes (two topics)", 0,
     "assign a:0 b:0; claimed ok a:0 e3 n10 b:0 e3 n10; rec a:0 10; rec b:0 10",
     "revoke a:0", "DROP_BATCH #1, SEEK b:0 @10",
     "a:0 ABSENT; b:0 RUNNING e3 c10 n10", "NONE NONE", 0},
    {"revoke during retries drops before the partition goes (two topics)", 0,
     "assign a:0 b:0; claimed ok a:0 e3 n10 b:0 e3 n10; rec a:0 10; "
     "rec b:0 10; due; answer RETRY",
     "revoke a:0", "DROP_BATCH #1, RESUME b:0, WRITE_STATUS, SEEK b:0 @10",
     "a:0 ABSENT; b:0 RUNNING e3 c10 n10", "NONE NONE", 0},
    {"assigned again while revoking: claimed again", 0, RSINK, "assign t:0",
     "CLAIM t:0 @-1", "t:0 CLAIMING e3 c10 n12", "NONE AT_SINK#1!", 0},

    /* ---- every answer, partitions lost while at the sink ---- */
    {"lost at the sink: waits for the answer", 0, SINK, "lost t:0 t:1", "",
     "t:0 LOST e3 c10 n12; t:1 LOST e3 c10 n11", "NONE AT_SINK#1!", 0},
    {"lost: OK commits no group offset", 0, LSINK, "answer OK", "",
     "t:0 ABSENT; t:1 ABSENT", "NONE NONE", 0},
    {"lost: ALREADY", 0, LSINK, "answer ALREADY", "", "t:0 ABSENT; t:1 ABSENT",
     "NONE NONE", 0},
    {"lost: RETRY drops", 0, LSINK, "answer RETRY",
     "DROP_BATCH #1, WRITE_STATUS", "t:0 ABSENT; t:1 ABSENT", "NONE NONE", 0},
    {"lost: FENCED", 0, LSINK, "answer FENCED t:0 e4 n10 t:1 e4 n10",
     "DROP_BATCH #1, WRITE_STATUS", "t:0 ABSENT", "NONE NONE", 0},
    {"lost: CONFLICT", 0, LSINK, "answer CONFLICT t:0 e3 n12 t:1 e3 n10",
     "DROP_BATCH #1, WRITE_STATUS", "t:0 ABSENT", "NONE NONE", 0},
    {"lost: INVALID", 0, LSINK, "answer INVALID", A_FAIL1, "t:0 ABSENT",
     "NONE NONE", 1},
    {"lost: FATAL", 0, LSINK, "answer FATAL", A_FAIL1, "t:0 ABSENT",
     "NONE NONE", 1},
    {"lost drops the batch being built whatever its partitions", 0,
     RUN "; rec t:1 10", "lost t:0", "DROP_BATCH #1, SEEK t:1 @10",
     "t:0 ABSENT; t:1 RUNNING e3 c10 n10", "NONE NONE", 0},

    /* ---- every answer, another partition still claiming ---- */
    {"claiming beside: OK", 0, CSINK, "answer OK", A_APPLIED,
     "t:2 CLAIMING e0 c-1 n-1; t:0 RUNNING e3 c12 n12", "NONE NONE", 0},
    {"claiming beside: ALREADY", 0, CSINK, "answer ALREADY", A_APPLIED,
     "t:2 CLAIMING e0 c-1 n-1", "NONE NONE", 0},
    {"claiming beside: RETRY pauses the running ones", 0, CSINK, "answer RETRY",
     "PAUSE t:0, PAUSE t:1", "t:2 CLAIMING e0 c-1 n-1", "NONE RETRY_WAIT#1", 0},
    {"claiming beside: FENCED", 0, CSINK, "answer FENCED t:0 e4 n10 t:1 e3 n10",
     "PAUSE t:0, DROP_BATCH #1, WRITE_STATUS, SEEK t:1 @10",
     "t:2 CLAIMING e0 c-1 n-1; t:0 FENCED e3 c10 n10 seek", "NONE NONE", 0},
    {"claiming beside: CONFLICT", 0, CSINK,
     "answer CONFLICT t:0 e3 n10 t:1 e3 n10", A_DROP1_SEEK,
     "t:2 CLAIMING e0 c-1 n-1", "NONE NONE", 0},
    {"claiming beside: INVALID", 0, CSINK, "answer INVALID", A_FAIL1,
     "t:2 CLAIMING e0 c-1 n-1", "NONE NONE", 1},
    {"claiming beside: FATAL", 0, CSINK, "answer FATAL", A_FAIL1,
     "t:2 CLAIMING e0 c-1 n-1", "NONE NONE", 1},
    {"claiming beside: claimed while a batch is at the sink", 0, CSINK,
     "claimed ok t:2 e1 n0", "START t:2 @0, RESUME t:2, WRITE_STATUS",
     "t:2 RUNNING e1 c0 n0", "NONE AT_SINK#1", 0},

    /* ---- stopping ---- */
    {"stop cuts the batch, its deadline the stop's grace", 0, BUILD, "stop",
     "SINK_COMMIT #1 @50", "t:0 RUNNING e3 c10 n12", "NONE AT_SINK#1", 0},
    {"stopping: no record is taken", 0, RUN "; stop", "rec t:0 10", "",
     "t:0 RUNNING e3 c10 n10", "NONE NONE", 0},
    {"stopping: RETRY past the grace gives the batch up", 0,
     SINK "; stop; timer +60", "answer RETRY", A_DROP1_SEEK, R_RUN, "NONE NONE",
     0},
    {"stopping: RETRY within the grace retries", 0, SINK "; stop",
     "answer RETRY", "PAUSE t:0, PAUSE t:1", "t:0 RUNNING e3 c10 n12 paused",
     "NONE RETRY_WAIT#1", 0},

    {"stopping: a deferred claim is not retried", 0, DEFER "; stop", "timer +1",
     "", "t:0 CLAIMING e0 c-1 n-1 deferred", "NONE NONE", 0},
    {"stopping: a batch waiting to retry is tried again at once", 0,
     SINK "; answer RETRY", "stop", "SINK_COMMIT #1 @50",
     "t:0 RUNNING e3 c10 n12 paused", "NONE AT_SINK#1", 0},
    {"going on after a pause: every running partition read again", 0,
     SINK "; stop pausing; answer OK", "goon", "SEEK t:0 @12, SEEK t:1 @11",
     "t:0 RUNNING e3 c12 n12; t:1 RUNNING e3 c11 n11", "NONE NONE", 0},
    {"going on after a pause: records are taken again", 0,
     SINK "; stop pausing; answer OK; goon", "rec t:0 12",
     "RANGE t:0 #2 @12, TAKE t:0 #2 @12", "t:0 RUNNING e3 c12 n13",
     "BUILDING#2 NONE", 0},
    {"going on after a pause: a deferred claim is retried again", 0,
     DEFER "; stop pausing; goon", "timer +1", "CLAIM t:0 @-1",
     "t:0 CLAIMING e0 c-1 n-1 deferred", "NONE NONE", 0},
    {"stopping: the batch built behind goes after the answer, in the grace", 0,
     PSINK "; stop", "answer OK", A_APPLIED ", SINK_COMMIT #2 @50",
     "t:0 RUNNING e3 c12 n13", "NONE AT_SINK#2", 0},

    /* ---- seeks ---- */
    {"a failed seek is asked again at the next step", 0,
     SINK "; answer FENCED noread", "seekfail t:0", "",
     "t:0 RUNNING e3 c10 n10 seek", "NONE NONE", 0},
    {"a failed seek, asked again", 0,
     SINK "; answer FENCED noread; seekfail t:0", "timer +1", "SEEK t:0 @10",
     "t:0 RUNNING e3 c10 n10", "NONE NONE", 0},

    /* ---- the commit deadline: a RETRY at it cuts the batch in half ---- */
    {"deadline: RETRY at it drops the batch, cut in half", 0,
     SINK "; timer +1000", "answer RETRY", A_DROP1_SEEK, R_RUN, "NONE NONE", 0},
    {"deadline: RETRY before it retries the whole batch", 0,
     SINK "; timer +999", "answer RETRY", "PAUSE t:0, PAUSE t:1",
     "t:0 RUNNING e3 c10 n12 paused", "NONE RETRY_WAIT#1", 0},
    {"deadline: the next batch is due at half the records", 0, SPLIT,
     "rec t:0 10",
     "RANGE t:0 #2 @10, TAKE t:0 #2 @10 quiet, SINK_COMMIT #2 @2000",
     "t:0 RUNNING e3 c10 n11", "NONE AT_SINK#2", 0},
    {"deadline: a batch of one record is not cut", 0,
     RUN "; rec t:0 10; due; timer +1000", "answer RETRY",
     "PAUSE t:0, PAUSE t:1", "t:0 RUNNING e3 c10 n11 paused",
     "NONE RETRY_WAIT#1", 0},
    {"deadline: dead letters not delivered are no cut", 1,
     DSINK "; timer +1000", "dlq fail", "PAUSE t:0, PAUSE t:1",
     "t:0 RUNNING e3 c10 n12 paused", "NONE RETRY_WAIT#1", 0},
    {"deadline: stopping gives up rather than cut", 0,
     SINK "; stop; timer +1000", "answer RETRY", A_DROP1_SEEK, R_RUN,
     "NONE NONE", 0},
    {"deadline: a commit in under a third of it doubles the cap", 0,
     SPLIT "; rec t:0 10; timer +333; answer OK; rec t:0 11", "rec t:0 12",
     "TAKE t:0 #3 @12, SINK_COMMIT #3 @2333", "t:0 RUNNING e3 c11 n13",
     "NONE AT_SINK#3", 0},
    {"deadline: a slower commit keeps the cap", 0,
     SPLIT "; rec t:0 10; timer +334; answer OK", "rec t:0 11",
     "RANGE t:0 #3 @11, TAKE t:0 #3 @11, SINK_COMMIT #3 @2334",
     "t:0 RUNNING e3 c11 n12", "NONE AT_SINK#3", 0},

    /* ---- a partition stopped by a record the converter refused ---- */
    {"stop: the partition stops there, the batch is read again", 0,
     RUN "; rec t:0 10; rec t:1 10", "stoprec t:0 11",
     "TAKE t:0 #1 @11, DEGRADE t:0, DROP_BATCH #1, SEEK t:0 @10, SEEK t:1 @10",
     "t:0 RUNNING e3 c10 n10 stop@11; t:1 RUNNING e3 c10 n10", "NONE NONE", 0},
    {"stop: the records before it are taken again", 0, STOP, "rec t:0 10",
     "RANGE t:0 #2 @10, TAKE t:0 #2 @10", "t:0 RUNNING e3 c10 n11 stop@11",
     "BUILDING#2 NONE", 0},
    {"stop: the record at it is refused, the partition paused there", 0,
     STOP "; rec t:0 10", "rec t:0 11", "PAUSE t:0",
     "t:0 RUNNING e3 c10 n11 seek stop@11 held", "BUILDING#2 NONE", 0},
    {"stop: a record past it carries the range to it", 0, STOP, "rec t:0 12",
     "RANGE t:0 #2 @10, EXTEND t:0 #2 @11, PAUSE t:0",
     "t:0 RUNNING e3 c10 n11 seek stop@11 held", "BUILDING#2 NONE", 0},
    {"stop: a hole before it, the range carried over it", 0,
     RUN "; rec t:0 10; stoprec t:0 12; rec t:0 10", "rec t:0 12",
     "EXTEND t:0 #2 @12, PAUSE t:0", "t:0 RUNNING e3 c10 n12 seek stop@12 held",
     "BUILDING#2 NONE", 0},
    {"stop: a partition end at or past it is refused too", 0,
     STOP "; rec t:0 10", "end t:0 15", "PAUSE t:0",
     "t:0 RUNNING e3 c10 n11 seek stop@11 held", "BUILDING#2 NONE", 0},
    {"stop: the other partitions go on", 0, STOP "; rec t:0 10; rec t:0 11",
     "rec t:1 10", "RANGE t:1 #2 @10, TAKE t:1 #2 @10",
     "t:0 RUNNING e3 c10 n11 seek stop@11 held; t:1 RUNNING e3 c10 n11",
     "BUILDING#2 NONE", 0},
    {"stop: its marker ends at it exactly, it stays paused", 0, HELD "; due",
     "answer OK", "COMMIT_OFFSETS t:0 @11, COMMIT_OFFSETS t:1 @11",
     "t:0 RUNNING e3 c11 n11 seek stop@11 held; t:1 RUNNING e3 c11 n11",
     "NONE NONE", 0},
    {"stop: RETRY's backpressure leaves it alone", 0, HELD "; due",
     "answer RETRY", "PAUSE t:1",
     "t:0 RUNNING e3 c10 n11 seek stop@11 held; t:1 RUNNING e3 c10 n11 paused",
     "NONE RETRY_WAIT#2", 0},
    {"stop: after RETRY, OK resumes the others only", 0,
     HELD "; due; answer RETRY; timer +200", "answer OK",
     "COMMIT_OFFSETS t:0 @11, COMMIT_OFFSETS t:1 @11, RESUME t:1, SEEK t:1 @11",
     "t:0 RUNNING e3 c11 n11 seek stop@11 held; t:1 RUNNING e3 c11 n11",
     "NONE NONE", 0},
    {"stop: its batch dropped, it is read again up to the stop", 0,
     HELD "; due", "answer CONFLICT t:0 e3 n10 t:1 e3 n10",
     "DROP_BATCH #2, WRITE_STATUS, RESUME t:0, SEEK t:0 @10, SEEK t:1 @10",
     "t:0 RUNNING e3 c10 n10 stop@11; t:1 RUNNING e3 c10 n10", "NONE NONE", 0},
    {"stop: a claim of it again forgets the stop", 0, HELD "; assign t:0",
     "claimed ok t:0 e4 n10", "START t:0 @10, RESUME t:0, WRITE_STATUS",
     "t:0 RUNNING e4 c10 n10", "BUILDING#2 NONE", 0},
    {"stop: a revoke forgets it", 0, HELD "; revoke t:0; assign t:0",
     "claimed ok t:0 e4 n11", "START t:0 @11, RESUME t:0, WRITE_STATUS",
     "t:0 RUNNING e4 c11 n11", "NONE NONE", 0},

    /* ---- records as a sign of recovery (the status) ---- */
    {"flow: records read again after a RETRY are no sign", 0,
     SINK "; answer RETRY; revoke t:0", "rec t:1 10",
     "RANGE t:1 #2 @10, TAKE t:1 #2 @10 quiet", "t:1 RUNNING e3 c10 n11",
     "BUILDING#2 NONE", 0},
    {"flow: a claim after the RETRY is", 0,
     SPLIT "; assign t:2; claimed ok t:2 e1 n0", "rec t:0 10",
     "RANGE t:0 #2 @10, TAKE t:0 #2 @10, SINK_COMMIT #2 @2000",
     "t:0 RUNNING e3 c10 n11", "NONE AT_SINK#2", 0},
    {"flow: a committed batch after the RETRY is", 0,
     SINK "; answer RETRY; timer +200; answer OK", "rec t:0 12",
     "RANGE t:0 #2 @12, TAKE t:0 #2 @12", "t:0 RUNNING e3 c12 n13",
     "BUILDING#2 NONE", 0},

    /* ---- the pipeline: one batch built while one is at the sink ---- */
    {"pipeline: records go to the next batch from the first's end", 0, SINK,
     "rec t:0 12", "RANGE t:0 #2 @12, TAKE t:0 #2 @12",
     "t:0 RUNNING e3 c10 n13", "BUILDING#2 AT_SINK#1", 0},
    {"pipeline: the next batch waits while one is at the sink", 0, PSINK, "due",
     "", "t:0 RUNNING e3 c10 n13", "BUILDING#2 AT_SINK#1", 0},
    {"pipeline: OK hands the waiting batch to the sink", 0, PSINK "; due",
     "answer OK", A_APPLIED ", SINK_COMMIT #2 @1000", "t:0 RUNNING e3 c12 n13",
     "NONE AT_SINK#2", 0},
    {"pipeline: OK, the next not due yet, keeps building", 0, PSINK,
     "answer OK", A_APPLIED, "t:0 RUNNING e3 c12 n13", "BUILDING#2 NONE", 0},
    {"pipeline: RETRY discards the next, reread from the first's end", 0, PSINK,
     "answer RETRY", "DROP_BATCH #2, PAUSE t:0, PAUSE t:1",
     "t:0 RUNNING e3 c10 n12 paused seek", "NONE RETRY_WAIT#1", 0},
    {"pipeline: RETRY then OK seeks past the first", 0,
     PSINK "; answer RETRY; timer +200", "answer OK",
     A_APPLIED ", RESUME t:0, RESUME t:1, SEEK t:0 @12, SEEK t:1 @11",
     R_APPLIED, "NONE NONE", 0},
    {"pipeline: FENCED discards both", 0, PSINK,
     "answer FENCED t:0 e4 n10 t:1 e3 n10",
     "DROP_BATCH #2, PAUSE t:0, DROP_BATCH #1, WRITE_STATUS, SEEK t:1 @10",
     "t:0 FENCED e3 c10 n10 seek", "NONE NONE", 0},
    {"pipeline: CONFLICT discards both, on from the markers", 0, PSINK,
     "answer CONFLICT t:0 e3 n11 t:1 e3 n10",
     "DROP_BATCH #2, DROP_BATCH #1, WRITE_STATUS, SEEK t:0 @11, SEEK t:1 @10",
     "t:0 RUNNING e3 c11 n11", "NONE NONE", 0},
    {"pipeline: FATAL discards both", 0, PSINK, "answer FATAL",
     "FAIL, DROP_BATCH #2, DROP_BATCH #1, WRITE_STATUS",
     "t:0 RUNNING e3 c10 n10 seek", "NONE NONE", 1},
    {"pipeline: a hold pauses every partition, the next batch kept", 0,
     PSINK "; due", "hold", "PAUSE t:0, PAUSE t:1",
     "t:0 RUNNING e3 c10 n13 paused; t:1 RUNNING e3 c10 n11 paused",
     "BUILDING#2 AT_SINK#1", 0},
    {"pipeline: held, a record is not taken and read again later", 0,
     PSINK "; due; hold", "rec t:0 13", "",
     "t:0 RUNNING e3 c10 n13 paused seek", "BUILDING#2 AT_SINK#1", 0},
    {"pipeline: held, OK resumes, seeks past the next, hands it over", 0,
     PSINK "; due; hold; rec t:0 13", "answer OK",
     A_APPLIED ", RESUME t:0, RESUME t:1, SINK_COMMIT #2 @1000, "
               "SEEK t:0 @13, SEEK t:1 @11",
     "t:0 RUNNING e3 c12 n13; t:1 RUNNING e3 c11 n11", "NONE AT_SINK#2", 0},
    {"pipeline: held, RETRY discards the next, stays paused", 0,
     PSINK "; due; hold", "answer RETRY", "DROP_BATCH #2",
     "t:0 RUNNING e3 c10 n12 paused seek", "NONE RETRY_WAIT#1", 0},
    {"pipeline: held, a partition claimed meanwhile is held too", 0,
     PSINK "; due; hold; assign t:2; claimed ok t:2 e3 n10", "rec t:2 10", "",
     "t:0 RUNNING e3 c10 n13 paused; t:1 RUNNING e3 c10 n11 paused; "
     "t:2 RUNNING e3 c10 n10 paused seek",
     "BUILDING#2 AT_SINK#1", 0},
    {"pipeline: a second hold changes nothing", 0, PSINK "; due; hold", "hold",
     "", "t:0 RUNNING e3 c10 n13 paused", "BUILDING#2 AT_SINK#1", 0},
    {"hold without a batch at the sink changes nothing", 0, BUILD, "hold", "",
     "t:0 RUNNING e3 c10 n12", "BUILDING#1 NONE", 0},
    {"pipeline: revoke hits the next batch and the one at the sink", 0, PSINK,
     "revoke t:0", "DROP_BATCH #2",
     /* a revoked partition is read no more: its position is not reset */
     "t:0 REVOKING e3 c10 n13; t:1 RUNNING e3 c10 n11", "NONE AT_SINK#1!", 0},
};

START_TEST(table_row) {
    const row *r = &rows[_i];
    tm_machine_config cfg;
    config(&cfg, r->dlq);
    char err[256];
    driver *d = calloc(1, sizeof *d);
    ck_assert_ptr_nonnull(d);
    d->m = tm_machine_new(&cfg, err, sizeof err);
    ck_assert_msg(d->m != NULL, "%s", err);
    run_script(d, r->setup);
    run_event(d, r->event);
    ck_assert_msg(strcmp(d->rendered, r->actions) == 0,
                  "row %d '%s': actions\n  got:  %s\n  want: %s", _i, r->name,
                  d->rendered, r->actions);
    char want[512];
    snprintf(want, sizeof want, "%s", r->parts);
    char *save = NULL;
    for (char *p = strtok_r(want, ";", &save); p;
         p = strtok_r(NULL, ";", &save)) {
        while (*p == ' ')
            p++;
        char name[32], got[256];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(p, " "), p);
        render_part(d, name, got, sizeof got);
        ck_assert_msg(strcmp(got, p) == 0,
                      "row %d '%s': partition\n  got:  %s\n  want: %s", _i,
                      r->name, got, p);
    }
    char batches[128];
    render_batches(d, batches, sizeof batches);
    ck_assert_msg(strcmp(batches, r->batches) == 0,
                  "row %d '%s': batches\n  got:  %s\n  want: %s", _i, r->name,
                  batches, r->batches);
    ck_assert_msg(tm_machine_failed(d->m) == r->failed,
                  "row %d '%s': failed %d, want %d", _i, r->name,
                  tm_machine_failed(d->m), r->failed);
    tm_machine_free(d->m);
    free(d);
}
END_TEST

/* Malformed events are refused with a reason and change nothing. */
START_TEST(malformed_events) {
    tm_machine_config cfg;
    config(&cfg, 0);
    char err[256];
    tm_machine *m = tm_machine_new(&cfg, err, sizeof err);
    ck_assert_ptr_nonnull(m);
    const tm_machine_action *a;
    size_t n;
    tm_machine_event ev = {.kind = TM_EV_SINK_ANSWER, .batch = 7};
    ck_assert_int_eq(tm_machine_step(m, &ev, &a, &n, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "not at the sink") != NULL, "%s", err);
    ev = (tm_machine_event){.kind = TM_EV_TIMER, .now_ms = 10};
    ck_assert_int_eq(tm_machine_step(m, &ev, &a, &n, err, sizeof err), 0);
    ev.now_ms = 9;
    ck_assert_int_eq(tm_machine_step(m, &ev, &a, &n, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "went back") != NULL, "%s", err);
    ev = (tm_machine_event){.kind = TM_EV_RECORD, .now_ms = 10};
    ck_assert_int_eq(tm_machine_step(m, &ev, &a, &n, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "no topic") != NULL, "%s", err);
    tm_marker mk = {.struct_size = sizeof mk, .topic = "t", .epoch = 0};
    ev = (tm_machine_event){.kind = TM_EV_CLAIMED,
                            .now_ms = 10,
                            .status = TM_OK,
                            .markers = &mk,
                            .nmarkers = 1};
    ck_assert_int_eq(tm_machine_step(m, &ev, &a, &n, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "bounds") != NULL, "%s", err);
    /* A converter's STOP answers the TAKE of the batch being built. */
    ev = (tm_machine_event){.kind = TM_EV_RECORD_STOP,
                            .now_ms = 10,
                            .batch = 1,
                            .topic = "t",
                            .offset = 3};
    ck_assert_int_eq(tm_machine_step(m, &ev, &a, &n, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "no TAKE") != NULL, "%s", err);
    tm_machine_config bad = cfg;
    bad.max_records = 0;
    ck_assert_ptr_null(tm_machine_new(&bad, err, sizeof err));
    ck_assert_msg(strstr(err, "max_records") != NULL, "%s", err);
    tm_machine_free(m);
}
END_TEST

/* The machine's own reasons name the partition and what to do: the texts
 * of commit/marker_check.c, which claim.c prints too. */
typedef struct reason {
    const char *setup, *event, *want;
} reason;

static const reason reasons[] = {
    {"assign t:0", "claimed ok t:0 e3 n5 lo8",
     "t [0]: the sink's marker 5 is below the log start offset 8: records "
     "5..7 were deleted by retention before they were applied; reset with "
     "`tidemark offsets --reset-to`"},
    {"assign t:0", "claimed ok t:0 e3 n150 hi100",
     "t [0]: the sink's marker 150 is above the high watermark 100: was the "
     "topic deleted and created again? reset with `tidemark offsets "
     "--reset-to`"},
    {SINK, "answer CONFLICT t:0 e0 n-1",
     "t [0]: the sink holds no marker for t[0] any more (deleted, or the "
     "sink restored from a backup): nothing more is applied; decide with "
     "`tidemark offsets CONFIG --reset-to ...`"},
    {FENCED0 "; timer +500", "read ok t:0 e4 n20",
     "t [0]: another live writer (another group or host?) keeps committing "
     "t[0]: its marker moved from 10 (epoch 4) to 20 (epoch 4) in 500 ms, "
     "this host fenced; not claimed again while it moves"},
    {RUN "; rec t:0 10; rec t:1 10", "stoprec t:0 11",
     "t [0] stopped at offset 11: column n: int64 narrowed to int32; nothing "
     "at or past it is committed, the other partitions go on: change the "
     "target table (or list the columns in $.mapping) and restart"},
    {SINK CONFLICT_AGAIN CONFLICT_AGAIN CONFLICT_AGAIN CONFLICT_AGAIN,
     "answer CONFLICT t:0 e3 n10",
     "CONFLICT 5 times in a row: the rebuild does not converge (something "
     "else writes the markers)"},
};

START_TEST(fail_reasons) {
    const reason *r = &reasons[_i];
    tm_machine_config cfg;
    config(&cfg, 0);
    char err[256];
    driver *d = calloc(1, sizeof *d);
    ck_assert_ptr_nonnull(d);
    d->m = tm_machine_new(&cfg, err, sizeof err);
    ck_assert_ptr_nonnull(d->m);
    run_script(d, r->setup);
    run_event(d, r->event);
    ck_assert_str_eq(d->why, r->want);
    tm_machine_free(d->m);
    free(d);
}
END_TEST

/* Why a batch was dropped (the executor logs it): the deadline's cut
 * says how many records the next batches hold at most; stopping gives
 * up before it cuts. */
static const reason drops[] = {
    {SINK "; timer +1000", "answer RETRY",
     "past its deadline with 3 records: rebuilt with at most 1"},
    {SINK "; stop; timer +1000", "answer RETRY",
     "giving up retries while stopping"},
    {SINK "; stop pausing; timer +1000", "answer RETRY",
     "giving up retries while pausing"},
    {SINK "; timer +10; stop stopping @20; timer +15", "answer RETRY",
     "giving up retries while stopping"},
    {RUN "; rec t:0 10; rec t:1 10", "stoprec t:0 11", "a partition stopped"},
};

START_TEST(drop_reasons) {
    const reason *r = &drops[_i];
    tm_machine_config cfg;
    config(&cfg, 0);
    char err[256];
    driver *d = calloc(1, sizeof *d);
    ck_assert_ptr_nonnull(d);
    d->m = tm_machine_new(&cfg, err, sizeof err);
    ck_assert_ptr_nonnull(d->m);
    run_script(d, r->setup);
    run_event(d, r->event);
    ck_assert_str_eq(d->dropped, r->want);
    tm_machine_free(d->m);
    free(d);
}
END_TEST

/* The ranges of both batches as the sink gets them: where each starts (the
 * marker, or the end of the batch at the sink for the one built behind
 * it), where it ends (after a record, at a partition end), its epoch. */
START_TEST(batch_ranges) {
    tm_machine_config cfg;
    config(&cfg, 0);
    char err[256];
    driver *d = calloc(1, sizeof *d);
    ck_assert_ptr_nonnull(d);
    d->m = tm_machine_new(&cfg, err, sizeof err);
    ck_assert_ptr_nonnull(d->m);
    run_script(d, PSINK "; end t:1 16");
    static const struct {
        int which;
        size_t i;
        int32_t partition;
        int64_t start, end, epoch;
    } want[] = {{1, 0, 0, 10, 12, 3},
                {1, 1, 1, 10, 11, 3},
                {0, 0, 0, 12, 13, 3},
                {0, 1, 1, 11, 16, 3}};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        tm_range r;
        ck_assert_int_eq(
            tm_machine_batch_range(d->m, want[k].which, want[k].i, &r), 0);
        ck_assert_str_eq(r.topic, "t");
        ck_assert_int_eq(r.partition, want[k].partition);
        ck_assert_int_eq(r.start_offset, want[k].start);
        ck_assert_int_eq(r.end_offset, want[k].end);
        ck_assert_int_eq(r.epoch, want[k].epoch);
    }
    tm_range r;
    ck_assert_int_eq(tm_machine_batch_range(d->m, 1, 2, &r), -1);
    tm_machine_free(d->m);
    free(d);
}
END_TEST

/* Every allocation of the machine failing in turn, through a scenario
 * that claims, builds two batches, pipelines, answers and revokes: each
 * failure is a FAIL action and a -1, never a crash or a leak (ASan). */
START_TEST(out_of_memory) {
    static const char *const script =
        SINK "; rec t:0 12; dlq ok; answer RETRY; timer +200; answer OK; "
             "rec t:0 13; due; dlq ok; answer CONFLICT t:0 e3 n13 t:1 e3 n11; "
             "revoke t:1; assign t:2; claimed ok t:2 e1 n0; rec t:2 0; due; "
             "revoke t:2; dlq ok";
    int completed = 0;
    long k = 0;
    for (; k < 1000 && !completed; k++) {
        tm_machine_config cfg;
        config(&cfg, 1);
        char err[256];
        driver *d = calloc(1, sizeof *d);
        ck_assert_ptr_nonnull(d);
        alloc_failed = 0;
        alloc_left = k;
        alloc_armed = 1;
        d->m = tm_machine_new(&cfg, err, sizeof err);
        alloc_armed = 0;
        if (!d->m) {
            ck_assert(alloc_failed);
            ck_assert_str_eq(err, "out of memory");
        } else {
            char buf[2048];
            snprintf(buf, sizeof buf, "%s", script);
            char *save = NULL;
            for (char *e = strtok_r(buf, ";", &save); e && !alloc_failed;
                 e = strtok_r(NULL, ";", &save)) {
                while (*e == ' ')
                    e++;
                run_event(d, e);
            }
            completed = !alloc_failed;
            tm_machine_free(d->m);
        }
        free(d);
    }
    alloc_left = -1;
    ck_assert_msg(completed, "the scenario never ran without a failure");
    /* The machine's own allocations in that scenario: the machine, its
     * partitions and topics, two batches' ranges, actions, strings. */
    ck_assert_msg(k > 8, "only %ld allocations failed in turn", k - 1);
    fprintf(stderr, "out of memory: %ld allocations failed in turn\n", k - 1);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("machine_table");
    TCase *tc = tcase_create("rows");
    tcase_add_loop_test(tc, table_row, 0, (int)(sizeof rows / sizeof *rows));
    tcase_add_test(tc, malformed_events);
    tcase_add_test(tc, out_of_memory);
    tcase_add_test(tc, batch_ranges);
    tcase_add_loop_test(tc, fail_reasons, 0,
                        (int)(sizeof reasons / sizeof *reasons));
    tcase_add_loop_test(tc, drop_reasons, 0,
                        (int)(sizeof drops / sizeof *drops));
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    fprintf(stderr, "%zu rows\n", sizeof rows / sizeof *rows);
    return tm_check_run(suite(), 0);
}
