#include "kafka/group_admin.h"

#include <stdio.h>
#include <string.h>

/* One admin request's plumbing: options with the timeout, a private
 * queue for the answer. */
typedef struct admin_call {
    rd_kafka_queue_t *q;
    rd_kafka_AdminOptions_t *opt;
} admin_call;

static int call_begin(admin_call *c, rd_kafka_t *rk, rd_kafka_admin_op_t op,
                      int timeout_ms, char *errstr, size_t errsize) {
    c->q = rd_kafka_queue_new(rk);
    c->opt = rd_kafka_AdminOptions_new(rk, op);
    char why[256];
    if (!c->q || !c->opt ||
        rd_kafka_AdminOptions_set_request_timeout(c->opt, timeout_ms, why,
                                                  sizeof why) !=
            RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(errstr, errsize, "cannot set up an admin request: %s",
                 c->opt ? why : "out of memory");
        return -1;
    }
    return 0;
}

static void call_end(admin_call *c) {
    if (c->opt)
        rd_kafka_AdminOptions_destroy(c->opt);
    if (c->q)
        rd_kafka_queue_destroy(c->q);
}

/* Waits for the answer; NULL with errstr on a timeout or a request error.
 * The request's own timeout fires first; the margin only covers a broker
 * that never answers at all. */
static rd_kafka_event_t *call_wait(admin_call *c, int timeout_ms,
                                   const char *what, char *errstr,
                                   size_t errsize) {
    rd_kafka_event_t *ev = rd_kafka_queue_poll(c->q, timeout_ms + 5000);
    if (!ev) {
        snprintf(errstr, errsize, "%s: no answer from the cluster", what);
        return NULL;
    }
    if (rd_kafka_event_error(ev)) {
        snprintf(errstr, errsize, "%s: %s", what,
                 rd_kafka_event_error_string(ev));
        rd_kafka_event_destroy(ev);
        return NULL;
    }
    return ev;
}

int tm_kafka_group_describe(rd_kafka_t *rk, const char *group, int timeout_ms,
                            size_t *members, size_t *static_members,
                            char *state, size_t state_size, char *errstr,
                            size_t errsize) {
    if (static_members)
        *static_members = 0;
    char what[512];
    snprintf(what, sizeof what, "describing consumer group %s", group);
    admin_call c;
    int rc = -1;
    if (call_begin(&c, rk, RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS, timeout_ms,
                   errstr, errsize) != 0) {
        call_end(&c);
        return -1;
    }
    const char *groups[1] = {group};
    rd_kafka_DescribeConsumerGroups(rk, groups, 1, c.opt, c.q);
    rd_kafka_event_t *ev = call_wait(&c, timeout_ms, what, errstr, errsize);
    if (ev) {
        const rd_kafka_DescribeConsumerGroups_result_t *res =
            rd_kafka_event_DescribeConsumerGroups_result(ev);
        size_t n = 0;
        const rd_kafka_ConsumerGroupDescription_t **g =
            res ? rd_kafka_DescribeConsumerGroups_result_groups(res, &n) : NULL;
        const rd_kafka_error_t *gerr =
            n == 1 ? rd_kafka_ConsumerGroupDescription_error(g[0]) : NULL;
        if (n != 1) {
            snprintf(errstr, errsize, "%s: %zu results for one group", what, n);
        } else if (gerr && rd_kafka_error_code(gerr) ==
                               RD_KAFKA_RESP_ERR_GROUP_ID_NOT_FOUND) {
            *members = 0; /* never existed: nobody is in it */
            if (state)
                snprintf(state, state_size, "Unknown");
            rc = 0;
        } else if (gerr) {
            snprintf(errstr, errsize, "%s: %s", what,
                     rd_kafka_error_string(gerr));
        } else {
            *members = rd_kafka_ConsumerGroupDescription_member_count(g[0]);
            /* A static member names its group.instance.id. */
            for (size_t i = 0; static_members && i < *members; i++) {
                const rd_kafka_MemberDescription_t *m =
                    rd_kafka_ConsumerGroupDescription_member(g[0], i);
                const char *id =
                    m ? rd_kafka_MemberDescription_group_instance_id(m) : NULL;
                if (id && id[0])
                    (*static_members)++;
            }
            if (state)
                snprintf(state, state_size, "%s",
                         rd_kafka_consumer_group_state_name(
                             rd_kafka_ConsumerGroupDescription_state(g[0])));
            rc = 0;
        }
        rd_kafka_event_destroy(ev);
    }
    call_end(&c);
    return rc;
}

