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
 * consumption or every second ends in a stall. A Fetch response can add up
 * to fetch.max.bytes above the limits (librdkafka only decides before a
 * fetch), and its buffer stays allocated until the last of its messages is
 * destroyed: the response, not the partition count, is the overshoot. */
tm_fetch_sizing tm_fetch_sizing_of(int64_t max_records, int64_t max_bytes,
                                   int64_t message_max_bytes) {
    /* Within the config's own bounds and far from overflow. */
    max_records = clamp(max_records, 1, 1LL << 40);
    max_bytes = clamp(max_bytes, 1, 1LL << 40);
    tm_fetch_sizing s;
    /* A quarter of a batch's bytes per response, 1 to 8 MiB: a few round
     * trips a batch on a local network. At librdkafka's default (50 MiB)
     * one response of a 500-partition backlog was most of the memory.
     * Never below message.max.bytes, which librdkafka would refuse. */
    s.fetch_max_bytes = clamp(max_bytes / 4, 1 * MIB, 8 * MIB);
    if (s.fetch_max_bytes < message_max_bytes)
        s.fetch_max_bytes = clamp(message_max_bytes, 1, 2147483135LL);
    /* librdkafka's default, unless the response itself is smaller. */
    s.max_partition_fetch_bytes =
        s.fetch_max_bytes < 1 * MIB ? s.fetch_max_bytes : 1 * MIB;
    /* Five batches of records, at least 50 000: on the benchmark topic
     * (~300-byte records) about half a second of a sink's fastest
     * consumption, each queued record costing ~600 bytes (its payload in the
     * response buffer and librdkafka's message op). Fewer stalled each
     * second: 20 000 gave 45 000 records/s, 100 000 gave 109 000. */
    s.queued_min_messages = clamp(5 * max_records, 50000, 10000000);
    /* One batch's bytes: the bound for large records, which reach it long
     * before the count. */
    s.queued_max_kbytes = clamp(max_bytes / KIB, 4096, 2097151);
    return s;
}
