#include "kafka/fetch_wake.h"
#include "services/thread_name.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The queue's length is looked at once in this many records: a lock of
 * librdkafka's, cheap, but not for every record. */
#define LOOK_EVERY 256
/* The leader's lookup of a watermark request waits at most this long; the
 * request itself up to socket.timeout.ms (fetch_wake.h). */
#define REQUEST_TIMEOUT_MS 1000

struct tm_fetch_wake {
    rd_kafka_t *rk;
    rd_kafka_queue_t *queue; /* the consumer's queue, our reference */
    int64_t limit;           /* queued.min.messages */
    /* the consumer's thread only */
    unsigned seen;
    int armed;
    /* shared with the waker's thread, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int asked, stopping;
    char topic[256];
    int32_t partition;
    pthread_t thread;
    atomic_llong woken;
};

int tm_fetch_wake_due(int *armed, int64_t len, int64_t limit) {
    if (limit < 4)
        return 0;
    if (len >= limit / 2)
        *armed = 1;
    else if (*armed && len <= limit / 4) {
        *armed = 0;
        return 1;
    }
    return 0;
}

static void *waker_main(void *arg) {
    tm_thread_name("tm:fetch-wake");
    tm_fetch_wake *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->asked && !w->stopping)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->stopping)
            break;
        char topic[sizeof w->topic];
        memcpy(topic, w->topic, sizeof topic);
        int32_t partition = w->partition;
        w->asked = 0;
        pthread_mutex_unlock(&w->mu);
        int64_t lo, hi;
        /* Its answer does not matter: the request is the wake-up. An
         * error (a partition moved, a broker down) changes nothing. */
        (void)rd_kafka_query_watermark_offsets(w->rk, topic, partition, &lo,
                                               &hi, REQUEST_TIMEOUT_MS);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static int64_t queued_min_messages(rd_kafka_t *rk) {
    char buf[32];
    size_t size = sizeof buf;
    const rd_kafka_conf_t *conf = rd_kafka_conf(rk);
    if (!conf || rd_kafka_conf_get(conf, "queued.min.messages", buf, &size) !=
                     RD_KAFKA_CONF_OK)
        return -1;
    char *end;
    long long v = strtoll(buf, &end, 10);
    return *end == '\0' && v > 0 ? v : -1;
}

tm_fetch_wake *tm_fetch_wake_new(rd_kafka_t *rk) {
    int64_t limit = queued_min_messages(rk);
    if (limit < 0)
        return NULL;
    tm_fetch_wake *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->rk = rk;
    w->limit = limit;
    w->queue = rd_kafka_queue_get_consumer(rk);
    if (!w->queue)
        goto fail_queue;
    if (pthread_mutex_init(&w->mu, NULL) != 0)
        goto fail_mu;
    if (pthread_cond_init(&w->cv, NULL) != 0)
        goto fail_cv;
    if (pthread_create(&w->thread, NULL, waker_main, w) != 0)
        goto fail_thread;
    return w;
fail_thread:
    pthread_cond_destroy(&w->cv);
fail_cv:
    pthread_mutex_destroy(&w->mu);
fail_mu:
    rd_kafka_queue_destroy(w->queue);
fail_queue:
    free(w);
    return NULL;
}

void tm_fetch_wake_seen(tm_fetch_wake *w, const char *topic,
                        int32_t partition) {
    if (!w || ++w->seen % LOOK_EVERY != 0 || !topic)
        return;
    int64_t len = (int64_t)rd_kafka_queue_length(w->queue);
    if (!tm_fetch_wake_due(&w->armed, len, w->limit))
        return;
    size_t n = strlen(topic);
    if (n >= sizeof w->topic)
        return; /* not a Kafka topic name */
    pthread_mutex_lock(&w->mu);
    memcpy(w->topic, topic, n + 1);
    w->partition = partition;
    w->asked = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    atomic_fetch_add(&w->woken, 1);
}

int64_t tm_fetch_wake_count(const tm_fetch_wake *w) {
    return w ? (int64_t)atomic_load(&w->woken) : 0;
}

void tm_fetch_wake_free(tm_fetch_wake *w) {
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    rd_kafka_queue_destroy(w->queue);
    free(w);
}
