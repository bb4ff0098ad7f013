/* Smoke test of the real broker started by scripts/kafka.sh, through
 * librdkafka.
 *
 * Proves the pieces tidemark relies on work against this broker and this
 * librdkafka:
 *   1. Admin API topic creation (4 partitions);
 *   2. an idempotent producer: 10,000 records, every delivery report OK;
 *   3. a consumer group read with rd_kafka_consumer_poll (cooperative-sticky,
 * incremental assign, session.timeout.ms=6000) where a second member joins
 * half-way, so the group rebalances: every (partition, offset) the delivery
 * reports named is seen exactly once, and the set matches the broker's
 * watermarks;
 *   4. a transactional producer that commits one transaction and aborts
 * another, read back by a read_committed consumer that sees exactly the
 * committed records;
 *   5. the debug=feature log shows MsgVer2, IdempotentProducer,
 * BrokerBalancedConsumer.
 *
 * Reads TIDEMARK_KAFKA_BOOTSTRAP; fails (exit 1) when it is unset or the broker
 * is unreachable. Never skips. */
#include <librdkafka/rdkafka.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NPART                4
#define NMSG                 10000
#define N_TXN_COMMIT         100
#define N_TXN_ABORT          50
#define FIRST_CONSUMER_SHARE 3000
#define DEADLINE_S           45.0

static const char *bootstrap;
static double t0;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kafka_smoke: FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void step(const char *what) {
    printf("kafka_smoke: [%6.2fs] %s\n", now_s() - t0, what);
    fflush(stdout);
}

/* ---- debug=feature log capture
 * -------------------------------------------------- */

static pthread_mutex_t feat_lock = PTHREAD_MUTEX_INITIALIZER;
static char feat_line[3][1024]; /* last "Updated enabled protocol features" line
                                   per client */

static void log_cb(const rd_kafka_t *rk, int level, const char *fac,
                   const char *buf) {
    (void)level;
    (void)fac;
    const char *p = strstr(buf, "Updated enabled protocol features");
    if (!p)
        return;
    int which = *(const int *)rd_kafka_opaque(rk);
    /* "... features +ApiVersion to ApiVersion" comes first (ApiVersion probe);
     * the full list after ApiVersions reads "... features to
     * MsgVer1,ApiVersion,...": prefer it */
    int full = strstr(p, "features to ") != NULL;
    pthread_mutex_lock(&feat_lock);
    if (full || !feat_line[which][0])
        snprintf(feat_line[which], sizeof feat_line[which], "%s", buf);
    pthread_mutex_unlock(&feat_lock);
}

static int has_feature(const char *line, const char *feature) {
    const char *p = strstr(line, "features");
    if (!p)
        return 0;
    p = strstr(p, " to ");
    if (!p)
        return 0;
    p += 4;
    size_t n = strlen(feature);
    while (*p) {
        size_t len = strcspn(p, ",\n ");
        if (len == n && strncmp(p, feature, n) == 0)
            return 1;
        p += len;
        if (*p != ',')
            break;
        p++;
    }
    return 0;
}

/* ---- config helpers
 * ------------------------------------------------------------- */

static void set(rd_kafka_conf_t *c, const char *k, const char *v) {
    char err[512];
    if (rd_kafka_conf_set(c, k, v, err, sizeof err) != RD_KAFKA_CONF_OK)
        fail("config %s=%s: %s", k, v, err);
}

static rd_kafka_conf_t *base_conf(void) {
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    set(c, "bootstrap.servers", bootstrap);
    set(c, "socket.connection.setup.timeout.ms", "10000");
    return c;
}

static rd_kafka_t *make(rd_kafka_type_t type, rd_kafka_conf_t *c) {
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(type, c, err, sizeof err);
    if (!rk)
        fail("rd_kafka_new: %s", err);
    return rk;
}

/* ---- admin
 * ---------------------------------------------------------------------- */

