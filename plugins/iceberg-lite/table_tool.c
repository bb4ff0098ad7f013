/* tidemark-iceberg SUBCOMMAND TABLE [OPTIONS]: the reader and maintenance
 * tool of iceberg-lite tables, which `tidemark table` runs (it execs this
 * program, installed beside it, with its own arguments: host/cli/
 * cmd_table.c), so that the host links no plugin code. It works on the
 * table directory itself (no connector config, no plugin loaded): the
 * table code is the static library the plugin is built from (maint.h), so
 * the tool and the sink read and commit the same way. Its messages and
 * usage name `tidemark table`, the command users type.
 *
 *   scan TABLE [--snapshot ID] [--json]   the rows of a snapshot
 *   history TABLE                         the snapshots, oldest first
 *   files TABLE                           the current snapshot's data files
 *   dead-letters TABLE                    the table's dead letters
 *   compact TABLE [--target-file-size N]  small files into larger ones
 *   expire TABLE --keep N                 drop all but the N newest snapshots
 *   vacuum TABLE [--grace-seconds N]      delete unreferenced old files
 * A table in an Iceberg SQL catalog (catalog.h) is read and maintained
 * through its catalog row: --catalog URI --catalog-name NAME
 * --catalog-table NS.TABLE after TABLE. */
#define _XOPEN_SOURCE 700 /* gmtime_r */

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog.h"
#include "cli/cli_args.h"
#include "dead_letters.h"
#include "maint.h"
#include "snapshot_files.h"
#include "status/text_table.h"

#define CMD            "table"
#define DEFAULT_TARGET (128 * 1024 * 1024)
#define DEFAULT_GRACE  3600

typedef struct opts {
    const char *sub, *table;
    const char *snapshot, *keep, *grace, *target;
    const char *catalog, *catalog_name, *catalog_table;
    int json;
} opts;

static void usage(FILE *out) {
    fprintf(out,
            "usage: tidemark table scan TABLE [--snapshot ID] [--json]\n"
            "       tidemark table history TABLE\n"
            "       tidemark table files TABLE\n"
            "       tidemark table dead-letters TABLE\n"
            "       tidemark table compact TABLE [--target-file-size BYTES]\n"
            "       tidemark table expire TABLE --keep N\n"
            "       tidemark table vacuum TABLE [--grace-seconds N]\n"
            "\n"
            "Reads and maintains an iceberg-lite table (TABLE is its "
            "directory).\n"
            "A table in an Iceberg SQL catalog: add --catalog URI "
            "--catalog-name NAME\n"
            "--catalog-table NAMESPACE.TABLE (URI as in the sink's "
            "catalog_uri).\n"
            "Beside a running connector: vacuum with --grace-seconds of "
            "300 or more\n"
            "(below, it may delete a commit in flight's files); compact "
            "and expire\n"
            "publish nothing (exit 1) when their new files are older than "
            "240 s at\n"
            "their publish check, as a connector's writers.\n");
}

