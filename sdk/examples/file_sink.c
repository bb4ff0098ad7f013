/*
 * file_sink.c - the example sink of docs/writing-a-sink.md, and a template:
 * copy it to start a sink of your own.
 *
 *   1. Copy this file to mysink.c.
 *   2. Replace the prefix ex_; set .name (the host loads "mysink" from
 *      mysink.so) and .version in TM_SINK_DEFINE at the bottom.
 *   3. Set .capabilities (TM_CAP_DEAD_LETTERS: every default config needs
 *      it; TM_CAP_DEDUP).
 *   4. Declare your settings in ex_settings and EX_SETTINGS.
 *   5. Replace the store (a database: one transaction for the files);
 *      ex_commit's steps keep their order. Fill in or drop the optional
 *      callbacks at the bottom.
 *   6. Build: cc $(pkg-config --cflags tidemark-sdk) -shared -fPIC \
 *                -o mysink.so mysink.c $(pkg-config --libs tidemark-sdk)
 *   7. Prove it: tidemark-sinkcheck ./mysink.so --expect-skip dedup
 *
 * The store: in the directory of the setting "path", <connector>.log is an
 * append-only journal of lines (rows and dead letters), <connector>.markers
 * the markers and the journal's committed length, replaced atomically
 * (tidemark/store.h); publishing the markers is the commit. Lines (Kafka
 * topic names have no spaces):
 *   r <topic> <partition> <offset> <column values (tms_values_write)>
 *   d <topic> <partition> <offset> <reason>
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#endif
#include <tidemark/sink.h>
#include <tidemark/store.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct ex_sink {
    const tm_host_api *host; /* every call into the host goes through it */
    const tm_sink_config *config;
    char markers[1100], log[1100], lock[1100];
} ex_sink;

typedef struct ex_settings { /* filled by the host from EX_SETTINGS */
    const char *path;        /* lives until close */
} ex_settings;
/* The declared settings: the host checks them, naming the JSON path. */
static const tm_setting EX_SETTINGS[] = {
    TM_SETTING_STRING("path", ex_settings, path, TM_SETTING_REQUIRED, NULL, 1,
                      800, "the directory that holds the state"),
    TM_SETTING_END};

/* open: checks the settings, makes the instance; connects nothing yet. */
static tm_status ex_open(const tm_host_api *host, const tm_sink_config *config,
                         void **sink, tm_error *err) {
    ex_settings set;
    if (host->settings_fill(config->settings, EX_SETTINGS, &set, sizeof set,
                            err) != 0)
        return TM_INVALID;
    const char *dir = set.path, *name = config->connector;
    if (access(dir, W_OK) != 0 || strchr(name, '/') || strlen(name) > 200) {
        host->set_error(err, "setting \"path\": not a writable directory, or "
                             "the connector name is not a plain file name");
        return TM_INVALID;
    }
    ex_sink *s = calloc(1, sizeof *s);
    if (!s) {
        host->set_error(err, "out of memory");
        return TM_FATAL;
    }
    s->host = host, s->config = config;
    snprintf(s->markers, sizeof s->markers, "%s/%s.markers", dir, name);
    snprintf(s->log, sizeof s->log, "%s/%s.log", dir, name);
    snprintf(s->lock, sizeof s->lock, "%s/%s.lock", dir, name);
    *sink = s;
    return TM_OK;
}

/* close: releases everything of the instance. */
static void ex_close(void *sink) {
    free(sink);
}

/* claim: in one atomic step, creates the missing markers and raises every
 * given partition's epoch (fencing older owners); returns what is stored. */
static tm_status ex_claim(void *sink, tm_marker *markers, size_t n,
                          uint32_t flags, tm_error *err) {
    ex_sink *s = sink;
    tms_markers ms;
    int lock = tms_lock(s->host, s->lock, err); /* one owner at a time */
    if (lock < 0)
        return TM_RETRY;
    tm_status rc = tms_load(s->host, s->markers, &ms, err);
    if (rc == TM_OK)
        rc = tms_claim(s->host, &ms, markers, n, flags, err);
    if (rc == TM_OK)
        rc = tms_save(s->host, s->markers, &ms, 0, err);
    tms_markers_free(&ms);
    close(lock);
    return rc;
}

/* read_markers: reads only: no lock, no epoch, no write. */
static tm_status ex_read_markers(void *sink, tm_marker *markers, size_t n,
                                 tm_error *err) {
    ex_sink *s = sink;
    tms_markers ms;
    tm_status rc = tms_load(s->host, s->markers, &ms, err);
    for (size_t i = 0; rc == TM_OK && i < n; i++) {
        tm_marker *m = TM_ELEM(tm_marker, markers, i);
        tms_fill(m, tms_find(&ms, m->topic, m->partition));
    }
    tms_markers_free(&ms);
    return rc;
}

/* The batch as journal lines into f; each range's marker advanced. */
static void ex_effects(ex_sink *s, const tm_batch *b, tm_marker *stored,
                       FILE *f) {
    for (size_t i = 0; i < b->nranges; i++) {
        const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
        uint64_t rows = 0, dead = 0;
        for (size_t j = 0; j < b->nrecords; j++) {
            const tm_record *r = TM_CELEM(tm_record, b->records, j);
            if (r->range != i)
                continue;
            fprintf(f, "r %s %" PRId32 " %" PRId64, g->topic, g->partition,
                    r->offset);
            tms_values_write(f, s->config->columns, s->config->ncolumns,
                             r->values);
            fputc('\n', f);
            rows++;
        }
        for (size_t j = 0; j < b->ndead_letters; j++) {
            const tm_dead_letter *d =
                TM_CELEM(tm_dead_letter, b->dead_letters, j);
            if (d->range == i) {
                fprintf(f, "d %s %" PRId32 " %" PRId64 " %s\n", g->topic,
                        g->partition, d->offset, tm_dl_reason_name(d->reason));
                dead++;
            }
        }
        s->host->marker_advance(&stored[i], b, i, rows, dead, 0);
    }
}

