/* tidemark status [--state-dir DIR] [CONNECTOR] [--json] [--watch [SECONDS]]
 *                 [--format text|json|prometheus]
 *                 [--config FILE] [--plugin-dir DIR]...
 *
 * Shows what running hosts published in the state directory (one status
 * file and one host lock per connector, host/status/), with no server to
 * ask: the lock says whether the host is alive, the file what it last saw.
 * With --config it also reads the sink's markers (read-only, never a claim)
 * and the broker's watermarks itself, so it works with no host running.
 * The exit status makes it a health check (tm_status_health): 0 healthy,
 * 3 a connector is DEGRADED, 2 one is FAILED, STOPPED or not running (or
 * --config names an invalid config, as in every command), 1 usage or I/O
 * errors. */
#include "cli/commands.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_args.h"
#include "cli/cli_sink.h"
#include "kafka/kafka_conf.h"
#include "kafka/partitions.h"
#include "metrics/metrics_status.h"
#include "services/clock.h"
#include "services/error.h"
#include "status/status_file.h"
#include "status/status_print.h"

#define KAFKA_TIMEOUT_MS 10000

typedef struct options {
    const char *state_dir; /* --state-dir, NULL when not given */
    const char *connector;
    const char *config;
    int json;
    int prometheus;            /* --format prometheus */
    int watch;                 /* seconds between redraws, 0: once */
    int connector_after_watch; /* CONNECTOR was the word after --watch */
    const char **extra;
    size_t nextra;
} options;

/* With --config: the connector's sink and an admin client, kept across
 * redraws. */
typedef struct config_source {
    tm_cli_sink sink;
    rd_kafka_t *rk;
} config_source;

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: tidemark status [--state-dir DIR] [CONNECTOR] [--json]\n"
        "                       [--watch [SECONDS]] [--config FILE]\n"
        "                       [--plugin-dir DIR]...\n"
        "\n"
        "Shows each connector's state (STARTING, RUNNING, DEGRADED, PAUSED,\n"
        "FAILED; STOPPED when its host is gone) with the reason and since\n"
        "when, plugin, pid, uptime, last batch, totals, last error, and per\n"
        "partition the sink's marker, the high\n"
        "watermark and the lag, from the status files running hosts write in\n"
        "the state directory (all connectors there, or just CONNECTOR).\n"
        "\n"
        "  --state-dir DIR   the state directory (default: the config's\n"
        "                    state_dir with --config, else "
        "$TIDEMARK_STATE_DIR,\n"
        "                    $XDG_STATE_HOME/tidemark, "
        "~/.local/state/tidemark)\n"
        "  --json            one JSON document instead of the tables\n"
        "  --format FORMAT   text (default), json (as --json) or prometheus\n"
        "                    (the metrics in Prometheus text format)\n"
        "  --watch [SECONDS] redraw every SECONDS (1..86400, default 2)\n"
        "                    until Ctrl-C\n"
        "  --config FILE     also works with no host running: reads the\n"
        "                    sink's markers (read-only) and the broker's\n"
        "                    watermarks for FILE's connector\n"
        "  --plugin-dir DIR  search DIR for plugins first (with --config)\n"
        "\n"
        "Exit status: 0 every connector STARTING, RUNNING or PAUSED; 2 any\n"
        "FAILED, STOPPED or not running, or an invalid config; 3 none of\n"
        "those but any DEGRADED (retrying a transient error); 1 usage or\n"
        "I/O error.\n");
}

static int is_seconds(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > 86400)
        return 0;
    *out = (int)v;
    return 1;
}

/* Whether the word after --watch is meant as its SECONDS (else it is
 * CONNECTOR): anything that starts like a number. */
static int looks_numeric(const char *s) {
    if (*s == '-' || *s == '+')
        s++;
    return *s >= '0' && *s <= '9';
}

static int bad_seconds(const char *s) {
    fprintf(stderr,
            "tidemark status: --watch: \"%s\" is not a number of seconds "
            "(1..86400)\n",
            s);
    return 1;
}