static void create_topic(rd_kafka_t *rk, const char *name, int partitions) {
    char err[512];
    rd_kafka_NewTopic_t *nt =
        rd_kafka_NewTopic_new(name, partitions, 1, err, sizeof err);
    if (!nt)
        fail("NewTopic: %s", err);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opt =
        rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_operation_timeout(opt, 20000, err, sizeof err);
    rd_kafka_AdminOptions_set_request_timeout(opt, 20000, err, sizeof err);
    rd_kafka_CreateTopics(rk, &nt, 1, opt, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    if (!ev)
        fail("CreateTopics %s: no result within 30 s (broker %s unreachable?)",
             name, bootstrap);
    if (rd_kafka_event_error(ev))
        fail("CreateTopics %s: %s", name, rd_kafka_event_error_string(ev));
    const rd_kafka_CreateTopics_result_t *res =
        rd_kafka_event_CreateTopics_result(ev);
    size_t n = 0;
    const rd_kafka_topic_result_t **tr =
        rd_kafka_CreateTopics_result_topics(res, &n);
    if (n != 1 || rd_kafka_topic_result_error(tr[0]))
        fail("CreateTopics %s: %s", name,
             n ? rd_kafka_topic_result_error_string(tr[0]) : "no result");
    rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_queue_destroy(q);
}

/* ---- idempotent produce
 * ------------------------------------------------------- */

static int32_t dr_part[NMSG];
static int64_t dr_off[NMSG];
static int dr_count, dr_errors;
static char dr_first_err[256];

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    intptr_t i = (intptr_t)m->_private;
    dr_count++;
    if (m->err) {
        if (!dr_errors++)
            snprintf(dr_first_err, sizeof dr_first_err, "%s",
                     rd_kafka_err2str(m->err));
        return;
    }
    if (i < 0 || i >= NMSG)
        return;
    dr_part[i] = m->partition;
    dr_off[i] = m->offset;
}

/* ---- consumer group
 * ------------------------------------------------------------- */

typedef struct member {
    int id;
    rd_kafka_t *rk;
    int assign_events; /* rebalance callbacks that assigned >= 1 partition */
    int revoke_events;
    int owned; /* partitions currently owned */
    long consumed;
    int64_t next[NPART];  /* last offset this member delivered + 1, -1 = none */
    long per_part[NPART]; /* records this member delivered per partition */
} member;

static unsigned char *seen[NPART];
static int64_t hw[NPART];
static long seen_total, seen_dups, seen_out_of_range;

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque) {
    member *m = opaque;
    int coop = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        if (parts->cnt > 0)
            m->assign_events++;
        m->owned += parts->cnt;
        printf("kafka_smoke: [%6.2fs] consumer %d assigned %d partition(s)%s, "
               "owns %d\n",
               now_s() - t0, m->id, parts->cnt, coop ? " (incremental)" : "",
               m->owned);
        if (coop) {
            rd_kafka_error_t *e = rd_kafka_incremental_assign(rk, parts);
            if (e)
                fail("incremental_assign: %s", rd_kafka_error_string(e));
        } else {
            rd_kafka_assign(rk, parts);
        }
    } else if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        m->revoke_events++;
        printf("kafka_smoke: [%6.2fs] consumer %d revoked %d partition(s)\n",
               now_s() - t0, m->id, parts->cnt);
        /* Commit what this member consumed from the revoked partitions before
         * giving them up, so the next owner continues exactly there (the test
         * checks no duplicates). The test tracks positions itself (last
         * delivered offset + 1), as the host will. */
        if (!rd_kafka_assignment_lost(rk)) {
            rd_kafka_topic_partition_list_t *c =
                rd_kafka_topic_partition_list_new(parts->cnt);
            for (int i = 0; i < parts->cnt; i++) {
                int32_t p = parts->elems[i].partition;
                if (p >= 0 && p < NPART && m->next[p] >= 0) {
                    rd_kafka_topic_partition_list_add(c, parts->elems[i].topic,
                                                      p)
                        ->offset = m->next[p];
                    m->next[p] = -1;
                }
            }
            if (c->cnt) {
                rd_kafka_resp_err_t ce = rd_kafka_commit(rk, c, 0);
                if (ce)
                    fail("commit on revoke: %s", rd_kafka_err2str(ce));
            }
            rd_kafka_topic_partition_list_destroy(c);
        }
        m->owned -= parts->cnt;
        if (coop) {
            rd_kafka_error_t *e = rd_kafka_incremental_unassign(rk, parts);
            if (e)
                fail("incremental_unassign: %s", rd_kafka_error_string(e));
        } else {
            rd_kafka_assign(rk, NULL);
        }
    } else {
        fail("rebalance error: %s", rd_kafka_err2str(err));
    }
}

