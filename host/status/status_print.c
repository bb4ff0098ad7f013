#include "status/status_print.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "status/status_json.h"
#include "status/text_table.h"

void tm_status_view_free(tm_status_view *v) {
    if (v)
        tm_status_report_free(&v->r);
}

void tm_status_format_time(int64_t ms, char *out, size_t size) {
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms <= 0 || !gmtime_r(&t, &tm) ||
        strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(out, size, "-");
}

void tm_status_format_duration(int64_t ms, char *out, size_t size) {
    int64_t s = ms > 0 ? ms / 1000 : 0;
    int64_t d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60;
    s %= 60;
    if (d > 0)
        snprintf(out, size, "%" PRId64 "d%02" PRId64 "h%02" PRId64 "m", d, h,
                 m);
    else if (h > 0)
        snprintf(out, size, "%" PRId64 "h%02" PRId64 "m%02" PRId64 "s", h, m,
                 s);
    else if (m > 0)
        snprintf(out, size, "%" PRId64 "m%02" PRId64 "s", m, s);
    else
        snprintf(out, size, "%" PRId64 "s", s);
}

const char *tm_status_text(const char *text, char *out, size_t size) {
    if (size == 0)
        return out;
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        char esc[8] = "";
        if (*p < 0x20 || *p == 0x7f)
            snprintf(esc, sizeof esc, "\\x%02x", *p);
        else if (*p == '\\')
            snprintf(esc, sizeof esc, "\\\\");
        else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
            snprintf(esc, sizeof esc, "\\u%04x", *++p);
        else if (*p >= 0x80 && *p <= 0x9f &&
                 (p == (const unsigned char *)text || p[-1] < 0x80))
            /* not inside a UTF-8 sequence: a C1 control to an 8-bit
             * terminal */
            snprintf(esc, sizeof esc, "\\x%02x", *p);
        size_t n = esc[0] ? strlen(esc) : 1;
        if (o + n >= size)
            break; /* never half an escape */
        if (esc[0])
            memcpy(out + o, esc, n);
        else
            out[o] = (char)*p;
        o += n;
    }
    out[o] = '\0';
    return out;
}

/* How long ago THEN_MS was at NOW_MS; 0 for an unknown time (0 or less,
 * or from a file anyone may have written: INT64_MIN must not overflow) or
 * one in the future. */
static int64_t since(int64_t now_ms, int64_t then_ms) {
    return then_ms > 0 && then_ms < now_ms ? now_ms - then_ms : 0;
}

static const char *state_label(const tm_status_view *v) {
    return v->running ? tm_conn_state_name(v->r.snap.state) : "not running";
}

int64_t tm_status_stale_ms(const tm_status_view *v, int64_t now_ms) {
    const tm_status_snapshot *s = &v->r.snap;
    if (v->error[0] || !v->running || !v->r.live || !v->r.has_file ||
        s->state == TM_CONN_STOPPED || s->state == TM_CONN_FAILED)
        return 0;
    int64_t age = since(now_ms, s->updated_ms);
    return age > TM_STATUS_STALE_MS ? age : 0;
}

int64_t tm_status_overdue_ms(const tm_status_view *v, int64_t now_ms) {
    const tm_status_snapshot *s = &v->r.snap;
    if (v->error[0] || !v->running || !v->r.live || !v->r.has_file ||
        !s->waiting_on[0] || s->state == TM_CONN_STOPPED ||
        s->state == TM_CONN_FAILED)
        return 0;
    int64_t past = since(now_ms, s->waiting_until_ms);
    return past > TM_STATUS_STALE_MS ? past : 0;
}

