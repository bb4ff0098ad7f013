/* Markers: claim and read_markers (the keys themselves, their reading
 * and carrying, are marker_keys.c). The current snapshot's summary carries
 * every partition's marker (next offset, last batch id, counts) as string
 * values under ICE_MARKER_PREFIX, so the current snapshot alone answers
 * read_markers. Epochs live in table properties, because a claim is a metadata
 * commit without a new snapshot. A claim also records the marker it claimed
 * ("<prefix>claimed" = "seq,next_offset,rows,dead_letters,filtered,
 * duplicates,batch_id") with the table's last sequence number at the
 * time: a snapshot of a higher sequence number is newer and wins; else
 * the claim's record holds (a marker created or reset by the claim). The
 * marker's lineage goes beside it ("<prefix>claimed-lineage"), cleared by
 * a reset. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ice_sink.h"
#include "maint.h"

char *ice_marker_prefix(const ice_sink *s, const char *topic,
                        int32_t partition) {
    return ice_marker_prefix_new(s->config->connector, topic, partition);
}

tm_status ice_marker_read(ice_sink *s, tm_marker *m, tm_error *err) {
    char *prefix = ice_marker_prefix(s, m->topic, m->partition);
    int rc = prefix ? ice_marker_get(s->table.meta, prefix, m) : -1;
    free(prefix);
    if (rc != 0) {
        s->host->set_error(err,
                           "table %s: marker of %s[%" PRId32 "]: out of memory "
                           "or a stored batch id longer than %d bytes",
                           s->table.root, m->topic, m->partition,
                           TM_BATCH_ID_MAX - 1);
        return TM_RETRY;
    }
    return TM_OK;
}

/* Every marker of the loaded version into markers. */
static tm_status read_all(ice_sink *s, tm_marker *markers, size_t n,
                          tm_error *err) {
    for (size_t i = 0; i < n; i++) {
        tm_status r = ice_marker_read(s, TM_ELEM(tm_marker, markers, i), err);
        if (r != TM_OK)
            return r;
    }
    return TM_OK;
}

/* Each connector's "shared_table" as of its last claim, in the table
 * properties: ICE_SHARED_PREFIX "<connector>" = "true" or "false". */
#define ICE_SHARED_PREFIX "tidemark.shared-table."

/* The connector of marker key KEY, through the one reader of marker keys
 * (a view holding that key alone): 1 (*name allocated), 0 not a marker
 * key, -1 out of memory. */
static int connector_of_key(const char *key, char **name) {
    json_t *view = json_pack("{s:{s:s}}", "properties", key, "");
    if (!view)
        return -1;
    int rc = ice_marker_other_connector(view, "", name);
    json_decref(view);
    return rc;
}

/* Whether connector NAME recorded "shared_table": true: 1, 0, -1 oom. */
static int consented(json_t *props, const char *name) {
    char *key = ice_strfmt(ICE_SHARED_PREFIX "%s", name);
    if (!key)
        return -1;
    const char *v = json_string_value(json_object_get(props, key));
    free(key);
    return v && strcmp(v, "true") == 0;
}

/* A connector other than ME whose markers META holds and that did not
 * consent to sharing: 1 (*other allocated), 0 none, -1 out of memory. */
static int unconsented_other(json_t *meta, const char *me, char **other) {
    json_t *props = json_object_get(meta, "properties");
    json_t *srcs[2] = {
        props, json_object_get(ice_meta_current_snapshot(meta), "summary")};
    *other = NULL;
    for (int k = 0; k < 2; k++) {
        const char *key;
        json_t *v;
        json_object_foreach(srcs[k], key, v) {
            char *name = NULL;
            int rc = connector_of_key(key, &name);
            if (rc < 0)
                return -1;
            if (rc == 0)
                continue; /* not a marker key */
            rc = strcmp(name, me) == 0 ? 1 : consented(props, name);
            if (rc == 0) {
                *other = name;
                return 1;
            }
            free(name);
            if (rc < 0)
                return -1;
        }
    }
    return 0;
}

/* Whether SNAP's summary is one of ours (holds an ICE_OWN_KEY_PREFIX key). */
static int ours(json_t *snap) {
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(snap, "summary"), key, v) {
        if (strncmp(key, ICE_OWN_KEY_PREFIX, strlen(ICE_OWN_KEY_PREFIX)) == 0)
            return 1;
    }
    return 0;
}

