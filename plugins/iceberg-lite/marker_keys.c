/* Marker keys in table metadata (see marker_keys.h): pure JSON work on a
 * loaded metadata version, shared by the plugin's commits and claims and
 * by the maintenance operations, which carry the markers unchanged. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "marker_keys.h"
#include "table_meta.h"

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
    const char *v = get_str(props, prefix, ICE_F_CLAIMED);
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
    get_i64(props, prefix, ICE_F_EPOCH, &epoch);
    int claimed = get_claimed(props, prefix, m, &claim_seq);
    json_t *snap = ice_meta_current_snapshot(meta);
    json_t *sum = json_object_get(snap, "summary");
    if (get_i64(sum, prefix, ICE_F_NEXT, &next) &&
        (!claimed || ice_json_int(snap, "sequence-number", 0) > claim_seq)) {
        const char *id = get_str(sum, prefix, ICE_F_BATCH);
        m->next_offset = next;
        snprintf(m->last_batch_id, TM_BATCH_ID_MAX, "%s", id ? id : "");
        m->rows = get_u64(sum, prefix, ICE_F_ROWS);
        m->dead_letters = get_u64(sum, prefix, ICE_F_DLS);
        m->filtered = get_u64(sum, prefix, ICE_F_FILTER);
        m->duplicates = get_u64(sum, prefix, ICE_F_DUPS);
    }
    m->epoch = epoch;
}

int ice_marker_put(json_t *obj, const char *prefix, const char *field,
                   const char *value) {
    char key[ICE_KEY_MAX + 32]; /* prefix + field */
    snprintf(key, sizeof key, "%s%s", prefix, field);
    return json_object_set_new(obj, key, json_string(value));
}

static int put_u64(json_t *obj, const char *prefix, const char *field,
                   uint64_t v) {
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, v);
    return ice_marker_put(obj, prefix, field, text);
}

int ice_marker_put_summary(json_t *summary, const char *prefix,
                           const tm_marker *m) {
    char next[24];
    snprintf(next, sizeof next, "%" PRId64, m->next_offset);
    return ice_marker_put(summary, prefix, ICE_F_NEXT, next) ||
                   ice_marker_put(summary, prefix, ICE_F_BATCH,
                                  m->last_batch_id) ||
                   put_u64(summary, prefix, ICE_F_ROWS, m->rows) ||
                   put_u64(summary, prefix, ICE_F_DLS, m->dead_letters) ||
                   put_u64(summary, prefix, ICE_F_FILTER, m->filtered) ||
                   put_u64(summary, prefix, ICE_F_DUPS, m->duplicates)
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
    const char *fields[2] = {"." ICE_F_NEXT, "." ICE_F_CLAIMED};
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
