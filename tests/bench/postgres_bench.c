/* postgres_bench: rows/s of the PostgreSQL sink alone, through the plugin
 * API (loaded with the host's loader; open and claim outside the timing,
 * every commit inside), against three bare libpq loops writing the same
 * rows (the same tm_value bytes, made once) into a fresh table of the same
 * shape, one transaction per batch, in the same run:
 *   (b) COPY ... FROM STDIN, text format (what the sink sends),
 *   (c) COPY ... FROM STDIN (FORMAT binary),
 *   (d) a prepared single-row INSERT per row.
 * The JSON column is jsonb (what the sink creates for a json mapping) or
 * text (the column mapped as text), or both. Runs alternate the four,
 * each on a fresh table (the sink: a fresh schema); medians. Prints rows/s
 * and the ratios sink/(b), sink/(c), sink/(d). Not a ctest test:
 * docs/benchmarks.md. Needs TIDEMARK_PG_CONNINFO (scripts/env.sh).
 *
 *   postgres_bench [--rows N] [--batch N] [--reps N]
 *                  [--json jsonb|text|both] [--plugin PATH]
 *                  [--loops sink,text,binary,insert]
 */
#include <inttypes.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_data.h"
#include "plugin/loader.h"

#define NCOLS    6
#define DOC_SIZE 512
#define MAXREPS  100

static const char *TOPIC = "bench.events";

/* The shared rows and batches, and the docs' total bytes (for the average
 * printed). */
typedef struct data {
    bench_data b;
    size_t doc_bytes;
} data;

typedef struct pg_buf {
    char *p;
    size_t len, cap;
} buf;

static void die(const char *what, const char *why) {
    fprintf(stderr, "postgres_bench: %s: %s\n", what, why);
    exit(1);
}

static void buf_addn(buf *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1 << 16;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p)
            die("buffer", "out of memory");
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void buf_add(buf *b, const char *s) {
    buf_addn(b, s, strlen(s));
}

/* ---- the rows ------------------------------------------------------------ */

static const char *const TYPES[] = {
    "PushEvent", "IssuesEvent", "PullRequestEvent", "WatchEvent", "ForkEvent"};

/* A realistic mapped event: id bigint, type, title, user text, ts
 * timestamptz, doc (the event as JSON, ~300 bytes). */
static void make_data(data *d, size_t nrows, size_t batch) {
    bench_data_alloc(&d->b, "postgres_bench", nrows, batch, NCOLS,
                     128 + DOC_SIZE);
    d->doc_bytes = 0;
    for (size_t i = 0; i < nrows; i++) {
        tm_value *v = &d->b.values[i * NCOLS];
        char *title = d->b.text + i * (128 + DOC_SIZE), *user = title + 80;
        char *doc = title + 128;
        const char *type = TYPES[i % 5];
        /* Formatted on the stack first: the doc repeats title and user, and
         * formatting from one slot of the buffer into another is an
         * overlap as far as the compiler can tell. */
        char t[80], u[48];
        int tl = snprintf(t, sizeof t, "Fix flaky test in module %zu (#%zu)",
                          i % 311, 1000 + i % 9973);
        int ul = snprintf(u, sizeof u, "user-%zu", i % 4999);
        memcpy(title, t, sizeof t);
        memcpy(user, u, sizeof u);
        int dl = snprintf(
            doc, DOC_SIZE,
            "{\"id\":\"%zu\",\"type\":\"%s\",\"actor\":{\"id\":%zu,"
            "\"login\":\"%s\",\"url\":\"https://api.example.com/users/%s\"},"
            "\"repo\":{\"id\":%zu,\"name\":\"org-%zu/repo-%zu\"},"
            "\"payload\":{\"ref\":\"refs/heads/main\",\"size\":%zu,"
            "\"head\":\"%016zx%08zx\",\"title\":\"%s\"},"
            "\"public\":true,\"created_at\":\"2026-12-02T10:%02zu:%02zuZ\"}",
            20000000000 + i, type, 4000 + i % 4999, u, u, 70000 + i % 977,
            i % 53, i % 977, i % 4 + 1, i * 2654435761u, i, t, i / 60 % 60,
            i % 60);
        d->doc_bytes += (size_t)dl;
        v[0].v.i = 20000000000 + (int64_t)i;
        v[1].v.s.ptr = type;
        v[1].v.s.len = strlen(type);
        v[2].v.s.ptr = title;
        v[2].v.s.len = (size_t)tl;
        v[3].v.s.ptr = user;
        v[3].v.s.len = (size_t)ul;
        v[4].v.i = 1796205600000000 + (int64_t)i * 1000;
        v[5].v.s.ptr = doc;
        v[5].v.s.len = (size_t)dl;
        bench_data_record(&d->b, i, 1796205600000, doc, (size_t)dl);
    }
}

