#include "kafka/partitions.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The pattern librdkafka subscribes with (tm_config_subscription_pattern),
 * compiled as librdkafka compiles it: the one matcher of the guard, the
 * fingerprint and the consumer, so that they never disagree on a topic. */
static int compile(const tm_connector_config *cfg, regex_t *re) {
    char *pattern = tm_config_subscription_pattern(cfg->kafka.topic_regex);
    if (!pattern)
        return -1;
    int rc = regcomp(re, pattern, REG_EXTENDED | REG_NOSUB);
    free(pattern);
    return rc == 0 ? 0 : -1;
}

static int wanted(const tm_connector_config *cfg, const regex_t *re,
                  const char *topic) {
    if (!cfg->kafka.topic_regex) {
        for (size_t i = 0; i < cfg->kafka.ntopics; i++)
            if (strcmp(cfg->kafka.topics[i], topic) == 0)
                return 1;
        return 0;
    }
    /* Kafka's internal topics (__consumer_offsets, __transaction_state)
     * are never a connector's input, whatever the pattern says. */
    if (strncmp(topic, "__", 2) == 0)
        return 0;
    return regexec(re, topic, 0, NULL, 0) == 0;
}

int tm_kafka_topic_wanted(const tm_connector_config *cfg, const char *topic) {
    if (!cfg->kafka.topic_regex)
        return wanted(cfg, NULL, topic);
    regex_t re;
    if (compile(cfg, &re) != 0)
        return 0; /* the loader refuses such a config */
    int yes = wanted(cfg, &re, topic);
    regfree(&re);
    return yes;
}

static int list_partitions(rd_kafka_t *rk, const tm_connector_config *cfg,
                           int timeout_ms, int missing_ok,
                           rd_kafka_topic_partition_list_t **out, char *errstr,
                           size_t errsize) {
    regex_t re;
    int have_re = 0;
    if (cfg->kafka.topic_regex) {
        if (compile(cfg, &re) != 0) {
            snprintf(errstr, errsize, "$.kafka.topic_regex: not a regex");
            return -1;
        }
        have_re = 1;
    }
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms);
    if (err) {
        snprintf(errstr, errsize, "cannot read the cluster's metadata: %s",
                 rd_kafka_err2str(err));
        if (have_re)
            regfree(&re);
        return -1;
    }
    rd_kafka_topic_partition_list_t *list =
        rd_kafka_topic_partition_list_new(16);
    int rc = list ? 0 : -1;
    if (!list)
        snprintf(errstr, errsize, "out of memory");
    for (int t = 0; rc == 0 && t < md->topic_cnt; t++) {
        const rd_kafka_metadata_topic_t *mt = &md->topics[t];
        if (!wanted(cfg, have_re ? &re : NULL, mt->topic))
            continue;
        if (mt->err) {
            snprintf(errstr, errsize, "topic %s: %s", mt->topic,
                     rd_kafka_err2str(mt->err));
            rc = -1;
            break;
        }
        for (int p = 0; p < mt->partition_cnt; p++)
            rd_kafka_topic_partition_list_add(list, mt->topic,
                                              mt->partitions[p].id);
    }
    /* A listed topic the cluster does not have is a mistake to report,
     * not an empty input to wait on silently. */
    for (size_t i = 0;
         rc == 0 && !have_re && !missing_ok && i < cfg->kafka.ntopics; i++) {
        int found = 0;
        for (int t = 0; t < md->topic_cnt && !found; t++)
            found = strcmp(md->topics[t].topic, cfg->kafka.topics[i]) == 0;
        if (!found) {
            snprintf(errstr, errsize, "topic %s does not exist",
                     cfg->kafka.topics[i]);
            rc = -1;
        }
    }
    rd_kafka_metadata_destroy(md);
    if (have_re)
        regfree(&re);
    if (rc != 0) {
        if (list)
            rd_kafka_topic_partition_list_destroy(list);
        return -1;
    }
    rd_kafka_topic_partition_list_sort(list, NULL, NULL);
    *out = list;
    return 0;
}

int tm_kafka_list_partitions(rd_kafka_t *rk, const tm_connector_config *cfg,
                             int timeout_ms,
                             rd_kafka_topic_partition_list_t **out,
                             char *errstr, size_t errsize) {
    return list_partitions(rk, cfg, timeout_ms, 0, out, errstr, errsize);
}

int tm_kafka_list_present_partitions(rd_kafka_t *rk,
                                     const tm_connector_config *cfg,
                                     int timeout_ms,
                                     rd_kafka_topic_partition_list_t **out,
                                     char *errstr, size_t errsize) {
    return list_partitions(rk, cfg, timeout_ms, 1, out, errstr, errsize);
}

int tm_kafka_watermarks(rd_kafka_t *rk, const char *topic, int32_t partition,
                        int timeout_ms, int64_t *low, int64_t *high,
                        char *errstr, size_t errsize) {
    rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
        rk, topic, partition, low, high, timeout_ms);
    if (err) {
        snprintf(errstr, errsize, "%s [%d]: cannot read the watermarks: %s",
                 topic, (int)partition, rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}