static int feat_id[3] = {0, 1, 2};

static rd_kafka_t *make_group_consumer(member *m, const char *group,
                                       int feature_slot) {
    rd_kafka_conf_t *c = base_conf();
    set(c, "group.id", group);
    set(c, "session.timeout.ms", "6000");
    set(c, "heartbeat.interval.ms", "1000");
    set(c, "auto.offset.reset", "earliest");
    set(c, "enable.auto.commit", "false");
    const char *strategy =
        getenv("TM_SMOKE_ASSIGNOR"); /* for experiments only */
    set(c, "partition.assignment.strategy",
        strategy && *strategy ? strategy : "cooperative-sticky");
    const char *dbg = getenv("TM_SMOKE_CONSUMER_DEBUG");
    if (dbg && *dbg)
        set(c, "debug", dbg);
    if (feature_slot >= 0) {
        set(c, "debug", "feature");
        rd_kafka_conf_set_log_cb(c, log_cb);
        rd_kafka_conf_set_opaque(c, &feat_id[feature_slot]);
        /* rebalance_cb's opaque is the conf opaque; keep the member via a
         * separate path */
    }
    rd_kafka_conf_set_rebalance_cb(c, rebalance_cb);
    if (feature_slot < 0)
        rd_kafka_conf_set_opaque(c, m);
    for (int p = 0; p < NPART; p++)
        m->next[p] = -1;
    m->rk = make(RD_KAFKA_CONSUMER, c);
    rd_kafka_poll_set_consumer(m->rk);
    return m->rk;
}

static void poll_one(member *m, rd_kafka_message_t *msg, const char *topic);

/* Waits up to timeout_ms for the first message, then drains what is already
 * queued (one message per call would throttle the two-member loop to ~30
 * records/s). */
static void poll_member(member *m, int timeout_ms, const char *topic) {
    rd_kafka_message_t *msg = rd_kafka_consumer_poll(m->rk, timeout_ms);
    for (int n = 0; msg && n < 5000; n++) {
        poll_one(m, msg, topic);
        msg = rd_kafka_consumer_poll(m->rk, 0);
    }
    if (msg)
        poll_one(m, msg, topic);
}

