/* Batches the kit builds itself, as the host would: ranges per partition,
 * records with column values generated from the offset, host-made dead
 * letters. Every struct carries its struct_size so TM_CELEM walks work. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit/lineage.h"
#include "kit.h"

/* An arena: strings and value arrays live until kit_batch_free(). */
typedef struct kit_arena {
    struct kit_arena *next;
    char data[];
} kit_arena;

static void *arena_alloc(kit_batch *kb, size_t size) {
    kit_arena *a = calloc(1, sizeof *a + size);
    if (!a) {
        kb->oom = 1;
        return NULL;
    }
    a->next = kb->arena;
    kb->arena = a;
    return a->data;
}

static char *arena_printf(kit_batch *kb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static char *arena_printf(kit_batch *kb, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    char *s = arena_alloc(kb, strlen(tmp) + 1);
    if (s)
        memcpy(s, tmp, strlen(tmp) + 1);
    return s;
}

void kit_batch_init(kit_batch *kb, const kit_run *run) {
    static unsigned seq;
    memset(kb, 0, sizeof *kb);
    kb->run = run;
    /* Unique per connector across hosts: pid and a sequence. */
    snprintf(kb->batch_id, sizeof kb->batch_id, "sinkcheck-%ld-%u",
             (long)getpid(), ++seq);
    kb->b.struct_size = sizeof(tm_batch);
    kb->b.batch_id = kb->batch_id;
    kb->b.deadline_ms = tm_clock_mono_ms() + 60000;
}

uint32_t kit_batch_range(kit_batch *kb, int part, int64_t start, int64_t end,
                         int64_t epoch) {
    uint32_t i = (uint32_t)kb->b.nranges++;
    kb->ranges[i] = (tm_range){
        .struct_size = sizeof(tm_range),
        .topic = kit_part_topic[part],
        .partition = kit_part_partition[part],
        .start_offset = start,
        .end_offset = end,
        .epoch = epoch,
    };
    return i;
}

/* One value per column, derived from the offset so that a re-built batch
 * carries the same payload. */
static void fill_value(kit_batch *kb, tm_value *v, const tm_column *c,
                       const tm_range *r, int64_t offset) {
    v->struct_size = sizeof *v;
    const char *s = NULL;
    switch (c->type) {
    case TM_TYPE_INT:
    case TM_TYPE_TIMESTAMP: v->v.i = offset; break;
    case TM_TYPE_BOOL: v->v.i = offset % 2; break;
    case TM_TYPE_FLOAT: v->v.f = (double)offset / 2; break;
    case TM_TYPE_JSON:
        s = arena_printf(kb, "{\"offset\":%" PRId64 "}", offset);
        break;
    case TM_TYPE_TEXT:
    case TM_TYPE_BYTES:
        s = arena_printf(kb, "%s %s[%" PRId32 "]@%" PRId64, c->name, r->topic,
                         r->partition, offset);
        break;
    }
    if (s) {
        v->v.s.ptr = s;
        v->v.s.len = strlen(s);
    }
}

void kit_batch_record(kit_batch *kb, uint32_t r, int64_t offset,
                      const char *identity, const char *hash) {
    tm_record *recs = tm_grow_array(kb->records, &kb->cap_records,
                                    kb->b.nrecords, sizeof *recs);
    if (!recs) {
        kb->oom = 1;
        return;
    }
    kb->records = recs;
    const kit_run *run = kb->run;
    const tm_range *g = &kb->ranges[r];
    tm_value *vals = arena_alloc(kb, (run->ncolumns + 1) * sizeof(tm_value));
    char *value = arena_printf(kb, "{\"offset\":%" PRId64 "}", offset);
    char *key = arena_printf(kb, "k%" PRId64, offset);
    if (!vals || !value || !key)
        return;
    for (size_t c = 0; c < run->ncolumns; c++)
        fill_value(kb, &vals[c], &run->columns[c], g, offset);
    kb->records[kb->b.nrecords++] = (tm_record){
        .struct_size = sizeof(tm_record),
        .range = r,
        .offset = offset,
        .timestamp_ms = 1700000000000 + offset,
        .key = key,
        .key_len = strlen(key),
        .value = value,
        .value_len = strlen(value),
        .values = vals,
        .identity = identity ? arena_printf(kb, "%s", identity) : NULL,
        .identity_hash = hash ? arena_printf(kb, "%s", hash) : NULL,
    };
}

void kit_batch_change(kit_batch *kb, uint32_t r, int64_t offset, size_t key_col,
                      int64_t key, uint32_t op) {
    size_t at = kb->b.nrecords;
    kit_batch_record(kb, r, offset, NULL, NULL);
    if (kb->b.nrecords != at + 1)
        return; /* out of memory: kb->oom is set */
    tm_record *rec = &kb->records[at];
    /* the kit's own arena memory, handed out as const */
    tm_value *vals = (tm_value *)(uintptr_t)rec->values;
    for (size_t c = 0; op == TM_OP_DELETE && c < kb->run->ncolumns; c++)
        vals[c].is_null = c != key_col;
    vals[key_col].v.i = key;
    rec->op = op;
}

void kit_batch_dead_letter(kit_batch *kb, uint32_t r, int64_t offset,
                           tm_dl_reason reason, const char *detail) {
    tm_dead_letter *dls =
        tm_grow_array(kb->dls, &kb->cap_dls, kb->b.ndead_letters, sizeof *dls);
    if (!dls) {
        kb->oom = 1;
        return;
    }
    kb->dls = dls;
    kb->dls[kb->b.ndead_letters++] = (tm_dead_letter){
        .struct_size = sizeof(tm_dead_letter),
        .range = r,
        .offset = offset,
        .timestamp_ms = 1700000000000 + offset,
        .reason = reason,
        .detail = detail ? arena_printf(kb, "%s", detail) : NULL,
        .value = "not json",
        .value_len = 8,
    };
}

int kit_batch_seal(kit_batch *kb) {
    kb->b.ranges = kb->ranges;
    kb->b.records = kb->records;
    kb->b.dead_letters = kb->dls;
    /* as the host's commit does: each range's last record, for the marker */
    tm_lineage_fill_ranges(kb->ranges, &kb->b);
    return kb->oom ? -1 : 0;
}

void kit_batch_free(kit_batch *kb) {
    while (kb->arena) {
        kit_arena *next = kb->arena->next;
        free(kb->arena);
        kb->arena = next;
    }
    free(kb->records);
    free(kb->dls);
    kb->records = NULL;
    kb->dls = NULL;
}

int kit_batch_dense(kit_batch *kb, const kit_run *run, const int64_t *start,
                    const int64_t *len, const int64_t *epoch) {
    kit_batch_init(kb, run);
    for (int p = 0; p < KIT_NPARTS; p++) {
        if (len[p] <= 0)
            continue;
        uint32_t r =
            kit_batch_range(kb, p, start[p], start[p] + len[p], epoch[p]);
        for (int64_t o = start[p]; o < start[p] + len[p]; o++)
            kit_batch_record(kb, r, o, NULL, NULL);
    }
    return kit_batch_seal(kb);
}