/* The connector must be the only writer of the table's data snapshots:
 * its markers live only in the summaries of the snapshots it writes,
 * which another engine's snapshot (pyiceberg's append, any engine's
 * overwrite or delete) does not carry, and its manifest lists are not
 * ours to read. A current snapshot that is not ours is refused, naming
 * it, rather than read as "no markers" (a resend taken for new, a gap). */
static tm_status foreign_snapshot(ice_sink *s, tm_status refuse,
                                  tm_error *err) {
    json_t *meta = s->table.meta;
    json_t *snap = ice_meta_current_snapshot(meta);
    if (!snap || ours(snap))
        return TM_OK;
    json_t *sum = json_object_get(snap, "summary");
    const char *op = json_string_value(json_object_get(sum, "operation"));
    const char *engine = json_string_value(json_object_get(sum, "engine-name"));
    /* The newest of ours below it, where main could be rolled back to. */
    json_t *last = snap;
    size_t n = json_array_size(json_object_get(meta, "snapshots"));
    for (size_t i = 0; last && !ours(last) && i < n; i++) { /* n: a cycle */
        int64_t parent = ice_json_int(last, "parent-snapshot-id", -1);
        last = parent >= 0 ? ice_meta_snapshot(meta, parent) : NULL;
    }
    char back[64] = "none kept";
    if (last && ours(last))
        snprintf(back, sizeof back, "%lld",
                 (long long)ice_json_int(last, "snapshot-id", -1));
    s->host->set_error(
        err,
        "table %s: current snapshot %lld (operation \"%.32s\", engine "
        "%.32s) is another engine's: it carries none of the connector's "
        "markers (tidemark's newest below it: %s). The connector must be "
        "the table's only writer of data snapshots (docs/iceberg-lite.md, "
        "\"Catalog\"): roll main back to tidemark's snapshot",
        s->table.root, (long long)ice_json_int(snap, "snapshot-id", -1),
        op ? op : "none", engine ? engine : "unnamed", back);
    return refuse;
}

/* A current snapshot whose markers moved to a later one (marker_keys.h,
 * ICE_MARKERS_MOVED_KEY): main was rolled back to it. Its markers are
 * gone with the move, so it is refused, naming both, rather than read as
 * "no markers" (a resend taken for new). */
static tm_status moved_snapshot(ice_sink *s, tm_status refuse, tm_error *err) {
    json_t *snap = ice_meta_current_snapshot(s->table.meta);
    const char *to = json_string_value(json_object_get(
        json_object_get(snap, "summary"), ICE_MARKERS_MOVED_KEY));
    if (!to)
        return TM_OK;
    s->host->set_error(
        err,
        "table %s: current snapshot %lld was made current again (main "
        "rolled back): its markers moved to snapshot %.24s when that one "
        "was committed, and only the snapshot current when written carries "
        "them (docs/iceberg-lite.md, \"Where the markers live\"): set main "
        "back to snapshot %.24s or its descendants",
        s->table.root, (long long)ice_json_int(snap, "snapshot-id", -1), to,
        to);
    return refuse;
}

/* Without shared_table: any other connector's markers refuse the table.
 * With it: every other connector whose markers the table holds must have
 * recorded "shared_table": true at its claim (the consent of a connector
 * that wrote first is its own, not the newcomer's to give). */
tm_status ice_check_owner(ice_sink *s, tm_status refuse, tm_error *err) {
    tm_status f = foreign_snapshot(s, refuse, err);
    if (f == TM_OK)
        f = moved_snapshot(s, refuse, err);
    if (f != TM_OK)
        return f;
    char *other = NULL;
    const char *me = s->config->connector ? s->config->connector : "";
    int rc = s->set.shared_table
                 ? unconsented_other(s->table.meta, me, &other)
                 : ice_marker_other_connector(s->table.meta, me, &other);
    if (rc < 0) {
        s->host->set_error(err, "table %s: out of memory", s->table.root);
        return TM_RETRY;
    }
    if (rc == 1 && s->set.shared_table) {
        s->host->set_error(
            err,
            "table %s holds the markers of connector \"%s\", which did not "
            "consent to sharing it (its last claim had no \"shared_table\": "
            "true): \"%s\" may not write it; set \"shared_table\": true in "
            "the sink settings of \"%s\" too (it is recorded when it next "
            "claims) if the sharing is meant",
            s->table.root, other, me, other);
        free(other);
        return refuse;
    }
    if (rc == 1) {
        s->host->set_error(
            err,
            "table %s holds the markers of connector \"%s\", not only of "
            "\"%s\": two connectors writing one table each store its rows; "
            "set \"shared_table\": true in the sink settings of both if the "
            "sharing is meant",
            s->table.root, other, me);
        free(other);
        return refuse;
    }
    return TM_OK;
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
    /* A table replaced under the sink stays refused: no retry heals it. */
    return s->table.replaced ? TM_FATAL : TM_RETRY;
}

