/* The librdkafka configuration of a connector's clients.
 *
 * One place turns $.kafka into an rd_kafka_conf_t, so that the consumer,
 * the dead-letter producer and the CLI's offline views (status --config,
 * offsets) talk to the same cluster with the same TLS/SASL settings. */
#ifndef TM_KAFKA_CONF_H
#define TM_KAFKA_CONF_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>

#include "config/connector_config.h"
#include "services/log.h"

/* The level of a line librdkafka logs (its syslog LEVEL, its facility FAC)
 * in the host's log: errors and warnings as such, the rest debug, and a
 * CONFWARN (a property set for another role) debug too. Every client's
 * log callback maps through it. */
tm_log_level tm_kafka_log_level(int level, const char *fac);

/* Which client the configuration is for: the consumer gets the group and
 * the protocol's fixed settings (no auto commit or offset store,
 * auto.offset.reset=error, read_committed), the others only the
 * connection. */
typedef enum tm_kafka_role {
    TM_KAFKA_CONSUMER = 1,
    TM_KAFKA_PRODUCER = 2, /* dead letters: idempotent, acks=all */
    TM_KAFKA_ADMIN = 3     /* metadata, watermarks, group description */
} tm_kafka_role;

/* bootstrap.servers, client.id ("tidemark-" + name), the role's settings,
 * then every $.kafka.properties entry (a user's property wins over a
 * default, except the consumer's protocol settings and the dead-letter
 * producer's delivery settings, which the loader refuses).
 * Returns NULL with a message in errstr naming the JSON path of a
 * property librdkafka refused. The secrets of cfg never reach errstr. */
rd_kafka_conf_t *tm_kafka_conf_new(const tm_connector_config *cfg,
                                   tm_kafka_role role, char *errstr,
                                   size_t errsize);

/* Builds, without connecting anywhere, every configuration `run` builds
 * for cfg (the consumer's; the dead-letter producer's when
 * $.dead_letters.topic is set), and a client of each with no broker to
 * reach (rd_kafka_new checks properties against each other; the
 * producer's acks and enable.idempotence are read back: all and true), then
 * reports
 * each line librdkafka refuses ("PATH: librdkafka refused ...", redacted)
 * through report. Returns the number of lines reported: 0 when run would
 * accept the config. Shared by every command that loads a config, so that
 * validate refuses exactly what run refuses. */
size_t tm_kafka_conf_check(const tm_connector_config *cfg,
                           void (*report)(void *ctx, const char *line),
                           void *ctx);

/* The consumer's session.timeout.ms as librdkafka would use it (the
 * user's property, else librdkafka's default): how long the broker keeps a
 * member that stopped without leaving, a static member on every stop.
 * -1 when it cannot be read. */
long tm_kafka_session_timeout_ms(const tm_connector_config *cfg);

/* A client of the role (rd_kafka_new with the conf above); for a consumer
 * the conf gets opaque and callbacks set by the caller first, so this is
 * for the producer and admin roles. NULL with errstr. */
rd_kafka_t *tm_kafka_client_new(const tm_connector_config *cfg,
                                tm_kafka_role role, char *errstr,
                                size_t errsize);

#endif