/* ---- SQL helpers -----------------------------------------------------------
 */

static const char *conninfo(void) {
    const char *c = getenv("TIDEMARK_PG_CONNINFO");
    if (!c || !*c)
        die("TIDEMARK_PG_CONNINFO", "not set (bash scripts/postgres.sh start; "
                                    ". scripts/env.sh)");
    return c;
}

static void quiet(void *arg, const char *message) {
    (void)arg, (void)message; /* DROP ... notices */
}

static PGconn *connect_db(void) {
    PGconn *c = PQconnectdb(conninfo());
    if (PQstatus(c) != CONNECTION_OK)
        die("connect", PQerrorMessage(c));
    PQsetNoticeProcessor(c, quiet, NULL);
    return c;
}

static void exec(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        die(sql, PQerrorMessage(c));
    PQclear(r);
}

/* The table the sink creates for the mapping (plugins/postgres/schema.c). */
static void fresh_table(PGconn *c, const char *json_type) {
    char ddl[1024];
    exec(c, "DROP SCHEMA IF EXISTS tm_bench_bare CASCADE");
    exec(c, "CREATE SCHEMA tm_bench_bare");
    snprintf(ddl, sizeof ddl,
             "CREATE TABLE tm_bench_bare.events (\"id\" bigint NOT NULL, "
             "\"type\" text, \"title\" text, \"user\" text, \"ts\" "
             "timestamptz, \"doc\" %s, _tm_topic text NOT NULL, "
             "_tm_partition integer NOT NULL, _tm_offset bigint NOT NULL, "
             "_tm_identity text)",
             json_type);
    exec(c, ddl);
}

static const char COLUMNS[] =
    "(\"id\", \"type\", \"title\", \"user\", \"ts\", \"doc\", _tm_topic, "
    "_tm_partition, _tm_offset, _tm_identity)";

/* ---- the sink ------------------------------------------------------------ */

static void stamp(void *d, int64_t epoch) {
    bench_data_batches(&((data *)d)->b, TOPIC, epoch);
}

static double run_sink(const tm_sink_api *api, data *d, int json_text) {
    PGconn *c = connect_db();
    exec(c, "DROP SCHEMA IF EXISTS tm_bench_sink CASCADE");
    PQfinish(c);
    const tm_column cols[NCOLS] = {
        {sizeof(tm_column), "id", TM_TYPE_INT, 1, 0},
        {sizeof(tm_column), "type", TM_TYPE_TEXT, 0, 0},
        {sizeof(tm_column), "title", TM_TYPE_TEXT, 0, 0},
        {sizeof(tm_column), "user", TM_TYPE_TEXT, 0, 0},
        {sizeof(tm_column), "ts", TM_TYPE_TIMESTAMP, 0, 0},
        {sizeof(tm_column), "doc", json_text ? TM_TYPE_TEXT : TM_TYPE_JSON, 0,
         0},
    };
    json_t *obj = json_pack("{s:s,s:s,s:s}", "conninfo", conninfo(), "schema",
                            "tm_bench_sink", "table", "events");
    if (!obj)
        die("settings", "out of memory");
    char errstr[1024];
    double t =
        bench_time_sink(api, obj, "postgres", cols, NCOLS, TOPIC, stamp, d,
                        d->b.batches, d->b.nbatches, errstr, sizeof errstr);
    json_decref(obj);
    if (t < 0)
        die("sink", errstr);
    return t;
}

/* ---- (b) COPY text ----------------------------------------------------------
 */

static void copy_text(buf *b, const char *p, size_t n) {
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        const char *esc;
        switch (p[i]) {
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default: continue;
        }
        buf_addn(b, p + from, i - from);
        buf_add(b, esc);
        from = i + 1;
    }
    buf_addn(b, p + from, n - from);
}

static void text_timestamp(char *out, size_t size, int64_t us) {
    int64_t secs = us / 1000000, frac = us % 1000000;
    if (frac < 0) {
        frac += 1000000;
        secs -= 1;
    }
    time_t t = (time_t)secs;
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, size, "%04d-%02d-%02d %02d:%02d:%02d.%06d+00",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (int)frac);
}

