/* Stores each message, converts it (record_convert.c), then applies the
 * in-batch dedup: identity = canonical key columns, hash = SHA-256 of the
 * canonical mapped columns; the first record of an identity wins, a later
 * one with the same hash is counted as a duplicate, with another hash it
 * is an identity_conflict dead letter. Change events (a CDC format) are
 * all kept, in offset order (add_change). */
#include "convert/batch_builder.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "convert/arena.h"
#include "convert/canonical.h"
#include "convert/dedup_index.h"
#include "convert/headers_json.h"
#include "convert/record_convert.h"
#include "convert/sha256.h"
#include "services/buf.h"

struct tm_batch_builder {
    const tm_connector_config *cfg;
    tm_converter *cv;
    int owns_cv; /* 0: a builder beside another, borrowing its converter */
    tm_arena arena;
    tm_dedup_index index;
    size_t *hash_cols; /* the columns the identity hash covers */
    size_t nhash_cols;

    tm_range *ranges;
    size_t nranges, cap_ranges;
    tm_record *records;
    size_t nrecords, cap_records;
    tm_dead_letter *dls;
    size_t ndls, cap_dls;

    const char *batch_id; /* in the arena */
    int64_t deadline_ms;
    size_t messages, bytes;
    size_t last_range; /* the consumer asks for one range per message */
    int broken;        /* a call failed: no batch until reset */
    size_t nvalues;    /* the values each record of the batch has */
    /* A mapping without a column list: each record's values as widen
     * grows them, and the room they have. */
    struct row_room *rooms;
    size_t cap_rooms;
    const char *stop; /* why tm_bb_add stopped (arena), or NULL */
    /* A mapping without a column list: how many of the converter's
     * columns this batch's events knew (as of its last conversion: a
     * builder beside it may teach the converter more while this batch is
     * at the sink), and the batch's own copy of them, made once it is
     * taken (the converter's grow by realloc). */
    size_t ncolumns_known;
    tm_column *columns;
    size_t ncolumns;
    tm_converter_mark *learnt; /* what the converter knew at reset */
    tm_batch batch;
};

typedef struct row_room {
    tm_value *values; /* records[i].values */
    size_t cap;       /* values it has room for */
} row_room;

/* json mode: every mapped column. raw mode: the message's content (key,
 * value, headers) but not where and when Kafka stored it (topic,
 * partition, offset, timestamp): a resend of the same event as a new
 * message must hash the same, or it would be a conflict. */
static int is_kafka_metadata(const tm_connector_config *cfg, size_t i) {
    static const char *const META[] = {"topic", "partition", "offset",
                                       "timestamp"};
    if (cfg->mapping.mode != TM_MAPPING_RAW)
        return 0;
    for (size_t k = 0; k < sizeof META / sizeof META[0]; k++)
        if (strcmp(cfg->mapping.columns[i].name, META[k]) == 0)
            return 1;
    return 0;
}

static tm_batch_builder *builder_new(const tm_connector_config *cfg,
                                     tm_converter *shared) {
    tm_batch_builder *bb = calloc(1, sizeof *bb);
    if (!bb)
        return NULL;
    bb->cfg = cfg;
    tm_arena_init(&bb->arena);
    tm_dedup_init(&bb->index);
    bb->owns_cv = shared == NULL;
    if (!(bb->cv = shared ? shared : tm_converter_new(cfg)))
        goto fail;
    size_t n = cfg->mapping.ncolumns;
    if (!(bb->hash_cols = calloc(n ? n : 1, sizeof *bb->hash_cols)))
        goto fail;
    for (size_t i = 0; i < n; i++)
        if (!is_kafka_metadata(cfg, i))
            bb->hash_cols[bb->nhash_cols++] = i;
    tm_bb_reset(bb, "", 0);
    if (bb->broken)
        goto fail;
    return bb;
fail:
    tm_bb_free(bb);
    return NULL;
}

tm_batch_builder *tm_bb_new(const tm_connector_config *cfg) {
    return builder_new(cfg, NULL);
}

