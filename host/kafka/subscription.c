#include "kafka/subscription.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
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
    rd_kafka_topic_partition_list_t *all = NULL;
    int rc = tm_kafka_list_partitions(rk, cfg, timeout_ms, &all, why, whysize);
    rd_kafka_destroy(rk);
    if (rc != 0)
        return -1;
    uint64_t h = 14695981039346656037ULL;
    if (cfg->kafka.topic_regex) {
        h = field(h, "regex");
        h = field(h, cfg->kafka.topic_regex);
    } else {
        h = field(h, "topics");
        for (size_t i = 0; i < cfg->kafka.ntopics; i++)
            h = field(h, cfg->kafka.topics[i]);
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
    rd_kafka_topic_partition_list_destroy(all);
    snprintf(out, size, "%016" PRIx64, h);
    return 0;
}
