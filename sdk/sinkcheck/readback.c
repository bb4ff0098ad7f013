/* Read-back: what the sink stored, seen only through read_markers and scan
 * (never the plugin's return values alone). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"

const char *const kit_part_topic[KIT_NPARTS] = {
    "sinkcheck.orders", "sinkcheck.orders", "sinkcheck.refunds"};
const int32_t kit_part_partition[KIT_NPARTS] = {0, 1, 0};

void kit_markers_init(tm_marker *m, const int64_t *start) {
    for (int i = 0; i < KIT_NPARTS; i++)
        m[i] = (tm_marker){
            .struct_size = sizeof(tm_marker),
            .topic = kit_part_topic[i],
            .partition = kit_part_partition[i],
            .next_offset = start ? start[i] : TM_NO_OFFSET,
            .epoch = TM_NO_EPOCH,
        };
}

tm_status kit_claim(const kit_run *run, void *sink, tm_marker *m,
                    const int64_t *start, uint32_t flags, tm_error *err) {
    kit_markers_init(m, start);
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return run->api->claim(sink, m, KIT_NPARTS, flags, err);
}

tm_status kit_read_markers(const kit_run *run, void *sink, tm_marker *m,
                           tm_error *err) {
    kit_markers_init(m, NULL);
    /* Poison what the sink must fill, so that "left untouched" shows. */
    for (int i = 0; i < KIT_NPARTS; i++) {
        m[i].next_offset = -77;
        m[i].epoch = -77;
    }
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return run->api->read_markers(sink, m, KIT_NPARTS, err);
}

typedef struct scan_sink {
    const kit_run *run;
    kit_part_state *p;
    size_t cap;
    int oom;
    int bad_partition;
} scan_sink;

static int collect(void *user, const tm_scan_item *it) {
    scan_sink *s = user;
    if (s->p->nitems == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        kit_item *n = realloc(s->p->items, cap * sizeof *n);
        if (!n) {
            s->oom = 1;
            return 1;
        }
        s->p->items = n;
        s->cap = cap;
    }
    if (!it->topic || strcmp(it->topic, s->p->marker.topic) != 0 ||
        it->partition != s->p->marker.partition)
        s->bad_partition = 1;
    kit_item *k = &s->p->items[s->p->nitems++];
    memset(k, 0, sizeof *k);
    k->kind = it->kind;
    k->offset = it->offset;
    k->reason = it->kind == TM_ITEM_DEAD_LETTER ? it->reason : 0;
    snprintf(k->identity, sizeof k->identity, "%s",
             it->identity ? it->identity : "");
    if (it->kind == TM_ITEM_ROW && TM_SCAN_ITEM_HAS_VALUES(it) &&
        !(k->values = kit_values_text(s->run, it->values, it->nvalues))) {
        s->oom = 1;
        return 1;
    }
    return 0;
}

char *kit_values_text(const kit_run *run, const tm_value *values, size_t n) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fprintf(f, "%zu values:", n);
    for (size_t i = 0; i < n; i++) {
        const tm_value *v = TM_CELEM(tm_value, values, i);
        tm_type t = i < run->ncolumns ? run->columns[i].type : TM_TYPE_BYTES;
        if (v->is_null) {
            fputs(" null", f);
        } else if (t == TM_TYPE_FLOAT) {
            fprintf(f, " %a", v->v.f);
        } else if (t != TM_TYPE_TEXT && t != TM_TYPE_JSON &&
                   t != TM_TYPE_BYTES) {
            fprintf(f, " %" PRId64, v->v.i);
        } else {
            fputs(" \"", f);
            for (size_t k = 0; k < v->v.s.len; k++) {
                unsigned char c = (unsigned char)v->v.s.ptr[k];
                if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
                    fputc(c, f);
                else
                    fprintf(f, "\\x%02x", c);
            }
            fputc('"', f);
        }
    }
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

int kit_state_read(const kit_run *run, void *sink, kit_state *st,
                   kit_result *res) {
    tm_marker m[KIT_NPARTS];
    tm_error err;
    memset(st, 0, sizeof *st);
    tm_status rc = kit_read_markers(run, sink, m, &err);
    if (rc != TM_OK) {
        kit_fail(res, "read_markers: %s: %s", tm_status_name(rc), err.message);
        return -1;
    }
    if (!run->api->scan) {
        kit_fail(res, "the plugin has no scan(): the kit reads rows back "
                      "through scan");
        return -1;
    }
    for (int i = 0; i < KIT_NPARTS; i++) {
        st->part[i].marker = m[i];
        scan_sink s = {.run = run, .p = &st->part[i]};
        /* With values (ABI 1.4: scan_wants_values says 1): the case
         * "values" compares them with what the kit sent. */
        tm_emit_target target = {.fn = collect, .user = &s, .no_values = 0};
        err.message[0] = '\0';
        rc = run->api->scan(sink, kit_part_topic[i], kit_part_partition[i],
                            &target, &err);
        if (rc != TM_OK || s.oom || s.bad_partition) {
            kit_fail(res, "scan %s[%d]: %s%s", kit_part_topic[i],
                     kit_part_partition[i],
                     s.bad_partition ? "emitted an item of another partition"
                                     : tm_status_name(rc),
                     s.oom ? " (out of memory)" : err.message);
            kit_state_free(st);
            return -1;
        }
        for (size_t k = 1; k < st->part[i].nitems; k++)
            if (st->part[i].items[k].offset < st->part[i].items[k - 1].offset) {
                kit_fail(res, "scan %s[%d]: items not in offset order",
                         kit_part_topic[i], kit_part_partition[i]);
                kit_state_free(st);
                return -1;
            }
    }
    return 0;
}