tm_batch_builder *tm_bb_new_beside(tm_batch_builder *first) {
    return builder_new(first->cfg, first->cv);
}

void tm_bb_free(tm_batch_builder *bb) {
    if (!bb)
        return;
    if (bb->owns_cv)
        tm_converter_free(bb->cv);
    tm_arena_free(&bb->arena);
    tm_dedup_free(&bb->index);
    free(bb->hash_cols);
    free(bb->ranges);
    free(bb->records);
    free(bb->dls);
    free(bb->rooms);
    tm_converter_mark_free(bb->learnt);
    free(bb);
}

void tm_bb_reset(tm_batch_builder *bb, const char *batch_id,
                 int64_t deadline_ms) {
    tm_arena_reset(&bb->arena);
    tm_dedup_clear(&bb->index);
    bb->nranges = bb->nrecords = bb->ndls = 0;
    bb->messages = bb->bytes = 0;
    bb->nvalues = 0; /* widen sets it from the converter's columns */
    bb->columns = NULL;
    bb->ncolumns = 0;
    tm_converter_mark_free(bb->learnt);
    bb->learnt = tm_converter_mark_take(bb->cv);
    if (bb->cfg->mapping.from_schema)
        tm_converter_columns(bb->cv, &bb->ncolumns_known);
    bb->deadline_ms = deadline_ms;
    bb->batch_id = tm_arena_strdup(&bb->arena, batch_id ? batch_id : "");
    bb->broken =
        bb->batch_id == NULL || (bb->cfg->mapping.from_schema && !bb->learnt);
    bb->stop = NULL;
}

int tm_bb_range(tm_batch_builder *bb, const char *topic, int32_t partition,
                int64_t start_offset, int64_t epoch) {
    if (bb->broken)
        return -1;
    if (bb->last_range < bb->nranges) {
        const tm_range *last = &bb->ranges[bb->last_range];
        if (last->partition == partition && strcmp(last->topic, topic) == 0)
            return (int)bb->last_range;
    }
    for (size_t i = 0; i < bb->nranges; i++)
        if (bb->ranges[i].partition == partition &&
            strcmp(bb->ranges[i].topic, topic) == 0)
            return (int)(bb->last_range = i);
    if (bb->nranges >= INT32_MAX)
        return -1;
    tm_range *ranges =
        tm_grow_array(bb->ranges, &bb->cap_ranges, bb->nranges, sizeof *ranges);
    if (!ranges)
        return -1;
    bb->ranges = ranges;
    const char *t = tm_arena_strdup(&bb->arena, topic);
    if (!t)
        return -1;
    tm_range *r = &bb->ranges[bb->nranges];
    memset(r, 0, sizeof *r);
    r->struct_size = (uint32_t)sizeof *r;
    r->topic = t;
    r->partition = partition;
    r->start_offset = r->end_offset = start_offset;
    r->epoch = epoch;
    bb->last_range = bb->nranges;
    return (int)bb->nranges++;
}

void tm_bb_extend(tm_batch_builder *bb, uint32_t range, int64_t end_offset) {
    if (range < bb->nranges && end_offset > bb->ranges[range].end_offset)
        bb->ranges[range].end_offset = end_offset;
}

static int add_dead_letter(tm_batch_builder *bb, uint32_t range,
                           const tm_conv_input *in, tm_dl_reason reason,
                           const char *detail) {
    tm_dead_letter *dls =
        tm_grow_array(bb->dls, &bb->cap_dls, bb->ndls, sizeof *dls);
    if (!dls)
        return -1;
    bb->dls = dls;
    tm_dead_letter *d = &bb->dls[bb->ndls++];
    memset(d, 0, sizeof *d);
    d->struct_size = (uint32_t)sizeof *d;
    d->range = range;
    d->offset = in->offset;
    d->timestamp_ms = in->timestamp_ms;
    d->reason = reason;
    d->detail = detail;
    d->key = in->key;
    d->key_len = in->key_len;
    d->value = in->value;
    d->value_len = in->value_len;
    d->headers_json = in->headers_json;
    return 0;
}