int tm_status_health(const tm_status_view *views, size_t n, int64_t now_ms) {
    for (size_t i = 0; i < n; i++)
        if (views[i].error[0])
            return TM_HEALTH_ERROR;
    int degraded = 0;
    for (size_t i = 0; i < n; i++) {
        if (!views[i].running)
            return TM_HEALTH_DOWN;
        tm_conn_state st = views[i].r.snap.state;
        if (st == TM_CONN_FAILED || st == TM_CONN_STOPPED)
            return TM_HEALTH_DOWN;
        degraded |= st == TM_CONN_DEGRADED ||
                    tm_status_stale_ms(&views[i], now_ms) > 0 ||
                    tm_status_overdue_ms(&views[i], now_ms) > 0;
    }
    return degraded ? TM_HEALTH_DEGRADED : TM_HEALTH_OK;
}

/* ---- text --------------------------------------------------------------- */

static void num(char *out, size_t size, int64_t v) {
    if (v < 0)
        snprintf(out, size, "-");
    else
        snprintf(out, size, "%" PRId64, v);
}

static void unum(char *out, size_t size, uint64_t v) {
    snprintf(out, size, "%" PRIu64, v);
}

static void print_state_line(FILE *out, const tm_status_view *v,
                             int64_t now_ms) {
    const tm_status_snapshot *s = &v->r.snap;
    char t[32], d[32];
    fprintf(out, "  state       %s", state_label(v));
    if (!v->running) {
        fputs("\n", out);
        return;
    }
    if (s->state == TM_CONN_STOPPED) {
        tm_status_format_time(s->updated_ms, t, sizeof t);
        if (v->r.has_file && v->r.written != TM_CONN_STOPPED)
            fprintf(out, " (host pid %ld gone; it said %s at %s)", s->pid,
                    tm_conn_state_name(v->r.written), t);
        else
            fprintf(out, " (pid %ld, last update %s)", s->pid, t);
    } else {
        tm_status_format_duration(since(now_ms, s->started_ms), d, sizeof d);
        if (s->started_ms > 0)
            fprintf(out, " (pid %ld, up %s)", s->pid, d);
        else
            fprintf(out, " (pid %ld)", s->pid);
    }
    fputs("\n", out);
    int64_t stale = tm_status_stale_ms(v, now_ms);
    if (stale > 0) {
        tm_status_format_duration(stale, d, sizeof d);
        fprintf(out,
                "  stale       its status file is %s old (a running host "
                "rewrites it every second): the host is hung or cannot "
                "write its state directory; what it says below is from "
                "then\n",
                d);
    }
}

/* The text of a status file is whatever its writer put there: every string
 * of it goes through tm_status_text before a terminal sees it (one per
 * fprintf: they share the buffer). */
#define SAFE(s) tm_status_text((s), safe, sizeof safe)

