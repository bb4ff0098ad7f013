#include "metrics/metrics_kafka.h"

#include <jansson.h>
#include <stdlib.h>

int tm_metrics_fetchq_parse(const char *json, size_t len, int64_t *bytes,
                            int64_t *messages) {
    json_error_t e;
    json_t *root = json_loadb(json, len, 0, &e);
    json_t *topics = root ? json_object_get(root, "topics") : NULL;
    if (!json_is_object(topics)) {
        json_decref(root);
        return -1;
    }
    *bytes = *messages = 0;
    const char *tname, *pname;
    json_t *t, *p;
    json_object_foreach(topics, tname, t) {
        json_t *parts = json_object_get(t, "partitions");
        json_object_foreach(parts, pname, p) {
            if (json_integer_value(json_object_get(p, "partition")) < 0)
                continue; /* the internal UA partition */
            *bytes += json_integer_value(json_object_get(p, "fetchq_size"));
            *messages += json_integer_value(json_object_get(p, "fetchq_cnt"));
        }
    }
    json_decref(root);
    return 0;
}

void tm_metrics_kafka_stats(tm_metrics_conn *m, const char *json, size_t len) {
    int64_t bytes, messages;
    if (!m || tm_metrics_fetchq_parse(json, len, &bytes, &messages) != 0)
        return;
    atomic_store(&m->fetchq_bytes, bytes);
    atomic_store(&m->fetchq_messages, messages);
}