/* 0 parsed, 3 --help shown, 1 usage error (message printed). */
static int parse_args(int argc, char **argv, options *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        const char *format = NULL;
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if ((m = tm_cli_opt("status", "--format", argc, argv, &i,
                                   &format)) != 0) {
            if (m < 0)
                return 1;
            if (strcmp(format, "json") == 0) {
                o->json = 1;
            } else if (strcmp(format, "prometheus") == 0) {
                o->prometheus = 1;
            } else if (strcmp(format, "text") != 0) {
                fprintf(stderr,
                        "tidemark status: --format: expected one of text, "
                        "json, prometheus, found \"%s\"\n",
                        format);
                return 1;
            }
        } else if (strcmp(a, "--watch") == 0) {
            o->watch = 2;
            if (i + 1 < argc && looks_numeric(argv[i + 1])) {
                if (!is_seconds(argv[++i], &o->watch))
                    return bad_seconds(argv[i]);
            } else if (i + 1 < argc && argv[i + 1][0] != '-' && !o->connector) {
                o->connector_after_watch = 1;
            }
        } else if (strncmp(a, "--watch=", 8) == 0) {
            if (!is_seconds(a + 8, &o->watch))
                return bad_seconds(a + 8);
        } else if ((m = tm_cli_opt("status", "--state-dir", argc, argv, &i,
                                   &o->state_dir)) != 0 ||
                   (m = tm_cli_opt("status", "--config", argc, argv, &i,
                                   &o->config)) != 0) {
            if (m < 0)
                return 1;
        } else if ((m = tm_cli_opt("status", "--plugin-dir", argc, argv, &i,
                                   &o->extra[o->nextra])) != 0) {
            if (m < 0)
                return 1;
            o->nextra++;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 3;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "tidemark status: unknown option '%s'\n", a);
            usage(stderr);
            return 1;
        } else if (o->connector) {
            fprintf(stderr,
                    "tidemark status: one CONNECTOR at most ('%s' and "
                    "'%s')\n",
                    o->connector, a);
            return 1;
        } else {
            o->connector = a;
        }
    }
    if (o->prometheus && (o->json || o->watch)) {
        fprintf(stderr, "tidemark status: --format prometheus goes with "
                        "neither --json nor --watch (for a file kept up to "
                        "date: tidemark run --metrics-file)\n");
        return 1;
    }
    return 0;
}

/* What the host published for a partition (paused, stopped), NULL when
 * unknown. */
static const tm_status_partition *
published(const tm_status_report *r, const char *topic, int32_t partition) {
    for (size_t i = 0; i < r->snap.npartitions; i++)
        if (r->snap.partitions[i].partition == partition &&
            strcmp(r->snap.partitions[i].topic, topic) == 0)
            return &r->snap.partitions[i];
    return NULL;
}

/* Replaces v's partitions with the sink's markers and the broker's
 * watermarks, read now. 0, or -1 with errstr. */
