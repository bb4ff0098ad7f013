/* The ThreadSanitizer build's check that the suppression of librdkafka's
 * own reports leaves ours in (tsan.sees_callback_race).
 *
 * librdkafka calls its log callback on its own threads (a broker thread
 * that fails to connect), as it calls the host's (host/kafka/kafka_conf.c,
 * consumer.c). Such a report has librdkafka's frames under our callback,
 * and the thread it names was made by librdkafka: a suppression of every
 * report with a librdkafka frame hides it.
 *
 * The probe: a producer whose one broker refuses connections (a port this
 * process holds bound but does not listen on, so no one else answers
 * there) logs from its broker thread. Once the main thread has made its
 * last librdkafka call, it arms the callback; the callback, on a thread
 * that is not main, writes a plain global and says so through a relaxed
 * atomic (which orders nothing for the sanitizer), and then the main
 * thread writes the global too, with no lock: the sanitizer must report
 * the race. A callback that never ran on librdkafka's thread makes the
 * probe say "inconclusive" and fail. */
#include <arpa/inet.h>
#include <librdkafka/rdkafka.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* How long the main thread waits for the callback on librdkafka's thread:
 * a bound for a stuck probe, not a timing the test depends on. */
#define WAIT_MS 60000

static pthread_t main_thread;
static atomic_int armed;
static atomic_int fired;
static int shared; /* written by both threads without a lock: the race */

static void log_cb(const rd_kafka_t *rk, int level, const char *fac,
                   const char *buf) {
    (void)rk;
    (void)level;
    (void)fac;
    (void)buf;
    if (pthread_equal(pthread_self(), main_thread) ||
        !atomic_load_explicit(&armed, memory_order_relaxed))
        return;
    shared++;
    atomic_store_explicit(&fired, 1, memory_order_relaxed);
}

/* A TCP port of 127.0.0.1 bound by this process and not listened on:
 * connecting to it is refused. Its socket in *fd; 0, or -1. */
static int refusing_port(int *fd, int *port) {
    *fd = socket(AF_INET, SOCK_STREAM, 0);
    if (*fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(*fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(*fd, (struct sockaddr *)&a, &len) != 0) {
        close(*fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return 0;
}

static int set(rd_kafka_conf_t *conf, const char *name, const char *value) {
    char why[256];
    if (rd_kafka_conf_set(conf, name, value, why, sizeof why) ==
        RD_KAFKA_CONF_OK)
        return 0;
    fprintf(stderr, "callback_probe: %s: %s\n", name, why);
    return -1;
}

static rd_kafka_t *producer(int port) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (!conf)
        return NULL;
    char servers[64];
    snprintf(servers, sizeof servers, "127.0.0.1:%d", port);
    rd_kafka_conf_set_log_cb(conf, log_cb);
    /* Debug logs of the broker thread too, in case librdkafka ever stops
     * logging a refused connection. */
    if (set(conf, "bootstrap.servers", servers) != 0 ||
        set(conf, "debug", "broker") != 0 ||
        set(conf, "message.timeout.ms", "1000") != 0) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    char why[256];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof why);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        fprintf(stderr, "callback_probe: %s\n", why);
    }
    return rk;
}

static long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

int main(void) {
    main_thread = pthread_self();
    int fd, port;
    if (refusing_port(&fd, &port) != 0) {
        perror("callback_probe: socket");
        return 2;
    }
    rd_kafka_t *rk = producer(port);
    if (!rk) {
        close(fd);
        return 2;
    }
    /* A message makes the broker thread connect (and be refused). */
    rd_kafka_resp_err_t err = rd_kafka_producev(
        rk, RD_KAFKA_V_TOPIC("tsan-probe"), RD_KAFKA_V_VALUE("x", 1),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    if (err) {
        fprintf(stderr, "callback_probe: produce: %s\n", rd_kafka_err2str(err));
        rd_kafka_destroy(rk);
        close(fd);
        return 2;
    }
    /* No librdkafka call from here to the write below: none of its locks
     * may order the callback's write before ours. */
    atomic_store_explicit(&armed, 1, memory_order_relaxed);
    long until = now_ms() + WAIT_MS;
    while (!atomic_load_explicit(&fired, memory_order_relaxed) &&
           now_ms() < until)
        sched_yield();
    int seen = atomic_load_explicit(&fired, memory_order_relaxed);
    if (seen)
        shared++;
    atomic_store_explicit(&armed, 0, memory_order_relaxed);
    rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_destroy(rk);
    close(fd);
    if (!seen) {
        printf("inconclusive: no log callback on a librdkafka thread within "
               "%d ms\n",
               WAIT_MS);
        return 3;
    }
    printf("no race reported: the callback's write is hidden\n");
    return 1;
}
