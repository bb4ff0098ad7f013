/* Marker keys in table metadata (see marker_keys.h): pure JSON work on a
 * loaded metadata version, shared by the plugin's commits and claims and
 * by the maintenance operations, which carry the markers unchanged. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "marker_keys.h"
#include "table_meta.h"

char *ice_strfmt(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s)
        return NULL;
    va_start(ap, fmt);
    int k = vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    if (k != n) {
        free(s);
        return NULL;
    }
    return s;
}

char *ice_marker_prefix_new(const char *connector, const char *topic,
                            int32_t partition) {
    return ice_strfmt(ICE_MARKER_PREFIX "%s/%s/%" PRId32 ".",
                      connector ? connector : "", topic ? topic : "",
                      partition);
}

/* obj[prefix field] as a string into *out (NULL when absent). 0, or -1
 * out of memory. */
static int get_str(json_t *obj, const char *prefix, const char *field,
                   const char **out) {
    char *key = ice_strfmt("%s%s", prefix, field);
    if (!key)
        return -1;
    *out = json_string_value(json_object_get(obj, key));
    free(key);
    return 0;
}

/* 1 parsed into *out, 0 absent or not a number, -1 out of memory. */
static int get_i64(json_t *obj, const char *prefix, const char *field,
                   int64_t *out) {
    const char *v;
    if (get_str(obj, prefix, field, &v) != 0)
        return -1;
    if (!v)
        return 0;
    char *end;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end)
        return 0;
    *out = x;
    return 1;
}

/* A stored batch id into m, whole or not at all. */
static int set_batch_id(tm_marker *m, const char *id) {
    size_t n = strlen(id);
    if (n >= TM_BATCH_ID_MAX)
        return -1;
    memcpy(m->last_batch_id, id, n + 1);
    return 0;
}

/* A count (0 when absent or not a positive number); -1 out of memory. */
static int get_u64(json_t *obj, const char *prefix, const char *field,
                   uint64_t *out) {
    int64_t v = 0;
    int rc = get_i64(obj, prefix, field, &v);
    *out = rc == 1 && v > 0 ? (uint64_t)v : 0;
    return rc < 0 ? -1 : 0;
}

static void set_absent(tm_marker *m) {
    m->next_offset = TM_NO_OFFSET;
    m->epoch = TM_NO_EPOCH;
    m->last_batch_id[0] = '\0';
    m->rows = m->dead_letters = m->filtered = m->duplicates = 0;
    if (TM_MARKER_HAS_LINEAGE(m)) {
        m->last_offset = TM_NO_OFFSET;
        m->last_timestamp_ms = -1;
        m->last_record_hash[0] = '\0';
    }
}

/* A stored hash into m, whole or not at all (then no lineage). */
static void set_lineage(tm_marker *m, int64_t offset, int64_t ts,
                        const char *hash) {
    size_t n = hash ? strlen(hash) : 0;
    if (!TM_MARKER_HAS_LINEAGE(m) || n >= TM_RECORD_HASH_MAX)
        return;
    m->last_offset = offset;
    m->last_timestamp_ms = ts;
    memcpy(m->last_record_hash, hash ? hash : "", n + 1);
}

/* The claim's lineage record into m (left absent when there is none or it
 * does not parse); -1 out of memory. */
static int get_claimed_lineage(json_t *props, const char *prefix,
                               tm_marker *m) {
    const char *v;
    long long off, ts;
    int at = 0;
    if (get_str(props, prefix, ICE_F_CLAIMED_LAST, &v) != 0)
        return -1;
    if (v && sscanf(v, "%lld,%lld,%n", &off, &ts, &at) == 2 && at > 0)
        set_lineage(m, off, ts, v + at);
    return 0;
}

/* The summary's lineage into m; -1 out of memory. */
static int get_summary_lineage(json_t *sum, const char *prefix, tm_marker *m) {
    int64_t off = TM_NO_OFFSET, ts = -1;
    const char *hash;
    if (get_i64(sum, prefix, ICE_F_LAST, &off) < 0 ||
        get_i64(sum, prefix, ICE_F_LAST_TS, &ts) < 0 ||
        get_str(sum, prefix, ICE_F_LAST_HASH, &hash) != 0)
        return -1;
    if (hash)
        set_lineage(m, off, ts, hash);
    return 0;
}

