/* Column values through a sink and back through its scan, with the values
 * the kit's case "values" does not send (it sends small positive numbers,
 * ASCII text and a one-key JSON object, never a null): nulls, 64-bit
 * extremes, reals that are not short decimals, a negative zero, non-ASCII
 * and control characters, bytes with NUL and 0xff, timestamps before 1970
 * and in year 1, JSON with keys to sort, escapes, nesting and large reals.
 * Each value must come back exactly (bits for doubles, bytes for text).
 *
 *   scan_values PLUGIN --config FILE [--negative-zero-lost]
 *
 * FILE is a kit config ({"settings": {...}}; ${tmpdir} and ${case} are
 * replaced as the kit does); its columns are ignored: the test maps its
 * own seven, one per type, named as tests/conformance/<sink>.json names
 * them. A JSON expectation is the host's own canonical text of the input
 * (convert/canonical.h), as the host hands a json column to a sink.
 * --negative-zero-lost: the sink is documented to store a float -0.0 as
 * 0.0 (SQLite's REAL affinity does): the test then expects exactly 0.0.
 * Then a scan that wants no values (as `tidemark verify`'s) must give every
 * row without values.
 * Exit 0 when every value came back, 1 otherwise (each mismatch named). */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw */
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/settings.h"
#include "convert/canonical.h"
#include "plugin/loader.h"
#include "services/host_services.h"

#define TOPIC "scanvals_t"
#define NCOLS 7
#define NROWS 5

static const tm_column COLS[NCOLS] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 0},
    {sizeof(tm_column), "body", TM_TYPE_TEXT, 0, 0},
    {sizeof(tm_column), "amount", TM_TYPE_FLOAT, 0, 0},
    {sizeof(tm_column), "flag", TM_TYPE_BOOL, 0, 0},
    {sizeof(tm_column), "at", TM_TYPE_TIMESTAMP, 0, 0},
    {sizeof(tm_column), "doc", TM_TYPE_JSON, 0, 0},
    {sizeof(tm_column), "raw", TM_TYPE_BYTES, 0, 0},
};

/* One row's values; JSON as input text, made canonical before sending. */
typedef struct row_spec {
    int64_t id;
    const char *body;
    double amount;
    int flag;
    int64_t at;
    const char *doc;
    const char *raw;
    size_t raw_len;
    int nulls; /* everything but id null */
} row_spec;

static const row_spec ROWS[NROWS] = {
    {.id = 0, .nulls = 1},
    {.id = INT64_MIN,
     .body = "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xf0\x9d\x84\x9e "
             "\xe6\x97\xa5\xe6\x9c\xac",
     .amount = -0.1,
     .flag = 1,
     .at = -1,
     .doc = "{ \"\xc3\xa9\": true, \"b\": null, \"a\": [1, 2.5, \"x\\\"y\\\\\\n"
            "\"] }",
     .raw = "\0\xff\x01\\bin\0",
     .raw_len = 8},
    {.id = INT64_MAX,
     .body = "tab\tnl\ncr\rbs\\q\"sq'",
     .amount = 1e300,
     .flag = 0,
     .at = 4102444800123456, /* 2100-01-01T00:00:00.123456Z */
     .doc = "\"a string \\u001f \xe2\x9c\x93\"",
     .raw = "",
     .raw_len = 0},
    {.id = -42,
     .body = "",
     .amount = -0.0,
     .flag = 1,
     .at = -62135596800000000, /* 0001-01-01T00:00:00Z */
     .doc = "[0.10000000000000001, 1.0000000000000001e300, -5, 1e-7, 5e-324, "
            "{}, []]",
     .raw = "\x80",
     .raw_len = 1},
    {.id = 7,
     .body = "x",
     .amount = 5e-324,
     .flag = 0,
     .at = 0,
     .doc = "{\"z\": 2, \"long key first\": {\"y\": [true, false]}, \"k\": "
            "\"\\u001f ctl\", \"\xc3\xa9\": 1}",
     .raw = "\0",
     .raw_len = 1},
};

static int failures;
static int negative_zero_lost;

static void fail(const char *fmt, ...) TM_PRINTF(1, 2);
static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    failures++;
}

static char tmpdir[256];

static int rm_entry(const char *p, const struct stat *sb, int t,
                    struct FTW *f) {
    (void)sb, (void)t, (void)f;
    return remove(p);
}