/* A row's identity and hash, into the arena. 0 ok, -1 OOM. */
static int identify(tm_batch_builder *bb, const tm_value *values,
                    const char **identity, const char **hash) {
    const tm_connector_config *cfg = bb->cfg;
    char *id = tm_canonical_array(cfg->mapping.columns, values,
                                  cfg->dedup.key_columns, cfg->dedup.nkey);
    char *all = tm_canonical_array(cfg->mapping.columns, values, bb->hash_cols,
                                   bb->nhash_cols);
    char hex[TM_SHA256_HEX_LEN + 1];
    if (all)
        tm_sha256_hex(all, strlen(all), hex);
    *identity = id ? tm_arena_strdup(&bb->arena, id) : NULL;
    *hash = all ? tm_arena_strdup(&bb->arena, hex) : NULL;
    free(id);
    free(all);
    return *identity && *hash ? 0 : -1;
}

/* A converted row: dedup, then a record, a duplicate or a conflict. */
static int add_row(tm_batch_builder *bb, uint32_t range,
                   const tm_conv_input *in, const tm_value *values) {
    const char *identity = NULL, *hash = NULL;
    if (bb->cfg->dedup.enabled) {
        if (identify(bb, values, &identity, &hash) != 0)
            return -1;
        const tm_dedup_entry *first = NULL;
        int f = tm_dedup_find_or_add(&bb->index, identity, hash, range,
                                     in->offset, &first);
        if (f < 0)
            return -1;
        if (f == 1 && strcmp(first->hash, hash) == 0) {
            bb->ranges[range].duplicates++;
            return 0;
        }
        if (f == 1) {
            const tm_range *r = &bb->ranges[first->range];
            const char *detail = tm_arena_printf(
                &bb->arena,
                "key %s appeared earlier in this batch at %s/%" PRId32
                "@%" PRId64 " with another payload",
                identity, r->topic, r->partition, first->offset);
            if (!detail)
                return -1;
            return add_dead_letter(bb, range, in, TM_DL_IDENTITY_CONFLICT,
                                   detail);
        }
    }
    tm_record *recs = tm_grow_array(bb->records, &bb->cap_records, bb->nrecords,
                                    sizeof *recs);
    if (!recs)
        return -1; /* an index entry without its record: batch is broken */
    bb->records = recs;
    tm_record *rec = &bb->records[bb->nrecords++];
    memset(rec, 0, sizeof *rec);
    rec->struct_size = (uint32_t)sizeof *rec;
    rec->range = range;
    rec->offset = in->offset;
    rec->timestamp_ms = in->timestamp_ms;
    rec->key = in->key;
    rec->key_len = in->key_len;
    rec->value = in->value;
    rec->value_len = in->value_len;
    rec->headers_json = in->headers_json;
    rec->values = values;
    rec->identity = identity;
    rec->identity_hash = hash;
    return 0;
}

/* A change event's row (or delete): every event goes to the sink, in
 * offset order, which applies them as if one at a time. Collapsing a key's
 * events to its last would lose the earlier ones whenever the sink
 * refuses that last one (a dead letter with no effect). */
static int add_change(tm_batch_builder *bb, uint32_t range,
                      const tm_conv_input *in, const tm_value *values,
                      uint32_t op) {
    size_t at = bb->nrecords;
    if (add_row(bb, range, in, values) != 0)
        return -1;
    bb->records[at].op = op;
    return 0;
}

/* The converter's columns grew (a mapping without a column list: by the
 * event just converted to a row): the batch's earlier records get them
 * too, null (columns their events did not have). A record's values grow
 * geometrically, in place while they have room, so a batch in which every
 * event adds a column copies values in proportion to its rows times its
 * columns, not every earlier row per column added (whose memory grew with
 * the cube of the batch). 0, or -1 OOM. */
