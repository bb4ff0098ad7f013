#include "verify/verify.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/batch_builder.h"
#include "kafka/message_view.h"
#include "kafka/partition_reader.h"
#include "kafka/partitions.h"
#include "services/error.h"
#include "services/host_services.h"
#include "verify/cdc_key.h"
#include "verify/cleanup_policy.h"
#include "verify/dlq_index.h"

#define KAFKA_TIMEOUT_MS 10000

/* One stored row or dead letter, as the sink's scan gave it. */
typedef struct item {
    int64_t offset;
    tm_item_kind kind;
    char *identity; /* rows with dedup, else NULL */
} item;

typedef struct items {
    item *v;
    size_t n, cap;
    int oom;
} items;

/* A stored business key and where it is. */
typedef struct key_at {
    const char *identity;
    size_t part;
    int64_t offset;
} key_at;

typedef struct run {
    const tm_connector_config *cfg;
    tm_verify_result *out;
    items *stored; /* per partition */
    key_at *keys;  /* sorted by identity */
    size_t nkeys;
    tm_batch_builder *bb; /* predicts each Kafka record's outcome */
    size_t part;          /* the partition being walked */
    size_t next_item;     /* merge position in stored[part] */
    int64_t last_offset;
    int oom;
    /* With "dead_letters": {"sink": false}: the dead letters the topic
     * holds, the only trace of those offsets (verify/dlq_index.c). */
    int dlq_only;
    tm_dlq_index dlq;
    /* A change-data-capture mapping: per key of the partition being
     * walked, its last event below the marker (cdc_event). */
    json_t *cdc_last;
} run;

static void problem(tm_verify_result *r, const char *fmt, ...) TM_PRINTF(2, 3);
static void problem(tm_verify_result *r, const char *fmt, ...) {
    if (r->nproblems < TM_VERIFY_MAX_PROBLEMS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->problems[r->nproblems], sizeof r->problems[0], fmt, ap);
        va_end(ap);
    }
    r->nproblems++;
}

static int collect(void *user, const tm_scan_item *it) {
    items *s = user;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        item *nv = realloc(s->v, cap * sizeof *nv);
        if (!nv) {
            s->oom = 1;
            return 1;
        }
        s->v = nv;
        s->cap = cap;
    }
    item *e = &s->v[s->n];
    e->offset = it->offset;
    e->kind = it->kind;
    e->identity = NULL;
    if (it->kind == TM_ITEM_ROW && it->identity &&
        !(e->identity = strdup(it->identity))) {
        s->oom = 1;
        return 1;
    }
    s->n++;
    return 0;
}

