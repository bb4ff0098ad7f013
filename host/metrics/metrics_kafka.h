/* The consumer's fetch queue from librdkafka's statistics document: what
 * it holds fetched and not yet consumed, summed over the partitions. */
#ifndef TM_METRICS_KAFKA_H
#define TM_METRICS_KAFKA_H

#include <stddef.h>
#include <stdint.h>

#include "metrics/metrics_registry.h"

/* The document's fetch queue (topics.*.partitions.*.fetchq_size and
 * fetchq_cnt, the internal partition -1 left out). 0, or -1 when it is
 * not a statistics document. */
int tm_metrics_fetchq_parse(const char *json, size_t len, int64_t *bytes,
                            int64_t *messages);

/* Records the fetch queue of one statistics document in M (NULL
 * ignored; a document that does not parse changes nothing). */
void tm_metrics_kafka_stats(tm_metrics_conn *m, const char *json, size_t len);

#endif
