/* tidemark offsets CONFIG [--reset-to SPEC] [--json] [--state-dir DIR]
 *                  [--plugin-dir DIR]...
 *
 * Shows, per partition of the connector, the sink's marker (read-only: no
 * epoch moves), the log's start and high watermark, the lag and the group's
 * committed offset. With --reset-to it moves the markers, offline only:
 * no host of this connector may run here (its host lock, which this
 * command holds during the reset so none starts meanwhile) nor anywhere
 * (the consumer group must have no member). The offsets go to the
 * consumer group first (the broker refuses that while the group has a
 * member), only so that lag tools agree with the sink; then ONE claim with
 * TM_CLAIM_RESET sets next_offset and raises every epoch, so a straggler
 * host that wakes up is fenced. */
#include "cli/commands.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_args.h"
#include "cli/cli_sink.h"
#include "kafka/group_admin.h"
#include "kafka/kafka_conf.h"
#include "kafka/partitions.h"
#include "services/error.h"
#include "services/fault.h"
#include "status/status_file.h"
#include "status/text_table.h"

#define KAFKA_TIMEOUT_MS 10000

typedef struct options {
    const char *config;
    const char *reset_to; /* NULL: show only */
    const char *state_dir;
    int json;
    const char **extra;
    size_t nextra;
} options;

/* One partition of the connector as seen now. */
typedef struct part {
    tm_marker m; /* the sink's marker (topic points into the list) */
    int64_t low, high;
    int64_t group_offset; /* -1 none committed or unknown */
    int64_t target;       /* the reset's new next_offset, -1 untouched */
    int64_t new_epoch;
} part;

typedef struct ctx {
    const options *o;
    tm_cli_sink sink;
    rd_kafka_t *rk;
    rd_kafka_topic_partition_list_t *list;
    part *parts;
    size_t n;
    int group_known; /* the group's offsets could be read */
} ctx;

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: tidemark offsets CONFIG [--reset-to SPEC] [--json]\n"
        "                        [--state-dir DIR] [--plugin-dir DIR]...\n"
        "\n"
        "Shows per partition the sink's marker (next offset, epoch, last\n"
        "batch, counts), the log start, the high watermark, the lag and the\n"
        "consumer group's committed offset. Read-only unless --reset-to.\n"
        "\n"
        "  --reset-to SPEC   move the markers, offline only (no host of the\n"
        "                    connector running here, no member in its\n"
        "                    consumer group). SPEC: earliest (every\n"
        "                    partition to its log start), latest (to its\n"
        "                    high watermark) or TOPIC:PARTITION=OFFSET,...\n"
        "                    (each within [log start, high watermark]).\n"
        "                    The offsets go to the consumer group (the\n"
        "                    broker refuses while it has a member), then\n"
        "                    one claim sets the markers and raises epochs.\n"
        "  --json            one JSON document instead of the table\n"
        "  --state-dir DIR   where the host lock is (default: the config's\n"
        "                    state_dir, else the default state directory)\n"
        "  --plugin-dir DIR  search DIR for plugins first (repeatable)\n"
        "\n"
        "Exit status: 0 done, 1 refused or failed, 2 usage error.\n");
}

/* 0 parsed, 3 --help shown, 2 usage error (message printed). */
static int parse_args(int argc, char **argv, options *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if ((m = tm_cli_opt("offsets", "--reset-to", argc, argv, &i,
                                   &o->reset_to)) != 0 ||
                   (m = tm_cli_opt("offsets", "--state-dir", argc, argv, &i,
                                   &o->state_dir)) != 0) {
            if (m < 0)
                return 2;
        } else if ((m = tm_cli_opt("offsets", "--plugin-dir", argc, argv, &i,
                                   &o->extra[o->nextra])) != 0) {
            if (m < 0)
                return 2;
            o->nextra++;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 3;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "tidemark offsets: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (o->config) {
            fprintf(stderr, "tidemark offsets: one CONFIG at most\n");
            return 2;
        } else {
            o->config = a;
        }
    }
    if (!o->config) {
        fprintf(stderr, "tidemark offsets: no CONFIG given\n");
        usage(stderr);
        return 2;
    }
    return 0;
}

