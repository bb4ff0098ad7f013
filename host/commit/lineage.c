#include "commit/lineage.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit/backoff.h"
#include "convert/sha256.h"
#include "kafka/partition_reader.h"
#include "runtime/connector_state.h"

/* One read's bound. Inside the rebalance callback the reads share the
 * claim's patience (commit/claim.c): a member that blocks there holds up
 * the whole group's rebalance (a joining member waits for it), so past it
 * the claim is deferred to the poll loop rather than retried here. */
#define READ_TIMEOUT_MS 10000
#define READ_MIN_MS     1000

static int range_has_lineage(const tm_range *r) {
    return r->struct_size >=
           offsetof(tm_range, last_record_hash) + TM_RECORD_HASH_MAX;
}

static void hash_part(tm_sha256 *h, char present, char absent, const void *p,
                      size_t len) {
    uint8_t frame[9];
    frame[0] = (uint8_t)(p ? present : absent);
    uint64_t l = p ? (uint64_t)len : 0;
    for (int i = 0; i < 8; i++)
        frame[1 + i] = (uint8_t)(l >> (56 - 8 * i));
    tm_sha256_update(h, frame, sizeof frame);
    if (p && len)
        tm_sha256_update(h, p, len);
}

void tm_lineage_hash(const void *key, size_t key_len, const void *value,
                     size_t value_len, char out[TM_RECORD_HASH_MAX]) {
    tm_sha256 h;
    uint8_t d[TM_SHA256_LEN];
    tm_sha256_init(&h);
    hash_part(&h, 'k', 'K', key, key_len);
    hash_part(&h, 'v', 'V', value, value_len);
    tm_sha256_final(&h, d);
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < TM_SHA256_LEN && 2 * i + 1 < TM_RECORD_HASH_MAX;
         i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[TM_RECORD_HASH_MAX - 1] = '\0';
}

/* The range's last record so far is at offset: it is kept (its hash made
 * once the whole batch is walked) if it is later. */
static void consider(tm_range *r, int64_t offset, int64_t ts) {
    if (r->last_offset != TM_NO_OFFSET && offset <= r->last_offset)
        return;
    r->last_offset = offset;
    r->last_timestamp_ms = ts;
}

void tm_lineage_fill_ranges(tm_range *ranges, const tm_batch *b) {
    if (b->nranges == 0 || !range_has_lineage(ranges))
        return;
    for (size_t i = 0; i < b->nranges; i++) {
        tm_range *r = TM_ELEM(tm_range, ranges, i);
        r->last_offset = TM_NO_OFFSET;
        r->last_timestamp_ms = -1;
        r->last_record_hash[0] = '\0';
    }
    /* The last record of each range first, then its hash alone: hashing
     * every record that was the last so far hashed the whole batch. */
    for (size_t i = 0; i < b->nrecords; i++) {
        const tm_record *rec = TM_CELEM(tm_record, b->records, i);
        if (rec->range < b->nranges)
            consider(TM_ELEM(tm_range, ranges, rec->range), rec->offset,
                     rec->timestamp_ms);
    }
    for (size_t i = 0; i < b->ndead_letters; i++) {
        const tm_dead_letter *d = TM_CELEM(tm_dead_letter, b->dead_letters, i);
        if (d->range < b->nranges)
            consider(TM_ELEM(tm_range, ranges, d->range), d->offset,
                     d->timestamp_ms);
    }
    for (size_t i = 0; i < b->nrecords; i++) {
        const tm_record *rec = TM_CELEM(tm_record, b->records, i);
        tm_range *r = rec->range < b->nranges
                          ? TM_ELEM(tm_range, ranges, rec->range)
                          : NULL;
        if (r && rec->offset == r->last_offset && !r->last_record_hash[0])
            tm_lineage_hash(rec->key, rec->key_len, rec->value, rec->value_len,
                            r->last_record_hash);
    }
    for (size_t i = 0; i < b->ndead_letters; i++) {
        const tm_dead_letter *d = TM_CELEM(tm_dead_letter, b->dead_letters, i);
        tm_range *r =
            d->range < b->nranges ? TM_ELEM(tm_range, ranges, d->range) : NULL;
        if (r && d->offset == r->last_offset && !r->last_record_hash[0])
            tm_lineage_hash(d->key, d->key_len, d->value, d->value_len,
                            r->last_record_hash);
    }
}

void tm_lineage_advance(tm_marker *stored, const tm_range *r) {
    if (!TM_MARKER_HAS_LINEAGE(stored) || !range_has_lineage(r) ||
        r->last_offset == TM_NO_OFFSET || !r->last_record_hash[0])
        return;
    stored->last_offset = r->last_offset;
    stored->last_timestamp_ms = r->last_timestamp_ms;
    memcpy(stored->last_record_hash, r->last_record_hash, TM_RECORD_HASH_MAX);
}

static int keeps_lineage(const tm_marker *m) {
    return TM_MARKER_HAS_LINEAGE(m) && m->last_offset >= 0 &&
           m->last_record_hash[0] != '\0';
}

