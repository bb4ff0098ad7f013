/*
 * csv_sink.c - a durable CSV sink built on tidemark/store.h, a test plugin:
 * it proves that a file sink that passes the conformance kit fits in under
 * 300 lines when the SDK's helpers do the marker file and the journal.
 *
 * Files in the setting "path": <connector>.csv (the journal: one CSV line
 * per row or dead letter), <connector>.markers (markers and the journal's
 * committed length, replaced atomically) and <connector>.lock.
 *   row:         r,<topic>,<partition>,<offset>,<timestamp_ms>,<columns...>
 *   dead letter: d,<topic>,<partition>,<offset>,<reason>,<detail>
 * A field is quoted ("...", quotes doubled) when it holds , " CR or LF; a
 * null column is an empty field, an empty text "".
 */
#define _POSIX_C_SOURCE 200809L
#include <tidemark/store.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct csv_sink {
    const tm_host_api *host;
    const tm_sink_config *config; /* lives until close */
    char markers[1100], journal[1100], lock[1100];
} csv_sink;

static tm_status csv_open(const tm_host_api *host, const tm_sink_config *config,
                          void **sink, tm_error *err) {
    static const char *const known[] = {"path"};
    const char *dir = NULL;
    if (host->settings_check_keys(config->settings, known, 1, err) != 0 ||
        host->setting_string(config->settings, "path", &dir, err) < 0)
        return TM_INVALID;
    if (!dir || access(dir, W_OK) != 0) {
        host->set_error(err, "setting \"path\": %s",
                        dir ? "not a writable directory"
                            : "required: the directory of the CSV file");
        return TM_INVALID;
    }
    if (strchr(config->connector, '/') || strlen(dir) > 800 ||
        strlen(config->connector) > 200) {
        host->set_error(err, "setting \"path\" or the connector name is too "
                             "long, or the name is not a plain file name");
        return TM_INVALID;
    }
    csv_sink *s = calloc(1, sizeof *s);
    if (!s) {
        host->set_error(err, "out of memory");
        return TM_FATAL;
    }
    s->host = host;
    s->config = config;
    snprintf(s->markers, sizeof s->markers, "%s/%s.markers", dir,
             config->connector);
    snprintf(s->journal, sizeof s->journal, "%s/%s.csv", dir,
             config->connector);
    snprintf(s->lock, sizeof s->lock, "%s/%s.lock", dir, config->connector);
    *sink = s;
    return TM_OK;
}

static void csv_close(void *sink) {
    free(sink);
}

static tm_status csv_claim(void *sink, tm_marker *markers, size_t n,
                           uint32_t flags, tm_error *err) {
    csv_sink *s = sink;
    tms_markers ms;
    int lock = tms_lock(s->host, s->lock, err);
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

static tm_status csv_read_markers(void *sink, tm_marker *markers, size_t n,
                                  tm_error *err) {
    csv_sink *s = sink;
    tms_markers ms;
    tm_status rc = tms_load(s->host, s->markers, &ms, err); /* no lock */
    for (size_t i = 0; rc == TM_OK && i < n; i++) {
        tm_marker *m = TM_ELEM(tm_marker, markers, i);
        tms_fill(m, tms_find(&ms, m->topic, m->partition));
    }
    tms_markers_free(&ms);
    return rc;
}

/* One CSV field, quoted only when it must be. */
static void put_field(FILE *f, const char *p, size_t len) {
    int quote = len == 0 || memchr(p, ',', len) || memchr(p, '"', len) ||
                memchr(p, '\n', len) || memchr(p, '\r', len);
    fputc(',', f);
    if (quote)
        fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '"')
            fputc('"', f);
        fputc(p[i], f);
    }
    if (quote)
        fputc('"', f);
}

static void put_value(FILE *f, const tm_column *c, const tm_value *v) {
    if (v->is_null)
        fputc(',', f);
    else if (c->type == TM_TYPE_FLOAT)
        fprintf(f, ",%.17g", v->v.f);
    else if (c->type == TM_TYPE_TEXT || c->type == TM_TYPE_JSON ||
             c->type == TM_TYPE_BYTES)
        put_field(f, v->v.s.ptr ? v->v.s.ptr : "", v->v.s.len);
    else
        fprintf(f, ",%" PRId64, v->v.i);
}

/* Appends the batch's lines to the journal and advances STORED. */
static tm_status write_effects(csv_sink *s, const tm_batch *b,
                               tm_marker *stored, tms_journal *j,
                               tm_error *err) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        s->host->set_error(err, "batch %s: out of memory", b->batch_id);
        return TM_FATAL;
    }
    for (size_t i = 0; i < b->nranges; i++) {
        const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
        uint64_t rows = 0, dead = 0;
        for (size_t k = 0; k < b->nrecords; k++) {
            const tm_record *r = TM_CELEM(tm_record, b->records, k);
            if (r->range != i)
                continue;
            fputc('r', f);
            put_field(f, g->topic, strlen(g->topic));
            fprintf(f, ",%" PRId32 ",%" PRId64 ",%" PRId64, g->partition,
                    r->offset, r->timestamp_ms);
            for (size_t c = 0; c < s->config->ncolumns; c++)
                put_value(f, TM_CELEM(tm_column, s->config->columns, c),
                          TM_CELEM(tm_value, r->values, c));
            fputc('\n', f);
            rows++;
        }
        for (size_t k = 0; k < b->ndead_letters; k++) {
            const tm_dead_letter *d =
                TM_CELEM(tm_dead_letter, b->dead_letters, k);
            if (d->range != i)
                continue;
            const char *detail = d->detail ? d->detail : "";
            fputc('d', f);
            put_field(f, g->topic, strlen(g->topic));
            fprintf(f, ",%" PRId32 ",%" PRId64 ",%s", g->partition, d->offset,
                    tm_dl_reason_name(d->reason));
            put_field(f, detail, strlen(detail));
            fputc('\n', f);
            dead++;
        }
        s->host->marker_advance(&stored[i], b, i, rows, dead, 0);
    }
    int bad = ferror(f);
    tm_status rc = TM_OK;
    if (fclose(f) != 0 || bad) {
        s->host->set_error(err, "batch %s: out of memory", b->batch_id);
        rc = TM_FATAL;
    }
    if (rc == TM_OK)
        rc = tms_journal_append(s->host, j, buf, len, err);
    free(buf);
    return rc;
}

