/* The consumer group seen through the Admin API: who is in it, and its
 * committed offsets. Only the CLI's offline views use it (offsets, its
 * --reset-to); the run loop never reads group offsets for correctness. */
#ifndef TM_KAFKA_GROUP_ADMIN_H
#define TM_KAFKA_GROUP_ADMIN_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>

/* The group's state and how many members it has right now, and how many
 * of them are static (they have a group.instance.id: they stay in the
 * group after their host stopped, until the session timeout). A group the
 * cluster does not know is reported with 0 members (state "Dead" or
 * "Unknown"). 0, or -1 with errstr naming the group. static_members and
 * state may be NULL. */
int tm_kafka_group_describe(rd_kafka_t *rk, const char *group, int timeout_ms,
                            size_t *members, size_t *static_members,
                            char *state, size_t state_size, char *errstr,
                            size_t errsize);

/* The group's committed offsets of the partitions in LIST, written into
 * each element's offset (RD_KAFKA_OFFSET_INVALID when none is committed).
 * 0, or -1 with errstr. */
int tm_kafka_group_committed(rd_kafka_t *rk, const char *group,
                             rd_kafka_topic_partition_list_t *list,
                             int timeout_ms, char *errstr, size_t errsize);

/* Commits each element's offset of OFFSETS to the group (the broker
 * refuses while the group has active members). 0, or -1 with errstr
 * naming the first partition refused. */
int tm_kafka_group_alter_offsets(rd_kafka_t *rk, const char *group,
                                 const rd_kafka_topic_partition_list_t *offsets,
                                 int timeout_ms, char *errstr, size_t errsize);

#endif