/* The claim's record: 1 parsed (m filled, *seq set), 0 none, -1 out of
 * memory or a batch id too long. */
static int get_claimed(json_t *props, const char *prefix, tm_marker *m,
                       int64_t *seq) {
    const char *v;
    long long sq, next;
    unsigned long long rows, dls, filt, dups;
    int at = 0;
    if (get_str(props, prefix, ICE_F_CLAIMED, &v) != 0)
        return -1;
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
    return set_batch_id(m, v + at) == 0 ? 1 : -1;
}

int ice_marker_get(json_t *meta, const char *prefix, tm_marker *m) {
    set_absent(m);
    json_t *props = json_object_get(meta, "properties");
    int64_t epoch = TM_NO_EPOCH, claim_seq = -1, next;
    if (get_i64(props, prefix, ICE_F_EPOCH, &epoch) < 0)
        return -1;
    int claimed = get_claimed(props, prefix, m, &claim_seq);
    if (claimed < 0 || (claimed && get_claimed_lineage(props, prefix, m) != 0))
        return -1;
    json_t *snap = ice_meta_current_snapshot(meta);
    json_t *sum = json_object_get(snap, "summary");
    int has = get_i64(sum, prefix, ICE_F_NEXT, &next);
    if (has < 0)
        return -1;
    if (has &&
        (!claimed || ice_json_int(snap, "sequence-number", 0) > claim_seq)) {
        const char *id;
        m->next_offset = next;
        if (get_str(sum, prefix, ICE_F_BATCH, &id) != 0 ||
            set_batch_id(m, id ? id : "") != 0 ||
            get_u64(sum, prefix, ICE_F_ROWS, &m->rows) != 0 ||
            get_u64(sum, prefix, ICE_F_DLS, &m->dead_letters) != 0 ||
            get_u64(sum, prefix, ICE_F_FILTER, &m->filtered) != 0 ||
            get_u64(sum, prefix, ICE_F_DUPS, &m->duplicates) != 0)
            return -1;
        set_lineage(m, TM_NO_OFFSET, -1, ""); /* the claim's is older */
        if (get_summary_lineage(sum, prefix, m) != 0)
            return -1;
    }
    m->epoch = epoch;
    return 0;
}

int ice_marker_put(json_t *obj, const char *prefix, const char *field,
                   const char *value) {
    char *key = ice_strfmt("%s%s", prefix, field);
    int rc = key ? json_object_set_new(obj, key, json_string(value)) : -1;
    free(key);
    return rc;
}

static int put_u64(json_t *obj, const char *prefix, const char *field,
                   uint64_t v) {
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, v);
    return ice_marker_put(obj, prefix, field, text);
}

/* The lineage keys, when m keeps one (nothing written otherwise). */
static int put_lineage(json_t *summary, const char *prefix,
                       const tm_marker *m) {
    if (!TM_MARKER_HAS_LINEAGE(m) || !m->last_record_hash[0])
        return 0;
    char off[24], ts[24];
    snprintf(off, sizeof off, "%" PRId64, m->last_offset);
    snprintf(ts, sizeof ts, "%" PRId64, m->last_timestamp_ms);
    return ice_marker_put(summary, prefix, ICE_F_LAST, off) ||
                   ice_marker_put(summary, prefix, ICE_F_LAST_TS, ts) ||
                   ice_marker_put(summary, prefix, ICE_F_LAST_HASH,
                                  m->last_record_hash)
               ? -1
               : 0;
}

int ice_marker_put_summary(json_t *summary, const char *prefix,
                           const tm_marker *m) {
    char next[24];
    snprintf(next, sizeof next, "%" PRId64, m->next_offset);
    return put_lineage(summary, prefix, m) ||
                   ice_marker_put(summary, prefix, ICE_F_NEXT, next) ||
                   ice_marker_put(summary, prefix, ICE_F_BATCH,
                                  m->last_batch_id) ||
                   put_u64(summary, prefix, ICE_F_ROWS, m->rows) ||
                   put_u64(summary, prefix, ICE_F_DLS, m->dead_letters) ||
                   put_u64(summary, prefix, ICE_F_FILTER, m->filtered) ||
                   put_u64(summary, prefix, ICE_F_DUPS, m->duplicates)
               ? -1
               : 0;
}

