/* A topic's cleanup.policy, read with DescribeConfigs: on a compacted
 * topic the cleaner removes records after the sink stored them, which
 * verify must not call phantom rows. */
#include "verify/cleanup_policy.h"

#include <stdio.h>
#include <string.h>

int tm_verify_topic_compacted(rd_kafka_t *rk, const char *topic, int timeout_ms,
                              char *errstr, size_t errsize) {
    rd_kafka_ConfigResource_t *res =
        rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    rd_kafka_AdminOptions_t *opt =
        rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_event_t *ev = NULL;
    int rc = -1;
    if (!res || !opt || !q) {
        snprintf(errstr, errsize, "out of memory");
        goto out;
    }
    char why[256];
    if (rd_kafka_AdminOptions_set_request_timeout(
            opt, timeout_ms, why, sizeof why) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(errstr, errsize, "DescribeConfigs: %s", why);
        goto out;
    }
    rd_kafka_DescribeConfigs(rk, &res, 1, opt, q);
    ev = rd_kafka_queue_poll(q, timeout_ms + 2000);
    if (!ev) {
        snprintf(errstr, errsize,
                 "%s: DescribeConfigs (cleanup.policy): no answer in %d ms",
                 topic, timeout_ms);
        goto out;
    }
    if (rd_kafka_event_error(ev)) {
        snprintf(errstr, errsize, "%s: DescribeConfigs (cleanup.policy): %s",
                 topic, rd_kafka_event_error_string(ev));
        goto out;
    }
    const rd_kafka_DescribeConfigs_result_t *result =
        rd_kafka_event_DescribeConfigs_result(ev);
    size_t n = 0;
    const rd_kafka_ConfigResource_t **rs =
        result ? rd_kafka_DescribeConfigs_result_resources(result, &n) : NULL;
    if (n != 1 || rd_kafka_ConfigResource_error(rs[0])) {
        snprintf(
            errstr, errsize, "%s: DescribeConfigs (cleanup.policy): %s", topic,
            n == 1 ? rd_kafka_ConfigResource_error_string(rs[0]) : "no result");
        goto out;
    }
    size_t nc = 0;
    const rd_kafka_ConfigEntry_t **cs =
        rd_kafka_ConfigResource_configs(rs[0], &nc);
    rc = 0; /* the broker's default is "delete" */
    for (size_t i = 0; i < nc; i++) {
        const char *name = rd_kafka_ConfigEntry_name(cs[i]);
        const char *value = rd_kafka_ConfigEntry_value(cs[i]);
        if (name && strcmp(name, "cleanup.policy") == 0)
            rc = value && strstr(value, "compact") != NULL; /* compact,delete */
    }
out:
    if (ev)
        rd_kafka_event_destroy(ev);
    if (q)
        rd_kafka_queue_destroy(q);
    if (opt)
        rd_kafka_AdminOptions_destroy(opt);
    if (res)
        rd_kafka_ConfigResource_destroy(res);
    return rc;
}
