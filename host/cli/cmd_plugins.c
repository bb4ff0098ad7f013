/* tidemark plugins [--json] [--plugin-dir DIR]...
 *
 * Lists every "*.so" in the plugin directories, loaded or refused, so that
 * "why is my sink not found" has one answer: its line here. Refused files
 * do not change the exit status (the listing itself worked); an unreadable
 * directory does, since the listing is then incomplete. */
#include "cli/commands.h"

#include "cli/cli_args.h"
#include "cli/cli_sink.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/loader.h"

/* One listed file, copied out of the entry (which lives only during the
 * callback) so that the table can be aligned once all are known. */
typedef struct row {
    char *path;
    char *name;    /* NULL when refused */
    char *version; /* NULL when refused or not given by the plugin */
    char *error;   /* NULL when loaded */
    unsigned abi_major, abi_minor;
    uint32_t capabilities;
    int shadowed;
    json_t *settings; /* the settings' schema, NULL when refused */
} row;

typedef struct rows {
    row *v;
    size_t n, cap;
    int failed; /* out of memory while collecting */
} rows;

typedef struct options {
    int json;
    const char **extra; /* the --plugin-dir values, in order */
    size_t nextra;
} options;

static void usage(FILE *out) {
    fprintf(out,
            "usage: tidemark plugins [--json] [--plugin-dir DIR]...\n"
            "\n"
            "Lists every *.so in the plugin directories: name, version, ABI,\n"
            "capabilities and path; files the loader refuses are listed with\n"
            "the reason. Search order: each --plugin-dir, then\n"
            "TIDEMARK_PLUGIN_PATH (colon-separated), then %s.\n"
            "\n"
            "  --json            print a JSON array instead of a table (with\n"
            "                    each plugin's settings as a JSON schema)\n"
            "  --plugin-dir DIR  search DIR first (repeatable)\n",
            tm_plugin_default_dir());
}

/* 0 parsed, 1 --help shown, 2 usage error (message on stderr). */
static int parse_args(int argc, char **argv, options *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if ((m = tm_cli_opt("plugins", "--plugin-dir", argc, argv, &i,
                                   &o->extra[o->nextra])) != 0) {
            if (m < 0)
                return 2;
            o->nextra++;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 1;
        } else {
            fprintf(stderr, "tidemark plugins: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    return 0;
}

static char *dup_or_null(const char *s) {
    return s != NULL ? strdup(s) : NULL;
}

static void row_free(row *r) {
    free(r->path);
    free(r->name);
    free(r->version);
    free(r->error);
    json_decref(r->settings);
}

static void rows_free(rows *rs) {
    for (size_t i = 0; i < rs->n; i++)
        row_free(&rs->v[i]);
    free(rs->v);
}

static int row_fill(row *r, const tm_plugin_entry *e) {
    memset(r, 0, sizeof *r);
    r->shadowed = e->shadowed;
    r->path = strdup(e->path);
    if (e->plugin != NULL) {
        const tm_sink_api *api = e->plugin->api;
        r->name = strdup(api->name);
        r->version = dup_or_null(api->version);
        r->abi_major = api->abi_major;
        r->abi_minor = api->abi_minor;
        r->capabilities = api->capabilities;
        r->settings = tm_plugin_settings_schema(api);
        if (r->name == NULL || (api->version != NULL && r->version == NULL) ||
            r->settings == NULL)
            return -1;
    } else {
        r->error = strdup(e->error != NULL ? e->error : "refused");
        if (r->error == NULL)
            return -1;
    }
    return r->path != NULL ? 0 : -1;
}

static int collect(const tm_plugin_entry *e, void *ctx) {
    rows *rs = ctx;
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? 2 * rs->cap : 16;
        row *v = realloc(rs->v, cap * sizeof *v);
        if (v == NULL) {
            rs->failed = 1;
            return 1;
        }
        rs->v = v;
        rs->cap = cap;
    }
    row *r = &rs->v[rs->n];
    if (row_fill(r, e) != 0) {
        row_free(r);
        rs->failed = 1;
        return 1;
    }
    rs->n++;
    return 0;
}

/* ---- Capabilities as words ---------------------------------------------- */

static const struct {
    uint32_t bit;
    const char *word;
} cap_words[] = {
    {TM_CAP_DEDUP, "dedup"},
    {TM_CAP_DEAD_LETTERS, "dead_letters"},
    {TM_CAP_UPSERT, "upsert"},
    {TM_CAP_DELETE, "delete"},
    {TM_CAP_SCHEMA_COLUMNS, "schema_columns"},
};
#define NCAP_WORDS (sizeof cap_words / sizeof cap_words[0])

static uint32_t known_caps(void) {
    uint32_t all = 0;
    for (size_t i = 0; i < NCAP_WORDS; i++)
        all |= cap_words[i].bit;
    return all;
}

/* "dedup,upsert", "-" for none; bits of a newer minor shown in hex. */
static void caps_text(uint32_t caps, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NCAP_WORDS; i++) {
        if ((caps & cap_words[i].bit) == 0)
            continue;
        int n = snprintf(buf + used, size - used, "%s%s", used ? "," : "",
                         cap_words[i].word);
        if (n < 0 || (size_t)n >= size - used)
            return;
        used += (size_t)n;
    }
    uint32_t unknown = caps & ~known_caps();
    if (unknown != 0)
        snprintf(buf + used, size - used, "%s0x%lx", used ? "," : "",
                 (unsigned long)unknown);
    else if (used == 0)
        snprintf(buf, size, "-");
}