static void copy_end(PGconn *c) {
    if (PQputCopyEnd(c, NULL) != 1)
        die("COPY end", PQerrorMessage(c));
    PGresult *r;
    while ((r = PQgetResult(c)) != NULL) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            die("COPY", PQerrorMessage(c));
        PQclear(r);
    }
}

static void copy_start(PGconn *c, const char *with) {
    char sql[512];
    snprintf(sql, sizeof sql, "COPY tm_bench_bare.events %s FROM STDIN%s",
             COLUMNS, with);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COPY_IN)
        die(sql, PQerrorMessage(c));
    PQclear(r);
}

/* Sends B in 64 KiB chunks, as the sink does. */
static void copy_send(PGconn *c, buf *b, int last) {
    if (b->len >= 65536 || (last && b->len)) {
        if (PQputCopyData(c, b->p, (int)b->len) != 1)
            die("COPY data", PQerrorMessage(c));
        b->len = 0;
    }
}

static double run_copy_text(data *d, const char *json_type) {
    PGconn *c = connect_db();
    fresh_table(c, json_type);
    buf b = {0};
    char num[64];
    double t0 = bench_now_s();
    for (size_t k = 0; k < d->b.nbatches; k++) {
        size_t first = k * d->b.batch, n = bench_data_batch_len(&d->b, k);
        exec(c, "BEGIN");
        copy_start(c, "");
        for (size_t i = first; i < first + n; i++) {
            const tm_value *v = &d->b.values[i * NCOLS];
            snprintf(num, sizeof num, "%lld\t", (long long)v[0].v.i);
            buf_add(&b, num);
            for (int col = 1; col <= 3; col++) {
                copy_text(&b, v[col].v.s.ptr, v[col].v.s.len);
                buf_add(&b, "\t");
            }
            text_timestamp(num, sizeof num, v[4].v.i);
            buf_add(&b, num);
            buf_add(&b, "\t");
            copy_text(&b, v[5].v.s.ptr, v[5].v.s.len);
            buf_add(&b, "\t");
            copy_text(&b, TOPIC, strlen(TOPIC));
            snprintf(num, sizeof num, "\t0\t%lld\t\\N\n",
                     (long long)d->b.records[i].offset);
            buf_add(&b, num);
            copy_send(c, &b, 0);
        }
        copy_send(c, &b, 1);
        copy_end(c);
        exec(c, "COMMIT");
    }
    double t = bench_now_s() - t0;
    free(b.p);
    PQfinish(c);
    return t;
}

/* ---- (c) COPY binary --------------------------------------------------------
 */

static void be16(buf *b, int v) {
    unsigned char x[2] = {(unsigned char)(v >> 8), (unsigned char)v};
    buf_addn(b, x, 2);
}

static void be32(buf *b, int32_t v) {
    uint32_t u = (uint32_t)v;
    unsigned char x[4] = {(unsigned char)(u >> 24), (unsigned char)(u >> 16),
                          (unsigned char)(u >> 8), (unsigned char)u};
    buf_addn(b, x, 4);
}

static void be64(buf *b, int64_t v) {
    be32(b, (int32_t)((uint64_t)v >> 32));
    be32(b, (int32_t)(uint32_t)(uint64_t)v);
}

static void bin_text(buf *b, const char *p, size_t n) {
    be32(b, (int32_t)n);
    buf_addn(b, p, n);
}

/* Microseconds between 1970-01-01 and 2000-01-01 (PostgreSQL's epoch). */
#define PG_EPOCH_US INT64_C(946684800000000)

