/* convert_bench: json-mode record conversion (tm_convert) with jansson's
 * tree against the streaming extractor, in one process, on the same
 * records, the same mapping and the same arena handling as a batch of
 * 10 000. Prints records/s and MB/s of each parser (the median of the
 * rounds) and the ratio.
 *
 *   python3 tests/bench/gen_records.py 200000 > records.jsonl
 *   build/tests/bench/convert_bench records.jsonl [ROUNDS]
 *
 * Two mappings: "typed", every field of the e2e benchmark's records as
 * tests/bench/e2e_bench.sh types it; "json", the id and the whole record
 * as a json column (the extractor hands that column to jansson). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "config/connector_config.h"
#include "convert/arena.h"
#include "convert/record_convert.h"

#define BATCH      10000
#define MAX_ROUNDS 15

static const char TYPED_COLUMNS[] =
    "[{\"name\":\"id\",\"pointer\":\"/id\",\"type\":\"int\",\"required\":true},"
    "{\"name\":\"user_id\",\"pointer\":\"/user_id\",\"type\":\"int\"},"
    "{\"name\":\"username\",\"pointer\":\"/username\",\"type\":\"text\"},"
    "{\"name\":\"event_type\",\"pointer\":\"/event_type\",\"type\":\"text\"},"
    "{\"name\":\"amount\",\"pointer\":\"/amount\",\"type\":\"float\"},"
    "{\"name\":\"quantity\",\"pointer\":\"/quantity\",\"type\":\"int\"},"
    "{\"name\":\"is_active\",\"pointer\":\"/is_active\",\"type\":\"bool\"},"
    "{\"name\":\"created_at\",\"pointer\":\"/created_at\","
    "\"type\":\"timestamp\"},"
    "{\"name\":\"country\",\"pointer\":\"/country\",\"type\":\"text\"},"
    "{\"name\":\"note\",\"pointer\":\"/note\",\"type\":\"text\"}]";

static const char JSON_COLUMNS[] =
    "[{\"name\":\"id\",\"pointer\":\"/id\",\"type\":\"int\",\"required\":true},"
    "{\"name\":\"payload\",\"pointer\":\"\",\"type\":\"json\"}]";

typedef struct records {
    char *text; /* the file, lines cut at '\n' */
    const char **line;
    size_t *len;
    size_t n, bytes;
} records;

static int load(const char *path, records *r) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 1 << 20, n = 0, got;
    r->text = malloc(cap);
    while (r->text && (got = fread(r->text + n, 1, cap - n, f)) > 0) {
        n += got;
        char *bigger = n == cap ? realloc(r->text, cap *= 2) : r->text;
        if (!bigger) {
            free(r->text);
            r->text = NULL;
        }
        r->text = bigger;
    }
    int failed = ferror(f) || !r->text;
    fclose(f);
    if (failed)
        return -1;
    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += r->text[i] == '\n';
    r->line = malloc((lines + 1) * sizeof *r->line);
    r->len = malloc((lines + 1) * sizeof *r->len);
    if (!r->line || !r->len)
        return -1;
    r->n = r->bytes = 0;
    for (size_t i = 0, start = 0; i <= n; i++) {
        if (i < n && r->text[i] != '\n')
            continue;
        if (i > start) {
            r->line[r->n] = r->text + start;
            r->len[r->n++] = i - start;
            r->bytes += i - start;
        }
        start = i + 1;
    }
    return r->n ? 0 : -1;
}

static tm_connector_config *config(const char *columns) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"name\":\"bench\",\"kafka\":{\"bootstrap_servers\":\"k:9092\","
             "\"topics\":[\"t\"]},\"sink\":{\"plugin\":\"sqlite\"},"
             "\"mapping\":{\"mode\":\"json\",\"columns\":%s}}",
             columns);
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    tm_connector_config *cfg = tm_config_load_string(text, "bench", &errs);
    for (size_t i = 0; i < errs.count; i++)
        fprintf(stderr, "config: %s\n", errs.lines[i]);
    tm_config_errors_free(&errs);
    return cfg;
}

/* Seconds to convert every record once; -1 when one is not a row. */
static double convert_all(const tm_converter *cv, tm_arena *a,
                          const records *r) {
    double t0 = bench_now_s();
    for (size_t i = 0; i < r->n; i++) {
        if (i % BATCH == 0)
            tm_arena_reset(a);
        tm_conv_input in = {.topic = "t",
                            .offset = (int64_t)i,
                            .timestamp_ms = -1,
                            .value = r->line[i],
                            .value_len = r->len[i]};
        tm_conv_result res;
        if (tm_convert(cv, a, &in, &res) != TM_CONV_ROW) {
            fprintf(stderr, "record %zu: not a row (%s)\n", i,
                    res.detail ? res.detail : "out of memory");
            return -1;
        }
    }
    return bench_now_s() - t0;
}

/* The median seconds of `rounds` conversions of all records. */
static double time_parser(const tm_connector_config *cfg, tm_json_parser p,
                          const records *r, int rounds) {
    tm_converter *cv = tm_converter_new_with(cfg, p);
    if (!cv)
        return -1;
    tm_arena a;
    tm_arena_init(&a);
    double t[MAX_ROUNDS];
    double s = convert_all(cv, &a, r); /* warm-up, not counted */
    for (int k = 0; s >= 0 && k < rounds; k++)
        s = t[k] = convert_all(cv, &a, r);
    tm_arena_free(&a);
    tm_converter_free(cv);
    return s < 0 ? -1 : bench_median(t, (size_t)rounds);
}

static int run(const char *name, const char *columns, const records *r,
               int rounds) {
    tm_connector_config *cfg = config(columns);
    if (!cfg)
        return -1;
    double j = time_parser(cfg, TM_PARSER_JANSSON, r, rounds);
    double x = time_parser(cfg, TM_PARSER_EXTRACTOR, r, rounds);
    tm_config_free(cfg);
    if (j <= 0 || x <= 0)
        return -1;
    double mb = (double)r->bytes / 1e6;
    printf("%-5s jansson   %9.0f records/s %7.1f MB/s\n", name, r->n / j,
           mb / j);
    printf("%-5s extractor %9.0f records/s %7.1f MB/s\n", name, r->n / x,
           mb / x);
    printf("%-5s extractor/jansson %.2fx\n", name, j / x);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: convert_bench RECORDS.jsonl [ROUNDS]\n");
        return 2;
    }
    int rounds = argc == 3 ? atoi(argv[2]) : 5;
    if (rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "ROUNDS: 1 to %d\n", MAX_ROUNDS);
        return 2;
    }
    records r = {0};
    if (load(argv[1], &r) != 0) {
        fprintf(stderr, "%s: cannot read records\n", argv[1]);
        return 1;
    }
    printf("%zu records, %.1f MB, %zu bytes on average, median of %d "
           "rounds\n",
           r.n, (double)r.bytes / 1e6, r.bytes / r.n, rounds);
    int rc = run("typed", TYPED_COLUMNS, &r, rounds) == 0 &&
                     run("json", JSON_COLUMNS, &r, rounds) == 0
                 ? 0
                 : 1;
    free(r.text);
    free(r.line);
    free(r.len);
    return rc;
}
