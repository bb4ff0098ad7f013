/* Markers. The current snapshot's summary carries every partition's
 * marker (next offset, last batch id, counts) as string values under
 * ICE_MARKER_PREFIX, so the current snapshot alone answers read_markers.
 * Epochs live in table properties, because a claim is a metadata commit
 * without a new snapshot. A claim also records the marker it claimed
 * ("<prefix>claimed" = "seq,next_offset,rows,dead_letters,filtered,
 * duplicates,batch_id") with the table's last sequence number at the
 * time: a snapshot of a higher sequence number is newer and wins; else
 * the claim's record holds (a marker created or reset by the claim). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ice_sink.h"

#define F_NEXT    "next-offset"
#define F_BATCH   "batch-id"
#define F_ROWS    "rows"
#define F_DLS     "dead-letters"
#define F_FILTER  "filtered"
#define F_DUPS    "duplicates"
#define F_EPOCH   "epoch"
#define F_CLAIMED "claimed"

void ice_marker_prefix(const ice_sink *s, const char *topic, int32_t partition,
                       char *out, size_t size) {
    snprintf(out, size, ICE_MARKER_PREFIX "%s/%s/%" PRId32 ".",
             s->config->connector ? s->config->connector : "", topic,
             partition);
}

static const char *get_str(json_t *obj, const char *prefix, const char *field) {
    char key[ICE_KEY_MAX + 32]; /* prefix + field */
    snprintf(key, sizeof key, "%s%s", prefix, field);
    return json_string_value(json_object_get(obj, key));
}

static int get_i64(json_t *obj, const char *prefix, const char *field,
                   int64_t *out) {
    const char *v = get_str(obj, prefix, field);
    if (!v)
        return 0;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end)
        return 0;
    *out = x;
    return 1;
}

static uint64_t get_u64(json_t *obj, const char *prefix, const char *field) {
    int64_t v = 0;
    return get_i64(obj, prefix, field, &v) && v > 0 ? (uint64_t)v : 0;
}

static void set_absent(tm_marker *m) {
    m->next_offset = TM_NO_OFFSET;
    m->epoch = TM_NO_EPOCH;
    m->last_batch_id[0] = '\0';
    m->rows = m->dead_letters = m->filtered = m->duplicates = 0;
}

/* The claim's record: 1 parsed (m filled, *seq set), 0 none. */
static int get_claimed(json_t *props, const char *prefix, tm_marker *m,
                       int64_t *seq) {
    const char *v = get_str(props, prefix, F_CLAIMED);
    long long sq, next;
    unsigned long long rows, dls, filt, dups;
    int at = 0;
    if (!v ||
        sscanf(v, "%lld,%lld,%llu,%llu,%llu,%llu,%n", &sq, &next, &rows, &dls,
               &filt, &dups, &at) != 6 ||
        at == 0)
        return 0;
    *seq = sq;
    m->next_offset = next;
    m->rows = rows;
    m->dead_letters = dls;
    m->filtered = filt;
    m->duplicates = dups;
    snprintf(m->last_batch_id, TM_BATCH_ID_MAX, "%s", v + at);
    return 1;
}

void ice_marker_get(json_t *meta, const char *prefix, tm_marker *m) {
    set_absent(m);
    json_t *props = json_object_get(meta, "properties");
    int64_t epoch = TM_NO_EPOCH, claim_seq = -1, next;
    get_i64(props, prefix, F_EPOCH, &epoch);
    int claimed = get_claimed(props, prefix, m, &claim_seq);
    json_t *snap = ice_meta_current_snapshot(meta);
    json_t *sum = json_object_get(snap, "summary");
    if (get_i64(sum, prefix, F_NEXT, &next) &&
        (!claimed || ice_json_int(snap, "sequence-number", 0) > claim_seq)) {
        const char *id = get_str(sum, prefix, F_BATCH);
        m->next_offset = next;
        snprintf(m->last_batch_id, TM_BATCH_ID_MAX, "%s", id ? id : "");
        m->rows = get_u64(sum, prefix, F_ROWS);
        m->dead_letters = get_u64(sum, prefix, F_DLS);
        m->filtered = get_u64(sum, prefix, F_FILTER);
        m->duplicates = get_u64(sum, prefix, F_DUPS);
    }
    m->epoch = epoch;
}