static double run_copy_binary(data *d, const char *json_type) {
    static const char HEADER[19] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";
    int jsonb = strcmp(json_type, "jsonb") == 0;
    PGconn *c = connect_db();
    fresh_table(c, json_type);
    buf b = {0};
    double t0 = bench_now_s();
    for (size_t k = 0; k < d->b.nbatches; k++) {
        size_t first = k * d->b.batch, n = bench_data_batch_len(&d->b, k);
        exec(c, "BEGIN");
        copy_start(c, " (FORMAT binary)");
        buf_addn(&b, HEADER, sizeof HEADER);
        for (size_t i = first; i < first + n; i++) {
            const tm_value *v = &d->b.values[i * NCOLS];
            be16(&b, 10);
            be32(&b, 8);
            be64(&b, v[0].v.i);
            for (int col = 1; col <= 3; col++)
                bin_text(&b, v[col].v.s.ptr, v[col].v.s.len);
            be32(&b, 8);
            be64(&b, v[4].v.i - PG_EPOCH_US);
            if (jsonb) { /* version 1, then the text */
                be32(&b, (int32_t)v[5].v.s.len + 1);
                buf_addn(&b, "\1", 1);
                buf_addn(&b, v[5].v.s.ptr, v[5].v.s.len);
            } else
                bin_text(&b, v[5].v.s.ptr, v[5].v.s.len);
            bin_text(&b, TOPIC, strlen(TOPIC));
            be32(&b, 4);
            be32(&b, 0);
            be32(&b, 8);
            be64(&b, d->b.records[i].offset);
            be32(&b, -1);
            copy_send(c, &b, 0);
        }
        be16(&b, -1);
        copy_send(c, &b, 1);
        copy_end(c);
        exec(c, "COMMIT");
    }
    double t = bench_now_s() - t0;
    free(b.p);
    PQfinish(c);
    return t;
}

/* ---- (d) prepared INSERT per row ------------------------------------------
 */