/* The first partition error of a group result, or the group's own. */
static int group_result_error(const rd_kafka_group_result_t *g,
                              const char *what, char *errstr, size_t errsize) {
    const rd_kafka_error_t *gerr = rd_kafka_group_result_error(g);
    if (gerr) {
        snprintf(errstr, errsize, "%s: %s", what, rd_kafka_error_string(gerr));
        return -1;
    }
    const rd_kafka_topic_partition_list_t *parts =
        rd_kafka_group_result_partitions(g);
    for (int i = 0; parts && i < parts->cnt; i++)
        if (parts->elems[i].err) {
            snprintf(errstr, errsize, "%s: %s [%d]: %s", what,
                     parts->elems[i].topic, (int)parts->elems[i].partition,
                     rd_kafka_err2str(parts->elems[i].err));
            return -1;
        }
    return 0;
}

int tm_kafka_group_committed(rd_kafka_t *rk, const char *group,
                             rd_kafka_topic_partition_list_t *list,
                             int timeout_ms, char *errstr, size_t errsize) {
    char what[512];
    snprintf(what, sizeof what, "reading the offsets of consumer group %s",
             group);
    admin_call c;
    int rc = -1;
    rd_kafka_ListConsumerGroupOffsets_t *req = NULL;
    if (call_begin(&c, rk, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS,
                   timeout_ms, errstr, errsize) != 0)
        goto out;
    if (!(req = rd_kafka_ListConsumerGroupOffsets_new(group, list))) {
        snprintf(errstr, errsize, "%s: out of memory", what);
        goto out;
    }
    rd_kafka_ListConsumerGroupOffsets(rk, &req, 1, c.opt, c.q);
    rd_kafka_event_t *ev = call_wait(&c, timeout_ms, what, errstr, errsize);
    if (!ev)
        goto out;
    const rd_kafka_ListConsumerGroupOffsets_result_t *res =
        rd_kafka_event_ListConsumerGroupOffsets_result(ev);
    size_t n = 0;
    const rd_kafka_group_result_t **g =
        res ? rd_kafka_ListConsumerGroupOffsets_result_groups(res, &n) : NULL;
    if (n != 1) {
        snprintf(errstr, errsize, "%s: %zu results for one group", what, n);
    } else if (group_result_error(g[0], what, errstr, errsize) == 0) {
        const rd_kafka_topic_partition_list_t *got =
            rd_kafka_group_result_partitions(g[0]);
        for (int i = 0; i < list->cnt; i++) {
            const rd_kafka_topic_partition_t *e =
                got ? rd_kafka_topic_partition_list_find(
                          got, list->elems[i].topic, list->elems[i].partition)
                    : NULL;
            list->elems[i].offset = e ? e->offset : RD_KAFKA_OFFSET_INVALID;
        }
        rc = 0;
    }
    rd_kafka_event_destroy(ev);
out:
    if (req)
        rd_kafka_ListConsumerGroupOffsets_destroy(req);
    call_end(&c);
    return rc;
}

int tm_kafka_group_alter_offsets(rd_kafka_t *rk, const char *group,
                                 const rd_kafka_topic_partition_list_t *offsets,
                                 int timeout_ms, char *errstr, size_t errsize) {
    char what[512];
    snprintf(what, sizeof what, "committing offsets to consumer group %s",
             group);
    admin_call c;
    int rc = -1;
    rd_kafka_AlterConsumerGroupOffsets_t *req = NULL;
    if (call_begin(&c, rk, RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS,
                   timeout_ms, errstr, errsize) != 0)
        goto out;
    if (!(req = rd_kafka_AlterConsumerGroupOffsets_new(group, offsets))) {
        snprintf(errstr, errsize, "%s: out of memory", what);
        goto out;
    }
    rd_kafka_AlterConsumerGroupOffsets(rk, &req, 1, c.opt, c.q);
    rd_kafka_event_t *ev = call_wait(&c, timeout_ms, what, errstr, errsize);
    if (!ev)
        goto out;
    const rd_kafka_AlterConsumerGroupOffsets_result_t *res =
        rd_kafka_event_AlterConsumerGroupOffsets_result(ev);
    size_t n = 0;
    const rd_kafka_group_result_t **g =
        res ? rd_kafka_AlterConsumerGroupOffsets_result_groups(res, &n) : NULL;
    if (n != 1)
        snprintf(errstr, errsize, "%s: %zu results for one group", what, n);
    else
        rc = group_result_error(g[0], what, errstr, errsize);
    rd_kafka_event_destroy(ev);
out:
    if (req)
        rd_kafka_AlterConsumerGroupOffsets_destroy(req);
    call_end(&c);
    return rc;
}
