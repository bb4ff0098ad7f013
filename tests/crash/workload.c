/* The workload of the crash suite: the write-up's events (unique ids,
 * loop 0 resent as new messages, contract violations, late events) and the
 * two connectors that read them. Every record produced is counted here, so
 * the expectations come from what was produced, never typed in. */
#include "crash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t ce_env_int(const char *name, int64_t dflt) {
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    long long n = strtoll(v, &end, 10);
    H_CHECK(*end == '\0' && n >= 0, "%s=%s: expected a number", name, v);
    return (int64_t)n;
}

void ce_init(crash_env *e, const char *sink, const char *scenario,
             int partitions) {
    memset(e, 0, sizeof *e);
    e->scenario = scenario;
    e->t0_ms = h_now_ms();
    cs_init(&e->sink, sink, scenario);
    e->partitions = partitions;
    snprintf(e->topic, sizeof e->topic, "%s", h_name(scenario));
    snprintf(e->raw, sizeof e->raw, "%s", h_name("raw"));
    snprintf(e->dedup, sizeof e->dedup, "%s", h_name("dedup"));
    e->nconn = e->sink.dedup ? 2 : 1;
    h_create_topic(e->topic, partitions, NULL, NULL);
    e->producer = h_producer(NULL, NULL);
}

static const char *DEDUP_MAPPING =
    "\"mapping\": {\"mode\": \"json\", \"columns\": ["
    "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", "
    "\"required\": true},"
    "{\"name\": \"loop\", \"pointer\": \"/loop\", \"type\": \"int\", "
    "\"required\": true},"
    "{\"name\": \"body\", \"pointer\": \"/body\", \"type\": \"text\"}]},"
    "\"dedup\": {\"key\": [\"id\"]}, \"dead_letters\": {\"sink\": true}";

static void write_config(crash_env *e, const crash_conf *c, const char *name,
                         const char *table, const char *extra, char *out,
                         size_t size) {
    char text[16384], file[300], instance[400] = "";
    if (c->instance)
        snprintf(instance, sizeof instance,
                 ", \"group.instance.id\": \"%s-%s\"", name, c->instance);
    snprintf(text, sizeof text,
             "{\"name\": \"%s\",\n"
             " \"kafka\": {\"bootstrap_servers\": \"%s\", \"topics\": "
             "[\"%s\"%s%s%s], \"start\": \"earliest\",\n"
             "   \"properties\": {\"session.timeout.ms\": \"6000\", "
             "\"heartbeat.interval.ms\": \"500\"%s%s%s}},\n"
             " \"batch\": {%s},\n"
             " \"sink\": %s,\n"
             " \"state_dir\": \"%s/%s\",\n"
             " %s}\n",
             name, h_bootstrap(), e->topic, e->topic2[0] ? ", \"" : "",
             e->topic2, e->topic2[0] ? "\"" : "", instance,
             c->props ? ", " : "", c->props ? c->props : "", c->batch,
             cs_sink_json(&e->sink, table), h_workdir(),
             c->state ? c->state : "state", extra);
    if (c->state)
        snprintf(file, sizeof file, "%s-%s.json", table, c->state);
    else
        snprintf(file, sizeof file, "%s.json", table);
    snprintf(out, size, "%s", h_write_file(file, text));
}

void ce_configs(crash_env *e, const crash_conf *c) {
    write_config(e, c, e->raw, "raw_t", "\"mapping\": {\"mode\": \"raw\"}",
                 e->raw_cfg, sizeof e->raw_cfg);
    e->dedup_cfg[0] = '\0';
    if (e->sink.dedup)
        write_config(e, c, e->dedup, "dedup_t", DEDUP_MAPPING, e->dedup_cfg,
                     sizeof e->dedup_cfg);
}

