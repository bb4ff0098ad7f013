#include "status/status_json.h"

#include "services/redact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing ------------------------------------------------------------ */

/* json_object_set_new() steals the value even on failure, so a chain of
 * them only needs the final result checked. */
static int put(json_t *o, const char *key, json_t *v) {
    return v ? json_object_set_new(o, key, v) : -1;
}

static json_t *uint_json(uint64_t v) {
    /* jansson integers are signed 64-bit; counts never get near 2^63. */
    return json_integer((json_int_t)(v > INT64_MAX ? INT64_MAX : v));
}

/* TEXT, held in a buffer of SIZE, as a JSON string redacted again on its
 * way out of the process: a message that fills its buffer was cut, maybe
 * inside a secret whose start the caller's redaction could not
 * recognise. */
static json_t *redacted(const char *text, size_t size) {
    char *red = malloc(size);
    if (!red)
        return NULL;
    tm_redact(text,
              strlen(text) >= size - 1 ? TM_REDACT_CUT : TM_REDACT_MAYBE_CUT,
              red, size);
    json_t *v = json_string(red);
    free(red);
    return v;
}

/* {"offset", "reason"} of a stopped partition, null otherwise. */
static json_t *stopped_json(const tm_status_partition *p) {
    if (!p->stopped)
        return json_null();
    json_t *o = json_object();
    if (!o)
        return NULL;
    int rc = 0;
    rc |= put(o, "offset", json_integer(p->stopped_at));
    rc |= put(o, "reason", redacted(p->stop_reason, sizeof p->stop_reason));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *tm_status_partition_to_json(const tm_status_partition *p) {
    json_t *o = json_object();
    if (!o)
        return NULL;
    int rc = 0;
    rc |= put(o, "topic", json_string(p->topic));
    rc |= put(o, "partition", json_integer(p->partition));
    rc |= put(o, "next_offset", json_integer(p->next_offset));
    rc |= put(o, "epoch", json_integer(p->epoch));
    rc |= put(o, "high_watermark", json_integer(p->high_watermark));
    rc |= put(o, "rows", uint_json(p->rows));
    rc |= put(o, "dead_letters", uint_json(p->dead_letters));
    rc |= put(o, "filtered", uint_json(p->filtered));
    rc |= put(o, "duplicates", uint_json(p->duplicates));
    rc |= put(o, "paused", json_boolean(p->paused));
    rc |= put(o, "stopped", stopped_json(p));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *totals_json(const tm_status_snapshot *s) {
    json_t *o = json_object();
    if (!o)
        return NULL;
    int rc = 0;
    rc |= put(o, "rows", uint_json(s->totals.rows));
    rc |= put(o, "dead_letters", uint_json(s->totals.dead_letters));
    rc |= put(o, "filtered", uint_json(s->totals.filtered));
    rc |= put(o, "duplicates", uint_json(s->totals.duplicates));
    rc |= put(o, "batches", uint_json(s->totals.batches));
    rc |= put(o, "fenced", uint_json(s->totals.fenced));
    rc |= put(o, "conflicts", uint_json(s->totals.conflicts));
    rc |= put(o, "retries", uint_json(s->totals.retries));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *last_batch_json(const tm_status_snapshot *s) {
    if (!s->last_batch_id[0])
        return json_null();
    json_t *o = json_object();
    if (!o)
        return NULL;
    int rc = 0;
    rc |= put(o, "id", json_string(s->last_batch_id));
    rc |= put(o, "ms", json_integer(s->last_batch_ms));
    rc |= put(o, "records", uint_json(s->last_batch_records));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *last_error_json(const tm_status_snapshot *s) {
    if (!s->last_error[0])
        return json_null();
    json_t *o = json_object();
    if (!o)
        return NULL;
    int rc = 0;
    rc |= put(o, "message", redacted(s->last_error, sizeof s->last_error));
    rc |= put(o, "ms", json_integer(s->last_error_ms));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* {"message": ..., "since_ms": ...} of a DEGRADED, PAUSED or FAILED
 * connector, null otherwise. Redacted again as last_error is. */
static json_t *reason_json(const tm_status_snapshot *s) {
    if (!s->reason[0])
        return json_null();
    json_t *o = json_object();
    if (!o)
        return NULL;
    int rc = 0;
    rc |= put(o, "message", redacted(s->reason, sizeof s->reason));
    rc |= put(o, "since_ms", json_integer(s->reason_since_ms));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* {"on": ..., "since_ms": ..., "until_ms": ...} while the connector waits
 * on a step of its commit (until_ms null when the wait has no known end),
 * null otherwise. */
static json_t *waiting_json(const tm_status_snapshot *s) {
    if (!s->waiting_on[0])
        return json_null();
    json_t *o = json_object();
    if (!o)
        return NULL;
    int rc = 0;
    rc |= put(o, "on", redacted(s->waiting_on, sizeof s->waiting_on));
    rc |= put(o, "since_ms", json_integer(s->waiting_since_ms));
    rc |= put(o, "until_ms",
              s->waiting_until_ms > 0 ? json_integer(s->waiting_until_ms)
                                      : json_null());
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *tm_status_to_json(const tm_status_snapshot *s) {
    json_t *o = json_object();
    json_t *parts = json_array();
    if (!o || !parts) {
        json_decref(o);
        json_decref(parts);
        return NULL;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < s->npartitions; i++) {
        json_t *p = tm_status_partition_to_json(&s->partitions[i]);
        rc = p ? json_array_append_new(parts, p) : -1;
    }
    rc |= put(o, "format", json_integer(TM_STATUS_FORMAT));
    rc |= put(o, "connector", json_string(s->connector));
    rc |= put(o, "state", json_string(tm_conn_state_name(s->state)));
    rc |= put(o, "plugin", json_string(s->plugin));
    rc |= put(o, "plugin_version", json_string(s->plugin_version));
    rc |= put(o, "instance_id", json_string(s->instance_id));
    rc |= put(o, "pid", json_integer(s->pid));
    rc |= put(o, "started_ms", json_integer(s->started_ms));
    rc |= put(o, "updated_ms", json_integer(s->updated_ms));
    rc |= put(o, "last_batch", last_batch_json(s));
    rc |= put(o, "totals", totals_json(s));
    rc |= put(o, "last_error", last_error_json(s));
    rc |= put(o, "reason", reason_json(s));
    rc |= put(o, "waiting", waiting_json(s));
    rc |= put(o, "partitions", parts);
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- reading ------------------------------------------------------------ */

typedef struct reader {
    const char *where; /* "" or "partitions[3]." for messages */
    char *errstr;
    size_t errsize;
    int failed;
} reader;

static const json_t *field(reader *r, const json_t *o, const char *key,
                           json_type type) {
    if (r->failed)
        return NULL;
    const json_t *v = json_object_get(o, key);
    /* jansson has no boolean type, only JSON_TRUE and JSON_FALSE: asking
     * for JSON_TRUE here means "a boolean". */
    int ok = v && (json_typeof(v) == type ||
                   (type == JSON_TRUE && json_is_boolean(v)));
    if (!ok) {
        snprintf(r->errstr, r->errsize, "%s%s: %s", r->where, key,
                 v ? "wrong type" : "missing");
        r->failed = 1;
        return NULL;
    }
    return v;
}

static void get_str(reader *r, const json_t *o, const char *key, char *out,
                    size_t size) {
    const json_t *v = field(r, o, key, JSON_STRING);
    if (v)
        snprintf(out, size, "%s", json_string_value(v));
}

static int64_t get_int(reader *r, const json_t *o, const char *key) {
    const json_t *v = field(r, o, key, JSON_INTEGER);
    return v ? (int64_t)json_integer_value(v) : 0;
}

static uint64_t get_count(reader *r, const json_t *o, const char *key) {
    int64_t v = get_int(r, o, key);
    if (!r->failed && v < 0) {
        snprintf(r->errstr, r->errsize, "%s%s: negative count", r->where, key);
        r->failed = 1;
    }
    return v < 0 ? 0 : (uint64_t)v;
}

static void read_partition(reader *r, const json_t *o, tm_status_partition *p) {
    memset(p, 0, sizeof *p);
    get_str(r, o, "topic", p->topic, sizeof p->topic);
    p->partition = (int32_t)get_int(r, o, "partition");
    p->next_offset = get_int(r, o, "next_offset");
    p->epoch = get_int(r, o, "epoch");
    p->high_watermark = get_int(r, o, "high_watermark");
    p->rows = get_count(r, o, "rows");
    p->dead_letters = get_count(r, o, "dead_letters");
    p->filtered = get_count(r, o, "filtered");
    p->duplicates = get_count(r, o, "duplicates");
    const json_t *v = field(r, o, "paused", JSON_TRUE);
    p->paused = v ? json_is_true(v) : 0;
    /* null, or absent in the files of hosts older than partition stops. */
    const json_t *stop = json_object_get(o, "stopped");
    if (stop && json_is_object(stop)) {
        const char *where = r->where;
        char nested[64];
        snprintf(nested, sizeof nested, "%sstopped.", where);
        r->where = nested;
        p->stopped = 1;
        p->stopped_at = get_int(r, stop, "offset");
        get_str(r, stop, "reason", p->stop_reason, sizeof p->stop_reason);
        r->where = where;
    }
}

static void read_optional(reader *r, const json_t *doc, tm_status_snapshot *s) {
    const json_t *b = json_object_get(doc, "last_batch");
    if (b && json_is_object(b)) {
        r->where = "last_batch.";
        get_str(r, b, "id", s->last_batch_id, sizeof s->last_batch_id);
        s->last_batch_ms = get_int(r, b, "ms");
        s->last_batch_records = get_count(r, b, "records");
    }
    const json_t *e = json_object_get(doc, "last_error");
    if (e && json_is_object(e)) {
        r->where = "last_error.";
        get_str(r, e, "message", s->last_error, sizeof s->last_error);
        s->last_error_ms = get_int(r, e, "ms");
    }
    /* Absent in the files of hosts older than the health model. */
    const json_t *why = json_object_get(doc, "reason");
    if (why && json_is_object(why)) {
        r->where = "reason.";
        get_str(r, why, "message", s->reason, sizeof s->reason);
        s->reason_since_ms = get_int(r, why, "since_ms");
    }
    /* Absent in the files of hosts older than the status pulse. */
    const json_t *w = json_object_get(doc, "waiting");
    if (w && json_is_object(w)) {
        r->where = "waiting.";
        get_str(r, w, "on", s->waiting_on, sizeof s->waiting_on);
        s->waiting_since_ms = get_int(r, w, "since_ms");
        /* Absent or null: a wait with no known end (older hosts too). */
        const json_t *u = json_object_get(w, "until_ms");
        if (u && !json_is_null(u))
            s->waiting_until_ms = get_int(r, w, "until_ms");
    }
    r->where = "totals.";
    const json_t *t = field(r, doc, "totals", JSON_OBJECT);
    if (t) {
        s->totals.rows = get_count(r, t, "rows");
        s->totals.dead_letters = get_count(r, t, "dead_letters");
        s->totals.filtered = get_count(r, t, "filtered");
        s->totals.duplicates = get_count(r, t, "duplicates");
        s->totals.batches = get_count(r, t, "batches");
        s->totals.fenced = get_count(r, t, "fenced");
        s->totals.conflicts = get_count(r, t, "conflicts");
        s->totals.retries = get_count(r, t, "retries");
    }
    r->where = "";
}

int tm_status_from_json(const json_t *doc, tm_status_snapshot *s,
                        tm_status_partition **parts, char *errstr,
                        size_t errsize) {
    memset(s, 0, sizeof *s);
    *parts = NULL;
    reader r = {"", errstr, errsize, 0};
    if (!json_is_object(doc)) {
        snprintf(errstr, errsize, "not a JSON object");
        return -1;
    }
    int64_t format = get_int(&r, doc, "format");
    if (!r.failed && format != TM_STATUS_FORMAT) {
        snprintf(errstr, errsize, "format %lld, this tidemark reads %d",
                 (long long)format, TM_STATUS_FORMAT);
        return -1;
    }
    char state[32] = "";
    get_str(&r, doc, "connector", s->connector, sizeof s->connector);
    get_str(&r, doc, "state", state, sizeof state);
    if (!r.failed && tm_conn_state_parse(state, &s->state) != 0) {
        snprintf(errstr, errsize, "state: unknown state \"%s\"", state);
        return -1;
    }
    get_str(&r, doc, "plugin", s->plugin, sizeof s->plugin);
    get_str(&r, doc, "plugin_version", s->plugin_version,
            sizeof s->plugin_version);
    get_str(&r, doc, "instance_id", s->instance_id, sizeof s->instance_id);
    s->pid = (long)get_int(&r, doc, "pid");
    s->started_ms = get_int(&r, doc, "started_ms");
    s->updated_ms = get_int(&r, doc, "updated_ms");
    read_optional(&r, doc, s);
    const json_t *arr = field(&r, doc, "partitions", JSON_ARRAY);
    if (r.failed)
        return -1;
    size_t n = json_array_size(arr);
    tm_status_partition *p = NULL;
    if (n > 0 && !(p = calloc(n, sizeof *p))) {
        snprintf(errstr, errsize, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n && !r.failed; i++) {
        char where[48];
        snprintf(where, sizeof where, "partitions[%zu].", i);
        r.where = where;
        const json_t *o = json_array_get(arr, i);
        if (!json_is_object(o)) {
            snprintf(errstr, errsize, "partitions[%zu]: not an object", i);
            r.failed = 1;
        } else {
            read_partition(&r, o, &p[i]);
        }
    }
    if (r.failed) {
        free(p);
        return -1;
    }
    s->partitions = p;
    s->npartitions = n;
    *parts = p;
    return 0;
}