static void print_header(FILE *out, const tm_status_view *v, int64_t now_ms) {
    const tm_status_snapshot *s = &v->r.snap;
    char t[32], d[32], safe[4 * sizeof s->last_error];
    fprintf(out, "connector %s\n", SAFE(s->connector));
    if (v->error[0]) {
        fprintf(out, "  error       %s\n", SAFE(v->error));
        return;
    }
    print_state_line(out, v, now_ms);
    /* Why DEGRADED, PAUSED or FAILED (for a host that is gone: why it was,
     * as its file says). */
    if (s->reason[0]) {
        tm_status_format_time(s->reason_since_ms, t, sizeof t);
        tm_status_format_duration(since(now_ms, s->reason_since_ms), d,
                                  sizeof d);
        fprintf(out, "  reason      since %s (%s): %s\n", t, d,
                SAFE(s->reason));
    }
    /* A step of the commit in progress (the status pulse rewrites the file
     * meanwhile): what it waits on, for how long already; not for a host
     * that is gone (it waits on nothing any more). */
    if (s->waiting_on[0] && v->r.live) {
        tm_status_format_time(s->waiting_since_ms, t, sizeof t);
        tm_status_format_duration(since(now_ms, s->waiting_since_ms), d,
                                  sizeof d);
        fprintf(out, "  waiting     since %s (%s): %s\n", t, d,
                SAFE(s->waiting_on));
        int64_t overdue = tm_status_overdue_ms(v, now_ms);
        if (overdue > 0) {
            tm_status_format_duration(overdue, d, sizeof d);
            fprintf(out,
                    "  overdue     the wait is %s past the end the host "
                    "gave it: the call does not return (a sink that "
                    "ignores its deadline, a driver blocked for good); the "
                    "connector makes no progress until it does\n",
                    d);
        }
    }
    if (s->plugin[0])
        fprintf(out, "  plugin      %s ", SAFE(s->plugin));
    if (s->plugin[0])
        fprintf(out, "%s\n", SAFE(s->plugin_version));
    if (!v->r.has_file)
        return;
    tm_status_format_time(s->updated_ms, t, sizeof t);
    tm_status_format_duration(since(now_ms, s->updated_ms), d, sizeof d);
    fprintf(out, "  updated     %s (%s ago)\n", t, d);
    if (s->last_batch_id[0]) {
        tm_status_format_time(s->last_batch_ms, t, sizeof t);
        fprintf(out, "  last batch  %s at %s, %" PRIu64 " records\n",
                SAFE(s->last_batch_id), t, s->last_batch_records);
    } else {
        fprintf(out, "  last batch  -\n");
    }
    fprintf(out,
            "  totals      rows %" PRIu64 ", dead letters %" PRIu64
            ", filtered %" PRIu64 ", duplicates %" PRIu64 ", batches %" PRIu64
            ", fenced %" PRIu64 ", conflicts %" PRIu64 ", retries %" PRIu64
            "\n",
            s->totals.rows, s->totals.dead_letters, s->totals.filtered,
            s->totals.duplicates, s->totals.batches, s->totals.fenced,
            s->totals.conflicts, s->totals.retries);
    if (s->last_error[0]) {
        tm_status_format_time(s->last_error_ms, t, sizeof t);
        fprintf(out, "  last error  %s: %s\n", t, SAFE(s->last_error));
    } else {
        fprintf(out, "  last error  -\n");
    }
}

static int print_partitions(FILE *out, const tm_status_view *v) {
    static const char *const H[] = {
        "TOPIC",          "PARTITION",  "NEXT_OFFSET", "EPOCH",
        "HIGH_WATERMARK", "LAG",        "ROWS",        "DEAD_LETTERS",
        "FILTERED",       "DUPLICATES", "PAUSED"};
    enum { NCOLS = sizeof H / sizeof H[0] };
    tm_table *t = tm_table_new(NCOLS, H);
    if (!t)
        return -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < v->r.snap.npartitions; i++) {
        const tm_status_partition *p = &v->r.snap.partitions[i];
        char c[NCOLS - 2][24], topic[4 * sizeof p->topic];
        tm_status_text(p->topic, topic, sizeof topic);
        num(c[0], sizeof c[0], p->partition);
        num(c[1], sizeof c[1], p->next_offset);
        num(c[2], sizeof c[2], p->epoch > 0 ? p->epoch : -1);
        num(c[3], sizeof c[3], p->high_watermark);
        num(c[4], sizeof c[4],
            tm_status_lag(p->next_offset, p->high_watermark));
        unum(c[5], sizeof c[5], p->rows);
        unum(c[6], sizeof c[6], p->dead_letters);
        unum(c[7], sizeof c[7], p->filtered);
        unum(c[8], sizeof c[8], p->duplicates);
        const char *cells[NCOLS] = {topic,
                                    c[0],
                                    c[1],
                                    c[2],
                                    c[3],
                                    c[4],
                                    c[5],
                                    c[6],
                                    c[7],
                                    c[8],
                                    p->stopped  ? "stopped"
                                    : p->paused ? "yes"
                                                : "no"};
        rc = tm_table_add(t, cells);
    }
    if (rc == 0) {
        fputs("\n", out);
        tm_table_print(t, out, "  ");
    }
    tm_table_free(t);
    /* Each stopped partition with its offset and why (the reason line
     * names the first one only). */
    for (size_t i = 0; rc == 0 && i < v->r.snap.npartitions; i++) {
        const tm_status_partition *p = &v->r.snap.partitions[i];
        char safe[4 * sizeof p->stop_reason];
        if (!p->stopped)
            continue;
        fprintf(out, "  stopped     %s ", SAFE(p->topic));
        fprintf(out, "[%d] at offset %" PRId64 ": %s\n", (int)p->partition,
                p->stopped_at, SAFE(p->stop_reason));
    }
    return rc;
}