static int put(json_t *obj, const char *prefix, const char *field,
               const char *value) {
    char key[ICE_KEY_MAX + 32]; /* prefix + field */
    snprintf(key, sizeof key, "%s%s", prefix, field);
    return json_object_set_new(obj, key, json_string(value));
}

static int put_u64(json_t *obj, const char *prefix, const char *field,
                   uint64_t v) {
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, v);
    return put(obj, prefix, field, text);
}

int ice_marker_put_summary(json_t *summary, const char *prefix,
                           const tm_marker *m) {
    char next[24];
    snprintf(next, sizeof next, "%" PRId64, m->next_offset);
    return put(summary, prefix, F_NEXT, next) ||
                   put(summary, prefix, F_BATCH, m->last_batch_id) ||
                   put_u64(summary, prefix, F_ROWS, m->rows) ||
                   put_u64(summary, prefix, F_DLS, m->dead_letters) ||
                   put_u64(summary, prefix, F_FILTER, m->filtered) ||
                   put_u64(summary, prefix, F_DUPS, m->duplicates)
               ? -1
               : 0;
}

/* Copies the prefix of KEY if it ends with ".<field>" under our prefix. */
static int prefix_of(const char *key, const char *field, char *out,
                     size_t size) {
    size_t kn = strlen(key), fn = strlen(field);
    if (strncmp(key, ICE_MARKER_PREFIX, strlen(ICE_MARKER_PREFIX)) != 0 ||
        kn <= fn || kn - fn >= size || strcmp(key + kn - fn, field) != 0)
        return 0;
    memcpy(out, key, kn - fn);
    out[kn - fn] = '\0';
    return 1;
}

int ice_markers_carry(json_t *meta, json_t *summary) {
    json_t *sum = json_object_get(ice_meta_current_snapshot(meta), "summary");
    json_t *props = json_object_get(meta, "properties");
    json_t *srcs[2] = {sum, props};
    const char *fields[2] = {"." F_NEXT, "." F_CLAIMED};
    for (int k = 0; k < 2; k++) {
        const char *key;
        json_t *v;
        json_object_foreach(srcs[k], key, v) {
            char prefix[ICE_KEY_MAX];
            tm_marker m;
            if (!prefix_of(key, fields[k], prefix, sizeof prefix - 1))
                continue;
            strcat(prefix, ".");
            ice_marker_get(meta, prefix, &m);
            if (m.next_offset != TM_NO_OFFSET &&
                ice_marker_put_summary(summary, prefix, &m) != 0)
                return -1;
        }
    }
    return 0;
}

tm_status ice_refresh(ice_sink *s, tm_error *err) {
    char why[512];
    int rc = ice_table_refresh(&s->table, why, sizeof why);
    if (rc == 0)
        return TM_OK;
    if (rc == 1)
        s->host->set_error(err, "table %s: no metadata (was it removed?)",
                           s->table.root);
    else
        s->host->set_error(err, "table %s: %s", s->table.root, why);
    return TM_RETRY;
}

/* One claim attempt on the current version: 0 published, 1 lost the race,
 * TM status otherwise (negative values mapped by the caller). */