/* Produces one record without waiting; its offset lands in *off. */
static void produce_one(crash_env *e, int32_t part, const char *key,
                        const char *val, size_t vlen, int64_t ts_ms,
                        int64_t *off) {
    *off = -1;
    rd_kafka_resp_err_t err;
    while (
        (err = rd_kafka_producev(
             e->producer, RD_KAFKA_V_TOPIC(e->topic),
             RD_KAFKA_V_PARTITION(part),
             RD_KAFKA_V_KEY((void *)key, key ? strlen(key) : 0),
             RD_KAFKA_V_VALUE((void *)val, vlen), RD_KAFKA_V_TIMESTAMP(ts_ms),
             RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(off),
             RD_KAFKA_V_END)) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
        rd_kafka_poll(e->producer, 50);
    H_CHECK(!err, "produce to %s: %s", e->topic, rd_kafka_err2str(err));
    rd_kafka_poll(e->producer, 0);
    e->sent++;
}

static void flush_check(crash_env *e, const int64_t *offs, int64_t n) {
    H_CHECK(rd_kafka_flush(e->producer, 60000) == 0,
            "flush to %s: not all delivered in 60 s", e->topic);
    for (int64_t i = 0; i < n; i++)
        H_CHECK(offs[i] >= 0, "record %lld to %s not delivered (%lld)",
                (long long)i, e->topic, (long long)offs[i]);
}

void ce_events(crash_env *e, int64_t first, int64_t n, int loop, int64_t ts_ms,
               int64_t **offs_out, int32_t **parts_out) {
    int64_t *offs = malloc((size_t)n * sizeof *offs);
    int32_t *parts = malloc((size_t)n * sizeof *parts);
    H_CHECK(offs && parts, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        int64_t id = first + i;
        char key[32], val[256];
        snprintf(key, sizeof key, "%lld", (long long)id);
        int len = snprintf(val, sizeof val,
                           "{\"id\": %lld, \"loop\": %d, \"body\": \"event "
                           "%lld of loop %d, some text like an edit\"}",
                           (long long)id, loop, (long long)id, loop);
        parts[i] = (int32_t)(id % e->partitions);
        produce_one(e, parts[i], key, val, (size_t)len, ts_ms, &offs[i]);
        if (id >= e->next_id) {
            e->unique_ids++;
            e->next_id = id + 1;
        } else
            e->resends++;
    }
    flush_check(e, offs, n);
    if (offs_out)
        *offs_out = offs;
    else
        free(offs);
    if (parts_out)
        *parts_out = parts;
    else
        free(parts);
}

void ce_violations(crash_env *e, int n) {
    static const char *const bad[] = {
        "{\"id\": 1, \"loop\": ",             /* invalid JSON */
        "{\"loop\": 3, \"body\": \"no id\"}", /* missing field */
        "{\"id\": \"seven\", \"loop\": 0}",   /* type mismatch */
        "\xff\xfe not even text",             /* not UTF-8 */
        "{\"id\": 12, \"loop\": \"zero\"}",   /* type mismatch */
    };
    int64_t *offs = malloc((size_t)n * sizeof *offs);
    H_CHECK(offs != NULL, "out of memory");
    for (int i = 0; i < n; i++) {
        const char *v = bad[i % 5];
        produce_one(e, i % e->partitions, NULL, v, strlen(v), 0, &offs[i]);
        e->violations++;
    }
    flush_check(e, offs, n);
    free(offs);
}

void ce_conflicts(crash_env *e, int64_t first, int n) {
    int64_t *offs = malloc((size_t)n * sizeof *offs);
    H_CHECK(offs != NULL, "out of memory");
    for (int i = 0; i < n; i++) {
        int64_t id = first + i;
        char key[32], val[256];
        snprintf(key, sizeof key, "%lld", (long long)id);
        int len = snprintf(val, sizeof val,
                           "{\"id\": %lld, \"loop\": 0, \"body\": \"a "
                           "conflicting payload\"}",
                           (long long)id);
        produce_one(e, (int32_t)(id % e->partitions), key, val, (size_t)len, 0,
                    &offs[i]);
        e->conflicts++;
    }
    flush_check(e, offs, n);
    free(offs);
}

/* The backlog's sizes, from the environment. */
static void backlog_sizes(int64_t *loops, int64_t *sample, int64_t *poison) {
    *loops = ce_env_int("TIDEMARK_CRASH_LOOPS", 50);
    *sample = ce_env_int("TIDEMARK_CRASH_SAMPLE", 400);
    *poison = ce_env_int("TIDEMARK_CRASH_VIOLATIONS", 25);
    H_CHECK(*loops >= 2 && *sample >= 1, "TIDEMARK_CRASH_LOOPS >= 2 and "
                                         "TIDEMARK_CRASH_SAMPLE >= 1 please");
}

int64_t ce_writeup_backlog_size(void) {
    int64_t loops, sample, poison;
    backlog_sizes(&loops, &sample, &poison);
    return (loops + 1) * sample + poison;
}

void ce_writeup_backlog(crash_env *e) {
    int64_t loops, sample, poison;
    backlog_sizes(&loops, &sample, &poison);
    int64_t base = e->next_id;
    for (int64_t l = 0; l < loops; l++)
        ce_events(e, base + l * sample, sample, (int)l, 0, NULL, NULL);
    ce_events(e, base, sample, 0, 0, NULL, NULL); /* loop 0 resent */
    ce_violations(e, (int)poison);
    h_step("produced %lld loops x %lld events, loop 0 resent, %lld "
           "violations: %lld messages",
           (long long)loops, (long long)sample, (long long)poison,
           (long long)e->sent);
}