void tm_status_print_text(FILE *out, const tm_status_view *views, size_t n,
                          int64_t now_ms) {
    for (size_t i = 0; i < n; i++) {
        const tm_status_view *v = &views[i];
        if (i > 0)
            fputs("\n", out);
        print_header(out, v, now_ms);
        if (v->error[0])
            continue;
        if (v->r.snap.npartitions == 0) {
            fprintf(out, "  partitions  none%s\n",
                    v->running ? " assigned" : "");
        } else if (print_partitions(out, v) != 0) {
            fprintf(out, "  partitions  (out of memory)\n");
        }
    }
}

/* ---- JSON --------------------------------------------------------------- */

/* {"connector", "state": "ERROR", "error"} for a status that could not be
 * read. */
static json_t *error_json(const tm_status_view *v) {
    json_t *o = json_object();
    if (!o)
        return NULL;
    int rc =
        json_object_set_new(o, "connector", json_string(v->r.snap.connector));
    rc |= json_object_set_new(o, "state", json_string("ERROR"));
    rc |= json_object_set_new(o, "error", json_string(v->error));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *view_json(const tm_status_view *v, int64_t now_ms) {
    if (v->error[0])
        return error_json(v);
    json_t *o = tm_status_to_json(&v->r.snap);
    if (!o)
        return NULL;
    int rc = 0;
    const char *state =
        v->running ? tm_conn_state_name(v->r.snap.state) : "NOT_RUNNING";
    rc |= json_object_set_new(o, "state", json_string(state));
    rc |= json_object_set_new(
        o, "written_state",
        v->r.has_file ? json_string(tm_conn_state_name(v->r.written))
                      : json_null());
    rc |= json_object_set_new(o, "live", json_boolean(v->r.live));
    int up = v->r.live && v->r.snap.started_ms > 0;
    rc |= json_object_set_new(
        o, "uptime_ms",
        up ? json_integer(since(now_ms, v->r.snap.started_ms)) : json_null());
    int64_t stale = tm_status_stale_ms(v, now_ms);
    rc |= json_object_set_new(o, "stale_ms",
                              stale > 0 ? json_integer(stale) : json_null());
    int64_t overdue = tm_status_overdue_ms(v, now_ms);
    rc |= json_object_set_new(
        o, "overdue_ms", overdue > 0 ? json_integer(overdue) : json_null());
    rc |= json_object_set_new(o, "partitions_from",
                              json_string(v->from_sink    ? "sink"
                                          : v->r.has_file ? "status_file"
                                                          : "none"));
    json_t *parts = json_object_get(o, "partitions");
    for (size_t i = 0; rc == 0 && i < json_array_size(parts); i++) {
        const tm_status_partition *p = &v->r.snap.partitions[i];
        int64_t lag = tm_status_lag(p->next_offset, p->high_watermark);
        rc = json_object_set_new(json_array_get(parts, i), "lag",
                                 lag < 0 ? json_null() : json_integer(lag));
    }
    json_object_del(o, "format");
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *tm_status_views_json(const char *state_dir, const tm_status_view *views,
                             size_t n, int64_t now_ms) {
    json_t *doc = json_object();
    json_t *arr = json_array();
    if (!doc || !arr) {
        json_decref(doc);
        json_decref(arr);
        return NULL;
    }
    int rc = json_object_set_new(doc, "state_dir", json_string(state_dir));
    rc |= json_object_set_new(doc, "connectors", arr);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_t *c = view_json(&views[i], now_ms);
        rc = c ? json_array_append_new(arr, c) : -1;
    }
    rc |= json_object_set_new(
        doc, "healthy", json_boolean(tm_status_health(views, n, now_ms) == 0));
    if (rc) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}
