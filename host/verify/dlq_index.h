/* The dead letters a connector produced to its dead-letter topic, read
 * back from the topic itself for `verify`: with "dead_letters": {"sink":
 * false} the sink stores nothing for those offsets, and only the topic
 * can say they were delivered. Each record of the topic whose
 * __connect.errors.connector.name header names the connector gives the
 * source record's topic, partition and offset (its other
 * __connect.errors.* headers; kafka/dead_letter_producer.c), and the hash
 * of its key and value, the source record's own bytes. One that names
 * another consumer group (TM_DLQ_GROUP_HEADER: another deployment of the
 * same connector name, or this one before its group was renamed and
 * the old group not given) is not ours; one without that header (written
 * before it existed) is taken on its name and bytes alone. A dead letter
 * counts for a source record only when the bytes match: one of an older
 * log of a topic deleted and created again does not. */
#ifndef TM_VERIFY_DLQ_INDEX_H
#define TM_VERIFY_DLQ_INDEX_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include <tidemark/sink.h>

#include "config/connector_config.h"

typedef struct tm_dlq_entry {
    char *topic;
    int32_t partition;
    int64_t offset;
    char hash[TM_RECORD_HASH_MAX]; /* commit/lineage.h: key and value */
} tm_dlq_entry;

typedef struct tm_dlq_index {
    tm_dlq_entry *v; /* sorted by topic, partition, offset, hash */
    size_t n, cap;
    int oom;
    /* Dead letters naming the connector but another group, not counted,
     * and the first such group: a renamed $.kafka.group_id leaves its
     * earlier dead letters so, `verify --dead-letter-group` says. */
    size_t other_group;
    char other_group_name[512];
} tm_dlq_index;

/* Reads all of cfg's $.dead_letters.topic (every partition, log start to
 * high watermark; a topic that does not exist holds none), taking the
 * dead letters of cfg's group and of the ngroups groups also given (the
 * connector's earlier group ids, told by the operator: never guessed, as
 * another deployment's dead letters may have the same bytes). 0, or -1
 * with errstr (Kafka unreachable, out of memory). */
int tm_dlq_index_load(const tm_connector_config *cfg, const char *const *groups,
                      size_t ngroups, rd_kafka_t *rk, int timeout_ms,
                      tm_dlq_index *out, char *errstr, size_t errsize);

/* Whether the topic holds a dead letter of the source record m of topic
 * (its partition, offset, key and value). */
int tm_dlq_index_has(const tm_dlq_index *x, const char *topic,
                     const rd_kafka_message_t *m);

void tm_dlq_index_free(tm_dlq_index *x);

#endif