/* The prefix of KEY (allocated) if it is a marker key ending with
 * FIELD; NULL otherwise or out of memory (*oom set). */
static char *prefix_of(const char *key, const char *field, int *oom) {
    size_t kn = strlen(key), fn = strlen(field);
    if (strncmp(key, ICE_MARKER_PREFIX, strlen(ICE_MARKER_PREFIX)) != 0 ||
        kn <= fn + 1 || key[kn - fn - 1] != '.' ||
        strcmp(key + kn - fn, field) != 0)
        return NULL;
    /* The prefix keeps the '.' before the field. */
    char *p = ice_strfmt("%.*s", (int)(kn - fn), key);
    *oom = !p;
    return p;
}

int ice_markers_carry(json_t *meta, json_t *summary) {
    json_t *sum = json_object_get(ice_meta_current_snapshot(meta), "summary");
    json_t *props = json_object_get(meta, "properties");
    json_t *srcs[2] = {sum, props};
    const char *fields[2] = {ICE_F_NEXT, ICE_F_CLAIMED};
    for (int k = 0; k < 2; k++) {
        const char *key;
        json_t *v;
        json_object_foreach(srcs[k], key, v) {
            int oom = 0;
            char *prefix = prefix_of(key, fields[k], &oom);
            tm_marker m = {.struct_size = sizeof m};
            if (oom)
                return -1;
            if (!prefix)
                continue;
            int rc = ice_marker_get(meta, prefix, &m);
            if (rc == 0 && m.next_offset != TM_NO_OFFSET)
                rc = ice_marker_put_summary(summary, prefix, &m);
            free(prefix);
            if (rc != 0)
                return -1;
        }
    }
    return 0;
}

int ice_markers_move(json_t *snap, int64_t successor) {
    json_t *sum = json_object_get(snap, "summary");
    if (!json_is_object(sum))
        return 0; /* nothing to move (not a snapshot of ours) */
    const char *key;
    json_t *v;
    void *tmp;
    size_t pn = strlen(ICE_MARKER_PREFIX);
    json_object_foreach_safe(sum, tmp, key, v) {
        if (strncmp(key, ICE_MARKER_PREFIX, pn) == 0 &&
            json_object_del(sum, key) != 0)
            return -1;
    }
    char id[24];
    snprintf(id, sizeof id, "%lld", (long long)successor);
    return json_object_set_new(sum, ICE_MARKERS_MOVED_KEY, json_string(id));
}

/* The connector of a marker key (allocated), or NULL: not a marker key
 * (*oom 0) or out of memory (*oom 1). The key is
 * ICE_MARKER_PREFIX "<connector>/<topic>/<partition>.<field>": fields
 * hold no '.', partitions are digits and topics hold no '/', so reading
 * from the right is unambiguous whatever the connector's name holds. */
static char *connector_of(const char *key, int *oom) {
    size_t pn = strlen(ICE_MARKER_PREFIX);
    *oom = 0;
    if (strncmp(key, ICE_MARKER_PREFIX, pn) != 0)
        return NULL;
    const char *c = key + pn, *dot = strrchr(c, '.');
    const char *end = dot, *slash = NULL;
    for (int k = 0; end && k < 2; k++) {
        slash = NULL;
        for (const char *p = c; p < end; p++)
            if (*p == '/')
                slash = p;
        end = slash;
    }
    if (!end)
        return NULL;
    char *name = ice_strfmt("%.*s", (int)(end - c), c);
    *oom = !name;
    return name;
}

int ice_marker_other_connector(json_t *meta, const char *connector,
                               char **other) {
    json_t *srcs[2] = {
        json_object_get(ice_meta_current_snapshot(meta), "summary"),
        json_object_get(meta, "properties")};
    *other = NULL;
    for (int k = 0; k < 2; k++) {
        const char *key;
        json_t *v;
        json_object_foreach(srcs[k], key, v) {
            int oom;
            char *name = connector_of(key, &oom);
            if (oom)
                return -1;
            if (name && strcmp(name, connector ? connector : "") != 0) {
                *other = name;
                return 1;
            }
            free(name);
        }
    }
    return 0;
}