/* The config file's settings with ${tmpdir} and ${case} replaced. */
static json_t *load_settings(const char *file) {
    json_error_t je;
    json_t *root = json_load_file(file, 0, &je);
    json_t *s = root ? json_object_get(root, "settings") : NULL;
    char *text = s ? json_dumps(s, JSON_COMPACT) : NULL;
    json_decref(root);
    if (!text) {
        fprintf(stderr, "scan_values: %s: no \"settings\" object\n", file);
        return NULL;
    }
    char out[8192];
    size_t o = 0;
    for (const char *p = text; *p && o + 300 < sizeof out;) {
        if (strncmp(p, "${tmpdir}", 9) == 0) {
            o += (size_t)snprintf(out + o, sizeof out - o, "%s", tmpdir);
            p += 9;
        } else if (strncmp(p, "${case}", 7) == 0) {
            o += (size_t)snprintf(out + o, sizeof out - o, "scan_values");
            p += 7;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    free(text);
    json_t *settings = json_loads(out, 0, &je);
    if (!settings)
        fprintf(stderr, "scan_values: settings: %s\n", je.text);
    return settings;
}

/* The values sent for row R (docs[r] holds its canonical JSON). */
static void row_values(int r, char *const *docs, tm_value *v) {
    const row_spec *w = &ROWS[r];
    for (int k = 0; k < NCOLS; k++)
        v[k] = (tm_value){.struct_size = sizeof(tm_value),
                          .is_null = (uint8_t)(k > 0 && w->nulls)};
    v[0].v.i = w->id;
    if (w->nulls)
        return;
    v[1].v.s.ptr = w->body;
    v[1].v.s.len = strlen(w->body);
    v[2].v.f = w->amount;
    if (negative_zero_lost && w->amount == 0)
        v[2].v.f = 0.0; /* the sign is documented as lost */
    v[3].v.i = w->flag;
    v[4].v.i = w->at;
    v[5].v.s.ptr = docs[r];
    v[5].v.s.len = strlen(docs[r]);
    v[6].v.s.ptr = w->raw;
    v[6].v.s.len = w->raw_len;
}

static void show(const tm_value *v, tm_type t, char *out, size_t size) {
    size_t o = 0;
    if (v->is_null)
        snprintf(out, size, "null");
    else if (t == TM_TYPE_FLOAT)
        snprintf(out, size, "%a", v->v.f);
    else if (t != TM_TYPE_TEXT && t != TM_TYPE_JSON && t != TM_TYPE_BYTES)
        snprintf(out, size, "%" PRId64, v->v.i);
    else {
        out[o++] = '"';
        for (size_t i = 0; i < v->v.s.len && o + 6 < size; i++) {
            unsigned char c = (unsigned char)v->v.s.ptr[i];
            if (c >= 0x20 && c < 0x7f && c != '\\')
                out[o++] = (char)c;
            else
                o += (size_t)snprintf(out + o, size - o, "\\x%02x", c);
        }
        snprintf(out + o, size - o, "\"");
    }
}

static int same(const tm_value *a, const tm_value *b, tm_type t) {
    if (a->is_null || b->is_null)
        return a->is_null == b->is_null;
    switch (t) {
    case TM_TYPE_FLOAT: return memcmp(&a->v.f, &b->v.f, sizeof a->v.f) == 0;
    case TM_TYPE_TEXT:
    case TM_TYPE_JSON:
    case TM_TYPE_BYTES:
        return a->v.s.len == b->v.s.len &&
               (a->v.s.len == 0 ||
                memcmp(a->v.s.ptr, b->v.s.ptr, a->v.s.len) == 0);
    default: return a->v.i == b->v.i;
    }
}

typedef struct seen {
    char *const *docs;
    int rows[NROWS];
} seen;

static int on_item(void *ctx, const tm_scan_item *it) {
    seen *s = ctx;
    if (it->kind != TM_ITEM_ROW) {
        fail("offset %" PRId64 ": a dead letter (%s: %s)", it->offset,
             tm_dl_reason_name(it->reason), it->detail ? it->detail : "");
        return 0;
    }
    if (it->offset < 0 || it->offset >= NROWS) {
        fail("a row at offset %" PRId64 ", none was sent there", it->offset);
        return 0;
    }
    int r = (int)it->offset;
    s->rows[r]++;
    if (!TM_SCAN_ITEM_HAS_VALUES(it) || it->nvalues != NCOLS) {
        fail("offset %d: the row came back without its %d values", r, NCOLS);
        return 0;
    }
    tm_value want[NCOLS];
    row_values(r, s->docs, want);
    for (int k = 0; k < NCOLS; k++) {
        const tm_value *got = TM_CELEM(tm_value, it->values, k);
        if (same(got, &want[k], COLS[k].type))
            continue;
        char g[512], w[512];
        show(got, COLS[k].type, g, sizeof g);
        show(&want[k], COLS[k].type, w, sizeof w);
        fail("offset %d, column %s: scan gave back %s, the test sent %s", r,
             COLS[k].name, g, w);
    }
    return 0;
}

/* A scan whose reader wants no values (`tidemark verify`'s): every row
 * comes back, none with values (the sink skipped reading them). */
static int on_bare_item(void *ctx, const tm_scan_item *it) {
    int *rows = ctx;
    if (it->kind == TM_ITEM_ROW && it->offset >= 0 && it->offset < NROWS)
        rows[it->offset]++;
    if (TM_SCAN_ITEM_HAS_VALUES(it))
        fail("offset %" PRId64 ": a scan that wants no values got %zu",
             it->offset, it->nvalues);
    return 0;
}

static void scan_without_values(const tm_sink_api *api, void *sink) {
    int rows[NROWS] = {0};
    tm_error err = {sizeof err, ""};
    tm_emit_target target = {.fn = on_bare_item, .user = rows, .no_values = 1};
    tm_status rc = api->scan(sink, TOPIC, 0, &target, &err);
    if (rc != TM_OK)
        fail("scan without values: %s: %s", tm_status_name(rc), err.message);
    for (int r = 0; rc == TM_OK && r < NROWS; r++)
        if (rows[r] != 1)
            fail("scan without values: offset %d: %d rows came back, not 1", r,
                 rows[r]);
}

static int run(const tm_sink_api *api, json_t *settings_obj, char **docs) {
    tm_settings *settings = tm_settings_new(settings_obj, "$.sink.settings");
    if (!settings) {
        fail("tm_settings_new");
        return -1;
    }
    tm_sink_config config = {.struct_size = sizeof config,
                             .connector = "scanvals",
                             .settings = settings,
                             .columns = COLS,
                             .ncolumns = NCOLS,
                             .state_dir = tmpdir};
    tm_error err = {sizeof err, ""};
    void *sink = NULL;
    tm_status rc = api->open(tm_host_services(), &config, &sink, &err);
    if (rc != TM_OK) {
        fail("open: %s: %s", tm_status_name(rc), err.message);
        tm_settings_free(settings);
        return -1;
    }
    tm_marker m = {.struct_size = sizeof m, .topic = TOPIC, .next_offset = 0};
    rc = api->claim(sink, &m, 1, 0, &err);
    tm_value values[NROWS][NCOLS];
    tm_record recs[NROWS];
    tm_range range = {.struct_size = sizeof range,
                      .topic = TOPIC,
                      .start_offset = 0,
                      .end_offset = NROWS,
                      .epoch = m.epoch,
                      .last_offset = TM_NO_OFFSET,
                      .last_timestamp_ms = -1};
    for (int r = 0; r < NROWS; r++) {
        row_values(r, docs, values[r]);
        recs[r] = (tm_record){.struct_size = sizeof(tm_record),
                              .offset = r,
                              .timestamp_ms = 1700000000000 + r,
                              .value = "{}",
                              .value_len = 2,
                              .values = values[r]};
    }
    tm_batch b = {.struct_size = sizeof b,
                  .connector = "scanvals",
                  .batch_id = "scanvals-1",
                  .ranges = &range,
                  .nranges = 1,
                  .records = recs,
                  .nrecords = NROWS};
    if (rc != TM_OK)
        fail("claim: %s: %s", tm_status_name(rc), err.message);
    else if ((rc = api->commit(sink, &b, &err)) != TM_OK)
        fail("commit: %s: %s", tm_status_name(rc), err.message);
    else {
        seen s = {.docs = docs};
        tm_emit_target target = {.fn = on_item, .user = &s};
        rc = api->scan(sink, TOPIC, 0, &target, &err);
        if (rc != TM_OK)
            fail("scan: %s: %s", tm_status_name(rc), err.message);
        for (int r = 0; rc == TM_OK && r < NROWS; r++)
            if (s.rows[r] != 1)
                fail("offset %d: %d rows came back, not 1", r, s.rows[r]);
        if (rc == TM_OK)
            scan_without_values(api, sink);
    }
    api->close(sink);
    tm_settings_free(settings);
    return 0;
}

int main(int argc, char **argv) {
    negative_zero_lost =
        argc == 5 && strcmp(argv[4], "--negative-zero-lost") == 0;
    if (argc != 4 + negative_zero_lost || strcmp(argv[2], "--config") != 0) {
        fprintf(stderr, "usage: scan_values PLUGIN --config FILE "
                        "[--negative-zero-lost]\n");
        return 2;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/tm-scanvals-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    tm_plugin plugin;
    char why[512];
    char *docs[NROWS] = {0};
    json_t *settings = load_settings(argv[3]);
    int rc = settings ? 0 : -1;
    if (rc == 0 &&
        tm_plugin_load(argv[1], NULL, 0, &plugin, why, sizeof why) != 0) {
        fprintf(stderr, "scan_values: %s\n", why);
        rc = -1;
    }
    for (int r = 0; rc == 0 && r < NROWS; r++) {
        json_error_t je;
        json_t *doc = ROWS[r].doc
                          ? json_loads(ROWS[r].doc, JSON_DECODE_ANY, &je)
                          : json_null();
        docs[r] = doc ? tm_canonical_json(doc) : NULL;
        json_decref(doc);
        if (!docs[r]) {
            fprintf(stderr, "scan_values: row %d's JSON: %s\n", r, je.text);
            rc = -1;
        }
    }
    if (rc == 0)
        rc = run(plugin.api, settings, docs);
    for (int r = 0; r < NROWS; r++)
        free(docs[r]);
    json_decref(settings);
    nftw(tmpdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    if (rc != 0 || failures) {
        printf("scan_values: %d failure(s)\n", failures + (rc != 0));
        return 1;
    }
    printf("scan_values: %d rows of %d columns came back exactly\n", NROWS,
           NCOLS);
    return 0;
}