/* An error line, redacted (broker and plugin messages may quote the
 * config). */
static void fail(ctx *c, const char *fmt, ...) TM_PRINTF(2, 3);
static void fail(ctx *c, const char *fmt, ...) {
    char line[2048], red[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    tm_config_redact(c->sink.cfg, line, red, sizeof red);
    fprintf(stderr, "tidemark offsets: %s\n", red);
}

/* ---- reading ------------------------------------------------------------ */

static int read_group(ctx *c) {
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_copy(c->list);
    if (!l)
        return -1;
    char errstr[1024];
    int rc = tm_kafka_group_committed(c->rk, c->sink.cfg->kafka.group_id, l,
                                      KAFKA_TIMEOUT_MS, errstr, sizeof errstr);
    for (size_t i = 0; rc == 0 && i < c->n; i++)
        c->parts[i].group_offset =
            l->elems[i].offset >= 0 ? l->elems[i].offset : -1;
    if (rc != 0)
        fail(c, "warning: %s", errstr); /* shown as unknown, not fatal */
    c->group_known = rc == 0;
    rd_kafka_topic_partition_list_destroy(l);
    return 0;
}

/* Markers, watermarks, group offsets of every partition. 0 or -1. */
static int read_all(ctx *c) {
    char errstr[1024];
    if (tm_kafka_list_partitions(c->rk, c->sink.cfg, KAFKA_TIMEOUT_MS, &c->list,
                                 errstr, sizeof errstr) != 0) {
        fail(c, "%s", errstr);
        return -1;
    }
    c->n = (size_t)c->list->cnt;
    c->parts = calloc(c->n ? c->n : 1, sizeof *c->parts);
    if (!c->parts) {
        fail(c, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < c->n; i++) {
        part *p = &c->parts[i];
        p->m.struct_size = sizeof p->m;
        p->m.topic = c->list->elems[i].topic;
        p->m.partition = c->list->elems[i].partition;
        p->group_offset = p->target = p->new_epoch = -1;
        if (tm_kafka_watermarks(c->rk, p->m.topic, p->m.partition,
                                KAFKA_TIMEOUT_MS, &p->low, &p->high, errstr,
                                sizeof errstr) != 0) {
            fail(c, "%s", errstr);
            return -1;
        }
    }
    if (c->n > 0) {
        /* The markers are an array of tm_marker with our struct_size; part
         * is bigger, so copy through a plain array. */
        tm_marker *m = calloc(c->n, sizeof *m);
        if (!m) {
            fail(c, "out of memory");
            return -1;
        }
        for (size_t i = 0; i < c->n; i++)
            m[i] = c->parts[i].m;
        tm_error err = tm_error_init();
        const tm_sink_api *api = c->sink.inst.api;
        tm_status st = api->read_markers(c->sink.inst.sink, m, c->n, &err);
        for (size_t i = 0; st == TM_OK && i < c->n; i++)
            c->parts[i].m = m[i];
        free(m);
        if (st != TM_OK) {
            fail(c, "reading the sink's markers (%s): %s", tm_status_name(st),
                 err.message);
            return -1;
        }
    }
    return read_group(c);
}

/* ---- showing ------------------------------------------------------------ */

static void num(char *out, size_t size, int64_t v) {
    if (v < 0)
        snprintf(out, size, "-");
    else
        snprintf(out, size, "%" PRId64, v);
}

static int64_t lag_of(const part *p) {
    if (p->m.next_offset < 0)
        return -1;
    return p->high > p->m.next_offset ? p->high - p->m.next_offset : 0;
}

static int print_table(const ctx *c) {
    static const char *const H[] = {
        "TOPIC",       "PARTITION", "NEXT_OFFSET",    "EPOCH",
        "LAST_BATCH",  "ROWS",      "DEAD_LETTERS",   "FILTERED",
        "DUPLICATES",  "LOG_START", "HIGH_WATERMARK", "LAG",
        "GROUP_OFFSET"};
    enum { NCOLS = sizeof H / sizeof H[0] };
    tm_table *t = tm_table_new(NCOLS, H);
    if (!t)
        return -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < c->n; i++) {
        const part *p = &c->parts[i];
        char v[NCOLS][24];
        num(v[1], sizeof v[1], p->m.partition);
        num(v[2], sizeof v[2], p->m.next_offset);
        num(v[3], sizeof v[3], p->m.epoch > 0 ? p->m.epoch : -1);
        snprintf(v[5], sizeof v[5], "%" PRIu64, p->m.rows);
        snprintf(v[6], sizeof v[6], "%" PRIu64, p->m.dead_letters);
        snprintf(v[7], sizeof v[7], "%" PRIu64, p->m.filtered);
        snprintf(v[8], sizeof v[8], "%" PRIu64, p->m.duplicates);
        num(v[9], sizeof v[9], p->low);
        num(v[10], sizeof v[10], p->high);
        num(v[11], sizeof v[11], lag_of(p));
        num(v[12], sizeof v[12], p->group_offset);
        const char *cells[NCOLS] = {
            p->m.topic,
            v[1],
            v[2],
            v[3],
            p->m.last_batch_id[0] ? p->m.last_batch_id : "-",
            v[5],
            v[6],
            v[7],
            v[8],
            v[9],
            v[10],
            v[11],
            v[12]};
        rc = tm_table_add(t, cells);
    }
    if (rc == 0) {
        printf("connector %s (group %s)\n\n", c->sink.cfg->name,
               c->sink.cfg->kafka.group_id);
        tm_table_print(t, stdout, "");
    }
    tm_table_free(t);
    return rc;
}

static json_t *int_or_null(int64_t v) {
    return v < 0 ? json_null() : json_integer(v);
}

static json_t *part_json(const part *p) {
    json_t *o = json_object();
    if (!o)
        return NULL;
    int rc = 0;
    rc |= json_object_set_new(o, "topic", json_string(p->m.topic));
    rc |= json_object_set_new(o, "partition", json_integer(p->m.partition));
    rc |= json_object_set_new(o, "next_offset", int_or_null(p->m.next_offset));
    rc |= json_object_set_new(o, "epoch", json_integer(p->m.epoch));
    rc |= json_object_set_new(
        o, "last_batch_id",
        p->m.last_batch_id[0] ? json_string(p->m.last_batch_id) : json_null());
    rc |= json_object_set_new(o, "rows", json_integer((json_int_t)p->m.rows));
    rc |= json_object_set_new(o, "dead_letters",
                              json_integer((json_int_t)p->m.dead_letters));
    rc |= json_object_set_new(o, "filtered",
                              json_integer((json_int_t)p->m.filtered));
    rc |= json_object_set_new(o, "duplicates",
                              json_integer((json_int_t)p->m.duplicates));
    rc |= json_object_set_new(o, "log_start", json_integer(p->low));
    rc |= json_object_set_new(o, "high_watermark", json_integer(p->high));
    rc |= json_object_set_new(o, "lag", int_or_null(lag_of(p)));
    rc |= json_object_set_new(o, "group_offset", int_or_null(p->group_offset));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* {"connector", "group_id", "partitions": [...], "reset": [...] or null} */
static int print_json(const ctx *c, const part *old) {
    json_t *doc = json_object(), *arr = json_array();
    json_t *reset = old ? json_array() : json_null();
    int rc = (doc && arr && reset) ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < c->n; i++) {
        json_t *p = part_json(&c->parts[i]);
        rc = p ? json_array_append_new(arr, p) : -1;
        if (rc == 0 && old && c->parts[i].target >= 0) {
            json_t *r = json_pack(
                "{s:s, s:i, s:o, s:I, s:I, s:I}", "topic", c->parts[i].m.topic,
                "partition", (int)c->parts[i].m.partition, "old_next_offset",
                int_or_null(old[i].m.next_offset), "new_next_offset",
                (json_int_t)c->parts[i].m.next_offset, "old_epoch",
                (json_int_t)old[i].m.epoch, "new_epoch",
                (json_int_t)c->parts[i].m.epoch);
            rc = r ? json_array_append_new(reset, r) : -1;
        }
    }
    if (rc == 0) {
        rc |= json_object_set_new(doc, "connector",
                                  json_string(c->sink.cfg->name));
        rc |= json_object_set_new(doc, "group_id",
                                  json_string(c->sink.cfg->kafka.group_id));
        rc |= json_object_set_new(doc, "partitions", arr);
        rc |= json_object_set_new(doc, "reset", reset);
        arr = reset = NULL;
    }
    char *text = rc == 0 ? json_dumps(doc, JSON_INDENT(2)) : NULL;
    if (text)
        printf("%s\n", text);
    free(text);
    json_decref(doc);
    json_decref(arr);
    json_decref(reset);
    return text ? 0 : -1;
}

/* ---- resetting ---------------------------------------------------------- */

static int parse_int64(const char *s, size_t len, int64_t *out) {
    char buf[32];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end || v < 0)
        return -1;
    *out = v;
    return 0;
}

