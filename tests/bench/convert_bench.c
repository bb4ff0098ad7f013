/* convert_bench: json-mode record conversion (tm_convert) with jansson's
 * tree against the streaming extractor, in one process, on the same
 * records, the same mapping and the same arena handling as a batch of
 * 10 000. Prints records/s and MB/s of each parser (the median of the
 * rounds; within a round the parsers take turns batch by batch, so that
 * the machine's load falls on each alike) and the ratio.
 *
 *   python3 tests/bench/gen_records.py 200000 > records.jsonl
 *   build/tests/bench/convert_bench records.jsonl [ROUNDS]
 *
 * Built by tests/bench/convert_baseline.sh with TM_BENCH_BASELINE, it
 * also times an earlier commit's converter ("baseline") in the same
 * rounds and prints the extractor's ratio to it.
 *
 * Two mappings: "typed", every field of the e2e benchmark's records as
 * tests/bench/e2e_bench.sh types it; "json", the id and the whole record
 * as a json column (its canonical text written from the record's span). */
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

/* A converter to time: the extractor, jansson's tree, or the baseline
 * (below). */
typedef struct contender {
    const char *name;
    tm_converter *cv;
    tm_conv_outcome (*convert)(const tm_converter *, tm_arena *,
                               const tm_conv_input *, tm_conv_result *);
    void (*free)(tm_converter *);
    double t[MAX_ROUNDS];
} contender;

/* Seconds to convert records [from, to) as one batch (the arena emptied
 * first); -1 when one is not a row. */
static double convert_batch(const contender *c, tm_arena *a, const records *r,
                            size_t from, size_t to) {
    tm_arena_reset(a);
    double t0 = bench_now_s();
    for (size_t i = from; i < to; i++) {
        tm_conv_input in = {.topic = "t",
                            .offset = (int64_t)i,
                            .timestamp_ms = -1,
                            .value = r->line[i],
                            .value_len = r->len[i]};
        tm_conv_result res;
        if (c->convert(c->cv, a, &in, &res) != TM_CONV_ROW) {
            fprintf(stderr, "%s: record %zu: not a row (%s)\n", c->name, i,
                    res.detail ? res.detail : "out of memory");
            return -1;
        }
    }
    return bench_now_s() - t0;
}

/* One round: every batch converted by each contender in turn, so that a
 * load on the machine falls on all of them alike; each one's seconds
 * into t[k] (k < 0: a warm-up, not kept). 0 ok, -1 a record was not a
 * row. */
static int round_all(contender *cs, size_t ncs, tm_arena *a, const records *r,
                     int k) {
    for (size_t c = 0; c < ncs; c++)
        if (k >= 0)
            cs[c].t[k] = 0;
    for (size_t from = 0; from < r->n; from += BATCH) {
        size_t to = from + BATCH < r->n ? from + BATCH : r->n;
        for (size_t c = 0; c < ncs; c++) {
            double s = convert_batch(&cs[c], a, r, from, to);
            if (s < 0)
                return -1;
            if (k >= 0)
                cs[c].t[k] += s;
        }
    }
    return 0;
}

#ifdef TM_BENCH_BASELINE
/* The converter of an earlier commit, its symbols renamed base_*
 * (tests/bench/convert_baseline.sh builds it): the same records, timed
 * in the same rounds, so that a load on the machine hits both alike. */
tm_converter *base_tm_converter_new_with(const tm_connector_config *cfg,
                                         tm_json_parser parser);
void base_tm_converter_free(tm_converter *cv);
tm_conv_outcome base_tm_convert(const tm_converter *cv, tm_arena *a,
                                const tm_conv_input *in, tm_conv_result *out);
#define NCONTENDERS 3
#else
#define NCONTENDERS 2
#endif

static void print_row(const char *mapping, contender *c, const records *r,
                      int rounds) {
    double s = bench_median(c->t, (size_t)rounds);
    printf("%-5s %-9s %9.0f records/s %7.1f MB/s\n", mapping, c->name,
           (double)r->n / s, (double)r->bytes / 1e6 / s);
}

/* The median round of each contender. */
static int run(const char *name, const char *columns, const records *r,
               int rounds) {
    tm_connector_config *cfg = config(columns);
    if (!cfg)
        return -1;
    contender cs[NCONTENDERS] = {
        {"jansson",
         tm_converter_new_with(cfg, TM_PARSER_JANSSON),
         tm_convert,
         tm_converter_free,
         {0}},
        {"extractor",
         tm_converter_new_with(cfg, TM_PARSER_EXTRACTOR),
         tm_convert,
         tm_converter_free,
         {0}},
#ifdef TM_BENCH_BASELINE
        {"baseline",
         base_tm_converter_new_with(cfg, TM_PARSER_EXTRACTOR),
         base_tm_convert,
         base_tm_converter_free,
         {0}},
#endif
    };
    tm_arena a;
    tm_arena_init(&a);
    int rc = 0;
    for (size_t c = 0; c < NCONTENDERS; c++)
        if (!cs[c].cv)
            rc = -1;
    for (int k = -1; rc == 0 && k < rounds; k++)
        rc = round_all(cs, NCONTENDERS, &a, r, k);
    if (rc == 0) {
        for (size_t c = 0; c < NCONTENDERS; c++)
            print_row(name, &cs[c], r, rounds);
        double j = bench_median(cs[0].t, (size_t)rounds);
        double x = bench_median(cs[1].t, (size_t)rounds);
        printf("%-5s extractor/jansson %.2fx\n", name, j / x);
#ifdef TM_BENCH_BASELINE
        double b = bench_median(cs[2].t, (size_t)rounds);
        printf("%-5s extractor/baseline %.2fx\n", name, b / x);
#endif
    }
    tm_arena_free(&a);
    for (size_t c = 0; c < NCONTENDERS; c++)
        if (cs[c].cv)
            cs[c].free(cs[c].cv);
    tm_config_free(cfg);
    return rc;
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
