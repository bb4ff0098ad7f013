#include "kafka/subscription.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kafka/kafka_conf.h"
#include "kafka/member_id.h"
#include "kafka/partitions.h"

/* FNV-1a, 64 bits: a change detector, not a secret. */
static uint64_t fnv(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* Each field ends in a NUL, so that no two different lists hash alike by
 * running their fields together. */
static uint64_t field(uint64_t h, const char *s) {
    return fnv(h, s, strlen(s) + 1);
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int tm_subscription_hash(const tm_connector_config *cfg,
                         const rd_kafka_topic_partition_list_t *all, char *out,
                         size_t size) {
    if (size < TM_SUBSCRIPTION_HEX + 1)
        return -1;
    uint64_t h = 14695981039346656037ULL;
    if (cfg->kafka.topic_regex) {
        h = field(h, "regex");
        h = field(h, cfg->kafka.topic_regex);
    } else {
        /* Sorted, each name once: the same topics in another order are
         * the same subscription. */
        size_t n = cfg->kafka.ntopics;
        const char **names = malloc((n ? n : 1) * sizeof *names);
        if (!names)
            return -1;
        for (size_t i = 0; i < n; i++)
            names[i] = cfg->kafka.topics[i];
        qsort(names, n, sizeof *names, by_name);
        h = field(h, "topics");
        for (size_t i = 0; i < n; i++)
            if (i == 0 || strcmp(names[i], names[i - 1]) != 0)
                h = field(h, names[i]);
        free(names);
    }
    /* Sorted by topic and partition: each topic once, with its count. */
    h = field(h, "partitions");
    for (int i = 0; i < all->cnt;) {
        int j = i;
        while (j < all->cnt &&
               strcmp(all->elems[j].topic, all->elems[i].topic) == 0)
            j++;
        char count[32];
        snprintf(count, sizeof count, "%d", j - i);
        h = field(h, all->elems[i].topic);
        h = field(h, count);
        i = j;
    }
    snprintf(out, size, "%016" PRIx64, h);
    return 0;
}

int tm_subscription_fingerprint_of(rd_kafka_t *rk,
                                   const tm_connector_config *cfg,
                                   int timeout_ms, char *out, size_t size,
                                   char *why, size_t whysize) {
    /* A listed topic that does not exist counts as absent (no
     * partitions), the same on every start: only metadata that cannot be
     * read makes the subscription unknown. */
    rd_kafka_topic_partition_list_t *all = NULL;
    if (tm_kafka_list_present_partitions(rk, cfg, timeout_ms, &all, why,
                                         whysize) != 0)
        return -1;
    int rc = tm_subscription_hash(cfg, all, out, size);
    rd_kafka_topic_partition_list_destroy(all);
    if (rc != 0)
        snprintf(why, whysize, "out of memory");
    return rc;
}

int tm_subscription_fingerprint(const tm_connector_config *cfg, int timeout_ms,
                                char *out, size_t size, char *why,
                                size_t whysize) {
    if (size < TM_SUBSCRIPTION_HEX + 1) {
        snprintf(why, whysize, "fingerprint buffer too small");
        return -1;
    }
    rd_kafka_t *rk = tm_kafka_client_new(cfg, TM_KAFKA_ADMIN, why, whysize);
    if (!rk)
        return -1;
    int rc = tm_subscription_fingerprint_of(rk, cfg, timeout_ms, out, size, why,
                                            whysize);
    rd_kafka_destroy(rk);
    return rc;
}