void kit_state_free(kit_state *st) {
    for (int i = 0; i < KIT_NPARTS; i++) {
        for (size_t k = 0; k < st->part[i].nitems; k++)
            free(st->part[i].items[k].values);
        free(st->part[i].items);
        st->part[i].items = NULL;
        st->part[i].nitems = 0;
    }
}

int kit_state_fresh(const kit_fixture *fx, kit_state *st, kit_result *res) {
    void *sink;
    tm_error err;
    memset(st, 0, sizeof *st);
    tm_status rc = kit_open(fx, NULL, &sink, &err);
    if (rc != TM_OK) {
        kit_fail(res, "open of a fresh instance: %s: %s", tm_status_name(rc),
                 err.message);
        return -1;
    }
    int r = kit_state_read(fx->run, sink, st, res);
    fx->run->api->close(sink);
    return r;
}

static const char *kind_name(tm_item_kind k) {
    return k == TM_ITEM_ROW ? "row" : "dead letter";
}

int kit_state_compare(const kit_state *a, const kit_state *b, char *buf,
                      size_t size) {
    for (int i = 0; i < KIT_NPARTS; i++) {
        const tm_marker *x = &a->part[i].marker, *y = &b->part[i].marker;
        const char *t = kit_part_topic[i];
        int p = kit_part_partition[i];
        if (x->next_offset != y->next_offset || x->epoch != y->epoch ||
            x->rows != y->rows || x->dead_letters != y->dead_letters ||
            x->filtered != y->filtered || x->duplicates != y->duplicates ||
            strcmp(x->last_batch_id, y->last_batch_id) != 0) {
            snprintf(buf, size,
                     "%s[%d] marker changed: next_offset %" PRId64
                     " -> %" PRId64 ", epoch %" PRId64 " -> %" PRId64
                     ", rows %" PRIu64 " -> %" PRIu64 ", dead letters %" PRIu64
                     " -> %" PRIu64 ", last batch '%s' -> '%s'",
                     t, p, x->next_offset, y->next_offset, x->epoch, y->epoch,
                     x->rows, y->rows, x->dead_letters, y->dead_letters,
                     x->last_batch_id, y->last_batch_id);
            return -1;
        }
        if (a->part[i].nitems != b->part[i].nitems) {
            snprintf(buf, size, "%s[%d]: %zu stored items became %zu", t, p,
                     a->part[i].nitems, b->part[i].nitems);
            return -1;
        }
        for (size_t k = 0; k < a->part[i].nitems; k++) {
            const kit_item *u = &a->part[i].items[k], *v = &b->part[i].items[k];
            if (u->kind != v->kind || u->offset != v->offset ||
                u->reason != v->reason || strcmp(u->identity, v->identity)) {
                snprintf(buf, size,
                         "%s[%d]: item %zu changed: %s at %" PRId64
                         " -> %s at %" PRId64,
                         t, p, k, kind_name(u->kind), u->offset,
                         kind_name(v->kind), v->offset);
                return -1;
            }
        }
    }
    return 0;
}

int kit_part_rows_dense(const kit_part_state *p, int64_t from, int64_t to,
                        char *buf, size_t size) {
    int64_t want = from;
    for (size_t k = 0; k < p->nitems; k++) {
        const kit_item *it = &p->items[k];
        if (it->kind != TM_ITEM_ROW)
            continue;
        if (it->offset != want) {
            snprintf(buf, size,
                     "%s[%d]: expected a row at offset %" PRId64
                     ", found %s row at %" PRId64 " (marker at %" PRId64 ")",
                     p->marker.topic, p->marker.partition, want,
                     it->offset < want ? "a duplicate or extra" : "the next",
                     it->offset, p->marker.next_offset);
            return -1;
        }
        want++;
    }
    if (want != to) {
        snprintf(buf, size,
                 "%s[%d]: rows end at offset %" PRId64 ", expected %" PRId64
                 " (marker at %" PRId64 ")",
                 p->marker.topic, p->marker.partition, want, to,
                 p->marker.next_offset);
        return -1;
    }
    return 0;
}

size_t kit_part_count(const kit_part_state *p, tm_item_kind kind,
                      int64_t offset, tm_dl_reason reason) {
    size_t n = 0;
    for (size_t k = 0; k < p->nitems; k++)
        if (p->items[k].kind == kind && p->items[k].offset == offset &&
            (!reason || p->items[k].reason == reason))
            n++;
    return n;
}

size_t kit_part_kind_total(const kit_part_state *p, tm_item_kind kind) {
    size_t n = 0;
    for (size_t k = 0; k < p->nitems; k++)
        n += p->items[k].kind == kind;
    return n;
}
