/* tidemark verify [--plugin-dir DIR]... [--dead-letter-group GROUP]...
 *                 [--json] CONFIG
 *
 * Reconciles the connector's sink with Kafka itself (verify/verify.h says
 * how): a table per partition, the problems found (each naming the
 * partition and the offset), and a last line for machines. Exit 0 when
 * nothing is duplicated or missing, 1 when something is, 2 when it could
 * not look (usage, Kafka or the sink unreachable). */
#include "cli/commands.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_args.h"
#include "cli/cli_sink.h"
#include "kafka/kafka_conf.h"
#include "status/text_table.h"
#include "verify/verify.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: tidemark verify [--plugin-dir DIR]... "
            "[--dead-letter-group GROUP]... [--json] CONFIG\n"
            "\n"
            "Compares what the connector's sink stores with what Kafka holds\n"
            "(read_committed), partition by partition, from the log start to\n"
            "the sink's marker: every record must be stored exactly once, or\n"
            "be filtered by the mapping, or (with dedup) have its business\n"
            "key stored from another offset. Read-only: nothing is claimed.\n"
            "Exit status: 0 no duplicate and no gap, 1 some found, 2 could\n"
            "not verify (usage, Kafka or the sink unreachable).\n"
            "--dead-letter-group GROUP: the dead letters of GROUP (an\n"
            "earlier $.kafka.group_id of this connector) are its own too.\n");
}

static void u64(char *out, size_t size, uint64_t v) {
    snprintf(out, size, "%" PRIu64, v);
}

static void print_table(const tm_verify_result *r) {
    static const char *const H[] = {"TOPIC",        "PARTITION", "FROM",
                                    "MARKER",       "KAFKA",     "ROWS",
                                    "DEAD_LETTERS", "FILTERED",  "DUPLICATES",
                                    "STORED_TWICE", "GAPS",      "RESULT"};
    enum { N = sizeof H / sizeof H[0] };
    tm_table *t = tm_table_new(N, H);
    if (!t)
        return;
    for (size_t i = 0; i < r->nparts; i++) {
        const tm_verify_partition *p = &r->parts[i];
        char c[N][32];
        snprintf(c[0], sizeof c[0], "%.31s", p->topic);
        snprintf(c[1], sizeof c[1], "%" PRId32, p->partition);
        if (!p->claimed) {
            const char *cells[N] = {c[0], c[1], "-", "-", "-", "-",
                                    "-",  "-",  "-", "-", "-", "not claimed"};
            tm_table_add(t, cells);
            continue;
        }
        snprintf(c[2], sizeof c[2], "%" PRId64, p->from);
        snprintf(c[3], sizeof c[3], "%" PRId64, p->marker);
        u64(c[4], sizeof c[4], p->kafka_records);
        u64(c[5], sizeof c[5], p->rows);
        u64(c[6], sizeof c[6], p->dead_letters);
        u64(c[7], sizeof c[7], p->filtered);
        u64(c[8], sizeof c[8], p->duplicates);
        u64(c[9], sizeof c[9], p->stored_twice);
        u64(c[10], sizeof c[10], p->gaps + p->unexpected);
        int ok =
            !p->stored_twice && !p->gaps && !p->unexpected && p->counts_agree;
        const char *cells[N] = {c[0], c[1], c[2],  c[3],
                                c[4], c[5], c[6],  c[7],
                                c[8], c[9], c[10], ok ? "ok" : "FAIL"};
        tm_table_add(t, cells);
    }
    tm_table_print(t, stdout, "");
    tm_table_free(t);
}

typedef struct totals {
    uint64_t kafka, rows, dls, filtered, dups, twice, gaps, replayed, compacted;
} totals;

static totals sum(const tm_verify_result *r) {
    totals s = {0};
    for (size_t i = 0; i < r->nparts; i++) {
        const tm_verify_partition *p = &r->parts[i];
        s.kafka += p->kafka_records;
        s.rows += p->rows;
        s.dls += p->dead_letters;
        s.filtered += p->filtered;
        s.dups += p->duplicates;
        s.twice += p->stored_twice;
        s.gaps += p->gaps + p->unexpected;
        s.replayed += p->replayed;
        s.compacted += p->compacted;
    }
    return s;
}

static int print_json(const tm_connector_config *cfg,
                      const tm_verify_result *r) {
    json_t *parts = json_array(), *problems = json_array();
    int bad = !parts || !problems;
    for (size_t i = 0; !bad && i < r->nparts; i++) {
        const tm_verify_partition *p = &r->parts[i];
        bad |= json_array_append_new(
            parts,
            json_pack("{s:s,s:i,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b,"
                      "s:I,s:I}",
                      "topic", p->topic, "partition", (int)p->partition,
                      "claimed", p->claimed, "from", (json_int_t)p->from,
                      "marker", (json_int_t)p->marker, "kafka_records",
                      (json_int_t)p->kafka_records, "rows", (json_int_t)p->rows,
                      "dead_letters", (json_int_t)p->dead_letters, "filtered",
                      (json_int_t)p->filtered, "duplicates",
                      (json_int_t)p->duplicates, "stored_twice",
                      (json_int_t)p->stored_twice, "gaps",
                      (json_int_t)(p->gaps + p->unexpected), "counts_agree",
                      p->counts_agree, "replayed", (json_int_t)p->replayed,
                      "compacted", (json_int_t)p->compacted));
    }
    size_t shown = r->nproblems < TM_VERIFY_MAX_PROBLEMS
                       ? r->nproblems
                       : TM_VERIFY_MAX_PROBLEMS;
    for (size_t i = 0; !bad && i < shown; i++)
        bad |= json_array_append_new(problems, json_string(r->problems[i]));
    json_t *doc =
        bad ? NULL
            : json_pack("{s:s,s:b,s:I,s:I,s:o,s:o}", "connector", cfg->name,
                        "ok", tm_verify_ok(r), "problems_total",
                        (json_int_t)r->nproblems, "duplicate_keys",
                        (json_int_t)r->duplicate_keys, "partitions", parts,
                        "problems", problems);
    if (!doc) {
        json_decref(parts);
        json_decref(problems);
        return -1;
    }
    int rc = json_dumpf(doc, stdout, JSON_INDENT(2)) == 0 ? 0 : -1;
    putchar('\n');
    json_decref(doc);
    return rc;
}