static int read_from_sink(config_source *src, tm_status_view *v, char *errstr,
                          size_t errsize) {
    const tm_connector_config *cfg = src->sink.cfg;
    rd_kafka_topic_partition_list_t *list = NULL;
    if (tm_kafka_list_partitions(src->rk, cfg, KAFKA_TIMEOUT_MS, &list, errstr,
                                 errsize) != 0)
        return -1;
    size_t n = (size_t)list->cnt;
    tm_marker *m = calloc(n ? n : 1, sizeof *m);
    tm_status_partition *p = calloc(n ? n : 1, sizeof *p);
    int rc = -1;
    if (!m || !p) {
        snprintf(errstr, errsize, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        m[i].struct_size = sizeof m[i];
        m[i].topic = list->elems[i].topic;
        m[i].partition = list->elems[i].partition;
    }
    tm_error err = tm_error_init();
    const tm_sink_api *api = src->sink.inst.api;
    tm_status st =
        n ? api->read_markers(src->sink.inst.sink, m, n, &err) : TM_OK;
    if (st != TM_OK) {
        snprintf(errstr, errsize, "reading the sink's markers (%s): %s",
                 tm_status_name(st), err.message);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(p[i].topic, sizeof p[i].topic, "%s", m[i].topic);
        p[i].partition = m[i].partition;
        p[i].next_offset = m[i].next_offset;
        p[i].epoch = m[i].epoch;
        p[i].rows = m[i].rows;
        p[i].dead_letters = m[i].dead_letters;
        p[i].filtered = m[i].filtered;
        p[i].duplicates = m[i].duplicates;
        const tm_status_partition *host =
            published(&v->r, m[i].topic, m[i].partition);
        if (host) {
            p[i].paused = host->paused;
            p[i].stopped = host->stopped;
            p[i].stopped_at = host->stopped_at;
            snprintf(p[i].stop_reason, sizeof p[i].stop_reason, "%s",
                     host->stop_reason);
        }
        int64_t low, high;
        char why[512];
        if (tm_kafka_watermarks(src->rk, m[i].topic, m[i].partition,
                                KAFKA_TIMEOUT_MS, &low, &high, why,
                                sizeof why) != 0) {
            snprintf(errstr, errsize, "%s", why);
            goto out;
        }
        p[i].high_watermark = high;
    }
    free(v->r.parts);
    v->r.parts = p;
    v->r.snap.partitions = p;
    v->r.snap.npartitions = n;
    v->from_sink = 1;
    p = NULL;
    rc = 0;
out:
    free(m);
    free(p);
    rd_kafka_topic_partition_list_destroy(list);
    return rc;
}

/* One connector's view: its status file (if any), then with --config the
 * sink and broker. 0; 1 (errstr says so) when there is no status and no
 * --config; -1 with errstr. */
static int read_view(const char *state_dir, const char *connector,
                     config_source *src, tm_status_view *v, char *errstr,
                     size_t errsize) {
    memset(v, 0, sizeof *v);
    int rc = tm_status_read(state_dir, connector, &v->r, errstr, errsize);
    if (rc < 0)
        return -1;
    if (rc == 1 && !src)
        return 1;
    v->running = rc == 0;
    if (!src)
        return 0;
    tm_status_snapshot *s = &v->r.snap;
    if (!v->running)
        snprintf(s->connector, sizeof s->connector, "%s", connector);
    if (!s->plugin[0]) {
        const tm_sink_api *api = src->sink.inst.api;
        snprintf(s->plugin, sizeof s->plugin, "%s", api->name);
        snprintf(s->plugin_version, sizeof s->plugin_version, "%s",
                 api->version ? api->version : "");
    }
    if (read_from_sink(src, v, errstr, errsize) != 0) {
        tm_status_view_free(v);
        return -1;
    }
    return 0;
}

typedef struct views {
    tm_status_view *v;
    size_t n;
} views;

static void views_free(views *vs) {
    for (size_t i = 0; i < vs->n; i++)
        tm_status_view_free(&vs->v[i]);
    free(vs->v);
    vs->v = NULL;
    vs->n = 0;
}

static int collect(const options *o, const char *state_dir, config_source *src,
                   views *vs, char *errstr, size_t errsize) {
    char **names = NULL;
    size_t n = 1;
    const char *one = src ? src->sink.cfg->name : o->connector;
    if (!one && tm_status_list(state_dir, &names, &n, errstr, errsize) != 0)
        return -1;
    vs->v = calloc(n ? n : 1, sizeof *vs->v);
    vs->n = 0;
    int rc = 0;
    if (!vs->v) {
        snprintf(errstr, errsize, "out of memory");
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = read_view(state_dir, one ? one : names[i], src, &vs->v[vs->n],
                       errstr, errsize);
        if (rc == 0) {
            vs->n++;
        } else if (rc == 1 && !one) {
            rc = 0; /* only a free lock left (an offsets reset): skip it */
        } else if (rc < 0 && !one) {
            /* One unreadable status must not hide the others: it is shown
             * as an error line in its place. */
            tm_status_view *v = &vs->v[vs->n++];
            snprintf(v->r.snap.connector, sizeof v->r.snap.connector, "%s",
                     names[i]);
            snprintf(v->error, sizeof v->error, "%s", errstr);
            rc = 0;
        }
    }
    if (rc == 0 && vs->n == 0) {
        snprintf(errstr, errsize, "no connector has a status in %s", state_dir);
        rc = -1;
    }
    tm_status_names_free(names, names ? n : 0);
    if (rc != 0)
        views_free(vs);
    return rc != 0 ? -1 : 0;
}

/* The document --json prints when there is nothing to show: still JSON,
 * with the reason. NULL when memory ran out. */
static json_t *error_doc(const char *state_dir, const char *why) {
    json_t *doc = json_object();
    if (!doc)
        return NULL;
    int rc = json_object_set_new(doc, "state_dir", json_string(state_dir));
    rc |= json_object_set_new(doc, "connectors", json_array());
    rc |= json_object_set_new(doc, "healthy", json_false());
    rc |= json_object_set_new(doc, "error", json_string(why));
    if (rc) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

static int print_json(FILE *out, const options *o, json_t *doc) {
    char *text =
        doc ? json_dumps(doc, o->watch ? JSON_COMPACT : JSON_INDENT(2)) : NULL;
    json_decref(doc);
    if (!text) {
        fprintf(stderr, "tidemark status: out of memory\n");
        return -1;
    }
    fprintf(out, "%s\n", text);
    free(text);
    return 0;
}

/* One redraw into OUT. Returns the exit status it stands for; *nothing is
 * set when there was nothing to show (the error is printed). */
static int render(FILE *out, const options *o, const char *state_dir,
                  config_source *src, int *nothing) {
    views vs = {NULL, 0};
    char errstr[2048];
    *nothing = 0;
    if (collect(o, state_dir, src, &vs, errstr, sizeof errstr) != 0) {
        char red[sizeof errstr], safe[4 * sizeof errstr];
        tm_config_redact(src ? src->sink.cfg : NULL, errstr, red, sizeof red);
        *nothing = 1;
        if (o->json) {
            (void)print_json(out, o, error_doc(state_dir, red));
            return 1;
        }
        fprintf(o->watch ? out : stderr, "tidemark status: %s%s\n",
                tm_status_text(red, safe, sizeof safe),
                o->connector_after_watch
                    ? " (a word after --watch is CONNECTOR; SECONDS is a "
                      "number, 1..86400)"
                    : "");
        return 1;
    }
    int64_t now = tm_clock_wall_ms();
    int rc = tm_status_health(vs.v, vs.n, now);
    if (o->prometheus) {
        const char **dirs = calloc(vs.n ? vs.n : 1, sizeof *dirs);
        for (size_t i = 0; dirs && i < vs.n; i++)
            dirs[i] = state_dir;
        if (dirs)
            tm_metrics_status_write(out, vs.v, vs.n, dirs, now);
        else
            fprintf(stderr, "tidemark status: out of memory\n");
        rc = dirs ? rc : 1;
        free(dirs);
    } else if (o->json) {
        if (print_json(out, o,
                       tm_status_views_json(state_dir, vs.v, vs.n, now)) != 0)
            rc = 1;
    } else {
        tm_status_print_text(out, vs.v, vs.n, now);
    }
    views_free(&vs);
    return rc;
}

/* Redraws every o->watch seconds until SIGINT; the exit status is the last
 * redraw's. Each frame is built in memory and written at once, so the
 * screen never shows half a frame. */
static int watch(const options *o, const char *state_dir, config_source *src) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint; /* no SA_RESTART: the sleep must end */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0 ||
        sigaction(SIGTERM, &sa, NULL) != 0) {
        fprintf(stderr, "tidemark status: cannot catch SIGINT: %s\n",
                strerror(errno));
        return 1;
    }
    int tty = isatty(STDOUT_FILENO) && !o->json;
    int rc = 0;
    for (int frame = 0; !interrupted; frame++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&buf, &len);
        if (!mem) {
            fprintf(stderr, "tidemark status: out of memory\n");
            return 1;
        }
        if (!o->json) {
            char t[32], safe[4 * PATH_MAX];
            tm_status_format_time(tm_clock_wall_ms(), t, sizeof t);
            fprintf(mem, "every %ds: tidemark status (%s)    %s\n\n", o->watch,
                    tm_status_text(state_dir, safe, sizeof safe), t);
        }
        size_t head = fflush(mem) == 0 ? len : 0; /* the frame's title */
        int nothing;
        rc = render(mem, o, state_dir, src, &nothing);
        if (fclose(mem) != 0 || !buf) {
            free(buf);
            fprintf(stderr, "tidemark status: out of memory\n");
            return 1;
        }
        if (frame == 0 && nothing) {
            /* Nothing to show at the first frame (a CONNECTOR with no
             * status, no state directory): redrawing the error for ever
             * helps nobody. Later frames keep going: a host may restart. */
            fwrite(buf + head, 1, len - head, o->json ? stdout : stderr);
            free(buf);
            return 1;
        }
        if (tty)
            fputs("\033[H\033[2J", stdout); /* home, clear screen */
        else if (!o->json)
            fputs("\n", stdout);
        fwrite(buf, 1, len, stdout);
        fflush(stdout);
        free(buf);
        struct timespec ts = {o->watch, 0};
        while (!interrupted && nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
    return rc;
}

/* 0, or the exit status: TM_EXIT_INVALID_CONFIG for a config (or its
 * plugin) refused as every command refuses it, 1 for anything else. */
static int open_config(const options *o, config_source *src) {
    size_t ndirs = 0;
    const char **dirs = tm_cli_plugin_dirs(o->extra, o->nextra, &ndirs);
    if (!dirs) {
        fprintf(stderr, "tidemark status: out of memory\n");
        return 1;
    }
    int rc = tm_cli_sink_load(&src->sink, o->config, dirs, ndirs);
    free(dirs);
    if (rc != 0)
        return TM_EXIT_INVALID_CONFIG;
    if (o->connector && strcmp(o->connector, src->sink.cfg->name) != 0) {
        fprintf(stderr,
                "tidemark status: CONNECTOR '%s' is not the config's "
                "connector '%s'\n",
                o->connector, src->sink.cfg->name);
        tm_cli_sink_free(&src->sink);
        return 1;
    }
    if (tm_cli_sink_open(&src->sink) != 0) {
        tm_cli_sink_free(&src->sink);
        return 1;
    }
    char errstr[1024];
    src->rk = tm_kafka_client_new(src->sink.cfg, TM_KAFKA_ADMIN, errstr,
                                  sizeof errstr);
    if (!src->rk) {
        tm_cli_report(src->sink.cfg, o->config, "$.kafka", errstr);
        tm_cli_sink_free(&src->sink);
        return 1;
    }
    return 0;
}

int tm_cmd_status(int argc, char **argv) {
    options o;
    memset(&o, 0, sizeof o);
    o.extra = calloc((size_t)(argc > 0 ? argc : 1), sizeof *o.extra);
    if (!o.extra) {
        fprintf(stderr, "tidemark status: out of memory\n");
        return 1;
    }
    int rc = parse_args(argc, argv, &o);
    if (rc != 0) {
        free(o.extra);
        return rc == 3 ? 0 : 1;
    }
    config_source src;
    memset(&src, 0, sizeof src);
    if (o.config && (rc = open_config(&o, &src)) != 0) {
        free(o.extra);
        return rc;
    }
    char state_dir[PATH_MAX];
    if (o.state_dir)
        snprintf(state_dir, sizeof state_dir, "%s", o.state_dir);
    else if (o.config && src.sink.cfg->state_dir)
        snprintf(state_dir, sizeof state_dir, "%s", src.sink.cfg->state_dir);
    else
        tm_status_default_dir(state_dir, sizeof state_dir);

    config_source *s = o.config ? &src : NULL;
    int nothing;
    rc = o.watch ? watch(&o, state_dir, s)
                 : render(stdout, &o, state_dir, s, &nothing);
    if (fflush(stdout) != 0 && rc == 0)
        rc = 1;
    if (src.rk)
        rd_kafka_destroy(src.rk);
    if (o.config)
        tm_cli_sink_free(&src.sink);
    free(o.extra);
    return rc;
}