/* One claim attempt on the current version: 0 published, 1 lost the race,
 * TM status otherwise (negative values mapped by the caller). */
static tm_status claim_once(ice_sink *s, tm_marker *markers, size_t n,
                            uint32_t flags, int *lost, tm_error *err) {
    *lost = 0;
    /* Checked on every attempt: another connector may have claimed or
     * committed since open (both opened a table without markers). */
    tm_status r = ice_check_owner(s, TM_FATAL, err);
    if (r != TM_OK)
        return r;
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
    /* This connector's consent to sharing, as of this claim. */
    char *consent =
        ice_strfmt(ICE_SHARED_PREFIX "%s",
                   s->config->connector ? s->config->connector : "");
    int bad =
        !consent || json_object_set_new(
                        props, consent,
                        json_string(s->set.shared_table ? "true" : "false"));
    free(consent);
    if (bad) {
        json_decref(next);
        s->host->set_error(err, "claim: out of memory");
        return TM_RETRY;
    }
    int64_t seq = ice_json_int(next, "last-sequence-number", 0);
    for (size_t i = 0; i < n; i++) {
        tm_marker *m = TM_ELEM(tm_marker, markers, i);
        tm_marker cur = {.struct_size = sizeof cur,
                         .topic = m->topic,
                         .partition = m->partition};
        char epoch[24];
        if (ice_marker_read(s, &cur, err) != TM_OK) {
            json_decref(next);
            return TM_RETRY;
        }
        if (cur.next_offset == TM_NO_OFFSET || (flags & TM_CLAIM_RESET))
            cur.next_offset = m->next_offset;
        if (flags & TM_CLAIM_RESET) { /* no record known applied there */
            cur.last_offset = TM_NO_OFFSET;
            cur.last_timestamp_ms = -1;
            cur.last_record_hash[0] = '\0';
        }
        cur.epoch = (cur.epoch == TM_NO_EPOCH ? 0 : cur.epoch) + 1;
        char *claimed = ice_strfmt(
            "%lld,%lld,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%s",
            (long long)seq, (long long)cur.next_offset, cur.rows,
            cur.dead_letters, cur.filtered, cur.duplicates, cur.last_batch_id);
        char *lineage =
            ice_strfmt("%lld,%lld,%s", (long long)cur.last_offset,
                       (long long)cur.last_timestamp_ms, cur.last_record_hash);
        char *prefix = ice_marker_prefix(s, m->topic, m->partition);
        snprintf(epoch, sizeof epoch, "%lld", (long long)cur.epoch);
        bad = !claimed || !lineage || !prefix ||
              ice_marker_put(props, prefix, ICE_F_EPOCH, epoch) ||
              ice_marker_put(props, prefix, ICE_F_CLAIMED, claimed) ||
              ice_marker_put(props, prefix, ICE_F_CLAIMED_LAST, lineage);
        free(claimed);
        free(lineage);
        free(prefix);
        if (bad) {
            json_decref(next);
            s->host->set_error(err, "claim: out of memory");
            return TM_RETRY;
        }
    }
    int64_t staged_ms = ice_boot_ms();
    if (ice_meta_stage(&s->table, next, tmp, why, sizeof why) != 0) {
        json_decref(next);
        s->host->set_error(err, "claim: %s", why);
        return TM_RETRY;
    }
    /* Last before the link or swap, as for every writer (docs/
     * iceberg-lite.md, "Vacuum beside writers"): the staged file, the
     * claim's only new file, is there and young. In a catalog the swap
     * publishes it by its name, and a vacuum takes it as an orphan once
     * it looks older than its floor: after a stall past it, unchecked,
     * the row named a deleted file. */
    char late[4400];
    ice_pub_files mine = {.more = {tmp}};
    if (ice_publish_check(&mine, staged_ms, ICE_PUBLISH_MAX_MS, late,
                          sizeof late) != 0) {
        unlink(tmp); /* ENOENT when it was the one gone */
        json_decref(next);
        s->host->set_error(err, "claim: %s", late);
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
    r = read_all(s, markers, n, err);
    if (r != TM_OK)
        return r;
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
    if (r == TM_OK)
        r = foreign_snapshot(s, TM_FATAL, err);
    if (r == TM_OK)
        r = moved_snapshot(s, TM_FATAL, err);
    if (r != TM_OK)
        return r;
    return read_all(s, markers, n, err);
}