/* commit: the protocol's steps, in this order, whatever the store. */
static tm_status ex_commit(void *sink, const tm_batch *b, tm_error *err) {
    ex_sink *s = sink;
    tms_markers ms = {0};
    tms_journal j = {.fd = -1};
    tm_marker *stored = NULL;
    char *buf = NULL;
    size_t len = 0;
    s->host->fault(TM_FAULT_BEFORE_BEGIN);
    int lock = tms_lock(s->host, s->lock, err); /* 1. lock the markers */
    if (lock < 0)
        return TM_RETRY;
    tm_status rc = tms_load(s->host, s->markers, &ms, err);
    if (rc == TM_OK)
        rc = tms_stored(s->host, &ms, b, &stored, err);
    /* 2. the host's check decides; ALREADY/FENCED/CONFLICT write nothing */
    if (rc == TM_OK)
        rc = s->host->marker_check(b, stored, err);
    /* 3. the effects, appended and made durable (a torn tail is cut) */
    if (rc == TM_OK)
        rc = tms_journal_open(s->host, s->log, ms.committed, &j, err);
    FILE *f = rc == TM_OK ? open_memstream(&buf, &len) : NULL;
    if (f)
        ex_effects(s, b, stored, f);
    if (rc == TM_OK && (!f || fclose(f) != 0)) {
        s->host->set_error(err, "batch %s: out of memory", b->batch_id);
        rc = TM_FATAL;
    }
    if (rc == TM_OK)
        rc = tms_journal_append(s->host, &j, buf, len, err);
    if (rc == TM_OK)
        rc = tms_journal_sync(s->host, &j, err);
    /* 4. markers and length published: the commit (after_marker: tms_save) */
    if (rc == TM_OK) {
        s->host->fault(TM_FAULT_AFTER_EFFECTS);
        tms_update(&ms, b, stored);
        ms.committed = j.len;
        rc = tms_save(s->host, s->markers, &ms, 1, err);
    }
    if (rc == TM_OK)
        s->host->fault(TM_FAULT_AFTER_COMMIT);
    free(buf);
    tms_journal_close(&j);
    free(stored);
    tms_markers_free(&ms);
    close(lock);
    return rc;
}

/* scan: a partition's committed rows and dead letters, by offset. */
static tm_status ex_scan(void *sink, const char *topic, int32_t partition,
                         void *emit_ctx, tm_error *err) {
    ex_sink *s = sink;
    tms_markers ms;
    char *text = NULL;
    size_t len = 0, n = 0, lines = 0, nc = s->config->ncolumns;
    tm_scan_item *items = NULL;
    tm_value *vals = NULL; /* nc per line; strings point into text */
    tm_status rc = tms_load(s->host, s->markers, &ms, err);
    if (rc == TM_OK)
        rc = tms_journal_read(s->host, s->log, ms.committed, &text, &len, err);
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    if (rc == TM_OK && (!(items = calloc(lines + 1, sizeof *items)) ||
                        !(vals = calloc(lines * nc + 1, sizeof *vals)))) {
        s->host->set_error(err, "scan: out of memory");
        rc = TM_FATAL;
    }
    for (char *save = NULL, *line = vals ? strtok_r(text, "\n", &save) : NULL;
         line; line = strtok_r(NULL, "\n", &save)) {
        char kind, t[TMS_TOPIC_MAX], reason[64];
        int32_t part;
        int64_t off;
        int at = 0;
        if (sscanf(line, "%c %255s %" SCNd32 " %" SCNd64 "%n", &kind, t, &part,
                   &off, &at) < 4 ||
            part != partition || strcmp(t, topic) != 0)
            continue;
        tm_scan_item *it = &items[n]; /* zeroed by calloc */
        tm_value *v = &vals[nc * n++];
        it->struct_size = sizeof *it, it->kind = TM_ITEM_ROW;
        it->topic = topic, it->partition = partition, it->offset = off;
        if (kind == 'd' && sscanf(line + at, "%63s", reason) == 1) {
            it->kind = TM_ITEM_DEAD_LETTER;
            it->reason = tm_dl_reason_from_name(reason);
        } else if (tms_values_parse(line + at, s->config->columns, nc, v) == 0)
            it->values = v, it->nvalues = nc; /* rows give back their values */
    }
    tms_emit_sorted(s->host, items, n, emit_ctx);
    free(vals);
    free(items);
    free(text);
    tms_markers_free(&ms);
    return rc;
}

TM_SINK_DEFINE(.name = "example_file", .version = "2.0.0",
               .capabilities = TM_CAP_DEAD_LETTERS, .open = ex_open,
               .claim = ex_claim, .read_markers = ex_read_markers,
               .commit = ex_commit, .close = ex_close, .scan = ex_scan,
               .validate = NULL,  /* optional: checks a config (validate) */
               .interrupt = NULL, /* optional: a call in progress gives up */
               .settings = EX_SETTINGS) /* what `tidemark plugins` shows */