static int widen(tm_batch_builder *bb) {
    size_t n;
    tm_converter_columns(bb->cv, &n);
    if (n <= bb->nvalues)
        return 0;
    for (size_t r = 0; r < bb->nrecords; r++) {
        row_room *room = &bb->rooms[r];
        if (room->cap < n) {
            /* twice the room, or n: cap < n, a count of columns */
            size_t cap = room->cap > n / 2 ? room->cap * 2 : n;
            if (cap > SIZE_MAX / sizeof *room->values)
                return -1;
            tm_value *v = tm_arena_alloc(&bb->arena, cap * sizeof *v);
            if (!v)
                return -1;
            memcpy(v, room->values, bb->nvalues * sizeof *v);
            room->values = v;
            room->cap = cap;
            bb->records[r].values = v;
        }
        for (size_t i = bb->nvalues; i < n; i++) {
            memset(&room->values[i], 0, sizeof room->values[i]);
            room->values[i].struct_size = (uint32_t)sizeof(tm_value);
            room->values[i].is_null = 1;
        }
    }
    bb->nvalues = n;
    return 0;
}

/* The record just added (a mapping without a column list): its values,
 * bb->nvalues of them, for widen. 0, or -1 OOM. */
static int keep_room(tm_batch_builder *bb, tm_value *values) {
    row_room *rooms = tm_grow_array(bb->rooms, &bb->cap_rooms, bb->nrecords - 1,
                                    sizeof *rooms);
    if (!rooms)
        return -1;
    bb->rooms = rooms;
    bb->rooms[bb->nrecords - 1].values = values;
    bb->rooms[bb->nrecords - 1].cap = bb->nvalues;
    return 0;
}

/* The message's own bytes, copied into the arena. */
static int store(tm_batch_builder *bb, const tm_msg_view *m, const char *topic,
                 tm_conv_input *in) {
    memset(in, 0, sizeof *in);
    in->topic = topic;
    in->partition = m->partition;
    in->offset = m->offset;
    in->timestamp_ms = m->timestamp_ms;
    if (m->key) {
        if (!(in->key = tm_arena_dup(&bb->arena, m->key, m->key_len)))
            return -1;
        in->key_len = m->key_len;
    }
    if (m->value) {
        if (!(in->value = tm_arena_dup(&bb->arena, m->value, m->value_len)))
            return -1;
        in->value_len = m->value_len;
    }
    char *h = NULL;
    if (tm_headers_json_text(m->headers, m->nheaders, &h) != 0)
        return -1;
    if (h) {
        in->headers_json = tm_arena_strdup(&bb->arena, h);
        free(h);
        if (!in->headers_json)
            return -1;
    }
    return 0;
}

size_t tm_bb_message_bytes(const tm_msg_view *m) {
    size_t n = (m->key ? m->key_len : 0) + (m->value ? m->value_len : 0);
    for (size_t i = 0; i < m->nheaders; i++)
        n += (m->headers[i].name ? strlen(m->headers[i].name) : 0) +
             (m->headers[i].value ? m->headers[i].len : 0);
    return n;
}

