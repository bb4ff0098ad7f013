/* The consumer's static group membership (KIP-345): a group.instance.id
 * per connector and state directory, generated once and kept in
 *
 *   STATE_DIR/CONNECTOR/member.id    "tidemark-CONNECTOR-<16 hex>\n"
 *                                    "subscription <16 hex>\n"
 *
 * so that a host restarted after a crash joins as the member it was and
 * gets its partitions back at once, instead of waiting for the broker to
 * time the dead member out (session.timeout.ms). The host lock forbids two
 * hosts on one state directory, so one id is never used twice at once.
 *
 * The second line is the fingerprint of the subscription the id joined
 * with (kafka/subscription.h). A static member that rejoins a stable
 * group gets its previous assignment back without a rebalance, whatever
 * it subscribes to now: a topic removed from the config would still be
 * read, one added (or a partition, or a topic the regex matches) never.
 * So an id is kept only while the subscription is the same; otherwise a
 * new one is taken, the group rebalances, and the old member's partitions
 * return after session.timeout.ms. A file of the first line only (written
 * before the fingerprint was kept) counts as a changed subscription. */
#ifndef TM_MEMBER_ID_H
#define TM_MEMBER_ID_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>

#include "config/connector_config.h"

#define TM_MEMBER_ID_FILE "member.id"
/* The hex digits of a subscription's fingerprint. */
#define TM_SUBSCRIPTION_HEX 16

/* Whether cfg's consumer takes its id from the state directory: static
 * membership on ($.kafka.static_membership, default true) and no
 * group.instance.id of the user's in $.kafka.properties (which wins). */
int tm_member_id_wanted(const tm_connector_config *cfg);

/* The id in member.id of the connector directory open at DIR_FD (SHOWN
 * is its path, for messages) into out. When the file is missing and
 * create is set, a new random id is written first (temporary file, fsync,
 * rename, directory fsync). A file that cannot be read or does not hold
 * exactly the id of this connector is an error, never replaced: a new id
 * would leave the old member holding the partitions until the session
 * timeout. 1 with the id, 0 missing and !create, -1 with errstr. */
int tm_member_id_get(int dir_fd, const char *shown, const char *connector,
                     int create, char *out, size_t size, char *errstr,
                     size_t errsize);

/* The id to join with under SUBSCRIPTION (a fingerprint of
 * TM_SUBSCRIPTION_HEX hex digits, or NULL when unknown): the stored one
 * when it was kept with the same fingerprint, else a new one written with
 * it (atomically, as above; *rotated set when an old id was replaced). A
 * corrupt file is an error, never replaced. 1 with the id, -1 with errstr. */
int tm_member_id_for(int dir_fd, const char *shown, const char *connector,
                     const char *subscription, char *out, size_t size,
                     int *rotated, char *errstr, size_t errsize);

/* Replaces a stored id by a new one written with SUBSCRIPTION (a
 * fingerprint, or NULL when unknown: the next start rotates once more):
 * the running consumer found partitions outside its subscription, or a
 * subscription changed while it started, so the next consumer must join
 * as a new member. 0 (also when there is no file), -1 with errstr. */
int tm_member_id_forget_subscription(int dir_fd, const char *shown,
                                     const char *connector,
                                     const char *subscription, char *errstr,
                                     size_t errsize);

/* Sets group.instance.id on a consumer's conf when tm_member_id_wanted,
 * the id of tm_member_id_for; nothing otherwise. The id is written to
 * id_out ("" when none; size >= 256). 0, or -1 with errstr. */
int tm_member_id_apply(rd_kafka_conf_t *conf, const tm_connector_config *cfg,
                       int dir_fd, const char *shown, const char *subscription,
                       char *id_out, size_t id_size, int *rotated, char *errstr,
                       size_t errsize);

#endif