static tm_status claim_once(ice_sink *s, tm_marker *markers, size_t n,
                            uint32_t flags, int *lost, tm_error *err) {
    json_t *next = ice_meta_next(&s->table);
    json_t *props = json_object_get(next, "properties");
    char why[512], tmp[4096];
    *lost = 0;
    if (!next || !json_is_object(props)) {
        json_decref(next);
        s->host->set_error(err, "claim: out of memory or no properties in %s",
                           s->table.root);
        return TM_RETRY;
    }
    int64_t seq = ice_json_int(next, "last-sequence-number", 0);
    for (size_t i = 0; i < n; i++) {
        tm_marker *m = TM_ELEM(tm_marker, markers, i);
        char prefix[ICE_KEY_MAX], claimed[ICE_KEY_MAX], epoch[24];
        tm_marker cur;
        ice_marker_prefix(s, m->topic, m->partition, prefix, sizeof prefix);
        ice_marker_get(s->table.meta, prefix, &cur);
        if (cur.next_offset == TM_NO_OFFSET || (flags & TM_CLAIM_RESET))
            cur.next_offset = m->next_offset;
        cur.epoch = (cur.epoch == TM_NO_EPOCH ? 0 : cur.epoch) + 1;
        snprintf(claimed, sizeof claimed,
                 "%lld,%lld,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%s",
                 (long long)seq, (long long)cur.next_offset, cur.rows,
                 cur.dead_letters, cur.filtered, cur.duplicates,
                 cur.last_batch_id);
        snprintf(epoch, sizeof epoch, "%lld", (long long)cur.epoch);
        if (put(props, prefix, F_EPOCH, epoch) ||
            put(props, prefix, F_CLAIMED, claimed)) {
            json_decref(next);
            s->host->set_error(err, "claim: out of memory");
            return TM_RETRY;
        }
    }
    if (ice_meta_stage(&s->table, next, tmp, why, sizeof why) != 0) {
        json_decref(next);
        s->host->set_error(err, "claim: %s", why);
        return TM_RETRY;
    }
    int rc = ice_meta_link(&s->table, next, tmp, why, sizeof why);
    json_decref(next);
    if (rc == 1) {
        *lost = 1;
        return TM_OK;
    }
    if (rc != 0) {
        /* Unknown outcome: the host claims again, which raises the epoch
         * once more; harmless (an epoch only has to grow). */
        s->host->set_error(err, "claim: %s", why);
        return TM_RETRY;
    }
    for (size_t i = 0; i < n; i++) {
        tm_marker *m = TM_ELEM(tm_marker, markers, i);
        char prefix[ICE_KEY_MAX];
        ice_marker_prefix(s, m->topic, m->partition, prefix, sizeof prefix);
        ice_marker_get(s->table.meta, prefix, m);
    }
    if (ice_table_write_hint(&s->table, why, sizeof why) != 0)
        s->host->log(s->config->host_ctx, TM_LOG_WARN,
                     "version-hint.text not replaced (readers probe past "
                     "it): %s",
                     why);
    return TM_OK;
}

tm_status ice_claim(void *sink, tm_marker *markers, size_t n, uint32_t flags,
                    tm_error *err) {
    ice_sink *s = sink;
    for (int attempt = 0; attempt < ICE_RACE_MAX; attempt++) {
        tm_status r = ice_refresh(s, err);
        if (r != TM_OK)
            return r;
        int lost;
        r = claim_once(s, markers, n, flags, &lost, err);
        if (r != TM_OK || !lost)
            return r;
    }
    s->host->set_error(err,
                       "claim: another writer committed to %s first %d times "
                       "in a row",
                       s->table.root, ICE_RACE_MAX);
    return TM_RETRY;
}

tm_status ice_read_markers(void *sink, tm_marker *markers, size_t n,
                           tm_error *err) {
    ice_sink *s = sink;
    tm_status r = ice_refresh(s, err);
    if (r != TM_OK)
        return r;
    for (size_t i = 0; i < n; i++) {
        tm_marker *m = TM_ELEM(tm_marker, markers, i);
        char prefix[ICE_KEY_MAX];
        ice_marker_prefix(s, m->topic, m->partition, prefix, sizeof prefix);
        ice_marker_get(s->table.meta, prefix, m);
    }
    return TM_OK;
}
