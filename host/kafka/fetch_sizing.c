#include "kafka/fetch_sizing.h"

#define KIB 1024LL
#define MIB (1024LL * 1024LL)

static int64_t clamp(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* librdkafka 2.0.x checks queued.min.messages and queued.max.messages.kbytes
 * against the queue its consumer polls, which every assigned partition's
 * fetch queue forwards to: they bound the connector's whole prefetch, not
 * each partition's. Once the queue passes either, the broker thread stops
 * fetching until its next wake-up, up to a second later (2.0.x has no
 * fetch.queue.backoff.ms), so the queue must hold about a second of
 * consumption or every second ends in a stall. A Fetch response adds up to
 * fetch.max.bytes above the limits (librdkafka decides before a fetch, not
 * after), and its buffer stays allocated until the last of its records is
 * consumed: with librdkafka's default of 50 MiB, that response, not the
 * queue, grew with the partition count. */
tm_fetch_sizing tm_fetch_sizing_of(int64_t max_records, int64_t max_bytes,
                                   int64_t message_max_bytes) {
    /* Within the config's own bounds and far from overflow. */
    max_records = clamp(max_records, 1, 1LL << 40);
    max_bytes = clamp(max_bytes, 1, 1LL << 40);
    tm_fetch_sizing s;
    /* A quarter of a batch's bytes, 4 to 64 MiB: a response lands on top of
     * the queue and stays allocated until its last record is consumed; the
     * partition count no longer adds to it. Never below message.max.bytes,
     * which librdkafka would refuse. */
    s.fetch_max_bytes = clamp(max_bytes / 4, 4 * MIB, 64 * MIB);
    if (s.fetch_max_bytes < message_max_bytes)
        s.fetch_max_bytes = clamp(message_max_bytes, 1, 2147483135LL);
    s.max_partition_fetch_bytes = 1 * MIB; /* librdkafka's default */
    /* Two batches of records, at least 40 000. The queue only has to cover
     * the fetcher's refill once it is woken (kafka/fetch_wake.h: at a
     * quarter of this), not the second librdkafka 2.0.2 waited before: with
     * the waker 40 000 records and 4 MiB responses drained 1M records as
     * fast as 100 000 and 8 MiB did, in 62-64 MiB instead of 102-111
     * (docs/benchmarks.md, "Memory: fetch and queue sizing"). */
    s.queued_min_messages = clamp(2 * max_records, 40000, 10000000);
    /* Three quarters of a batch's bytes, at least 12 MiB: the bound for
     * large records, which reach it long before the count. */
    s.queued_max_kbytes = clamp(3 * max_bytes / 4 / KIB, 12288, 2097151);
    return s;
}
