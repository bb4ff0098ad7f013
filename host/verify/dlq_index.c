#include "verify/dlq_index.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commit/lineage.h"
#include "kafka/dead_letter_producer.h"
#include "kafka/partition_reader.h"
#include "kafka/partitions.h"

/* Header name's value as a string (headers carry no terminator); 0, or
 * -1 when absent or too long. */
static int header(const rd_kafka_message_t *m, const char *name, char *out,
                  size_t size) {
    rd_kafka_headers_t *h = NULL;
    const void *v = NULL;
    size_t len = 0;
    if (rd_kafka_message_headers(m, &h) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(h, name, &v, &len) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        !v || len >= size)
        return -1;
    memcpy(out, v, len);
    out[len] = '\0';
    return 0;
}

/* A whole decimal number, or -1 on failure. */
static int parse_i64(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < 0)
        return -1;
    *out = v;
    return 0;
}

typedef struct load_ctx {
    const char *connector, *group;
    const char *const *groups; /* also ours (verify --dead-letter-group) */
    size_t ngroups;
    tm_dlq_index *x;
} load_ctx;

/* Whether a dead letter's group header names one of ours. */
static int our_group(const load_ctx *l, const char *group) {
    if (strcmp(group, l->group) == 0)
        return 1;
    for (size_t i = 0; i < l->ngroups; i++)
        if (strcmp(group, l->groups[i]) == 0)
            return 1;
    return 0;
}

static int on_dead_letter(void *user, const rd_kafka_message_t *m) {
    load_ctx *l = user;
    char who[512], group[512], topic[256], part[32], off[32];
    int64_t p, o;
    /* Another connector's (a shared topic), another deployment's (its
     * group: counted, verify names it), or not ours to read: skipped. */
    if (header(m, "__connect.errors.connector.name", who, sizeof who) != 0 ||
        strcmp(who, l->connector) != 0)
        return 0;
    if (header(m, TM_DLQ_GROUP_HEADER, group, sizeof group) == 0 &&
        !our_group(l, group)) {
        if (!l->x->other_group++)
            snprintf(l->x->other_group_name, sizeof l->x->other_group_name,
                     "%s", group);
        return 0;
    }
    if (header(m, "__connect.errors.topic", topic, sizeof topic) != 0 ||
        header(m, "__connect.errors.partition", part, sizeof part) != 0 ||
        header(m, "__connect.errors.offset", off, sizeof off) != 0 ||
        parse_i64(part, &p) != 0 || p > INT32_MAX || parse_i64(off, &o) != 0)
        return 0;
    tm_dlq_index *x = l->x;
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 64;
        tm_dlq_entry *nv = realloc(x->v, cap * sizeof *nv);
        if (!nv) {
            x->oom = 1;
            return 1;
        }
        x->v = nv;
        x->cap = cap;
    }
    char *t = strdup(topic);
    if (!t) {
        x->oom = 1;
        return 1;
    }
    tm_dlq_entry *e = &x->v[x->n++];
    *e = (tm_dlq_entry){.topic = t, .partition = (int32_t)p, .offset = o};
    tm_lineage_hash(m->key, m->key_len, m->payload, m->len, e->hash);
    return 0;
}

static int cmp_entry(const void *a, const void *b) {
    const tm_dlq_entry *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    if (c)
        return c;
    if (x->partition != y->partition)
        return x->partition < y->partition ? -1 : 1;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return strcmp(x->hash, y->hash);
}

/* The partition count of topic, 0 when the topic does not exist. */
static int partitions_of(rd_kafka_t *rk, const char *topic, int timeout_ms,
                         int *count, char *errstr, size_t errsize) {
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    if (!rkt) {
        snprintf(errstr, errsize, "dead-letter topic %s: %s", topic,
                 rd_kafka_err2str(rd_kafka_last_error()));
        return -1;
    }
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms);
    rd_kafka_topic_destroy(rkt);
    if (err) {
        snprintf(errstr, errsize, "dead-letter topic %s: metadata: %s", topic,
                 rd_kafka_err2str(err));
        return -1;
    }
    *count = 0;
    if (md->topic_cnt == 1 && !md->topics[0].err)
        *count = md->topics[0].partition_cnt;
    rd_kafka_metadata_destroy(md);
    return 0;
}

int tm_dlq_index_load(const tm_connector_config *cfg, const char *const *groups,
                      size_t ngroups, rd_kafka_t *rk, int timeout_ms,
                      tm_dlq_index *out, char *errstr, size_t errsize) {
    memset(out, 0, sizeof *out);
    const char *topic = cfg->dead_letters.topic;
    int count = 0;
    if (!topic)
        return 0;
    if (partitions_of(rk, topic, timeout_ms, &count, errstr, errsize) != 0)
        return -1;
    load_ctx l = {cfg->name, cfg->kafka.group_id ? cfg->kafka.group_id : "",
                  groups, ngroups, out};
    for (int p = 0; p < count; p++) {
        int64_t low = 0, high = 0;
        if (tm_kafka_watermarks(rk, topic, p, timeout_ms, &low, &high, errstr,
                                errsize) != 0)
            goto fail;
        if (low < high &&
            tm_kafka_read_range(cfg, topic, p, low, high, on_dead_letter, &l,
                                errstr, errsize) != 0 &&
            !out->oom)
            goto fail;
        if (out->oom) {
            snprintf(errstr, errsize, "out of memory reading %s", topic);
            goto fail;
        }
    }
    if (out->n > 1)
        qsort(out->v, out->n, sizeof *out->v, cmp_entry);
    return 0;
fail:
    tm_dlq_index_free(out);
    return -1;
}

int tm_dlq_index_has(const tm_dlq_index *x, const char *topic,
                     const rd_kafka_message_t *m) {
    tm_dlq_entry k = {
        .topic = (char *)topic, .partition = m->partition, .offset = m->offset};
    tm_lineage_hash(m->key, m->key_len, m->payload, m->len, k.hash);
    return x->n && bsearch(&k, x->v, x->n, sizeof *x->v, cmp_entry) != NULL;
}

void tm_dlq_index_free(tm_dlq_index *x) {
    for (size_t i = 0; i < x->n; i++)
        free(x->v[i].topic);
    free(x->v);
    memset(x, 0, sizeof *x);
}