/* One "TOPIC:PARTITION=OFFSET" of length len. 0, 2 malformed, 1 refused
 * (unknown partition, twice, out of bounds). */
static int parse_item(ctx *c, const char *s, size_t len) {
    const char *eq = memchr(s, '=', len);
    const char *colon = NULL;
    for (const char *q = s; eq && q < eq; q++)
        if (*q == ':')
            colon = q;
    int64_t partition, offset;
    if (!eq || !colon || colon == s ||
        parse_int64(colon + 1, (size_t)(eq - colon - 1), &partition) != 0 ||
        partition > INT32_MAX ||
        parse_int64(eq + 1, (size_t)(s + len - eq - 1), &offset) != 0) {
        fprintf(stderr,
                "tidemark offsets: --reset-to: \"%.*s\" is not "
                "TOPIC:PARTITION=OFFSET (or earliest, latest)\n",
                (int)len, s);
        return 2;
    }
    size_t tlen = (size_t)(colon - s);
    for (size_t i = 0; i < c->n; i++) {
        part *p = &c->parts[i];
        if (p->m.partition != partition || strlen(p->m.topic) != tlen ||
            memcmp(p->m.topic, s, tlen) != 0)
            continue;
        if (p->target >= 0) {
            fail(c, "refused: %s [%d] is given twice", p->m.topic,
                 (int)p->m.partition);
            return 1;
        }
        if (offset < p->low || offset > p->high) {
            fail(c,
                 "refused: %s [%d]: offset %" PRId64
                 " is outside the log [%" PRId64 ", %" PRId64
                 "] (log start, high watermark)",
                 p->m.topic, (int)p->m.partition, offset, p->low, p->high);
            return 1;
        }
        p->target = offset;
        return 0;
    }
    fail(c,
         "refused: %.*s [%" PRId64 "] is not a partition of the "
         "connector's topics",
         (int)tlen, s, partition);
    return 1;
}