tm_lineage_verdict tm_lineage_compare(const tm_marker *m,
                                      const tm_lineage_seen *found, char *why,
                                      size_t whysize) {
    if (whysize)
        why[0] = '\0';
    if (!keeps_lineage(m))
        return TM_LINEAGE_NONE;
    if (!found || found->offset != m->last_offset) {
        snprintf(why, whysize,
                 "the record at offset %" PRId64 " is no longer in the log "
                 "(retention or compaction)%s",
                 m->last_offset, found ? "" : "; the log ends before it");
        return TM_LINEAGE_UNCHECKED;
    }
    char hash[TM_RECORD_HASH_MAX];
    tm_lineage_hash(found->key, found->key_len, found->value, found->value_len,
                    hash);
    int same_hash = memcmp(hash, m->last_record_hash, TM_RECORD_HASH_MAX) == 0;
    if (same_hash && found->timestamp_ms == m->last_timestamp_ms)
        return TM_LINEAGE_SAME;
    snprintf(why, whysize,
             "the record at offset %" PRId64 " has timestamp %" PRId64
             " and hash %.12s, the one the marker applied had %" PRId64
             " and %.12s",
             m->last_offset, found->timestamp_ms, hash, m->last_timestamp_ms,
             m->last_record_hash);
    return TM_LINEAGE_OTHER;
}

/* ---- at claim ----------------------------------------------------------- */

typedef struct check_ctx {
    tm_connector *c;
    const tm_marker **checked; /* the markers read back, by read index */
    int *stopped;              /* 1 when a mismatch was reported */
} check_ctx;

static void on_record(void *user, size_t i, const tm_read_record *msg) {
    check_ctx *x = user;
    const tm_marker *m = x->checked[i];
    tm_lineage_seen seen, *found = NULL;
    if (msg) {
        seen.offset = msg->offset;
        seen.timestamp_ms = msg->timestamp_ms;
        seen.key = msg->key;
        seen.key_len = msg->key_len;
        seen.value = msg->value;
        seen.value_len = msg->value_len;
        found = &seen;
    }
    char why[512];
    tm_lineage_verdict v = tm_lineage_compare(m, found, why, sizeof why);
    if (v == TM_LINEAGE_OTHER) {
        if (!*x->stopped)
            tm_conn_error(
                x->c, 1,
                "%s [%" PRId32 "]: the log is not the one the sink's marker "
                "describes: %s. Was the topic deleted and created again, or "
                "the log truncated by an unclean leader election? Nothing "
                "is applied from it; reset with `tidemark offsets "
                "--reset-to` to the offset to go on from",
                m->topic, m->partition, why);
        *x->stopped = 1;
    } else if (v == TM_LINEAGE_UNCHECKED) {
        tm_conn_log(x->c, TM_LOG_INFO, m->topic, m->partition, NULL,
                    "lineage not checked: %s", why);
    }
}

/* Sleeps ms, in slices, returning early once a stop is asked. */
static void sleep_unless_stopped(const atomic_int *stop, int64_t ms) {
    for (int64_t slept = 0; slept < ms && !atomic_load(stop); slept += 100) {
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* The bound of the next read: the patience left, within
 * [READ_MIN_MS, READ_TIMEOUT_MS]; READ_TIMEOUT_MS for one attempt (0). */
static int64_t read_bound(int64_t patience_ms, int64_t left_ms) {
    if (patience_ms <= 0 || left_ms >= READ_TIMEOUT_MS)
        return READ_TIMEOUT_MS;
    return left_ms > READ_MIN_MS ? left_ms : READ_MIN_MS;
}

int tm_lineage_check_claim(tm_connector *c, const tm_marker *markers, size_t n,
                           const int64_t *low, int64_t patience_ms) {
    tm_read_at *want = calloc(n ? n : 1, sizeof *want);
    const tm_marker **checked = calloc(n ? n : 1, sizeof *checked);
    int rc = -1, stopped = 0;
    if (!want || !checked) {
        tm_conn_error(c, 1, "claim: out of memory checking the lineage");
        goto out;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const tm_marker *m = &markers[i];
        if (!keeps_lineage(m))
            continue;
        if (m->last_offset < low[i]) {
            tm_conn_log(c, TM_LOG_INFO, m->topic, m->partition, NULL,
                        "lineage not checked: the record at offset %" PRId64
                        " is below the log start %" PRId64 " (retention)",
                        m->last_offset, low[i]);
            continue;
        }
        want[k] = (tm_read_at){m->topic, m->partition, m->last_offset};
        checked[k++] = m;
    }
    check_ctx x = {c, checked, &stopped};
    tm_backoff b;
    tm_backoff_init(&b, 200, 5000, (uint64_t)tm_now_ms());
    int64_t give_up = tm_now_ms() + patience_ms;
    for (;;) {
        char why[512];
        int r = tm_kafka_read_each(
            c->cfg, want, k, read_bound(patience_ms, give_up - tm_now_ms()),
            c->stop, on_record, &x, why, sizeof why);
        if (r == 0) {
            rc = stopped ? -1 : 0;
            break;
        }
        if (r == -2 || atomic_load(c->stop) || stopped)
            break; /* stopping (nothing is wrong), or a mismatch seen */
        if (tm_now_ms() >= give_up) {
            /* Transient, retried for ever: by the poll loop, DEGRADED. */
            tm_conn_error(c, 0,
                          "claim: reading back the records the markers last "
                          "applied: %s; the claim is retried",
                          why);
            rc = TM_LINEAGE_DEFERRED;
            break;
        }
        tm_conn_error(c, 0,
                      "claim: reading back the records the markers last "
                      "applied: %s; retrying",
                      why);
        int64_t pause = tm_backoff_next(&b), left = give_up - tm_now_ms();
        sleep_unless_stopped(c->stop, pause < left ? pause : left);
    }
out:
    free(want);
    free(checked);
    return rc;
}