static tm_status csv_commit(void *sink, const tm_batch *b, tm_error *err) {
    csv_sink *s = sink;
    tms_markers ms = {0};
    tms_journal j = {.fd = -1};
    tm_marker *stored = NULL;
    s->host->fault(TM_FAULT_BEFORE_BEGIN);
    int lock = tms_lock(s->host, s->lock, err); /* 1. lock the markers */
    if (lock < 0)
        return TM_RETRY;
    tm_status rc = tms_load(s->host, s->markers, &ms, err);
    if (rc == TM_OK)
        rc = tms_stored(s->host, &ms, b, &stored, err);
    if (rc == TM_OK) /* 2. the host's check decides */
        rc = s->host->marker_check(b, stored, err);
    if (rc == TM_OK) /* cuts what a dead commit appended */
        rc = tms_journal_open(s->host, s->journal, ms.committed, &j, err);
    if (rc == TM_OK) /* 3. effects, durable before they count */
        rc = write_effects(s, b, stored, &j, err);
    if (rc == TM_OK)
        rc = tms_journal_sync(s->host, &j, err);
    if (rc == TM_OK) { /* 4. markers and the new length: the commit */
        s->host->fault(TM_FAULT_AFTER_EFFECTS);
        tms_update(&ms, b, stored);
        ms.committed = j.len;
        rc = tms_save(s->host, s->markers, &ms, 1, err);
    }
    if (rc == TM_OK)
        s->host->fault(TM_FAULT_AFTER_COMMIT);
    tms_journal_close(&j);
    free(stored);
    tms_markers_free(&ms);
    close(lock);
    return rc;
}

/* The next CSV field of *p into out (unquoted); -1 at the end of line. */
static int next_field(const char **p, char *out, size_t size) {
    const char *q = *p;
    size_t n = 0;
    int quoted = *q == '"';
    if (*q == '\n' || !*q)
        return -1;
    for (q += quoted; *q && (quoted || (*q != ',' && *q != '\n')); q++) {
        if (quoted && *q == '"' && q[1] != '"') {
            quoted = 0;
            continue;
        }
        q += quoted && *q == '"'; /* a doubled quote is one */
        if (n + 1 < size)
            out[n++] = *q;
    }
    out[n] = '\0';
    *p = *q == ',' ? q + 1 : q;
    return 0;
}

static tm_status csv_scan(void *sink, const char *topic, int32_t partition,
                          void *emit_ctx, tm_error *err) {
    csv_sink *s = sink;
    tms_markers ms;
    char *text = NULL;
    size_t len = 0, n = 0, lines = 0;
    tm_scan_item *items = NULL;
    tm_status rc = tms_load(s->host, s->markers, &ms, err);
#ifdef CSV_SCAN_REFUSES_VALUES /* a reader that must ask for none: verify */
    if (rc == TM_OK && TM_HOST_SCAN_WANTS_VALUES(s->host, emit_ctx)) {
        s->host->set_error(err, "scan: asked for values");
        rc = TM_FATAL;
    }
#endif
    if (rc == TM_OK) /* only the committed part: never a dead commit's */
        rc = tms_journal_read(s->host, s->journal, ms.committed, &text, &len,
                              err);
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    if (rc == TM_OK && !(items = calloc(lines + 1, sizeof *items))) {
        s->host->set_error(err, "scan: out of memory");
        rc = TM_FATAL;
    }
    for (const char *p = items ? text : "", *eol; *p; p = eol + 1) {
        char kind[4], t[TMS_TOPIC_MAX], part[16], off[24], fifth[32];
        if (!(eol = strchr(p, '\n')))
            break;
        if (next_field(&p, kind, sizeof kind) || next_field(&p, t, sizeof t) ||
            next_field(&p, part, sizeof part) ||
            next_field(&p, off, sizeof off) ||
            next_field(&p, fifth, sizeof fifth) || strcmp(t, topic) != 0 ||
            strtol(part, NULL, 10) != partition)
            continue;
        tm_scan_item *it = &items[n++];
        it->struct_size = sizeof *it;
        it->kind = kind[0] == 'd' ? TM_ITEM_DEAD_LETTER : TM_ITEM_ROW;
        it->topic = topic;
        it->partition = partition;
        it->offset = strtoll(off, NULL, 10);
        if (kind[0] == 'd')
            it->reason = tm_dl_reason_from_name(fifth);
    }
    tms_emit_sorted(s->host, items, n, emit_ctx);
    free(items);
    free(text);
    tms_markers_free(&ms);
    return rc;
}

TM_SINK_DEFINE(.name = "csv", .version = "1.0.0",
               .capabilities = TM_CAP_DEAD_LETTERS, .open = csv_open,
               .claim = csv_claim, .read_markers = csv_read_markers,
               .commit = csv_commit, .close = csv_close, .scan = csv_scan)