/* Sets each part's target from SPEC. 0, 1 refused, 2 malformed. */
static int parse_spec(ctx *c, const char *spec) {
    if (strcmp(spec, "earliest") == 0 || strcmp(spec, "latest") == 0) {
        int latest = spec[0] == 'l';
        for (size_t i = 0; i < c->n; i++)
            c->parts[i].target = latest ? c->parts[i].high : c->parts[i].low;
        return 0;
    }
    for (const char *s = spec;;) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        int rc = parse_item(c, s, len);
        if (rc != 0)
            return rc;
        if (!end)
            return 0;
        s = end + 1;
    }
}

/* Refuses unless the group has no member. 0 or -1 (printed). */
static int check_group_empty(ctx *c) {
    size_t members = 0, static_members = 0;
    char state[64] = "", errstr[1024];
    const char *group = c->sink.cfg->kafka.group_id;
    if (tm_kafka_group_describe(c->rk, group, KAFKA_TIMEOUT_MS, &members,
                                &static_members, state, sizeof state, errstr,
                                sizeof errstr) != 0) {
        fail(c, "refused: cannot tell whether consumer group %s is empty: %s",
             group, errstr);
        return -1;
    }
    /* Decided by the members the broker describes, not by this config:
     * the hosts may have run with another static_membership. */
    if (members > 0 && static_members == 0) {
        fail(c,
             "refused: consumer group %s has %zu active member%s (state %s): "
             "stop every host of connector %s first (a reset is offline "
             "only)",
             group, members, members == 1 ? "" : "s", state, c->sink.cfg->name);
        return -1;
    }
    if (members > 0) {
        /* A static member does not leave the group when its host stops:
         * the broker keeps it until the session timeout, so "stop the
         * hosts" alone is not what the operator has to do. */
        long ms = tm_kafka_session_timeout_ms(c->sink.cfg);
        char wait[96] = "session.timeout.ms";
        if (ms > 0)
            snprintf(wait, sizeof wait, "session.timeout.ms (%ld ms, %ld s)",
                     ms, (ms + 999) / 1000);
        fail(c,
             "refused: consumer group %s has %zu active member%s (state %s): "
             "stop every host of connector %s first (a reset is offline "
             "only); %zu of them %s static (group.instance.id): a static "
             "member stays in the group after its host stopped, until the "
             "broker times it out: wait %s after the last host stopped, "
             "then reset",
             group, members, members == 1 ? "" : "s", state, c->sink.cfg->name,
             static_members, static_members == 1 ? "is" : "are", wait);
        return -1;
    }
    return 0;
}