static double run_insert(data *d, const char *json_type) {
    PGconn *c = connect_db();
    fresh_table(c, json_type);
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO tm_bench_bare.events %s VALUES ($1, $2, $3, $4, "
             "$5, $6, $7, $8, $9, $10)",
             COLUMNS);
    PGresult *r = PQprepare(c, "ins", sql, 10, NULL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        die("prepare", PQerrorMessage(c));
    PQclear(r);
    char id[32], ts[64], off[32];
    double t0 = bench_now_s();
    for (size_t k = 0; k < d->b.nbatches; k++) {
        size_t first = k * d->b.batch, n = bench_data_batch_len(&d->b, k);
        exec(c, "BEGIN");
        for (size_t i = first; i < first + n; i++) {
            const tm_value *v = &d->b.values[i * NCOLS];
            snprintf(id, sizeof id, "%lld", (long long)v[0].v.i);
            text_timestamp(ts, sizeof ts, v[4].v.i);
            snprintf(off, sizeof off, "%lld",
                     (long long)d->b.records[i].offset);
            const char *vals[10] = {
                id,           v[1].v.s.ptr, v[2].v.s.ptr, v[3].v.s.ptr, ts,
                v[5].v.s.ptr, TOPIC,        "0",          off,          NULL};
            int lens[10] = {0,
                            (int)v[1].v.s.len,
                            (int)v[2].v.s.len,
                            (int)v[3].v.s.len,
                            0,
                            (int)v[5].v.s.len,
                            0,
                            0,
                            0,
                            0};
            r = PQexecPrepared(c, "ins", 10, vals, lens, NULL, 0);
            if (PQresultStatus(r) != PGRES_COMMAND_OK)
                die("insert", PQerrorMessage(c));
            PQclear(r);
        }
        exec(c, "COMMIT");
    }
    double t = bench_now_s() - t0;
    PQfinish(c);
    return t;
}

/* ---- main ------------------------------------------------------------------
 */

/* Which loops run (--loops): the sink, (b), (c), (d). */
typedef struct loops {
    int sink, text, binary, insert;
} loops;

static int parse_loops(const char *list, loops *l) {
    *l = (loops){0};
    char copy[128];
    snprintf(copy, sizeof copy, "%s", list);
    for (char *save = NULL, *w = strtok_r(copy, ",", &save); w;
         w = strtok_r(NULL, ",", &save)) {
        if (!strcmp(w, "sink"))
            l->sink = 1;
        else if (!strcmp(w, "text"))
            l->text = 1;
        else if (!strcmp(w, "binary"))
            l->binary = 1;
        else if (!strcmp(w, "insert"))
            l->insert = 1;
        else
            return -1;
    }
    return l->sink || l->text || l->binary || l->insert ? 0 : -1;
}

/* rows/s of a median, or 0 for a loop not run. */
static double rate(int ran, size_t rows, double *t, size_t reps) {
    return ran ? (double)rows / bench_median(t, reps) : 0;
}

static void ratio(const char *name, double a, double b) {
    if (a > 0 && b > 0)
        printf("  %s %.3f", name, a / b);
}

static void bench(const tm_sink_api *api, data *d, size_t reps, int json_text,
                  const loops *l) {
    const char *jt = json_text ? "text" : "jsonb";
    double ts[MAXREPS], tt[MAXREPS], tb[MAXREPS], ti[MAXREPS];
    size_t rows = d->b.nrows;
    printf("## doc as %s\n", jt);
    for (size_t r = 0; r < reps; r++) { /* alternate: same conditions */
        ts[r] = l->sink ? run_sink(api, d, json_text) : 0;
        tt[r] = l->text ? run_copy_text(d, jt) : 0;
        tb[r] = l->binary ? run_copy_binary(d, jt) : 0;
        ti[r] = l->insert ? run_insert(d, jt) : 0;
        printf("rep %zu: sink %.0f, copy text %.0f, copy binary %.0f, "
               "insert %.0f rows/s\n",
               r + 1, ts[r] > 0 ? (double)rows / ts[r] : 0,
               tt[r] > 0 ? (double)rows / tt[r] : 0,
               tb[r] > 0 ? (double)rows / tb[r] : 0,
               ti[r] > 0 ? (double)rows / ti[r] : 0);
        fflush(stdout);
    }
    /* Before the medians, which sort the times: each rep's sink and (b)
     * ran back to back, so their ratio sees the same machine. */
    double per[MAXREPS];
    for (size_t r = 0; r < reps; r++)
        per[r] = l->sink && l->text ? tt[r] / ts[r] : 0;
    double per_median = bench_median(per, reps);
    double ms = rate(l->sink, rows, ts, reps),
           mt = rate(l->text, rows, tt, reps);
    double mb = rate(l->binary, rows, tb, reps);
    double mi = rate(l->insert, rows, ti, reps);
    printf("doc %s: sink            %.0f rows/s (median of %zu)\n", jt, ms,
           reps);
    printf("doc %s: (b) copy text   %.0f rows/s\n", jt, mt);
    printf("doc %s: (c) copy binary %.0f rows/s\n", jt, mb);
    printf("doc %s: (d) insert/row  %.0f rows/s\n", jt, mi);
    if (l->sink && l->text)
        printf("doc %s: median of the reps' own sink/(b) %.3f\n", jt,
               per_median);
    printf("doc %s:", jt);
    ratio("sink/(b)", ms, mt);
    ratio("sink/(c)", ms, mb);
    ratio("sink/(d)", ms, mi);
    ratio("(c)/(b)", mb, mt);
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    size_t rows = 200000, batch = 1000, reps = 3;
    const char *json = "both", *plugin = TM_POSTGRES_PLUGIN;
    const char *which = "sink,text,binary,insert";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rows"))
            rows = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--batch"))
            batch = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--reps"))
            reps = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--json"))
            json = argv[i + 1];
        else if (!strcmp(argv[i], "--plugin"))
            plugin = argv[i + 1];
        else if (!strcmp(argv[i], "--loops"))
            which = argv[i + 1];
        else
            die("bad argument", argv[i]);
    }
    if (!rows || !batch || !reps || reps > MAXREPS)
        die("arguments",
            "--rows, --batch and --reps must be > 0 (reps <= 100)");
    if (strcmp(json, "jsonb") && strcmp(json, "text") && strcmp(json, "both"))
        die("--json", "jsonb, text or both");
    loops l;
    if (parse_loops(which, &l) != 0)
        die("--loops", "a comma list of sink, text, binary, insert");
    tm_plugin loaded;
    char errstr[1024];
    if (tm_plugin_load(plugin, NULL, 0, &loaded, errstr, sizeof errstr) != 0)
        die("load", errstr);
    data d;
    make_data(&d, rows, batch);
    PGconn *c = connect_db();
    printf("# postgres_bench: %zu rows, %zu per batch, %zu reps, doc %s "
           "(avg %zu bytes), server %d, libpq %d\n",
           rows, batch, reps, json, d.doc_bytes / rows, PQserverVersion(c),
           PQlibVersion());
    PQfinish(c);
    if (strcmp(json, "text"))
        bench(loaded.api, &d, reps, 0, &l);
    if (strcmp(json, "jsonb"))
        bench(loaded.api, &d, reps, 1, &l);
    c = connect_db();
    exec(c, "DROP SCHEMA IF EXISTS tm_bench_bare CASCADE");
    exec(c, "DROP SCHEMA IF EXISTS tm_bench_sink CASCADE");
    PQfinish(c);
    bench_data_free(&d.b);
    return 0;
}