static int by_offset(const void *a, const void *b) {
    const item *x = a, *y = b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

static int by_identity(const void *a, const void *b) {
    const key_at *x = a, *y = b;
    return strcmp(x->identity, y->identity);
}

/* Every stored business key, sorted; a key stored twice is a problem. */
static int index_keys(run *R) {
    size_t n = 0;
    for (size_t p = 0; p < R->out->nparts; p++)
        for (size_t i = 0; i < R->stored[p].n; i++)
            n += R->stored[p].v[i].identity != NULL;
    R->keys = calloc(n ? n : 1, sizeof *R->keys);
    if (!R->keys)
        return -1;
    for (size_t p = 0; p < R->out->nparts; p++)
        for (size_t i = 0; i < R->stored[p].n; i++)
            if (R->stored[p].v[i].identity)
                R->keys[R->nkeys++] = (key_at){R->stored[p].v[i].identity, p,
                                               R->stored[p].v[i].offset};
    if (R->nkeys > 1)
        qsort(R->keys, R->nkeys, sizeof *R->keys, by_identity);
    for (size_t i = 1; i < R->nkeys; i++)
        if (strcmp(R->keys[i].identity, R->keys[i - 1].identity) == 0) {
            const key_at *a = &R->keys[i - 1], *b = &R->keys[i];
            R->out->duplicate_keys++;
            problem(R->out,
                    "business key %s stored twice: %s [%" PRId32
                    "] offset %" PRId64 " and %s [%" PRId32 "] offset %" PRId64,
                    a->identity, R->out->parts[a->part].topic,
                    R->out->parts[a->part].partition, a->offset,
                    R->out->parts[b->part].topic,
                    R->out->parts[b->part].partition, b->offset);
        }
    return 0;
}

static int key_stored(const run *R, const char *identity) {
    key_at k = {identity, 0, 0};
    return R->nkeys &&
           bsearch(&k, R->keys, R->nkeys, sizeof *R->keys, by_identity);
}

/* What the connector's own mapping makes of this record: 0 row (identity
 * set with dedup; *rec the record, valid until the next predict), 1 dead
 * letter, 2 filtered, -1 out of memory. */
static int predict(run *R, const rd_kafka_message_t *m, const char **identity,
                   const tm_record **rec) {
    tm_verify_partition *vp = &R->out->parts[R->part];
    tm_bb_reset(R->bb, "verify", 0);
    int r = tm_bb_range(R->bb, vp->topic, vp->partition, m->offset, 1);
    tm_header_view hv[TM_MAX_HEADERS];
    tm_msg_view v;
    int truncated;
    tm_kafka_message_view(m, vp->topic, vp->partition, hv, &v, &truncated);
    int added = r < 0 ? -1 : tm_bb_add(R->bb, (uint32_t)r, &v);
    if (added == -2) {
        /* A schema change the host stops at (a mapping without a column
         * list): the operator changed the table and the host resumed
         * from this event with no columns learnt, so predict it so. */
        tm_batch_builder *fresh = tm_bb_new(R->cfg);
        if (!fresh)
            return -1;
        tm_bb_free(R->bb);
        R->bb = fresh;
        tm_bb_reset(R->bb, "verify", 0);
        r = tm_bb_range(R->bb, vp->topic, vp->partition, m->offset, 1);
        added = r < 0 ? -1 : tm_bb_add(R->bb, (uint32_t)r, &v);
    }
    if (added != 0)
        return -1;
    const tm_batch *b = tm_bb_batch(R->bb);
    if (!b)
        return -1;
    if (b->nrecords == 1) {
        *rec = TM_CELEM(tm_record, b->records, 0);
        *identity = (*rec)->identity;
        return 0;
    }
    return b->ndead_letters == 1 ? 1 : 2;
}

/* The merge of Kafka's records (in offset order) with the stored items
 * (sorted by offset): each stored offset must be a record Kafka holds,
 * stored once; each record Kafka holds must be stored or accounted for. */
static void stored_before(run *R, int64_t offset) {
    items *s = &R->stored[R->part];
    tm_verify_partition *vp = &R->out->parts[R->part];
    while (R->next_item < s->n && s->v[R->next_item].offset < offset) {
        int64_t o = s->v[R->next_item].offset;
        R->next_item++;
        if (vp->compacted_topic && o >= vp->from && o < vp->marker) {
            /* The cleaner removes records after they were stored: the
             * sink keeps them, Kafka does not. Not a failure; it cannot
             * be told from a row that was never in Kafka either. */
            vp->compacted++;
            continue;
        }
        vp->unexpected++;
        problem(R->out,
                "%s [%" PRId32 "] offset %" PRId64
                ": stored, but Kafka holds no such record below the marker "
                "%" PRId64,
                vp->topic, vp->partition, o, vp->marker);
    }
}

/* ---- change events (docs/exactly-once.md, "Deletes") ----
 * A key's row holds its last event: the rows of its earlier events were
 * replaced, and a delete leaves none. So an event absent from the sink is
 * accounted for when a later event of its key is below the marker (it was
 * superseded) or when it is a delete; a stored row must be its key's last
 * event; the last event of every key, an upsert, must be stored. The
 * markers say how far; the keys say which offsets may be gone. */

#define CDC_STORED 1
#define CDC_DELETE 2

/* rec's key, by the columns of the batch that holds it (a mapping
 * without a column list has them from the events' schemas). */
static char *cdc_key(const run *R, const tm_record *rec) {
    const tm_batch *b = tm_bb_batch(R->bb);
    if (b && b->columns)
        return tm_verify_cdc_key(b->columns, b->ncolumns, rec->values);
    return tm_verify_cdc_key(R->cfg->mapping.columns, R->cfg->mapping.ncolumns,
                             rec->values);
}

/* Notes an event of the partition (in offset order); 0, or -1 OOM. */
static int cdc_event(run *R, const tm_record *rec, int64_t offset, int stored) {
    tm_verify_partition *vp = &R->out->parts[R->part];
    char *key = cdc_key(R, rec);
    if (!key)
        return -1;
    json_t *prev = json_object_get(R->cdc_last, key);
    if (prev && (json_integer_value(json_array_get(prev, 1)) & CDC_STORED)) {
        vp->gaps++;
        problem(R->out,
                "%s [%" PRId32 "] key %s: its row is from offset %" PRId64
                ", but its later event at offset %" PRId64
                " is below the marker and not applied",
                vp->topic, vp->partition, key,
                (int64_t)json_integer_value(json_array_get(prev, 0)), offset);
    }
    int flags = (stored ? CDC_STORED : 0) |
                (TM_RECORD_OP(rec) == TM_OP_DELETE ? CDC_DELETE : 0);
    if (!stored)
        vp->superseded++; /* until cdc_finish finds it the last upsert */
    json_t *now = json_pack("[Ii]", (json_int_t)offset, flags);
    int rc =
        now && json_object_set_new_nocheck(R->cdc_last, key, now) == 0 ? 0 : -1;
    free(key);
    return rc;
}

/* The partition's keys: the last event of each, an upsert, is stored. */
static void cdc_finish(run *R) {
    tm_verify_partition *vp = &R->out->parts[R->part];
    const char *key;
    json_t *last;
    json_object_foreach(R->cdc_last, key, last) {
        int flags = (int)json_integer_value(json_array_get(last, 1));
        int64_t offset = json_integer_value(json_array_get(last, 0));
        if ((flags & CDC_DELETE) && (flags & CDC_STORED)) {
            vp->unexpected++;
            problem(R->out,
                    "%s [%" PRId32 "] offset %" PRId64
                    ": a delete of key %s, stored as a row",
                    vp->topic, vp->partition, offset, key);
        } else if (!(flags & (CDC_DELETE | CDC_STORED))) {
            vp->superseded--;
            vp->gaps++;
            problem(R->out,
                    "%s [%" PRId32 "] offset %" PRId64
                    ": the last event of key %s, below the marker, but its "
                    "row is not in the sink",
                    vp->topic, vp->partition, offset, key);
        }
    }
    json_object_clear(R->cdc_last);
}

static int on_record(void *user, const rd_kafka_message_t *m) {
    run *R = user;
    tm_verify_partition *vp = &R->out->parts[R->part];
    items *s = &R->stored[R->part];
    vp->kafka_records++;
    stored_before(R, m->offset);
    size_t copies = 0, rows = 0;
    while (R->next_item < s->n && s->v[R->next_item].offset == m->offset) {
        copies++;
        rows += s->v[R->next_item].kind == TM_ITEM_ROW;
        R->next_item++;
    }
    if (copies > 1) {
        vp->stored_twice += copies - 1;
        problem(R->out, "%s [%" PRId32 "] offset %" PRId64 ": stored %zu times",
                vp->topic, vp->partition, m->offset, copies);
    }
    /* A change event the sink made a dead letter (the table refused it)
     * had no effect on its key's row: not an event of the key. */
    if (copies > 0 && (!R->cdc_last || rows == 0))
        return 0;
    const char *identity = NULL;
    const tm_record *rec = NULL;
    int outcome = predict(R, m, &identity, &rec);
    if (outcome < 0 || (outcome == 0 && R->cdc_last &&
                        cdc_event(R, rec, m->offset, rows > 0) != 0)) {
        R->oom = 1;
        return 1;
    }
    if (copies > 0 || (outcome == 0 && R->cdc_last))
        return 0;
    if (outcome == 2) {
        vp->filtered++;
    } else if (outcome == 0 && identity && key_stored(R, identity)) {
        vp->duplicates++;
    } else if (outcome == 1 && R->dlq_only &&
               tm_dlq_index_has(&R->dlq, vp->topic, m)) {
        vp->dead_letters++; /* delivered to the dead-letter topic only */
    } else {
        vp->gaps++;
        problem(R->out,
                "%s [%" PRId32 "] offset %" PRId64
                ": in Kafka, below the marker, but not in the sink (a %s, "
                "not filtered%s%s%s)",
                vp->topic, vp->partition, m->offset,
                outcome == 0 ? "row" : "dead letter",
                identity ? ", its business key not stored" : "",
                outcome == 1 && R->dlq_only ? ", nor in the dead-letter topic "
                                            : "",
                outcome == 1 && R->dlq_only ? R->cfg->dead_letters.topic : "");
    }
    return 0;
}

static int scan_all(run *R, tm_sink_instance *si, char *errstr,
                    size_t errsize) {
    for (size_t p = 0; p < R->out->nparts; p++) {
        tm_verify_partition *vp = &R->out->parts[p];
        if (!vp->claimed)
            continue;
        /* Offsets and business keys only: no sink need read, convert or
         * hold the rows' values for verify. */
        tm_emit_target target = {
            .fn = collect, .user = &R->stored[p], .no_values = 1};
        tm_error err = tm_error_init();
        tm_status st =
            si->api->scan(si->sink, vp->topic, vp->partition, &target, &err);
        if (R->stored[p].oom) {
            snprintf(errstr, errsize, "out of memory reading the sink");
            return -1;
        }
        if (st != TM_OK) {
            snprintf(errstr, errsize, "%s [%" PRId32 "]: scan: %s: %s",
                     vp->topic, vp->partition, tm_status_name(st), err.message);
            return -1;
        }
        if (R->stored[p].n > 1)
            qsort(R->stored[p].v, R->stored[p].n, sizeof(item), by_offset);
        for (size_t i = 0; i < R->stored[p].n; i++) {
            if (R->stored[p].v[i].kind == TM_ITEM_ROW)
                vp->rows++;
            else
                vp->dead_letters++;
        }
    }
    return 0;
}

static int setup(run *R, const tm_connector_config *cfg, tm_sink_instance *si,
                 rd_kafka_t *rk, char *errstr, size_t errsize) {
    tm_verify_result *out = R->out;
    rd_kafka_topic_partition_list_t *list = NULL;
    if (tm_kafka_list_partitions(rk, cfg, KAFKA_TIMEOUT_MS, &list, errstr,
                                 errsize) != 0)
        return -1;
    out->nparts = (size_t)list->cnt;
    out->parts = calloc(out->nparts ? out->nparts : 1, sizeof *out->parts);
    tm_marker *m = calloc(out->nparts ? out->nparts : 1, sizeof *m);
    R->stored = calloc(out->nparts ? out->nparts : 1, sizeof *R->stored);
    int rc = -1;
    if (!out->parts || !m || !R->stored) {
        snprintf(errstr, errsize, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < out->nparts; i++) {
        snprintf(out->parts[i].topic, sizeof out->parts[i].topic, "%s",
                 list->elems[i].topic);
        out->parts[i].partition = list->elems[i].partition;
        m[i].struct_size = sizeof m[i];
        m[i].topic = out->parts[i].topic;
        m[i].partition = out->parts[i].partition;
    }
    tm_error err = tm_error_init();
    tm_status st = si->api->read_markers(si->sink, m, out->nparts, &err);
    if (st != TM_OK) {
        snprintf(errstr, errsize, "reading the sink's markers: %s: %s",
                 tm_status_name(st), err.message);
        goto done;
    }
    for (size_t i = 0; i < out->nparts; i++) {
        tm_verify_partition *vp = &out->parts[i];
        vp->m = m[i];
        vp->m.topic = NULL; /* points into m, freed below */
        vp->claimed = m[i].epoch != TM_NO_EPOCH;
        int64_t low = 0, high = 0;
        if (vp->claimed &&
            tm_kafka_watermarks(rk, vp->topic, vp->partition, KAFKA_TIMEOUT_MS,
                                &low, &high, errstr, errsize) != 0)
            goto done;
        vp->from = low;
        vp->marker = m[i].next_offset;
        /* once per topic: the partitions of a topic are listed together */
        if (vp->claimed && i > 0 &&
            strcmp(out->parts[i - 1].topic, vp->topic) == 0 &&
            out->parts[i - 1].claimed) {
            vp->compacted_topic = out->parts[i - 1].compacted_topic;
        } else if (vp->claimed &&
                   (vp->compacted_topic = tm_verify_topic_compacted(
                        rk, vp->topic, KAFKA_TIMEOUT_MS, errstr, errsize)) <
                       0) {
            goto done;
        }
    }
    rc = 0;
done:
    free(m);
    rd_kafka_topic_partition_list_destroy(list);
    return rc;
}

/* 1 when the sink's markers still read as they did before the scan: no
 * commit landed in between, so the scan and the markers agree. */
static int markers_unchanged(const tm_verify_result *out,
                             tm_sink_instance *si) {
    if (out->nparts == 0)
        return 1;
    tm_marker *m = calloc(out->nparts, sizeof *m);
    if (!m)
        return 0;
    for (size_t i = 0; i < out->nparts; i++) {
        m[i].struct_size = sizeof m[i];
        m[i].topic = out->parts[i].topic;
        m[i].partition = out->parts[i].partition;
    }
    tm_error err = tm_error_init();
    int same = si->api->read_markers(si->sink, m, out->nparts, &err) == TM_OK;
    for (size_t i = 0; same && i < out->nparts; i++)
        same = m[i].next_offset == out->parts[i].m.next_offset &&
               m[i].epoch == out->parts[i].m.epoch;
    free(m);
    return same;
}

static int verify_once(const tm_connector_config *cfg,
                       const tm_verify_dl_groups *g, tm_sink_instance *si,
                       rd_kafka_t *rk, tm_verify_result *out, char *errstr,
                       size_t errsize, int *moved);

/* A host may be committing while we look: the markers are read before and
 * after the scan, and the whole look is taken again when they moved. */
#define VERIFY_ATTEMPTS 5

/* Whether some partition of r has a gap. */
static int any_gap(const tm_verify_result *r) {
    for (size_t i = 0; i < r->nparts; i++)
        if (r->parts[i].gaps)
            return 1;
    return 0;
}

int tm_verify_run(const tm_connector_config *cfg, const tm_verify_dl_groups *g,
                  tm_sink_instance *si, rd_kafka_t *rk, tm_verify_result *out,
                  char *errstr, size_t errsize) {
    for (int attempt = 1; attempt <= VERIFY_ATTEMPTS; attempt++) {
        int moved = 0;
        if (verify_once(cfg, g, si, rk, out, errstr, errsize, &moved) != 0)
            return -1;
        if (!moved)
            return 0;
        tm_verify_result_free(out);
    }
    snprintf(errstr, errsize,
             "the sink's markers moved during each of %d attempts: a host "
             "is committing; verify when the connector is caught up or "
             "stopped",
             VERIFY_ATTEMPTS);
    return -1;
}

static int verify_once(const tm_connector_config *cfg,
                       const tm_verify_dl_groups *g, tm_sink_instance *si,
                       rd_kafka_t *rk, tm_verify_result *out, char *errstr,
                       size_t errsize, int *moved) {
    memset(out, 0, sizeof *out);
    if (!si->api->scan) {
        snprintf(errstr, errsize,
                 "plugin \"%s\" has no scan callback: its store cannot be "
                 "read back, so it cannot be verified",
                 si->api->name);
        return -1;
    }
    run R = {.cfg = cfg, .out = out};
    int rc = -1;
    if (setup(&R, cfg, si, rk, errstr, errsize) != 0 ||
        scan_all(&R, si, errstr, errsize) != 0)
        goto done;
    if (!markers_unchanged(out, si)) {
        *moved = 1;
        rc = 0;
        goto done;
    }
    if (cfg->mapping.format != TM_FORMAT_PLAIN && !(R.cdc_last = json_object()))
        goto oom;
    if (index_keys(&R) != 0 || !(R.bb = tm_bb_new(cfg))) {
    oom:
        snprintf(errstr, errsize, "out of memory");
        goto done;
    }
    /* Read after the markers: a dead letter is confirmed in the topic
     * before the sink commit that moves the marker past it. */
    R.dlq_only = !cfg->dead_letters.sink && cfg->dead_letters.topic;
    if (R.dlq_only &&
        tm_dlq_index_load(cfg, g->groups, g->n, rk, KAFKA_TIMEOUT_MS, &R.dlq,
                          errstr, errsize) != 0)
        goto done;
    for (size_t p = 0; p < out->nparts; p++) {
        tm_verify_partition *vp = &out->parts[p];
        if (!vp->claimed)
            continue;
        if (vp->marker < vp->from) {
            problem(out,
                    "%s [%" PRId32 "]: the marker %" PRId64
                    " is below the log start offset %" PRId64
                    ": records were deleted before they were applied",
                    vp->topic, vp->partition, vp->marker, vp->from);
            vp->gaps += (uint64_t)(vp->from - vp->marker);
            continue;
        }
        R.part = p;
        R.next_item = 0;
        int r = tm_kafka_read_range(cfg, vp->topic, vp->partition, vp->from,
                                    vp->marker, on_record, &R, errstr, errsize);
        if (R.oom) {
            snprintf(errstr, errsize, "out of memory");
            goto done;
        }
        if (r != 0)
            goto done;
        stored_before(&R, INT64_MAX); /* stored at or past the marker */
        if (R.cdc_last)
            cdc_finish(&R);
        /* The records absent from the sink must all be in the marker's
         * filtered and duplicate counts. The marker may count more: after
         * a rewind (offsets --reset-to an earlier offset) the records
         * replayed are counted again (as duplicates, with dedup) while
         * their offsets keep the rows of the first pass. */
        uint64_t absent = vp->filtered + vp->duplicates;
        uint64_t in_marker = vp->m.filtered + vp->m.duplicates;
        /* Change events: the marker's duplicates are the events superseded
         * within their batch, which verify counts with those superseded
         * across batches (vp->superseded, checked by key instead). */
        if (R.cdc_last)
            in_marker = vp->m.filtered;
        /* Without dedup there are no business keys: a replay stores its
         * records again (stored twice) or filters them again, never makes
         * a duplicate, so a marker counting any over-counts; the surplus
         * is then no replay. */
        int keyless_dups =
            !cfg->dedup.enabled && !R.cdc_last && vp->m.duplicates > 0;
        vp->counts_agree = in_marker >= absent && !keyless_dups;
        vp->replayed = vp->counts_agree ? in_marker - absent : 0;
        if (keyless_dups)
            problem(out,
                    "%s [%" PRId32 "]: the marker counts %" PRIu64
                    " duplicates, but the connector is without dedup (no "
                    "business keys): the sink over-counts",
                    vp->topic, vp->partition, vp->m.duplicates);
        else if (!vp->counts_agree)
            problem(out,
                    "%s [%" PRId32 "]: %" PRIu64
                    " records below the marker are absent from the sink "
                    "(%" PRIu64 " filtered, %" PRIu64
                    " duplicates of a stored key), its marker accounts for "
                    "only %" PRIu64 " (%" PRIu64 " filtered + %" PRIu64
                    " duplicates)",
                    vp->topic, vp->partition, absent, vp->filtered,
                    vp->duplicates, in_marker, vp->m.filtered,
                    vp->m.duplicates);
    }
    /* Gaps while dead letters of the connector carry another group: the
     * group renamed, most likely; only the operator can say they are its
     * own (another deployment's have the same bytes). */
    if (R.dlq.other_group && any_gap(out))
        problem(out,
                "%zu dead letter(s) of connector %s in %s carry another "
                "group (%s) and were not counted; if $.kafka.group_id was "
                "renamed from it, verify with --dead-letter-group %s",
                R.dlq.other_group, cfg->name, cfg->dead_letters.topic,
                R.dlq.other_group_name, R.dlq.other_group_name);
    rc = 0;
done:
    tm_bb_free(R.bb);
    json_decref(R.cdc_last);
    tm_dlq_index_free(&R.dlq);
    free(R.keys);
    for (size_t p = 0; R.stored && p < out->nparts; p++) {
        for (size_t i = 0; i < R.stored[p].n; i++)
            free(R.stored[p].v[i].identity);
        free(R.stored[p].v);
    }
    free(R.stored);
    if (rc != 0)
        tm_verify_result_free(out);
    return rc;
}

int tm_verify_ok(const tm_verify_result *r) {
    return r->nproblems == 0;
}

void tm_verify_result_free(tm_verify_result *r) {
    free(r->parts);
    memset(r, 0, sizeof *r);
}