/* ---- Table -------------------------------------------------------------- */

enum { COL_NAME, COL_VERSION, COL_ABI, COL_CAPS, COL_STATUS, COL_PATH, NCOLS };

typedef struct cells {
    char abi[16];
    char caps[128];
    const char *text[NCOLS];
} cells;

static void row_cells(const row *r, cells *c) {
    snprintf(c->abi, sizeof c->abi, "%u.%u", r->abi_major, r->abi_minor);
    caps_text(r->capabilities, c->caps, sizeof c->caps);
    int ok = r->error == NULL;
    c->text[COL_NAME] = ok ? r->name : "-";
    c->text[COL_VERSION] = ok && r->version != NULL ? r->version : "-";
    c->text[COL_ABI] = ok ? c->abi : "-";
    c->text[COL_CAPS] = ok ? c->caps : "-";
    c->text[COL_STATUS] = !ok ? "refused" : r->shadowed ? "shadowed" : "ok";
    c->text[COL_PATH] = r->path;
}

static const char *const headers[NCOLS] = {"NAME",         "VERSION", "ABI",
                                           "CAPABILITIES", "STATUS",  "PATH"};

static void print_line(const char *const text[NCOLS],
                       const size_t width[NCOLS]) {
    for (int col = 0; col < NCOLS - 1; col++)
        printf("%-*s  ", (int)width[col], text[col]);
    printf("%s\n", text[NCOLS - 1]);
}

static void print_table(const rows *rs) {
    size_t width[NCOLS];
    for (int col = 0; col < NCOLS; col++)
        width[col] = strlen(headers[col]);
    for (size_t i = 0; i < rs->n; i++) {
        cells c;
        row_cells(&rs->v[i], &c);
        for (int col = 0; col < NCOLS; col++)
            if (strlen(c.text[col]) > width[col])
                width[col] = strlen(c.text[col]);
    }
    print_line(headers, width);
    for (size_t i = 0; i < rs->n; i++) {
        cells c;
        row_cells(&rs->v[i], &c);
        print_line(c.text, width);
        /* The reason already names the file; under its row it reads as
         * the row's footnote without widening the table. */
        if (rs->v[i].error != NULL)
            printf("  refused: %s\n", rs->v[i].error);
    }
}

static void print_empty(const char *const *dirs, size_t ndirs) {
    printf("no plugins (*.so) in:");
    for (size_t i = 0; i < ndirs; i++)
        printf(" %s", dirs[i]);
    printf("\n");
}