/* Holds the connector's host lock so that no local host starts during the
 * reset; refuses when one runs. NULL (printed) when refused. */
static tm_status_writer *lock_connector(ctx *c) {
    char dir[PATH_MAX];
    if (c->o->state_dir)
        snprintf(dir, sizeof dir, "%s", c->o->state_dir);
    else if (c->sink.cfg->state_dir)
        snprintf(dir, sizeof dir, "%s", c->sink.cfg->state_dir);
    else
        tm_status_default_dir(dir, sizeof dir);
    const char *name = c->sink.cfg->name;
    long pid = 0;
    int live = tm_status_is_live(dir, name, &pid);
    if (live != 0) {
        if (live > 0)
            fail(c,
                 "refused: connector %s is running on this machine (pid %ld, "
                 "state directory %s): stop it first (a reset is offline "
                 "only)",
                 name, pid, dir);
        else
            fail(c,
                 "refused: cannot tell whether connector %s runs here "
                 "(state directory %s)",
                 name, dir);
        return NULL;
    }
    char errstr[1024];
    tm_status_writer *w =
        tm_status_writer_open(dir, name, errstr, sizeof errstr);
    if (!w)
        fail(c, "refused: %s", errstr);
    return w;
}

/* After the group commit went through and the claim did not: the group's
 * offsets are put back where they were, so that Kafka's lag tools do not
 * show a lag (or its absence) the markers do not have; an idle partition
 * would keep it, since no host commits there. What happened is written
 * into WHAT. */
