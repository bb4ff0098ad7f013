/* `tidemark verify`: the sink reconciled against Kafka itself, never
 * against the pipeline's counters. For each claimed partition, the records
 * Kafka holds (read_committed) from the log start up to the sink's marker
 * are compared, offset by offset, with what the sink stores (rows and dead
 * letters, through the plugin's scan): an offset stored twice is a
 * duplicate; an offset Kafka holds that the sink neither stores nor can
 * account for is a gap. An offset may be absent only when the connector's
 * own mapping filters it out, or (with dedup) when its business key is
 * stored from another offset, or (with dead letters kept out of the sink)
 * when it is a dead letter the dead-letter topic holds (dlq_index.h); the
 * sink's marker counts of filtered and duplicate records must then add up
 * to what Kafka holds. With dedup, no business key may be stored twice.
 * Two things that are not failures are counted apart: records the marker
 * counted again (a replay after `offsets --reset-to` an earlier offset:
 * its filtered and duplicate counts then exceed what Kafka holds below
 * it), and, on a compacted topic, stored offsets the cleaner removed from
 * Kafka after they were stored. With a change-data-capture mapping a
 * key's row holds only its last event: an absent event is accounted for
 * by a later event of its key below the marker, or by being a delete
 * (superseded), and a stored row must be its key's last event. */
#ifndef TM_VERIFY_H
#define TM_VERIFY_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

#include "config/connector_config.h"
#include "runtime/sink_instance.h"

typedef struct tm_verify_partition {
    char topic[256];
    int32_t partition;
    int claimed;                   /* the sink has a marker for it */
    int64_t from, marker;          /* the offsets checked: [from, marker) */
    uint64_t kafka_records;        /* data records Kafka holds there */
    uint64_t rows, dead_letters;   /* stored by the sink there; with
                                      "dead_letters": {"sink": false}, the
                                      dead letters are those found in the
                                      dead-letter topic */
    uint64_t filtered, duplicates; /* absent, explained by the filter / a
                                      stored key */
    tm_marker m;                   /* the sink's marker (its counts) */
    uint64_t stored_twice, gaps, unexpected;
    int compacted_topic; /* cleanup.policy names "compact" */
    uint64_t compacted;  /* stored, then removed by the cleaner */
    uint64_t replayed;   /* counted again by the marker (a rewind) */
    uint64_t superseded; /* change events applied, then replaced or
                            deleted by a later event of their key */
    int counts_agree;    /* the marker's filtered + duplicates cover the
                            records verify found absent and explained */
} tm_verify_partition;

/* Groups whose dead letters are also the connector's (its earlier
 * $.kafka.group_id values: `verify --dead-letter-group`). */
typedef struct tm_verify_dl_groups {
    const char *const *groups;
    size_t n;
} tm_verify_dl_groups;

#define TM_VERIFY_MAX_PROBLEMS 50

typedef struct tm_verify_result {
    tm_verify_partition *parts;
    size_t nparts;
    uint64_t duplicate_keys; /* business keys stored more than once */
    size_t nproblems;        /* all of them; the first ones are kept */
    char problems[TM_VERIFY_MAX_PROBLEMS][512];
} tm_verify_result;

/* Runs the reconcile for cfg with an opened sink (si) and a client of the
 * cluster (rk, for metadata and watermarks), the dead letters of the
 * groups g also counted as the connector's. 0 with out filled (its
 * problems say whether it passed), -1 with errstr when it could not look
 * (Kafka or the sink unreachable, no scan callback). */
int tm_verify_run(const tm_connector_config *cfg, const tm_verify_dl_groups *g,
                  tm_sink_instance *si, rd_kafka_t *rk, tm_verify_result *out,
                  char *errstr, size_t errsize);

/* Whether the result found neither duplicates nor gaps nor disagreeing
 * counts. */
int tm_verify_ok(const tm_verify_result *r);

void tm_verify_result_free(tm_verify_result *r);

#endif
