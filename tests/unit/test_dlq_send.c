/* tm_dlq_send (kafka/dead_letter_producer.h) against what librdkafka does
 * by itself, with no broker to reach (a closed port): its dead letters
 * stay queued, so the send's outcome is decided by the producer alone.
 *   - librdkafka raises a fatal error on the (idempotent) producer, which
 *     purges what is queued: the send must fail, never report the batch's
 *     dead letters delivered (its batch would be committed without them);
 *   - the wait ends (left_ms gives 0): the send fails, saying how many were
 *     confirmed;
 *   - the batch's next attempt goes on from the last (counted through a
 *     wrapped rd_kafka_producev). */
#include <check.h>
#include <librdkafka/rdkafka.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "check_main.h"
#include "config_ok.h"
#include "config/connector_config.h"
#include "kafka/dead_letter_producer.h"
#include "services/clock.h"

/* A loopback port nobody listens on: bound, never listened to. */
static int closed_port(int *fd) {
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(*fd, 0);
    ck_assert_int_eq(bind(*fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(*fd, (struct sockaddr *)&a, &len), 0);
    return ntohs(a.sin_port);
}

static tm_connector_config *connector(int port) {
    char text[1024];
    snprintf(text, sizeof text,
             "{\"name\":\"c\",\"kafka\":{\"bootstrap_servers\":"
             "\"127.0.0.1:%d\",\"topics\":[\"t\"]},"
             "\"dead_letters\":{\"topic\":\"dlq\"},"
             "\"sink\":{\"plugin\":\"sqlite\"},\"mapping\":{\"mode\":\"raw\"}}",
             port);
    return tm_test_config_ok(text, "c.json");
}

/* A batch of one range [0, 3) whose three records are dead letters. */
typedef struct one_batch {
    tm_batch b;
    tm_range range;
    tm_dead_letter dl[3];
} one_batch;

static void batch_of_dead_letters(one_batch *ob) {
    memset(ob, 0, sizeof *ob);
    ob->range = (tm_range){.struct_size = sizeof(tm_range),
                           .topic = "t",
                           .partition = 0,
                           .start_offset = 0,
                           .end_offset = 3,
                           .epoch = 1};
    for (int i = 0; i < 3; i++)
        ob->dl[i] = (tm_dead_letter){.struct_size = sizeof(tm_dead_letter),
                                     .range = 0,
                                     .offset = i,
                                     .reason = TM_DL_PARSE_ERROR,
                                     .value = "{bad",
                                     .value_len = 4};
    ob->b = (tm_batch){.struct_size = sizeof(tm_batch),
                       .batch_id = "b-1",
                       .ranges = &ob->range,
                       .nranges = 1,
                       .dead_letters = ob->dl,
                       .ndead_letters = 3};
}

/* left_ms: the wait's end, as a monotonic time. */
static int64_t until(void *ctx) {
    return *(int64_t *)ctx - tm_clock_mono_ms();
}

/* rd_kafka_flush as the host's code calls it (linked with
 * --wrap=rd_kafka_flush): while armed, the first call raises a fatal error
 * on the producer before flushing, as librdkafka does by itself when the
 * broker refuses the idempotent producer (a principal without
 * IdempotentWrite): what is queued is purged. */
static int arm_fatal, raised;

rd_kafka_resp_err_t __real_rd_kafka_flush(rd_kafka_t *rk, int timeout_ms);
rd_kafka_resp_err_t __wrap_rd_kafka_flush(rd_kafka_t *rk, int timeout_ms);

rd_kafka_resp_err_t __wrap_rd_kafka_flush(rd_kafka_t *rk, int timeout_ms) {
    if (arm_fatal && !raised) {
        raised = 1;
        /* the three still queued (with librdkafka's own requests and
         * events, also counted here): no broker could take them */
        ck_assert_int_ge(rd_kafka_outq_len(rk), 3);
        ck_assert_int_eq(
            rd_kafka_test_fatal_error(
                rk, RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED, "test"),
            RD_KAFKA_RESP_ERR_NO_ERROR);
    }
    return __real_rd_kafka_flush(rk, timeout_ms);
}

/* rd_kafka_poll as the host's code calls it (--wrap=rd_kafka_poll):
 * while held it serves nothing, as when the reports of what a purge took
 * come after the purge's own poll (librdkafka enqueues them from its
 * threads): they are served by the next flush, of the next batch. */
static int hold_poll;

int __real_rd_kafka_poll(rd_kafka_t *rk, int timeout_ms);
int __wrap_rd_kafka_poll(rd_kafka_t *rk, int timeout_ms);

int __wrap_rd_kafka_poll(rd_kafka_t *rk, int timeout_ms) {
    return hold_poll ? 0 : __real_rd_kafka_poll(rk, timeout_ms);
}

/* rd_kafka_producev as the host's code calls it (--wrap): counted. */
static int produced;

rd_kafka_resp_err_t __wrap_rd_kafka_producev(rd_kafka_t *rk, ...);

/* The host calls it with its own fixed list of arguments (topic, key,
 * value, flags, headers, opaque): passed on as they came. */
rd_kafka_resp_err_t __wrap_rd_kafka_producev(rd_kafka_t *rk, ...) {
    va_list ap;
    va_start(ap, rk);
    rd_kafka_vu_t vus[8];
    size_t n = 0;
    for (;;) {
        rd_kafka_vtype_t t = va_arg(ap, rd_kafka_vtype_t);
        ck_assert_int_lt(n, 8);
        vus[n].vtype = t;
        if (t == RD_KAFKA_VTYPE_END)
            break;
        switch (t) {
        case RD_KAFKA_VTYPE_TOPIC:
            vus[n].u.cstr = va_arg(ap, const char *);
            break;
        case RD_KAFKA_VTYPE_KEY:
        case RD_KAFKA_VTYPE_VALUE:
            vus[n].u.mem.ptr = va_arg(ap, void *);
            vus[n].u.mem.size = va_arg(ap, size_t);
            break;
        case RD_KAFKA_VTYPE_MSGFLAGS: vus[n].u.i = va_arg(ap, int); break;
        case RD_KAFKA_VTYPE_HEADERS:
            vus[n].u.headers = va_arg(ap, rd_kafka_headers_t *);
            break;
        case RD_KAFKA_VTYPE_OPAQUE: vus[n].u.ptr = va_arg(ap, void *); break;
        default: ck_abort_msg("an argument the test does not pass on: %d", t);
        }
        n++;
    }
    va_end(ap);
    produced++;
    rd_kafka_error_t *e = rd_kafka_produceva(rk, vus, n);
    rd_kafka_resp_err_t err = e ? rd_kafka_error_code(e) : 0;
    if (e)
        rd_kafka_error_destroy(e);
    return err;
}

/* Sends the three dead letters, waiting WAIT_MS at most; the result, with
 * the message in why. */
static int send_three(int fatal, int64_t wait_ms, char *why, size_t size) {
    int fd;
    tm_connector_config *cfg = connector(closed_port(&fd));
    tm_dead_letter_producer *q = tm_dlq_new(cfg, why, size);
    ck_assert_msg(q != NULL, "%s", why);
    one_batch ob;
    batch_of_dead_letters(&ob);
    arm_fatal = fatal;
    raised = 0;
    int64_t end = tm_clock_mono_ms() + wait_ms;
    int rc = tm_dlq_send(q, &ob.b, NULL, until, &end, why, size);
    ck_assert_msg(!fatal || raised,
                  "inconclusive: the send never flushed, so no fatal error "
                  "was raised (returned %d: %s)",
                  rc, why);
    tm_dlq_free(q);
    tm_config_free(cfg);
    close(fd);
    return rc;
}

START_TEST(fatal_error_purges_are_no_delivery) {
    char why[1024] = "";
    int rc = send_three(1, 2000, why, sizeof why);
    ck_assert_msg(rc != 0,
                  "the producer's fatal error purged the 3 dead letters, "
                  "yet the send reported them delivered");
    ck_assert_msg(strstr(why, "3 dead letter(s)") != NULL, "%s", why);
}
END_TEST

START_TEST(wait_ends_without_a_broker) {
    char why[1024] = "";
    int64_t t0 = tm_clock_mono_ms();
    int rc = send_three(0, 300, why, sizeof why);
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(
        strstr(why, "3 dead letter(s) produced to dlq, 0 confirmed") != NULL,
        "%s", why);
    ck_assert_msg(tm_clock_mono_ms() - t0 < 5000, "the send took %lld ms",
                  (long long)(tm_clock_mono_ms() - t0));
}
END_TEST

/* A wait that ends leaves the dead letters on their way: the batch's next
 * attempt waits for them and produces none again (a topic slower than
 * one attempt's wait would otherwise get them all again at every
 * attempt, never all confirmed); a new producer (after a fatal error)
 * produces again those its predecessor had on their way; the batch
 * forgotten (given up), its next delivery produces all three again. */
START_TEST(attempts_go_on_from_the_last) {
    char why[1024] = "";
    int fd;
    tm_connector_config *cfg = connector(closed_port(&fd));
    tm_dead_letter_producer *q = tm_dlq_new(cfg, why, sizeof why);
    ck_assert_msg(q != NULL, "%s", why);
    one_batch ob;
    batch_of_dead_letters(&ob);
    arm_fatal = 0;
    int64_t end = tm_clock_mono_ms() + 200;
    produced = 0;
    ck_assert_int_ne(tm_dlq_send(q, &ob.b, NULL, until, &end, why, sizeof why),
                     0);
    ck_assert_msg(produced == 3, "first attempt: %d produced", produced);
    ck_assert_msg(strstr(why, "(3 still on their way)") != NULL, "%s", why);

    end = tm_clock_mono_ms() + 200;
    produced = 0;
    ck_assert_int_ne(tm_dlq_send(q, &ob.b, NULL, until, &end, why, sizeof why),
                     0);
    ck_assert_msg(produced == 0,
                  "the second attempt produced %d dead letters again that "
                  "were still on their way",
                  produced);

    ck_assert_int_eq(tm_dlq_renew(q, why, sizeof why), 0);
    end = tm_clock_mono_ms() + 200;
    produced = 0;
    ck_assert_int_ne(tm_dlq_send(q, &ob.b, NULL, until, &end, why, sizeof why),
                     0);
    ck_assert_msg(produced == 3,
                  "after the producer was made again: %d produced, expected "
                  "the 3 the old one had on their way",
                  produced);

    tm_dlq_forget(q);
    end = tm_clock_mono_ms() + 200;
    produced = 0;
    ck_assert_int_ne(tm_dlq_send(q, &ob.b, NULL, until, &end, why, sizeof why),
                     0);
    ck_assert_msg(produced == 3, "after the batch was forgotten: %d produced",
                  produced);
    tm_dlq_free(q);
    tm_config_free(cfg);
    close(fd);
}
END_TEST

/* A batch forgotten (given up) with its dead letters on their way: their
 * purge's reports, served late, during the next batch's delivery, are
 * never taken for the next batch's own (each message's opaque is the
 * batch's base plus its index, and the base moves past every batch
 * forgotten). Taken for them, the next batch's dead letters would count
 * as failed though still on their way, and be produced again at its next
 * attempt: twice in the topic. */
START_TEST(late_reports_of_a_forgotten_batch) {
    char why[1024] = "";
    int fd;
    tm_connector_config *cfg = connector(closed_port(&fd));
    tm_dead_letter_producer *q = tm_dlq_new(cfg, why, sizeof why);
    ck_assert_msg(q != NULL, "%s", why);
    one_batch a, b;
    batch_of_dead_letters(&a);
    batch_of_dead_letters(&b);
    b.b.batch_id = "b-2";
    arm_fatal = 0;
    int64_t end = tm_clock_mono_ms() + 200;
    ck_assert_int_ne(tm_dlq_send(q, &a.b, NULL, until, &end, why, sizeof why),
                     0);
    ck_assert_msg(strstr(why, "(3 still on their way)") != NULL, "%s", why);
    hold_poll = 1;
    tm_dlq_forget(q); /* purged; the reports wait */
    hold_poll = 0;
    end = tm_clock_mono_ms() + 300;
    produced = 0;
    ck_assert_int_ne(tm_dlq_send(q, &b.b, NULL, until, &end, why, sizeof why),
                     0);
    ck_assert_msg(produced == 3, "batch b-2: %d produced", produced);
    ck_assert_msg(strstr(why, "(3 still on their way)") != NULL,
                  "batch b-2 after the late reports of b-1's purge: %s", why);
    end = tm_clock_mono_ms() + 200;
    produced = 0;
    ck_assert_int_ne(tm_dlq_send(q, &b.b, NULL, until, &end, why, sizeof why),
                     0);
    ck_assert_msg(produced == 0,
                  "batch b-2's next attempt produced %d dead letters again "
                  "that were still on their way",
                  produced);
    tm_dlq_free(q);
    tm_config_free(cfg);
    close(fd);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("dlq_send");
    TCase *tc = tcase_create("dlq_send");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, fatal_error_purges_are_no_delivery);
    tcase_add_test(tc, wait_ends_without_a_broker);
    tcase_add_test(tc, attempts_go_on_from_the_last);
    tcase_add_test(tc, late_reports_of_a_forgotten_batch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
