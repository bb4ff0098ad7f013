/* A consumed librdkafka message as the record converter sees it
 * (tm_msg_view): the one place that reads timestamps and headers out of
 * rd_kafka_message_t, for the commit loop and for verify alike. */
#ifndef TM_MESSAGE_VIEW_H
#define TM_MESSAGE_VIEW_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>

#include "convert/batch_builder.h"

/* Headers kept per record; more are dropped (and reported by *truncated). */
#define TM_MAX_HEADERS 64

/* Fills out from m (topic/partition as given, pointers into m and hv,
 * valid while both are). hv has room for TM_MAX_HEADERS. *truncated is set
 * when m had more headers than that. */
void tm_kafka_message_view(const rd_kafka_message_t *m, const char *topic,
                           int32_t partition, tm_header_view *hv,
                           tm_msg_view *out, int *truncated);

#endif