/* A whole decimal number in [min, max]; 0 or -1 with a message. */
static int parse_int(const char *name, const char *text, int64_t min,
                     int64_t max, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max) {
        fprintf(stderr,
                "tidemark table: %s '%s' is not a number in %lld..%lld\n", name,
                text, (long long)min, (long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse(int argc, char **argv, opts *o) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    o->sub = argv[1];
    if (strcmp(o->sub, "--help") == 0 || strcmp(o->sub, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    for (int i = 2; i < argc; i++) {
        int r;
        if ((r = tm_cli_opt(CMD, "--snapshot", argc, argv, &i, &o->snapshot)) ||
            (r = tm_cli_opt(CMD, "--keep", argc, argv, &i, &o->keep)) ||
            (r = tm_cli_opt(CMD, "--grace-seconds", argc, argv, &i,
                            &o->grace)) ||
            (r = tm_cli_opt(CMD, "--target-file-size", argc, argv, &i,
                            &o->target)) ||
            (r = tm_cli_opt(CMD, "--catalog", argc, argv, &i, &o->catalog)) ||
            (r = tm_cli_opt(CMD, "--catalog-name", argc, argv, &i,
                            &o->catalog_name)) ||
            (r = tm_cli_opt(CMD, "--catalog-table", argc, argv, &i,
                            &o->catalog_table))) {
            if (r < 0)
                return 2;
        } else if (strcmp(argv[i], "--json") == 0) {
            o->json = 1;
        } else if (strcmp(argv[i], "--help") == 0 ||
                   strcmp(argv[i], "-h") == 0) {
            usage(stdout); /* "table scan --help": help, as anywhere */
            return 0;
        } else if (argv[i][0] == '-' || o->table) {
            fprintf(stderr, "tidemark table %s: unexpected argument '%s'\n",
                    o->sub, argv[i]);
            return 2;
        } else {
            o->table = argv[i];
        }
    }
    if (!o->table) {
        fprintf(stderr, "tidemark table %s: TABLE (a directory) is missing\n",
                o->sub);
        return 2;
    }
    if ((o->catalog != NULL) != (o->catalog_name != NULL) ||
        (o->catalog != NULL) != (o->catalog_table != NULL)) {
        fprintf(stderr,
                "tidemark table %s: --catalog, --catalog-name and "
                "--catalog-table go together\n",
                o->sub);
        return 2;
    }
    return -1; /* go on */
}

/* With --catalog: T's versions are the catalog row's. 0, or 1 with a
 * message. */
static int use_catalog(const opts *o, ice_table *t) {
    char why[1024], ns[ICE_CATALOG_NAME_MAX + 1];
    /* NAMESPACE.TABLE, split at the last dot as pyiceberg splits it. */
    const char *dot = strrchr(o->catalog_table, '.');
    if (!dot || dot == o->catalog_table ||
        (size_t)(dot - o->catalog_table) > ICE_CATALOG_NAME_MAX) {
        fprintf(stderr,
                "tidemark table: --catalog-table '%s': expected "
                "NAMESPACE.TABLE\n",
                o->catalog_table);
        return 1;
    }
    snprintf(ns, sizeof ns, "%.*s", (int)(dot - o->catalog_table),
             o->catalog_table);
    ice_catalog_ref ref = {o->catalog, o->catalog_name, ns, dot + 1, 0};
    if (ice_table_use_catalog(t, &ref, 0, why, sizeof why) != 0) {
        fprintf(stderr, "tidemark table: --catalog: %s\n", why);
        return 1;
    }
    return 0;
}

/* Opens and loads the table. 0, or 1 with a message. */
static int open_table(const opts *o, ice_table *t) {
    char why[1024];
    const char *path = o->table;
    int rc = ice_table_init(t, path, 0, 1, why, sizeof why);
    if (rc == 1) {
        fprintf(stderr, "tidemark table: %s: no such directory\n", path);
        return 1;
    }
    if (rc == 0 && o->catalog && use_catalog(o, t) != 0) {
        ice_table_free(t);
        return 1;
    }
    if (rc == 0) {
        rc = ice_table_refresh(t, why, sizeof why);
        if (rc == 1) {
            if (t->cat)
                fprintf(stderr, "tidemark table: %s: not in the catalog\n",
                        ice_catalog_ident(t->cat));
            else
                fprintf(stderr,
                        "tidemark table: %s: not a table (no "
                        "metadata/v<N>.metadata.json)\n",
                        t->meta_dir);
            ice_table_free(t);
            return 1;
        }
    }
    if (rc != 0) {
        fprintf(stderr, "tidemark table: %s\n", why);
        if (t->root)
            ice_table_free(t);
        return 1;
    }
    return 0;
}

/* A path under the table, shown relative to it. */
static const char *rel_path(const ice_table *t, const char *uri) {
    const char *p = ice_uri_path(uri);
    size_t n = strlen(t->root);
    if (p && strncmp(p, t->root, n) == 0 && p[n] == '/')
        return p + n + 1;
    return p ? p : uri;
}

static void iso_time(int64_t us, int micros, char *out, size_t size) {
    time_t sec = (time_t)(us / 1000000 - (us % 1000000 < 0));
    int64_t frac = us - (int64_t)sec * 1000000;
    struct tm tm;
    char day[32];
    if (!gmtime_r(&sec, &tm)) {
        snprintf(out, size, "%" PRId64, us);
        return;
    }
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    if (micros)
        snprintf(out, size, "%s.%06dZ", day, (int)frac);
    else
        snprintf(out, size, "%s.%03dZ", day, (int)(frac / 1000));
}

/* ---- scan ---- */

typedef struct scan_ctx {
    const pq_column_def *cols;
    size_t ncols;
    int json;
    tm_table *tt;
    int oom;
} scan_ctx;

/* One cell as text (malloc'd), as the JSON value when json. */
static char *cell_text(const pq_column_def *c, const pq_cell *v) {
    char buf[64];
    switch (c->kind) {
    case PQ_BOOLEAN: return strdup(v->i ? "true" : "false");
    case PQ_INT64: snprintf(buf, sizeof buf, "%" PRId64, v->i); break;
    case PQ_DOUBLE:
        /* The shortest text that reads back as the same double. */
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(buf, sizeof buf, "%.*g", prec, v->f);
            if (strtod(buf, NULL) == v->f)
                break;
        }
        break;
    case PQ_TIMESTAMP: iso_time(v->i, 1, buf, sizeof buf); break;
    case PQ_BINARY: return ice_base64(v->p, v->n);
    case PQ_STRING: {
        char *s = malloc(v->n + 1);
        if (s) {
            memcpy(s, v->p, v->n);
            s[v->n] = '\0';
        }
        return s;
    }
    }
    return strdup(buf);
}

static json_t *cell_json(const pq_column_def *c, const pq_cell *v) {
    if (v->is_null)
        return json_null();
    switch (c->kind) {
    case PQ_BOOLEAN: return json_boolean(v->i);
    case PQ_INT64: return json_integer(v->i);
    case PQ_DOUBLE: return json_real(v->f);
    case PQ_STRING: return json_stringn((const char *)v->p, v->n);
    default: break;
    }
    char *s = cell_text(c, v);
    json_t *j = s ? json_string(s) : NULL;
    free(s);
    return j;
}

static int on_row(void *ctx, const pq_cell *cells, size_t n) {
    scan_ctx *c = ctx;
    if (n != c->ncols) {
        fprintf(stderr,
                "tidemark table: a data file has %zu columns, the "
                "schema %zu\n",
                n, c->ncols);
        return -1;
    }
    if (c->json) {
        json_t *o = json_object();
        for (size_t k = 0; o && k < n; k++)
            if (json_object_set_new(o, c->cols[k].name,
                                    cell_json(&c->cols[k], &cells[k])) != 0) {
                json_decref(o);
                o = NULL;
            }
        char *line =
            o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        if (!line) {
            c->oom = 1;
            return -1;
        }
        puts(line);
        free(line);
        return 0;
    }
    char **text = calloc(n, sizeof *text);
    int rc = text ? 0 : -1;
    for (size_t k = 0; rc == 0 && k < n; k++)
        if (!cells[k].is_null && !(text[k] = cell_text(&c->cols[k], &cells[k])))
            rc = -1;
    if (rc == 0)
        rc = tm_table_add(c->tt, (const char *const *)text);
    for (size_t k = 0; text && k < n; k++)
        free(text[k]);
    free(text);
    if (rc != 0)
        c->oom = 1;
    return rc;
}

static int do_scan(ice_table *t, const opts *o) {
    json_t *snap = ice_meta_current_snapshot(t->meta);
    char why[1024];
    if (o->snapshot) {
        int64_t id;
        if (parse_int("--snapshot", o->snapshot, 0, INT64_MAX, &id) != 0)
            return 2;
        if (!(snap = ice_meta_snapshot(t->meta, id))) {
            fprintf(stderr,
                    "tidemark table: snapshot %s is not in "
                    "%s/v%lld.metadata.json (expired, or never made)\n",
                    o->snapshot, t->meta_dir, (long long)t->version);
            return 1;
        }
    }
    pq_column_def *cols;
    size_t ncols;
    ice_datafile *files = NULL;
    size_t nfiles = 0;
    if (ice_schema_columns(t->meta, &cols, &ncols, why, sizeof why) != 0) {
        fprintf(stderr, "tidemark table: %s/v%lld.metadata.json: %s\n",
                t->meta_dir, (long long)t->version, why);
        return 1;
    }
    scan_ctx c = {.cols = cols, .ncols = ncols, .json = o->json};
    const char **heads = calloc(ncols, sizeof *heads);
    for (size_t k = 0; heads && k < ncols; k++)
        heads[k] = cols[k].name;
    int rc = heads ? 0 : 1;
    if (rc == 0 && !o->json && !(c.tt = tm_table_new(ncols, heads)))
        rc = 1;
    if (rc != 0)
        fprintf(stderr, "tidemark table: out of memory\n");
    if (rc == 0 && ice_snapshot_datafiles(t, snap, &files, &nfiles, why,
                                          sizeof why) != 0) {
        fprintf(stderr, "tidemark table: %s\n", why);
        rc = 1;
    }
    for (size_t i = 0; rc == 0 && i < nfiles; i++)
        if (ice_file_rows_as(files[i].path, cols, ncols, on_row, &c, why,
                             sizeof why) != 0) {
            if (c.oom)
                snprintf(why, sizeof why, "out of memory");
            fprintf(stderr, "tidemark table: %s\n", why);
            rc = 1;
        }
    if (rc == 0 && c.tt)
        tm_table_print(c.tt, stdout, "");
    tm_table_free(c.tt);
    ice_datafiles_free(files, nfiles);
    free(heads);
    free(cols);
    return rc;
}

/* ---- history, files ---- */

static const char *sum_str(json_t *snap, const char *key) {
    return json_string_value(
        json_object_get(json_object_get(snap, "summary"), key));
}

static int do_history(ice_table *t) {
    static const char *const heads[] = {
        "SNAPSHOT",  "PARENT",        "SEQ",          "TIME",
        "OPERATION", "ADDED-RECORDS", "TOTAL-RECORDS"};
    tm_table *tt = tm_table_new(7, heads);
    int64_t cur = ice_json_int(t->meta, "current-snapshot-id", -1);
    int rc = tt ? 0 : -1;
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(t->meta, "snapshots"), i, s) {
        char id[24], parent[24], seq[24], when[64];
        int64_t sid = ice_json_int(s, "snapshot-id", -1);
        int64_t pid = ice_json_int(s, "parent-snapshot-id", -1);
        snprintf(id, sizeof id, "%" PRId64, sid);
        snprintf(parent, sizeof parent, "%" PRId64, pid);
        snprintf(seq, sizeof seq, "%" PRId64,
                 ice_json_int(s, "sequence-number", 0));
        iso_time(ice_json_int(s, "timestamp-ms", 0) * 1000, 0, when,
                 sizeof when);
        const char *cells[7] = {id,
                                pid >= 0 ? parent : NULL,
                                seq,
                                when,
                                sum_str(s, "operation"),
                                sum_str(s, "added-records"),
                                sum_str(s, "total-records")};
        if (rc == 0)
            rc = tm_table_add(tt, cells);
    }
    if (rc != 0) {
        fprintf(stderr, "tidemark table: out of memory\n");
        tm_table_free(tt);
        return 1;
    }
    tm_table_print(tt, stdout, "");
    tm_table_free(tt);
    if (cur >= 0)
        printf("current snapshot: %" PRId64 "\n", cur);
    else
        printf("no snapshot yet\n");
    return 0;
}

static int do_files(ice_table *t) {
    static const char *const heads[] = {"PATH", "SNAPSHOT", "SEQ", "RECORDS",
                                        "BYTES"};
    ice_datafile *files;
    size_t n;
    char why[1024];
    if (ice_snapshot_datafiles(t, ice_meta_current_snapshot(t->meta), &files,
                               &n, why, sizeof why) != 0) {
        fprintf(stderr, "tidemark table: %s\n", why);
        return 1;
    }
    tm_table *tt = tm_table_new(5, heads);
    int rc = tt ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char id[24], seq[24], rec[24], size[24];
        snprintf(id, sizeof id, "%" PRId64, files[i].snapshot_id);
        snprintf(seq, sizeof seq, "%" PRId64, files[i].file_seq);
        snprintf(rec, sizeof rec, "%" PRId64, files[i].records);
        snprintf(size, sizeof size, "%" PRId64, files[i].size);
        const char *cells[5] = {rel_path(t, files[i].path), id, seq, rec, size};
        rc = tm_table_add(tt, cells);
    }
    if (rc == 0)
        tm_table_print(tt, stdout, "");
    else
        fprintf(stderr, "tidemark table: out of memory\n");
    tm_table_free(tt);
    ice_datafiles_free(files, n);
    return rc ? 1 : 0;
}

/* ---- dead-letters ---- */

typedef struct dl_ctx {
    const ice_table *t;
    tm_table *tt;
    const char *file;
    char *why;
    size_t why_size;
} dl_ctx;

static int on_dl(void *ctx, const char *topic, int32_t partition,
                 int64_t offset, tm_dl_reason reason, const char *detail) {
    dl_ctx *c = ctx;
    char part[16], off[24], text[512];
    /* One line per dead letter: control characters shown escaped. */
    size_t o = 0;
    for (const char *p = detail ? detail : ""; *p && o + 5 < sizeof text; p++)
        if ((unsigned char)*p < 0x20)
            o += (size_t)snprintf(text + o, sizeof text - o, "\\%s",
                                  *p == '\n'   ? "n"
                                  : *p == '\t' ? "t"
                                               : "x");
        else
            text[o++] = *p;
    text[o] = '\0';
    snprintf(part, sizeof part, "%" PRId32, partition);
    snprintf(off, sizeof off, "%" PRId64, offset);
    const char *cells[6] = {
        topic,  part, off, tm_dl_reason_name(reason), detail ? text : NULL,
        c->file};
    if (tm_table_add(c->tt, cells) != 0) {
        snprintf(c->why, c->why_size, "out of memory");
        return -1;
    }
    return 0;
}

static int on_dl_file(void *ctx, const char *rel) {
    dl_ctx *c = ctx;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", c->t->root, rel);
    c->file = rel;
    return ice_dl_read(path, on_dl, c, c->why, c->why_size) != 0 ? -1 : 0;
}

static int do_dead_letters(ice_table *t) {
    static const char *const heads[] = {"TOPIC",  "PARTITION", "OFFSET",
                                        "REASON", "DETAIL",    "FILE"};
    char why[1024] = "";
    dl_ctx c = {.t = t,
                .tt = tm_table_new(6, heads),
                .why = why,
                .why_size = sizeof why};
    int rc = c.tt ? 0 : -1;
    if (!c.tt)
        snprintf(why, sizeof why, "out of memory");
    if (rc == 0)
        rc = ice_dl_files(t->root, t->meta, on_dl_file, &c, why, sizeof why);
    if (rc == 0)
        tm_table_print(c.tt, stdout, "");
    else
        fprintf(stderr, "tidemark table: %s\n", why);
    tm_table_free(c.tt);
    return rc ? 1 : 0;
}

/* ---- compact, expire, vacuum ---- */

static int maint_failed(const char *what, int rc, const char *why) {
    fprintf(stderr, "tidemark table %s: %s%s\n", what,
            rc == -2 ? "outcome unknown (run history to see): " : "", why);
    return 1;
}

static int do_compact(ice_table *t, const opts *o) {
    int64_t target = DEFAULT_TARGET;
    if (o->target &&
        parse_int("--target-file-size", o->target, 1, INT64_MAX, &target) != 0)
        return 2;
    ice_compact_result res;
    char why[1024];
    int rc = ice_compact(t, target, &res, why, sizeof why);
    if (rc == 1) {
        printf("nothing to compact: fewer than 2 data files below %" PRId64
               " bytes\n",
               target);
        return 0;
    }
    if (rc != 0)
        return maint_failed("compact", rc, why);
    printf("compacted %zu files into %zu (%" PRId64 " rows): snapshot %" PRId64
           " (replace)\n",
           res.files_in, res.files_out, res.rows, res.snapshot_id);
    if (res.more)
        printf("more to compact: this run stopped taking files at half the "
               "writers' %" PRId64 " ms publish bound; run compact again\n",
               ICE_PUBLISH_MAX_MS);
    return 0;
}

static int do_expire(ice_table *t, const opts *o) {
    int64_t keep;
    if (!o->keep) {
        fprintf(stderr, "tidemark table expire: --keep N is required\n");
        return 2;
    }
    if (parse_int("--keep", o->keep, 1, INT32_MAX, &keep) != 0)
        return 2;
    size_t removed;
    char why[1024];
    int rc = ice_expire(t, (size_t)keep, &removed, why, sizeof why);
    size_t left = json_array_size(json_object_get(t->meta, "snapshots"));
    if (rc == 1) {
        printf("nothing to expire: %zu snapshots\n", left);
        return 0;
    }
    if (rc != 0)
        return maint_failed("expire", rc, why);
    printf("expired %zu snapshots, kept %zu\n", removed, left);
    return 0;
}

typedef struct vac_ctx {
    const ice_table *t;
} vac_ctx;

static void on_removed(void *ctx, const char *path) {
    vac_ctx *c = ctx;
    printf("removed %s\n", rel_path(c->t, path));
}

static int do_vacuum(ice_table *t, const opts *o) {
    int64_t grace = DEFAULT_GRACE;
    if (o->grace &&
        parse_int("--grace-seconds", o->grace, 0, ICE_GRACE_MAX, &grace) != 0)
        return 2;
    size_t removed;
    char why[1024];
    vac_ctx c = {t};
    if (ice_vacuum(t, grace, on_removed, &c, &removed, why, sizeof why) != 0)
        return maint_failed("vacuum", -1, why);
    printf("removed %zu files\n", removed);
    return 0;
}

int main(int argc, char **argv) {
    opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    static const char *const subs[] = {"scan",         "history", "files",
                                       "dead-letters", "compact", "expire",
                                       "vacuum"};
    size_t k = 0;
    while (k < sizeof subs / sizeof subs[0] && strcmp(o.sub, subs[k]) != 0)
        k++;
    if (k == sizeof subs / sizeof subs[0]) {
        fprintf(stderr,
                "tidemark table: unknown subcommand '%s' (see 'tidemark "
                "table --help')\n",
                o.sub);
        return 2;
    }
    ice_table t;
    if (open_table(&o, &t) != 0)
        return 1;
    switch (k) {
    case 0: rc = do_scan(&t, &o); break;
    case 1: rc = do_history(&t); break;
    case 2: rc = do_files(&t); break;
    case 3: rc = do_dead_letters(&t); break;
    case 4: rc = do_compact(&t, &o); break;
    case 5: rc = do_expire(&t, &o); break;
    default: rc = do_vacuum(&t, &o); break;
    }
    ice_table_free(&t);
    return rc;
}