static void put_group_back(ctx *c, char *what, size_t size) {
    const char *group = c->sink.cfg->kafka.group_id;
    size_t none = 0;
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new((int)(c->n ? c->n : 1));
    for (size_t i = 0; l && i < c->n; i++) {
        if (c->parts[i].target < 0)
            continue;
        if (c->group_known && c->parts[i].group_offset >= 0)
            rd_kafka_topic_partition_list_add(l, c->parts[i].m.topic,
                                              c->parts[i].m.partition)
                ->offset = c->parts[i].group_offset;
        else
            none++;
    }
    char errstr[1024];
    if (!l)
        snprintf(what, size,
                 "consumer group %s holds the new offsets (out of memory "
                 "putting it back)",
                 group);
    else if (l->cnt > 0 &&
             tm_kafka_group_alter_offsets(c->rk, group, l, KAFKA_TIMEOUT_MS,
                                          errstr, sizeof errstr) != 0)
        snprintf(what, size,
                 "consumer group %s holds the new offsets: putting it back "
                 "failed: %s",
                 group, errstr);
    else if (none > 0)
        snprintf(what, size,
                 "consumer group %s is back at its offsets, except %zu "
                 "partition%s it had none for (or it could not be read), "
                 "which keep%s the new one until a host commits there",
                 group, none, none == 1 ? "" : "s", none == 1 ? "s" : "");
    else
        snprintf(what, size, "consumer group %s is back at its offsets", group);
    if (l)
        rd_kafka_topic_partition_list_destroy(l);
}

/* The group commit, then the claim. The group commit goes first because
 * the broker refuses it while the group has a member: that refusal is the
 * one check no member can slip past (the describe before it is only for a
 * clearer message; a member may join right after it). A member that joins
 * after the group commit is fenced by the claim's raised epochs. The
 * markers alone say where a host resumes (never the group's offsets), so
 * a claim refused after the group moved loses nothing. 0 or 1 (printed). */
static int apply_reset(ctx *c) {
    size_t k = 0;
    for (size_t i = 0; i < c->n; i++)
        k += c->parts[i].target >= 0;
    if (k == 0) {
        fail(c, "nothing to reset: the connector has no partition");
        return 1;
    }
    tm_marker *m = calloc(k, sizeof *m);
    rd_kafka_topic_partition_list_t *commit =
        rd_kafka_topic_partition_list_new((int)k);
    if (!m || !commit) {
        free(m);
        if (commit)
            rd_kafka_topic_partition_list_destroy(commit);
        fail(c, "out of memory");
        return 1;
    }
    for (size_t i = 0, j = 0; i < c->n; i++) {
        if (c->parts[i].target < 0)
            continue;
        m[j].struct_size = sizeof m[j];
        m[j].topic = c->parts[i].m.topic;
        m[j].partition = c->parts[i].m.partition;
        m[j].next_offset = c->parts[i].target;
        rd_kafka_topic_partition_list_add(commit, m[j].topic, m[j].partition)
            ->offset = c->parts[i].target;
        j++;
    }
    int rc = 0;
    char errstr[1024];
    if (tm_kafka_group_alter_offsets(c->rk, c->sink.cfg->kafka.group_id, commit,
                                     KAFKA_TIMEOUT_MS, errstr,
                                     sizeof errstr) != 0) {
        /* Most likely a member joined since the check: say so as the
         * check would; otherwise the broker's own answer. */
        if (check_group_empty(c) == 0)
            fail(c, "refused: %s (the sink's markers are unchanged; try again)",
                 errstr);
        rc = 1;
    }
    tm_error err = tm_error_init();
    const tm_sink_api *api = c->sink.inst.api;
    tm_status st =
        rc == 0 ? api->claim(c->sink.inst.sink, m, k, TM_CLAIM_RESET, &err)
                : TM_OK;
    if (rc == 0 && st != TM_OK) {
        char back[1536];
        put_group_back(c, back, sizeof back);
        fail(c,
             "the sink refused the reset (%s): %s; its markers are "
             "unchanged (a host resumes from them, never from the group's "
             "offsets); %s%s",
             tm_status_name(st), err.message, back,
             st == TM_RETRY ? "; try again" : "");
        rc = 1;
    }
    for (size_t i = 0, j = 0; rc == 0 && i < c->n; i++) {
        if (c->parts[i].target < 0)
            continue;
        c->parts[i].m = m[j];
        c->parts[i].m.topic = c->list->elems[i].topic;
        c->parts[i].group_offset = c->parts[i].target;
        j++;
    }
    free(m);
    rd_kafka_topic_partition_list_destroy(commit);
    return rc;
}