/* What is counted apart, not failed: replays and compaction. */
static void print_notes(const tm_verify_result *r) {
    int header = 0;
    for (size_t i = 0; i < r->nparts; i++) {
        const tm_verify_partition *p = &r->parts[i];
        if (!p->replayed && !p->compacted)
            continue;
        if (!header++)
            printf("\nnotes (not failures):\n");
        if (p->replayed)
            printf("  %s [%" PRId32 "]: %" PRIu64
                   " records counted again by the marker (replayed after a "
                   "rewind, e.g. offsets --reset-to; their offsets are "
                   "stored once)\n",
                   p->topic, p->partition, p->replayed);
        if (p->compacted)
            printf("  %s [%" PRId32 "]: %" PRIu64
                   " stored offsets compacted since stored (cleanup.policy "
                   "compact: Kafka's cleaner removed them after the sink "
                   "stored them; not checked against Kafka)\n",
                   p->topic, p->partition, p->compacted);
    }
}

static void print_text(const tm_connector_config *cfg,
                       const tm_verify_result *r) {
    printf("connector %s\n\n", cfg->name);
    print_table(r);
    if (r->nproblems) {
        printf("\nproblems (%zu", r->nproblems);
        if (r->nproblems > TM_VERIFY_MAX_PROBLEMS)
            printf(", the first %d shown", TM_VERIFY_MAX_PROBLEMS);
        printf("):\n");
        for (size_t i = 0; i < r->nproblems && i < TM_VERIFY_MAX_PROBLEMS; i++)
            printf("  %s\n", r->problems[i]);
    }
    print_notes(r);
    totals s = sum(r);
    printf("\nverify: connector=%s partitions=%zu kafka_records=%" PRIu64
           " rows=%" PRIu64 " dead_letters=%" PRIu64 " filtered=%" PRIu64
           " duplicates=%" PRIu64 " stored_twice=%" PRIu64
           " duplicate_keys=%" PRIu64 " gaps=%" PRIu64 " replayed=%" PRIu64
           " compacted=%" PRIu64 " result=%s\n",
           cfg->name, r->nparts, s.kafka, s.rows, s.dls, s.filtered, s.dups,
           s.twice, r->duplicate_keys, s.gaps, s.replayed, s.compacted,
           tm_verify_ok(r) ? "OK" : "FAIL");
}

int tm_cmd_verify(int argc, char **argv) {
    /* The --plugin-dir values, then (from argc on) the
     * --dead-letter-group ones: one allocation. */
    size_t half = (size_t)(argc > 0 ? argc : 1);
    const char **extra = calloc(2 * half, sizeof *extra);
    const char **groups = extra ? extra + half : NULL;
    size_t nextra = 0, ngroups = 0;
    const char *config = NULL;
    int json = 0;
    if (!extra) {
        fprintf(stderr, "tidemark verify: out of memory\n");
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if ((m = tm_cli_opt("verify", "--plugin-dir", argc, argv, &i,
                                   &extra[nextra])) != 0) {
            if (m < 0) {
                free(extra);
                return 2;
            }
            nextra++;
        } else if ((m = tm_cli_opt("verify", "--dead-letter-group", argc, argv,
                                   &i, &groups[ngroups])) != 0) {
            if (m < 0) {
                free(extra);
                return 2;
            }
            ngroups++;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            free(extra);
            return 0;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "tidemark verify: unknown option '%s'\n", a);
            usage(stderr);
            free(extra);
            return 2;
        } else if (config) {
            fprintf(stderr, "tidemark verify: one CONFIG at most\n");
            free(extra);
            return 2;
        } else {
            config = a;
        }
    }
    if (!config) {
        fprintf(stderr, "tidemark verify: no CONFIG given\n");
        usage(stderr);
        free(extra);
        return 2;
    }
    size_t ndirs = 0;
    const char **dirs = tm_cli_plugin_dirs(extra, nextra, &ndirs);
    tm_cli_sink s;
    int rc = 2;
    if (!dirs || tm_cli_sink_load(&s, config, dirs, ndirs) != 0)
        goto out;
    char errstr[2048];
    rd_kafka_t *rk = NULL;
    if (tm_cli_sink_open(&s) != 0)
        goto close;
    rk = tm_kafka_client_new(s.cfg, TM_KAFKA_ADMIN, errstr, sizeof errstr);
    if (!rk) {
        tm_cli_report(s.cfg, config, "$.kafka", errstr);
        goto close;
    }
    tm_verify_result r;
    tm_verify_dl_groups g = {groups, ngroups};
    if (tm_verify_run(s.cfg, &g, &s.inst, rk, &r, errstr, sizeof errstr) != 0) {
        tm_cli_report(s.cfg, config, NULL, errstr);
        goto close;
    }
    if (json) {
        if (print_json(s.cfg, &r) != 0)
            fprintf(stderr, "tidemark verify: out of memory\n");
    } else {
        print_text(s.cfg, &r);
    }
    rc = tm_verify_ok(&r) ? 0 : 1;
    tm_verify_result_free(&r);
close:
    if (rk)
        rd_kafka_destroy(rk);
    tm_cli_sink_free(&s);
out:
    free(dirs);
    free(extra);
    return rc;
}