static int add(tm_batch_builder *bb, uint32_t range, const tm_msg_view *m) {
    if (bb->broken || range >= bb->nranges ||
        m->offset < bb->ranges[range].end_offset)
        return -1;
    tm_conv_input in;
    if (store(bb, m, bb->ranges[range].topic, &in) != 0)
        return -1;
    tm_conv_result res;
    int rc = 0;
    tm_conv_outcome outcome = tm_convert(bb->cv, &bb->arena, &in, &res);
    if (bb->cfg->mapping.from_schema)
        tm_converter_columns(bb->cv, &bb->ncolumns_known);
    /* The columns grow with the schema of an event that converted to a
     * row (no other outcome changes them): the earlier records must have
     * them before a later one comes. */
    if (bb->cfg->mapping.from_schema && outcome == TM_CONV_ROW &&
        widen(bb) != 0)
        return -1;
    size_t had = bb->nrecords;
    switch (outcome) {
    case TM_CONV_ROW:
        rc = bb->cfg->mapping.format != TM_FORMAT_PLAIN
                 ? add_change(bb, range, &in, res.values, res.op)
                 : add_row(bb, range, &in, res.values);
        if (rc == 0 && bb->cfg->mapping.from_schema && bb->nrecords > had)
            rc = keep_room(bb, res.values);
        break;
    case TM_CONV_STOP: bb->stop = res.detail; return -2;
    case TM_CONV_DEAD_LETTER:
        rc = add_dead_letter(bb, range, &in, res.reason, res.detail);
        break;
    case TM_CONV_FILTERED: bb->ranges[range].filtered++; break;
    case TM_CONV_OOM: rc = -1; break;
    }
    if (rc != 0)
        return -1;
    bb->ranges[range].end_offset = m->offset + 1;
    bb->messages++;
    bb->bytes += tm_bb_message_bytes(m);
    return 0;
}

int tm_bb_add(tm_batch_builder *bb, uint32_t range, const tm_msg_view *m) {
    int rc = add(bb, range, m);
    if (rc != 0)
        bb->broken = 1;
    return rc;
}

void tm_bb_unlearn(tm_batch_builder *bb) {
    tm_converter_unlearn(bb->cv, bb->learnt);
}

const char *tm_bb_stopped(const tm_batch_builder *bb) {
    return bb->stop;
}

/* The batch's columns into its arena: the first ncolumns_known of the
 * converter's (later ones are a batch's built after it). 0, -1 OOM. */
static int copy_columns(tm_batch_builder *bb) {
    if (bb->columns && bb->ncolumns == bb->ncolumns_known)
        return 0;
    size_t n;
    const tm_column *all = tm_converter_columns(bb->cv, &n);
    if (bb->ncolumns_known < n)
        n = bb->ncolumns_known;
    bb->ncolumns = 0;
    if (n == 0)
        return 0;
    if (n > SIZE_MAX / sizeof *bb->columns ||
        !(bb->columns = tm_arena_alloc(&bb->arena, n * sizeof *bb->columns)))
        return -1;
    for (size_t i = 0; i < n; i++) {
        bb->columns[i] = all[i];
        if (!(bb->columns[i].name = tm_arena_strdup(&bb->arena, all[i].name)))
            return -1;
    }
    bb->ncolumns = n;
    return 0;
}

const tm_batch *tm_bb_batch(tm_batch_builder *bb) {
    if (bb->broken)
        return NULL;
    tm_batch *b = &bb->batch;
    memset(b, 0, sizeof *b);
    b->struct_size = (uint32_t)sizeof *b;
    b->connector = bb->cfg->name;
    b->batch_id = bb->batch_id;
    b->deadline_ms = bb->deadline_ms;
    b->ranges = bb->ranges;
    b->nranges = bb->nranges;
    b->records = bb->records;
    b->nrecords = bb->nrecords;
    b->dead_letters = bb->dls;
    b->ndead_letters = bb->ndls;
    if (bb->cfg->mapping.from_schema) {
        if (copy_columns(bb) != 0) {
            bb->broken = 1;
            return NULL;
        }
        b->columns = bb->columns;
        b->ncolumns = bb->ncolumns;
    }
    return b;
}

size_t tm_bb_messages(const tm_batch_builder *bb) {
    return bb->messages;
}

size_t tm_bb_memory(const tm_batch_builder *bb) {
    return tm_arena_bytes(&bb->arena);
}

size_t tm_bb_bytes(const tm_batch_builder *bb) {
    return bb->bytes;
}

void tm_bb_get_counts(const tm_batch_builder *bb, tm_bb_counts *out) {
    memset(out, 0, sizeof *out);
    out->rows = bb->nrecords;
    out->dead_letters = bb->ndls;
    for (size_t i = 0; i < bb->nranges; i++) {
        out->filtered += bb->ranges[i].filtered;
        out->duplicates += bb->ranges[i].duplicates;
    }
}