static void print_changes(const ctx *c, const part *old) {
    for (size_t i = 0; i < c->n; i++) {
        const part *p = &c->parts[i];
        if (p->target < 0)
            continue;
        char o1[24], o2[24];
        num(o1, sizeof o1, old[i].m.next_offset);
        num(o2, sizeof o2, old[i].m.epoch > 0 ? old[i].m.epoch : -1);
        printf("%s [%d]: next_offset %s -> %" PRId64 ", epoch %s -> %" PRId64
               "\n",
               p->m.topic, (int)p->m.partition, o1, p->m.next_offset, o2,
               p->m.epoch);
    }
    printf("committed to consumer group %s\n", c->sink.cfg->kafka.group_id);
}

static int reset(ctx *c) {
    int rc = parse_spec(c, c->o->reset_to);
    if (rc != 0)
        return rc;
    tm_status_writer *lock = lock_connector(c);
    if (!lock)
        return 1;
    part *old = NULL;
    rc = check_group_empty(c) == 0 ? 0 : 1;
    if (rc == 0)
        tm_fault("offsets.group_checked"); /* a member may join here */
    if (rc == 0 && !(old = malloc(c->n * sizeof *old + 1))) {
        fail(c, "out of memory");
        rc = 1;
    }
    if (rc == 0) {
        memcpy(old, c->parts, c->n * sizeof *old);
        rc = apply_reset(c);
    }
    tm_status_writer_close(lock);
    if (rc == 0) {
        if (c->o->json)
            rc = print_json(c, old) == 0 ? 0 : 1;
        else
            print_changes(c, old);
    }
    free(old);
    return rc;
}

/* ---- the command -------------------------------------------------------- */

static int run(ctx *c) {
    size_t ndirs = 0;
    const char **dirs = tm_cli_plugin_dirs(c->o->extra, c->o->nextra, &ndirs);
    if (!dirs) {
        fprintf(stderr, "tidemark offsets: out of memory\n");
        return 1;
    }
    int rc = tm_cli_sink_load(&c->sink, c->o->config, dirs, ndirs);
    free(dirs);
    if (rc != 0)
        return TM_EXIT_INVALID_CONFIG;
    if (tm_cli_sink_open(&c->sink) != 0)
        return 1;
    char errstr[1024];
    c->rk =
        tm_kafka_client_new(c->sink.cfg, TM_KAFKA_ADMIN, errstr, sizeof errstr);
    if (!c->rk) {
        tm_cli_report(c->sink.cfg, c->o->config, "$.kafka", errstr);
        return 1;
    }
    if (read_all(c) != 0)
        return 1;
    if (c->o->reset_to)
        return reset(c);
    if (c->o->json)
        return print_json(c, NULL) == 0 ? 0 : 1;
    if (print_table(c) != 0) {
        fprintf(stderr, "tidemark offsets: out of memory\n");
        return 1;
    }
    return 0;
}

int tm_cmd_offsets(int argc, char **argv) {
    options o;
    memset(&o, 0, sizeof o);
    o.extra = calloc((size_t)(argc > 0 ? argc : 1), sizeof *o.extra);
    if (!o.extra) {
        fprintf(stderr, "tidemark offsets: out of memory\n");
        return 1;
    }
    int rc = parse_args(argc, argv, &o);
    if (rc == 0) {
        ctx c;
        memset(&c, 0, sizeof c);
        c.o = &o;
        rc = run(&c);
        if (fflush(stdout) != 0 && rc == 0)
            rc = 1;
        free(c.parts);
        if (c.list)
            rd_kafka_topic_partition_list_destroy(c.list);
        if (c.rk)
            rd_kafka_destroy(c.rk);
        tm_cli_sink_free(&c.sink);
    } else if (rc == 3) {
        rc = 0;
    }
    free(o.extra);
    return rc;
}