/* ---- JSON --------------------------------------------------------------- */

/* json_object_set_new() steals the value even when it fails; a NULL value
 * (allocation failed) makes it fail too, so one check covers both. */
static int set(json_t *obj, const char *key, json_t *value) {
    return json_object_set_new(obj, key, value);
}

static json_t *string_or_null(const char *s) {
    return s != NULL ? json_string(s) : json_null();
}

static json_t *caps_json(uint32_t caps) {
    json_t *a = json_array();
    if (a == NULL)
        return NULL;
    for (size_t i = 0; i < NCAP_WORDS; i++) {
        if ((caps & cap_words[i].bit) != 0 &&
            json_array_append_new(a, json_string(cap_words[i].word)) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *row_json(const row *r) {
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    int ok = r->error == NULL;
    int rc = set(o, "name", string_or_null(r->name));
    rc |= set(o, "version", string_or_null(r->version));
    rc |= set(o, "abi_major", ok ? json_integer(r->abi_major) : json_null());
    rc |= set(o, "abi_minor", ok ? json_integer(r->abi_minor) : json_null());
    rc |= set(o, "capabilities", ok ? caps_json(r->capabilities) : json_null());
    rc |= set(o, "capabilities_mask",
              ok ? json_integer(r->capabilities) : json_null());
    rc |= set(o, "status", json_string(ok ? "ok" : "refused"));
    rc |= set(o, "shadowed", json_boolean(r->shadowed));
    rc |= set(o, "error", string_or_null(r->error));
    rc |= set(o, "path", json_string(r->path));
    rc |= set(o, "settings", ok ? json_incref(r->settings) : json_null());
    if (rc != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int print_json(const rows *rs) {
    json_t *a = json_array();
    if (a == NULL)
        return -1;
    for (size_t i = 0; i < rs->n; i++) {
        if (json_array_append_new(a, row_json(&rs->v[i])) != 0) {
            json_decref(a);
            return -1;
        }
    }
    int rc = json_dumpf(a, stdout, JSON_INDENT(2)) != 0 ? -1 : 0;
    json_decref(a);
    if (rc == 0 && fputc('\n', stdout) == EOF)
        rc = -1;
    return rc;
}

/* ---- The command -------------------------------------------------------- */

static int list_and_print(const options *o) {
    size_t ndirs = 0;
    const char **dirs = tm_cli_plugin_dirs(o->extra, o->nextra, &ndirs);
    if (dirs == NULL) {
        fprintf(stderr, "tidemark plugins: out of memory\n");
        return 1;
    }
    rows rs = {0};
    char err[TM_ERROR_MAX] = "";
    int listed = tm_plugin_list(dirs, ndirs, collect, &rs, err, sizeof err);
    int status = 0;
    if (rs.failed) {
        fprintf(stderr, "tidemark plugins: out of memory\n");
        status = 1;
    } else if (o->json) {
        if (print_json(&rs) != 0) {
            fprintf(stderr, "tidemark plugins: cannot write JSON\n");
            status = 1;
        }
    } else if (rs.n == 0) {
        print_empty(dirs, ndirs);
    } else {
        print_table(&rs);
    }
    if (listed != 0) {
        fprintf(stderr, "tidemark plugins: %s\n", err);
        status = 1;
    }
    rows_free(&rs);
    free(dirs);
    return status;
}

int tm_cmd_plugins(int argc, char **argv) {
    options o = {0};
    /* At most one --plugin-dir per argument. */
    o.extra = calloc((size_t)(argc > 0 ? argc : 1), sizeof *o.extra);
    if (o.extra == NULL) {
        fprintf(stderr, "tidemark plugins: out of memory\n");
        return 1;
    }
    int rc = parse_args(argc, argv, &o);
    int status = rc == 1 ? 0 : rc == 2 ? 2 : list_and_print(&o);
    free(o.extra);
    if (fflush(stdout) != 0 && status == 0) {
        perror("tidemark plugins: stdout");
        status = 1;
    }
    return status;
}