static void poll_one(member *m, rd_kafka_message_t *msg, const char *topic) {
    if (msg->err) {
        if (msg->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            fprintf(stderr, "kafka_smoke: consumer %d: %s\n", m->id,
                    rd_kafka_message_errstr(msg));
        rd_kafka_message_destroy(msg);
        return;
    }
    if (strcmp(rd_kafka_topic_name(msg->rkt), topic) != 0)
        fail("message from unexpected topic");
    int32_t p = msg->partition;
    int64_t o = msg->offset;
    if (p < 0 || p >= NPART || o < 0 || o >= hw[p]) {
        seen_out_of_range++;
    } else if (seen[p][o]++) {
        seen_dups++;
    } else {
        seen_total++;
    }
    m->consumed++;
    if (p >= 0 && p < NPART) {
        m->next[p] = o + 1;
        m->per_part[p]++;
    }
    rd_kafka_message_destroy(msg);
}

int main(void) {
    t0 = now_s();
    setvbuf(stdout, NULL, _IOLBF, 0);
    bootstrap = getenv("TIDEMARK_KAFKA_BOOTSTRAP");
    if (!bootstrap || !*bootstrap)
        fail("TIDEMARK_KAFKA_BOOTSTRAP is not set (start the broker: "
             "scripts/kafka.sh start; . scripts/env.sh)");
    printf("kafka_smoke: librdkafka %s, broker %s\n", rd_kafka_version_str(),
           bootstrap);

    char topic[128], txn_topic[128], group[128], txn_id[128];
    unsigned tag = (unsigned)getpid() ^ (unsigned)time(NULL);
    snprintf(topic, sizeof topic, "tm-smoke-%08x", tag);
    snprintf(txn_topic, sizeof txn_topic, "tm-smoke-txn-%08x", tag);
    snprintf(group, sizeof group, "tm-smoke-group-%08x", tag);
    snprintf(txn_id, sizeof txn_id, "tm-smoke-txid-%08x", tag);

    /* 1. producer (idempotent, with the feature log) + admin on the same handle
     */
    rd_kafka_conf_t *pc = base_conf();
    set(pc, "enable.idempotence", "true");
    set(pc, "linger.ms", "5");
    /* librdkafka 2.0.2 logs the full "Updated enabled protocol features to ..."
     * line only when debug also includes "broker"; with "feature" alone only
     * the early
     * "+ApiVersion to ApiVersion" line appears (checked with kcat -d). */
    set(pc, "debug", "feature,broker");
    rd_kafka_conf_set_log_cb(pc, log_cb);
    rd_kafka_conf_set_opaque(pc, &feat_id[0]);
    rd_kafka_conf_set_dr_msg_cb(pc, dr_cb);
    rd_kafka_t *prod = make(RD_KAFKA_PRODUCER, pc);

    create_topic(prod, topic, NPART);
    create_topic(prod, txn_topic, 1);
    step("topics created");

    for (intptr_t i = 0; i < NMSG; i++) {
        char key[32], val[64];
        int kl = snprintf(key, sizeof key, "key-%" PRIdPTR, i);
        int vl = snprintf(val, sizeof val, "{\"seq\":%" PRIdPTR "}", i);
        dr_part[i] = -1;
        dr_off[i] = -1;
        rd_kafka_resp_err_t e;
        while ((e = rd_kafka_producev(prod, RD_KAFKA_V_TOPIC(topic),
                                      RD_KAFKA_V_KEY(key, (size_t)kl),
                                      RD_KAFKA_V_VALUE(val, (size_t)vl),
                                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                      RD_KAFKA_V_OPAQUE((void *)i),
                                      RD_KAFKA_V_END)) ==
               RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(prod, 50);
        if (e)
            fail("producev: %s", rd_kafka_err2str(e));
        rd_kafka_poll(prod, 0);
    }
    if (rd_kafka_flush(prod, 30000))
        fail("flush: %d records still undelivered after 30 s",
             rd_kafka_outq_len(prod));
    if (dr_count != NMSG)
        fail("%d delivery reports, expected %d", dr_count, NMSG);
    if (dr_errors)
        fail("%d delivery errors, first: %s", dr_errors, dr_first_err);
    step("10000 records produced, 10000 delivery reports OK");

    /* watermarks vs delivery reports: per partition the delivered offsets must
     * be exactly [low, high) (idempotent producer, fresh topic: dense, no
     * control records) */
    long per_part[NPART] = {0};
    for (int p = 0; p < NPART; p++) {
        int64_t lo = -1, hi = -1;
        rd_kafka_resp_err_t e =
            rd_kafka_query_watermark_offsets(prod, topic, p, &lo, &hi, 10000);
        if (e)
            fail("query_watermark_offsets p%d: %s", p, rd_kafka_err2str(e));
        if (lo != 0)
            fail("partition %d low watermark %" PRId64 ", expected 0", p, lo);
        hw[p] = hi;
        seen[p] = calloc((size_t)(hi > 0 ? hi : 1), 1);
        if (!seen[p])
            fail("out of memory");
    }
    for (int i = 0; i < NMSG; i++) {
        int32_t p = dr_part[i];
        if (p < 0 || p >= NPART)
            fail("record %d delivered to bad partition %d", i, p);
        if (dr_off[i] < 0 || dr_off[i] >= hw[p])
            fail("record %d offset %" PRId64 " outside [0,%" PRId64 ")", i,
                 dr_off[i], hw[p]);
        if (seen[p][dr_off[i]]++)
            fail("two delivery reports name p%d offset %" PRId64, p, dr_off[i]);
        per_part[p]++;
    }
    for (int p = 0; p < NPART; p++) {
        if (per_part[p] != hw[p])
            fail("partition %d: %ld delivered, high watermark %" PRId64, p,
                 per_part[p], hw[p]);
        if (per_part[p] == 0)
            fail("partition %d received no records (partitioner?)", p);
        memset(seen[p], 0, (size_t)hw[p]);
    }
    printf("kafka_smoke: watermarks p0..p3 high = %" PRId64 " %" PRId64
           " %" PRId64 " %" PRId64 " (sum %d)\n",
           hw[0], hw[1], hw[2], hw[3], NMSG);

    /* 3. consumer group with a second member joining */
    member a = {.id = 1}, b = {.id = 2};
    make_group_consumer(&a, group, -1);
    make_group_consumer(&b, group, -1);
    rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(sub, topic, RD_KAFKA_PARTITION_UA);
    if (rd_kafka_subscribe(a.rk, sub))
        fail("subscribe a");
    double deadline = now_s() + DEADLINE_S;
    while (a.consumed < FIRST_CONSUMER_SHARE && now_s() < deadline) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(a.rk, 100);
        if (msg)
            poll_one(&a, msg, topic);
    }
    if (a.consumed < FIRST_CONSUMER_SHARE)
        fail("consumer 1 consumed only %ld records in %.0f s", a.consumed,
             DEADLINE_S);
    step("consumer 1 read its first share, consumer 2 joins the group");
    if (rd_kafka_subscribe(b.rk, sub))
        fail("subscribe b");
    /* Until consumer 2 owns partitions, consumer 1 takes at most one record per
     * 10 ms (it must keep polling to serve its revoke), so records are left for
     * consumer 2. */
    while (b.owned == 0 && now_s() < deadline) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(a.rk, 10);
        if (msg)
            poll_one(&a, msg, topic);
        poll_member(&b, 10, topic);
    }
    while (now_s() < deadline) {
        poll_member(&a, 20, topic);
        poll_member(&b, 20, topic);
        if (seen_total == NMSG && a.assign_events && b.assign_events &&
            a.owned > 0 && b.owned > 0)
            break;
    }
    /* a short drain: anything arriving now would be a duplicate */
    for (int i = 0; i < 10; i++) {
        poll_member(&a, 20, topic);
        poll_member(&b, 20, topic);
    }
    rd_kafka_topic_partition_list_destroy(sub);
    printf("kafka_smoke: consumer 1 read %ld (assign events %d, revoke events "
           "%d, owns %d); "
           "consumer 2 read %ld (assign events %d, owns %d)\n",
           a.consumed, a.assign_events, a.revoke_events, a.owned, b.consumed,
           b.assign_events, b.owned);
    for (int p = 0; p < NPART; p++)
        printf("kafka_smoke:   p%d: consumer 1 read %ld (next %" PRId64
               "), consumer 2 read %ld (next %" PRId64 ")\n",
               p, a.per_part[p], a.next[p], b.per_part[p], b.next[p]);
    if (!a.assign_events || !b.assign_events)
        fail(
            "both consumers must get an assignment (rebalance did not happen)");
    if (!b.consumed)
        fail("consumer 2 read no records after the rebalance");
    if (a.owned + b.owned != NPART || !a.owned || !b.owned)
        fail("after the rebalance the members own %d + %d partitions, expected "
             "%d split",
             a.owned, b.owned, NPART);
    if (seen_dups)
        fail("%ld (partition, offset) pairs delivered more than once",
             seen_dups);
    if (seen_out_of_range)
        fail("%ld records outside the produced offsets", seen_out_of_range);
    if (seen_total != NMSG) {
        for (int p = 0; p < NPART; p++)
            for (int64_t o = 0; o < hw[p]; o++)
                if (!seen[p][o])
                    fail("missing p%d offset %" PRId64 " (seen %ld of %d)", p,
                         o, seen_total, NMSG);
    }
    step("group read: every (partition, offset) exactly once, equal to the "
         "delivery reports");
    rd_kafka_consumer_close(a.rk);
    rd_kafka_consumer_close(b.rk);
    rd_kafka_destroy(a.rk);
    rd_kafka_destroy(b.rk);

    /* 4. transactions: commit one, abort one; read_committed sees only the
     * first */
    rd_kafka_conf_t *tc = base_conf();
    set(tc, "transactional.id", txn_id);
    set(tc, "transaction.timeout.ms", "30000");
    rd_kafka_t *tp = make(RD_KAFKA_PRODUCER, tc);
    rd_kafka_error_t *te;
    if ((te = rd_kafka_init_transactions(tp, 30000)))
        fail("init_transactions: %s", rd_kafka_error_string(te));
    for (int round = 0; round < 2; round++) {
        int n = round == 0 ? N_TXN_COMMIT : N_TXN_ABORT;
        if ((te = rd_kafka_begin_transaction(tp)))
            fail("begin_transaction: %s", rd_kafka_error_string(te));
        for (int i = 0; i < n; i++) {
            char val[64];
            int vl = snprintf(val, sizeof val, "%s-%d",
                              round == 0 ? "committed" : "aborted", i);
            rd_kafka_resp_err_t e = rd_kafka_producev(
                tp, RD_KAFKA_V_TOPIC(txn_topic), RD_KAFKA_V_PARTITION(0),
                RD_KAFKA_V_VALUE(val, (size_t)vl),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
            if (e)
                fail("transactional producev: %s", rd_kafka_err2str(e));
        }
        if (round == 0) {
            if ((te = rd_kafka_commit_transaction(tp, 30000)))
                fail("commit_transaction: %s", rd_kafka_error_string(te));
        } else {
            if (rd_kafka_flush(tp, 30000))
                fail("flush before abort");
            if ((te = rd_kafka_abort_transaction(tp, 30000)))
                fail("abort_transaction: %s", rd_kafka_error_string(te));
        }
    }
    rd_kafka_destroy(tp);
    step("transaction 1 committed (100 records), transaction 2 aborted (50 "
         "records)");

    rd_kafka_conf_t *rc = base_conf();
    char rgroup[160];
    snprintf(rgroup, sizeof rgroup, "%s-rc", group);
    set(rc, "group.id", rgroup);
    set(rc, "isolation.level", "read_committed");
    set(rc, "enable.partition.eof", "true");
    set(rc, "enable.auto.commit", "false");
    set(rc, "debug", "feature,broker");
    rd_kafka_conf_set_log_cb(rc, log_cb);
    rd_kafka_conf_set_opaque(rc, &feat_id[1]);
    rd_kafka_t *rcons = make(RD_KAFKA_CONSUMER, rc);
    /* rcons is read_committed, so this "high watermark" is the last stable
     * offset: it stays at 101 (the start of the aborted transaction) until
     * the coordinator has written the abort's control marker, which it does
     * after abort_transaction returned (KIP-98 writes markers
     * asynchronously). On a loaded machine the first query came too early
     * (CI: "txn topic high watermark 101, expected 152"): wait for it,
     * bounded, instead of reading it once. */
    int64_t tlo = -1, thi = -1;
    const int64_t want_hw = N_TXN_COMMIT + N_TXN_ABORT + 2;
    double hw_start = now_s(), hw_deadline = hw_start + 20;
    for (;;) {
        rd_kafka_resp_err_t we = rd_kafka_query_watermark_offsets(
            rcons, txn_topic, 0, &tlo, &thi, 10000);
        if (we)
            fail("txn topic watermarks: %s", rd_kafka_err2str(we));
        if (thi >= want_hw || now_s() >= hw_deadline)
            break;
        struct timespec pause = {0, 100 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    printf("kafka_smoke: txn topic high watermark %" PRId64 " after %.0f ms\n",
           thi, (now_s() - hw_start) * 1000);
    rd_kafka_topic_partition_list_t *as = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(as, txn_topic, 0)->offset =
        RD_KAFKA_OFFSET_BEGINNING;
    if (rd_kafka_assign(rcons, as))
        fail("assign read_committed consumer");
    rd_kafka_topic_partition_list_destroy(as);
    int got = 0, bad = 0, eof = 0;
    double tdeadline = now_s() + 20;
    while (!eof && now_s() < tdeadline) {
        rd_kafka_message_t *msg = rd_kafka_consumer_poll(rcons, 200);
        if (!msg)
            continue;
        if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            eof = 1;
        } else if (msg->err) {
            fprintf(stderr, "kafka_smoke: read_committed: %s\n",
                    rd_kafka_message_errstr(msg));
        } else {
            char want[64];
            snprintf(want, sizeof want, "committed-%d", got);
            if (msg->len != strlen(want) ||
                memcmp(msg->payload, want, msg->len) != 0)
                bad++;
            got++;
        }
        rd_kafka_message_destroy(msg);
    }
    rd_kafka_consumer_close(rcons);
    rd_kafka_destroy(rcons);
    printf("kafka_smoke: read_committed consumer saw %d records (%d "
           "unexpected), txn topic high watermark %" PRId64
           " (records + 2 control markers = %d)\n",
           got, bad, thi, N_TXN_COMMIT + N_TXN_ABORT + 2);
    if (!eof)
        fail("read_committed consumer did not reach the end within 20 s");
    if (got != N_TXN_COMMIT || bad)
        fail("read_committed saw %d records (%d unexpected), expected exactly "
             "the %d committed",
             got, bad, N_TXN_COMMIT);
    if (thi != N_TXN_COMMIT + N_TXN_ABORT + 2)
        fail("txn topic high watermark %" PRId64 ", expected %d", thi,
             N_TXN_COMMIT + N_TXN_ABORT + 2);
    step("read_committed: exactly the committed transaction");

    /* 5. protocol features */
    rd_kafka_destroy(prod);
    const char *want[] = {"MsgVer2", "IdempotentProducer",
                          "BrokerBalancedConsumer"};
    pthread_mutex_lock(&feat_lock);
    for (int s = 0; s < 2; s++) {
        const char *who = s == 0 ? "producer" : "consumer";
        if (!feat_line[s][0])
            fail("%s: no 'Updated enabled protocol features' line in the "
                 "debug=feature log",
                 who);
        printf("kafka_smoke: %s feature log: %s\n", who, feat_line[s]);
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
            if (!has_feature(feat_line[s], want[k]))
                fail("%s: feature %s not enabled", who, want[k]);
    }
    pthread_mutex_unlock(&feat_lock);

    for (int p = 0; p < NPART; p++)
        free(seen[p]);
    const char *strategy = getenv("TM_SMOKE_ASSIGNOR");
    printf(
        "kafka_smoke: PASS in %.1f s: 10000 idempotent records exactly once "
        "through a rebalancing group "
        "(%s), txn commit/abort isolated, features MsgVer2 IdempotentProducer "
        "BrokerBalancedConsumer enabled\n",
        now_s() - t0, strategy && *strategy ? strategy : "cooperative-sticky");
    return 0;
}
